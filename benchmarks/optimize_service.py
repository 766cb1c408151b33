"""The optimisation service (issue 19's benchmarks), in one run.

**Planning and scheduling cost as the number of tables grows.** A table with SNAPSHOTS (1,000)
snapshots is made through Iceberg's Java API (one transaction of fast appends of one tiny
file each: metadata only), and its metadata file copied into 10, 30 and 100 tables of their own
namespaces (Hadoop catalog: a table is a directory; the copies read the original's manifests).
For each size: the first cycle (plans every table: its ``entries`` are read by Spark), then
IDLE_CYCLES idle cycles (nothing changed: a metadata-file poll and the policy per table),
median seconds; driver memory (JVM heap after a GC, Python RSS) before and after the idle
cycles. The peer: what a cron-style scheduler does to notice commits without a service — one
``SELECT max(committed_at) FROM <table>.snapshots`` per table per cycle. Goal: an idle cycle
over 100 tables in < 10 s, memory flat.

**Latency under load.** TABLES (5) tables; a writer process commits one small file into each
every WRITER_INTERVAL (10) seconds for MINUTES (default 10) and drops an orphan file (4 days
old) into one table every 2 minutes, while the service runs here (2 jobs at once, poll 2 s;
policy: L0 at 2 small files, snapshots older than 2 minutes expired every minute, orphans
removed every 2 minutes). P95 commit → L0: for each writer commit, the end of the first
successful L0 job of that table that started after it (run log), minus the commit time; the
share of snapshots cleaned on schedule (of those older than max age + interval + 30 s at the
end, how many are gone) and of orphans removed on schedule. Goal: P95 ≤ 2 min (Magnus
reports 15–30 min for real-time tables).

Sizes: SPARKEXT_BENCH_SERVICE_TABLES (``10,30,100``), SPARKEXT_BENCH_SERVICE_SNAPSHOTS (1000),
SPARKEXT_BENCH_SERVICE_MINUTES (10), SPARKEXT_BENCH_SERVICE_PARTS (``discovery,latency``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import sparkext
from benchmarks.harness import Result

IDLE_CYCLES = 15
TABLES = 5
WRITER_INTERVAL = 10
BASE = "lake.bench_svc.base"


def _warehouse(spark) -> Path:
    return Path(spark.conf.get("spark.sql.catalog.lake.warehouse").removeprefix("file:"))


def _make_base(spark, snapshots: int) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_svc")
    spark.sql(f"DROP TABLE IF EXISTS {BASE}")
    spark.sql(f"CREATE TABLE {BASE} (id bigint) USING iceberg")
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, BASE)
    spec = table.spec()
    transaction = table.newTransaction()
    location = str(table.location())
    for i in range(snapshots):
        data = (
            jvm.org.apache.iceberg.DataFiles.builder(spec)
            .withPath(f"{location}/data/fake-{i:05d}.parquet")
            .withFileSizeInBytes(1000)
            .withRecordCount(1)
            .withFormat("PARQUET")
            .build()
        )
        transaction.newFastAppend().appendFile(data).commit()
    transaction.commitTransaction()


def _copies(spark, count: int) -> list[str]:
    """``count`` tables in namespace bench_svc<count>, each a copy of the base's metadata."""
    warehouse = _warehouse(spark)
    source = warehouse / "bench_svc" / "base" / "metadata"
    hint = (source / "version-hint.text").read_text().strip()
    metadata = source / f"v{hint}.metadata.json"
    namespace = warehouse / f"bench_svc{count}"
    shutil.rmtree(namespace, ignore_errors=True)
    names = []
    for i in range(count):
        target = namespace / f"t{i:03d}" / "metadata"
        target.mkdir(parents=True)
        shutil.copy(metadata, target / "v1.metadata.json")
        (target / "version-hint.text").write_text("1")
        names.append(f"lake.bench_svc{count}.t{i:03d}")
    spark.sql("REFRESH TABLE lake.bench_svc.base")
    return names


def _memory(spark) -> tuple[float, float]:
    """(JVM heap used after a GC, Python resident set now), MiB."""
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    spark._jvm.java.lang.System.gc()
    time.sleep(0.2)
    spark._jvm.java.lang.System.gc()
    heap = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/self/status") as status:  # Linux; else the peak above
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    return heap, rss


def discovery(spark, sizes: list[int], snapshots: int) -> tuple[list[Result], dict]:
    from sparkext.service.service import Service, Settings

    started = time.perf_counter()
    _make_base(spark, snapshots)
    figures: dict = {"base_snapshots": snapshots, "base_built_s": time.perf_counter() - started}
    results = []
    for size in sizes:
        names = _copies(spark, size)
        service = Service(
            spark,
            Settings(patterns=(f"lake.bench_svc{size}.*",), log_table="lake.bench_svc.log"),
            log=lambda line: None,
        )
        t0 = time.perf_counter()
        service._cycle()  # the first cycle plans every table
        first = time.perf_counter() - t0
        before = _memory(spark)
        idle, heaps = [], []
        for _ in range(IDLE_CYCLES):
            t0 = time.perf_counter()
            service._cycle()
            idle.append(time.perf_counter() - t0)
            heaps.append(round(_memory(spark)[0]))
        after = _memory(spark)
        naive = []
        for _ in range(2):
            t0 = time.perf_counter()
            for name in names:
                spark.sql(f"SELECT max(committed_at) FROM {name}.snapshots").collect()
            naive.append(time.perf_counter() - t0)
        figures[size] = {
            "first_cycle_s": first,
            "idle_cycle_median_s": statistics.median(idle),
            "idle_cycles_s": idle,
            "naive_cycle_median_s": statistics.median(naive),
            "jvm_heap_mib_before": before[0], "jvm_heap_mib_after": after[0],
            "python_maxrss_mib_before": before[1], "python_maxrss_mib_after": after[1],
            "queued_jobs": len(service.queue),
            "jvm_heap_mib_per_idle_cycle": heaps,
        }  # fmt: skip
        print("discovery", size, figures[size], flush=True)
        results.append(
            Result(
                f"optimize_service discovery, {size} tables x {snapshots} snapshots",
                "seconds per idle cycle",
                statistics.median(idle),
                "per-table snapshots query",
                statistics.median(naive),
                "< 10 s at 100 tables",
                statistics.median(idle) < 10,
                notes=f"first cycle {first:.1f} s; JVM heap {before[0]:.0f} -> "
                f"{after[0]:.0f} MiB (max {max(heaps)}) over {IDLE_CYCLES} idle cycles; Python RSS "
                f"{before[1]:.0f} -> {after[1]:.0f} MiB",
            )
        )
    return results, figures


WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    import sparkext
    warehouse, names, minutes, interval = sys.argv[1:5]
    names = names.split(",")
    spark = sparkext.session(master="local[1]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "1"})
    commits, orphans, failed = [], [], 0
    end = time.time() + float(minutes) * 60
    round_number = 0
    while time.time() < end:
        started = time.time()
        for name in names:
            try:
                spark.sql(f"INSERT INTO {name} VALUES ({round_number}, 'x')")
                commits.append((name, time.time()))
            except Exception as error:
                failed += 1
                print("FAILED", name, str(error).splitlines()[0], flush=True)
        if round_number % 12 == 0:  # every 2 minutes at 10 s
            name = names[(round_number // 12) % len(names)]
            directory = os.path.join(warehouse, *name.split(".")[1:], "data")
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"orphan-{round_number}.parquet")
            open(path, "wb").write(b"o" * 1000)
            past = time.time() - 4 * 86400
            os.utime(path, (past, past))
            orphans.append((path, time.time()))
        round_number += 1
        time.sleep(max(0.0, float(interval) - (time.time() - started)))
    print("RESULT " + json.dumps({"commits": commits, "orphans": orphans, "failed": failed}))
    """
)

POLICY = (
    "'sparkext.optimize.l0.min-files' = '2', "
    "'sparkext.maintenance.snapshot-max-age' = '2 minutes', "
    "'sparkext.maintenance.min-snapshots' = '5', "
    "'sparkext.maintenance.expire_snapshots-every' = '1 minute', "
    "'sparkext.maintenance.remove_orphan_files-every' = '2 minutes'"
)


def latency(spark, minutes: float) -> tuple[list[Result], dict]:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_load")
    names = [f"lake.bench_load.t{i}" for i in range(TABLES)]
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(
            f"CREATE TABLE {name} (id int, v string) USING iceberg TBLPROPERTIES "
            f"('format-version'='2', {POLICY})"
        )
    log_table = "lake.bench_load_log.optimize_log"
    spark.sql("DROP TABLE IF EXISTS " + log_table)
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-service-"))
    script = work / "writer.py"
    script.write_text(WRITER)
    root = Path(__file__).resolve().parents[1]
    service = sparkext.optimize_service(
        "lake.bench_load.*", max_concurrent=2, poll_interval="2 seconds",
        log_table=log_table, log=lambda line: None,
    )  # fmt: skip
    runner = threading.Thread(target=service.run)
    runner.start()
    writer = subprocess.Popen(
        [sys.executable, str(script), str(_warehouse(spark)), ",".join(names), str(minutes),
         str(WRITER_INTERVAL)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    stdout, stderr = writer.communicate()
    time.sleep(60)  # the last commits' L0, the last maintenance round
    service.stop()
    runner.join()
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"writer failed: {stderr[-2000:]}")
    writer_figures = json.loads(line[len("RESULT ") :])
    end = time.time()
    spark.catalog.refreshTable(log_table)
    jobs = spark.sql(
        f"SELECT table_name, CAST(unix_millis(ts) AS double) / 1000 AS done, "
        f"CAST(duration_ms AS double) / 1000 AS took "
        f"FROM {log_table} WHERE job = 'L0' AND outcome = 'ok'"
    ).collect()
    starts: dict[str, list[tuple[float, float]]] = {}
    for j in jobs:
        starts.setdefault(j.table_name, []).append((j.done - j.took, j.done))
    waits = []
    for name, committed in writer_figures["commits"]:
        later = [done for start, done in starts.get(name, []) if start >= committed]
        if later:
            waits.append(min(later) - committed)
    waits.sort()
    p95 = waits[int(0.95 * (len(waits) - 1))] if waits else float("nan")
    # snapshots older than max age + interval + 30 s at the end should be gone
    stale_after = 120 + 60 + 30
    expected_gone = sum(1 for _, t in writer_figures["commits"] if end - t > stale_after)
    retained_stale = 0
    for name in names:
        spark.catalog.refreshTable(name)
        retained_stale += spark.sql(
            f"SELECT count(*) FROM {name}.snapshots WHERE committed_at < "
            f"timestamp_millis({int((end - stale_after) * 1000)})"
        ).first()[0]
    due_orphans = [p for p, t in writer_figures["orphans"] if end - t > 120 + 60]
    removed = sum(1 for p in due_orphans if not os.path.exists(p))
    failed = spark.sql(f"SELECT count(*) FROM {log_table} WHERE outcome = 'failed'").first()[0]
    health = spark.sql(
        f"SELECT table_name, min(health_score) AS low, max_by(health_score, ts) AS last, "
        f"count(*) AS points FROM {log_table} WHERE job = 'health' GROUP BY table_name"
    ).collect()
    from sparkext.actions import health_report as report

    now_scores = {p.table: p.table_score for p in report.health(spark, names)}
    figures = {
        "health_recorded": {r.table_name: (r.low, r.last, r.points) for r in health},
        "table_scores_at_end": now_scores,
        "minutes": minutes,
        "writer_commits": len(writer_figures["commits"]),
        "writer_failed": writer_figures["failed"],
        "l0_jobs": len(jobs),
        "failed_jobs": failed,
        "p95_commit_to_l0_s": p95,
        "median_commit_to_l0_s": statistics.median(waits) if waits else None,
        "commits_without_l0": len(writer_figures["commits"]) - len(waits),
        "snapshots_due": expected_gone,
        "snapshots_due_still_retained": retained_stale,
        "orphans_due": len(due_orphans),
        "orphans_removed": removed,
    }
    print("latency", figures, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    cleaned = 1 - retained_stale / expected_gone if expected_gone else float("nan")
    return [
        Result("optimize_service latency", "P95 seconds from a commit to its L0 job",
               p95, "Magnus (reported)", 900.0, "<= 120 s", p95 <= 120,
               notes=f"median {figures['median_commit_to_l0_s']}; {len(waits)} commits, "
               f"{TABLES} tables every {WRITER_INTERVAL} s"),
        Result("optimize_service health", "lowest table score at the end",
               min(now_scores.values()), "goal", 90, ">= 90 (healthy)",
               min(now_scores.values()) >= 90,
               notes="recorded (low, last, points): " + json.dumps(figures["health_recorded"])),
        Result("optimize_service writer safety", "failed writer commits",
               writer_figures["failed"], "goal", 0, "0", writer_figures["failed"] == 0),
        Result("optimize_service maintenance", "share of due snapshots expired on schedule",
               cleaned, "goal", 1.0, "all", cleaned >= 0.999,
               notes=f"{retained_stale} of {expected_gone} still retained"),
        Result("optimize_service maintenance", "share of due orphans removed on schedule",
               removed / len(due_orphans) if due_orphans else float("nan"), "goal", 1.0, "all",
               removed == len(due_orphans), notes=f"{removed} of {len(due_orphans)}"),
    ], figures  # fmt: skip


def run(spark, rows: int | None = None) -> list[Result]:
    parts = os.environ.get("SPARKEXT_BENCH_SERVICE_PARTS", "discovery,latency")
    results: list[Result] = []
    if "discovery" in parts:
        sizes = [
            int(s) for s in os.environ.get("SPARKEXT_BENCH_SERVICE_TABLES", "10,30,100").split(",")
        ]
        snapshots = int(os.environ.get("SPARKEXT_BENCH_SERVICE_SNAPSHOTS", "1000"))
        results += discovery(spark, sizes, snapshots)[0]
    if "latency" in parts:
        results += latency(spark, float(os.environ.get("SPARKEXT_BENCH_SERVICE_MINUTES", "10")))[0]
    return results
