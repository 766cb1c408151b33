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
    last = _last_commit_micros(spark, table, partitioned)
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


def _last_commit_micros(spark: SparkSession, table: TableRef, partitioned: bool):
    """Per partition, the newest commit that added or removed a file there, as far as known.

    Iceberg's ``partitions`` table dates a partition by its data files only (a merge-on-read
    DELETE does not move it). The current manifests' entries name the snapshot that added each
    live file and, for files removed by the commits whose manifests are still current (status
    DELETED), the snapshot that removed it. Where a snapshot has expired, the ``partitions``
    table's date is used instead.
    """
    from pyspark.sql import functions as F

    entries = spark.table(table.metadata_table("entries"))
    key = F.to_json("data_file.partition") if partitioned else F.lit(None).cast("string")
    snapshots = spark.table(table.metadata_table("snapshots")).select(
        "snapshot_id", F.unix_micros("committed_at").alias("micros")
    )
    by_entries = (
        entries.select(key.alias("partition"), "snapshot_id")
        .join(snapshots, "snapshot_id", "left")
        .groupBy("partition")
        .agg(F.max("micros").alias("by_entries"))
    )
    partitions = spark.table(table.metadata_table("partitions"))
    pkey = F.to_json("partition") if partitioned else F.lit(None).cast("string")
    by_partitions = partitions.groupBy(pkey.alias("partition")).agg(
        F.max(F.unix_micros("last_updated_at")).alias("by_partitions")
    )
    both = by_entries.join(
        by_partitions, by_entries["partition"].eqNullSafe(by_partitions["partition"]), "full"
    )
    return both.select(
        F.coalesce(by_entries["partition"], by_partitions["partition"]).alias("partition"),
        F.greatest("by_entries", "by_partitions").alias("last_commit_micros"),
    )


def glob_matches_nothing(spark: SparkSession, pattern: str) -> bool:
    """Whether a glob matches no path, as Hadoop's file systems (Spark's file source) see it;
    False when that cannot be told (the read then decides)."""
    try:
        jvm = spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(pattern)
        matched = path.getFileSystem(spark._jsc.hadoopConfiguration()).globStatus(path)
    except Exception:
        return False
    return matched is None or len(matched) == 0
