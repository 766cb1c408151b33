"""A table's state as of an event time, as a Spark DataFrame (the runner of the plan).

CDC tables (written by ingest_cdc): the base snapshot s1 is read through Iceberg time travel;
the event logs of later commits whose events may count are read with ``event time <= T0``; per
key the newest change by source position wins over the base row; deletes and truncates remove
rows. Append-only tables: every row whose event-time column is <= T0 (Iceberg prunes files by
their column bounds). All row work runs on executors; the driver reads summaries and sizes.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.actions.cdc.checkpoint import batch_directories, tree_size
from sparkext.errors import EventTimeError
from sparkext.iceberg import tags as iceberg_tags
from sparkext.iceberg.catalog import identifier_columns
from sparkext.iceberg.cdc_table import CdcTable
from sparkext.iceberg.snapshots import ancestry, live_files, newest_added_position
from sparkext.identifiers import col, cols, ddl_fields
from sparkext.planning import event_time_tags as plan_tags
from sparkext.planning.event_time import EventTimePlan, SnapshotFact, has_event_time, plan_as_of
from sparkext.planning.event_time_tags import TagRecord

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, GroupedData, SparkSession
    from pyspark.sql.types import DataType

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
        if not system:
            tagged = exact_tag(spark, table, chain, epoch_ms(as_of))
            if tagged is not None:
                return _tag_state(spark, table, tagged)
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


def _tag_state(spark: SparkSession, table: TableRef, record: TagRecord) -> AsOfResult:
    """The state an event-time tag made for this T0 holds (read like any tag)."""

    frame = spark.read.option("snapshot-id", str(record.snapshot_id)).table(table.name)
    names = [c for c in frame.columns if c not in SYSTEM_NAMES]
    files, bytes_ = live_files(spark, table, record.snapshot_id)
    return AsOfResult(frame.select(*cols(names)), "tag", record.snapshot_id, 0, 0, files, bytes_)


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
        assert row is not None  # an aggregation without grouping has one row
        files, bytes_ = int(row.n or 0), int(row.b or 0)
    return AsOfResult(frame, "append", table.current_snapshot_id, 0, 0, files, bytes_)


# ---- CDC tables ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CdcInputs:
    """The inputs of a CDC table's state as of T0: the base read by time travel and the events
    <= T0 of the later commits' event logs (both lazy DataFrames)."""

    base: DataFrame | None
    changes: DataFrame | None
    user: list[tuple[str, DataType]]  # (name, Spark type) of the user columns
    key: list[str]
    logs: int  # event logs read
    log_files: int
    log_bytes: int


def cdc_inputs(
    spark: SparkSession, table: TableRef, plan: EventTimePlan, as_of: dt.datetime
) -> CdcInputs:
    from pyspark.sql import functions as F

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
    changes = read_logs(spark, logs, user, key)
    if changes is not None:
        changes = changes.where(F.col(EVENT_TIME) <= times.lit(as_of))
    base = None
    if plan.base_snapshot_id is not None:
        base = _conform(
            spark.read.option("snapshot-id", str(plan.base_snapshot_id)).table(table.name),
            user,
            (OP, POSITION, EVENT_TIME),
        )
    return CdcInputs(base, changes, user, key, len(logs), files, bytes_)


def delta_as_of(
    spark: SparkSession, table: TableRef, plan: EventTimePlan, inputs: CdcInputs
) -> Delta | None:
    """What turns the plan's base into the state as of T0 (None: no change <= T0 after it)."""
    if inputs.changes is None:
        return None
    return _delta(
        spark,
        table,
        inputs.base,
        inputs.changes,
        plan,
        inputs.user,
        inputs.key,
        inputs.log_bytes,
        materialize=True,
    )


def _cdc_state(
    spark: SparkSession,
    table: TableRef,
    plan: EventTimePlan,
    as_of: dt.datetime,
    system: bool = False,
) -> AsOfResult:

    inputs = cdc_inputs(spark, table, plan, as_of)
    files, bytes_ = inputs.log_files, inputs.log_bytes
    if plan.base_snapshot_id is not None:
        n, base_bytes = live_files(spark, table, plan.base_snapshot_id)
        files, bytes_ = files + n, bytes_ + base_bytes
    frame = _merge(
        spark,
        table,
        inputs.base,
        inputs.changes,
        plan,
        inputs.user,
        inputs.key,
        inputs.log_bytes,
        system,
    )
    mode = "full-replay" if plan.full_replay else "cdc"
    return AsOfResult(frame, mode, plan.base_snapshot_id, inputs.logs, plan.pruned, files, bytes_)


def _conform(
    frame: DataFrame, user: Sequence[tuple[str, DataType]], extra: Sequence[str]
) -> DataFrame:
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


def read_logs(
    spark: SparkSession,
    logs: Sequence[str],
    user: Sequence[tuple[str, DataType]],
    key: Sequence[str],
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


@dataclass(frozen=True)
class Delta:
    """What turns the base into the state as of T0, per key (computed on executors).

    ``frame``: one row per key whose state at T0 differs from its base row: the user columns,
    ``w_op`` (``d``: the key is gone), ``w_pos`` and ``w_et`` (position and event time of the
    winning change). ``truncate``: the position of a truncate after the base that counts; base
    rows at or below it are gone too (None: no such truncate).
    """

    frame: DataFrame
    truncate: str | None


def _small(frame: DataFrame, log_bytes: int) -> DataFrame:
    """``frame`` hinted for broadcast to the base scan (no base shuffle) when the logs are small."""
    from pyspark.sql import functions as F

    return F.broadcast(frame) if log_bytes <= _BROADCAST_LOG_BYTES else frame


def _delta(
    spark: SparkSession,
    table: TableRef,
    base: DataFrame | None,
    changes: DataFrame,
    plan: EventTimePlan,
    user: Sequence[tuple[str, DataType]],
    key: Sequence[str],
    log_bytes: int,
    materialize: bool = False,
) -> Delta:
    """Per key, the newest change <= T0 after the base that beats the key's base row.

    ``materialize``: keep the per-key aggregate on the executors (a tag reads a day's changes
    three times: newest truncate, oldest late change, the rows it writes).

    A change newer than the base's high-water mark always wins. A late one (at or below the
    mark) wins only when its key's base row, or a delete the base already applied, is older:
    judged from the event logs alone when they cover the base, else by a key-and-position scan
    of the base (rows at or below a newer truncate already removed from ``base``).
    """
    from pyspark.sql import functions as F

    names = [name for name, _ in user]
    newest_of = F.max_by(
        F.struct(*(col(n) for n in names if n not in key), OP, POSITION, EVENT_TIME), POSITION
    ).alias("w")

    def winners_of(grouped: GroupedData) -> DataFrame:
        return grouped.agg(newest_of).select(
            *cols(key),
            *(col("w", n).alias(n) for n in names if n not in key),
            F.col(f"w.{OP}").alias("w_op"),
            F.col(f"w.{POSITION}").alias("w_pos"),
            F.col(f"w.{EVENT_TIME}").alias("w_et"),
        )

    if materialize:
        # ONE aggregation, kept on the executors: truncates (no key) fold into one group, so the
        # newest truncate, the oldest late change and the rows to write all come from it
        keys = [F.when(F.col(OP) != "t", col(k)).alias(k) for k in key]
        grouped = winners_of(changes.groupBy(*keys)).localCheckpoint(eager=True)
        row = grouped.where(F.col("w_op") == "t").agg(F.max("w_pos")).first()
        assert row is not None  # an aggregation without grouping has one row
        newest_truncate = row[0]
        winners = grouped.where(F.col("w_op") != "t")
    else:
        row = changes.where(F.col(OP) == "t").agg(F.max(POSITION)).first()
        assert row is not None  # an aggregation without grouping has one row
        newest_truncate = row[0]
        winners = winners_of(changes.where(F.col(OP) != "t").groupBy(*cols(key)))
    floors = [p for p in (newest_truncate, plan.base_truncate_position) if p is not None]
    floor = max(floors) if floors else None
    if floor is not None:  # changes older than a truncate that counts are gone
        winners = winners.where(F.col("w_pos") > F.lit(floor))
    high = plan.base_max_position
    if base is None or high is None:
        return Delta(winners, newest_truncate)
    if newest_truncate is not None:
        base = base.where(F.col(POSITION).isNotNull() & (F.col(POSITION) > newest_truncate))
    suspects = winners.where(F.col("w_pos") <= F.lit(high))
    # one small job over the changes: the oldest late change, None when there is none
    row = suspects.agg(F.min("w_pos")).first()
    assert row is not None  # an aggregation without grouping has one row
    oldest = row[0]
    if oldest is None:
        return Delta(winners, newest_truncate)
    if _logs_cover_base(spark, plan, table, oldest):
        # late changes judged by the event logs alone (no base scan): a change is stale when a
        # logged event at or before the base is at least as new; else it beats the base row
        stale = _stale(spark, plan, suspects, oldest, user, key)
        return Delta(winners.join(stale, list(key), "left_anti"), newest_truncate)
    # otherwise late changes are compared with their key's base row, found by a key-and-position
    # scan of the base
    sure = winners.where(F.col("w_pos") > F.lit(high))
    at_base = base.select(*cols(key), F.col(POSITION).alias("b_pos"), F.lit(True).alias("present"))
    resolved = suspects.join(
        at_base.join(_small(suspects.select(*cols(key)), log_bytes), list(key), "left_semi"),
        list(key),
        "left",
    ).localCheckpoint(eager=True)  # few rows; keeps the key scan from running twice
    wins = resolved.where(
        F.col("present") & (F.col("b_pos").isNull() | (F.col("w_pos") > F.col("b_pos")))
    )
    absent = _drop_superseded(
        spark, resolved.where(F.col("present").isNull()), plan, user, key, oldest
    )
    columns = winners.columns
    late = wins.select(*columns).unionByName(absent.select(*columns))
    return Delta(sure.unionByName(late), newest_truncate)


def _merge(
    spark: SparkSession,
    table: TableRef,
    base: DataFrame | None,
    changes: DataFrame | None,
    plan: EventTimePlan,
    user: Sequence[tuple[str, DataType]],
    key: Sequence[str],
    log_bytes: int,
    system: bool = False,
) -> DataFrame:
    """Per key, the newest of (base row, newest change <= T0) by source position."""
    from pyspark.sql import functions as F

    names = [name for name, _ in user]

    def out(from_base: bool) -> list[Column]:  # the user columns, plus op, position and event time
        if not system:
            return cols(names)
        if from_base:
            return [*cols(names), F.col(OP), F.col(POSITION), F.col(EVENT_TIME)]
        return [
            *cols(names),
            F.col("w_op").alias(OP),
            F.col("w_pos").alias(POSITION),
            F.col("w_et").alias(EVENT_TIME),
        ]

    if changes is None:
        if base is None:
            from pyspark.sql.types import StringType, TimestampType

            extra = (
                [(OP, StringType()), (POSITION, StringType()), (EVENT_TIME, TimestampType())]
                if system
                else []
            )
            return spark.createDataFrame([], _ddl([*user, *extra]))
        return base.select(*out(True))
    delta = _delta(spark, table, base, changes, plan, user, key, log_bytes)
    winners = delta.frame.where(F.col("w_op") != "d").select(*out(False))
    if base is None:
        return winners
    if delta.truncate is not None:
        base = base.where(F.col(POSITION).isNotNull() & (F.col(POSITION) > delta.truncate))
    changed = _small(delta.frame.select(*cols(key)), log_bytes)
    return base.join(changed, list(key), "left_anti").select(*out(True)).unionByName(winners)


def _logs_cover_base(
    spark: SparkSession, plan: EventTimePlan, table: TableRef, oldest: str
) -> bool:
    """Whether every base row older than a late change came from a logged event.

    True when the base's whole history is retained and whatever was added without an event log
    (a bulk load, a user's write) is older than every late change, by the files' position bounds.
    """

    if plan.unlogged_snapshots is None or not plan.earlier_logs:
        return False
    if not plan.unlogged_snapshots:
        return True
    known, upper = newest_added_position(spark, table, plan.unlogged_snapshots, POSITION)
    if not known:
        return False
    return upper is None or upper < oldest


def _stale(
    spark: SparkSession,
    plan: EventTimePlan,
    suspects: DataFrame,
    oldest: str,
    user: Sequence[tuple[str, DataType]],
    key: Sequence[str],
) -> DataFrame:
    """Keys of late changes that a logged event at or before the base is at least as new as.

    Only logs holding positions above the oldest late change are read (Parquet statistics skip
    the rest), so the cost follows how late the changes are, not the history.
    """
    from pyspark.sql import functions as F

    key_columns = [(name, dtype) for name, dtype in user if name in key]
    logs = read_logs(spark, plan.earlier_logs_reaching(oldest), key_columns, key)
    if logs is None:
        return suspects.select(*cols(key)).limit(0)
    return (
        logs.where(F.col(POSITION) >= F.lit(oldest))
        .select(*cols(key), F.col(POSITION).alias("e_pos"))
        .join(F.broadcast(suspects.select(*cols(key), "w_pos")), list(key))
        .where(F.col("e_pos") >= F.col("w_pos"))
        .select(*cols(key))
        .distinct()
    )


def _drop_superseded(
    spark: SparkSession,
    fresh: DataFrame,
    plan: EventTimePlan,
    user: Sequence[tuple[str, DataType]],
    key: Sequence[str],
    oldest: str,
) -> DataFrame:
    """Changes for keys absent from the base that a newer change at or before it removed.

    A late event (position at or below the base's high-water mark) for a key the base does not
    hold may be older than a delete the base already applied. Only such candidates are checked,
    against the event logs up to the base (key and position columns) that reach ``oldest``, the
    oldest candidate's position.
    """
    from pyspark.sql import functions as F

    reaching = plan.earlier_logs_reaching(oldest)
    if not reaching:
        return fresh
    suspects = fresh.select(*cols(key), "w_pos")
    key_columns = [(name, dtype) for name, dtype in user if name in key]
    logs = read_logs(spark, reaching, key_columns, key)
    assert logs is not None
    earlier = logs.select(*cols(key), F.col(POSITION).alias("e_pos"))
    newer = (
        earlier.join(F.broadcast(suspects), list(key))
        .where(F.col("e_pos") > F.col("w_pos"))
        .select(*cols(key))
        .distinct()
    )
    return fresh.join(newer, list(key), "left_anti")


def _ddl(user: Iterable[tuple[str, DataType]]) -> str:
    return ddl_fields((name, dtype.simpleString()) for name, dtype in user)


def exact_tag(
    spark: SparkSession, table: TableRef, chain: Sequence[SnapshotFact], as_of_ms: int
) -> TagRecord | None:
    """An event-time tag of ``table`` made for exactly this T0 that still names the snapshot it
    was made on and that no late event has made stale since (so reading it gives the same rows
    as computing the state)."""

    if table.prop(plan_tags.TAGS_PROPERTY) is None:
        return None
    java = CdcTable(spark, table.name)
    refs = iceberg_tags.refs(java)
    for record in iceberg_tags.records(java).values():
        moved = refs[record.tag].snapshot_id != record.snapshot_id  # e.g. ALTER TABLE ... TAG
        if record.as_of_ms == as_of_ms and not moved and not plan_tags.late_commits(record, chain):
            return record
    return None
