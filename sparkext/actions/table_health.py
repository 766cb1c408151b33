"""The table_health action: per-partition file and delete health, from metadata only.

Floor: actions (the procedure :mod:`sparkext.procedures.table_health` and the health report
call :func:`table_health` and get typed :class:`PartitionHealth` values back).

Bilibili Magnus' optimisation view: for each partition, how many files and bytes, how many of
them small, how many delete files of each kind, and a 0–100 score (sparkext.planning.health).
Reads Iceberg metadata tables only (manifests), never data files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc.lag import table_lags
from sparkext.actions.optimize import CLUSTER_BY_PROPERTY
from sparkext.actions.skipping import TableIndexes, table_indexes
from sparkext.declarations import Option, or_empty, parse_bytes, parse_columns
from sparkext.iceberg.files import PartitionFiles, table_files
from sparkext.planning.health import (
    PartitionLoad,
    partition_score,
    small_file_threshold,
    table_score,
)
from sparkext.planning.lag import table_lag
from sparkext.planning.optimize import Layout, Settings, layouts
from sparkext.planning.positions import readable
from sparkext.times import from_millis

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

SMALL_FILE_THRESHOLD_BYTES = "small-file-threshold-bytes"
SMALL_FILE_THRESHOLD_BYTES_DEFAULT = ""  # empty: 75% of write.target-file-size-bytes

OPTIONS = (
    Option(
        SMALL_FILE_THRESHOLD_BYTES,
        SMALL_FILE_THRESHOLD_BYTES_DEFAULT,
        "data files below this size are small (bytes, or 96MB; default: 75% of "
        "write.target-file-size-bytes)",
        or_empty(parse_bytes),
    ),
)


@dataclasses.dataclass(frozen=True)
class PartitionHealth:
    """One partition's health; the fields are the procedure's output columns, in order."""

    partition: str | None  # partition values as JSON; None when unpartitioned
    data_files: int
    data_bytes: int
    small_files: int
    position_delete_files: int
    position_delete_records: int
    equality_delete_files: int
    equality_delete_records: int
    deletion_vectors: int
    deletion_vector_records: int
    delete_bytes: int | None  # SQL's SUM: None when no delete file's size is known
    data_records: int
    live_rows: int
    last_commit_time: dt.datetime | None
    health_score: int
    snapshot_count: int
    table_health_score: int
    level0_bytes: int
    level1_bytes: int
    level2_bytes: int
    optimized_share: float | None
    clustering_depth: float | None
    cdc_source_time: dt.datetime | None
    cdc_source_position: str | None
    cdc_complete_through: dt.datetime | None
    indexes: str | None  # the declared skipping indexes; None: none
    index_bytes: int | None  # the current index object's bytes for them
    index_coverage: float | None  # share of the partition's live data files every index lists

    def row(self) -> tuple[Any, ...]:
        return dataclasses.astuple(self)


def table_health(
    spark: SparkSession,
    table: TableRef,
    small_file_threshold_bytes: int | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> list[PartitionHealth]:
    """Every partition of ``table`` (one row for an empty unpartitioned table)."""
    target = table.target_file_size_bytes
    threshold = small_file_threshold_bytes or small_file_threshold(target)
    progress(f"reading file metadata of {table.name}")
    cluster_by = parse_columns(table.prop(CLUSTER_BY_PROPERTY))
    partitions, files = table_files(spark, table, threshold, cluster_by)
    if not partitions and not table.partitioned:
        partitions = [_empty_unpartitioned()]
    scored = []
    for p in partitions:
        load = PartitionLoad(
            data_files=p.data_files,
            data_bytes=p.data_bytes,
            data_records=p.data_records,
            small_files=p.small_files,
            small_bytes=p.small_bytes,
            position_delete_files=p.position_delete_files + p.deletion_vectors,
            deleted_records=p.position_delete_records + p.deletion_vector_records,
            equality_delete_files=p.equality_delete_files,
        )
        scored.append((p, partition_score(load, target)))
    overall = table_score([(s, p.data_bytes) for p, s in scored], table.snapshot_count)
    layout = _layouts(table, files, cluster_by)
    empty = Layout((0, 0, 0), None)
    cdc = _cdc_state(spark, table.name)
    found = table_indexes(spark, table)
    coverage = _coverage(found, files)
    return [
        PartitionHealth(
            p.partition,
            p.data_files,
            p.data_bytes,
            p.small_files,
            p.position_delete_files,
            p.position_delete_records,
            p.equality_delete_files,
            p.equality_delete_records,
            p.deletion_vectors,
            p.deletion_vector_records,
            p.delete_bytes,
            p.data_records,
            p.data_records - p.position_delete_records - p.deletion_vector_records,
            p.last_commit_time,
            score,
            table.snapshot_count,
            overall,
            *layout.get(p.partition, empty).level_bytes,
            layout.get(p.partition, empty).optimized_share,
            layout.get(p.partition, empty).clustering_depth,
            *cdc,
            found.names if found is not None else None,
            found.index_bytes if found is not None else None,
            coverage.get(p.partition),
        )
        for p, score in scored
    ]


def _coverage(found: TableIndexes | None, files: Any) -> dict[str | None, float | None]:
    """Per partition (as ``PartitionHealth.partition``): the share of its live data files that
    every declared index lists."""
    if found is None:
        return {}
    paths: dict[str | None, list[str]] = {}
    for f in files:
        body = f.partition.split(":", 1)[1] if ":" in f.partition else f.partition
        paths.setdefault(None if body in ("{}", "") else body, []).append(f.path)
    return {partition: found.coverage(listed) for partition, listed in paths.items()}


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else from_millis(ms)


def _cdc_state(spark: SparkSession, name: str) -> tuple[Any, Any, Any]:
    """(source time, source position, complete through) of the table's freshest ingest job
    (cdc_lag's columns; the lag itself depends on the clock, cdc_lag has it); NULLs without."""

    found = table_lag(table_lags(spark, name))
    if found is None:
        return None, None, None
    return (
        _time(found.commit.source_time_ms),
        readable(found.commit.position),
        _time(found.complete_through_ms),
    )


def _layouts(table: TableRef, files: Any, cluster_by: tuple[str, ...]) -> dict[str | None, Layout]:
    """Level mix and clustering depth per partition (partition JSON as in ``files``)."""
    settings = Settings(
        small_file_bytes=max(1, table.target_file_size_bytes // 8), cluster_columns=cluster_by
    )

    def body(partition: str) -> str | None:
        json_text = partition.split(":", 1)[1]
        return None if json_text == "{}" else json_text

    return layouts(files, settings, body)


def _empty_unpartitioned() -> Any:

    return PartitionFiles(None, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, None)
