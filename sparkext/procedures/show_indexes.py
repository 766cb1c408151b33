"""CALL sparkext.show_indexes(table): the declared skipping indexes and their coverage.

Also ``SHOW INDEXES (FROM | IN | ON) t`` and ``SELECT * FROM sparkext.show_indexes('t')``.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.skipping`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import skipping as action
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
    return [state.row() for state in action.show_indexes(context, args.table())]


ROUTINE = Routine(
    writes=False,
    name="show_indexes",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    doc="The table's skipping indexes: type, column, options, and how many live data files "
    "the current index object covers (SHOW INDEXES).",
    params=(Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.events'", True),),
    output=(
        OutputColumn("name", "string", "the index"),
        OutputColumn("type", "string", "its type (NULL: the declaration does not parse)"),
        OutputColumn("column", "string", "the column it covers"),
        OutputColumn("options", "string", "every option with its value, as JSON"),
        OutputColumn("indexed_files", "bigint", "live data files the current index object lists"),
        OutputColumn("live_files", "bigint", "live data files of the current snapshot"),
        OutputColumn("coverage", "double", "indexed_files / live_files (NULL: no live data file)"),
        OutputColumn("index_bytes", "bigint", "bytes of its blob (NULL: not built yet)"),
        OutputColumn(
            "index_snapshot_id",
            "bigint",
            "the snapshot the index object belongs to (the current one or an ancestor)",
        ),
    ),
    run=run,
)
