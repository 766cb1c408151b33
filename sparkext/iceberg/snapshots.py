"""Snapshot ancestry and per-snapshot file totals, from Iceberg's metadata tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkext.identifiers import col
from sparkext.literals import in_list
from sparkext.planning.event_time import SnapshotFact

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef


def ancestry(spark: SparkSession, table: TableRef) -> list[SnapshotFact]:
    """The current snapshot and its retained ancestors, oldest first.

    Reads the ``snapshots`` metadata table (one small row per snapshot: ids and summary).
    """
    if table.current_snapshot_id is None:
        return []
    rows = (
        spark.table(table.metadata_table("snapshots"))
        .select("snapshot_id", "parent_id", "summary", "operation")
        .collect()  # metadata: one row per retained snapshot
    )
    by_id = {r.snapshot_id: r for r in rows}
    chain: list[SnapshotFact] = []
    current = by_id.get(table.current_snapshot_id)
    while current is not None:
        chain.append(
            SnapshotFact(
                current.snapshot_id,
                current.parent_id,
                dict(current.summary or {}),
                current.operation,
            )
        )
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    chain.reverse()
    return chain


def live_files(spark: SparkSession, table: TableRef, snapshot_id: int) -> tuple[int, int]:
    """Number and bytes of the data and delete files a read of ``snapshot_id`` plans."""
    from pyspark.sql import functions as F

    row = (
        spark.read.option("snapshot-id", str(snapshot_id))
        .table(table.metadata_table("files"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("file_size_in_bytes").alias("b"))
        .first()
    )
    return int(row.n or 0), int(row.b or 0)


def newest_added_position(
    spark: SparkSession, table: TableRef, snapshot_ids: Sequence[int], column: str
) -> tuple[bool, str | None]:
    """Upper bound of ``column`` over the data files these snapshots added (manifests only).

    Returns (known, bound): known is False when some added data file has no upper bound for the
    column (metrics off, or only nulls).
    """
    from pyspark.sql import functions as F

    if not snapshot_ids:
        return True, None
    bound = col("readable_metrics", column, "upper_bound")
    row = (
        spark.table(table.metadata_table("all_entries"))
        .where(
            (F.col("status") == 1)
            & (F.col("data_file.content") == 0)
            & in_list("snapshot_id", [int(i) for i in snapshot_ids])
        )
        .agg(
            F.sum(F.when(bound.isNull(), 1).otherwise(0)).alias("unknown"),
            F.max(bound).alias("upper"),
        )
        .first()
    )
    return not (row.unknown or 0), row.upper
