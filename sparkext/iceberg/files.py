"""Per-partition file statistics from Iceberg's metadata tables (manifests only, never data)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2


@dataclass(frozen=True)
class PartitionFiles:
    """Live files of one partition at the current snapshot, counted by kind."""

    partition: str | None  # JSON of the partition tuple; None for an unpartitioned table
    data_files: int
    data_bytes: int
    data_records: int
    small_files: int
    small_bytes: int
    position_delete_files: int
    position_delete_records: int
    deletion_vectors: int
    deletion_vector_records: int
    equality_delete_files: int
    equality_delete_records: int
    delete_bytes: int
    last_commit_time: dt.datetime | None


def partition_files(
    spark: SparkSession, table: TableRef, small_file_threshold: int
) -> list[PartitionFiles]:
    """Aggregate ``<table>.files`` per partition in Spark and return one small row per partition."""
    from pyspark.sql import functions as F

    files = spark.table(table.metadata_table("files"))
    partitioned = "partition" in files.columns
    key = F.to_json("partition") if partitioned else F.lit(None).cast("string")
    content, size, records = F.col("content"), F.col("file_size_in_bytes"), F.col("record_count")
    is_dv = (content == POSITION_DELETES) & (F.col("file_format") == "PUFFIN")
    is_pos = (content == POSITION_DELETES) & ~is_dv
    is_data = content == DATA
    is_small = is_data & (size < small_file_threshold)
    # A DV's file_size_in_bytes is its whole Puffin file; its own bytes are content_size_in_bytes.
    delete_size = F.when(is_dv, F.col("content_size_in_bytes")).otherwise(size)

    def count_if(condition):
        return F.sum(F.when(condition, 1).otherwise(0))

    def sum_if(condition, column):
        return F.sum(F.when(condition, column).otherwise(0))

    stats = files.groupBy(key.alias("partition")).agg(
        count_if(is_data).alias("data_files"),
        sum_if(is_data, size).alias("data_bytes"),
        sum_if(is_data, records).alias("data_records"),
        count_if(is_small).alias("small_files"),
        sum_if(is_small, size).alias("small_bytes"),
        count_if(is_pos).alias("position_delete_files"),
        sum_if(is_pos, records).alias("position_delete_records"),
        count_if(is_dv).alias("deletion_vectors"),
        sum_if(is_dv, records).alias("deletion_vector_records"),
        count_if(content == EQUALITY_DELETES).alias("equality_delete_files"),
        sum_if(content == EQUALITY_DELETES, records).alias("equality_delete_records"),
        sum_if(content != DATA, delete_size).alias("delete_bytes"),
    )
    partitions = spark.table(table.metadata_table("partitions"))
    pkey = F.to_json("partition") if "partition" in partitions.columns else F.lit(None)
    last = partitions.groupBy(pkey.cast("string").alias("partition")).agg(
        F.max(F.unix_micros("last_updated_at")).alias("last_commit_micros")
    )
    joined = stats.join(last, stats["partition"].eqNullSafe(last["partition"]), "left").select(
        stats["*"], "last_commit_micros"
    )
    result = []
    for row in joined.orderBy("partition").collect():  # one row per partition: metadata only
        values = row.asDict()
        micros = values.pop("last_commit_micros")
        when = (
            dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
            if micros is not None
            else None
        )
        result.append(PartitionFiles(**values, last_commit_time=when))
    return result
