"""Snapshot ancestry and per-snapshot file totals, from Iceberg's metadata tables.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkext.iceberg.catalog import load_java_table
from sparkext.planning.event_time import SnapshotFact
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of

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
    assert row is not None  # a global aggregate has one row
    return int(row.n or 0), int(row.b or 0)


def newest_added_position(
    spark: SparkSession, table: TableRef, snapshot_ids: Sequence[int], column: str
) -> tuple[bool, str | None]:
    """Upper bound of ``column`` over the data files these snapshots added (manifests only).

    Reads only the manifests those snapshots added (Iceberg's ``addedDataFiles``), so the cost
    follows their files, not the table's history. Returns (known, bound): known is False when
    some added data file has no upper bound for the column (metrics off, or only nulls) or a
    snapshot is gone.
    """

    if not snapshot_ids:
        return True, None
    java = load_java_table(spark, table.name)
    field = java.schema().findField(column)
    if field is None:
        return False, None
    field_id, field_type = field.fieldId(), field.type()
    convert = jvm_of(spark).org.apache.iceberg.types.Conversions.fromByteBuffer
    io = java.io()
    upper: str | None = None
    for snapshot_id in snapshot_ids:
        snapshot = java.snapshot(int(snapshot_id))
        if snapshot is None:
            return False, None
        for data_file in _iterate(snapshot.addedDataFiles(io)):
            bounds = data_file.upperBounds()
            buffer = bounds.get(field_id) if bounds is not None else None
            if buffer is None:
                return False, None
            value = str(convert(field_type, buffer))
            upper = value if upper is None or value > upper else upper
    return True, upper
