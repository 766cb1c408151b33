"""CALL sparkext.reconcile(table, source [, options]): is the lake table equal to its source
database, and if not, which keys differ.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.cdc.reconcile`, which does the work
and declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.cdc import reconcile as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = action.reconcile_table(
        context.spark, args.table(), args["source"], args.options, context.progress
    )
    return [result.row()]


ROUTINE = Routine(
    writes=False,
    name="reconcile",
    doc="Compare a lake table with its source database key by key, lag-aware.",
    params=(
        Param("table", ParamType.TABLE, "the lake table (ingested by ingest_cdc)", True),
        Param(
            "source",
            ParamType.STRING,
            "JDBC URL of the source database, or a connection name "
            "(spark.sparkext.connection.<name>.url/.user/.password)",
            True,
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.OPTIONS,
    output=(
        OutputColumn("equal", "boolean", "no difference found"),
        OutputColumn("source_rows", "bigint", "rows of the source table"),
        OutputColumn("lake_rows", "bigint", "rows of the lake table (at the first pass)"),
        OutputColumn("segments", "bigint", "key ranges of the first pass"),
        OutputColumn("segments_differing", "bigint", "of them, ranges whose count or hash differ"),
        OutputColumn(
            "ranges_not_listed",
            "bigint",
            "differing key ranges not listed (max-keys reached): equal is false, keys unknown",
        ),
        OutputColumn("missing", "bigint", "keys in the source, not in the lake"),
        OutputColumn("extra", "bigint", "keys in the lake, not in the source"),
        OutputColumn("duplicate", "bigint", "keys on more than one lake row"),
        OutputColumn("stale", "bigint", "keys in both with other values"),
        OutputColumn(
            "unconfirmed",
            "bigint",
            "of them, differences the lake may only lag behind (it did not reach the source's "
            "position within catch-up-timeout)",
        ),
        OutputColumn("compared_columns", "string", "columns compared besides the key"),
        OutputColumn("not_compared", "string", "columns left out (type or absent on a side)"),
        OutputColumn("source_position", "string", "the source's log position at the start"),
        OutputColumn("lake_position", "string", "the lake's source position at the start"),
        OutputColumn(
            "differences",
            "array<struct<key:string,kind:string,columns:string,confirmed:boolean>>",
            "the differing keys (JSON of the key's values), kind, stale columns, confirmed",
        ),
        OutputColumn("duration_ms", "bigint", "wall-clock time"),
    ),
    run=run,
)
