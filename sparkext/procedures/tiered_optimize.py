"""CALL sparkext.tiered_optimize(table [, where, levels, cluster_by, curve, options, dry_run]).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.optimize`, which does the work and
declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import optimize
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = optimize.optimize(
        context,
        args.table(),
        where=args["where"],
        levels=args["levels"],
        cluster_by=args["cluster_by"],
        curve=args["curve"],
        options=args["options"] or {},
        dry_run=bool(args["dry_run"]),
    )
    rows = [group.row() for group in result.groups]
    if result.indexes is not None:  # the skipping-index build, the run's last step
        rows.append(result.indexes.row())
    return rows


CLUSTER_BY_PROPERTY = optimize.CLUSTER_BY_PROPERTY
CURVE_PROPERTY = optimize.CURVE_PROPERTY

ROUTINE = Routine(
    name="tiered_optimize",
    doc="Tiered optimisation per partition: L0 small-file merge + equality-delete conversion, "
    "L1 clustering of new data, L2 re-clustering of the whole partition.",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.orders'", True),
        Param(
            "where",
            ParamType.STRING,
            "predicate on partition columns: only partitions wholly inside it are optimised",
        ),
        Param(
            "levels",
            ParamType.STRING,
            "levels to run now whatever their triggers, e.g. 'l0,l1' (default: every level "
            "where its trigger says so)",
        ),
        Param(
            "cluster_by",
            ParamType.STRING,
            "cluster columns for L1/L2, e.g. 'user_id,event_time' (default: table property "
            f"{CLUSTER_BY_PROPERTY}; none: L0 only)",
        ),
        Param(
            "curve",
            ParamType.STRING,
            "auto (linear for one column, hilbert for more), zorder, hilbert or linear "
            f"(default: table property {CURVE_PROPERTY}, else auto)",
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
        Param("dry_run", ParamType.BOOLEAN, "plan only: report what would run", default=False),
    ),
    options=optimize.OPTIONS,
    output=(
        OutputColumn(
            "partition",
            "string",
            "partition as JSON (NULL: unpartitioned, or the skipping-index build)",
        ),
        OutputColumn(
            "level",
            "int",
            "0: merge / delete conversion, 1: cluster new data, 2: re-cluster the partition; "
            "NULL: the skipping-index build, the last step (tables that declare indexes)",
        ),
        OutputColumn(
            "reason", "string", "the trigger that chose this group (the index build: its summary)"
        ),
        OutputColumn(
            "input_files", "bigint", "data files rewritten (the index build: data files read)"
        ),
        OutputColumn("input_bytes", "bigint", "bytes of the rewritten data files"),
        OutputColumn(
            "output_files",
            "bigint",
            "data files written (NULL: dry run; the index build: index objects written)",
        ),
        OutputColumn(
            "output_bytes", "bigint", "bytes written (NULL: dry run; the index build: index bytes)"
        ),
        OutputColumn(
            "deletes_removed",
            "bigint",
            "equality-delete files converted plus DVs / "
            "file-scoped position deletes dropped with their data files",
        ),
        OutputColumn(
            "snapshot_id",
            "bigint",
            "the group's commit (NULL: dry run or failed; the index build: the snapshot its "
            "index object belongs to)",
        ),
        OutputColumn("duration_ms", "bigint", "wall-clock time of the group"),
        OutputColumn("error", "string", "why the group was not committed (NULL: committed)"),
    ),
    run=run,
    failure_column="error",
)
