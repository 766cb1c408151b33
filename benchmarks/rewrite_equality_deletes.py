"""Equality deletes: reads before/after sparkext's conversion and after rewrite_data_files.

Issues 4 and 22's benchmark: a table of SPARKEXT_BENCH_EQ_ROWS rows (default "2000000,20000000":
two shapes, the second 10x the first, so the per-row cost shows beside the fixed cost) after
SPARKEXT_BENCH_EQ_COMMITS (default 20) CDC commits, each updating 1% of the keys through equality
deletes (our own ingest_cdc writer, the Flink-style layout). In one run, per shape:

(a) a full scan and a filtered aggregate before conversion, after sparkext's conversion, and after
    Iceberg's rewrite_data_files with delete-file-threshold = 1 (same starting snapshot: the table
    is rolled back between the two, which is metadata only);
(b) the conversion's cost against that rewrite_data_files call: seconds and bytes written.

Goals: conversion writes <= 5% of the bytes and runs >= 3x faster than rewrite_data_files; reads
after conversion >= 3x faster than before and within 1.5x of the fully rewritten table.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.harness import Result

TABLE = "lake.bench.eq_deletes"
SEED = 4
FULL_SCAN = f"SELECT count(*), sum(qty), max(name), sum(CAST(price * 100 AS BIGINT)) FROM {TABLE}"
FILTERED = f"SELECT count(*), sum(CAST(price * 100 AS BIGINT)) FROM {TABLE} WHERE qty < 100"


def _event(key: int, pos: int, rng: random.Random) -> dict:
    source = {"file": "mysql-bin.000009", "pos": pos, "row": 0, "ts_ms": 1_800_000_000_000 + pos}
    return {
        "op": "u",
        "before": {"id": key, "name": "old", "qty": 0, "price": 0.0},
        "after": {
            "id": key,
            "name": f"n{rng.randint(0, 99)}",
            "qty": rng.randint(0, 999),
            "price": round(rng.uniform(0, 100), 2),
        },
        "ts_ms": source["ts_ms"],
        "source": {**source, "db": "shop", "table": "orders"},
    }


def _build(spark, work: Path, rows: int, commits: int) -> None:
    import sparkext
    from benchmarks.cdc_ingest import _grow

    landing, checkpoint = work / "landing", work / "checkpoint"
    landing.mkdir()
    seed = _event(-1, 1, random.Random(0)) | {"op": "c", "before": None}
    (landing / "000-seed.json").write_text(json.dumps(seed) + "\n")
    call = (
        f"CALL sparkext.ingest_cdc(table => '{TABLE}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true, "
        "options => map('max-files-per-batch', '1'))"
    )
    sparkext.sql(call)
    print(f"loading {rows:,} base rows", flush=True)
    _grow(spark, TABLE, 0, rows)
    rng = random.Random(SEED)
    pos = 10**12
    for commit in range(commits):
        events = []
        for key in rng.sample(range(rows), k=rows // 100):
            pos += 1
            events.append(_event(key, pos, rng))
        text = "\n".join(json.dumps(e) for e in events) + "\n"
        (landing / f"{commit + 1:03d}-changes.json").write_text(text)
    print(f"{commits} CDC commits of {rows // 100:,} updates each", flush=True)
    out = sparkext.sql(call).first()
    assert out.commits == commits, out


def _reads(spark) -> tuple[float, float, list]:
    """Median seconds of the full scan and of the filtered aggregate (3 runs each)."""
    times: dict[str, list[float]] = {FULL_SCAN: [], FILTERED: []}
    answers = []
    for _ in range(3):
        for query in times:
            started = time.perf_counter()
            answer = spark.sql(query).collect()
            times[query].append(time.perf_counter() - started)
            answers.append(answer)
    return statistics.median(times[FULL_SCAN]), statistics.median(times[FILTERED]), answers[:2]


def _summary(spark) -> dict:
    row = spark.sql(
        f"SELECT summary FROM {TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()
    return dict(row.summary)


def run(spark) -> list[Result]:
    sizes = os.environ.get("SPARKEXT_BENCH_EQ_ROWS", "2000000,20000000")
    commits = int(os.environ.get("SPARKEXT_BENCH_EQ_COMMITS", "20"))
    results: list[Result] = []
    for rows in (int(size) for size in sizes.split(",")):
        results.extend(_shape(spark, rows, commits))
    return results


def _shape(spark, rows: int, commits: int) -> list[Result]:
    import sparkext

    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-eq-"))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
    _build(spark, work, rows, commits)
    start = spark.sql(
        f"SELECT snapshot_id FROM {TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    spark.sql(FULL_SCAN).collect()  # warm-up: JIT and caches for every variant alike
    before_scan, before_filter, truth = _reads(spark)
    print(f"before: scan {before_scan:.2f} s, filtered {before_filter:.2f} s", flush=True)

    started = time.perf_counter()
    ours = sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{TABLE}')").first()
    ours_seconds = time.perf_counter() - started
    ours_bytes = ours.bytes_added
    ours_scan, ours_filter, answers = _reads(spark)
    assert answers == truth, f"results changed after the conversion: {answers} {truth}"
    print(
        f"sparkext: {ours_seconds:.2f} s, {ours_bytes:,} bytes; "
        f"scan {ours_scan:.2f} s, filtered {ours_filter:.2f} s",
        flush=True,
    )

    spark.sql(f"CALL lake.system.rollback_to_snapshot('{TABLE[5:]}', {start})")
    started = time.perf_counter()
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{TABLE[5:]}', "
        "options => map('delete-file-threshold', '1'))"
    ).collect()
    peer_seconds = time.perf_counter() - started
    peer_bytes = int(_summary(spark).get("added-files-size", 0))
    peer_scan, peer_filter, answers = _reads(spark)
    assert answers == truth, "results changed after rewrite_data_files"
    print(
        f"rewrite_data_files: {peer_seconds:.2f} s, {peer_bytes:,} bytes; "
        f"scan {peer_scan:.2f} s, filtered {peer_filter:.2f} s",
        flush=True,
    )
    spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
    shutil.rmtree(work, ignore_errors=True)
    name = "rewrite_equality_deletes"
    shape = f"{rows:,} rows, {commits} commits x 1% updates"
    results = [
        Result(
            name,
            "conversion seconds",
            ours_seconds,
            "rewrite_data_files",
            peer_seconds,
            ">= 3x faster",
            peer_seconds / ours_seconds >= 3,
        ),
        Result(
            name,
            "bytes written by the conversion",
            ours_bytes,
            "rewrite_data_files",
            peer_bytes,
            "<= 5% of the bytes",
            ours_bytes <= 0.05 * peer_bytes,
        ),
        Result(
            name,
            "full scan seconds after conversion",
            ours_scan,
            "before conversion",
            before_scan,
            ">= 3x faster than before",
            before_scan / ours_scan >= 3,
        ),
        Result(
            name,
            "filtered aggregate seconds after conversion",
            ours_filter,
            "before conversion",
            before_filter,
            ">= 3x faster than before",
            before_filter / ours_filter >= 3,
        ),
        Result(
            name,
            "full scan seconds after conversion",
            ours_scan,
            "after rewrite_data_files",
            peer_scan,
            "within 1.5x",
            ours_scan <= 1.5 * peer_scan,
        ),
        Result(
            name,
            "filtered aggregate seconds after conversion",
            ours_filter,
            "after rewrite_data_files",
            peer_filter,
            "within 1.5x",
            ours_filter <= 1.5 * peer_filter,
        ),
    ]
    return [replace(r, metric=f"{r.metric} ({shape})") for r in results]
