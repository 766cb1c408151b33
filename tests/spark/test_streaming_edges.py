"""Streaming results at range edges, against rows worked out by hand from Flink's semantics.

Each case runs the job as one backfill, as two adjacent backfills into one sink (the split must
equal the whole), and where it matters in stream mode.
"""

from __future__ import annotations

import itertools

import pytest

from sparkext.errors import SparkextError
from sparkext.streaming import run_backfill, run_stream
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.job import StreamingSqlError
from sparkext.streaming.rewrite import plan_batch
from tests.spark.test_streaming import (
    SENTINEL_COMMIT,
    append,
    both_modes,
    finish,
    shaped,
    sorted_rows,
    t,
)

_ids = itertools.count(1)
BIDS_DDL = "bidder BIGINT, dateTime TIMESTAMP, price BIGINT"


def _bids(spark, rows) -> str:
    name = f"lake.edges.bid_{next(_ids)}"
    spark.sql(f"CREATE TABLE {name} ({BIDS_DDL}) USING iceberg")
    append(spark, name, BIDS_DDL, rows)
    return name


SESSION_TVF = """
CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND);
CREATE TABLE {sink} (bidder BIGINT, bids BIGINT, window_start TIMESTAMP, window_end TIMESTAMP);
INSERT INTO {sink} SELECT bidder, COUNT(*) AS bids, window_start, window_end
FROM TABLE(SESSION(TABLE {bids} PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' MINUTES))
GROUP BY bidder, window_start, window_end;
"""
SESSION_LEGACY = """
CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND);
CREATE TABLE {sink} (bidder BIGINT, bids BIGINT, window_start TIMESTAMP, window_end TIMESTAMP);
INSERT INTO {sink} SELECT bidder, COUNT(*) AS bids,
  SESSION_START(dateTime, INTERVAL '10' MINUTE), SESSION_END(dateTime, INTERVAL '10' MINUTE)
FROM {bids} GROUP BY SESSION(dateTime, INTERVAL '10' MINUTE), bidder;
"""


@pytest.mark.parametrize("job", [SESSION_TVF, SESSION_LEGACY], ids=["tvf", "legacy"])
def test_a_session_open_at_the_range_end_belongs_to_the_next_range(spark, job):
    # Flink: bidder 7 bids at 20:00 and 20:06 with a 10-minute gap: one session [20:00, 20:16)
    # of 2 bids. A range ending at 20:12 must not emit it (it is still open), the next one
    # emits it whole; a session spanning the range start keeps its earlier rows.
    bids = _bids(spark, [("7", "2020-04-15 20:00:00", "1"), ("7", "2020-04-15 20:06:00", "2")])
    sink = f"lake.edges.sessions_{next(_ids)}"
    text = job.format(bids=bids, sink=sink)
    run_backfill(spark, text, None, "2020-04-15 20:12:00")
    assert sorted_rows(spark, sink) == []
    run_backfill(spark, text, "2020-04-15 20:12:00", "2020-04-15 21:00:00")
    expected = [(7, 2, t("2020-04-15 20:00:00"), t("2020-04-15 20:16:00"))]
    assert sorted_rows(spark, sink) == expected
    whole = f"lake.edges.sessions_{next(_ids)}"
    run_backfill(spark, job.format(bids=bids, sink=whole), None, "2020-04-15 21:00:00")
    assert sorted_rows(spark, whole) == expected
    # a range starting inside the session (its first row's window ends before the start)
    late_start = f"lake.edges.sessions_{next(_ids)}"
    run_backfill(
        spark, job.format(bids=bids, sink=late_start), "2020-04-15 20:10:30", "2020-04-15 21:00"
    )
    assert sorted_rows(spark, late_start) == expected


def test_the_session_end_filter_stays_above_the_session_merge(spark):
    """Plan shape: the optimizer must not push the range filter below the aggregate that merges
    per-row windows into sessions (it dropped rows' windows before they merged)."""
    bids = _bids(spark, [("1", "2020-04-15 20:00:00", "1")])
    text = SESSION_TVF.format(bids=bids, sink="x").split("INSERT INTO x", 1)
    text = text[0].split("CREATE TABLE x")[0] + text[1]  # the bare SELECT
    plan = plan_batch(text, "2020-04-15 20:00:00", "2020-04-15 20:12:00", SparkCatalog(spark))
    query = plan.queries[-1].sql()
    lines = spark.sql(query)._jdf.queryExecution().optimizedPlan().toString().splitlines()
    aggregate = next(i for i, line in enumerate(lines) if "Aggregate" in line)
    above, below = lines[:aggregate], lines[aggregate + 1 :]
    assert any("Filter" in line and "_sparkext_session_end" in line for line in above)
    # below the merge only the source's own bounds (dateTime < end, a strict bound) remain
    assert not any("<= 2020-04-15 20:12:00" in line for line in below), "\n".join(lines)


Q7 = """
CREATE TABLE {bid} (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND);
CREATE TABLE {sink} (auction BIGINT, price BIGINT, bidder BIGINT, dateTime TIMESTAMP);
INSERT INTO {sink}
SELECT B.auction, B.price, B.bidder, B.dateTime
FROM {bid} B JOIN (
  SELECT MAX(price) AS maxprice, window_end AS dateTime
  FROM TABLE(TUMBLE(TABLE {bid}, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime;
"""
Q7_DDL = "auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP"
Q7_BIDS = [
    ("1", "1", "5", "2020-04-15 20:00:01"),
    ("2", "2", "9", "2020-04-15 20:00:05"),
    ("3", "3", "9", "2020-04-15 20:00:10"),
    ("4", "4", "7", "2020-04-15 20:00:12"),
    ("6", "6", "9", "2020-04-15 20:00:20"),
    ("7", "7", "4", "2020-04-15 20:00:25"),
]
# Flink (a regular join: every pair, once): windows [:00,:10) [:10,:20) [:20,:30) all have
# max 9; a bid joins each window whose end lies in [its time, its time + 10 s] — the bid at :10
# meets the first window (BETWEEN includes the end) and the second.
Q7_ROWS = sorted(
    [
        (2, 9, 2, t("2020-04-15 20:00:05")),
        (3, 9, 3, t("2020-04-15 20:00:10")),
        (3, 9, 3, t("2020-04-15 20:00:10")),
        (6, 9, 6, t("2020-04-15 20:00:20")),
        (6, 9, 6, t("2020-04-15 20:00:20")),
    ]
)


@pytest.mark.parametrize("split", ["2020-04-15 20:00:10", "2020-04-15 20:00:20"])
def test_a_window_joined_back_to_its_stream_sees_the_windows_across_the_range_edge(spark, split):
    bid = f"lake.edges.q7_{next(_ids)}"
    spark.sql(f"CREATE TABLE {bid} ({Q7_DDL}) USING iceberg")
    append(spark, bid, Q7_DDL, Q7_BIDS)
    whole, halves = (f"lake.edges.q7_out_{next(_ids)}" for _ in range(2))
    run_backfill(spark, Q7.format(bid=bid, sink=whole), None, "2020-04-15 21:00:00")
    assert sorted_rows(spark, whole) == Q7_ROWS
    run_backfill(spark, Q7.format(bid=bid, sink=halves), None, split)
    run_backfill(spark, Q7.format(bid=bid, sink=halves), split, "2020-04-15 21:00:00")
    assert sorted_rows(spark, halves) == Q7_ROWS


@SENTINEL_COMMIT
def test_a_window_joined_back_to_its_stream_in_stream_mode(spark, tmp_path, sentinels_alone):
    sentinel = [("99", "99", "1", "2020-04-16 12:00:00")]
    commits = shaped(
        [{"bid": Q7_BIDS[:3]}, {"bid": Q7_BIDS[3:]}, {"bid": sentinel}], sentinels_alone
    )
    stream, batch = both_modes(
        spark, tmp_path, Q7, {"bid": Q7_DDL}, commits, None, "2020-04-15 21:00:00"
    )
    assert batch == Q7_ROWS
    assert stream == Q7_ROWS


TUMBLE_UNDECLARED = """
INSERT INTO {sink} SELECT window_start, window_end, COUNT(*) AS bids
FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(dateTime), INTERVAL '10' MINUTES)) {alias}
GROUP BY window_start, window_end;
"""
COUNTS_DDL = "window_start TIMESTAMP, window_end TIMESTAMP, bids BIGINT"


@pytest.mark.parametrize("alias", ["", "AS b"])
def test_descriptor_is_enough_for_a_catalog_table(spark, tmp_path, alias):
    # no CREATE TABLE in the job: DESCRIPTOR(dateTime) names the event time
    bids = _bids(spark, [("1", "2020-04-15 20:01:00", "1"), ("2", "2020-04-15 20:12:00", "1")])
    sink = f"lake.edges.counts_{next(_ids)}"
    spark.sql(f"CREATE TABLE {sink} ({COUNTS_DDL}) USING iceberg")
    text = TUMBLE_UNDECLARED.format(bids=bids, sink=sink, alias=alias)
    run_backfill(spark, text, "2020-04-15 20:00:00", "2020-04-15 20:20:00")
    expected = [
        (t("2020-04-15 20:00:00"), t("2020-04-15 20:10:00"), 1),
        (t("2020-04-15 20:10:00"), t("2020-04-15 20:20:00"), 1),
    ]
    assert sorted_rows(spark, sink) == expected
    streamed = f"lake.edges.counts_{next(_ids)}"
    spark.sql(f"CREATE TABLE {streamed} ({COUNTS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, [("3", "2020-04-16 12:00:00", "1")])  # passes the watermark
    text = TUMBLE_UNDECLARED.format(bids=bids, sink=streamed, alias=alias)
    finish(run_stream(spark, text, str(tmp_path / "ck"), available_now=True))
    assert sorted_rows(spark, streamed) == expected


def test_tables_with_upper_case_names_in_both_modes(spark, tmp_path):
    bids, sink = f"lake.edges.Bids_{next(_ids)}", f"lake.edges.Counts_{next(_ids)}"
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, [("1", "2020-04-15 20:01:00", "1")])
    append(spark, bids, BIDS_DDL, [("1", "2020-04-16 12:00:00", "1")])
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} ({COUNTS_DDL});
    """ + TUMBLE_UNDECLARED.format(bids=bids, sink=sink, alias="")
    finish(run_stream(spark, job, str(tmp_path / "ck"), available_now=True))
    expected = [(t("2020-04-15 20:00:00"), t("2020-04-15 20:10:00"), 1)]
    assert sorted_rows(spark, sink) == expected
    run_backfill(spark, job, "2020-04-15 20:00:00", "2020-04-15 21:00:00")  # a rerun: same rows
    assert sorted_rows(spark, sink) == expected


def test_a_failure_inside_a_micro_batch_is_its_own_sentence(spark, tmp_path):
    bids = _bids(spark, [("1", "2020-04-15 20:01:00", "1"), ("1", "2020-04-16 12:00:00", "1")])
    sink = f"lake.edges.counts_{next(_ids)}"
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} (window_end TIMESTAMP, ratio INT);
    INSERT INTO {sink} SELECT window_end, CAST(assert_true(COUNT(*) > 5, 'too few bids') AS INT)
    FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(dateTime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """
    with pytest.raises(SparkextError) as error:
        finish(run_stream(spark, job, str(tmp_path / "ck"), available_now=True))
    message = str(error.value)
    assert message.startswith("the stream stopped: ")
    assert "too few bids" in message
    assert "Python Proxy" not in message and "Traceback" not in message


def test_a_processing_time_window_is_refused_with_the_reason(spark):
    bids = _bids(spark, [("1", "2020-04-15 20:01:00", "1")])
    sink = f"lake.edges.counts_{next(_ids)}"
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT, proc AS PROCTIME(),
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} ({COUNTS_DDL});
    INSERT INTO {sink} SELECT window_start, window_end, COUNT(*)
    FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(proc), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """
    with pytest.raises(StreamingSqlError, match=r"DESCRIPTOR\(proc\) is the processing-time"):
        run_backfill(spark, job, None, "2020-04-15 21:00:00")
    assert not spark.catalog.tableExists(sink)


def test_proctime_called_in_a_subquery_is_a_lookup_join(spark):
    bids = _bids(spark, [("1", "2020-04-15 20:01:00", "5"), ("2", "2020-04-15 20:02:00", "6")])
    names = f"lake.edges.names_{next(_ids)}"
    spark.sql(f"CREATE TABLE {names} (id BIGINT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {names} VALUES (1, 'ann'), (2, 'bo')")
    sink = f"lake.edges.named_{next(_ids)}"
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} (name STRING, price BIGINT, dateTime TIMESTAMP);
    INSERT INTO {sink} SELECT n.name, b.price, b.dateTime
    FROM (SELECT *, PROCTIME() AS proc FROM {bids}) b
    JOIN {names} FOR SYSTEM_TIME AS OF b.proc AS n ON b.bidder = n.id;
    """
    run_backfill(spark, job, None, "2020-04-15 21:00:00", lookup_as_of="latest")
    assert sorted_rows(spark, sink) == [
        ("ann", 5, t("2020-04-15 20:01:00")),
        ("bo", 6, t("2020-04-15 20:02:00")),
    ]


def test_a_session_end_under_another_name_is_the_range_column(spark):
    bids = _bids(spark, [("7", "2020-04-15 20:00:00", "1"), ("7", "2020-04-15 20:06:00", "2")])
    sink = f"lake.edges.sessions_{next(_ids)}"
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} (bidder BIGINT, starttime TIMESTAMP, endtime TIMESTAMP, bids BIGINT);
    INSERT INTO {sink} SELECT bidder, SESSION_START(dateTime, INTERVAL '10' MINUTE) AS starttime,
      SESSION_END(dateTime, INTERVAL '10' MINUTE) AS endtime, COUNT(*) AS bids
    FROM {bids} GROUP BY SESSION(dateTime, INTERVAL '10' MINUTE), bidder;
    """
    run_backfill(spark, job, None, "2020-04-15 20:12:00")
    run_backfill(spark, job, "2020-04-15 20:12:00", "2020-04-15 21:00:00")
    run_backfill(spark, job, "2020-04-15 20:12:00", "2020-04-15 21:00:00")  # replaced, not added
    assert sorted_rows(spark, sink) == [(7, t("2020-04-15 20:00:00"), t("2020-04-15 20:16:00"), 2)]


def test_an_over_aggregation_sees_the_rows_before_the_range(spark):
    # Flink's OVER aggregation: one row per input row, its sum over the bidder's last hour
    rows = [("1", "2020-04-15 20:00:00", "1"), ("1", "2020-04-15 20:30:00", "2")]
    bids = _bids(spark, [*rows, ("1", "2020-04-15 21:10:00", "4")])
    sink = f"lake.edges.over_{next(_ids)}"
    job = f"""
    CREATE TABLE {bids} (bidder BIGINT, dateTime TIMESTAMP, price BIGINT,
      WATERMARK FOR dateTime AS dateTime);
    CREATE TABLE {sink} (bidder BIGINT, total BIGINT, dateTime TIMESTAMP);
    INSERT INTO {sink} SELECT bidder, SUM(price) OVER (PARTITION BY bidder ORDER BY dateTime
      RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS total, dateTime FROM {bids};
    """
    run_backfill(spark, job, None, "2020-04-15 20:45:00")
    run_backfill(spark, job, "2020-04-15 20:45:00", "2020-04-15 22:00:00")
    assert sorted_rows(spark, sink) == [
        (1, 1, t("2020-04-15 20:00:00")),
        (1, 3, t("2020-04-15 20:30:00")),
        (1, 6, t("2020-04-15 21:10:00")),  # 20:30's 2 + its own 4: 20:00 is over an hour back
    ]
