"""CALL sparkext.ingest_cdc(table, source, checkpoint [, primary_key, create, options]).

Debezium change events in a file landing zone become equality-delete upserts into an Iceberg
merge-on-read table, one atomic commit per micro-batch (see sparkext.actions.cdc.ingest).

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

import datetime as dt
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
    one_of,
    or_empty,
    parse_boolean,
    parse_count,
)
from sparkext.times import from_millis

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


def _partition_by(text: str):
    from sparkext.executors.cdc.partitioning import parse_partition_by

    try:
        return parse_partition_by(text)
    except ValueError:
        raise Expected(
            "partition fields such as id, bucket(16, id) or truncate(4, code), separated by commas"
        ) from None


def _variable_scale_decimal(text: str) -> str:
    """``string``, or ``decimal(p,s)`` with 1 <= p <= 38 and 0 <= s <= p (as a Spark type name).

    >>> _variable_scale_decimal("DECIMAL(20, 4)")
    'decimal(20,4)'
    """
    import re

    compact = text.strip().lower().replace(" ", "")
    if compact == "string":
        return compact
    match = re.fullmatch(r"decimal\((\d+),(\d+)\)", compact)
    if not match or not 0 < int(match.group(1)) <= 38 or int(match.group(2)) > int(match.group(1)):
        raise Expected("string or decimal(p,s) with 1 <= p <= 38 and s <= p")
    return f"decimal({int(match.group(1))},{int(match.group(2))})"


def _absolute(path: str) -> str:
    from sparkext.fs import absolute

    return absolute(path)


def source_location(source: str) -> str:
    """Kafka sources (``kafka:topic``) as written; paths made absolute."""
    if source.startswith("kafka:") or "://" in source:
        return source
    return _absolute(source)


def settings_from(args: BoundArgs) -> Any:
    from sparkext.actions.cdc.model import Settings

    key = tuple(k.strip() for k in (args["primary_key"] or "").split(",") if k.strip())
    return Settings(
        table=args["table"],
        checkpoint=_absolute(args["checkpoint"]),
        primary_key=key,
        create=args["create"],
        source_table=args.options[SOURCE_TABLE] or None,
        fail_on_reject=args.options[FAIL_ON_REJECT],
        key_cache_batches=args.options[KEY_CACHE_BATCHES],
        lookup_in_list_max=args.options[LOOKUP_IN_LIST_MAX],
        input_format=args.options[INPUT_FORMAT],
        kafka_options=tuple(sorted(args.options[KAFKA_PREFIX].items())),
        starting_offsets=args.options[STARTING_OFFSETS],
        max_offsets_per_trigger=args.options[MAX_OFFSETS_PER_TRIGGER],
        partition_by=args.options[PARTITION_BY],
        variable_scale_decimal=args.options[VARIABLE_SCALE_DECIMAL],
        unavailable_placeholder=args.options[UNAVAILABLE_PLACEHOLDER],
        heartbeat_source=(
            source_location(args.options[HEARTBEAT_SOURCE])
            if args.options[HEARTBEAT_SOURCE]
            else None
        ),
    )


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else from_millis(ms)


def _parse_duration(text: str) -> int:
    from sparkext.declarations import parse_duration

    return parse_duration(text)


def between_batches(context: Context, table: str, every_ms: int | None):
    """The ``optimize-every`` hook: after a committed batch, at most every ``every_ms``, run
    tiered_optimize's level 0 where its trigger says so (Bilibili's writer-side L0: no other
    process races the writer). A failed optimisation is reported and the stream goes on."""
    if every_ms is None:
        return None
    import time

    from sparkext.actions.optimize import optimize
    from sparkext.errors import SparkextError
    from sparkext.iceberg.catalog import resolve_table
    from sparkext.iceberg.errors import translate
    from sparkext.spark import cancellation

    last = [time.monotonic()]

    def after_batch() -> None:
        if (time.monotonic() - last[0]) * 1000 < every_ms:
            return
        last[0] = time.monotonic()
        try:
            out = optimize(context, resolve_table(context.spark, table), only_levels=frozenset({0}))
        except cancellation.StatementCancelled:
            raise
        except Exception as error:  # never stops the writer: the next interval tries again
            translated = error if isinstance(error, SparkextError) else translate(error)
            reason = str(translated or error).strip().splitlines() or [type(error).__name__]
            context.progress(f"optimize-every: not run ({reason[0]})")
            return
        done = out.committed
        context.progress(f"optimize-every: L0 committed in {done} partition(s)")

    return after_batch


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.cdc.stream import ingest

    source = args["source"]
    metrics = ingest(
        context.spark,
        settings_from(args),
        source_location(source),
        max_files=args.options[MAX_FILES_PER_BATCH],
        progress=context.progress,
        after_batch=between_batches(context, args["table"], args.options[OPTIMIZE_EVERY]),
    )
    return [
        (
            metrics.events,
            metrics.inserted,
            metrics.updated,
            metrics.deleted,
            metrics.duplicates,
            metrics.late,
            metrics.rejected,
            metrics.files_missing,
            metrics.commits,
            _time(metrics.min_event_time_ms),
            _time(metrics.max_event_time_ms),
            metrics.lookups_made,
            metrics.lookups_avoided,
            metrics.batches_replayed,
        )
    ]


ROUTINE = Routine(
    name="ingest_cdc",
    doc="Ingest Debezium change files into an Iceberg merge-on-read table (equality deletes).",
    params=(
        Param("table", ParamType.STRING, "target Iceberg table, e.g. 'lake.db.orders'", True),
        Param(
            "source",
            ParamType.STRING,
            "directory or glob of Debezium JSON-lines files, or kafka:<topic>[,<topic>...]",
            True,
        ),
        Param(
            "checkpoint", ParamType.STRING, "directory for progress, rejects and key cache", True
        ),
        Param("primary_key", ParamType.STRING, "key column(s), comma-separated"),
        Param("create", ParamType.BOOLEAN, "create the table from the first events", default=False),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=(
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
            or_empty(_parse_duration),
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
            _partition_by,
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
            _variable_scale_decimal,
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
    ),
    output=(
        OutputColumn("events", "bigint", "change events read (tombstones excluded)"),
        OutputColumn("inserted", "bigint", "keys whose last change was c or r"),
        OutputColumn("updated", "bigint", "keys whose last change was u"),
        OutputColumn("deleted", "bigint", "keys whose last change was d"),
        OutputColumn("duplicates", "bigint", "events skipped: same key and source position"),
        OutputColumn("late", "bigint", "events older than the key's current version"),
        OutputColumn("rejected", "bigint", "events written to <checkpoint>/rejected"),
        OutputColumn(
            "files_missing",
            "bigint",
            "planned input files deleted before they were read (each also a rejected row)",
        ),
        OutputColumn("commits", "bigint", "Iceberg commits (one per micro-batch)"),
        OutputColumn("min_event_time", "timestamp", "earliest source.ts_ms applied"),
        OutputColumn("max_event_time", "timestamp", "latest source.ts_ms applied"),
        OutputColumn("lookups", "bigint", "keys looked up in the table"),
        OutputColumn("lookups_avoided", "bigint", "keys resolved without reading the table"),
        OutputColumn("batches_replayed", "bigint", "batches found already committed (restart)"),
    ),
    run=run,
)
