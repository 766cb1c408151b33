"""CALL sparkext.create_changelog_view(table => 'lake.db.t', ...): Iceberg's procedure, for every
table.

Iceberg's parameters, defaults and output (one column ``changelog_view``, the view's name):
switching from ``CALL lake.system.create_changelog_view(...)`` is a change of catalog name, and
it works on merge-on-read tables where Iceberg's view fails. The view is a session temp view of
:func:`sparkext.actions.history.changelog.changelog` (the rows are read when the view is queried;
the range is resolved, and bad arguments refused, when the procedure runs).

Floor: procedures (the SQL façade of
:func:`sparkext.actions.history.changelog.create_changelog_view`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.history import changelog as changelog_action
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    view = changelog_action.create_changelog_view(
        context.spark,
        args.table(),
        args["changelog_view"],
        changelog_action.range_request(args.options),
        compute_updates=args["compute_updates"],
        identifier_columns=args["identifier_columns"],
        net_changes=bool(args["net_changes"]),
        progress=context.progress,
    )
    return [view.row()]


ROUTINE = Routine(
    writes=False,
    name="create_changelog_view",
    doc="Iceberg's create_changelog_view for every table: a temp view of the changes.",
    kind=Kind.PROCEDURE,
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.t'", True),
        Param("changelog_view", ParamType.STRING, "view name (default: `<table>_changes`)"),
        Param("options", ParamType.STRING_MAP, "Iceberg's range options, below", default={}),
        Param(
            "compute_updates",
            ParamType.BOOLEAN,
            "UPDATE_BEFORE/UPDATE_AFTER pairs (default: true when identifier_columns is given)",
        ),
        Param(
            "identifier_columns",
            ParamType.STRING_ARRAY,
            "columns identifying a row (default: the table's identifier fields)",
        ),
        Param(
            "net_changes",
            ParamType.BOOLEAN,
            "only the net change of each row over the range",
            default=False,
        ),
    ),
    options=changelog_action.RANGE_OPTIONS,
    output=(OutputColumn("changelog_view", "string", "the temp view created"),),
    run=run,
)
