"""sparkext.reconcile of a lake table against PostgreSQL, beside the obvious Spark comparison.

Issue 52's benchmark. A PostgreSQL table of ``rows`` (default 10M; ``--rows`` or
SPARKEXT_BENCH_RECONCILE_ROWS) rows of eight columns (integer key, text, numeric(12,2),
double, date, timestamptz, bigint, boolean) is copied into an Iceberg table (Spark's JDBC reader,
eight parallel ranges), then compared twice in the same run:

* sparkext: ``CALL sparkext.reconcile(...)`` (segment counts and hash sums computed by the
  database, one Spark pass over the lake);
* the peer, what a user writes today: Spark's JDBC reader over the whole source table (eight
  parallel ranges) fully outer-joined with the lake on the key, every column compared.

Then faults are made in the lake at a rate of 1 in 10^6 rows (at least 4: a lost insert, a lost
delete, a stale update, a duplicate) and reconcile runs again: recall is the share found.
The source's CPU is the PostgreSQL server processes' user + system time over each comparison
(``/proc``), in core-seconds.

Goals (issue 52): reconcile of 10M rows, no differences, <= 60 s; source side <= 1 core-minute
per 10M rows; every injected fault found.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks.harness import Result

ROWS = 10_000_000
TABLE = "lake.bench.reconciled"


def _postgres_cpu_seconds(server) -> float:
    """User + system CPU of every process of the server, exited backends included."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    data = str(server.base / "data")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "postgres" not in cmdline and "postgres" not in stat:
            continue
        if data not in cmdline and "postgres:" not in cmdline:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        # utime + stime, and cutime + cstime: the postmaster's exited backends (a closed
        # connection's backend is gone from /proc by the time it is read)
        total += sum(int(f) for f in fields[11:15]) / ticks
    return total


def run(spark, rows: int | None = None) -> list[Result]:
    import sparkext
    from tests.helpers import postgres

    rows = rows or int(os.environ.get("SPARKEXT_BENCH_RECONCILE_ROWS", ROWS))
    reason = postgres.unavailable()
    if reason is not None:
        print(f"reconcile benchmark not run: {reason}", flush=True)
        return []
    server = postgres.start()
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/{postgres.DATABASE}"
    try:
        started = time.perf_counter()
        server.psql(
            f"""
            CREATE TABLE accounts (id integer PRIMARY KEY, name text, balance numeric(12,2),
              score double precision, opened date, seen timestamptz, hits bigint,
              active boolean);
            INSERT INTO accounts SELECT g, 'user ' || g, (g % 100000) * 1.25, g / 7.0,
              date '2000-01-01' + g % 9000, timestamptz '2026-01-01 00:00:00+00'
              + g * interval '1 second', g * 10, g % 3 = 0 FROM generate_series(1, {rows}) g;
            ANALYZE accounts;
            """
        )
        print(f"source of {rows:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()
        source = _jdbc(spark, url, rows)
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
        spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
        source.writeTo(TABLE).using("iceberg").tableProperty("format-version", "2").create()
        from sparkext.iceberg.cdc_table import CdcTable

        CdcTable(spark, TABLE).make_key(["id"])  # required + identifier field, one commit
        print(f"lake copy in {time.perf_counter() - started:.0f} s", flush=True)
        call = (
            f"CALL sparkext.reconcile(table => '{TABLE}', source => '{url}', options => "
            f"map('user', '{postgres.USER}', 'source-table', 'public.accounts', "
            "'catch-up-timeout', '5 seconds', 'rounds', '1'))"
        )
        cpu = _postgres_cpu_seconds(server)
        started = time.perf_counter()
        ours = sparkext.sql(call).first().asDict(recursive=True)
        ours_s = time.perf_counter() - started
        ours_cpu = _postgres_cpu_seconds(server) - cpu
        print(f"reconcile: {ours_s:.1f} s, source CPU {ours_cpu:.1f} core-s, equal "
              f"{ours['equal']}", flush=True)  # fmt: skip

        cpu = _postgres_cpu_seconds(server)
        started = time.perf_counter()
        peer_differences = _peer(spark, url, rows)
        peer_s = time.perf_counter() - started
        peer_cpu = _postgres_cpu_seconds(server) - cpu
        print(f"peer (JDBC read + full outer join): {peer_s:.1f} s, source CPU "
              f"{peer_cpu:.1f} core-s, differences {peer_differences}", flush=True)  # fmt: skip

        faults = max(4, rows // 1_000_000)
        step = rows // (faults + 1)
        keys = [step * (i + 1) for i in range(faults)]
        kinds = ("missing", "stale", "duplicate", "extra")
        for i, key in enumerate(keys):
            kind = kinds[i % 4]
            if kind == "missing":
                spark.sql(f"DELETE FROM {TABLE} WHERE id = {key}")
            elif kind == "stale":
                spark.sql(f"UPDATE {TABLE} SET hits = hits + 1 WHERE id = {key}")
            elif kind == "duplicate":
                spark.sql(f"INSERT INTO {TABLE} SELECT * FROM {TABLE} WHERE id = {key}")
            else:
                spark.sql(
                    f"INSERT INTO {TABLE} SELECT id + {rows} + {i}, name, balance, score, "
                    f"opened, seen, hits, active FROM {TABLE} WHERE id = {key}"
                )
        started = time.perf_counter()
        faulty = sparkext.sql(call).first().asDict(recursive=True)
        faulty_s = time.perf_counter() - started
        found = len(faulty["differences"])
        print(f"with {faults} faults: {faulty_s:.1f} s, found {found}", flush=True)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
        server.stop()
    setup = f"{rows:,} rows x 8 columns, PostgreSQL 15 on this machine, local[2] Spark"
    per_10m = ours_cpu * 10_000_000 / rows
    return [
        Result(
            "reconcile",
            "seconds, no differences",
            ours_s,
            "Spark JDBC read + full outer join",
            peer_s,
            "<= 60 s for 10M rows",
            ours_s <= 60 * rows / 10_000_000 and ours["equal"],
            setup,
        ),
        Result(
            "reconcile",
            "source CPU core-seconds per 10M rows",
            per_10m,
            "the peer's",
            peer_cpu * 10_000_000 / rows,
            "<= 60 core-s per 10M rows",
            per_10m <= 60,
            setup,
        ),
        Result(
            "reconcile",
            f"injected faults found (of {faults}, 1 in {step:,} rows)",
            found,
            "injected",
            faults,
            "all found",
            found == faults and faulty["unconfirmed"] == faults,
            f"{faulty_s:.1f} s with faults; idle source: reported unconfirmed",
        ),
    ]


def _jdbc(spark, url: str, rows: int):
    from tests.helpers import postgres

    return (
        spark.read.format("jdbc")
        .option("url", url)
        .option("user", postgres.USER)
        .option("dbtable", "public.accounts")
        .option("partitionColumn", "id")
        .option("lowerBound", "1")
        .option("upperBound", str(rows + 1))
        .option("numPartitions", "8")
        .option("fetchsize", "10000")
        .load()
    )


def _peer(spark, url: str, rows: int) -> int:
    """Differing keys found by a full outer join of the JDBC read with the lake."""
    from pyspark.sql import functions as F

    source = _jdbc(spark, url, rows)
    lake = spark.table(TABLE)
    columns = [c for c in source.columns if c != "id"]
    joined = source.alias("s").join(lake.alias("l"), "id", "full_outer")
    differs = F.lit(False)
    for c in columns:
        differs = differs | ~F.col(f"s.{c}").eqNullSafe(F.col(f"l.{c}"))
    return joined.where(differs).count()
