"""Streaming results at range edges, against rows worked out by hand from Flink's semantics.

Each case runs the job as one backfill, as two adjacent backfills into one sink (the split must
equal the whole), and where it matters in stream mode.
"""

from __future__ import annotations

import itertools

import pytest

from sparkext.streaming import run_backfill
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.rewrite import plan_batch
from tests.spark.test_streaming import append, sorted_rows, t

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
