"""The end-to-end scenarios the cluster tier runs twice: on a standalone cluster (from
tests/helpers/cluster_driver.py, a driver process of its own) and in local mode (on the shared
session), on the same input. Each returns what a user would look at, as text lines that must be
equal between the two: the table's rows, the routine's counts that do not depend on timing.

A scenario takes ``spark``, ``ns`` (``catalog.namespace``, made by the caller) and ``root`` (a
directory URI both the driver and the executors reach, for landing zones and checkpoints).
Only sparkext's public surface is used: ``sparkext.sql``, ``spark.sql`` (the in-Spark SQL
surface), the streaming API.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import sparkext

# Debezium events of a two-column table, in three landings: (op, id, binlog position, name);
# the event time is the position in seconds after the epoch.
LANDINGS = [
    [("c", 1, 1, "ana"), ("c", 2, 2, "bo"), ("c", 3, 3, "chen"), ("c", 4, 4, "dana")],
    [("u", 1, 5, "ana2"), ("d", 2, 6, None), ("c", 5, 7, "eve"), ("u", 3, 8, "chen2")],
    [("d", 4, 9, None), ("u", 5, 10, "eve2"), ("c", 6, 11, "fay"), ("c", 2, 12, "bo2")],
]


def _event(op: str, key: int, pos: int, name: str | None) -> dict:
    return {
        "op": op,
        "before": None if op == "c" else {"id": key, "name": "old"},
        "after": None if op == "d" else {"id": key, "name": name},
        "source": {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": pos * 1000,
                   "db": "shop", "table": "t"},
        "ts_ms": pos * 1000 + 5,
    }  # fmt: skip


def land(root: str, index: int) -> str:
    """Write landing ``index`` (a JSON-lines file) under ``root``/landing; the directory."""
    directory = Path(root.removeprefix("file://")) / "landing"
    directory.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_event(*spec)) for spec in LANDINGS[index]]
    partial = directory / f".part-{index}.json"
    partial.write_text("\n".join(lines) + "\n")
    partial.rename(directory / f"part-{index}.json")  # whole files only, as a landing job writes
    return str(directory)


def _state(count: int, until: int | None = None) -> dict[int, str]:
    state: dict[int, str] = {}
    for landing in LANDINGS[:count]:
        for op, key, pos, name in landing:
            if until is not None and pos > until:
                continue
            if op == "d":
                state.pop(key, None)
            else:
                state[key] = name
    return state


def replayed(count: int, until: int | None = None) -> list[str]:
    """The brute-force oracle: the table's rows after the first ``count`` landings (``until``:
    only the events at or before that second, the event time being the position)."""
    return [f"{key}|{name}" for key, name in sorted(_state(count, until).items())]


SHIPMENTS = [(1, 4), (1, 6), (2, 7), (2, 13), (5, 6), (5, 10)]  # (order id, second)


def joined() -> list[str]:
    """The dimension join's oracle: each shipment with its order's name as of its second."""
    out = []
    for order, second in SHIPMENTS:
        name = _state(len(LANDINGS), second).get(order)
        out.append(f"{order}|{second}|{'NULL' if name is None else name}")
    return sorted(out)


def rows(spark, query: str) -> list[str]:
    return sorted(
        "|".join("NULL" if v is None else str(v) for v in row) for row in spark.sql(query).collect()
    )


def _ingest(ns: str, root: str, table: str, checkpoint: str) -> dict:
    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{ns}.{table}', source => '{root}/landing', "
            f"checkpoint => '{root}/{checkpoint}', primary_key => 'id', create => true)"
        )
        .first()
        .asDict()
    )


def cdc_and_deletes(spark, ns: str, root: str) -> list[str]:
    """ingest_cdc in three CALLs (equality deletes), rewrite_equality_deletes, the changelog
    through spark.sql, an event-time snapshot as a tag, and the dimension join on that table."""
    out = []
    for index in range(3):
        land(root, index)
        done = _ingest(ns, root, "orders", "ck-orders")
        out.append(
            f"ingest {index}: {done['events']} events, {done['inserted']} inserted, "
            f"{done['updated']} updated, {done['deleted']} deleted"
        )
    out += [f"after ingest: {r}" for r in rows(spark, f"SELECT id, name FROM {ns}.orders")]
    # how many files a commit writes depends on its tasks (parallelism): compared as facts
    before = spark.sql(f"SELECT count(*) FROM {ns}.orders.delete_files WHERE content = 2").first()[
        0
    ]
    rewritten = sparkext.sql(
        f"CALL sparkext.rewrite_equality_deletes(table => '{ns}.orders')"
    ).first()
    out.append(
        f"rewrite: every equality-delete file removed "
        f"{rewritten.equality_delete_files_removed == before > 0}, "
        f"{rewritten.equality_delete_files_remaining} remaining, {rewritten.commits} commit(s)"
    )
    out += [f"after rewrite: {r}" for r in rows(spark, f"SELECT id, name FROM {ns}.orders")]
    kinds = rows(spark, f"SELECT DISTINCT content FROM {ns}.orders.delete_files")
    out += [f"delete files by content: {k}" for k in kinds]
    # the in-Spark SQL surface: a table function and a CALL through plain spark.sql
    out += [
        f"changelog: {r}"
        for r in rows(
            spark,
            f"SELECT id, name, _change_type FROM sparkext.changelog('{ns}.orders') "
            "WHERE _change_type <> 'UPDATE_BEFORE'",
        )
    ]
    tagged = spark.sql(
        f"CALL sparkext.snapshot_as_of_event_time(table => '{ns}.orders', "
        "as_of => TIMESTAMP '1970-01-01 00:00:07 UTC', tag => 'as_of_7s')"
    ).first()
    out.append(f"snapshot_as_of_event_time: {tagged.action}, rows {tagged.rows_written}")
    out += [
        f"tag as_of_7s: {r}"
        for r in rows(spark, f"SELECT id, name FROM {ns}.orders VERSION AS OF 'as_of_7s'")
    ]
    spark.sql(f"DROP TABLE IF EXISTS {ns}.shipments PURGE")
    values = ", ".join(f"({o}, TIMESTAMP_SECONDS({s}))" for o, s in SHIPMENTS)
    spark.sql(
        f"CREATE TABLE {ns}.shipments USING iceberg AS SELECT * FROM VALUES {values} "
        "AS t(order_id, ts)"
    )
    out += [
        f"dim join: {r}"
        for r in rows(
            spark,
            f"SELECT order_id, CAST(unix_timestamp(ts) AS BIGINT), name FROM "
            f"sparkext.dim_join_changelog('{ns}.shipments', '{ns}.orders', "
            "'f.order_id = d.id', 'ts', 'event')",
        )
    ]
    return out


def hilbert(spark, ns: str, root: str) -> list[str]:
    """tiered_optimize re-clustering a partition on a Hilbert curve, through spark.sql."""
    spark.sql(f"DROP TABLE IF EXISTS {ns}.points PURGE")
    spark.sql(
        f"CREATE TABLE {ns}.points (x INT, y INT, p STRING) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='2')"
    )
    for part in range(4):
        spark.sql(
            f"INSERT INTO {ns}.points SELECT CAST((id * 37 + {part}) % 100 AS INT), "
            f"CAST((id * 11 + {part}) % 100 AS INT), IF(id % 2 = 0, 'a', 'b') "
            f"FROM range({part * 500}, {(part + 1) * 500})"
        )
    before = rows(spark, f"SELECT p, count(*), sum(x), sum(y) FROM {ns}.points GROUP BY p")
    groups = spark.sql(
        f"CALL sparkext.tiered_optimize(table => '{ns}.points', levels => 'l2', "
        "cluster_by => 'x, y', curve => 'hilbert')"
    ).collect()
    out = [
        f"tiered_optimize: {g.partition} level {g.level}: {g.input_files} files in, error {g.error}"
        for g in sorted(groups, key=lambda g: str(g.partition))
    ]
    out += [f"before: {r}" for r in before]
    out += [
        f"after: {r}"
        for r in rows(spark, f"SELECT p, count(*), sum(x), sum(y) FROM {ns}.points GROUP BY p")
    ]
    return out


def maintenance(spark, ns: str, root: str) -> list[str]:
    """maintain on a table with history: expiry, dangling deletes, manifests, orphan files."""
    spark.sql(f"DROP TABLE IF EXISTS {ns}.history PURGE")
    spark.sql(
        f"CREATE TABLE {ns}.history (id BIGINT, v STRING) USING iceberg TBLPROPERTIES "
        "('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'history.expire.max-snapshot-age-ms'='1', 'history.expire.min-snapshots-to-keep'='1')"
    )
    for batch in range(4):
        spark.sql(
            f"INSERT INTO {ns}.history SELECT id, 'v{batch}' "
            f"FROM range({batch * 10}, {batch * 10 + 10})"
        )
    spark.sql(f"DELETE FROM {ns}.history WHERE id % 7 = 0")
    # an orphan two hours old (a failed writer's file), for remove_orphan_files to find: its
    # listing and deletes run where Iceberg's action runs them, through the table's FileIO
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {ns}.history").where("col_name = 'Location'")
    data = Path(location.first()["data_type"].removeprefix("file:")) / "data"
    orphan = data / "00000-0-orphan.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    two_hours_ago = time.time() - 7200
    os.utime(orphan, (two_hours_ago, two_hours_ago))
    done = sparkext.sql(
        f"CALL sparkext.maintain(table => '{ns}.history', options => map('orphan-min-age', "
        "'1 hour', 'manifest-min-count', '2'))"
    ).collect()
    out = [
        f"maintain: {r.action} {r.outcome} items {r.items} error {r.error}"
        for r in sorted(done, key=lambda r: r.action)
    ]
    out.append(f"orphan left: {orphan.exists()}")
    out += [f"rows: {r}" for r in rows(spark, f"SELECT count(*), sum(id) FROM {ns}.history")]
    out += [f"snapshots: {r}" for r in rows(spark, f"SELECT count(*) FROM {ns}.history.snapshots")]
    return out


CLICKS = """
CREATE TABLE {ns}.clicks (
  user_id BIGINT, item_id BIGINT, ts TIMESTAMP, proc AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS
);
CREATE TABLE {ns}.items (item_id BIGINT, category STRING);
CREATE TABLE {ns}.clicks_per_minute (
  window_start TIMESTAMP, window_end TIMESTAMP, category STRING, clicks BIGINT
) PARTITIONED BY (days(window_start));
INSERT INTO {ns}.clicks_per_minute
SELECT window_start, window_end, i.category, COUNT(*) AS clicks
FROM TABLE(TUMBLE(TABLE {ns}.clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS c
JOIN {ns}.items FOR SYSTEM_TIME AS OF c.proc AS i ON c.item_id = i.item_id
GROUP BY window_start, window_end, i.category;
"""


def streaming_job(spark, ns: str, root: str) -> list[str]:
    """One streaming job's text as a backfill, then as a stream from where the backfill ended."""
    from sparkext.streaming import run_backfill, run_stream

    for table in ("clicks", "items", "clicks_per_minute"):
        spark.sql(f"DROP TABLE IF EXISTS {ns}.{table} PURGE")
    spark.sql(f"CREATE TABLE {ns}.items (item_id BIGINT, category STRING) USING iceberg")
    spark.sql(f"INSERT INTO {ns}.items VALUES (1, 'books'), (2, 'books'), (3, 'games')")
    spark.sql(
        f"CREATE TABLE {ns}.clicks (user_id BIGINT, item_id BIGINT, ts TIMESTAMP) USING iceberg"
    )
    spark.sql(
        f"INSERT INTO {ns}.clicks VALUES "
        "(7, 1, TIMESTAMP '2026-11-20 10:00:05 UTC'), (7, 3, TIMESTAMP '2026-11-20 10:00:20 UTC'), "
        "(8, 2, TIMESTAMP '2026-11-20 10:00:41 UTC'), (9, 3, TIMESTAMP '2026-11-20 10:00:59 UTC'), "
        "(8, 1, TIMESTAMP '2026-11-20 10:01:10 UTC'), (9, 1, TIMESTAMP '2026-11-20 10:01:30 UTC'), "
        "(7, 2, TIMESTAMP '2026-11-20 10:01:45 UTC'), (8, 3, TIMESTAMP '2026-11-20 10:02:02 UTC')"
    )
    job = CLICKS.format(ns=ns)
    _, results = run_backfill(spark, job, "2026-11-20", "2026-11-21")
    out = [
        f"backfill: {r.sink.removeprefix(ns)} {r.rows_added} added, {r.rows_deleted} deleted"
        for r in results
    ]
    query = (
        "SELECT CAST(unix_timestamp(window_start) AS BIGINT), category, clicks "
        f"FROM {ns}.clicks_per_minute"
    )
    out += [f"after backfill: {r}" for r in rows(spark, query)]
    spark.sql(
        f"INSERT INTO {ns}.clicks VALUES "
        "(9, 3, TIMESTAMP '2026-11-21 10:02:30 UTC'), (7, 1, TIMESTAMP '2026-11-21 10:03:58 UTC'), "
        "(8, 2, TIMESTAMP '2026-11-21 10:04:10 UTC')"
    )
    run = run_stream(spark, job, f"{root}/ck-clicks", available_now=True, start_from="2026-11-21")
    run.wait()
    out += [f"after stream: {r}" for r in rows(spark, query)]
    return out


SCENARIOS = {"cdc_and_deletes": cdc_and_deletes, "hilbert": hilbert, "maintenance": maintenance,
             "streaming_job": streaming_job}  # fmt: skip
