"""sparkext.bootstrap_cdc of a PostgreSQL table, then CDC from its slot, beside Spark's JDBC copy.

Issue 52's bootstrap benchmark. A PostgreSQL table of ``rows`` (default 10M; ``--rows`` or
SPARKEXT_BENCH_BOOTSTRAP_ROWS) rows of eight columns (integer key, text, numeric(12,2), double,
date, timestamptz, bigint, boolean), on a server with ``wal_level=logical``:

* the peer, what a user writes today: Spark's JDBC reader (eight ``id`` ranges, no common
  snapshot, no recorded position) appending to a new Iceberg table: rows/s;
* sparkext: ``CALL sparkext.bootstrap_cdc(...)`` (a slot's exported snapshot, 16 key ranges
  read by Spark tasks, one commit recording the point): rows/s;
* then ``rows / 100`` changes (default 100k: 60% updates, 30% inserts, 10% deletes, in a few
  transactions), streamed by the real Debezium connector from the bootstrap's slot
  (``snapshot.mode=no_data``) and applied by ``ingest_cdc``; ``reconcile`` then says whether
  the table equals the source.

Goals (issue 52): bootstrap of 10M rows, then 100k changes: the table equals the source; report
rows/s.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Result

ROWS = 10_000_000
TABLE = "lake.bench.bootstrapped"
PEER = "lake.bench.bootstrap_peer"


def run(spark, rows: int | None = None) -> list[Result]:
    import sparkext
    from tests.helpers import debezium, postgres

    rows = rows or int(os.environ.get("SPARKEXT_BENCH_BOOTSTRAP_ROWS", ROWS))
    reason = postgres.unavailable() or debezium.unavailable()
    if reason is not None:
        print(f"bootstrap benchmark not run: {reason}", flush=True)
        return []
    server = postgres.start(logical=True)
    url = server.url
    landing = Path(tempfile.mkdtemp(prefix="sparkext-bootstrap-bench-"))
    connector = None
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
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
        for table in (TABLE, PEER):
            spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")

        started = time.perf_counter()
        _jdbc(spark, url, rows).writeTo(PEER).using("iceberg").tableProperty(
            "format-version", "2"
        ).create()
        peer_s = time.perf_counter() - started
        print(f"peer (Spark JDBC, 8 ranges): {peer_s:.1f} s, {rows / peer_s:,.0f} rows/s")

        started = time.perf_counter()
        boot = (
            sparkext.sql(
                f"CALL sparkext.bootstrap_cdc(table => '{TABLE}', source => '{url}', options => "
                f"map('user', '{postgres.USER}', 'source-table', 'public.accounts', "
                "'slot', 'bench', 'publication', 'bench_pub', 'segments', '16'))"
            )
            .first()
            .asDict()
        )
        ours_s = time.perf_counter() - started
        rate = boot["rows_per_second"]
        print(f"bootstrap_cdc: {ours_s:.1f} s, {boot['rows']:,} rows, {rate:,.0f} rows/s at "
              f"{boot['consistent_point']}", flush=True)  # fmt: skip

        changes = max(1000, rows // 100)
        updates, inserts = changes * 6 // 10, changes * 3 // 10
        deletes = changes - updates - inserts
        config = debezium.postgres_config(
            server, postgres.DATABASE, "bench", r"public\.accounts",
            **{"snapshot.mode": "no_data", "publication.name": "bench_pub",
               "publication.autocreate.mode": "disabled", "max.batch.size": "5000"},
        )  # fmt: skip
        connector = debezium.Connector(config, landing / "out").start()
        step = max(1, updates // 4)
        statements = [
            f"UPDATE accounts SET hits = hits + 1, name = name || '+' WHERE id > {lo} "
            f"AND id <= {min(lo + step, updates)};"
            for lo in range(0, updates, step)
        ]
        statements.append(
            f"INSERT INTO accounts SELECT g, 'new ' || g, 1.5, 0.5, date '2026-01-01', now(), "
            f"g, true FROM generate_series({rows + 1}, {rows + inserts}) g;"
        )
        statements.append(f"DELETE FROM accounts WHERE id > {rows - deletes} AND id <= {rows};")
        server.psql("\n".join(statements))
        connector.wait_for(changes, timeout=600 + changes / 100)
        connector.settle(quiet=2.0)
        connector.stop()
        started = time.perf_counter()
        applied = (
            sparkext.sql(
                f"CALL sparkext.ingest_cdc(table => '{TABLE}', source => "
                f"'{connector.topic('pg.public.accounts')}', checkpoint => '{landing / 'ck'}', "
                "primary_key => 'id')"
            )
            .first()
            .asDict()
        )
        ingest_s = time.perf_counter() - started
        skipped = applied["late"] + applied["duplicates"]
        print(f"ingest_cdc of {applied['events']:,} events: {ingest_s:.1f} s "
              f"(late or duplicate {skipped})", flush=True)  # fmt: skip
        check = (
            sparkext.sql(
                f"CALL sparkext.reconcile(table => '{TABLE}', source => '{url}', options => "
                f"map('user', '{postgres.USER}', 'source-table', 'public.accounts', "
                "'catch-up-timeout', '5 seconds', 'rounds', '1'))"
            )
            .first()
            .asDict()
        )
        print(f"reconcile: equal {check['equal']}, source {check['source_rows']:,} rows, lake "
              f"{check['lake_rows']:,}", flush=True)  # fmt: skip
    finally:
        if connector is not None:
            connector.stop()
        for table in (TABLE, PEER):
            spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        server.stop()
    setup = f"{rows:,} rows x 8 columns, PostgreSQL 15 on this machine, local[2] Spark"
    equal = bool(check["equal"]) and applied["rejected"] == 0
    return [
        Result(
            "bootstrap",
            "rows/s copied (consistent point, one commit)",
            boot["rows"] / ours_s,
            "Spark JDBC append, 8 ranges, no common snapshot",
            rows / peer_s,
            "report rows/s",
            boot["rows"] == rows,
            f"{ours_s:.1f} s vs {peer_s:.1f} s; {setup}",
        ),
        Result(
            "bootstrap",
            f"then {changes:,} changes by Debezium + ingest_cdc: table equals source (1 = yes)",
            1.0 if equal else 0.0,
            "equal",
            1.0,
            "table equals the source",
            equal,
            f"ingest_cdc {ingest_s:.1f} s for {applied['events']:,} events",
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
