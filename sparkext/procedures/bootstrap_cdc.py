"""CALL sparkext.bootstrap_cdc(table, source [, options]): copy a large source table into a new
CDC table at one consistent point, recorded so that ingest_cdc goes on from exactly there.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.cdc.bootstrap`, which does the work
and declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.cdc import bootstrap as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = action.bootstrap(
        context.spark, args["table"], args["source"], args.options, context.progress
    )
    return [result.row()]


ROUTINE = Routine(
    name="bootstrap_cdc",
    doc="Copy a source table into a new CDC table at one consistent point ingest_cdc goes on from.",
    params=(
        Param("table", ParamType.STRING, "the lake table to create (or an empty one)", True),
        Param(
            "source",
            ParamType.STRING,
            "JDBC URL of the source database, a connection name "
            "(spark.sparkext.connection.<name>.url/.user/.password), or a dump: "
            "parquet:<path> or a table name",
            True,
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.OPTIONS,
    output=(
        OutputColumn("rows", "bigint", "rows copied"),
        OutputColumn("segments", "bigint", "key ranges (a dump: its partitions)"),
        OutputColumn(
            "source_position", "string", "the point as ingest_cdc orders it (its summary mark)"
        ),
        OutputColumn(
            "consistent_point", "string", "the source's text of it: slot LSN or stated position"
        ),
        OutputColumn("snapshot_id", "bigint", "the Iceberg snapshot of the copy"),
        OutputColumn("slot", "string", "the replication slot created (null for a dump)"),
        OutputColumn("publication", "string", "the publication the slot's changes need"),
        OutputColumn("seconds", "double", "wall-clock time"),
        OutputColumn("rows_per_second", "double", "rows copied per second"),
    ),
    run=run,
)
