"""Versions of an ingest_cdc table over an event-time range, for event-time temporal joins.

A probe row at event time t must join the dimension's state as of t. For a table written by
ingest_cdc that state is known exactly from two things this package already has:

* its state as of the range's low end (``state_as_of``: base snapshot + event logs, late events
  placed by event time) — valid from the low end;
* every change whose event time lies inside the range, from the event logs
  (``sparkext.cdc.events-location``) — each valid from its own event time.

Sorted per key by (event time, source position), each version is valid until the next; a delete
version (``_cdc_op = 'd'``) ends the key. The caller adds ``lead()`` and the join condition.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.actions.history.as_of import (
    EVENT_TIME,
    OP,
    POSITION,
    SYSTEM_NAMES,
    read_logs,
    state_as_of,
)
from sparkext.errors import EventTimeError
from sparkext.iceberg.catalog import identifier_columns, resolve_table
from sparkext.iceberg.snapshots import ancestry
from sparkext.identifiers import col, cols
from sparkext.planning import summary as keys
from sparkext.planning.event_time import has_event_time

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from sparkext.planning.event_time import SnapshotFact

VALID_FROM = "_sparkext_valid_from"
VALID_TO = "_sparkext_valid_to"


def is_cdc_table(spark: SparkSession, name: str) -> bool:
    """Whether ingest_cdc has committed to ``name`` (its snapshots carry event-time bounds)."""

    return has_event_time(ancestry(spark, resolve_table(spark, name)))


@dataclass(frozen=True)
class CdcRange:
    """An ingest_cdc table over an event-time range (low, high), as DataFrames.

    ``base``: the state at ``low`` (user columns, ``_cdc_position``, ``_cdc_event_time``);
    ``changes``: the logged events with event time inside the range (user columns, ``_cdc_op``,
    ``_cdc_event_time``, ``_cdc_position``), truncates included, or None when no log holds any.
    """

    base: DataFrame
    changes: DataFrame | None
    names: list[str]  # the user columns
    key: list[str]  # the identifier columns
    low: dt.datetime  # instants
    high: dt.datetime | None
    snapshot_id: int | None = None  # the snapshot read (the table's current one)
    floors: DataFrame | None = None  # per key of the changes: newest position up to ``low``
    truncate_floor: str | None = None  # the newest truncate's position up to ``low``


def cdc_range(
    spark: SparkSession, name: str, low: dt.datetime | None, high: dt.datetime | None
) -> CdcRange:
    """The base state at ``low`` and the logged changes up to ``high`` of ingest_cdc table
    ``name`` (``low`` None: from just before its first event; ``high`` None: every later
    change; naive times are session-zone wall clocks)."""
    from pyspark.sql import functions as F

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
    low_at = times.instant(low, zone)
    high_at = None if high is None else times.instant(high, zone)
    schema = spark.table(name).schema
    user = [(f.name, f.dataType) for f in schema.fields if f.name not in SYSTEM_NAMES]
    key = identifier_columns(spark, name)
    low_ms = times.to_millis(low_at)
    # a log can hold an event before ``high`` when its earliest event's millisecond starts
    # before it: compare with ``high`` rounded UP to the millisecond
    high_ms = None if high_at is None else -(-times.to_micros(high_at) // 1000)
    logs = [
        s.summary[keys.EVENTS_LOCATION]
        for s in chain
        if keys.EVENTS_LOCATION in s.summary
        and int(s.summary.get(keys.EVENT_TIME_MAX, low_ms + 1)) > low_ms
        and (high_ms is None or int(s.summary.get(keys.EVENT_TIME_MIN, high_ms - 1)) < high_ms)
    ]
    base = state_as_of(spark, table, low_at, system=True).frame
    changes = read_logs(spark, logs, user, key)
    floors, truncate_floor = None, None
    if changes is not None:
        inside = F.col(EVENT_TIME) > times.lit(low_at)
        if high_at is not None:
            inside = inside & (F.col(EVENT_TIME) < times.lit(high_at))
        changes = changes.where(inside)
        earlier = [
            s.summary[keys.EVENTS_LOCATION]
            for s in chain
            if keys.EVENTS_LOCATION in s.summary
            and int(s.summary.get(keys.EVENT_TIME_MIN, low_ms)) <= low_ms
        ]
        floors, truncate_floor = superseding(spark, earlier, user, key, changes, low_at)
    current = chain[-1].snapshot_id if chain else None
    return CdcRange(
        base,
        changes,
        [n for n, _ in user],
        key,
        low_at,
        high_at,
        current,
        floors,
        truncate_floor,
    )


def superseding(
    spark: SparkSession,
    logs: list[str],
    user: Sequence[tuple[str, DataType]],
    key: list[str],
    candidates: DataFrame,
    at: dt.datetime | None,
) -> tuple[DataFrame | None, str | None]:
    """What the logged events up to ``at`` say about later changes (``candidates``): per key,
    the newest source position among them (``floors``: key columns + ``_cdc_position``; a
    delete counts, though no state row shows it), and the newest truncate's position.

    A change older in the source's order than either never becomes a valid version. Only
    events at or above the oldest candidate's position can matter, and Parquet statistics skip
    the files below it, so when sources' clocks rise with their logs nothing is read.
    """
    from pyspark.sql import functions as F

    if not logs:
        return None, None
    row = candidates.where(F.col(OP) != "t").agg(F.min(POSITION)).first()
    assert row is not None  # an aggregation without grouping has one row
    oldest = row[0]
    if oldest is None:
        return None, None
    key_columns = [(n, t) for n, t in user if n in key]
    early = read_logs(spark, logs, key_columns, key)
    assert early is not None
    early = early.where(F.col(POSITION) >= F.lit(oldest))
    if at is not None:
        early = early.where(F.col(EVENT_TIME) <= times.lit(at))
    row = early.where(F.col(OP) == "t").agg(F.max(POSITION)).first()
    assert row is not None  # an aggregation without grouping has one row
    truncate_floor = row[0]
    floors = (
        early.where(F.col(OP) != "t")
        .join(F.broadcast(candidates.select(*cols(key)).distinct()), key, "left_semi")
        .groupBy(*cols(key))
        .agg(F.max(POSITION).alias(POSITION))
    )
    return floors, truncate_floor


MARK = "x"  # the op of an earlier event known by key and position: it supersedes, is no version


def earlier_events(
    spark: SparkSession,
    chain: Sequence[SnapshotFact],
    user: Sequence[tuple[str, DataType]],
    key: list[str],
    candidates: DataFrame,
) -> DataFrame | None:
    """The events of the logs of ``chain`` (snapshot facts, oldest first) that can supersede
    ``candidates`` (events read later): key columns, ``_cdc_op`` (:data:`MARK`, or ``'t'`` for
    a truncate), ``_cdc_position`` and ``_cdc_event_time``, of the candidates' keys (truncates:
    every one) and at or above the oldest candidate's position. None when nothing can.

    A log is opened only when its commit's high-water mark (``sparkext.cdc.max-position``)
    reaches the oldest candidate, so a source whose changes arrive in order reads nothing.
    """
    from pyspark.sql import functions as F

    row = candidates.where(F.col(OP) != "t").agg(F.min(POSITION)).first()
    assert row is not None  # an aggregation without grouping has one row
    oldest = row[0]
    if oldest is None:
        return None
    logs = [
        s.summary[keys.EVENTS_LOCATION]
        for s in chain
        if keys.EVENTS_LOCATION in s.summary
        and str(s.summary.get(keys.MAX_POSITION, oldest)) >= oldest
    ]
    key_columns = [(n, t) for n, t in user if n in key]
    early = read_logs(spark, logs, key_columns, key)
    if early is None:
        return None
    early = early.where(F.col(POSITION) >= F.lit(oldest))
    changed = candidates.where(F.col(OP) != "t").select(*cols(key)).distinct()
    of_keys = early.where(F.col(OP) != "t").join(F.broadcast(changed), key, "left_semi")
    return of_keys.withColumn(OP, F.lit(MARK)).unionByName(early.where(F.col(OP) == "t"))


def undominated(
    events: DataFrame,
    marks: DataFrame | None,
    key: list[str],
    truncate_floor: str | None = None,
) -> DataFrame:
    """``events`` without the changes that can never be a valid version: one older in the
    source's order than another event of its key (``marks`` included, deletes too) at or before
    its own event time, than a truncate at or before it, or than ``truncate_floor`` (a truncate
    before every event). Such a change loses to that event at every later time, so dropping it
    once is final; truncates pass through. Among the changes kept, a key's event-time order is
    its source order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cut = truncates(events) + truncates(marks)  # collected: a handful
    changes = events.where(F.col(OP) != "t")
    every = changes
    if marks is not None:
        every = every.unionByName(marks.where(F.col(OP) != "t"), allowMissingColumns=True)
    running = (
        Window.partitionBy(*cols(key))
        .orderBy(EVENT_TIME)
        .rangeBetween(Window.unboundedPreceding, Window.currentRow)
    )
    position = F.coalesce(F.col(POSITION), F.lit(""))
    kept = (
        every.withColumn("_newest", F.max(position).over(running))
        .where((F.col(OP) != MARK) & (position == F.col("_newest")))
        .select(*changes.columns)
    )
    if truncate_floor is not None:
        kept = kept.where(position > F.lit(truncate_floor))
    for micros, at in cut:
        kept = kept.where(~((F.unix_micros(EVENT_TIME) >= F.lit(micros)) & (position < F.lit(at))))
    return kept.unionByName(events.where(F.col(OP) == "t"))


def truncates(frame: DataFrame | None) -> list[tuple[int, str]]:
    """(event time in epoch µs, source position) of the truncates among ``frame``'s events
    (collected: a table is truncated a handful of times, not per row)."""
    from pyspark.sql import functions as F

    if frame is None:
        return []
    rows = (
        frame.where(F.col(OP) == "t")
        .select(F.unix_micros(EVENT_TIME).alias("t"), POSITION)
        .distinct()
        .collect()
    )  # truncates only
    return [(int(r.t), r[POSITION] or "") for r in rows]


def cdc_versions(
    spark: SparkSession, name: str, low: dt.datetime | None, high: dt.datetime
) -> DataFrame:
    """User columns + ``_sparkext_valid_from`` (NULL for the state at ``low``), ``_cdc_op``,
    ``_cdc_position``, ``_cdc_event_time``, ``_sparkext_valid_to`` (the key's next version's
    start; NULL: still valid), for the versions of ``name`` valid somewhere in [low, high)."""
    found = cdc_range(spark, name, low, high)
    cut = truncates(found.changes)
    if cut:
        zone = times.session_zone(spark)
        when = times.wall_clock_text(times.from_micros(min(cut)[0]), zone)
        raise EventTimeError(
            f"Table '{name}' was truncated at event time {when}, inside the range; an "
            "event-time temporal join in a streaming job cannot place a truncate per key: "
            "backfill the ranges before and after it separately, or use "
            "sparkext.dim_join_changelog, which does."
        )
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    versions = versions_from(
        found.base, found.changes, found.names, found.key, found.floors, found.truncate_floor
    )
    order = Window.partitionBy(*cols(found.key)).orderBy(
        F.col(VALID_FROM).asc_nulls_first(), POSITION
    )
    return versions.withColumn(VALID_TO, F.lead(VALID_FROM).over(order))


def versions_from(
    base: DataFrame,
    changes: DataFrame | None,
    names: list[str],
    key: list[str],
    floors: DataFrame | None = None,
    truncate_floor: str | None = None,
) -> DataFrame:
    """The versions of a keyed state: ``base`` (user columns, ``_cdc_position``,
    ``_cdc_event_time``: the state at the range's low end) valid from the low end, then each
    change of ``changes`` (events inside the range, truncates excluded) valid from its event time.

    Columns: the user columns, ``_sparkext_valid_from`` (NULL for the base), ``_cdc_op``,
    ``_cdc_position``, ``_cdc_event_time`` (when the version's own change happened).

    As snapshot_as_of_event_time decides, the change with the newest source position among
    those up to a time wins: a change older in the source's order than one placed before it in
    event time (the base's rows included) never becomes the valid version; nor does one older
    than ``floors`` (per key: the newest position up to the low end, deletes included) or
    ``truncate_floor`` (the newest truncate up to the low end), from :func:`superseding`.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    base = base.select(
        *cols(names),
        F.lit(None).cast("timestamp").alias(VALID_FROM),
        F.lit("r").alias(OP),
        POSITION,
        EVENT_TIME,
    )
    if changes is None:
        return base
    changes = changes.where(F.col(OP) != "t").select(
        *cols(names), F.col(EVENT_TIME).alias(VALID_FROM), OP, POSITION, EVENT_TIME
    )
    if truncate_floor is not None:
        changes = changes.where(F.col(POSITION) > F.lit(truncate_floor))
    marks = []
    if floors is not None:  # marks in the running maximum, dropped after it
        marks = [
            floors.select(
                *(col(n) if n in key else F.lit(None).alias(n) for n in names),
                F.lit(None).cast("timestamp").alias(VALID_FROM),
                F.lit("x").alias(OP),
                POSITION,
                F.lit(None).cast("timestamp").alias(EVENT_TIME),
            )
        ]
    running = (
        Window.partitionBy(*cols(key))
        .orderBy(F.col(VALID_FROM).asc_nulls_first(), POSITION)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    position = F.coalesce(F.col(POSITION), F.lit(""))
    every = base.unionByName(changes.dropDuplicates([*key, POSITION]))
    for mark in marks:
        every = every.unionByName(mark, allowMissingColumns=False)
    return (
        every.withColumn("_newest", F.max(position).over(running))
        .where((F.col(OP) != "x") & (F.col(VALID_FROM).isNull() | (position == F.col("_newest"))))
        .drop("_newest")
    )


def versions_in_place(
    base: DataFrame,
    changes: DataFrame | None,
    names: list[str],
    key: list[str],
    broadcast: bool | None = None,
) -> DataFrame:
    """:func:`versions_from` plus ``_sparkext_valid_to`` (NULL: still valid), computed without
    moving the base: the versions of the keys that changed (a small frame: the changes and
    those keys' base rows) are grouped per key, joined to the base as an array and exploded in
    place. The base is scanned, never shuffled or sorted, so a base kept partitioned by key
    (a stream's dimension state) stays so and a join with it shuffles only the other side.

    Keys that only the changes know (inserted inside the range) are added by a union, which
    loses that partitioning for the micro-batch; ``broadcast``: whether the grouped changes are
    small enough to broadcast (None: Spark decides by its estimates).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    as_version = [
        *cols(names),
        F.lit(None).cast("timestamp").alias(VALID_FROM),
        F.lit("r").alias(OP),
        F.col(POSITION),
        F.col(EVENT_TIME),
        F.lit(None).cast("timestamp").alias(VALID_TO),
    ]
    if changes is None:
        return base.select(*as_version)
    changes = changes.where(F.col(OP) != "t")
    changed = changes.select(*cols(key)).distinct()
    small = F.broadcast if broadcast else (lambda frame: frame)
    touched = base.join(small(changed), key, "left_semi")
    order = Window.partitionBy(*cols(key)).orderBy(F.col(VALID_FROM).asc_nulls_first(), POSITION)
    versions = versions_from(touched, changes, names, key).withColumn(
        VALID_TO, F.lead(VALID_FROM).over(order)
    )
    fields = [*names, VALID_FROM, OP, POSITION, EVENT_TIME, VALID_TO]
    grouped = versions.groupBy(*cols(key)).agg(
        F.collect_list(F.struct(*cols(fields))).alias("__sx_versions")
    )
    unchanged = F.array(F.struct(*as_version))
    in_place = (  # the key columns pass through as the base's own: its partitioning holds
        base.join(small(grouped), key, "left")
        .select(
            *cols(key),
            F.explode(F.coalesce(F.col("__sx_versions"), unchanged)).alias("__sx_v"),
        )
        .select(*(col(c) if c in key else F.col(f"__sx_v.{c}").alias(c) for c in fields))
    )
    new_keys = grouped.join(touched.select(*cols(key)), key, "left_anti")
    if new_keys.isEmpty():  # a job over the small frames only
        return in_place
    added = new_keys.select(F.explode("__sx_versions").alias("__sx_v")).select(
        *(F.col(f"__sx_v.{c}").alias(c) for c in fields)
    )
    return in_place.unionByName(added)
