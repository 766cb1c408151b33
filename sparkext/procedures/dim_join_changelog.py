"""SELECT … FROM sparkext.dim_join_changelog(facts, dimension, on [, fact_time] [, mode]
[, options]): facts joined with a dimension as of each fact's time, or as of one snapshot.

``mode => 'event'`` (the default when ``fact_time`` is given): each fact joins the dimension's
version valid at the fact's time — the last change at or before it. ``'processing'``: every fact
joins one snapshot (option ``as-of``; default the current one). Streaming jobs get the same join
from ``JOIN dim FOR SYSTEM_TIME AS OF f.ts`` with the dimension's state kept in executor memory
(:mod:`sparkext.streaming.dim_state`). How the batch join works:
:mod:`sparkext.actions.history.dim_join`.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.history.dim_join`, which does the
work and declares the options).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.actions.history import dim_join as action
from sparkext.declarations import BoundArgs, Context, Kind, Param, ParamType, Routine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run(context: Context, args: BoundArgs) -> DataFrame:
    request = action.request_of(
        args["facts"],
        args.table("dimension"),
        args["on"],
        args["fact_time"],
        args["mode"],
        args.options,
    )
    return action.dim_join(context.spark, request, progress=context.progress)


ROUTINE = Routine(
    writes=False,
    name="dim_join_changelog",
    doc="Facts joined with a dimension as of each fact's time (event) or one snapshot.",
    kind=Kind.FUNCTION,
    params=(
        Param(
            "facts",
            ParamType.STRING,
            "the facts: a table name ('lake.dw.clicks') or a query in a string",
            True,
        ),
        Param(
            "dimension",
            ParamType.TABLE,
            "Iceberg dimension table: an ingest_cdc table (versions by event time) or any "
            "table (versions by commit time)",
            True,
        ),
        Param(
            "on",
            ParamType.STRING,
            "join keys: 'item_id', 'item_id, region' or 'f.item = d.item_id'",
            True,
        ),
        Param(
            "fact_time",
            ParamType.STRING,
            "the facts' time column (event mode; default the facts table's property "
            "'sparkext.event-time-column')",
        ),
        Param(
            "mode",
            ParamType.STRING,
            "'event' (the version valid at each fact's time; default when fact_time is given) "
            "or 'processing' (one snapshot)",
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.OPTIONS,
    output=(),  # the facts' columns, the dimension's chosen columns, the audit columns
    run=run,
)
