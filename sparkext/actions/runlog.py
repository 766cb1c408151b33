"""The run log: every job of the optimisation service (and of ``maintain`` / ``tiered_optimize``
runs it makes) appended to an Iceberg table, so SQL answers "what ran, why, what failed".

Default table: ``<catalog>.sparkext.optimize_log`` in the catalog of the first served table,
partitioned by day. Appends from several services never conflict (Iceberg retries appends).
The log is also the service's memory across restarts: when each table's maintenance actions
last succeeded (:func:`last_runs`).

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING

from sparkext import identifiers
from sparkext.iceberg.catalog import split_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMESPACE = "sparkext"
TABLE = "optimize_log"
SCHEMA = (
    ("ts", "timestamp", "when the job ended, after it released the table's lease"),
    ("service", "string", "who ran it: owner name of the service process (or procedure)"),
    ("table_name", "string", "the table"),
    ("partition", "string", "the partition as JSON (NULL: whole table)"),
    ("job", "string", "L0, L1, L2, or a maintenance action (expire_snapshots, …)"),
    ("reason", "string", "why it ran: the trigger or the policy measure"),
    ("input_files", "bigint", "files read / snapshots expired / items handled"),
    ("input_bytes", "bigint", "bytes read"),
    ("output_files", "bigint", "files written (maintenance: files deleted)"),
    ("output_bytes", "bigint", "bytes written (maintenance: bytes deleted)"),
    ("snapshot_id", "bigint", "the commit it made (NULL: none)"),
    ("duration_ms", "bigint", "wall-clock time"),
    ("outcome", "string", "ok, skipped, busy (another process held the table) or failed"),
    ("error", "string", "the one-sentence error (NULL: none)"),
    # job 'health': the table's state when it was recorded (the report's trends)
    ("health_score", "double", "health: the table's 0-100 score"),
    ("data_files", "bigint", "health: live data files"),
    ("small_files", "bigint", "health: small data files"),
    ("delete_files", "bigint", "health: delete files and deletion vectors"),
    ("optimized_share", "double", "health: share of bytes clustered by L1/L2"),
    ("started", "timestamp", "when the job started, before it took the table's lease"),
)
DDL = ", ".join(f"{name} {kind}" for name, kind, _ in SCHEMA)


@dataclass(frozen=True)
class Entry:
    ts: dt.datetime
    service: str
    table_name: str
    partition: str | None
    job: str
    reason: str
    input_files: int | None
    input_bytes: int | None
    output_files: int | None
    output_bytes: int | None
    snapshot_id: int | None
    duration_ms: int
    outcome: str
    error: str | None = None
    health_score: float | None = None
    data_files: int | None = None
    small_files: int | None = None
    delete_files: int | None = None
    optimized_share: float | None = None
    started: dt.datetime | None = None


def utc_now() -> dt.datetime:
    """Now, time-zone aware: Spark stores it as the same instant whatever the host's zone (a
    naive datetime would be read in the host's zone)."""
    return dt.datetime.now(dt.timezone.utc)


def default_table(served: Sequence[str]) -> str:
    """``<catalog of the first table>.sparkext.optimize_log``.

    >>> default_table(["lake.ods.a"])
    'lake.sparkext.optimize_log'
    """
    catalog = served[0].split(".", 1)[0] if served else "lake"
    return f"{catalog}.{NAMESPACE}.{TABLE}"


def ensure(spark: SparkSession, name: str) -> None:
    """Create the log table (and its namespace) if missing."""

    parts = split_name(spark, name)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {identifiers.join(parts[:-1])}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {identifiers.join(parts)} ({DDL}) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2', "
        "'commit.retry.num-retries'='20')"
    )
    have = {c.lower() for c in spark.table(identifiers.join(parts)).columns}
    missing = [(n, k) for n, k, _ in SCHEMA if n.lower() not in have]
    if missing:  # a log made by an older sparkext: add the new columns (NULL in old rows)
        spark.sql(
            f"ALTER TABLE {identifiers.join(parts)} ADD COLUMNS "
            f"({', '.join(f'{n} {k}' for n, k in missing)})"
        )


def append(spark: SparkSession, name: str, entries: Iterable[Entry]) -> None:
    """Append ``entries`` (a job's few rows, made on the driver) in one commit."""
    rows = [astuple(e) for e in entries]
    if rows:
        spark.createDataFrame(rows, DDL).writeTo(name).append()


def last_runs(spark: SparkSession, name: str, tables: Sequence[str]) -> dict[tuple[str, str], int]:
    """(table, job) -> epoch ms of its newest successful run, for ``tables``."""
    from pyspark.sql import functions as F

    if not tables:
        return {}
    rows = (
        spark.table(name)
        .where(
            F.col("outcome").isin("ok", "skipped")
            & F.col("table_name").isin(*tables)
            & (F.col("job") != "health")
        )
        .groupBy("table_name", "job")
        .agg(F.max("ts").alias("ts"))
        .collect()  # one row per (table, job)
    )
    return {(r.table_name, r.job): int(r.ts.timestamp() * 1000) for r in rows}
