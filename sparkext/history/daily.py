"""Write a state into one partition of a target table, replacing that partition atomically."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Written:
    rows: int
    snapshot_id: int | None


def write_partition(
    spark: SparkSession, frame: DataFrame, target: str, column: str, value: str
) -> Written:
    """Overwrite ``column = value`` of ``target`` with ``frame`` (one Iceberg commit).

    A missing target is created as a format-v2 Iceberg table partitioned by ``column``; new
    source columns are added to an existing target (schema merge), so a rerun of the same
    partition replaces it and changes nothing else.
    """
    from pyspark.sql import functions as F

    rows = frame.withColumn(column, F.lit(value))
    if not spark.catalog.tableExists(target):
        (
            rows.writeTo(target)
            .using("iceberg")
            .partitionedBy(F.col(column))
            .tableProperty("format-version", "2")
            .tableProperty("write.spark.accept-any-schema", "true")
            .create()
        )
    else:
        rows.writeTo(target).option("mergeSchema", "true").overwrite(F.col(column) == F.lit(value))
    from sparkext.iceberg.catalog import resolve_table

    ref = resolve_table(spark, target)
    if ref.current_snapshot_id is None:
        return Written(0, None)
    last = (
        spark.table(ref.metadata_table("snapshots"))
        .where(F.col("snapshot_id") == F.lit(ref.current_snapshot_id))
        .select("snapshot_id", "summary")
        .first()
    )
    if last is None:
        return Written(0, None)
    summary = dict(last.summary or {})
    return Written(int(summary.get("added-records", 0)), last.snapshot_id)
