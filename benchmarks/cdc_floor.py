"""How far one ingest_cdc micro-batch is from a minimal micro-batch on the same stack.

The floor (issue 22's yardstick for its "<= 2 s per batch" goal): an available-now streaming query
over a copy of the same landed files whose ``foreachBatch`` decodes the new 10k Debezium lines with
sparkext's own Python decoder (``mapInArrow``) and appends them to an Iceberg table in one commit.
It has no per-key dedup, no typing, no deletes, no event log and no replay bookkeeping: a CDC
writer built like ingest_cdc (a streaming query, sparkext's Python decoder, one Iceberg commit a
batch) pays at least this on this machine; one that decoded in the JVM might pay less. All sides
run in the same JVM, alternately, on the same 10k-change batches against a 200k-row table, each
timed after the same settle (benchmarks/cdc_ingest.py); each side's median over the rounds after
SPARKEXT_BENCH_WARMUP (default 15) unmeasured ones, which run back to back (no settle), like a
stream's batches. A third side (from 2026-11-29) runs the same query with a batch function that
does nothing: the part of every one-shot CALL that no work in the batch can remove.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.cdc_ingest import _changes, _grow, _settle, create_ours
from benchmarks.harness import Result

ROWS = 200_000
CHANGES = 10_000
ROUNDS = 8
WARM_UP = 15  # 3 until 2026-11-28: ours was still warming up (see cdc_ingest)
SEED = 17


def _floor_batch(spark, landing: Path, checkpoint: Path, table: str) -> None:
    """The cheapest micro-batch: available-now file stream -> Python decode -> one append."""
    from pyspark.sql import functions as F

    from sparkext.executors.cdc.decode import DECODED_DDL, decode_lines

    def body(lines, _batch_id: int) -> None:
        decoded = lines.select(
            F.col("value").cast("binary").alias("value"), F.input_file_name().alias("source_file")
        ).mapInArrow(decode_lines, DECODED_DDL)
        decoded.select("op", "position", "after_json").writeTo(table).append()

    query = (
        spark.readStream.format("text")
        .load(str(landing))
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(body)
        .start()
    )
    query.awaitTermination()


def _empty_batch(spark, landing: Path, checkpoint: Path) -> None:
    """What no batch work can remove: the same available-now query with a batch function that
    does nothing (the query's start, the file listing, the offset and commit logs, its stop)."""
    query = (
        spark.readStream.format("text")
        .load(str(landing))
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(lambda _lines, _batch_id: None)
        .start()
    )
    query.awaitTermination()


def run(spark) -> list[Result]:
    import sparkext

    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-floor-"))
    ours_table, floor_table = "lake.bench.floor_ours", "lake.bench.floor_append"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    for t in (ours_table, floor_table):
        spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    spark.sql(
        f"CREATE TABLE {floor_table} (op string, position string, after_json string) "
        "USING iceberg TBLPROPERTIES ('format-version'='2')"
    )
    landing, call = create_ours(work, ours_table)
    floor_landing, empty_landing = work / "floor-landing", work / "empty-landing"
    floor_landing.mkdir()
    empty_landing.mkdir()
    _grow(spark, ours_table, 0, ROWS)
    rng = random.Random(SEED)
    warm_up = int(os.environ.get("SPARKEXT_BENCH_WARMUP", WARM_UP))
    ours, floor, empty = [], [], []
    for i in range(warm_up + ROUNDS):
        text = "\n".join(json.dumps(e) for e in _changes(ROWS, i, rng, CHANGES)) + "\n"
        (landing / f"{i + 1:03d}-changes.json").write_text(text)
        (floor_landing / f"{i + 1:03d}-changes.json").write_text(text)
        (empty_landing / f"{i + 1:03d}-changes.json").write_text(text)
        measured = i >= warm_up
        if measured:
            _settle(spark)
        started = time.perf_counter()
        out = sparkext.sql(call).first()
        ours.append(time.perf_counter() - started)
        assert out.commits == 1 and out.events == CHANGES, out
        if measured:
            _settle(spark)
        started = time.perf_counter()
        _floor_batch(spark, floor_landing, work / "floor-checkpoint", floor_table)
        floor.append(time.perf_counter() - started)
        if measured:
            _settle(spark)
        started = time.perf_counter()
        _empty_batch(spark, empty_landing, work / "empty-checkpoint")
        empty.append(time.perf_counter() - started)
        print(
            f"round {i + 1}: ingest_cdc {ours[-1]:.2f} s, floor {floor[-1]:.2f} s, "
            f"empty batch {empty[-1]:.2f} s",
            flush=True,
        )
    ours_m = statistics.median(ours[warm_up:])
    floor_m = statistics.median(floor[warm_up:])
    empty_m = statistics.median(empty[warm_up:])
    return [
        Result(
            benchmark="cdc_floor",
            metric=f"seconds for one {CHANGES:,}-change batch at {ROWS:,} rows",
            ours=ours_m,
            baseline_name="floor: stream -> Python decode -> Iceberg append",
            baseline=floor_m,
            goal="<= 2 s per batch (issue 22); the floor: a minimal batch on the same stack",
            met=ours_m <= 2,
            notes=f"medians of rounds {warm_up + 1}-{warm_up + ROUNDS}; samples ours "
            + ", ".join(f"{s:.2f}" for s in ours[warm_up:])
            + "; floor "
            + ", ".join(f"{s:.2f}" for s in floor[warm_up:]),
        ),
        Result(
            benchmark="cdc_floor_stream",
            metric="seconds of the floor's available-now query: with its batch work vs with an "
            "empty batch function",
            ours=floor_m,
            baseline_name="empty batch: the query's start, listing, logs and stop",
            baseline=empty_m,
            goal="(what every CALL pays before and after its batch; not a goal)",
            met=True,
            notes=f"medians of rounds {warm_up + 1}-{warm_up + ROUNDS}; samples empty batch "
            + ", ".join(f"{s:.2f}" for s in empty[warm_up:]),
        ),
    ]
