"""CALL sparkext.bootstrap_cdc(table, source [, options]): copy a large source table into a new
CDC table at one consistent point, recorded so that ingest_cdc goes on from exactly there (see
:mod:`sparkext.actions.cdc.bootstrap`).

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
    parse_count,
    parse_names,
)
from sparkext.procedures.reconcile import CONNECTION_OPTIONS, CONNECTION_PREFIX, _connection


def parse_key(text: str) -> list[str]:
    """Comma-separated key columns, or none.

    >>> parse_key("id, region"), parse_key("")
    (['id', 'region'], [])
    """
    return parse_names(text) if text.strip() else []


def _is_database(context: Context, source: str) -> bool:
    if source.lower().startswith("jdbc:"):
        return True
    return bool(context.spark.conf.get(f"{CONNECTION_PREFIX}{source}.url", None))


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.cdc.bootstrap import (
        Settings,
        bootstrap_dump,
        bootstrap_mysql,
        bootstrap_postgres,
    )
    from sparkext.errors import ProcedureArgumentError
    from sparkext.iceberg.jdbc import Pool, dialect_of

    options, source = args.options, args["source"]
    settings = Settings(
        table=args["table"],
        source_table=options["source-table"],
        segments=max(1, options["segments"]),
        slot=options["slot"],
        publication=options["publication"],
        fetch_size=max(1, options["fetch-size"]),
        primary_key=tuple(options["primary-key"]),
        position=options["position"],
        unsigned_bigint=options["bigint-unsigned-handling"].strip().lower(),
    )
    if not _is_database(context, source):
        result = bootstrap_dump(context.spark, settings, source, context.progress)
    else:
        url, properties = _connection(context, source, options)
        if settings.position:
            raise ProcedureArgumentError(
                "position => is the point of a dump; a database source is copied at a point "
                "bootstrap_cdc takes itself: leave the position option out."
            )
        copy = bootstrap_postgres if dialect_of(url) == "postgres" else bootstrap_mysql
        pool = Pool(context.spark, url, properties, 2)
        try:
            result = copy(context.spark, settings, url, properties, pool, context.progress)
        finally:
            pool.close()
    return [
        (
            result.rows,
            result.segments,
            result.source_position,
            result.consistent_point,
            result.snapshot_id,
            result.slot,
            result.publication,
            round(result.seconds, 3),
            round(result.rows_per_second, 1),
        )
    ]


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
    options=(
        Option(
            "source-table",
            "",
            "the source table: schema.table (PostgreSQL), database.table (MySQL)",
        ),
        *CONNECTION_OPTIONS,
        Option("segments", "16", "key ranges read in parallel (Spark tasks)", parse_count),
        Option("slot", "debezium", "the replication slot to create (Debezium's slot.name)"),
        Option(
            "publication",
            "dbz_publication",
            "the publication Debezium reads (publication.name); created for the table if missing",
        ),
        Option("fetch-size", "10000", "rows per JDBC fetch", parse_count),
        Option(
            "position",
            "",
            "a dump's point: a PostgreSQL LSN ('0/1D420E8') or MySQL 'binlog-file:pos'",
        ),
        Option("primary-key", "", "a dump's key column(s), comma-separated", parse_key),
        Option(
            "bigint-unsigned-handling",
            "long",
            "MySQL: the connector's bigint.unsigned.handling.mode (long or precise), so the "
            "copy types bigint unsigned as its events do",
        ),
    ),
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
