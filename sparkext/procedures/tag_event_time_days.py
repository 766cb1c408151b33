"""tag_event_time_days(table [, day, force, options]): the daily event-time tag, for cron.

``CALL sparkext.tag_event_time_days(table => 'lake.ods.orders')`` tags the newest closed day
as ``et_<day>`` (the state as of its last millisecond, in the session time zone), plus up to
``backfill-days`` - 1 untagged days before it. A day is closed once the newest event time
ingested into the table passed its end by ``grace``; a day that is not closed is refused in one
sentence unless ``force => true``. Days already tagged are skipped; a tag that late events made
stale is reported (``stale``) and moved only with ``'replace-stale', 'true'`` (re-tag on
request: readers of a published tag never see it change behind their back).

Floor: procedures (the SQL façade of :func:`sparkext.actions.history.tags.tag_days`; the
options are declared there).
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
    days = tags.tag_days(
        context.spark, args.table(), args["day"], args["force"], args.options, context.progress
    )
    return [day.row() for day in days]


ROUTINE = Routine(
    name="tag_event_time_days",
    kind=Kind.PROCEDURE,
    doc="Tag each closed day's state as of its end (et_<day>), skipping tagged days; for cron.",
    params=(
        Param("table", ParamType.TABLE, "table written by ingest_cdc", True),
        Param("day", ParamType.STRING, "one day, e.g. '2026-11-21' (default: newest closed)"),
        Param("force", ParamType.BOOLEAN, "tag a day that is not closed yet", default=False),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=tags.DAYS_OPTIONS,
    output=(
        OutputColumn("day", "string", "the calendar day (session time zone)"),
        OutputColumn("tag", "string", "its tag"),
        OutputColumn("as_of", "timestamp", "T0: the day's last millisecond"),
        OutputColumn(
            "action",
            "string",
            "tagged-base, committed-changes, rewrote-state, exists, stale or replaced",
        ),
        OutputColumn("snapshot_id", "bigint", "the tagged snapshot"),
        OutputColumn("rows_changed", "bigint", "keys whose state differs from the base"),
        OutputColumn("files_written", "bigint", "files written now"),
        OutputColumn("bytes_written", "bigint", "their bytes"),
        OutputColumn("late_commits", "bigint", "commits with events of the day after its tag"),
        OutputColumn("closes_at", "timestamp", "when the day closed (or closes)"),
        OutputColumn("duration_ms", "bigint", "wall-clock time for this day"),
    ),
    run=run,
)
