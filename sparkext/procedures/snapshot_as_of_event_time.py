"""snapshot_as_of_event_time: a table's consistent state as of an event time T0.

Table function: ``SELECT * FROM sparkext.snapshot_as_of_event_time('lake.db.orders',
TIMESTAMP '2026-11-21 00:00:00' [, 'event_time_column' [, map(...)]])`` returns the table's user
columns as they were at T0. Procedure: ``CALL sparkext.snapshot_as_of_event_time(table => ...,
as_of => TIMESTAMP ..., target => 'lake.ods.orders_daily' [, partition_value => '2026-11-21'])``
writes that state into one partition of a target table (created if missing); re-running the
same partition replaces it in one atomic overwrite, so a rerun is idempotent.
See :mod:`sparkext.actions.history.as_of` for how the state is computed.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from typing import Any

from sparkext import times
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    parse_boolean,
    parse_duration,
)
from sparkext.errors import EventTimeError, ProcedureArgumentError
from sparkext.planning.event_time_tags import MAX_REF_AGE_DEFAULT

REPLACE_TAG = "replace-tag"
TAG_MAX_AGE = "tag-max-age"
ALLOW_FULL_REPLAY = "allow-full-replay"
ALLOW_FULL_REPLAY_DEFAULT = "false"
PARTITION_COLUMN = "partition-column"
PARTITION_COLUMN_DEFAULT = "dt"


def _state(context: Context, args: BoundArgs):
    from sparkext.actions.history.as_of import state_as_of

    as_of = _as_of(args)
    when = times.wall_clock_text(as_of, times.session_zone(context.spark))
    context.progress(f"planning {args.table().name} as of {when}")
    result = state_as_of(
        context.spark,
        args.table(),
        as_of,
        event_time_column=args["event_time_column"],
        allow_full_replay=args.options[ALLOW_FULL_REPLAY],
    )
    if result.mode == "full-replay":
        message = (
            f"the base snapshot of {args.table().name} for this event time has expired; "
            f"replaying all {result.change_commits} event log(s) instead"
        )
        warnings.warn(message, stacklevel=2)
        context.progress(f"warning: {message}")
    return result


def run_function(context: Context, args: BoundArgs):
    return _state(context, args).frame


def _partition_value(spark, as_of: dt.datetime) -> str:
    """T0's calendar date in the session time zone, e.g. '2026-11-21'."""
    zone = times.session_zone(spark)
    return times.wall_clock(as_of, zone).date().isoformat()  # naive: already a wall clock


def _as_of(args: BoundArgs) -> dt.datetime:
    as_of = args["as_of"]
    if not isinstance(as_of, dt.datetime):
        raise EventTimeError(
            f"as_of must be a timestamp, got {as_of!r}; write TIMESTAMP '2026-11-21 00:00:00'."
        )
    return as_of


def run_tag(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.history.tags import create_tag

    started = time.monotonic()
    tag = args["tag"]
    context.progress(f"making tag {tag} of {args.table().name}")
    result = create_tag(
        context.spark,
        args.table(),
        _as_of(args),
        tag,
        replace=args.options[REPLACE_TAG],
        max_ref_age_ms=args.options[TAG_MAX_AGE],
        event_time_column=args["event_time_column"],
        allow_full_replay=args.options[ALLOW_FULL_REPLAY],
        progress=context.progress,
    )
    return [
        (
            result.base_snapshot_id,
            result.change_commits,
            result.pruned_commits,
            result.files_read,
            result.bytes_read,
            result.rows_written,
            None,
            None,
            result.mode,
            int((time.monotonic() - started) * 1000),
            result.tag,
            result.snapshot_id,
            result.action,
            result.rows_changed,
            result.files_written,
            result.bytes_written,
        )
    ]


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.history.daily import write_partition

    if args["tag"] is not None and args["target"] is not None:
        raise ProcedureArgumentError(
            "Pass either target => (a daily partition of a table) or tag => (an Iceberg tag of "
            "the source table), not both."
        )
    if args["tag"] is not None:
        return run_tag(context, args)
    if args["target"] is None:
        raise ProcedureArgumentError(
            "Say where the state goes: tag => 'et_2026-11-21' (an Iceberg tag of the table, "
            "written in O(changes)) or target => 'lake.ods.orders_daily' (a daily partition)."
        )
    started = time.monotonic()
    spark = context.spark
    column = args.options[PARTITION_COLUMN]
    value = args["partition_value"] or _partition_value(spark, args["as_of"])
    result = _state(context, args)
    if column in result.frame.columns:
        raise EventTimeError(
            f"The source table already has a column '{column}'; choose another partition column "
            "with options => map('partition-column', 'snapshot_date')."
        )
    context.progress(f"writing {args['target']} partition {column}={value}")
    written = write_partition(spark, result.frame, args["target"], column, value)
    action = "wrote-partition"
    return [
        (
            result.base_snapshot_id,
            result.change_commits,
            result.pruned_commits,
            result.files_read,
            result.bytes_read,
            written.rows,
            written.snapshot_id,
            value,
            result.mode,
            int((time.monotonic() - started) * 1000),
            None,
            None,
            action,
            None,
            written.files,
            written.bytes,
        )
    ]


_TABLE = Param("table", ParamType.TABLE, "source table (ingest_cdc or append-only)", True)
_AS_OF = Param("as_of", ParamType.TIMESTAMP, "event time T0: changes at or before it count", True)
_COLUMN = Param(
    "event_time_column",
    ParamType.STRING,
    "append-only tables: event-time column (default: property sparkext.event-time-column)",
)
_FULL_REPLAY = Option(
    ALLOW_FULL_REPLAY,
    ALLOW_FULL_REPLAY_DEFAULT,
    "when the base snapshot expired, rebuild from every event log (slow) instead of failing",
    parse_boolean,
)

FUNCTION = Routine(
    writes=False,
    name="snapshot_as_of_event_time",
    doc="The table's user columns as of event time T0 (a table, usable in FROM and JOIN).",
    kind=Kind.FUNCTION,
    params=(
        _TABLE,
        _AS_OF,
        _COLUMN,
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=(_FULL_REPLAY,),
    output=(),
    run=run_function,
)

ROUTINE = Routine(
    name="snapshot_as_of_event_time",
    doc="Write a table's state as of event time T0 into a daily partition of a target table.",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    params=(
        _TABLE,
        _AS_OF,
        Param("target", ParamType.STRING, "table to write, created if missing (or tag =>)"),
        Param("partition_value", ParamType.STRING, "partition to (re)write (default: T0's date)"),
        _COLUMN,
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
        Param("tag", ParamType.STRING, "Iceberg tag of the table to make instead of a target"),
    ),
    options=(
        _FULL_REPLAY,
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
    ),
    output=(
        OutputColumn("base_snapshot_id", "bigint", "snapshot s1 read by time travel (or NULL)"),
        OutputColumn("change_commits", "bigint", "event logs of later commits replayed"),
        OutputColumn("pruned_commits", "bigint", "later commits skipped: min event time > T0"),
        OutputColumn("files_read", "bigint", "base data/delete files plus event-log files"),
        OutputColumn("bytes_read", "bigint", "bytes of those files"),
        OutputColumn("rows_written", "bigint", "rows in the written partition (tag: data rows)"),
        OutputColumn("target_snapshot_id", "bigint", "the target's new snapshot"),
        OutputColumn("partition_value", "string", "the partition written"),
        OutputColumn("mode", "string", "cdc, append or full-replay"),
        OutputColumn("duration_ms", "bigint", "wall-clock time"),
        OutputColumn("tag", "string", "the tag made (NULL: target form)"),
        OutputColumn("tag_snapshot_id", "bigint", "the snapshot the tag names"),
        OutputColumn(
            "action",
            "string",
            "wrote-partition, tagged-base, committed-changes, rewrote-state or exists",
        ),
        OutputColumn("rows_changed", "bigint", "tag: keys whose state differs from the base"),
        OutputColumn("files_written", "bigint", "data and delete files written"),
        OutputColumn("bytes_written", "bigint", "bytes of those files"),
    ),
    run=run,
    function=FUNCTION,
)
