"""Acceptance (issue 14): Flink jobs not written for sparkext, against an independent model.

Nexmark-style jobs (windows of every kind, Nexmark q7's window joined back to its stream,
interval joins, an updating aggregate and a keep-last dedup into primary-key sinks, a handful of
Flink string and time functions) run over a seeded workload (tests/helpers/nexmark.py: a few
hundred bids, auctions and persons over one hour, with rows on window edges, ties and sessions
across the split points). Every job must leave in its sink exactly the rows that the Flink model
(tests/helpers/flink_model.py, no sparkext code) gives:

* after one backfill over the whole input;
* after two adjacent backfills into one sink, split on a window boundary (10:30) and inside
  sessions (10:47:30);
* in stream mode: the input appended in three commits in event-time order with a restart
  (``available_now`` run) after each, then a far-later sentinel row per source so the watermark
  passes the input. Windowed and row results are final once the watermark passes them, so the
  sentinels add nothing; Flink emits an updating aggregate and a keep-last dedup without
  waiting for the watermark, so their sinks also hold the sentinels' rows. The default tier
  restarts once (two commits) for one job of each kind of state (RESTARTED: a tumbling and a
  session window, q7's window joined back to its stream, an interval join, an updating
  aggregate, a keep-last dedup) and streams every other job in one run over the loaded input;
  the stress tier restarts every job once and twice.

The sources are declared as Nexmark declares them (``TIMESTAMP(3)``, a watermark 4 s behind).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from sparkext.streaming import run_backfill, run_stream
from tests.helpers import flink_model as flink
from tests.helpers import nexmark
from tests.helpers.nexmark import BOUNDARY_SPLIT, MID_SESSION_SPLIT, Nexmark
from tests.helpers.zones import wall_clock_rows

DATA = nexmark.generate()
SENTINELS = DATA.sentinels()
WITH_SENTINELS = Nexmark(
    DATA.persons + SENTINELS.persons, DATA.auctions + SENTINELS.auctions, DATA.bids + SENTINELS.bids
)
WHOLE = ("2024-03-01 09:00:00", "2024-03-01 12:00:00")
SPLITS = {"on_window_boundary": BOUNDARY_SPLIT, "mid_session": MID_SESSION_SPLIT}
STREAM_CUTS = (nexmark.at("10:20:00"), nexmark.at("10:40:00"))
MIN = timedelta(minutes=1)
_ids = itertools.count(1)

SOURCES = {  # name: (physical DDL, columns, rows of a Nexmark)
    "bid": (nexmark.BID_DDL, nexmark.BID_COLUMNS, lambda d: d.bids),
    "auction": (nexmark.AUCTION_DDL, nexmark.AUCTION_COLUMNS, lambda d: d.auctions),
    "person": (nexmark.PERSON_DDL, nexmark.PERSON_COLUMNS, lambda d: d.persons),
}
DECLARATIONS = {  # as Nexmark's Flink DDL declares them (its generator's watermark: 4 s)
    "bid": """CREATE TABLE {bid} (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING,
      url STRING, dateTime TIMESTAMP(3), extra STRING,
      WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND);""",
    "auction": """CREATE TABLE {auction} (id BIGINT, itemName STRING, description STRING,
      initialBid BIGINT, reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3),
      seller BIGINT, category BIGINT, extra STRING,
      WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND);""",
    "person": """CREATE TABLE {person} (id BIGINT, name STRING, emailAddress STRING,
      creditCard STRING, city STRING, state STRING, dateTime TIMESTAMP(3), extra STRING,
      WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND);""",
}


@dataclass(frozen=True)
class Job:
    """A Flink job (``{sink}`` and ``{<source>}`` placeholders) and its rows by the model."""

    sources: tuple[str, ...]
    body: str
    expected: Callable[[Nexmark], list[tuple]]
    # Flink emits it without waiting for the watermark (an updating result into a PK sink)
    updating: bool = False

    def text(self, names: dict[str, str], sink: str) -> str:
        head = "\n".join(DECLARATIONS[s] for s in self.sources)
        return (head + "\n" + self.body).format(sink=sink, **names)


def rows_of(dicts, columns) -> list[tuple]:
    return flink.project(dicts, columns)


def tumble_per_auction(d: Nexmark) -> list[tuple]:
    windowed = flink.tumble(d.bids, "dateTime", 10 * MIN)
    out = flink.aggregate(
        windowed,
        ["auction", "window_start", "window_end"],
        bids=("count", None),
        volume=("sum", "price"),
        top=("max", "price"),
    )
    return rows_of(out, ["auction", "window_start", "window_end", "bids", "volume", "top"])


def hop_per_channel(d: Nexmark) -> list[tuple]:
    windowed = flink.hop(d.bids, "dateTime", 5 * MIN, 10 * MIN)
    out = flink.aggregate(
        windowed,
        ["window_start", "window_end", "channel"],
        bids=("count", None),
        volume=("sum", "price"),
    )
    return rows_of(out, ["window_start", "window_end", "channel", "bids", "volume"])


def cumulate_totals(d: Nexmark) -> list[tuple]:
    windowed = flink.cumulate(d.bids, "dateTime", 5 * MIN, 20 * MIN)
    out = flink.aggregate(
        windowed,
        ["window_start", "window_end"],
        bids=("count", None),
        volume=("sum", "price"),
        top=("max", "price"),
    )
    return rows_of(out, ["window_start", "window_end", "bids", "volume", "top"])


def sessions_per_bidder(d: Nexmark) -> list[tuple]:
    windowed = flink.session(d.bids, "dateTime", 10 * MIN, ["bidder"])
    out = flink.aggregate(
        windowed,
        ["bidder", "window_start", "window_end"],
        bids=("count", None),
        volume=("sum", "price"),
    )
    return rows_of(out, ["bidder", "window_start", "window_end", "bids", "volume"])


def q7(d: Nexmark) -> list[tuple]:
    return rows_of(flink.nexmark_q7(d.bids), ["auction", "bidder", "price", "dateTime", "extra"])


def bids_in_first_ten_minutes(d: Nexmark) -> list[tuple]:
    out = flink.interval_join(
        d.bids,
        d.auctions,
        lambda b, a: b["auction"] == a["id"],
        "dateTime",
        "dateTime",
        timedelta(0),
        10 * MIN,
        lambda b, a: {**b, "opened": a["dateTime"], "seller": a["seller"]},
    )
    return rows_of(out, ["auction", "bidder", "price", "dateTime", "opened", "seller"])


def new_sellers(d: Nexmark) -> list[tuple]:
    def pair(a, p):
        return {"auction": a["id"], "opened": a["dateTime"], "person": p["id"],
                "name": p["name"], "joined": p["dateTime"]}  # fmt: skip

    out = flink.interval_join(
        d.auctions,
        d.persons,
        lambda a, p: a["seller"] == p["id"],
        "dateTime",
        "dateTime",
        timedelta(0),
        30 * MIN,
        pair,
    )
    return rows_of(out, ["auction", "opened", "person", "name", "joined"])


def totals_per_auction(d: Nexmark) -> list[tuple]:
    out = flink.aggregate(
        d.bids,
        ["auction"],
        bids=("count", None),
        volume=("sum", "price"),
        last_bid=("max", "dateTime"),
    )
    return rows_of(out, ["auction", "bids", "volume", "last_bid"])


def last_bid_per_bidder(d: Nexmark) -> list[tuple]:
    out = flink.keep_last(d.bids, ["bidder"], "dateTime")
    return rows_of(out, ["bidder", "auction", "price", "dateTime"])


def functions(d: Nexmark) -> list[tuple]:
    return sorted(
        (
            (
                b["bidder"],
                b["dateTime"],
                b["channel"].upper(),
                len(b["url"]),
                flink.split_index(b["url"], "/", 4),
                flink.substring(b["url"], 9, 15),
                b["dateTime"].strftime("%Y-%m-%d %H:%M"),
                b["dateTime"].minute,
                b["dateTime"] + 10 * MIN,
                flink.floor_to_minute(b["dateTime"]),
                flink.regexp_extract(b["url"], "channel_id=([0-9]+)", 1),
                f"{b['channel']}#{b['auction']}",
            )
            for b in d.bids
            if b["price"] > 500
        ),
        key=flink.row_key,
    )


JOBS = {
    "tumble_count_per_auction": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
          bids BIGINT, volume BIGINT, top BIGINT) PARTITIONED BY (hours(window_start));
        INSERT INTO {sink}
        SELECT auction, window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume,
          MAX(price) AS top
        FROM TABLE(TUMBLE(TABLE {bid}, DESCRIPTOR(dateTime), INTERVAL '10' MINUTES))
        GROUP BY auction, window_start, window_end;
        """,
        tumble_per_auction,
    ),
    "hop_per_channel": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (window_start TIMESTAMP(3), window_end TIMESTAMP(3), channel STRING,
          bids BIGINT, volume BIGINT);
        INSERT INTO {sink}
        SELECT window_start, window_end, channel, COUNT(*) AS bids, SUM(price) AS volume
        FROM TABLE(HOP(TABLE {bid}, DESCRIPTOR(dateTime),
          INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end, channel;
        """,
        hop_per_channel,
    ),
    "cumulate_totals": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT,
          volume BIGINT, top BIGINT);
        INSERT INTO {sink}
        SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top
        FROM TABLE(CUMULATE(TABLE {bid}, DESCRIPTOR(dateTime),
          INTERVAL '5' MINUTES, INTERVAL '20' MINUTES))
        GROUP BY window_start, window_end;
        """,
        cumulate_totals,
    ),
    "session_per_bidder_legacy": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (bidder BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
          bids BIGINT, volume BIGINT);
        INSERT INTO {sink}
        SELECT bidder, SESSION_START(dateTime, INTERVAL '10' MINUTE) AS window_start,
          SESSION_END(dateTime, INTERVAL '10' MINUTE) AS window_end,
          COUNT(*) AS bids, SUM(price) AS volume
        FROM {bid}
        GROUP BY SESSION(dateTime, INTERVAL '10' MINUTE), bidder;
        """,
        sessions_per_bidder,
    ),
    "session_per_bidder_tvf": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (bidder BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
          bids BIGINT, volume BIGINT);
        INSERT INTO {sink}
        SELECT bidder, window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume
        FROM TABLE(SESSION(TABLE {bid} PARTITION BY bidder, DESCRIPTOR(dateTime),
          INTERVAL '10' MINUTES))
        GROUP BY bidder, window_start, window_end;
        """,
        sessions_per_bidder,
    ),
    "nexmark_q7_highest_bid": Job(  # nexmark/nexmark queries/q7.sql, sink and sources renamed
        ("bid",),
        """
        CREATE TABLE {sink} (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3),
          extra STRING);
        INSERT INTO {sink}
        SELECT B.auction, B.bidder, B.price, B.dateTime, B.extra
        from {bid} B
        JOIN (
          SELECT MAX(price) AS maxprice, window_end as dateTime
          FROM TABLE(
                  TUMBLE(TABLE {bid}, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
          GROUP BY window_start, window_end
        ) B1
        ON B.price = B1.maxprice
        WHERE B.dateTime BETWEEN B1.dateTime  - INTERVAL '10' SECOND AND B1.dateTime;
        """,
        q7,
    ),
    "interval_join_bids_in_first_ten_minutes": Job(
        ("bid", "auction"),
        """
        CREATE TABLE {sink} (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3),
          opened TIMESTAMP(3), seller BIGINT);
        INSERT INTO {sink}
        SELECT B.auction, B.bidder, B.price, B.dateTime, A.dateTime AS opened, A.seller
        FROM {bid} AS B, {auction} AS A
        WHERE B.auction = A.id
          AND B.dateTime BETWEEN A.dateTime AND A.dateTime + INTERVAL '10' MINUTE;
        """,
        bids_in_first_ten_minutes,
    ),
    "interval_join_new_sellers": Job(
        ("auction", "person"),
        """
        CREATE TABLE {sink} (auction BIGINT, dateTime TIMESTAMP(3), person BIGINT, name STRING,
          joined TIMESTAMP(3));
        INSERT INTO {sink}
        SELECT A.id AS auction, A.dateTime, P.id AS person, P.name, P.dateTime AS joined
        FROM {auction} AS A
        JOIN {person} AS P ON A.seller = P.id
          AND A.dateTime >= P.dateTime AND A.dateTime <= P.dateTime + INTERVAL '30' MINUTE;
        """,
        new_sellers,
    ),
    "updating_aggregate_into_pk_sink": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (auction BIGINT, bids BIGINT, volume BIGINT, last_bid TIMESTAMP,
          PRIMARY KEY (auction) NOT ENFORCED);
        INSERT INTO {sink}
        SELECT auction, count(*) AS bids, sum(price) AS volume, MAX(dateTime) AS last_bid
        FROM {bid} GROUP BY auction;
        """,
        totals_per_auction,
        updating=True,
    ),
    "keep_last_dedup_into_pk_sink": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (bidder BIGINT, auction BIGINT, price BIGINT, dateTime TIMESTAMP(3),
          PRIMARY KEY (bidder) NOT ENFORCED);
        INSERT INTO {sink}
        SELECT bidder, auction, price, dateTime FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY dateTime DESC) AS rn
          FROM {bid})
        WHERE rn = 1;
        """,
        last_bid_per_bidder,
        updating=True,
    ),
    "string_and_time_functions": Job(
        ("bid",),
        """
        CREATE TABLE {sink} (bidder BIGINT, dateTime TIMESTAMP(3), channel STRING, url_length INT,
          segment STRING, host STRING, minute_text STRING, minute_of_hour BIGINT,
          ten_later TIMESTAMP(3), minute_start TIMESTAMP(3), channel_id STRING, tag STRING);
        INSERT INTO {sink}
        SELECT bidder, dateTime, UPPER(channel), CHAR_LENGTH(url), SPLIT_INDEX(url, '/', 4),
          SUBSTRING(url FROM 9 FOR 15), DATE_FORMAT(dateTime, 'yyyy-MM-dd HH:mm'),
          EXTRACT(MINUTE FROM dateTime), TIMESTAMPADD(MINUTE, 10, dateTime),
          FLOOR(dateTime TO MINUTE), REGEXP_EXTRACT(url, 'channel_id=([0-9]+)', 1),
          channel || '#' || CAST(auction AS STRING)
        FROM {bid}
        WHERE price > 500;
        """,
        functions,
    ),
}


def append(spark, table: str, source: str, dicts) -> None:
    """Append dict rows; values travel as text and are CAST in the session zone (no OS zone)."""
    ddl, columns, _ = SOURCES[source]
    types = [c.split()[1] for c in ddl.split(", ")]
    text = [tuple(None if r[c] is None else str(r[c]) for c in columns) for r in dicts]
    frame = spark.createDataFrame(text, ", ".join(f"`{c}` STRING" for c in columns))
    frame.selectExpr(
        *[f"CAST(`{c}` AS {ty}) AS `{c}`" for c, ty in zip(columns, types, strict=True)]
    ).writeTo(table).append()


def create_sources(spark, sources) -> dict[str, str]:
    suffix = next(_ids)
    names = {s: f"lake.test.nx_{s}_{suffix}" for s in sources}
    for s in sources:
        spark.sql(f"CREATE TABLE {names[s]} ({SOURCES[s][0]}) USING iceberg")
    return names


def sink_rows(spark, sink: str) -> list[tuple]:
    return sorted(wall_clock_rows(spark.table(sink)), key=flink.row_key)


def new_sink() -> str:
    return f"lake.test.nx_out_{next(_ids)}"


@pytest.fixture(scope="module")
def loaded(spark) -> dict[str, str]:
    """bid, auction and person tables holding the whole workload and the sentinels."""
    names = create_sources(spark, SOURCES)
    for source, (_, _, rows) in SOURCES.items():
        append(spark, names[source], source, rows(DATA))
        append(spark, names[source], source, rows(SENTINELS))
    return names


def test_the_workload_has_its_edges():
    """The named edge rows are there, and the model sees them as the tests need."""
    sessions = {(r[0], r[1]): r for r in sessions_per_bidder(DATA)}
    t = nexmark.at
    assert sessions[(901, t("10:00:00"))][2:4] == (t("10:20:00"), 2)  # exactly a gap apart
    assert (901, t("10:20:00.001")) in sessions  # a millisecond more: a new session
    assert sessions[(902, t("10:44:00"))][2:4] == (t("10:56:00"), 2)  # across MID_SESSION_SPLIT
    assert sessions[(904, t("10:25:00"))][2] == t("10:39:00")  # across BOUNDARY_SPLIT
    q7_rows = q7(DATA)
    for bidder in (47, 50, 52):  # on a window end, and its price that window's highest: twice
        assert q7_rows.count(next(r for r in q7_rows if r[1] == bidder)) == 2
    assert {r[1] for r in q7_rows} >= {45, 46, 49, 51}
    assert {r[1] for r in bids_in_first_ten_minutes(DATA)} >= {907, 908}
    assert not {r[1] for r in bids_in_first_ten_minutes(DATA)} & {909, 910}
    assert any(r[4] is None for r in functions(DATA))  # SPLIT_INDEX past the end


@pytest.mark.parametrize("name", JOBS)
def test_one_backfill(spark, loaded, name):
    job, sink = JOBS[name], new_sink()
    run_backfill(spark, job.text(loaded, sink), *WHOLE)
    assert sink_rows(spark, sink) == job.expected(DATA)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", JOBS)
def test_two_adjacent_backfills(spark, loaded, name, split):
    job, sink = JOBS[name], new_sink()
    text = job.text(loaded, sink)
    run_backfill(spark, text, WHOLE[0], SPLITS[split])
    run_backfill(spark, text, SPLITS[split], WHOLE[1])
    assert sink_rows(spark, sink) == job.expected(DATA)


# One job of each kind of state the stream carries across a restart; the default tier restarts
# these (the others' restarts run in the stress tier, and their streams in one run by default).
RESTARTED = (
    "tumble_count_per_auction",  # window aggregates
    "session_per_bidder_tvf",  # sessions open across the cut (10:20), merged after it
    "nexmark_q7_highest_bid",  # a window joined back to its stream
    "interval_join_bids_in_first_ten_minutes",  # a two-source interval join
    "updating_aggregate_into_pk_sink",  # an updating aggregate
    "keep_last_dedup_into_pk_sink",  # a keep-last dedup
)
STREAM_CASES = [
    *(pytest.param(n, (), id=f"{n}-one-run") for n in JOBS if n not in RESTARTED),
    *(
        pytest.param(
            n,
            STREAM_CUTS[:1],
            id=f"{n}-one-restart",
            marks=() if n in RESTARTED else pytest.mark.stress,
        )
        for n in JOBS
    ),
    *(pytest.param(n, STREAM_CUTS, id=f"{n}-two-restarts", marks=pytest.mark.stress) for n in JOBS),
]


def finish(run) -> None:
    """Wait for an ``available_now`` run, polling it often (the default polls twice a second)."""
    run.wait(poll_seconds=0.02)


@pytest.mark.parametrize(("name", "cuts"), STREAM_CASES)
def test_stream(spark, loaded, tmp_path, name, cuts):
    """``one-restart``: the input appended in two commits (cut at 10:20), ``two-restarts``: in
    three; a restart after each, then the sentinels. ``one-run``: one run over the loaded tables
    (the input, then the sentinels, in two commits)."""
    job, sink = JOBS[name], new_sink()
    checkpoint = str(tmp_path / "ck")
    if not cuts:
        finish(run_stream(spark, job.text(loaded, sink), checkpoint, available_now=True))
    else:
        names = create_sources(spark, job.sources)
        text = job.text(names, sink)
        chunks = {s: nexmark.split(SOURCES[s][2](DATA), "dateTime", *cuts) for s in job.sources}
        for commit in range(len(cuts) + 1):
            for s in job.sources:
                append(spark, names[s], s, chunks[s][commit])
            finish(run_stream(spark, text, checkpoint, available_now=True))
        for s in job.sources:
            append(spark, names[s], s, SOURCES[s][2](SENTINELS))
        finish(run_stream(spark, text, checkpoint, available_now=True))
    rows = sink_rows(spark, sink)
    if not job.updating:
        assert rows == job.expected(DATA)
    else:  # every input row counts at once, the sentinels' too: no watermark holds them back
        assert rows == job.expected(WITH_SENTINELS), "Flink emits updates without a watermark"


REPRO_JOBS = {
    "tvf": """
        INSERT INTO {sink}
        SELECT bidder, COUNT(*) AS bids, window_start, window_end
        FROM TABLE(SESSION(TABLE {bid} PARTITION BY bidder, DESCRIPTOR(dateTime),
          INTERVAL '10' MINUTES))
        GROUP BY bidder, window_start, window_end;
        """,
    "legacy": """
        INSERT INTO {sink}
        SELECT bidder, COUNT(*) AS bids, SESSION_START(dateTime, INTERVAL '10' MINUTE),
          SESSION_END(dateTime, INTERVAL '10' MINUTE)
        FROM {bid} GROUP BY SESSION(dateTime, INTERVAL '10' MINUTE), bidder;
        """,
}


@pytest.mark.parametrize("form", REPRO_JOBS)
def test_issue_repro_session_across_adjacent_backfills(spark, form):
    """Bidder 7 bids at 20:00 and 20:06 (gap 10 min); backfills [19:00, 20:12) then
    [20:12, 21:00) into one sink hold one session (7, 2 bids, 20:00, 20:16)."""
    names = create_sources(spark, ["bid"])
    bids = [
        {**DATA.bids[0], "bidder": 7, "dateTime": datetime(2024, 3, 1, 20, 0)},
        {**DATA.bids[1], "bidder": 7, "dateTime": datetime(2024, 3, 1, 20, 6)},
    ]
    append(spark, names["bid"], "bid", bids)
    sink = new_sink()
    text = (
        DECLARATIONS["bid"]
        + "CREATE TABLE {sink} (bidder BIGINT, bids BIGINT, window_start TIMESTAMP(3), "
        + "window_end TIMESTAMP(3));"
        + REPRO_JOBS[form]
    ).format(sink=sink, **names)
    run_backfill(spark, text, "2024-03-01 19:00:00", "2024-03-01 20:12:00")
    run_backfill(spark, text, "2024-03-01 20:12:00", "2024-03-01 21:00:00")
    model = flink.aggregate(
        flink.session(bids, "dateTime", 10 * MIN, ["bidder"]),
        ["bidder", "window_start", "window_end"],
        bids=("count", None),
    )
    expected = [(7, 2, datetime(2024, 3, 1, 20, 0), datetime(2024, 3, 1, 20, 16))]
    assert rows_of(model, ["bidder", "bids", "window_start", "window_end"]) == expected
    assert sink_rows(spark, sink) == expected


def test_interval_join_writing_the_probe_time_under_another_name(spark, loaded):
    """A Flink user renames columns freely: ``B.dateTime AS bid_time`` is the probe side's event
    time, written into the sink column bid_time."""
    sink = new_sink()
    text = (
        DECLARATIONS["bid"]
        + DECLARATIONS["auction"]
        + """
        CREATE TABLE {sink} (auction BIGINT, bidder BIGINT, price BIGINT, bid_time TIMESTAMP(3),
          opened TIMESTAMP(3), seller BIGINT);
        INSERT INTO {sink}
        SELECT B.auction, B.bidder, B.price, B.dateTime AS bid_time, A.dateTime AS opened, A.seller
        FROM {bid} AS B, {auction} AS A
        WHERE B.auction = A.id
          AND B.dateTime BETWEEN A.dateTime AND A.dateTime + INTERVAL '10' MINUTE;
        """
    ).format(sink=sink, **loaded)
    run_backfill(spark, text, *WHOLE)
    assert sink_rows(spark, sink) == bids_in_first_ten_minutes(DATA)
