"""reconcile while CDC writes, beside a data-diff style bisection of the same pair.

Issue 52's live benchmark. A PostgreSQL table of ``rows`` (default 1M; ``--rows`` or
SPARKEXT_BENCH_RECONCILE_LIVE_ROWS) rows is streamed by the real Debezium connector into an
Iceberg table through ``ingest_cdc``; the lake then equals the source. While the source takes
about 1,000 changes/s (updates, inserts and deletes of other rows, 100 every 0.1 s) and
``ingest_cdc`` keeps applying them (every 2 s), both checks run on the same pair:

* ours: ``CALL sparkext.reconcile(...)``, lag-aware;
* the peer, the way Datafold's data-diff (reladiff) works: the key space bisected with a count
  and a checksum per segment on both sides (the source in SQL, the lake in Spark), down to
  segments of at most 1,000 rows whose keys and row hashes are compared. Written here, sharing
  no code with reconcile; it is not lake-aware, so every row that changed while it ran and that
  the lake had not applied yet is a report.

Figures: seconds each, and the differences each reports (every one is false: no fault is made).
The peer's row hash is 32 bits of the MD5 of ``id|name|hits`` (columns whose text both sides
write alike), so segment sums stay exact in Spark's bigint.

Goals (issue 52): 0 false reports while CDC writes 1,000 changes/s during the check; the time
ratio and the false reports of a data-diff style bisection.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.harness import Result

ROWS = 1_000_000
TABLE = "lake.bench.reconciled_live"
LEAF = 1_000
SPLIT = 16
# a row's text on both sides: columns whose text PostgreSQL and Spark write alike
PG_ROW = "id::text || '|' || coalesce(name, '') || '|' || coalesce(hits::text, '')"
SPARK_ROW = (
    "concat_ws('|', cast(id AS string), coalesce(name, ''), coalesce(cast(hits AS string), ''))"
)


def run(spark, rows: int | None = None) -> list[Result]:
    import sparkext
    from tests.helpers import debezium, postgres

    rows = rows or int(os.environ.get("SPARKEXT_BENCH_RECONCILE_LIVE_ROWS", ROWS))
    reason = postgres.unavailable() or debezium.unavailable()
    if reason is not None:
        print(f"live reconcile benchmark not run: {reason}", flush=True)
        return []
    server = postgres.start(logical=True)
    landing = Path(tempfile.mkdtemp(prefix="sparkext-live-bench-"))
    connector = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []
    try:
        server.psql(
            f"""
            CREATE TABLE accounts (id integer PRIMARY KEY, name text, hits bigint);
            INSERT INTO accounts SELECT g, 'user ' || g, g * 10 FROM generate_series(1, {rows}) g;
            ANALYZE accounts;
            """
        )
        connector = debezium.Connector(
            debezium.postgres_config(server, postgres.DATABASE, "live", r"public\.accounts"),
            landing,
        ).start()
        topic = connector.topic("pg.public.accounts")
        started = time.perf_counter()
        connector.wait_for(rows, timeout=1800)
        connector.settle()
        print(f"snapshot of {rows:,} rows landed in {time.perf_counter() - started:.0f} s")
        spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
        spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
        checkpoint = landing.parent / f"{landing.name}-ck"
        ingest = (
            f"CALL sparkext.ingest_cdc(table => '{TABLE}', source => '{topic}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
        )
        started = time.perf_counter()
        sparkext.sql(ingest).collect()
        print(f"lake ingested in {time.perf_counter() - started:.0f} s", flush=True)

        changes = [0]

        def writes() -> None:
            step, next_id = 0, rows + 1
            while not stop.is_set():
                step += 1
                low = 1 + (step * 7919) % (rows - 200)
                server.psql(
                    f"UPDATE accounts SET hits = hits + 1 WHERE id BETWEEN {low} AND {low + 79};"
                    f"INSERT INTO accounts SELECT g, 'new', 0 FROM generate_series({next_id}, "
                    f"{next_id + 9}) g; DELETE FROM accounts WHERE id BETWEEN {low + 100} AND "
                    f"{low + 109};"
                )
                next_id += 10
                changes[0] += 100
                time.sleep(0.1)

        def ingestion() -> None:
            while not stop.is_set():
                try:
                    sparkext.sql(ingest).collect()
                except BaseException as error:
                    errors.append(error)
                    return
                time.sleep(2)

        threads = [threading.Thread(target=writes), threading.Thread(target=ingestion)]
        for thread in threads:
            thread.start()
        time.sleep(5)
        url = f"jdbc:postgresql://127.0.0.1:{server.port}/{postgres.DATABASE}"
        call = (
            f"CALL sparkext.reconcile(table => '{TABLE}', source => '{url}', options => "
            f"map('user', '{postgres.USER}', 'source-table', 'public.accounts', "
            "'catch-up-timeout', '120 seconds'))"
        )
        first_change = changes[0]
        started = time.perf_counter()
        ours = sparkext.sql(call).first().asDict(recursive=True)
        ours_s = time.perf_counter() - started
        rate_ours = (changes[0] - first_change) / ours_s
        print(f"reconcile: {ours_s:.1f} s, {len(ours['differences'])} reported, "
              f"{rate_ours:.0f} changes/s", flush=True)  # fmt: skip
        first_change = changes[0]
        started = time.perf_counter()
        peer_reports = _bisect(spark, url, rows)
        peer_s = time.perf_counter() - started
        rate_peer = (changes[0] - first_change) / peer_s
        print(f"data-diff style bisection: {peer_s:.1f} s, {peer_reports} reported, "
              f"{rate_peer:.0f} changes/s", flush=True)  # fmt: skip
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)
        if connector is not None:
            connector.stop()
        spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
        server.stop()
    if errors:
        raise errors[0]
    reported = len(ours["differences"]) + int(ours.get("ranges_not_listed") or 0)
    setup = f"{rows:,} rows, PostgreSQL 15 + Debezium 3.6.3 + ingest_cdc every 2 s, local[2]"
    return [
        Result(
            "reconcile_live",
            "false reports while CDC writes (reconcile vs data-diff style)",
            reported,
            "data-diff style bisection",
            peer_reports,
            "0 false reports at 1,000 changes/s",
            reported == 0 and min(rate_ours, rate_peer) >= 800,
            f"{rate_ours:.0f} / {rate_peer:.0f} changes/s during each; {setup}",
        ),
        Result(
            "reconcile_live",
            "seconds under live writes",
            ours_s,
            "data-diff style bisection",
            peer_s,
            "report the ratio",
            True,
            setup,
        ),
    ]


def _bisect(spark, url: str, rows: int) -> int:
    """Keys reported by a data-diff style bisection: count + checksum per segment on both
    sides, differing segments cut in SPLIT parts down to LEAF rows, then key lists compared."""
    from sparkext.iceberg.jdbc import Pool
    from tests.helpers import postgres

    lake = (
        spark.table(TABLE)
        .selectExpr("id", f"conv(substr(md5({SPARK_ROW}), 1, 8), 16, 10) AS h")
        .cache()
    )
    reported = 0
    pool = Pool(spark, url, {"user": postgres.USER}, 4)
    try:
        (top,) = pool.query("SELECT max(id) FROM accounts")[0]
        pending = [(1, max(int(top), rows) + 1)]
        while pending:
            lo, hi = pending.pop()
            source = pool.query(
                f"SELECT count(*), coalesce(sum(('x' || substr(md5({PG_ROW}), 1, 8))::bit(32)"
                f"::bigint), 0) FROM accounts WHERE id >= {lo} AND id < {hi}"
            )[0]
            mine = (
                lake.where(f"id >= {lo} AND id < {hi}")
                .selectExpr("count(*) AS n", "coalesce(sum(cast(h AS bigint)), 0) AS s")
                .first()
            )
            if int(source[0]) == mine.n and int(source[1]) == mine.s:
                continue
            if max(int(source[0]), mine.n) <= LEAF or hi - lo <= SPLIT:
                theirs = {
                    int(k): str(v)
                    for k, v in pool.query(
                        f"SELECT id, ('x' || substr(md5({PG_ROW}), 1, 8))::bit(32)::bigint "
                        f"FROM accounts WHERE id >= {lo} AND id < {hi}"
                    )
                }
                ours = {
                    r.id: str(int(r.h)) for r in lake.where(f"id >= {lo} AND id < {hi}").collect()
                }
                reported += sum(
                    1 for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k)
                )
                continue
            step = max(1, (hi - lo) // SPLIT)
            pending += [(a, min(a + step, hi)) for a in range(lo, hi, step)]
    finally:
        pool.close()
    lake.unpersist()
    return reported
