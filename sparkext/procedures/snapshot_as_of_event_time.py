"""snapshot_as_of_event_time: a table's consistent state as of an event time T0.

Table function: ``SELECT * FROM sparkext.snapshot_as_of_event_time('lake.db.orders',
TIMESTAMP '2026-11-21 00:00:00' [, 'event_time_column' [, map(...)]])`` returns the table's user
columns as they were at T0. Procedure: ``CALL sparkext.snapshot_as_of_event_time(table => ...,
as_of => TIMESTAMP ..., target => 'lake.ods.orders_daily' [, partition_value => '2026-11-21'])``
writes that state into one partition of a target table (created if missing); re-running the
same partition replaces it in one atomic overwrite, so a rerun is idempotent.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.history.snapshot_as_of`, which does
the work and declares the options; see :mod:`sparkext.actions.history.as_of` for how the state is
computed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkext.actions.history import snapshot_as_of as action
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run_function(context: Context, args: BoundArgs) -> DataFrame:
    return action.state(
        context,
        args.table(),
        args["as_of"],
        args["event_time_column"],
        args.options[action.ALLOW_FULL_REPLAY],
    ).frame


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = action.snapshot_as_of(
        context,
        args.table(),
        args["as_of"],
        target=args["target"],
        partition=args["partition_value"],
        tag=args["tag"],
        event_time_column=args["event_time_column"],
        options=args.options,
    )
    return [result.row()]


_TABLE = Param("table", ParamType.TABLE, "source table (ingest_cdc or append-only)", True)
_AS_OF = Param("as_of", ParamType.TIMESTAMP, "event time T0: changes at or before it count", True)
_COLUMN = Param(
    "event_time_column",
    ParamType.STRING,
    "append-only tables: event-time column (default: property sparkext.event-time-column)",
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
    options=action.FUNCTION_OPTIONS,
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
    options=action.OPTIONS,
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
