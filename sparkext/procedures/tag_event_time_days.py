"""tag_event_time_days(table [, day, force, options]): the daily event-time tag, for cron.

``CALL sparkext.tag_event_time_days(table => 'lake.ods.orders')`` tags the newest closed day
as ``et_<day>`` (the state as of its last millisecond, in the session time zone), plus up to
``backfill-days`` - 1 untagged days before it. A day is closed once the newest event time
ingested into the table passed its end by ``grace``; a day that is not closed is refused in one
sentence unless ``force => true``. Days already tagged are skipped; a tag that late events made
stale is reported (``stale``) and moved only with ``'replace-stale', 'true'`` (re-tag on
request: readers of a published tag never see it change behind their back).

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

import datetime as dt
import time
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
    parse_count,
    parse_duration,
)
from sparkext.errors import EventTimeError
from sparkext.planning.event_time_tags import (
    GRACE_DEFAULT,
    MAX_REF_AGE_DEFAULT,
    TAG_PREFIX_DEFAULT,
    check_tag_name,
)

GRACE = "grace"
PREFIX = "tag-prefix"
BACKFILL = "backfill-days"
REPLACE_STALE = "replace-stale"
TAG_MAX_AGE = "tag-max-age"


def _day(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise EventTimeError(f"day => '{text}' is not a date; write day => '2026-11-21'.") from None


def _duration_text(ms: int) -> str:
    """A duration as a short text.

    >>> _duration_text(3_600_000), _duration_text(90_000)
    ('1 h', '90 s')
    """
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.history.tags import create_tag
    from sparkext.iceberg import tags as iceberg_tags
    from sparkext.iceberg.cdc_table import CdcTable
    from sparkext.iceberg.snapshots import ancestry
    from sparkext.planning.event_time_tags import late_commits, plan_days, watermark_ms

    spark, table, options = context.spark, args.table(), args.options
    zone = times.session_zone(spark)
    prefix = check_tag_name(options[PREFIX]) if options[PREFIX] else ""
    chain = ancestry(spark, table)
    days = plan_days(chain, zone, options[GRACE], prefix, _day(args["day"]), options[BACKFILL])
    mark = watermark_ms(chain)
    out = []
    for day in days:
        started = time.monotonic()
        closes = times.from_millis(day.as_of_ms + 1 + options[GRACE])
        if not day.closed and not args["force"]:
            if args["day"] is None:
                continue  # nothing closed yet: nothing to do
            raise EventTimeError(
                f"Day {day.day} of {table.name} may still receive late events: the newest "
                f"event time ingested is {times.wall_clock_text(times.from_millis(mark), zone)} "
                f"and the day closes at {times.wall_clock_text(closes, zone)} (grace "
                f"{_duration_text(options[GRACE])}); run again later or pass force => true."
            )
        java = CdcTable(spark, table.name)
        record = iceberg_tags.records(java).get(day.tag)
        late = late_commits(record, chain) if record is not None else 0
        if (
            record is not None
            and record.as_of_ms == day.as_of_ms
            and not (late and options[REPLACE_STALE])
        ):
            action = "stale" if late else "exists"
            row = (record.snapshot_id, record.rows_changed, 0, 0)
        else:
            context.progress(f"tagging {day.day} as {day.tag}")
            result = create_tag(
                spark,
                table,
                times.from_millis(day.as_of_ms),
                day.tag,
                replace=record is not None and record.as_of_ms == day.as_of_ms,  # stale
                max_ref_age_ms=options[TAG_MAX_AGE],
                progress=context.progress,
            )
            action = "replaced" if record is not None else result.action
            late = 0
            row = (
                result.snapshot_id,
                result.rows_changed,
                result.files_written,
                result.bytes_written,
            )
        out.append(
            (
                day.day.isoformat(),
                day.tag,
                times.from_millis(day.as_of_ms),
                action,
                *row,
                late,
                closes,
                int((time.monotonic() - started) * 1000),
            )
        )
    return out


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
    options=(
        Option(
            GRACE,
            GRACE_DEFAULT,
            "a day closes when the newest event time passed its end by this",
            parse_duration,
        ),
        Option(PREFIX, TAG_PREFIX_DEFAULT, "tag name prefix: the tag is <prefix><day>"),
        Option(BACKFILL, "1", "tag up to this many closed days, newest first", parse_count),
        Option(
            REPLACE_STALE, "false", "re-tag a day whose tag late events made stale", parse_boolean
        ),
        Option(TAG_MAX_AGE, MAX_REF_AGE_DEFAULT, "the tags' max-ref-age", parse_duration),
    ),
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
