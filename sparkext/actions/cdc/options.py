"""The options of ``ingest_cdc`` and ``ingest_cdc_database``, and the settings built from them.

Floor: actions. The procedures declare these options (``options => map(...)``) and the Python
API binds its ``options`` dict with them (:func:`bind`, :func:`bind_database`: the same
sentences); :func:`settings_from`, :func:`database_settings_from`, :func:`naming_from` and
:func:`keys_from` turn typed values (bound options included) into what
:mod:`sparkext.actions.cdc.ingest_cdc` runs with. Light on purpose: no Spark, no pipeline (the
procedures import it when the registry loads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sparkext.actions.cdc.model import Keys, Settings
from sparkext.actions.cdc.topics import Naming, check_pattern, check_template
from sparkext.declarations import (
    Expected,
    Option,
    bind_declared,
    one_of,
    or_empty,
    parse_boolean,
    parse_columns,
    parse_count,
    parse_duration,
)
from sparkext.executors.cdc.partitioning import parse_partition_by
from sparkext.fs import absolute

INGEST_CDC = "sparkext.ingest_cdc"
INGEST_CDC_DATABASE = "sparkext.ingest_cdc_database"

SOURCE_TABLE = "source-table"
SOURCE_TABLE_DEFAULT = ""
FAIL_ON_REJECT = "fail-on-reject"
FAIL_ON_REJECT_DEFAULT = "false"
MAX_FILES_PER_BATCH = "max-files-per-batch"
MAX_FILES_PER_BATCH_DEFAULT = "1000"
KEY_CACHE_BATCHES = "key-cache-batches"
KEY_CACHE_BATCHES_DEFAULT = "100"
LOOKUP_IN_LIST_MAX = "lookup-in-list-max"
LOOKUP_IN_LIST_MAX_DEFAULT = "10000"
INPUT_FORMAT = "input-format"
INPUT_FORMAT_DEFAULT = "json-lines"
INPUT_FORMATS = ("json-lines", "json-files")
PARTITION_BY = "partition-by"
PARTITION_BY_DEFAULT = ""
KAFKA_PREFIX = "kafka."
STARTING_OFFSETS = "starting-offsets"
STARTING_OFFSETS_DEFAULT = "earliest"
MAX_OFFSETS_PER_TRIGGER = "max-offsets-per-trigger"
MAX_OFFSETS_PER_TRIGGER_DEFAULT = ""
UNAVAILABLE_PLACEHOLDER = "unavailable-value-placeholder"
UNAVAILABLE_PLACEHOLDER_DEFAULT = "__debezium_unavailable_value"
VARIABLE_SCALE_DECIMAL = "variable-scale-decimal"
VARIABLE_SCALE_DECIMAL_DEFAULT = "decimal(38,10)"
OPTIMIZE_EVERY = "optimize-every"
OPTIMIZE_EVERY_DEFAULT = ""
HEARTBEAT_SOURCE = "heartbeat-source"
HEARTBEAT_SOURCE_DEFAULT = ""

# ingest_cdc_database's own: how topics become table names, and keys for tables without one
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


def partition_by(text: str) -> tuple[tuple[str, str, int | None], ...]:
    """The ``partition-by`` option: fields on key columns (``bucket(16, id)``, ...)."""
    try:
        return parse_partition_by(text)
    except ValueError:
        raise Expected(
            "partition fields such as id, bucket(16, id) or truncate(4, code), separated by commas"
        ) from None


def variable_scale_decimal(text: str) -> str:
    """``string``, or ``decimal(p,s)`` with 1 <= p <= 38 and 0 <= s <= p (as a Spark type name).

    >>> variable_scale_decimal("DECIMAL(20, 4)")
    'decimal(20,4)'
    """
    compact = text.strip().lower().replace(" ", "")
    if compact == "string":
        return compact
    match = re.fullmatch(r"decimal\((\d+),(\d+)\)", compact)
    if not match or not 0 < int(match.group(1)) <= 38 or int(match.group(2)) > int(match.group(1)):
        raise Expected("string or decimal(p,s) with 1 <= p <= 38 and s <= p")
    return f"decimal({int(match.group(1))},{int(match.group(2))})"


def template(text: str) -> str:
    """The ``table-name`` option (:func:`~sparkext.actions.cdc.topics.check_template`)."""
    try:
        return check_template(text)
    except ValueError as error:
        raise Expected(str(error).removeprefix("expected ")) from None


def pattern(text: str) -> re.Pattern[str] | None:
    """``including-tables`` / ``excluding-tables``: a regular expression, empty for none."""
    try:
        return check_pattern(text)
    except ValueError as error:
        raise Expected(str(error).removeprefix("expected ")) from None


OPTIONS: tuple[Option, ...] = (
    Option(
        SOURCE_TABLE,
        SOURCE_TABLE_DEFAULT,
        "only events of this source db.table; others are rejected (default: any)",
    ),
    Option(
        FAIL_ON_REJECT,
        FAIL_ON_REJECT_DEFAULT,
        "stop (commit nothing of the batch) when an event is rejected",
        parse_boolean,
    ),
    Option(
        MAX_FILES_PER_BATCH,
        MAX_FILES_PER_BATCH_DEFAULT,
        "input files per micro-batch (one commit each)",
        parse_count,
    ),
    Option(
        OPTIMIZE_EVERY,
        OPTIMIZE_EVERY_DEFAULT,
        "run tiered_optimize's L0 (small-file merge, equality-delete conversion) between "
        "batches, in this process, at most this often, e.g. '1 hour' (default: never)",
        or_empty(parse_duration),
    ),
    Option(
        KEY_CACHE_BATCHES,
        KEY_CACHE_BATCHES_DEFAULT,
        "batches whose keys the key->version cache keeps",
        parse_count,
    ),
    Option(
        INPUT_FORMAT,
        INPUT_FORMAT_DEFAULT,
        "json-lines (one record per line) or json-files (each file one JSON document)",
        one_of(*INPUT_FORMATS),
    ),
    Option(
        PARTITION_BY,
        PARTITION_BY_DEFAULT,
        "with create => true: partition fields on key columns, e.g. 'bucket(16, id)'",
        partition_by,
    ),
    Option(
        KAFKA_PREFIX,
        "",
        "Kafka sources: every kafka.* key goes to Spark's Kafka reader "
        "(kafka.bootstrap.servers is required)",
        prefix=True,
    ),
    Option(
        STARTING_OFFSETS,
        STARTING_OFFSETS_DEFAULT,
        "Kafka sources, first run: earliest, latest, or Spark's JSON offsets",
    ),
    Option(
        MAX_OFFSETS_PER_TRIGGER,
        MAX_OFFSETS_PER_TRIGGER_DEFAULT,
        "Kafka sources: records per micro-batch (one commit each; default: all)",
        or_empty(parse_count),
    ),
    Option(
        UNAVAILABLE_PLACEHOLDER,
        UNAVAILABLE_PLACEHOLDER_DEFAULT,
        "Debezium's unavailable.value.placeholder (PostgreSQL TOAST: an update that does not "
        "touch a large column carries it); such a column keeps its stored value",
        str,
    ),
    Option(
        VARIABLE_SCALE_DECIMAL,
        VARIABLE_SCALE_DECIMAL_DEFAULT,
        "table type of PostgreSQL numeric without precision (Debezium VariableScaleDecimal): "
        "decimal(p,s) (values that do not fit are rejected) or string (the exact text)",
        variable_scale_decimal,
    ),
    Option(
        HEARTBEAT_SOURCE,
        HEARTBEAT_SOURCE_DEFAULT,
        "landing directory of the connector's heartbeat topic (__debezium-heartbeat.<prefix>, "
        "with heartbeat.interval.ms set): once a run drained the source, the newest heartbeat "
        "read before it counts as progress, so cdc_lag stays right while the source is idle",
    ),
    Option(
        LOOKUP_IN_LIST_MAX,
        LOOKUP_IN_LIST_MAX_DEFAULT,
        "up to this many keys, a table lookup reads only their rows (an IN list that "
        "prunes files up to 200 keys, else a broadcast semi-join)",
        parse_count,
    ),
)

DATABASE_OPTIONS: tuple[Option, ...] = (
    Option(
        TABLE_NAME,
        TABLE_NAME_DEFAULT,
        "table name of a topic <prefix>.<db>.<table>, from {prefix}, {db} ({schema}: the "
        "same, PostgreSQL's schema), {table}, {topic}; lower-cased",
        template,
    ),
    Option(TABLE_PREFIX, TABLE_PREFIX_DEFAULT, "text before every table name, e.g. 'ods_'"),
    Option(TABLE_SUFFIX, TABLE_SUFFIX_DEFAULT, "text after every table name"),
    Option(
        INCLUDING_TABLES,
        INCLUDING_TABLES_DEFAULT,
        "regex: only source tables whose name or <db>.<table> it matches (default: all)",
        pattern,
    ),
    Option(
        EXCLUDING_TABLES,
        EXCLUDING_TABLES_DEFAULT,
        "regex: not the source tables whose name or <db>.<table> it matches",
        pattern,
    ),
    Option(
        PRIMARY_KEY,
        PRIMARY_KEY_DEFAULT,
        "key column(s) of every new table whose events carry no Debezium key (default: the key)",
        parse_columns,
    ),
    Option(
        PRIMARY_KEY_PREFIX,
        "",
        "primary-key.<table>: the key column(s) of one table (its name without namespace)",
        prefix=True,
    ),
    *(o for o in OPTIONS if o.key != SOURCE_TABLE),  # every table's: ingest_cdc's, by topic
)


def bind(given: Mapping[str, str] | None) -> dict[str, Any]:
    """``ingest_cdc``'s options from a Python ``options`` dict, in the procedure's sentences."""
    return bind_declared(INGEST_CDC, OPTIONS, given)


def bind_database(given: Mapping[str, str] | None) -> dict[str, Any]:
    """``ingest_cdc_database``'s options from a Python ``options`` dict, likewise."""
    return bind_declared(INGEST_CDC_DATABASE, DATABASE_OPTIONS, given)


def source_location(source: str) -> str:
    """Kafka sources (``kafka:topic``) as written; paths made absolute."""
    if source.startswith("kafka:") or "://" in source:
        return source
    return absolute(source)


def settings_from(
    table: str,
    checkpoint: str,
    primary_key: Sequence[str],
    create: bool,
    options: Mapping[str, Any],
) -> Settings:
    """The pipeline's settings: the call's table, checkpoint, key and ``create``, and its bound
    options (:func:`bind`, or the procedure's ``options => map(...)``)."""
    heartbeat = options[HEARTBEAT_SOURCE]
    return Settings(
        table=table,
        checkpoint=absolute(checkpoint),
        primary_key=tuple(primary_key),
        create=create,
        source_table=options.get(SOURCE_TABLE) or None,
        fail_on_reject=options[FAIL_ON_REJECT],
        key_cache_batches=options[KEY_CACHE_BATCHES],
        lookup_in_list_max=options[LOOKUP_IN_LIST_MAX],
        input_format=options[INPUT_FORMAT],
        kafka_options=tuple(sorted(options[KAFKA_PREFIX].items())),
        starting_offsets=options[STARTING_OFFSETS],
        max_offsets_per_trigger=options[MAX_OFFSETS_PER_TRIGGER],
        partition_by=options[PARTITION_BY],
        variable_scale_decimal=options[VARIABLE_SCALE_DECIMAL],
        unavailable_placeholder=options[UNAVAILABLE_PLACEHOLDER],
        heartbeat_source=source_location(heartbeat) if heartbeat else None,
    )


def database_settings_from(checkpoint: str, options: Mapping[str, Any]) -> Settings:
    """Every table's settings (the table and its checkpoint are set per table; tables are
    created on first sight, their keys from :func:`keys_from` or the events)."""
    return settings_from("", checkpoint, (), True, options)


def naming_from(options: Mapping[str, Any]) -> Naming:
    """How ``ingest_cdc_database`` names a topic's table, from its bound options."""
    return Naming(
        template=options[TABLE_NAME],
        prefix=options[TABLE_PREFIX],
        suffix=options[TABLE_SUFFIX],
        including=options[INCLUDING_TABLES],
        excluding=options[EXCLUDING_TABLES],
    )


def keys_from(options: Mapping[str, Any]) -> Keys:
    """The keys of tables whose events carry none: ``primary-key`` and ``primary-key.<table>``."""
    per_table = {
        key[len(PRIMARY_KEY_PREFIX) :].lower(): parse_columns(value)
        for key, value in options[PRIMARY_KEY_PREFIX].items()
    }
    return Keys(options[PRIMARY_KEY], per_table)
