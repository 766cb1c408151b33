"""A table's state as of an event time, as a Spark DataFrame (the runner of the plan).

CDC tables (written by ingest_cdc): the base snapshot s1 is read through Iceberg time travel;
the event logs of later commits whose events may count are read with ``event time <= T0``; per
key the newest change by source position wins over the base row; deletes and truncates remove
rows. Append-only tables: every row whose event-time column is <= T0 (Iceberg prunes files by
their column bounds). All row work runs on executors; the driver reads summaries and sizes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.errors import EventTimeError
from sparkext.identifiers import col, cols, ddl_fields
from sparkext.planning.event_time import EventTimePlan, has_event_time, plan_as_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef

OP, EVENT_TIME, POSITION = "_cdc_op", "_cdc_event_time", "_cdc_position"
SYSTEM_NAMES = (OP, EVENT_TIME, POSITION)
EVENT_TIME_PROPERTY = "sparkext.event-time-column"
_BROADCAST_LOG_BYTES = 64 << 20  # changes from up to this much log are broadcast to the base


@dataclass(frozen=True)
class AsOfResult:
    frame: DataFrame  # the table's user columns as of T0
    mode: str  # "cdc", "append" or "full-replay"
    base_snapshot_id: int | None
    change_commits: int  # event logs replayed
    pruned_commits: int  # CDC commits after the base skipped by their event-time bounds
    files_read: int
    bytes_read: int


def epoch_ms(value: dt.datetime) -> int:
    """Floor of ``value`` in epoch milliseconds (naive values are taken as UTC)."""
    return times.to_millis(value)


def state_as_of(
    spark: SparkSession,
    table: TableRef,
    as_of: dt.datetime,
    event_time_column: str | None = None,
    allow_full_replay: bool = False,
    system: bool = False,
) -> AsOfResult:
    from sparkext.iceberg.snapshots import ancestry

    as_of = times.instant(as_of, times.session_zone(spark))  # naive: a session wall clock
    chain = ancestry(spark, table)
    columns = spark.table(table.name).schema
    names = [f.name for f in columns.fields]
    if has_event_time(chain):
        if event_time_column not in (None, EVENT_TIME):
            raise EventTimeError(
                f"Table '{table.name}' is written by ingest_cdc, whose changes are ordered by "
                f"their source event time {EVENT_TIME}; omit the event-time column argument "
                f"('{event_time_column}')."
            )
        plan = plan_as_of(chain, epoch_ms(as_of), allow_full_replay=allow_full_replay)
        return _cdc_state(spark, table, plan, as_of, system)
    column = event_time_column or table.prop(EVENT_TIME_PROPERTY)
    if column is None:
        raise EventTimeError(
            f"Table '{table.name}' has no event-time metadata; name its event-time column as "
            "the third argument or set the table property 'sparkext.event-time-column' (ALTER "
            "TABLE ... SET TBLPROPERTIES ('sparkext.event-time-column' = 'ts'))."
        )
    if column not in names:
        raise EventTimeError(
            f"Event-time column '{column}' is not a column of '{table.name}'; columns: "
            f"{', '.join(names)}."
        )
    return _append_state(spark, table, column, as_of)


# ---- append-only tables -------------------------------------------------------------------
def _append_state(
    spark: SparkSession, table: TableRef, column: str, as_of: dt.datetime
) -> AsOfResult:
    from pyspark.sql import functions as F

    frame = spark.table(table.name).where(col(column) <= times.lit(as_of))
    files = bytes_ = 0
    if table.current_snapshot_id is not None:
        metrics = spark.table(table.metadata_table("files"))
        bound = col("readable_metrics", column, "lower_bound")
        row = (
            metrics.where(bound.isNull() | (bound <= times.lit(as_of)))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("file_size_in_bytes").alias("b"))
            .first()
        )
        files, bytes_ = int(row.n or 0), int(row.b or 0)
    return AsOfResult(frame, "append", table.current_snapshot_id, 0, 0, files, bytes_)


# ---- CDC tables ---------------------------------------------------------------------------
def _cdc_state(
    spark: SparkSession,
    table: TableRef,
    plan: EventTimePlan,
    as_of: dt.datetime,
    system: bool = False,
) -> AsOfResult:
    from pyspark.sql import functions as F

    from sparkext.cdc.checkpoint import batch_directories, tree_size
    from sparkext.iceberg.catalog import identifier_columns
    from sparkext.iceberg.snapshots import live_files

    schema = spark.table(table.name).schema
    user = [(f.name, f.dataType) for f in schema.fields if f.name not in SYSTEM_NAMES]
    key = identifier_columns(spark, table.name)
    if not key:
        raise EventTimeError(
            f"Table '{table.name}' has CDC commits but no identifier fields (primary key); set "
            "them with ALTER TABLE ... SET IDENTIFIER FIELDS id."
        )
    missing = [c.snapshot_id for c in plan.changes if c.location is None]
    if missing:
        raise EventTimeError(
            f"Commit {missing[0]} of '{table.name}' has no event log (it was written by an "
            "older ingest_cdc), so its events cannot be placed in event time; pick an event "
            "time after it."
        )
    logs = (
        [d for root in plan.full_replay_roots for d in batch_directories(root)]
        if plan.full_replay
        else [c.location for c in plan.changes if c.location]
    )
    files = bytes_ = 0
    for log in logs:
        n, b = tree_size(log)
        files, bytes_ = files + n, bytes_ + b
    base_bytes = 0
    if plan.base_snapshot_id is not None:
        n, base_bytes = live_files(spark, table, plan.base_snapshot_id)
        files, bytes_ = files + n, bytes_ + base_bytes

    t0 = times.lit(as_of)
    changes = _read_logs(spark, logs, user, key)
    changes = changes.where(F.col(EVENT_TIME) <= t0) if changes is not None else None
    base = None
    if plan.base_snapshot_id is not None:
        base = _conform(
            spark.read.option("snapshot-id", str(plan.base_snapshot_id)).table(table.name),
            user,
            (POSITION, EVENT_TIME),
        )
    frame = _merge(spark, table, base, changes, plan, user, key, bytes_ - base_bytes, system)
    mode = "full-replay" if plan.full_replay else "cdc"
    return AsOfResult(frame, mode, plan.base_snapshot_id, len(logs), plan.pruned, files, bytes_)


def _conform(frame: DataFrame, user: Sequence[tuple[str, object]], extra: Sequence[str]):
    """``frame`` with exactly the current user columns (cast; added as NULL) plus ``extra``."""
    from pyspark.sql import functions as F

    present = set(frame.columns)
    return frame.select(
        *(
            (col(name) if name in present else F.lit(None)).cast(dtype).alias(name)
            for name, dtype in user
        ),
        *cols(extra),
    )


def _read_logs(
    spark: SparkSession, logs: Sequence[str], user, key: Sequence[str]
) -> DataFrame | None:
    """The events of ``logs``: user columns, op, event time, position (each log conformed).

    Several logs are read as ONE Parquet relation with merged schemas (one file listing, one
    schema job, one scan in the plan: a backlog of 100 logs analysed as a 100-way union made
    every later action slow); a column a log lacks reads as NULL, as :func:`_conform` adds it.
    Logs whose schemas cannot merge (a column's type changed between batches) are read one by
    one and each conformed to the current types.
    """
    from functools import reduce

    extra = (OP, EVENT_TIME, POSITION)
    if not logs:
        return None
    if len(logs) > 1:
        try:
            merged = spark.read.option("mergeSchema", "true").parquet(*logs)
        except Exception:  # incompatible types across logs: read them one by one
            merged = None
        if merged is not None:
            return _conform(merged, user, extra)
    frames = [_conform(spark.read.parquet(log), user, extra) for log in logs]
    return reduce(lambda a, b: a.unionByName(b), frames)


def _merge(
    spark: SparkSession,
    table: TableRef,
    base: DataFrame | None,
    changes: DataFrame | None,
    plan: EventTimePlan,
    user,
    key: Sequence[str],
    log_bytes: int,
    system: bool = False,
) -> DataFrame:
    """Per key, the newest of (base row, newest change <= T0) by source position."""
    from pyspark.sql import functions as F

    names = [name for name, _ in user]

    def out(from_base: bool) -> list:  # the user columns, plus position and event time if asked
        if not system:
            return cols(names)
        if from_base:
            return [*cols(names), F.col(POSITION), F.col(EVENT_TIME)]
        return [*cols(names), F.col("w_pos").alias(POSITION), F.col("w_et").alias(EVENT_TIME)]

    if changes is None:
        if base is None:
            from pyspark.sql.types import StringType, TimestampType

            extra = [(POSITION, StringType()), (EVENT_TIME, TimestampType())] if system else []
            return spark.createDataFrame([], _ddl([*user, *extra]))
        return base.select(*cols(names), *((POSITION, EVENT_TIME) if system else ()))
    truncate_row = changes.where(F.col(OP) == "t").agg(F.max(POSITION).alias("p")).first()
    floors = [p for p in (truncate_row.p, plan.base_truncate_position) if p is not None]
    floor = max(floors) if floors else None
    newest = (
        changes.where(F.col(OP) != "t")
        .groupBy(*cols(key))
        .agg(
            F.max_by(
                F.struct(*(col(n) for n in names if n not in key), OP, POSITION, EVENT_TIME),
                POSITION,
            ).alias("w")
        )
    )
    winners = newest.select(
        *cols(key),
        *(col("w", n).alias(n) for n in names if n not in key),
        F.col(f"w.{OP}").alias("w_op"),
        F.col(f"w.{POSITION}").alias("w_pos"),
        F.col(f"w.{EVENT_TIME}").alias("w_et"),
    )
    if floor is not None:  # changes older than a truncate that counts are gone
        winners = winners.where(F.col("w_pos") > F.lit(floor))
    if base is None:
        return winners.where(F.col("w_op") != "d").select(*out(False))
    newer_truncate = truncate_row.p
    if newer_truncate is not None:
        base = base.where(F.col(POSITION).isNotNull() & (F.col(POSITION) > newer_truncate))

    def small(frame: DataFrame) -> DataFrame:  # broadcast to the base scan: no base shuffle
        return F.broadcast(frame) if log_bytes <= _BROADCAST_LOG_BYTES else frame

    high = plan.base_max_position
    suspects = None if high is None else winners.where(F.col("w_pos") <= F.lit(high))
    # one small job over the changes: the oldest late change, None when there is none
    oldest = suspects.agg(F.min("w_pos")).first()[0] if suspects is not None else None
    if oldest is None:
        suspects = None
    elif _logs_cover_base(spark, plan, table, oldest):
        # late changes judged by the event logs alone (one base scan): a change is stale when a
        # logged event at or before the base is at least as new; else it beats the base row
        stale = _stale(spark, plan, suspects, oldest, user, key)
        winners = winners.join(stale, list(key), "left_anti")
        suspects = None
        high = None
    # 1. the base, scanned once: its rows that no newer change replaces
    versions = winners.select(*cols(key), "w_pos")
    kept = (
        base.join(small(versions), list(key), "left")
        .where(
            F.col("w_pos").isNull()
            | (F.col(POSITION).isNotNull() & (F.col(POSITION) >= F.col("w_pos")))
        )
        .select(*out(True))
    )
    # 2. changes newer than the base's high-water mark beat whatever the base holds
    sure = winners if high is None else winners.where(F.col("w_pos") > F.lit(high))
    result = kept.unionByName(sure.where(F.col("w_op") != "d").select(*out(False)))
    if suspects is None:
        return result
    # 3. otherwise late changes (at or below the mark) are compared with their key's base row,
    #    found by a key-and-position scan of the base
    at_base = base.select(*cols(key), F.col(POSITION).alias("b_pos"), F.lit(True).alias("present"))
    resolved = suspects.join(
        at_base.join(small(suspects.select(*cols(key))), list(key), "left_semi"), list(key), "left"
    ).localCheckpoint(eager=True)  # few rows; keeps the key scan from running twice
    wins = resolved.where(
        F.col("present") & (F.col("b_pos").isNull() | (F.col("w_pos") > F.col("b_pos")))
    )
    absent = _drop_superseded(spark, resolved.where(F.col("present").isNull()), plan, user, key)
    late = wins.select(*out(False), "w_op").unionByName(absent.select(*out(False), "w_op"))
    return result.unionByName(late.where(F.col("w_op") != "d").select(*cols(result.columns)))


def _logs_cover_base(
    spark: SparkSession, plan: EventTimePlan, table: TableRef, oldest: str
) -> bool:
    """Whether every base row older than a late change came from a logged event.

    True when the base's whole history is retained and whatever was added without an event log
    (a bulk load, a user's write) is older than every late change, by the files' position bounds.
    """

    from sparkext.iceberg.snapshots import newest_added_position

    if plan.unlogged_snapshots is None or not plan.earlier_logs:
        return False
    if not plan.unlogged_snapshots:
        return True
    known, upper = newest_added_position(spark, table, plan.unlogged_snapshots, POSITION)
    if not known:
        return False
    return upper is None or upper < oldest


def _stale(spark: SparkSession, plan: EventTimePlan, suspects: DataFrame, oldest: str, user, key):
    """Keys of late changes that a logged event at or before the base is at least as new as.

    Only logs holding positions above the oldest late change are read (Parquet statistics skip
    the rest), so the cost follows how late the changes are, not the history.
    """
    from pyspark.sql import functions as F

    key_columns = [(name, dtype) for name, dtype in user if name in key]
    logs = _read_logs(spark, plan.earlier_logs, key_columns, key)
    assert logs is not None
    return (
        logs.where(F.col(POSITION) >= F.lit(oldest))
        .select(*cols(key), F.col(POSITION).alias("e_pos"))
        .join(F.broadcast(suspects.select(*cols(key), "w_pos")), list(key))
        .where(F.col("e_pos") >= F.col("w_pos"))
        .select(*cols(key))
        .distinct()
    )


def _drop_superseded(
    spark: SparkSession, fresh: DataFrame, plan: EventTimePlan, user, key: Sequence[str]
) -> DataFrame:
    """Changes for keys absent from the base that a newer change at or before it removed.

    A late event (position at or below the base's high-water mark) for a key the base does not
    hold may be older than a delete the base already applied. Only such candidates are checked,
    against the event logs up to the base (key and position columns).
    """
    from pyspark.sql import functions as F

    if not plan.earlier_logs:
        return fresh
    suspects = fresh.select(*cols(key), "w_pos")
    key_columns = [(name, dtype) for name, dtype in user if name in key]
    logs = _read_logs(spark, plan.earlier_logs, key_columns, key)
    assert logs is not None
    earlier = logs.select(*cols(key), F.col(POSITION).alias("e_pos"))
    newer = (
        earlier.join(F.broadcast(suspects), list(key))
        .where(F.col("e_pos") > F.col("w_pos"))
        .select(*cols(key))
        .distinct()
    )
    return fresh.join(newer, list(key), "left_anti")


def _ddl(user) -> str:
    return ddl_fields((name, dtype.simpleString()) for name, dtype in user)
