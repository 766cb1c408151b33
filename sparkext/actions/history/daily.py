"""Write a state into one partition of a target table, replacing that partition atomically.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.iceberg.commit import RUN_ID, new_run_id, snapshot_facts, snapshot_with_run_id
from sparkext.iceberg.errors import spark_write
from sparkext.identifiers import col
from sparkext.spark import cancellation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Written:
    rows: int
    snapshot_id: int | None
    files: int = 0
    bytes: int = 0


def write_partition(
    spark: SparkSession, frame: DataFrame, target: str, column: str, value: str
) -> Written:
    """Overwrite ``column = value`` of ``target`` with ``frame`` (one Iceberg commit).

    A missing target is created as a format-v2 Iceberg table partitioned by ``column``; new
    source columns are added to an existing target (schema merge), so a rerun of the same
    partition replaces it and changes nothing else.
    """
    from pyspark.sql import functions as F

    run_id = new_run_id()
    rows = frame.withColumn(column, F.lit(value))
    with spark_write(target, f"the snapshot of {column} = {value}", "run the procedure again"):
        if not spark.catalog.tableExists(target):
            (
                rows.writeTo(target)
                .using("iceberg")
                .partitionedBy(col(column))
                .tableProperty("format-version", "2")
                .tableProperty("write.spark.accept-any-schema", "true")
                .option(f"snapshot-property.{RUN_ID}", run_id)
                .create()
            )
        else:
            (
                rows.writeTo(target)
                .option("mergeSchema", "true")
                .option(f"snapshot-property.{RUN_ID}", run_id)
                .overwrite(col(column) == F.lit(value))
            )
    snapshot_id = snapshot_with_run_id(spark, target, run_id)
    if snapshot_id is None:
        return Written(0, None)
    cancellation.record_commit(target, snapshot_id, f"{column} = {value}")  # told to a Ctrl-C
    summary = snapshot_facts(spark, target, snapshot_id).summary
    return Written(
        int(summary.get("added-records", 0)),
        snapshot_id,
        int(summary.get("added-data-files", 0)),
        int(summary.get("added-files-size", 0)),
    )
