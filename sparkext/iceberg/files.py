"""Per-partition file statistics from Iceberg's metadata tables (manifests only, never data).

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.iceberg.catalog import load_java_table
from sparkext.iceberg.delete_files import DeleteTable, partition_key
from sparkext.iceberg.optimize_table import (
    SUMMARY_LEVEL,
    SUMMARY_OPERATION,
    bound_columns_of,
    fact_of,
    levels_and_merges,
)
from sparkext.planning.optimize import DataFileFact
from sparkext.spark.java import jvm as jvm_of

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
    delete_bytes: int | None  # SQL's SUM: None when no delete file's size is known
    last_commit_time: dt.datetime | None


def table_files(
    spark: SparkSession,
    table: TableRef,
    small_file_threshold: int,
    cluster_by: Sequence[str] = (),
) -> tuple[list[PartitionFiles], list[DataFileFact]]:
    """The current snapshot's live files aggregated per partition (ordered by partition), and
    every live data file as ``optimize_table.file_facts`` describes it (level, bounds on
    ``cluster_by``).

    ONE Spark job: the ``entries`` metadata table (manifests only), one small row per entry,
    aggregated here. The snapshots (commit times, levels) come from the table metadata the
    Java API already holds, and that metadata's current snapshot is the one read, so both
    describe one table state. ``entries`` is ``files`` plus the entries of files removed by the
    commits whose manifests are still current (status DELETED): those date their partition.
    """
    from pyspark.sql import functions as F

    snapshot_id, snapshots = _snapshots(spark, table)
    if snapshot_id is None:  # no snapshot: no live file
        return [], []
    entries = (
        spark.read.format("iceberg")
        .option("snapshot-id", str(snapshot_id))
        .load(table.metadata_table("entries"))
    )
    partition = DeleteTable._partition_column(entries)
    bound_columns = bound_columns_of(entries, cluster_by)
    live_data = (F.col("status") < 2) & (F.col("data_file.content") == DATA)
    rows = entries.select(
        "status",
        "snapshot_id",
        "sequence_number",
        F.col("data_file.content").alias("content"),
        F.col("data_file.file_format").alias("file_format"),
        F.col("data_file.file_path").alias("path"),
        F.col("data_file.file_size_in_bytes").alias("size"),
        F.col("data_file.record_count").alias("records"),
        F.col("data_file.content_size_in_bytes").alias("content_size"),
        (F.to_json(partition) if partition is not None else F.lit(None).cast("string")).alias(
            "partition"
        ),
        partition_key(partition, F.col("data_file.spec_id")).alias("pkey"),
        *[
            F.when(
                live_data,
                F.struct(
                    F.col("readable_metrics")[m]["lower_bound"].alias("lo"),
                    F.col("readable_metrics")[m]["upper_bound"].alias("hi"),
                ),
            ).alias(f"b{i}")
            for i, (_, m) in enumerate(bound_columns)
        ],
    ).collect()  # metadata: one small row per manifest entry
    return _per_partition(rows, snapshots, small_file_threshold), _data_file_facts(
        rows, snapshots, bound_columns
    )


@dataclass(frozen=True)
class _Snapshot:
    micros: int  # commit time, as the ``snapshots`` table's committed_at
    level: str | None  # summary's sparkext.optimize.level
    operation: str | None  # summary's sparkext.operation


def _snapshots(spark: SparkSession, table: TableRef) -> tuple[int | None, dict[int, _Snapshot]]:
    """The current snapshot id and every retained snapshot, from ONE read of the table metadata
    (its JSON: one py4j call however many snapshots the table keeps)."""
    import json

    metadata = load_java_table(spark, table.name).operations().current()
    current = metadata.currentSnapshot()
    document = json.loads(jvm_of(spark).org.apache.iceberg.TableMetadataParser.toJson(metadata))
    snapshots = {
        int(s["snapshot-id"]): _Snapshot(
            micros=int(s["timestamp-ms"]) * 1000,
            level=s.get("summary", {}).get(SUMMARY_LEVEL),
            operation=s.get("summary", {}).get(SUMMARY_OPERATION),
        )
        for s in document.get("snapshots", [])
    }
    return (int(current.snapshotId()) if current is not None else None), snapshots


class _Sum:
    """SQL's SUM: NULLs are skipped, and a sum of nothing but NULLs is NULL."""

    def __init__(self) -> None:
        self.value: int | None = None

    def add(self, value: int | None) -> None:
        if value is not None:
            self.value = (self.value or 0) + value


def _per_partition(rows, snapshots, small_file_threshold: int) -> list[PartitionFiles]:
    """Live entries counted by kind per partition; a partition's last commit is the newest
    known commit of any of its entries, live or DELETED (an expired snapshot is unknown)."""
    counts: dict[str | None, dict[str, int]] = {}
    delete_bytes: dict[str | None, _Sum] = {}
    last: dict[str | None, int | None] = {}
    for r in rows:
        snapshot = snapshots.get(r.snapshot_id) if r.snapshot_id is not None else None
        if snapshot is not None:
            known = last.get(r.partition)
            last[r.partition] = snapshot.micros if known is None else max(known, snapshot.micros)
        else:
            last.setdefault(r.partition, None)
        if r.status >= 2:  # DELETED: not in ``files``
            continue
        c = counts.setdefault(r.partition, dict.fromkeys(_COUNTS, 0))
        total = delete_bytes.setdefault(r.partition, _Sum())
        if r.content == DATA:
            c["data_files"] += 1
            c["data_bytes"] += r.size
            c["data_records"] += r.records
            if r.size < small_file_threshold:
                c["small_files"] += 1
                c["small_bytes"] += r.size
            total.add(0)
        elif r.content == POSITION_DELETES and r.file_format == "PUFFIN":
            # A DV's file_size_in_bytes is its whole Puffin file; its own bytes are
            # content_size_in_bytes.
            c["deletion_vectors"] += 1
            c["deletion_vector_records"] += r.records
            total.add(r.content_size)
        elif r.content == POSITION_DELETES:
            c["position_delete_files"] += 1
            c["position_delete_records"] += r.records
            total.add(r.size)
        else:
            if r.content == EQUALITY_DELETES:
                c["equality_delete_files"] += 1
                c["equality_delete_records"] += r.records
            total.add(r.size)
    result = []
    for key in sorted(counts, key=lambda k: (k is not None, k or "")):  # NULL first, as SQL
        micros = last.get(key)
        when = (
            dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
            if micros is not None
            else None
        )
        result.append(
            PartitionFiles(
                key, **counts[key], delete_bytes=delete_bytes[key].value, last_commit_time=when
            )
        )
    return result


_COUNTS = (
    "data_files",
    "data_bytes",
    "data_records",
    "small_files",
    "small_bytes",
    "position_delete_files",
    "position_delete_records",
    "deletion_vectors",
    "deletion_vector_records",
    "equality_delete_files",
    "equality_delete_records",
)


def _data_file_facts(rows, snapshots, bound_columns) -> list[DataFileFact]:
    """The live data files, as ``optimize_table.file_facts`` makes them (same levels, same
    L0-merge marks, same bounds), in the order ``entries`` lists them."""

    levels, merges = levels_and_merges((i, s.level, s.operation) for i, s in snapshots.items())
    return [
        fact_of(r, int(r.size), levels, merges, bound_columns)
        for r in rows
        if r.status < 2 and r.content == DATA
    ]


def glob_matches_nothing(spark: SparkSession, pattern: str) -> bool:
    """Whether a glob matches no path, as Hadoop's file systems (Spark's file source) see it;
    False when that cannot be told (the read then decides)."""
    try:
        jvm = jvm_of(spark)
        path = jvm.org.apache.hadoop.fs.Path(pattern)
        matched = path.getFileSystem(spark._jsc.hadoopConfiguration()).globStatus(path)
    except Exception:
        return False
    return matched is None or len(matched) == 0
