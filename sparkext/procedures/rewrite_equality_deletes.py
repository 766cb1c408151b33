"""CALL sparkext.rewrite_equality_deletes(table [, where, options, dry_run]).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.rewrite_equality_deletes`, which
does the work and declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import rewrite_equality_deletes as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = action.rewrite_equality_deletes(
        context, args.table(), args["where"], args.options, dry_run=bool(args["dry_run"])
    )
    return [result.row()]


ROUTINE = Routine(
    name="rewrite_equality_deletes",
    doc="Convert equality deletes to position deletes (v2) or deletion vectors (v3); merge small "
    "position-delete files.",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.orders'", True),
        Param(
            "where",
            ParamType.STRING,
            "predicate on partition columns: only partitions wholly inside it are converted",
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
        Param("dry_run", ParamType.BOOLEAN, "plan only: report what would change", default=False),
    ),
    options=action.OPTIONS,
    output=(
        OutputColumn("equality_delete_files_removed", "bigint", "equality-delete files converted"),
        OutputColumn("position_delete_files_added", "bigint", "Parquet position-delete files"),
        OutputColumn("deletion_vectors_added", "bigint", "deletion vectors (format v3)"),
        OutputColumn(
            "positions_deleted", "bigint", "row positions in the added files (NULL: dry run)"
        ),
        OutputColumn(
            "position_delete_files_merged", "bigint", "existing position-delete files/DVs replaced"
        ),
        OutputColumn(
            "dangling_positions_removed",
            "bigint",
            "merged positions dropped: data file gone (dangling DVs count as merged)",
        ),
        OutputColumn("bytes_added", "bigint", "bytes of the added delete files"),
        OutputColumn(
            "equality_delete_files_remaining",
            "bigint",
            "eligible but left: max-files-per-commit, or unsupported",
        ),
        OutputColumn("commits", "bigint", "Iceberg commits made"),
        OutputColumn("snapshot_id", "bigint", "snapshot of the last commit (NULL: none)"),
        OutputColumn("duration_ms", "bigint", "wall-clock time"),
        OutputColumn("dry_run", "boolean", "true when nothing was committed by request"),
    ),
    run=run,
)
