"""The ingest_cdc and ingest_cdc_database actions: typed values in, typed totals out.

Floor: actions. The procedures ``ingest_cdc`` and ``ingest_cdc_database`` call
:func:`ingest_cdc` and :func:`ingest_cdc_database`; the Python API's ``ingest_cdc_stream`` and
``ingest_cdc_database_stream`` call :func:`start_cdc` and :func:`start_cdc_database`. Options
arrive bound (the procedure's ``options => map(...)``, or
:func:`sparkext.actions.cdc.options.bind`), and their declarations and the settings built from
them are :mod:`sparkext.actions.cdc.options`'s.

Debezium change events in a file landing zone (or Kafka topics) become equality-delete upserts
into an Iceberg merge-on-read table, one atomic commit per micro-batch: the pipeline is
:mod:`sparkext.actions.cdc.ingest`, the streaming query :mod:`sparkext.actions.cdc.stream`, a
whole database from one stream :mod:`sparkext.actions.cdc.database`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc import options as cdc_options
from sparkext.actions.cdc.database import TopicResult, ingest_database, start_database
from sparkext.actions.cdc.model import Metrics
from sparkext.actions.cdc.options import MAX_FILES_PER_BATCH, OPTIMIZE_EVERY, source_location
from sparkext.actions.cdc.stream import ingest, start
from sparkext.actions.optimize import optimize
from sparkext.declarations import Context, parse_columns
from sparkext.errors import SparkextError
from sparkext.iceberg.catalog import resolve_table
from sparkext.iceberg.errors import translate
from sparkext.spark import cancellation
from sparkext.times import from_millis

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def event_time(ms: int | None) -> dt.datetime | None:
    """A total's event time (``source.ts_ms``) as the output's timestamp."""
    return None if ms is None else from_millis(ms)


def between_batches(
    context: Context, table: str, every_ms: int | None
) -> Callable[[], None] | None:
    """The ``optimize-every`` hook: after a committed batch, at most every ``every_ms``, run
    tiered_optimize's level 0 where its trigger says so (Bilibili's writer-side L0: no other
    process races the writer). A failed optimisation is reported and the stream goes on."""
    if every_ms is None:
        return None
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


def after_table(
    context: Context, every_ms: int | None
) -> Callable[[str], Callable[[], None] | None]:
    """The ``optimize-every`` hook of each table of a database (:func:`between_batches`)."""
    return lambda table: between_batches(context, table, every_ms)


def ingest_cdc(
    context: Context,
    table: str,
    source: str,
    checkpoint: str,
    primary_key: str | None = None,
    create: bool = False,
    options: Mapping[str, Any] | None = None,
) -> Metrics:
    """Ingest every change file of ``source`` (a path, a glob or ``kafka:<topics>``) not yet
    ingested under ``checkpoint`` into ``table``; the totals of the call. ``primary_key``:
    comma-separated key columns; ``options``: bound (:func:`~sparkext.actions.cdc.options.bind`).
    """
    bound = cdc_options.bind(None) if options is None else options  # None: the defaults
    key = parse_columns(primary_key)
    return ingest(
        context.spark,
        cdc_options.settings_from(table, checkpoint, key, create, bound),
        source_location(source),
        max_files=bound[MAX_FILES_PER_BATCH],
        progress=context.progress,
        after_batch=between_batches(context, table, bound[OPTIMIZE_EVERY]),
    )


def start_cdc(
    spark: SparkSession,
    table: str,
    source: str,
    checkpoint: str,
    primary_key: str | None = None,
    create: bool = False,
    options: Mapping[str, Any] | None = None,
    interval: str = "10 seconds",
) -> StreamingQuery:
    """:func:`ingest_cdc` continuously, one micro-batch every ``interval``; the running query."""
    bound = cdc_options.bind(None) if options is None else options  # None: the defaults
    settings = cdc_options.settings_from(
        table, checkpoint, parse_columns(primary_key), create, bound
    )
    return start(
        spark,
        settings,
        source_location(source),
        interval=interval,
        max_files=bound[MAX_FILES_PER_BATCH],
        after_batch=between_batches(Context(spark), table, bound[OPTIMIZE_EVERY]),
    )


def ingest_cdc_database(
    context: Context,
    namespace: str,
    source: str,
    checkpoint: str,
    options: Mapping[str, Any] | None = None,
) -> list[TopicResult]:
    """Every Debezium topic of ``source`` (a landing root, or ``kafka:<topic regex>``) into a
    table of its own in ``namespace``, from one stream and one ``checkpoint``; one result per
    topic. ``options``: bound (:func:`~sparkext.actions.cdc.options.bind_database`)."""
    bound = cdc_options.bind_database(None) if options is None else options
    return ingest_database(
        context.spark,
        cdc_options.database_settings_from(checkpoint, bound),
        namespace,
        source_location(source),
        cdc_options.naming_from(bound),
        cdc_options.keys_from(bound),
        max_files=bound[MAX_FILES_PER_BATCH],
        progress=context.progress,
        after_table=after_table(context, bound[OPTIMIZE_EVERY]),
    )


def start_cdc_database(
    spark: SparkSession,
    namespace: str,
    source: str,
    checkpoint: str,
    options: Mapping[str, Any] | None = None,
    interval: str = "10 seconds",
) -> StreamingQuery:
    """:func:`ingest_cdc_database` continuously, one micro-batch every ``interval``: a topic
    that appears becomes its table at the next batch."""
    bound = cdc_options.bind_database(None) if options is None else options
    return start_database(
        spark,
        cdc_options.database_settings_from(checkpoint, bound),
        namespace,
        source_location(source),
        cdc_options.naming_from(bound),
        cdc_options.keys_from(bound),
        interval=interval,
        max_files=bound[MAX_FILES_PER_BATCH],
        after_table=after_table(Context(spark), bound[OPTIMIZE_EVERY]),
    )
