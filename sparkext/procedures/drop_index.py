"""CALL sparkext.drop_index(table, name [, if_exists]).

Also ``DROP INDEX [IF EXISTS] name ON [TABLE] t``
(:mod:`sparkext.routing.index_statements` binds the statement to this routine).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.skipping`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import skipping as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    dropped = action.drop_index(
        context, args.table(), args["name"], if_exists=bool(args["if_exists"])
    )
    return [dropped.row()]


ROUTINE = Routine(
    name="drop_index",
    doc="Drop a skipping index's declaration; queries stop using it at once (DROP INDEX).",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.events'", True),
        Param("name", ParamType.STRING, "the index to drop", True),
        Param(
            "if_exists",
            ParamType.BOOLEAN,
            "a missing index is not an error",
            default=False,
        ),
    ),
    output=(
        OutputColumn("name", "string", "the index"),
        OutputColumn("result", "string", "dropped, or did not exist (IF EXISTS)"),
    ),
    run=run,
)
