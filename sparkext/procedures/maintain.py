"""CALL sparkext.maintain(table [, options, dry_run]): apply the table's maintenance policy.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.maintain`, which does the work and
declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import maintain
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    given = dict(args["options"] or {})
    result = maintain.maintain(context, args.table(), given, bool(args["dry_run"]))
    return [action.row() for action in result.actions]


ROUTINE = Routine(
    name="maintain",
    doc="Apply the table's maintenance policy (sparkext.maintenance.* properties): expire "
    "snapshots nothing depends on, remove dangling deletes, rewrite manifests when planning "
    "would benefit, remove orphan files.",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.orders'", True),
        Param("options", ParamType.STRING_MAP, "map of policy options, see below", default={}),
        Param("dry_run", ParamType.BOOLEAN, "decide only: report what would be done", False, False),
    ),
    options=maintain.OPTIONS,
    output=(
        OutputColumn(
            "action",
            "string",
            "expire_snapshots, remove_dangling_deletes, rewrite_manifests or remove_orphan_files",
        ),
        OutputColumn(
            "outcome", "string", "ok, skipped (nothing to do), planned (dry run) or failed"
        ),
        OutputColumn(
            "reason", "string", "what the policy measured and decided, and what holds kept"
        ),
        OutputColumn(
            "items",
            "bigint",
            "snapshots expired, delete files removed, manifests rewritten or orphan files found",
        ),
        OutputColumn("files_deleted", "bigint", "files deleted from storage"),
        OutputColumn("bytes_deleted", "bigint", "their bytes"),
        OutputColumn("files_written", "bigint", "manifests written"),
        OutputColumn("snapshot_id", "bigint", "the commit the action made (NULL: none)"),
        OutputColumn("duration_ms", "bigint", "wall-clock time of the action"),
        OutputColumn("error", "string", "why the action failed (NULL: it did not)"),
    ),
    run=run,
    failure_column="error",
)
