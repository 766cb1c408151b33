"""SELECT … FROM sparkext.dim_join_changelog(facts, dimension, on [, fact_time] [, mode]
[, options]): facts joined with a dimension as of each fact's time, or as of one snapshot.

``mode => 'event'`` (the default when ``fact_time`` is given): each fact joins the dimension's
version valid at the fact's time — the last change at or before it. ``'processing'``: every fact
joins one snapshot (option ``as-of``; default the current one). Streaming jobs get the same join
from ``JOIN dim FOR SYSTEM_TIME AS OF f.ts`` with the dimension's state kept in executor memory
(:mod:`sparkext.streaming.dim_state`). How the batch join works:
:mod:`sparkext.actions.history.dim_join`.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    Option,
    Param,
    ParamType,
    Routine,
    one_of,
    or_empty,
    parse_boolean,
    parse_names,
)
from sparkext.errors import ProcedureArgumentError
from sparkext.planning.dim_join import MODES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

JOIN = "join"
JOIN_DEFAULT = "left"
COLUMNS = "columns"
COLUMNS_DEFAULT = ""  # every dimension column but the join keys
COLUMN_PREFIX = "column-prefix"
COLUMN_PREFIX_DEFAULT = ""
AUDIT = "audit"
AUDIT_DEFAULT = "false"
AS_OF = "as-of"
AS_OF_DEFAULT = ""  # processing mode: the current snapshot


def run(context: Context, args: BoundArgs) -> DataFrame:
    from sparkext.actions.history.dim_join import DimJoinRequest, dim_join

    options = args.options
    mode = (args["mode"] or ("event" if args["fact_time"] else "processing")).lower()
    if mode not in MODES:
        raise ProcedureArgumentError(
            f"mode '{args['mode']}' is not one of {', '.join(MODES)}; 'event' joins the version "
            "valid at each fact's time, 'processing' one snapshot of the dimension."
        )
    if options[AS_OF] and mode == "event":
        raise ProcedureArgumentError(
            f"option as-of '{options[AS_OF]}' pins one snapshot, which is processing mode; "
            "drop it, or pass mode => 'processing'."
        )
    request = DimJoinRequest(
        facts=args["facts"],
        dimension=args.table("dimension"),
        on=args["on"],
        fact_time=args["fact_time"] or None,
        mode=mode,
        join=options[JOIN],
        columns=options[COLUMNS],
        prefix=options[COLUMN_PREFIX],
        audit=options[AUDIT],
        as_of=options[AS_OF],
    )
    return dim_join(context.spark, request, progress=context.progress)


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
    options=(
        Option(
            JOIN,
            JOIN_DEFAULT,
            "'left' keeps facts without a version, 'inner' drops them",
            one_of("left", "inner"),
        ),
        Option(
            COLUMNS,
            COLUMNS_DEFAULT,
            "dimension columns to return, comma-separated (default: all but the join keys)",
            or_empty(parse_names),
        ),
        Option(COLUMN_PREFIX, COLUMN_PREFIX_DEFAULT, "prefix for the returned dimension columns"),
        Option(
            AUDIT,
            AUDIT_DEFAULT,
            "add _dim_version (the source position or snapshot id joined) and _dim_valid_from "
            "(when that version's change happened)",
            parse_boolean,
        ),
        Option(
            AS_OF,
            AS_OF_DEFAULT,
            "processing mode: the snapshot to join, a snapshot id, tag, branch or time "
            "(default: the current snapshot)",
        ),
    ),
    output=(),  # the facts' columns, the dimension's chosen columns, the audit columns
    run=run,
)
