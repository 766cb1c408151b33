"""CALL sparkext.reconcile(table, source [, options]): is the lake table equal to its source
database, and if not, which keys differ (see :mod:`sparkext.actions.cdc.reconcile`).

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from typing import Any

from sparkext.declarations import (
    BoundArgs,
    Context,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    parse_columns,
    parse_count,
    parse_duration,
)

CONNECTION_PREFIX = "spark.sparkext.connection."


def _connection(context: Context, source: str, options: Any) -> tuple[str, dict[str, str]]:
    """(JDBC URL, properties) of ``source``: a URL, or a connection named in the session conf
    (``spark.sparkext.connection.<name>.url`` / ``.user`` / ``.password``)."""
    from sparkext.errors import ProcedureArgumentError

    conf = context.spark.conf
    if source.lower().startswith("jdbc:"):
        url, user, password = source, options["user"], options["password"]
    else:
        prefix = f"{CONNECTION_PREFIX}{source}."
        url = conf.get(f"{prefix}url", None)
        if not url:
            raise ProcedureArgumentError(
                f"source => '{source}' is neither a JDBC URL nor a named connection; write "
                "source => 'jdbc:postgresql://host:5432/db', or set "
                f"{prefix}url (and .user, .password) in the session."
            )
        user = options["user"] or conf.get(f"{prefix}user", "") or ""
        password = options["password"] or conf.get(f"{prefix}password", "") or ""
    properties = {k: v for k, v in (("user", user), ("password", password)) if v}
    return url, properties


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.cdc.reconcile import Settings, reconcile
    from sparkext.errors import ProcedureArgumentError
    from sparkext.iceberg.cdc_table import CdcTable
    from sparkext.iceberg.jdbc import Pool, dialect_of

    table, options = args.table(), args.options
    url, properties = _connection(context, args["source"], options)
    dialect = dialect_of(url)
    if not options["source-table"]:
        raise ProcedureArgumentError(
            "reconcile needs the source table: add options => map('source-table', "
            "'schema.table') (PostgreSQL) or 'database.table' (MySQL)."
        )
    key = CdcTable(context.spark, table.name).key()
    if not key:
        raise ProcedureArgumentError(
            f"{table.name} has no primary key (Iceberg identifier fields); reconcile compares "
            "tables key by key (ingest_cdc sets them)."
        )
    settings = Settings(
        source_table=options["source-table"],
        segments=max(1, options["segments"]),
        leaf_rows=max(1, options["leaf-rows"]),
        parallelism=max(1, options["parallelism"]),
        catch_up_timeout_s=options["catch-up-timeout"] / 1000,
        rounds=max(1, options["rounds"]),
        report=options["max-report"],
        max_keys=max(1, options["max-keys"]),
        columns=options["columns"],
    )
    pool = Pool(context.spark, url, properties, settings.parallelism)
    try:
        result = reconcile(
            context.spark, table.name, key, pool, settings, dialect, context.progress
        )
    finally:
        pool.close()
    return [
        (
            result.equal,
            result.source_rows,
            result.lake_rows,
            result.segments,
            result.segments_differing,
            result.ranges_not_listed,
            result.missing,
            result.extra,
            result.duplicate,
            result.stale,
            result.unconfirmed,
            ",".join(result.compared_columns),
            ",".join(result.not_compared),
            result.source_position,
            result.lake_position,
            [  # structs as dicts: the result crosses as JSON (routing.local_rows)
                {"key": d.key, "kind": d.kind, "columns": d.columns, "confirmed": d.confirmed}
                for d in result.differences
            ],
            result.duration_ms,
        )
    ]


# how a routine that reads a source database logs in (reconcile, bootstrap_cdc)
CONNECTION_OPTIONS = (
    Option("user", "", "database user (default: the connection's)"),
    Option(
        "password",
        "",
        "database password (in the statement's text; a named connection keeps it out)",
    ),
)


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
    options=(
        Option("source-table", "", "the source table: schema.table or database.table"),
        *CONNECTION_OPTIONS,
        Option("segments", "32", "key ranges of the first pass", parse_count),
        Option(
            "leaf-rows", "20000", "a differing range this small is listed key by key", parse_count
        ),
        Option("parallelism", "4", "source queries (connections) at a time", parse_count),
        Option(
            "catch-up-timeout",
            "60 seconds",
            "how long a recheck waits for the lake to reach the source's position",
            parse_duration,
        ),
        Option("rounds", "3", "rechecks of the differing keys at most", parse_count),
        Option(
            "columns",
            "",
            "compare only these columns (default: all both sides have)",
            parse_columns,
        ),
        Option(
            "max-keys",
            "1000000",
            "keys listed from differing ranges at most; ranges beyond are counted, not listed",
            parse_count,
        ),
        Option("max-report", "1000", "differences listed in the result at most", parse_count),
    ),
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
