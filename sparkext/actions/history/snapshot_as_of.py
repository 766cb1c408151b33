"""The snapshot_as_of_event_time action: a table's state as of an event time T0, read as a
DataFrame, made an Iceberg tag of the table, or written into a daily partition of a target.

Floor: actions (the routine :mod:`sparkext.procedures.snapshot_as_of_event_time` calls
:func:`state` and :func:`snapshot_as_of` and gets typed results back; this module declares the
options).

The state is :func:`sparkext.actions.history.as_of.state_as_of`'s; a tag is
:func:`sparkext.actions.history.tags.create_tag`'s; a daily partition is replaced in one atomic
overwrite (:func:`sparkext.actions.history.daily.write_partition`), so a rerun is idempotent.
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext import times
from sparkext.actions.history.as_of import AsOfResult, state_as_of
from sparkext.actions.history.daily import write_partition
from sparkext.actions.history.tags import create_tag
from sparkext.declarations import Context, Option, parse_boolean, parse_duration
from sparkext.errors import EventTimeError, ProcedureArgumentError
from sparkext.planning.event_time_tags import MAX_REF_AGE_DEFAULT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

REPLACE_TAG = "replace-tag"
TAG_MAX_AGE = "tag-max-age"
ALLOW_FULL_REPLAY = "allow-full-replay"
ALLOW_FULL_REPLAY_DEFAULT = "false"
PARTITION_COLUMN = "partition-column"
PARTITION_COLUMN_DEFAULT = "dt"

FULL_REPLAY_OPTION = Option(
    ALLOW_FULL_REPLAY,
    ALLOW_FULL_REPLAY_DEFAULT,
    "when the base snapshot expired, rebuild from every event log (slow) instead of failing",
    parse_boolean,
)
FUNCTION_OPTIONS = (FULL_REPLAY_OPTION,)  # the table function's
OPTIONS = (  # the procedure's
    FULL_REPLAY_OPTION,
    Option(
        PARTITION_COLUMN,
        PARTITION_COLUMN_DEFAULT,
        "the target's string partition column holding partition_value",
    ),
    Option(
        REPLACE_TAG,
        "false",
        "move an existing tag made for another event time (or a stale one) to this state",
        parse_boolean,
    ),
    Option(
        TAG_MAX_AGE,
        MAX_REF_AGE_DEFAULT,
        "the tag's max-ref-age: snapshot expiry drops the tag after this long",
        parse_duration,
    ),
)


@dataclass(frozen=True)
class SnapshotAsOfResult:
    """What the procedure did: a partition written (``tag`` None) or a tag made."""

    base_snapshot_id: int | None
    change_commits: int
    pruned_commits: int
    files_read: int
    bytes_read: int
    rows_written: int
    target_snapshot_id: int | None
    partition_value: str | None
    mode: str
    duration_ms: int
    tag: str | None
    tag_snapshot_id: int | None
    action: str
    rows_changed: int | None
    files_written: int
    bytes_written: int

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.base_snapshot_id, self.change_commits, self.pruned_commits, self.files_read,
            self.bytes_read, self.rows_written, self.target_snapshot_id, self.partition_value,
            self.mode, self.duration_ms, self.tag, self.tag_snapshot_id, self.action,
            self.rows_changed, self.files_written, self.bytes_written,
        )  # fmt: skip


def check_as_of(as_of: Any) -> dt.datetime:
    """``as_of`` as a timestamp, or the one sentence refusing it."""
    if not isinstance(as_of, dt.datetime):
        raise EventTimeError(
            f"as_of must be a timestamp, got {as_of!r}; write TIMESTAMP '2026-11-21 00:00:00'."
        )
    return as_of


def state(
    context: Context,
    table: TableRef,
    as_of: Any,
    event_time_column: str | None,
    allow_full_replay: bool,
) -> AsOfResult:
    """The table's state as of ``as_of``; a full replay is warned about."""
    as_of = check_as_of(as_of)
    when = times.wall_clock_text(as_of, times.session_zone(context.spark))
    context.progress(f"planning {table.name} as of {when}")
    result = state_as_of(
        context.spark,
        table,
        as_of,
        event_time_column=event_time_column,
        allow_full_replay=allow_full_replay,
    )
    if result.mode == "full-replay":
        message = (
            f"the base snapshot of {table.name} for this event time has expired; "
            f"replaying all {result.change_commits} event log(s) instead"
        )
        warnings.warn(message, stacklevel=2)
        context.progress(f"warning: {message}")
    return result


def partition_value(spark: SparkSession, as_of: dt.datetime) -> str:
    """T0's calendar date in the session time zone, e.g. '2026-11-21'."""
    zone = times.session_zone(spark)
    return times.wall_clock(as_of, zone).date().isoformat()  # naive: already a wall clock


def snapshot_as_of(
    context: Context,
    table: TableRef,
    as_of: Any,
    *,
    target: str | None,
    partition: str | None,
    tag: str | None,
    event_time_column: str | None,
    options: Mapping[str, Any],
) -> SnapshotAsOfResult:
    """Write the state as of ``as_of`` into partition ``partition`` (default: T0's date) of
    ``target``, or make it ``tag`` of the table; ``options`` are the resolved :data:`OPTIONS`."""
    if tag is not None and target is not None:
        raise ProcedureArgumentError(
            "Pass either target => (a daily partition of a table) or tag => (an Iceberg tag of "
            "the source table), not both."
        )
    if tag is not None:
        return _tag(context, table, as_of, tag, event_time_column, options)
    if target is None:
        raise ProcedureArgumentError(
            "Say where the state goes: tag => 'et_2026-11-21' (an Iceberg tag of the table, "
            "written in O(changes)) or target => 'lake.ods.orders_daily' (a daily partition)."
        )
    started = time.monotonic()
    spark = context.spark
    column = options[PARTITION_COLUMN]
    value = partition or partition_value(spark, as_of)
    result = state(context, table, as_of, event_time_column, options[ALLOW_FULL_REPLAY])
    if column in result.frame.columns:
        raise EventTimeError(
            f"The source table already has a column '{column}'; choose another partition column "
            "with options => map('partition-column', 'snapshot_date')."
        )
    context.progress(f"writing {target} partition {column}={value}")
    written = write_partition(spark, result.frame, target, column, value)
    return SnapshotAsOfResult(
        base_snapshot_id=result.base_snapshot_id,
        change_commits=result.change_commits,
        pruned_commits=result.pruned_commits,
        files_read=result.files_read,
        bytes_read=result.bytes_read,
        rows_written=written.rows,
        target_snapshot_id=written.snapshot_id,
        partition_value=value,
        mode=result.mode,
        duration_ms=int((time.monotonic() - started) * 1000),
        tag=None,
        tag_snapshot_id=None,
        action="wrote-partition",
        rows_changed=None,
        files_written=written.files,
        bytes_written=written.bytes,
    )


def _tag(
    context: Context,
    table: TableRef,
    as_of: Any,
    tag: str,
    event_time_column: str | None,
    options: Mapping[str, Any],
) -> SnapshotAsOfResult:
    started = time.monotonic()
    context.progress(f"making tag {tag} of {table.name}")
    result = create_tag(
        context.spark,
        table,
        check_as_of(as_of),
        tag,
        replace=options[REPLACE_TAG],
        max_ref_age_ms=options[TAG_MAX_AGE],
        event_time_column=event_time_column,
        allow_full_replay=options[ALLOW_FULL_REPLAY],
        progress=context.progress,
    )
    return SnapshotAsOfResult(
        base_snapshot_id=result.base_snapshot_id,
        change_commits=result.change_commits,
        pruned_commits=result.pruned_commits,
        files_read=result.files_read,
        bytes_read=result.bytes_read,
        rows_written=result.rows_written,
        target_snapshot_id=None,
        partition_value=None,
        mode=result.mode,
        duration_ms=int((time.monotonic() - started) * 1000),
        tag=result.tag,
        tag_snapshot_id=result.snapshot_id,
        action=result.action,
        rows_changed=result.rows_changed,
        files_written=result.files_written,
        bytes_written=result.bytes_written,
    )
