"""CALL sparkext.create_index(table, name, type, column [, options, if_not_exists, build]).

Also ``CREATE INDEX [IF NOT EXISTS] name ON [TABLE] t USING type (column) [OPTIONS (...)]``
(:mod:`sparkext.routing.index_statements` binds the statement to this routine).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.skipping`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import skipping as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    declared = action.create_index(
        context,
        args.table(),
        args["name"],
        args["type"],
        args["column"],
        args["options"],
        if_not_exists=bool(args["if_not_exists"]),
        build=bool(args["build"]),
    )
    return [declared.row()]


ROUTINE = Routine(
    name="create_index",
    doc="Declare a file-level skipping index on one column of an Iceberg table (CREATE INDEX).",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.events'", True),
        Param("name", ParamType.STRING, "the index's name, e.g. 'request_id_bloom'", True),
        Param(
            "type",
            ParamType.STRING,
            "bloom_filter, bitmap, bloom_range_filter, token_bloom_filter, token_bitmap, "
            "ngram_bloom_filter or ngram_bitmap",
            True,
        ),
        Param("column", ParamType.STRING, "the top-level column it covers", True),
        Param(
            "options",
            ParamType.STRING_MAP,
            "the type's options, e.g. map('fpp', '0.01') (guide: skipping indexes)",
            default={},
        ),
        Param(
            "if_not_exists",
            ParamType.BOOLEAN,
            "an index of that name already declared is left as it is instead of an error",
            default=False,
        ),
        Param(
            "build",
            ParamType.BOOLEAN,
            "also build it now for every live data file (as build_indexes does)",
            default=False,
        ),
    ),
    output=(
        OutputColumn("name", "string", "the index"),
        OutputColumn("type", "string", "its type"),
        OutputColumn("column", "string", "the column it covers"),
        OutputColumn("options", "string", "every option with its value, as JSON"),
        OutputColumn(
            "result",
            "string",
            "what was done: declared (built by tiered_optimize, the service or build_indexes), "
            "declared and built, or already exists",
        ),
    ),
    run=run,
)
