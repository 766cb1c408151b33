"""event_time_tags(table): the event-time tags of a table, with their T0, base and size.

``SELECT * FROM sparkext.event_time_tags('lake.ods.orders')`` (or ``CALL``): one row per tag
made by ``snapshot_as_of_event_time(..., tag => ...)`` that still exists, oldest T0 first.
``late_commits`` counts the commits on main since the tag was planned that hold events at or
before its T0: a tag with late commits misses those late events (replace it on request).

Floor: procedures (the SQL façade of :func:`sparkext.actions.history.tags.event_time_tags`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.history import tags
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    return [tag.row() for tag in tags.event_time_tags(context.spark, args.table())]


ROUTINE = Routine(
    writes=False,
    name="event_time_tags",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    doc="The event-time tags of a table: T0, tagged and base snapshot, size, expiry, staleness.",
    params=(Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.ods.orders'", True),),
    output=(
        OutputColumn("tag", "string", "tag name: read it with VERSION AS OF 'tag'"),
        OutputColumn("as_of", "timestamp", "event time T0 the tag holds the state of"),
        OutputColumn("snapshot_id", "bigint", "snapshot the tag names"),
        OutputColumn("base_snapshot_id", "bigint", "main's snapshot it was built from (s1)"),
        OutputColumn("how", "string", "base (s1 itself), changes (a commit on s1) or rewrite"),
        OutputColumn("rows_changed", "bigint", "keys whose state differs from the base"),
        OutputColumn("files_written", "bigint", "files the tag's commit added"),
        OutputColumn("bytes_written", "bigint", "their bytes"),
        OutputColumn("created_at", "timestamp", "when the tag was made"),
        OutputColumn("expires_at", "timestamp", "when snapshot expiry may drop it (max-ref-age)"),
        OutputColumn("late_commits", "bigint", "later commits with events <= T0 (0: exact)"),
        OutputColumn("as_recorded", "boolean", "the tag still names the snapshot it was made on"),
    ),
    run=run,
)
