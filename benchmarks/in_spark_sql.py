"""sparkext inside Spark: per-call overhead of ``spark.sql("CALL sparkext...")``, and the Thrift
server under 8 concurrent clients (issue 21).

1. Per call (median of interleaved rounds, each a ``.collect()``: what a user waits for):
   ``CALL sparkext.help()`` through each of our routes, ``spark.sql`` (the JVM extension) and
   ``sparkext.sql`` (Python routing), each interleaved with Iceberg's
   ``CALL lake.system.ancestors_of`` (a metadata-only procedure returning a few rows held in the
   JVM). Goal: each route within 10 ms of Iceberg's; the differences are in the notes.
   ``table_health`` through both of ours, for scale.
2. ``sparkext-sql serve`` in its own process; 8 PyHive clients, each in its own session, loop
   ``CALL sparkext.table_health`` and a ``SELECT`` over a table for ``SECONDS``: throughput,
   p50/p95 latency, failures (goal 0).
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.harness import Result, interleaved_medians, median_ms

ROUNDS = 60
CLIENTS = 8
SECONDS = 60
TABLE = "lake.bench.in_spark"


def _table(spark) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
    spark.sql(f"CREATE TABLE {TABLE} (id BIGINT, v STRING) USING iceberg")
    for start in range(0, 5):
        spark.sql(
            f"INSERT INTO {TABLE} SELECT id, 'v' FROM range({start * 100}, {start * 100 + 100})"
        )


def _calls(spark) -> list[Result]:
    import sparkext

    _table(spark)
    help_sql = "CALL sparkext.help()"
    iceberg = f"CALL lake.system.ancestors_of('{TABLE}')"
    in_spark, icebergs = interleaved_medians(
        lambda: spark.sql(help_sql).collect(), lambda: spark.sql(iceberg).collect(), ROUNDS
    )
    via_python, icebergs2 = interleaved_medians(
        lambda: sparkext.sql(help_sql).collect(), lambda: spark.sql(iceberg).collect(), ROUNDS
    )
    # The call alone (parse, the callback, binding, the routine; a Dataset back), without
    # collecting: the rows are a local relation in the plan (sparkext.routing.local_rows), so
    # collecting them runs no Spark job, like collecting the rows of Iceberg's procedures.
    call_only, _ = interleaved_medians(
        lambda: spark.sql(help_sql), lambda: spark.sql(iceberg).collect(), ROUNDS
    )
    health = f"CALL sparkext.table_health(table => '{TABLE}')"
    health_spark, health_python = interleaved_medians(
        lambda: spark.sql(health).collect(), lambda: sparkext.sql(health).collect(), ROUNDS // 2
    )
    by_route = [
        ("spark.sql", median_ms(in_spark), median_ms(icebergs)),
        ("sparkext.sql", median_ms(via_python), median_ms(icebergs2)),
    ]
    for route, ours, theirs in by_route:
        print(
            f"in_spark_sql: CALL sparkext.help() through {route}: {ours:.1f} ms; Iceberg's "
            f"ancestors_of: {theirs:.1f} ms; difference {ours - theirs:+.1f} ms"
        )
    return [
        *(
            Result(
                benchmark="in_spark_sql",
                metric=f"median ms per CALL sparkext.help() through {route}, collected "
                f"({ROUNDS} rounds)",
                ours=ours,
                baseline_name="Iceberg's CALL lake.system.ancestors_of, collected",
                baseline=theirs,
                goal="within 10 ms of Iceberg's",
                met=ours - theirs <= 10.0,
                notes=f"difference {ours - theirs:+.1f} ms",
            )
            for route, ours, theirs in by_route
        ),
        Result(
            benchmark="in_spark_sql",
            metric="median ms per spark.sql('CALL sparkext.help()') without collecting its rows",
            ours=median_ms(call_only),
            baseline_name="Iceberg's CALL lake.system.ancestors_of (collected)",
            baseline=median_ms(icebergs),
            goal="reported (where the time goes)",
            met=True,
            notes=f"collecting help's rows costs {by_route[0][1] - median_ms(call_only):.1f} ms"
            " more",
        ),
        Result(
            benchmark="in_spark_sql",
            metric="median ms per CALL sparkext.help(): spark.sql vs sparkext.sql",
            ours=median_ms(in_spark),
            baseline_name="sparkext.sql (Python routing)",
            baseline=median_ms(via_python),
            goal="reported",
            met=True,
            notes="",
        ),
        Result(
            benchmark="in_spark_sql",
            metric="median ms per CALL sparkext.table_health: spark.sql vs sparkext.sql",
            ours=median_ms(health_spark),
            baseline_name="sparkext.sql (Python routing)",
            baseline=median_ms(health_python),
            goal="reported",
            met=True,
            notes="",
        ),
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def _serve(warehouse: str) -> tuple[subprocess.Popen, int, Path]:
    port = _free_port()
    log = Path(tempfile.mkdtemp(prefix="sparkext-serve-")) / "server.log"
    env = dict(os.environ, SPARKEXT_WAREHOUSE=warehouse)
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "sparkext.cli.shell", "serve", "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 300
    while "Ctrl-C stops" not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sparkext-sql serve did not start:\n{log.read_text()}")
        time.sleep(1)
    return process, port, log


def _server(spark) -> list[Result]:
    from pyhive import hive

    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    _table(spark)
    process, port, _ = _serve(warehouse)
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    statements = (
        f"CALL sparkext.table_health(table => '{TABLE}')",
        f"SELECT count(*), sum(id) FROM {TABLE} WHERE v = 'v'",
    )

    def client() -> None:
        cursor = hive.connect(host="localhost", port=port, auth="NONE", username="b").cursor()
        cursor.execute(statements[0])  # each session's first call warms it up
        cursor.fetchall()
        end = time.monotonic() + SECONDS
        i = 0
        while time.monotonic() < end:
            started = time.perf_counter()
            try:
                cursor.execute(statements[i % 2])
                cursor.fetchall()
                with lock:
                    latencies.append((time.perf_counter() - started) * 1000)
            except Exception as error:  # counted, not raised: the figure is the failure count
                with lock:
                    failures.append(f"{type(error).__name__}: {str(error)[:200]}")
            i += 1

    try:
        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    ordered = sorted(latencies)
    p95 = ordered[int(0.95 * (len(ordered) - 1))] if ordered else float("nan")
    throughput = len(latencies) / SECONDS
    return [
        Result(
            benchmark="in_spark_sql",
            metric=f"Thrift server, {CLIENTS} clients x {SECONDS} s: statements per second",
            ours=throughput,
            baseline_name="p50 / p95 latency ms",
            baseline=statistics.median(ordered) if ordered else float("nan"),
            goal="0 failures",
            met=not failures,
            notes=f"p95 {p95:.0f} ms; {len(latencies)} statements, {len(failures)} failures"
            + (f"; first: {failures[0]}" if failures else ""),
        )
    ]


def run(spark) -> list[Result]:
    return _calls(spark) + _server(spark)
