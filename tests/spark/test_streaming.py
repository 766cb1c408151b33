"""Stream mode and backfill of the same job text, on small hand-checked inputs.

Each construct: the input goes to its Iceberg sources in two commits; the stream runs (available
now, restarted from its checkpoint) after each commit; a last commit holds one far-later
"sentinel" row per source so the watermark passes every input row. Then the backfill of the same
text runs over a range that covers the input, and both sinks must hold exactly the expected rows
(worked out by hand from Flink's documented semantics, the Bid table of its window TVF docs).
"""

from __future__ import annotations

import gc
import itertools
import re
import time
from datetime import datetime

import pytest

from sparkext.streaming import run_backfill, run_stream
from sparkext.streaming.job import StreamingSqlError
from tests.helpers.py4j_objects import bound_objects, java_objects_held
from tests.helpers.zones import host_zone, session_zone, wall_clock_rows

# unique across copies of this module: pytest imports it, and other test modules import its
# helpers (both_modes) under another module name, each copy with its own counter
_ids = itertools.count(time.time_ns() // 1000 % 10**9 * 1000)
DAY = "2020-04-15"
SENTINEL = "2020-04-16 12:00:00"

BIDS_DDL = "bidtime TIMESTAMP, price DOUBLE, item STRING, supplier_id STRING"
BIDS_1 = [  # Flink's Bid table, first commit
    (f"{DAY} 08:05:00", 4.0, "C", "supplier1"),
    (f"{DAY} 08:07:00", 2.0, "A", "supplier1"),
    (f"{DAY} 08:09:00", 5.0, "D", "supplier2"),
]
BIDS_2 = [
    (f"{DAY} 08:11:00", 3.0, "B", "supplier2"),
    (f"{DAY} 08:13:00", 1.0, "E", "supplier1"),
    (f"{DAY} 08:17:00", 6.0, "F", "supplier2"),
]
BIDS_SENTINEL = [(SENTINEL, 0.0, "Z", "supplier9")]


def t(text: str) -> datetime:
    return datetime.fromisoformat(text if len(text) > 8 else f"{DAY} {text}")


def append(spark, table: str, ddl: str, rows) -> None:
    columns = [c.split()[0] for c in ddl.split(", ")]
    types = [c.split()[1] for c in ddl.split(", ")]
    frame = spark.createDataFrame(rows, ", ".join(f"{c} STRING" for c in columns))
    frame.selectExpr(
        *[f"CAST({c} AS {ty}) AS {c}" for c, ty in zip(columns, types, strict=True)]
    ).writeTo(table).append()


def sorted_rows(spark, table: str) -> list[tuple]:
    """The table's rows, timestamps as session-zone wall clocks (whatever the host's zone)."""
    return wall_clock_rows(spark.table(table))


def both_modes(spark, tmp_path, job: str, sources: dict, commits: list[dict], start: str, end: str):
    """Run ``job`` (with ``{sink}`` and ``{<source>}`` placeholders) both ways; return (stream, batch)."""
    suffix = next(_ids)
    names = {key: f"lake.test.{key}_{suffix}" for key in sources}
    for key, ddl in sources.items():
        spark.sql(f"CREATE TABLE {names[key]} ({ddl}) USING iceberg")
    stream_sink, batch_sink = f"lake.test.out_s{suffix}", f"lake.test.out_b{suffix}"
    checkpoint = str(tmp_path / f"ck{suffix}")
    for commit in commits:
        for key, rows in commit.items():
            append(spark, names[key], sources[key], rows)
        text = job.format(sink=stream_sink, **names)
        finish(run_stream(spark, text, checkpoint, available_now=True))
    run_backfill(spark, job.format(sink=batch_sink, **names), start, end)
    return sorted_rows(spark, stream_sink), sorted_rows(spark, batch_sink)


def finish(run) -> None:
    """Wait for an ``available_now`` run, polling it often (the default polls twice a second)."""
    run.wait(poll_seconds=0.02)


BIDS_JOB_HEAD = """
CREATE TABLE {bids} (bidtime TIMESTAMP, price DOUBLE, item STRING, supplier_id STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE);
"""


def shaped(commits: list[dict], sentinels_alone: bool) -> list[dict]:
    """``commits`` as given (the last holds the sentinels), or with the sentinels appended in
    the commit before them: the same rows in one commit and one restart fewer."""
    if sentinels_alone:
        return commits
    *head, before, sentinels = commits
    keys = [*before, *(k for k in sentinels if k not in before)]
    return [*head, {k: [*before.get(k, []), *sentinels.get(k, [])] for k in keys}]


# The default tier appends each case's sentinels with its last input rows (the stream still
# restarts with rows in its state: windows, sessions and joins open across the commits); the
# stress tier also appends them in a commit of their own, restarting once more.
SENTINEL_COMMIT = pytest.mark.parametrize(
    "sentinels_alone",
    [
        pytest.param(False, id="two-commits"),
        pytest.param(True, id="three-commits", marks=pytest.mark.stress),
    ],
)


def bids_case(
    spark,
    tmp_path,
    body: str,
    sentinels_alone: bool,
    start="2020-04-15 00:00:00",
    end="2020-04-15 12:00:00",
):
    commits = shaped([{"bids": BIDS_1}, {"bids": BIDS_2}, {"bids": BIDS_SENTINEL}], sentinels_alone)
    return both_modes(
        spark, tmp_path, BIDS_JOB_HEAD + body, {"bids": BIDS_DDL}, commits, start, end
    )


TUMBLE_TOTALS = """
CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE)
  PARTITIONED BY (days(window_start));
INSERT INTO {sink} SELECT window_start, window_end, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end;
"""
# worked by hand from the Bid table: 08:00-08:10 holds 4 + 2 + 5, 08:10-08:20 holds 3 + 1 + 6
TUMBLE_TOTALS_ROWS = [(t("08:00"), t("08:10"), 11.0), (t("08:10"), t("08:20"), 10.0)]


@SENTINEL_COMMIT
def test_tumble(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        TUMBLE_TOTALS,
        sentinels_alone,
    )
    assert batch == TUMBLE_TOTALS_ROWS
    assert stream == TUMBLE_TOTALS_ROWS


@SENTINEL_COMMIT
def test_hop(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
        INSERT INTO {sink} SELECT window_start, window_end, SUM(price)
        FROM TABLE(HOP(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end;
        """,
        sentinels_alone,
    )
    expected = [
        (t("08:00"), t("08:10"), 11.0),
        (t("08:05"), t("08:15"), 15.0),
        (t("08:10"), t("08:20"), 10.0),
        (t("08:15"), t("08:25"), 6.0),
    ]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_cumulate(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
        INSERT INTO {sink} SELECT window_start, window_end, SUM(price)
        FROM TABLE(CUMULATE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end;
        """,
        sentinels_alone,
    )
    expected = [
        (t("08:00"), t("08:06"), 4.0),
        (t("08:00"), t("08:08"), 6.0),
        (t("08:00"), t("08:10"), 11.0),
        (t("08:10"), t("08:12"), 3.0),
        (t("08:10"), t("08:14"), 4.0),
        (t("08:10"), t("08:16"), 4.0),
        (t("08:10"), t("08:18"), 10.0),
        (t("08:10"), t("08:20"), 10.0),
    ]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_session(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (supplier_id STRING, window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
        INSERT INTO {sink} SELECT supplier_id, window_start, window_end, SUM(price)
        FROM TABLE(SESSION(TABLE {bids} PARTITION BY supplier_id, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
        GROUP BY window_start, window_end, supplier_id;
        """,
        sentinels_alone,
    )
    expected = [
        ("supplier1", t("08:05"), t("08:12"), 6.0),
        ("supplier1", t("08:13"), t("08:18"), 1.0),
        ("supplier2", t("08:09"), t("08:16"), 8.0),
        ("supplier2", t("08:17"), t("08:22"), 6.0),
    ]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_window_top_n(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, supplier_id STRING, price DOUBLE, cnt BIGINT);
        INSERT INTO {sink} SELECT window_start, window_end, supplier_id, price, cnt FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
          FROM (SELECT window_start, window_end, supplier_id, SUM(price) AS price, COUNT(*) AS cnt
                FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
                GROUP BY window_start, window_end, supplier_id))
        WHERE rownum <= 1;
        """,
        sentinels_alone,
    )
    expected = [
        (t("08:00"), t("08:10"), "supplier1", 6.0, 2),
        (t("08:10"), t("08:20"), "supplier2", 9.0, 2),
    ]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_window_dedup_keeps_last_row_per_window(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, bidtime TIMESTAMP, item STRING);
        INSERT INTO {sink} SELECT window_start, window_end, bidtime, item FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bidtime DESC) AS rownum
          FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)))
        WHERE rownum <= 1;
        """,
        sentinels_alone,
    )
    expected = [
        (t("08:00"), t("08:10"), t("08:09"), "D"),
        (t("08:10"), t("08:20"), t("08:17"), "F"),
    ]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_udfs_python_and_pandas(spark, tmp_path, sentinels_alone):
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE FUNCTION label AS 'tests.helpers.udfs.label';
        CREATE FUNCTION with_tax AS 'tests.helpers.udfs.with_tax';
        CREATE TABLE {sink} (bidtime TIMESTAMP, tag STRING, gross DOUBLE) PARTITIONED BY (hours(bidtime));
        INSERT INTO {sink} SELECT bidtime, label(item) AS tag, with_tax(price) AS gross
        FROM {bids} /*+ OPTIONS('streaming'='true') */ WHERE price > 2;
        """,
        sentinels_alone,
    )
    expected = [
        (t("08:05"), "<C>", 4.4),
        (t("08:09"), "<D>", 5.5),
        (t("08:11"), "<B>", 3.3),
        (t("08:17"), "<F>", 6.6),
    ]
    assert batch == expected
    assert stream == expected


CLICKS_DDL = "user_id BIGINT, url STRING, ts TIMESTAMP"


@SENTINEL_COMMIT
def test_global_dedup_with_state_ttl(spark, tmp_path, sentinels_alone):
    job = """
    SET 'table.exec.state.ttl' = '1 h';
    CREATE TABLE {clicks} (user_id BIGINT, url STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECONDS);
    CREATE TABLE {sink} (user_id BIGINT, url STRING, ts TIMESTAMP);
    INSERT INTO {sink} SELECT user_id, url, ts FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM {clicks}) WHERE rn = 1;
    """
    commits = [
        {
            "clicks": [
                (1, "a", f"{DAY} 10:00:00"),
                (1, "b", f"{DAY} 10:05:00"),
                (2, "c", f"{DAY} 10:07:00"),
            ]
        },
        {"clicks": [(1, "d", f"{DAY} 11:30:00"), (2, "e", f"{DAY} 11:00:00")]},
        {"clicks": [(9, "z", SENTINEL)]},
    ]
    commits = shaped(commits, sentinels_alone)
    stream, batch = both_modes(
        spark, tmp_path, job, {"clicks": CLICKS_DDL}, commits, f"{DAY} 00:00:00", f"{DAY} 23:00:00"
    )
    # user 1: 10:00 first; 10:05 within the hour after it; 11:30 more than 1 h after 10:05.
    # user 2: 10:07 first; 11:00 within the hour.
    expected = [(1, "a", t("10:00")), (1, "d", t("11:30")), (2, "c", t("10:07"))]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_interval_join(spark, tmp_path, sentinels_alone):
    job = """
    CREATE TABLE {orders} (id BIGINT, order_time TIMESTAMP, WATERMARK FOR order_time AS order_time);
    CREATE TABLE {shipments} (order_id BIGINT, ship_time TIMESTAMP, WATERMARK FOR ship_time AS ship_time);
    CREATE TABLE {sink} (id BIGINT, order_time TIMESTAMP, ship_time TIMESTAMP);
    INSERT INTO {sink} SELECT o.id, o.order_time, s.ship_time FROM {orders} AS o, {shipments} AS s
    WHERE o.id = s.order_id AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time;
    """
    commits = [
        {
            "orders": [(1, f"{DAY} 10:00:00"), (2, f"{DAY} 10:30:00")],
            "shipments": [(1, f"{DAY} 12:00:00")],
        },
        {
            "orders": [(3, f"{DAY} 11:00:00")],
            "shipments": [(3, f"{DAY} 11:30:00"), (2, f"{DAY} 15:00:00")],
        },
        {"orders": [(999, SENTINEL)], "shipments": [(998, SENTINEL)]},
    ]
    stream, batch = both_modes(
        spark,
        tmp_path,
        job,
        {
            "orders": "id BIGINT, order_time TIMESTAMP",
            "shipments": "order_id BIGINT, ship_time TIMESTAMP",
        },
        shaped(commits, sentinels_alone),
        f"{DAY} 00:00:00",
        f"{DAY} 23:00:00",
    )
    # order 2 shipped 4.5 h later: outside the bound.
    expected = [(1, t("10:00"), t("12:00")), (3, t("11:00"), t("11:30"))]
    assert batch == expected
    assert stream == expected


@SENTINEL_COMMIT
def test_event_time_temporal_join(spark, tmp_path, sentinels_alone):
    job = """
    CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, currency STRING, amount DOUBLE,
      WATERMARK FOR order_time AS order_time - INTERVAL '5' SECONDS);
    CREATE TABLE {rates} (currency STRING, rate DOUBLE, update_time TIMESTAMP,
      WATERMARK FOR update_time AS update_time, PRIMARY KEY (currency) NOT ENFORCED);
    CREATE TABLE {sink} (order_id BIGINT, order_time TIMESTAMP, converted DOUBLE);
    INSERT INTO {sink} SELECT o.order_id, o.order_time, o.amount * r.rate AS converted
    FROM {orders} AS o LEFT JOIN {rates} FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
    """
    rates = [
        ("EUR", 1.1, f"{DAY} 09:00:00"),
        ("EUR", 1.2, f"{DAY} 10:15:00"),
        ("JPY", 0.009, f"{DAY} 09:00:00"),
    ]
    commits = [
        {
            "rates": rates,
            "orders": [(1, f"{DAY} 10:00:00", "EUR", 10.0), (2, f"{DAY} 10:30:00", "EUR", 10.0)],
        },
        {"orders": [(3, f"{DAY} 10:45:00", "JPY", 1000.0), (4, f"{DAY} 10:50:00", "USD", 5.0)]},
        {"orders": [(999, SENTINEL, "EUR", 0.0)]},
    ]
    stream, batch = both_modes(
        spark,
        tmp_path,
        job,
        {
            "orders": "order_id BIGINT, order_time TIMESTAMP, currency STRING, amount DOUBLE",
            "rates": "currency STRING, rate DOUBLE, update_time TIMESTAMP",
        },
        shaped(commits, sentinels_alone),
        f"{DAY} 00:00:00",
        f"{DAY} 23:00:00",
    )
    expected = [
        (1, t("10:00"), pytest.approx(11.0)),
        (2, t("10:30"), pytest.approx(12.0)),
        (3, t("10:45"), pytest.approx(9.0)),
        (4, t("10:50"), None),
    ]
    assert batch == expected
    assert stream == expected


def test_backfill_twice_changes_nothing_and_partial_range_keeps_the_rest(spark, tmp_path):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.tot_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2)
    job = (
        BIDS_JOB_HEAD
        + """
    CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE) PARTITIONED BY (days(window_start));
    INSERT INTO {sink} SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
    GROUP BY window_start, window_end;
    """
    ).format(bids=bids, sink=sink)
    run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    first = sorted_rows(spark, sink)
    snapshots = spark.table(f"{sink}.snapshots").count()
    run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert sorted_rows(spark, sink) == first
    assert spark.table(f"{sink}.snapshots").count() == snapshots + 1  # one atomic commit per run
    # A partial range inside the day partition: the windows outside it stay as they were.
    append(spark, bids, BIDS_DDL, [(f"{DAY} 08:12:00", 100.0, "X", "supplier1")])
    run_backfill(spark, job, f"{DAY} 08:10:00", f"{DAY} 08:15:00")
    after = dict(((r[0], r[1]), r[2]) for r in sorted_rows(spark, sink))
    assert after[(t("08:10"), t("08:15"))] == 104.0
    assert after[(t("08:05"), t("08:10"))] == 11.0 and after[(t("08:15"), t("08:20"))] == 6.0
    assert len(after) == len(first)


def test_proctime_lookup_join_reads_the_dimension_as_of_the_range_end(spark, tmp_path):
    suffix = next(_ids)
    bids, dim, sink = (
        f"lake.test.bids_{suffix}",
        f"lake.test.dim_{suffix}",
        f"lake.test.look_{suffix}",
    )
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    spark.sql(f"CREATE TABLE {dim} (supplier_id STRING, region STRING) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1)
    append(
        spark,
        dim,
        "supplier_id STRING, region STRING",
        [("supplier1", "north"), ("supplier2", "south")],
    )
    first_commit = spark.sql(  # a session-zone wall clock, as lookup_as_of takes it
        f"SELECT date_format(max(committed_at), 'yyyy-MM-dd HH:mm:ss.SSS') FROM {dim}.snapshots"
    ).first()[0]
    spark.sql(f"UPDATE {dim} SET region = 'east' WHERE supplier_id = 'supplier1'")
    job = f"""
    CREATE TABLE {bids} (bidtime TIMESTAMP, price DOUBLE, item STRING, supplier_id STRING, proc AS PROCTIME(),
      WATERMARK FOR bidtime AS bidtime);
    CREATE TABLE {sink} (bidtime TIMESTAMP, item STRING, region STRING);
    INSERT INTO {sink} SELECT b.bidtime, b.item, d.region FROM {bids} AS b
    JOIN {dim} FOR SYSTEM_TIME AS OF b.proc AS d ON b.supplier_id = d.supplier_id;
    """
    plan, _ = run_backfill(
        spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00", lookup_as_of=first_commit
    )
    assert "VERSION AS OF" in plan.script()
    assert [r[2] for r in sorted_rows(spark, sink)] == ["north", "north", "south"]
    run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00", lookup_as_of="latest")
    assert [r[2] for r in sorted_rows(spark, sink)] == ["east", "east", "south"]


def test_dry_run_prints_sql_and_writes_nothing(spark):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.dry_{suffix}"
    job = (
        BIDS_JOB_HEAD
        + """
    CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
    INSERT INTO {sink} SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
    GROUP BY window_start, window_end;
    """
    ).format(bids=bids, sink=sink)
    plan, results = run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00", dry_run=True)
    script = plan.script()
    assert results == [] and "REPLACE WHERE" in script and "WINDOW(bidtime, '5 minutes')" in script
    assert not spark.catalog.tableExists(sink) and not spark.catalog.tableExists(bids)


def test_stream_replays_nothing_twice_after_a_crash_between_commit_and_checkpoint(spark, tmp_path):
    """The sink commit records how far the stream emitted; a replayed micro-batch appends nothing."""
    import shutil

    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.crash_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    job = (
        BIDS_JOB_HEAD
        + """
    CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
    INSERT INTO {sink} SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """
    ).format(bids=bids, sink=sink)
    checkpoint = tmp_path / "ck"
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2 + BIDS_SENTINEL)
    finish(run_stream(spark, job, str(checkpoint), available_now=True))
    first = sorted_rows(spark, sink)
    assert len(first) == 2
    # Lose Spark's record of the processed offsets (as if it crashed before writing them).
    shutil.rmtree(checkpoint / "offsets")
    finish(run_stream(spark, job, str(checkpoint), available_now=True))
    assert sorted_rows(spark, sink) == first


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "INSERT INTO {sink} SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item ORDER BY bidtime DESC) AS rn FROM {bids}) WHERE rn = 1;",
            "keeping the last row per key",
        ),
        (
            "INSERT INTO {sink} SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(price), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end;",
            "DESCRIPTOR(price) differs from the event-time column bidtime",
        ),
    ],
)
def test_bad_jobs_fail_with_one_sentence_and_write_nothing(spark, body, message):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.bad_{suffix}"
    job = (BIDS_JOB_HEAD + body).format(bids=bids, sink=sink)
    with pytest.raises(StreamingSqlError, match=re.escape(message)):
        run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert not spark.catalog.tableExists(sink) and not spark.catalog.tableExists(bids)
    with pytest.raises(StreamingSqlError, match="is not before end"):
        run_backfill(spark, job, f"{DAY} 23:00:00", f"{DAY} 00:00:00")


def _cdc_event(op: str, key: int, pos: int, at: str, qty: int = 1) -> dict:
    from datetime import timezone

    ms = int(datetime.fromisoformat(f"{DAY} {at}").replace(tzinfo=timezone.utc).timestamp() * 1000)
    image = {"id": key, "name": "n", "qty": qty, "price": 1.0}
    source = {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": ms, "db": "shop",
              "table": "customers", "connector": "mysql"}  # fmt: skip
    return {
        "before": None if op == "c" else image,
        "after": None if op == "d" else image,
        "source": source,
        "op": op,
        "ts_ms": ms,
    }


@SENTINEL_COMMIT
def test_event_time_temporal_join_on_an_ingest_cdc_dimension(spark, tmp_path, sentinels_alone):
    """Versions come from the CDC table itself: its state at the range start + logged changes."""
    import json

    import sparkext

    suffix = next(_ids)
    customers = f"lake.test.customers_{suffix}"
    landing, cdc_checkpoint = tmp_path / "landing", tmp_path / "cdc"
    landing.mkdir()
    batches = [
        [_cdc_event("c", 1, 10, "10:00:00", 1), _cdc_event("c", 2, 15, "10:00:00", 5),
         _cdc_event("u", 1, 30, "10:30:00", 2)],
        # a late update of key 1 (binlog position 20, 10:20) and a delete of key 2
        [_cdc_event("u", 1, 20, "10:20:00", 3), _cdc_event("d", 2, 40, "10:40:00")],
    ]  # fmt: skip
    for number, batch in enumerate(batches, 1):
        (landing / f"{number}.json").write_text("\n".join(json.dumps(e) for e in batch) + "\n")
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{customers}', source => '{landing}', "
            f"checkpoint => '{cdc_checkpoint}', primary_key => 'id', create => true)"
        ).collect()
    job = """
    CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT,
      WATERMARK FOR order_time AS order_time);
    CREATE TABLE {sink} (order_id BIGINT, order_time TIMESTAMP, qty BIGINT);
    INSERT INTO {sink} SELECT o.order_id, o.order_time, c.qty FROM {orders} AS o
    LEFT JOIN CUSTOMERS FOR SYSTEM_TIME AS OF o.order_time AS c ON o.customer_id = c.id;
    """.replace("CUSTOMERS", customers)
    orders = [
        (1, f"{DAY} 10:10:00", 1), (2, f"{DAY} 10:25:00", 1), (3, f"{DAY} 10:35:00", 1),
        (4, f"{DAY} 10:35:00", 2), (5, f"{DAY} 10:45:00", 2), (6, f"{DAY} 09:00:00", 1),
    ]  # fmt: skip
    # order 6 (09:00) comes first: in a later commit it would be behind the watermark (late).
    commits = [
        {"orders": [orders[5], *orders[:3]]},
        {"orders": orders[3:5]},
        {"orders": [(999, SENTINEL, 7)]},
    ]
    stream, batch = both_modes(
        spark,
        tmp_path,
        job,
        {"orders": "order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT"},
        shaped(commits, sentinels_alone),
        f"{DAY} 00:00:00",
        f"{DAY} 23:00:00",
    )
    # key 1: qty 1 from 10:00, 3 from 10:20 (the late update), 2 from 10:30; key 2: qty 5 from
    # 10:00, deleted at 10:40; nothing before 10:00.
    expected = [
        (1, t("10:10"), 1), (2, t("10:25"), 3), (3, t("10:35"), 2),
        (4, t("10:35"), 5), (5, t("10:45"), None), (6, t("09:00"), None),
    ]  # fmt: skip
    assert batch == expected
    assert stream == expected
    # A range starting inside the history reads the dimension's state at its start as the base.
    sink = f"lake.test.cdc_part_{suffix}"
    # SHOW TABLES lists names only (catalog.listTables loads every table of the namespace)
    names = [r.tableName for r in spark.sql("SHOW TABLES IN lake.test LIKE 'orders_*'").collect()]
    orders_table = f"lake.test.{sorted(names, key=lambda n: int(n.split('_')[1]))[-1]}"
    plan, _ = run_backfill(
        spark, job.format(orders=orders_table, sink=sink), f"{DAY} 10:30:00", f"{DAY} 23:00:00"
    )
    assert "_sparkext_versions_1" in plan.script()
    assert sorted_rows(spark, sink) == [
        (3, t("10:35"), 2),
        (4, t("10:35"), 5),
        (5, t("10:45"), None),
    ]


TOTALS_JOB = (
    BIDS_JOB_HEAD
    + """
    CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
    INSERT INTO {sink} SELECT window_start, window_end, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """
)


def test_stream_after_a_backfill_needs_from_and_then_continues_it(spark, tmp_path):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.cont_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2 + BIDS_SENTINEL)
    job = TOTALS_JOB.format(bids=bids, sink=sink)
    run_backfill(spark, job, f"{DAY} 08:00:00", f"{DAY} 08:10:00")
    assert sorted_rows(spark, sink) == [(t("08:00"), t("08:10"), 11.0)]
    with pytest.raises(StreamingSqlError, match="already holds rows"):
        run_stream(spark, job, str(tmp_path / "ck"), available_now=True)
    finish(
        run_stream(
            spark, job, str(tmp_path / "ck"), available_now=True, start_from=f"{DAY} 08:10:00"
        )
    )
    assert sorted_rows(spark, sink) == [
        (t("08:00"), t("08:10"), 11.0),
        (t("08:10"), t("08:20"), 10.0),
    ]


def test_two_inserts_into_one_sink_are_both_streamed(spark, tmp_path):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.two_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2 + BIDS_SENTINEL)
    job = (
        BIDS_JOB_HEAD
        + """
        CREATE TABLE {sink} (kind STRING, window_end TIMESTAMP, total DOUBLE);
        INSERT INTO {sink} SELECT 'sum', window_end, SUM(price)
        FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end;
        INSERT INTO {sink} SELECT 'max', window_end, MAX(price)
        FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end;
        """
    ).format(bids=bids, sink=sink)
    finish(run_stream(spark, job, str(tmp_path / "ck"), available_now=True))
    assert sorted_rows(spark, sink) == [
        ("max", t("08:10"), 5.0),
        ("max", t("08:20"), 6.0),
        ("sum", t("08:10"), 11.0),
        ("sum", t("08:20"), 10.0),
    ]


def test_a_backfill_racing_another_writer_is_reported_and_writes_nothing(spark, monkeypatch):
    import sparkext.iceberg.catalog as iceberg_catalog
    from sparkext.errors import CommitConflictError

    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.race_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2)
    job = TOTALS_JOB.format(bids=bids, sink=sink)
    run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    read_before = iceberg_catalog.current_snapshot_summary(spark, sink)
    # Another writer commits to the range after the backfill read the sink.
    spark.sql(
        f"INSERT INTO {sink} VALUES (TIMESTAMP '{DAY} 09:00:00', TIMESTAMP '{DAY} 09:10:00', 1.0)"
    )
    rows = sorted_rows(spark, sink)
    real = iceberg_catalog.current_snapshot_summary
    monkeypatch.setattr(
        iceberg_catalog,
        "current_snapshot_summary",
        lambda s, name: read_before if name == sink else real(s, name),
    )
    with pytest.raises(CommitConflictError, match=f"Another writer committed to {sink}"):
        run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert sorted_rows(spark, sink) == rows


@SENTINEL_COMMIT
def test_insert_with_a_column_list_in_both_modes(spark, tmp_path, sentinels_alone):
    """INSERT INTO t (cols) names a subset in its own order: the other sink columns stay NULL."""
    stream, batch = bids_case(
        spark,
        tmp_path,
        """
        CREATE TABLE {sink} (note STRING, total DOUBLE, window_end TIMESTAMP);
        INSERT INTO {sink} (window_end, total) SELECT window_end, SUM(price)
        FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end;
        """,
        sentinels_alone,
    )
    expected = [(None, 10.0, t("08:20")), (None, 11.0, t("08:10"))]
    assert sorted(batch, key=str) == sorted(expected, key=str)
    assert sorted(stream, key=str) == sorted(expected, key=str)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("SELECT * FROM {bids};", "stream mode needs INSERT INTO a sink"),
        (
            "CREATE TABLE {sink} (id BIGINT); INSERT INTO {sink} SELECT 1 FROM lake.test.nothing;",
            "the job reads no stream",
        ),
        (
            "CREATE TABLE {sink} (t TIMESTAMP); INSERT INTO {sink} SELECT bidtime FROM {bids} "
            "/*+ OPTIONS('streaming'='true', 'start-snapshot-id'='12345') */;",
            "'start-snapshot-id'='12345' is not a snapshot of",
        ),
    ],
)
def test_stream_mode_refuses_bad_jobs_in_one_sentence(spark, tmp_path, body, message):
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.bad_stream_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1)
    job = (BIDS_JOB_HEAD + body).format(bids=bids, sink=sink)
    with pytest.raises(StreamingSqlError, match=re.escape(message)):
        finish(run_stream(spark, job, str(tmp_path / "ck"), available_now=True))


@pytest.mark.parametrize(
    ("host", "session"),
    [
        pytest.param("Asia/Shanghai", "UTC", marks=pytest.mark.stress),
        pytest.param("UTC", "America/Los_Angeles", marks=pytest.mark.stress),
        ("Asia/Shanghai", "America/Los_Angeles"),
    ],
)
@SENTINEL_COMMIT
def test_stream_windows_do_not_depend_on_the_host_or_session_zone(
    spark, tmp_path, host, session, sentinels_alone
):
    """The watermark is an instant: on a host set to Asia/Shanghai against a UTC session (or a
    non-UTC session) the stream emits each window once, after its data, as a UTC host does.
    Inputs and expected rows are wall clocks in the session zone. The default tier runs the pair
    where neither zone is UTC and they differ (east of UTC against west of it); the stress tier
    also each against UTC."""
    with host_zone(host), session_zone(spark, session):
        stream, batch = bids_case(
            spark,
            tmp_path,
            TUMBLE_TOTALS,
            sentinels_alone,
        )
    assert batch == TUMBLE_TOTALS_ROWS
    assert stream == TUMBLE_TOTALS_ROWS


def test_stream_from_a_time_on_a_shanghai_host(spark, tmp_path):
    """--from is a session-zone wall clock, compared with the sink's progress as an instant."""
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.from_tz_{suffix}"
    with host_zone("Asia/Shanghai"):
        spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
        append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2 + BIDS_SENTINEL)
        job = TOTALS_JOB.format(bids=bids, sink=sink)
        finish(
            run_stream(
                spark, job, str(tmp_path / "ck"), available_now=True, start_from=f"{DAY} 08:10:00"
            )
        )
        assert sorted_rows(spark, sink) == [(t("08:10"), t("08:20"), 10.0)]


def test_stream_checkpoint_as_a_file_uri_or_a_relative_path(spark, tmp_path, monkeypatch):
    """The checkpoint location is handed to pyarrow (state) and Spark (offsets) as given: a
    file:// URI is not turned into a local path under the working directory."""
    suffix = next(_ids)
    bids = f"lake.test.bids_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1 + BIDS_2 + BIDS_SENTINEL)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    expected = [(t("08:00"), t("08:10"), 11.0), (t("08:10"), t("08:20"), 10.0)]

    uri_sink = f"lake.test.ck_uri_{suffix}"
    uri = f"file://{tmp_path}/by uri/ck"  # as Spark reads it: the text is the path
    run = run_stream(spark, TOTALS_JOB.format(bids=bids, sink=uri_sink), uri, available_now=True)
    finish(run)
    assert run.checkpoint == uri
    assert list(workdir.iterdir()) == []
    assert (tmp_path / "by uri" / "ck" / "sparkext-state.json").is_file()
    assert (tmp_path / "by uri" / "ck" / "offsets").is_dir()
    assert sorted_rows(spark, uri_sink) == expected
    recorded = spark.sql(
        f"SELECT summary['sparkext.stream.checkpoint'] FROM {uri_sink}.snapshots"
    ).collect()
    assert {r[0] for r in recorded} == {uri}
    finish(run_stream(spark, TOTALS_JOB.format(bids=bids, sink=uri_sink), uri, available_now=True))
    assert sorted_rows(spark, uri_sink) == expected  # restarted from that checkpoint

    relative_sink = f"lake.test.ck_rel_{suffix}"
    job = TOTALS_JOB.format(bids=bids, sink=relative_sink)
    run = run_stream(spark, job, "rel/ck", available_now=True)
    finish(run)
    assert run.checkpoint == str(workdir / "rel" / "ck")
    assert (workdir / "rel" / "ck" / "sparkext-state.json").is_file()
    assert sorted_rows(spark, relative_sink) == expected


def test_every_stream_batch_lets_go_of_the_java_objects_its_proxies_held(spark, tmp_path):
    """As for ingest_cdc (tests/spark/test_ingest_resources.py): with Python's automatic
    collector off, only the batch's own collection releases what its proxies' cycles pin."""
    suffix = next(_ids)
    bids, sink = f"lake.test.bids_{suffix}", f"lake.test.out_{suffix}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    job = (BIDS_JOB_HEAD + TUMBLE_TOTALS).format(sink=sink, bids=bids)
    checkpoint = str(tmp_path / "ck")
    append(spark, bids, BIDS_DDL, BIDS_1)
    run_stream(spark, job, checkpoint, available_now=True).wait()
    count = bound_objects(spark)
    gc.collect()
    before = java_objects_held(count)
    append(spark, bids, BIDS_DDL, BIDS_2 + BIDS_SENTINEL)
    gc.disable()
    try:
        run_stream(spark, job, checkpoint, available_now=True).wait()
        after = java_objects_held(count)
    finally:
        gc.enable()
    assert sorted_rows(spark, sink) == TUMBLE_TOTALS_ROWS
    assert after - before < 60, f"{after - before} Java objects still held after the batches"
