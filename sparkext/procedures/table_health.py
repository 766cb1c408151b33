"""CALL sparkext.table_health(table => 'lake.db.t'): per-partition file and delete health.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.table_health`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import table_health as action
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)

SMALL_FILE_THRESHOLD_BYTES = action.SMALL_FILE_THRESHOLD_BYTES


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    partitions = action.table_health(
        context.spark,
        args.table(),
        args.options[SMALL_FILE_THRESHOLD_BYTES],
        context.progress,
    )
    return [p.row() for p in partitions]


ROUTINE = Routine(
    writes=False,
    name="table_health",
    doc="Per-partition file counts, sizes, small files, delete files and a 0-100 health score.",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    params=(
        Param("table", ParamType.TABLE, "Iceberg table to inspect, e.g. 'lake.db.t'", True),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.OPTIONS,
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
        OutputColumn(
            "indexes",
            "string",
            "the table's skipping indexes, e.g. 'rid (bloom_filter on request_id)' (NULL: none)",
        ),
        OutputColumn(
            "index_bytes", "bigint", "bytes of the current index object's indexes (NULL: none)"
        ),
        OutputColumn(
            "index_coverage",
            "double",
            "share of the partition's live data files every index lists (NULL: no index; "
            "build_indexes fills it)",
        ),
    ),
    run=run,
)
