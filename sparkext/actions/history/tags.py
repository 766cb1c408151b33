"""Make an event-time tag (the runner of :mod:`sparkext.planning.event_time_tags`).

The planner picks how (tag the base, commit the changes on a branch, or rewrite the state); this
module computes the rows on executors, writes their files there
(:func:`sparkext.executors.cdc.files.
file_writer`: data files and equality deletes with Iceberg field ids and metrics), and hands the
file descriptors to :func:`sparkext.iceberg.tags.commit_tag` for ONE commit. The driver sees one
small row per written file.

Also the work of the procedures :mod:`sparkext.procedures.tag_event_time_days` (:func:`tag_days`,
one :class:`DayResult` per day; this module declares its options as :data:`DAYS_OPTIONS`) and
:mod:`sparkext.procedures.event_time_tags` (:func:`event_time_tags`, one :class:`TagInfo` per
tag).

Floor: actions.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext import times
from sparkext.actions.history.as_of import (
    EVENT_TIME,
    OP,
    POSITION,
    cdc_inputs,
    delta_as_of,
    epoch_ms,
    state_as_of,
)
from sparkext.declarations import Option, parse_boolean, parse_count, parse_duration
from sparkext.errors import EventTimeError
from sparkext.executors.cdc.files import (
    DATA,
    EQUALITY_DELETES,
    FILE_SCHEMA_DDL,
    KIND,
    WrittenFile,
    file_writer,
    remove_written,
)
from sparkext.executors.cdc.partitioning import unsupported
from sparkext.iceberg import tags as iceberg_tags
from sparkext.iceberg.cdc_table import CdcTable
from sparkext.iceberg.commit import discard_unless_unknown
from sparkext.iceberg.snapshots import ancestry
from sparkext.identifiers import col, cols, map_in_arrow
from sparkext.planning import event_time_tags as plan_tags
from sparkext.planning.event_time import has_event_time, plan_as_of
from sparkext.planning.event_time_tags import (
    GRACE_DEFAULT,
    MAX_REF_AGE_DEFAULT,
    TAG_PREFIX_DEFAULT,
    TagRecord,
    check_tag_name,
    late_commits,
    plan_days,
    watermark_ms,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from sparkext.iceberg.catalog import TableRef

AS_OF_SUMMARY = "sparkext.event-time.as-of"
TAG_SUMMARY = "sparkext.event-time.tag"
_ACTIONS = {
    plan_tags.BASE: "tagged-base",
    plan_tags.CHANGES: "committed-changes",
    plan_tags.REWRITE: "rewrote-state",
    plan_tags.EXISTS: "exists",
}


@dataclass(frozen=True)
class TagResult:
    tag: str
    snapshot_id: int
    base_snapshot_id: int | None
    action: str  # tagged-base, committed-changes, rewrote-state, exists
    mode: str  # cdc, append or full-replay
    rows_changed: int  # keys whose state differs from the base (deleted or replaced)
    rows_written: int  # data rows written
    files_written: int
    bytes_written: int
    change_commits: int
    pruned_commits: int
    files_read: int
    bytes_read: int


def create_tag(
    spark: SparkSession,
    table: TableRef,
    as_of: dt.datetime,
    tag: str,
    *,
    replace: bool = False,
    max_ref_age_ms: int,
    event_time_column: str | None = None,
    allow_full_replay: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> TagResult:
    """Make ``tag`` name ``table``'s state as of ``as_of`` (see the module docstring)."""
    plan_tags.check_tag_name(tag)
    as_of = times.instant(as_of, times.session_zone(spark))
    as_of_ms = epoch_ms(as_of)
    as_of_text = times.wall_clock_text(as_of, times.session_zone(spark))
    java = CdcTable(spark, table.name)
    chain = ancestry(spark, table)
    if not chain:
        raise EventTimeError(
            f"Table '{table.name}' has no snapshot yet, so there is no state to tag; ingest "
            "into it first."
        )
    planned_from = chain[-1].snapshot_id
    cdc = has_event_time(chain)
    # an append-only table has no base to start from: its rows <= T0 are rewritten
    plan = plan_as_of(chain if cdc else [], as_of_ms, allow_full_replay=allow_full_replay)
    existing = iceberg_tags.refs(java).get(tag)
    records = iceberg_tags.records(java)
    how = plan_tags.decide(
        plan,
        tag,
        existing.snapshot_id if existing else None,
        existing.kind if existing else None,
        records.get(tag),
        replace,
        as_of_text,
    )
    mode = "append" if not cdc else ("full-replay" if plan.full_replay else "cdc")
    if how == plan_tags.EXISTS:
        assert existing is not None  # decide: EXISTS only for a tag that names a snapshot
        record = records[tag]
        return TagResult(
            tag,
            existing.snapshot_id,
            record.base_snapshot_id,
            _ACTIONS[how],
            mode,
            record.rows_changed,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        )
    base_id = plan.base_snapshot_id
    files: list[WrittenFile] = []
    change_commits = len(plan.changes)
    files_read = bytes_read = 0
    rows_changed = 0
    if how == plan_tags.CHANGES:
        progress(f"reading the changes after snapshot {base_id}")
        inputs = cdc_inputs(spark, table, plan, as_of)
        files_read, bytes_read = inputs.log_files, inputs.log_bytes
        delta = delta_as_of(spark, table, plan, inputs)
        if delta is not None and delta.truncate is not None:
            how = plan_tags.REWRITE  # a truncate that counts removes most of the base
        elif delta is not None:
            progress(f"writing the changes for tag {tag}")
            files = _write(spark, java, _delta_rows(delta.frame, inputs.key, inputs.user), tag)
            rows_changed = sum(f.records for f in files if f.kind == EQUALITY_DELETES)
            if not files:
                how = plan_tags.BASE  # every change lost to a newer base row
    if how == plan_tags.REWRITE:
        if not cdc:
            _check_writable(java, table.name)

        progress(f"writing the state as of {as_of_text} for tag {tag}")
        state = state_as_of(
            spark,
            table,
            as_of,
            event_time_column=event_time_column,
            allow_full_replay=allow_full_replay,
            system=cdc,
        )
        files_read, bytes_read = state.files_read, state.bytes_read
        files = _write(spark, java, _state_rows(state.frame), tag)
        rows_changed = sum(f.records for f in files)
    start = base_id if base_id is not None else planned_from  # a rewrite replaces its files
    record = TagRecord(
        tag=tag,
        as_of_ms=as_of_ms,
        snapshot_id=start,
        base_snapshot_id=base_id,
        planned_from=planned_from,
        how=how,
        rows_changed=rows_changed,
        files_written=len(files),
        bytes_written=sum(f.bytes for f in files),
        created_ms=int(time.time() * 1000),
    )
    progress(f"committing tag {tag}")
    with discard_unless_unknown(
        lambda: iceberg_tags.discard(java, files), table.name, f"the tag '{tag}'"
    ):
        snapshot_id = iceberg_tags.commit_tag(
            spark,
            java,
            tag=tag,
            start_snapshot_id=start,
            planned_from=planned_from,
            files=files,
            replace_start=how == plan_tags.REWRITE,
            replace_tag=existing is not None,
            max_ref_age_ms=max_ref_age_ms,
            record=record,
            summary={AS_OF_SUMMARY: str(as_of_ms), TAG_SUMMARY: tag},
        )
    return TagResult(
        tag,
        snapshot_id,
        base_id,
        _ACTIONS[how],
        mode,
        rows_changed,
        sum(f.records for f in files if f.kind == DATA),
        len(files),
        record.bytes_written,
        change_commits,
        plan.pruned,
        files_read,
        bytes_read,
    )


def _delta_rows(
    delta: DataFrame, key: Sequence[str], user: Sequence[tuple[str, DataType]]
) -> DataFrame:
    """Per changed key an equality-delete row (key only) and, when it is alive at T0, a data
    row: one pass over the delta (each row exploded into one or two)."""
    from pyspark.sql import functions as F

    kinds = F.when(F.col("w_op") == "d", F.array(F.lit(EQUALITY_DELETES))).otherwise(
        F.array(F.lit(EQUALITY_DELETES), F.lit(DATA))
    )
    rows = delta.select("*", F.explode(kinds).alias(KIND))
    is_data = F.col(KIND) == DATA

    def data_only(column: Column, name: str) -> Column:
        return F.when(is_data, column).alias(name)

    return rows.select(
        KIND,
        *(col(n) if n in key else data_only(col(n), n) for n, _ in user),
        data_only(F.col("w_op"), OP),
        data_only(F.col("w_pos"), POSITION),
        data_only(F.col("w_et"), EVENT_TIME),
    )


def _check_writable(java: CdcTable, name: str) -> None:
    """Refuse an append-only table whose partitions sparkext's writer cannot compute."""
    fields = java.partition_fields()
    bad = unsupported(fields, [f.source for f in fields])
    if bad:
        raise EventTimeError(
            f"Table '{name}' is append-only and partitioned by {', '.join(bad)}, which a tag "
            "cannot rewrite yet; write the state to a daily partition instead with target => "
            "'lake.dw.t_daily'."
        )


def _state_rows(state: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return state.select(F.lit(DATA).alias(KIND), *state.columns)


def _write(spark: SparkSession, java: CdcTable, rows: DataFrame, tag: str) -> list[WrittenFile]:
    """Write ``rows`` (with ``__kind``) as Iceberg files on executors; one row back per file."""
    directory = java.data_directory()
    prefix = f"tag-{''.join(c if c.isalnum() else '-' for c in tag)[:40]}-{uuid.uuid4().hex[:8]}"
    writer = file_writer(
        directory,
        iceberg_tags.field_ids(java),
        prefix,
        java.partition_fields(),
        java.metrics_properties(),
    )
    key = java.key()
    tasks = max(1, spark.sparkContext.defaultParallelism // 2)
    narrowed = rows.coalesce(tasks)
    if key:
        narrowed = narrowed.sortWithinPartitions(*cols(key))
    written = map_in_arrow(narrowed, writer, FILE_SCHEMA_DDL)
    try:
        described = written.collect()  # one row per written file
    except Exception:
        remove_written(directory, prefix)  # files of the tasks that did finish
        raise
    return [
        WrittenFile(
            r.path, r.kind, r.records, r.bytes, tuple(json.loads(r.partition or "[]")), r.metrics
        )
        for r in described
    ]


# tag_event_time_days: the daily event-time tag, for cron
GRACE = "grace"
PREFIX = "tag-prefix"
BACKFILL = "backfill-days"
REPLACE_STALE = "replace-stale"
TAG_MAX_AGE = "tag-max-age"

DAYS_OPTIONS = (
    Option(
        GRACE,
        GRACE_DEFAULT,
        "a day closes when the newest event time passed its end by this",
        parse_duration,
    ),
    Option(PREFIX, TAG_PREFIX_DEFAULT, "tag name prefix: the tag is <prefix><day>"),
    Option(BACKFILL, "1", "tag up to this many closed days, newest first", parse_count),
    Option(REPLACE_STALE, "false", "re-tag a day whose tag late events made stale", parse_boolean),
    Option(TAG_MAX_AGE, MAX_REF_AGE_DEFAULT, "the tags' max-ref-age", parse_duration),
)


@dataclass(frozen=True)
class DayResult:
    """One day :func:`tag_days` tagged, found tagged, or found stale."""

    day: str  # ISO date, session time zone
    tag: str
    as_of: dt.datetime  # T0: the day's last millisecond
    action: str  # tagged-base, committed-changes, rewrote-state, exists, stale or replaced
    snapshot_id: int
    rows_changed: int
    files_written: int
    bytes_written: int
    late_commits: int
    closes_at: dt.datetime
    duration_ms: int

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.day, self.tag, self.as_of, self.action, self.snapshot_id, self.rows_changed,
            self.files_written, self.bytes_written, self.late_commits, self.closes_at,
            self.duration_ms,
        )  # fmt: skip


def parse_day(text: str | None) -> dt.date | None:
    """``day =>`` as a date (None: not given), or the one sentence refusing it."""
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise EventTimeError(f"day => '{text}' is not a date; write day => '2026-11-21'.") from None


def duration_text(ms: int) -> str:
    """A duration as a short text.

    >>> duration_text(3_600_000), duration_text(90_000)
    ('1 h', '90 s')
    """
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def tag_days(
    spark: SparkSession,
    table: TableRef,
    day: str | None,
    force: bool,
    options: Mapping[str, Any],
    progress: Callable[[str], None] = lambda message: None,
) -> tuple[DayResult, ...]:
    """Tag the newest closed day (or ``day``) and up to ``backfill-days`` - 1 untagged days
    before it; ``options`` are the resolved :data:`DAYS_OPTIONS`."""
    zone = times.session_zone(spark)
    prefix = check_tag_name(options[PREFIX]) if options[PREFIX] else ""
    chain = ancestry(spark, table)
    days = plan_days(chain, zone, options[GRACE], prefix, parse_day(day), options[BACKFILL])
    mark = watermark_ms(chain)
    assert mark is not None  # plan_days refused a chain without event times
    out = []
    for planned in days:
        started = time.monotonic()
        closes = times.from_millis(planned.as_of_ms + 1 + options[GRACE])
        if not planned.closed and not force:
            if day is None:
                continue  # nothing closed yet: nothing to do
            raise EventTimeError(
                f"Day {planned.day} of {table.name} may still receive late events: the newest "
                f"event time ingested is {times.wall_clock_text(times.from_millis(mark), zone)} "
                f"and the day closes at {times.wall_clock_text(closes, zone)} (grace "
                f"{duration_text(options[GRACE])}); run again later or pass force => true."
            )
        java = CdcTable(spark, table.name)
        record = iceberg_tags.records(java).get(planned.tag)
        late = late_commits(record, chain) if record is not None else 0
        if (
            record is not None
            and record.as_of_ms == planned.as_of_ms
            and not (late and options[REPLACE_STALE])
        ):
            action = "stale" if late else "exists"
            made = (record.snapshot_id, record.rows_changed, 0, 0)
        else:
            progress(f"tagging {planned.day} as {planned.tag}")
            result = create_tag(
                spark,
                table,
                times.from_millis(planned.as_of_ms),
                planned.tag,
                replace=record is not None and record.as_of_ms == planned.as_of_ms,  # stale
                max_ref_age_ms=options[TAG_MAX_AGE],
                progress=progress,
            )
            action = "replaced" if record is not None else result.action
            late = 0
            made = (
                result.snapshot_id,
                result.rows_changed,
                result.files_written,
                result.bytes_written,
            )
        out.append(
            DayResult(
                planned.day.isoformat(),
                planned.tag,
                times.from_millis(planned.as_of_ms),
                action,
                *made,
                late,
                closes,
                int((time.monotonic() - started) * 1000),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class TagInfo:
    """One event-time tag that still exists (event_time_tags' row)."""

    tag: str
    as_of: dt.datetime
    snapshot_id: int
    base_snapshot_id: int | None
    how: str  # base, changes or rewrite
    rows_changed: int
    files_written: int
    bytes_written: int
    created_at: dt.datetime
    expires_at: dt.datetime | None
    late_commits: int
    as_recorded: bool  # the tag still names the snapshot it was made on

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.tag, self.as_of, self.snapshot_id, self.base_snapshot_id, self.how,
            self.rows_changed, self.files_written, self.bytes_written, self.created_at,
            self.expires_at, self.late_commits, self.as_recorded,
        )  # fmt: skip


def event_time_tags(spark: SparkSession, table: TableRef) -> tuple[TagInfo, ...]:
    """The event-time tags of ``table`` that still exist, oldest T0 first."""
    java = CdcTable(spark, table.name)
    refs = iceberg_tags.refs(java)
    records = sorted(iceberg_tags.records(java).values(), key=lambda r: (r.as_of_ms, r.tag))
    chain = ancestry(spark, table) if records else []
    out = []
    for r in records:
        ref = refs[r.tag]
        stamp = iceberg_tags.snapshot_time_ms(java, ref.snapshot_id)
        expires = (
            times.from_millis(stamp + ref.max_ref_age_ms)
            if ref.max_ref_age_ms is not None and stamp is not None
            else None
        )
        out.append(
            TagInfo(
                r.tag,
                times.from_millis(r.as_of_ms),
                ref.snapshot_id,
                r.base_snapshot_id,
                r.how,
                r.rows_changed,
                r.files_written,
                r.bytes_written,
                times.from_millis(r.created_ms),
                expires,
                late_commits(r, chain),
                ref.snapshot_id == r.snapshot_id,
            )
        )
    return tuple(out)
