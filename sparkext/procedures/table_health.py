"""CALL sparkext.table_health(table => 'lake.db.t'): per-partition file and delete health.

Bilibili Magnus' optimisation view: for each partition, how many files and bytes, how many of
them small, how many delete files of each kind, and a 0–100 score (sparkext.planning.health).
Reads Iceberg metadata tables only (manifests), never data files.
"""

from __future__ import annotations

from typing import Any

from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    or_empty,
    parse_bytes,
)
from sparkext.iceberg.files import table_files
from sparkext.planning.health import (
    PartitionLoad,
    partition_score,
    small_file_threshold,
    table_score,
)
from sparkext.planning.optimize import Layout, Settings, layouts

SMALL_FILE_THRESHOLD_BYTES = "small-file-threshold-bytes"
SMALL_FILE_THRESHOLD_BYTES_DEFAULT = ""  # empty: 75% of write.target-file-size-bytes


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    table = args.table()
    target = table.target_file_size_bytes
    threshold = args.options[SMALL_FILE_THRESHOLD_BYTES] or small_file_threshold(target)
    context.progress(f"reading file metadata of {table.name}")
    from sparkext.procedures.tiered_optimize import CLUSTER_BY_PROPERTY, parse_columns

    cluster_by = parse_columns(table.prop(CLUSTER_BY_PROPERTY))
    partitions, files = table_files(context.spark, table, threshold, cluster_by)
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
    cdc = _cdc_state(context, table.name)
    return [
        (
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
        )
        for p, score in scored
    ]


def _cdc_state(context: Context, name: str) -> tuple[Any, Any, Any]:
    """(source time, source position, complete through) of the table's freshest ingest job
    (cdc_lag's columns; the lag itself depends on the clock, cdc_lag has it); NULLs without."""
    from sparkext.actions.cdc.lag import table_lags
    from sparkext.planning.lag import table_lag
    from sparkext.planning.positions import readable
    from sparkext.procedures.cdc_lag import _time

    found = table_lag(table_lags(context.spark, name))
    if found is None:
        return None, None, None
    return (
        _time(found.commit.source_time_ms),
        readable(found.commit.position),
        _time(found.complete_through_ms),
    )


def _layouts(table, files, cluster_by) -> dict[str | None, Layout]:
    """Level mix and clustering depth per partition (partition JSON as in ``files``)."""
    settings = Settings(
        small_file_bytes=max(1, table.target_file_size_bytes // 8), cluster_columns=cluster_by
    )

    def body(partition: str) -> str | None:
        json_text = partition.split(":", 1)[1]
        return None if json_text == "{}" else json_text

    return layouts(files, settings, body)


def _empty_unpartitioned():
    from sparkext.iceberg.files import PartitionFiles

    return PartitionFiles(None, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, None)


ROUTINE = Routine(
    writes=False,
    name="table_health",
    doc="Per-partition file counts, sizes, small files, delete files and a 0-100 health score.",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    params=(
        Param("table", ParamType.TABLE, "Iceberg table to inspect, e.g. 'lake.db.t'", True),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=(
        Option(
            SMALL_FILE_THRESHOLD_BYTES,
            SMALL_FILE_THRESHOLD_BYTES_DEFAULT,
            "data files below this size are small (bytes, or 96MB; default: 75% of "
            "write.target-file-size-bytes)",
            or_empty(parse_bytes),
        ),
    ),
    output=(
        OutputColumn("partition", "string", "partition values as JSON; NULL when unpartitioned"),
        OutputColumn("data_files", "bigint", "live data files"),
        OutputColumn("data_bytes", "bigint", "bytes in live data files"),
        OutputColumn("small_files", "bigint", "data files below the small-file threshold"),
        OutputColumn("position_delete_files", "bigint", "position-delete files (not DVs)"),
        OutputColumn("position_delete_records", "bigint", "rows deleted by position-delete files"),
        OutputColumn("equality_delete_files", "bigint", "equality-delete files"),
        OutputColumn("equality_delete_records", "bigint", "rows in equality-delete files"),
        OutputColumn("deletion_vectors", "bigint", "deletion vectors (format v3)"),
        OutputColumn("deletion_vector_records", "bigint", "rows deleted by deletion vectors"),
        OutputColumn("delete_bytes", "bigint", "bytes of all delete files and DVs"),
        OutputColumn("data_records", "bigint", "rows in data files, deleted ones included"),
        OutputColumn(
            "live_rows",
            "bigint",
            "data rows minus position/DV-deleted rows (equality deletes are not subtracted)",
        ),
        OutputColumn("last_commit_time", "timestamp", "last commit that touched the partition"),
        OutputColumn("health_score", "int", "0-100 partition score (docs: table_health)"),
        OutputColumn("snapshot_count", "bigint", "snapshots the table retains"),
        OutputColumn("table_health_score", "int", "0-100 score of the whole table"),
        OutputColumn(
            "level0_bytes",
            "bigint",
            "bytes of writers' files and L0 output (not clustered yet; tiered_optimize)",
        ),
        OutputColumn("level1_bytes", "bigint", "bytes clustered by L1 runs"),
        OutputColumn("level2_bytes", "bigint", "bytes re-clustered by L2 runs"),
        OutputColumn("optimized_share", "double", "(level1 + level2) / all data bytes"),
        OutputColumn(
            "clustering_depth",
            "double",
            "files a point lookup on one cluster column "
            "opens, on average (1.0 ideal; NULL without sparkext.optimize.cluster-by)",
        ),
        OutputColumn(
            "cdc_source_time",
            "timestamp",
            "CDC tables: newest source commit time applied (cdc_lag); NULL otherwise",
        ),
        OutputColumn(
            "cdc_source_position",
            "string",
            "CDC tables: newest source position applied, as the connector writes it",
        ),
        OutputColumn(
            "cdc_complete_through",
            "timestamp",
            "CDC tables: the lake holds every source change up to here (heartbeats included; "
            "cdc_lag has the lag)",
        ),
    ),
    run=run,
)
