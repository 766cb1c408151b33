"""Versions of an ingest_cdc table over an event-time range, for event-time temporal joins.

A probe row at event time t must join the dimension's state as of t. For a table written by
ingest_cdc that state is known exactly from two things this package already has:

* its state as of the range's low end (``state_as_of``: base snapshot + event logs, late events
  placed by event time) — valid from the low end;
* every change whose event time lies inside the range, from the event logs
  (``sparkext.cdc.events-location``) — each valid from its own event time.

Sorted per key by (event time, source position), each version is valid until the next; a delete
version (``_cdc_op = 'd'``) ends the key. The caller adds ``lead()`` and the join condition.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.errors import EventTimeError
from sparkext.identifiers import cols

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VALID_FROM = "_sparkext_valid_from"


def is_cdc_table(spark: SparkSession, name: str) -> bool:
    """Whether ingest_cdc has committed to ``name`` (its snapshots carry event-time bounds)."""
    from sparkext.iceberg.catalog import resolve_table
    from sparkext.iceberg.snapshots import ancestry
    from sparkext.planning.event_time import has_event_time

    return has_event_time(ancestry(spark, resolve_table(spark, name)))


def cdc_versions(
    spark: SparkSession, name: str, low: dt.datetime | None, high: dt.datetime
) -> DataFrame:
    """User columns + ``_sparkext_valid_from`` (NULL for the state at ``low``), ``_cdc_op``,
    ``_cdc_position``, for the versions of ``name`` valid somewhere in [low, high)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sparkext.cdc import summary as keys
    from sparkext.history.as_of import (
        EVENT_TIME,
        OP,
        POSITION,
        SYSTEM_NAMES,
        _read_logs,
        state_as_of,
    )
    from sparkext.iceberg.catalog import identifier_columns, resolve_table
    from sparkext.iceberg.snapshots import ancestry

    table = resolve_table(spark, name)
    chain = ancestry(spark, table)
    zone = times.session_zone(spark)
    if low is None:  # from the beginning: the state just before the first CDC event
        firsts = [
            int(s.summary[keys.EVENT_TIME_MIN]) for s in chain if keys.EVENT_TIME_MIN in s.summary
        ]
        if not firsts:
            raise EventTimeError(
                f"Table '{name}' has no retained commit with event times; give the backfill a "
                "start time (--from)."
            )
        low = times.from_millis(min(firsts) - 1)
    # the range is in session-zone wall clocks (or instants): as instants, exact for Spark and ms
    low_at, high_at = times.instant(low, zone), times.instant(high, zone)
    schema = spark.table(name).schema
    user = [(f.name, f.dataType) for f in schema.fields if f.name not in SYSTEM_NAMES]
    names = [n for n, _ in user]
    key = identifier_columns(spark, name)
    low_ms, high_ms = times.to_millis(low_at), times.to_millis(high_at)
    logs = [
        s.summary[keys.EVENTS_LOCATION]
        for s in chain
        if keys.EVENTS_LOCATION in s.summary
        and int(s.summary.get(keys.EVENT_TIME_MAX, low_ms + 1)) > low_ms
        and int(s.summary.get(keys.EVENT_TIME_MIN, high_ms - 1)) < high_ms
    ]
    base = state_as_of(spark, table, low_at).frame.select(
        *cols(names),
        F.lit(None).cast("timestamp").alias(VALID_FROM),
        F.lit("r").alias(OP),
        F.lit(None).cast("string").alias(POSITION),
    )
    changes = _read_logs(spark, logs, user, key)
    if changes is None:
        return base
    inside = (F.col(EVENT_TIME) > times.lit(low_at)) & (F.col(EVENT_TIME) < times.lit(high_at))
    changes = changes.where(inside)
    truncate = (
        changes.where(F.col(OP) == "t").select(F.unix_micros(EVENT_TIME)).limit(1).collect()
    )  # ≤ 1 row
    if truncate:
        when = times.wall_clock_text(times.from_micros(truncate[0][0]), zone)
        raise EventTimeError(
            f"Table '{name}' was truncated at event time {when}, inside the range; an "
            "event-time temporal join cannot place a truncate per key: backfill the ranges "
            "before and after it separately."
        )
    # As snapshot_as_of_event_time decides, the change with the newest source position among
    # those up to a time wins: a change older in the binlog than one placed before it in event
    # time never becomes the valid version.
    running = (
        Window.partitionBy(*cols(key))
        .orderBy(EVENT_TIME, POSITION)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    changes = (
        changes.dropDuplicates([*key, POSITION])
        .withColumn("_newest", F.max(POSITION).over(running))
        .where(F.col(POSITION) == F.col("_newest"))
        .select(*cols(names), F.col(EVENT_TIME).alias(VALID_FROM), OP, POSITION)
    )
    return base.unionByName(changes)
