"""Progress lines of stream and backfill runs say what each commit wrote: the batch id, the sink,
rows appended (upsert sinks: rows upserted and keys deleted) and the snapshot, taken from the
commit, and equal to what the sinks hold."""

from __future__ import annotations

import itertools
import re
import time

from sparkext.streaming import run_backfill, run_stream
from tests.spark.test_streaming import (
    BIDS_1,
    BIDS_2,
    BIDS_DDL,
    BIDS_JOB_HEAD,
    BIDS_SENTINEL,
    append,
)

_ids = itertools.count(time.time_ns() // 1000 % 10**9 * 1000)
JOB = (
    BIDS_JOB_HEAD
    + """
CREATE TABLE {totals} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
INSERT INTO {totals} SELECT window_start, window_end, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE {bids}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end;
CREATE TABLE {counts} (supplier_id STRING, bids BIGINT, PRIMARY KEY (supplier_id) NOT ENFORCED);
INSERT INTO {counts} SELECT supplier_id, COUNT(*) AS bids FROM {bids} GROUP BY supplier_id;
"""
)
LINE = re.compile(
    r"batch (?P<batch>\d+): (?P<sink>\S+) up to [0-9-]+ [0-9:.]+, (?P<rows>\d+) rows? "
    r"(?P<verb>appended|upserted)(?:, (?P<deleted>\d+) keys? deleted)? \(snapshot (?P<id>\d+)\)"
)


def _names() -> dict[str, str]:
    suffix = next(_ids)
    return {key: f"lake.test.{key}_{suffix}" for key in ("bids", "totals", "counts")}


def _snapshot_added(spark, table: str, snapshot_id: int) -> int:
    (row,) = spark.table(f"{table}.snapshots").where(f"snapshot_id = {snapshot_id}").collect()
    return int(row.summary["added-records"])


def test_stream_lines_give_rows_per_sink_and_batch(spark, tmp_path):
    names = _names()
    spark.sql(f"CREATE TABLE {names['bids']} ({BIDS_DDL}) USING iceberg")
    job = JOB.format(**names)
    lines: list[str] = []
    checkpoint = str(tmp_path / "ck")
    # two runs from one checkpoint: the first makes the 08:00 window final, the second the rest
    for rows in (BIDS_1 + BIDS_2, BIDS_SENTINEL):
        append(spark, names["bids"], BIDS_DDL, rows)
        run_stream(spark, job, checkpoint, available_now=True, progress=lines.append).wait()

    found = [m for m in map(LINE.fullmatch, lines) if m]
    assert len(found) == 4, lines  # each sink, in each of the two micro-batches
    assert [int(m["batch"]) for m in found] == [0, 0, 1, 1]
    appended = [m for m in found if m["sink"] == names["totals"]]
    assert all(m["verb"] == "appended" for m in appended)
    assert [int(m["rows"]) for m in appended] == [1, 1]  # 08:00-08:10, then 08:10-08:20
    assert sum(int(m["rows"]) for m in appended) == spark.table(names["totals"]).count() == 2
    for m in appended:  # the count is the commit's own
        assert _snapshot_added(spark, names["totals"], int(m["id"])) == int(m["rows"])
    upserted = [m for m in found if m["sink"] == names["counts"]]
    assert all(m["verb"] == "upserted" and m["deleted"] == "0" for m in upserted)
    # supplier1 and supplier2 at the first batch; supplier9's sentinel at the second
    assert [int(m["rows"]) for m in upserted] == [2, 1]
    assert spark.table(names["counts"]).count() == 3


def test_backfill_lines_give_rows_per_sink_when_it_commits(spark):
    names = _names()
    spark.sql(f"CREATE TABLE {names['bids']} ({BIDS_DDL}) USING iceberg")
    append(spark, names["bids"], BIDS_DDL, BIDS_1 + BIDS_2)
    lines: list[str] = []
    _, results = run_backfill(
        spark,
        JOB.format(**names),
        "2020-04-15 00:00:00",
        "2020-04-15 12:00:00",
        progress=lines.append,
    )
    totals, counts = results
    assert lines == [
        f"backfill 1/2: {names['totals']}",
        f"backfill 1/2: {names['totals']}: 2 rows added, 0 deleted (snapshot {totals.snapshot_id})",
        f"backfill 2/2: {names['counts']}",
        f"backfill 2/2: {names['counts']}: 2 rows upserted, 0 keys deleted "
        f"(snapshot {counts.snapshot_id})",
    ]
    assert spark.table(names["totals"]).count() == totals.rows_added == 2
    assert spark.table(names["counts"]).count() == counts.rows_added == 2
    assert len(repr(results)) < 400 and "DataFrame" not in repr(results)
