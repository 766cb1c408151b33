"""CALL sparkext.ingest_cdc_database(namespace, source, checkpoint [, options]).

Every Debezium topic of a landing root (or of a Kafka topic pattern) into an Iceberg table of its
own in ``namespace``, created on first sight, each with its own commit per micro-batch, from one
Spark stream and one checkpoint (see sparkext.actions.cdc.database).

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from typing import Any

from sparkext.declarations import (
    BoundArgs,
    Context,
    Expected,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)
from sparkext.procedures import ingest_cdc

TABLE_NAME = "table-name"
TABLE_NAME_DEFAULT = "{table}"
TABLE_PREFIX = "table-prefix"
TABLE_PREFIX_DEFAULT = ""
TABLE_SUFFIX = "table-suffix"
TABLE_SUFFIX_DEFAULT = ""
INCLUDING_TABLES = "including-tables"
INCLUDING_TABLES_DEFAULT = ""
EXCLUDING_TABLES = "excluding-tables"
EXCLUDING_TABLES_DEFAULT = ""
PRIMARY_KEY = "primary-key"
PRIMARY_KEY_DEFAULT = ""
PRIMARY_KEY_PREFIX = "primary-key."


def _template(text: str) -> str:
    from sparkext.actions.cdc.topics import check_template

    try:
        return check_template(text)
    except ValueError as error:
        raise Expected(str(error).removeprefix("expected ")) from None


def _pattern(text: str):
    from sparkext.actions.cdc.topics import check_pattern

    try:
        return check_pattern(text)
    except ValueError as error:
        raise Expected(str(error).removeprefix("expected ")) from None


def _columns(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


def naming_from(options: Any) -> Any:
    from sparkext.actions.cdc.topics import Naming

    return Naming(
        template=options[TABLE_NAME],
        prefix=options[TABLE_PREFIX],
        suffix=options[TABLE_SUFFIX],
        including=options[INCLUDING_TABLES],
        excluding=options[EXCLUDING_TABLES],
    )


def keys_from(options: Any) -> Any:
    from sparkext.actions.cdc.database import Keys

    per_table = {
        key[len(PRIMARY_KEY_PREFIX) :].lower(): _columns(value)
        for key, value in options[PRIMARY_KEY_PREFIX].items()
    }
    return Keys(options[PRIMARY_KEY], per_table)


def settings_from(args: BoundArgs) -> Any:
    """Every table's ingest_cdc settings (the table and its checkpoint are set per table)."""
    values = {"table": "", "checkpoint": args["checkpoint"], "primary_key": "", "create": True}
    options = {**args.options, ingest_cdc.SOURCE_TABLE: ""}
    return ingest_cdc.settings_from(BoundArgs(values, options))


def after_table(context: Context, every_ms: int | None):
    """The ``optimize-every`` hook of each table (see ingest_cdc.between_batches)."""
    return lambda table: ingest_cdc.between_batches(context, table, every_ms)


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.cdc.database import ingest_database

    results = ingest_database(
        context.spark,
        settings_from(args),
        args["namespace"],
        ingest_cdc.source_location(args["source"]),
        naming_from(args.options),
        keys_from(args.options),
        max_files=args.options[ingest_cdc.MAX_FILES_PER_BATCH],
        progress=context.progress,
        after_table=after_table(context, args.options[ingest_cdc.OPTIMIZE_EVERY]),
    )
    return [
        (
            r.topic,
            r.table,
            r.created,
            r.metrics.events,
            r.metrics.inserted,
            r.metrics.updated,
            r.metrics.deleted,
            r.metrics.duplicates,
            r.metrics.late,
            r.metrics.rejected,
            r.metrics.files_missing,
            r.metrics.commits,
            r.metrics.batches_replayed,
            ingest_cdc._time(r.metrics.min_event_time_ms),
            ingest_cdc._time(r.metrics.max_event_time_ms),
            r.status,
        )
        for r in results
    ]


_TABLE_OPTIONS = tuple(o for o in ingest_cdc.ROUTINE.options if o.key != ingest_cdc.SOURCE_TABLE)

ROUTINE = Routine(
    name="ingest_cdc_database",
    doc="Ingest every Debezium topic of a landing root or Kafka pattern, one Iceberg table each.",
    params=(
        Param("namespace", ParamType.STRING, "namespace of the tables, e.g. 'lake.db'", True),
        Param(
            "source",
            ParamType.STRING,
            "landing root of a Kafka Connect sink (<root>/topics/<topic>/... or "
            "<root>/<topic>/...), or kafka:<topic regex>",
            True,
        ),
        Param(
            "checkpoint",
            ParamType.STRING,
            "one directory for the stream and every table's progress",
            True,
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=(
        Option(
            TABLE_NAME,
            TABLE_NAME_DEFAULT,
            "table name of a topic <prefix>.<db>.<table>, from {prefix}, {db} ({schema}: the "
            "same, PostgreSQL's schema), {table}, {topic}; lower-cased",
            _template,
        ),
        Option(TABLE_PREFIX, TABLE_PREFIX_DEFAULT, "text before every table name, e.g. 'ods_'"),
        Option(TABLE_SUFFIX, TABLE_SUFFIX_DEFAULT, "text after every table name"),
        Option(
            INCLUDING_TABLES,
            INCLUDING_TABLES_DEFAULT,
            "regex: only source tables whose name or <db>.<table> it matches (default: all)",
            _pattern,
        ),
        Option(
            EXCLUDING_TABLES,
            EXCLUDING_TABLES_DEFAULT,
            "regex: not the source tables whose name or <db>.<table> it matches",
            _pattern,
        ),
        Option(
            PRIMARY_KEY,
            PRIMARY_KEY_DEFAULT,
            "key column(s) of every new table whose events carry no Debezium key "
            "(default: the key)",
            _columns,
        ),
        Option(
            PRIMARY_KEY_PREFIX,
            "",
            "primary-key.<table>: the key column(s) of one table (its name without namespace)",
            prefix=True,
        ),
        *_TABLE_OPTIONS,
    ),
    output=(
        OutputColumn("topic", "string", "the Debezium topic (its directory under the root)"),
        OutputColumn("table", "string", "the Iceberg table it lands in (NULL: ignored)"),
        OutputColumn("created", "boolean", "whether this call created the table"),
        OutputColumn("events", "bigint", "change events read (an ignored topic: its records)"),
        OutputColumn("inserted", "bigint", "keys whose last change was c or r"),
        OutputColumn("updated", "bigint", "keys whose last change was u"),
        OutputColumn("deleted", "bigint", "keys whose last change was d"),
        OutputColumn("duplicates", "bigint", "events skipped: same key and source position"),
        OutputColumn("late", "bigint", "events older than the key's current version"),
        OutputColumn(
            "rejected", "bigint", "events written to <checkpoint>/tables/<table>/rejected"
        ),
        OutputColumn("files_missing", "bigint", "planned input files deleted before read"),
        OutputColumn("commits", "bigint", "Iceberg commits of the table (one per micro-batch)"),
        OutputColumn("batches_replayed", "bigint", "batches the table had committed (restart)"),
        OutputColumn("min_event_time", "timestamp", "earliest source.ts_ms applied"),
        OutputColumn("max_event_time", "timestamp", "latest source.ts_ms applied"),
        OutputColumn(
            "status",
            "string",
            "ok, no new events, <n> rejected, not created: ..., ignored: ... or excluded: ...",
        ),
    ),
    run=run,
)
