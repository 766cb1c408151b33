"""Event-time tags: a day's state as an Iceberg tag, planned in pure Python.

A tag ``et_2026-11-21`` names the table's state as of an event time T0. It is built from the base
s1 of :func:`sparkext.planning.event_time.plan_as_of`:

* **base**: no commit after s1 holds an event <= T0, so s1 itself is tagged (nothing written);
* **changes**: a commit on a branch from s1 adds, for every key whose state at T0 differs from
  s1, an equality delete and (unless the key is gone) its row at T0; the tag is put on that
  commit and the branch dropped, all in ONE table commit. Cost: what changed, not the table;
* **rewrite**: there is no base to start from (the first commit already holds a later event, the
  base expired, an append-only table) or a truncate after s1 counts: the branch commit replaces
  every file with the state at T0.

What each tag is (T0, base, how it was made, size) is recorded in the table property
``sparkext.event-time-tags`` (Iceberg refs carry no properties), written in the same commit as
the tag. Records whose tag is gone (expired by its ``max-ref-age``, or dropped) are pruned.

Days: day D is ``[D 00:00, D+1 00:00)`` in the session time zone, so its tag's T0 is the last
millisecond of D. A day is closed once the newest event time ingested passed D+1 00:00 plus a
grace period (sources lag each other and events arrive late); its tag is made once. Late events
for a tagged day (a commit after the tag was planned holding events <= its T0) make the tag
*stale*: it is listed as such and replaced only on request.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from sparkext.errors import EventTimeError
from sparkext.planning.event_time import EventTimePlan, SnapshotFact
from sparkext.planning.summary import EVENT_TIME_MAX, EVENT_TIME_MAX_SO_FAR, EVENT_TIME_MIN

TAGS_PROPERTY = "sparkext.event-time-tags"
TAG_PREFIX_DEFAULT = "et_"
MAX_REF_AGE_DEFAULT = "35 days"
GRACE_DEFAULT = "1 hour"
DAY_MS = 86_400_000

BASE, CHANGES, REWRITE, EXISTS = "base", "changes", "rewrite", "exists"


@dataclass(frozen=True)
class TagRecord:
    """What a tag made by sparkext is: recorded in ``sparkext.event-time-tags``."""

    tag: str
    as_of_ms: int
    snapshot_id: int
    base_snapshot_id: int | None
    planned_from: int | None  # main's snapshot when the tag was planned (later = late data)
    how: str  # BASE, CHANGES or REWRITE
    rows_changed: int
    files_written: int
    bytes_written: int
    created_ms: int


def load_records(text: str | None) -> dict[str, TagRecord]:
    """The records of a ``sparkext.event-time-tags`` value (unreadable entries are skipped).

    >>> r = TagRecord("et_d", 5, 2, 1, 1, "changes", 3, 2, 900, 7)
    >>> load_records(dump_records({"et_d": r}))["et_d"] == r
    True
    >>> load_records(None), load_records("not json")
    ({}, {})
    """
    try:
        raw = json.loads(text) if text else {}
    except ValueError:
        return {}
    records = {}
    for tag, fields in raw.items() if isinstance(raw, dict) else ():
        try:
            records[tag] = TagRecord(tag=tag, **{k: v for k, v in fields.items() if k != "tag"})
        except TypeError:
            continue
    return records


def dump_records(records: Mapping[str, TagRecord]) -> str:
    return json.dumps(
        {tag: {k: v for k, v in asdict(r).items() if k != "tag"} for tag, r in records.items()},
        sort_keys=True,
        separators=(",", ":"),
    )


def with_record(text: str | None, record: TagRecord, live_tags: Sequence[str]) -> str:
    """The property value with ``record`` set and records of tags no longer present pruned.

    >>> old = dump_records({"gone": TagRecord("gone", 1, 1, None, None, "base", 0, 0, 0, 0)})
    >>> sorted(load_records(with_record(old, TagRecord("t", 2, 3, 1, 1, "base", 0, 0, 0, 0), [])))
    ['t']
    """
    records = {t: r for t, r in load_records(text).items() if t in set(live_tags)}
    records[record.tag] = record
    return dump_records(records)


def check_tag_name(tag: str) -> str:
    """A tag name that every engine can quote: letters, digits, ``_``, ``-`` and ``.``.

    >>> check_tag_name("et_2026-11-21")
    'et_2026-11-21'
    >>> check_tag_name("main")
    Traceback (most recent call last):
    ...
    sparkext.errors.EventTimeError: tag => 'main' is the name of the table's main branch; name \
the tag after its day, e.g. tag => 'et_2026-11-21'.
    """
    if tag == "main":
        raise EventTimeError(
            "tag => 'main' is the name of the table's main branch; name the tag after its day, "
            "e.g. tag => 'et_2026-11-21'."
        )
    if not tag or not all(c.isalnum() or c in "_-." for c in tag):
        raise EventTimeError(
            f"tag => '{tag}' is not a usable tag name; use letters, digits, '_', '-' and '.', "
            "e.g. tag => 'et_2026-11-21'."
        )
    return tag


def decide(
    plan: EventTimePlan,
    tag: str,
    existing_snapshot: int | None,
    existing_kind: str | None,
    record: TagRecord | None,
    replace: bool,
    as_of_text: str,
) -> str:
    """How to make ``tag`` for ``plan``: EXISTS, BASE, CHANGES or REWRITE.

    A tag that exists is kept when it was made for the same T0 (a rerun is idempotent) and
    replaced only when asked; a branch of that name is never touched.

    >>> p = EventTimePlan(9, 1, None, None, (), 0, ())
    >>> decide(p, "t", None, None, None, False, "x")
    'base'
    >>> decide(p, "t", 4, "tag", TagRecord("t", 9, 4, 1, 1, "base", 0, 0, 0, 0), False, "x")
    'exists'
    """
    if existing_kind == "branch":
        raise EventTimeError(
            f"'{tag}' is already the name of a branch of this table; choose another tag name."
        )
    if existing_snapshot is not None and not replace:
        if record is not None and record.as_of_ms == plan.as_of_ms:
            return EXISTS
        made = (
            f"made as of another event time ({record.as_of_ms} ms)"
            if record is not None
            else "not made by snapshot_as_of_event_time"
        )
        raise EventTimeError(
            f"Tag '{tag}' already exists ({made}); pass options => map('replace-tag', 'true') "
            f"to move it to the state as of {as_of_text}, or choose another tag name."
        )
    if plan.full_replay or plan.base_snapshot_id is None:
        return REWRITE
    return CHANGES if plan.changes else BASE


def late_commits(record: TagRecord, ancestry: Sequence[SnapshotFact]) -> int:
    """CDC commits after the tag was planned that hold events <= its T0 (the tag misses them).

    >>> chain = [SnapshotFact(1, None, {EVENT_TIME_MIN: "1"}), SnapshotFact(2, 1,
    ...          {EVENT_TIME_MIN: "4"}), SnapshotFact(3, 2, {EVENT_TIME_MIN: "9"})]
    >>> late_commits(TagRecord("t", 5, 1, 1, 1, "base", 0, 0, 0, 0), chain)
    1
    """
    ids = [s.snapshot_id for s in ancestry]
    if record.planned_from in ids:
        after = ancestry[ids.index(record.planned_from) + 1 :]
    else:  # planned on a snapshot that has expired since: every retained one is later
        after = ancestry
    lows = (s.ms(EVENT_TIME_MIN) for s in after)
    return sum(1 for low in lows if low is not None and low <= record.as_of_ms)


# ---- days ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DayPlan:
    day: dt.date
    tag: str
    as_of_ms: int  # the last millisecond of the day
    closed: bool  # the watermark passed the day's end plus the grace


def day_end_ms(day: dt.date, zone: dt.tzinfo) -> int:
    """The last millisecond of ``day`` in ``zone`` (DST-aware: the next local midnight - 1 ms).

    >>> import zoneinfo
    >>> day_end_ms(dt.date(1970, 1, 1), dt.timezone.utc)
    86399999
    >>> day_end_ms(dt.date(2026, 3, 29), zoneinfo.ZoneInfo("Europe/Paris")) - day_end_ms(
    ...     dt.date(2026, 3, 28), zoneinfo.ZoneInfo("Europe/Paris"))  # a 23-hour day
    82800000
    """
    midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    return int(midnight.timestamp() * 1000) - 1


def day_of(ms: int, zone: dt.tzinfo) -> dt.date:
    """The calendar day of an instant in ``zone``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=zone).date()


def watermark_ms(ancestry: Sequence[SnapshotFact]) -> int | None:
    """The newest event time ingested up to the current snapshot (None: no CDC commit)."""
    best = None
    for s in ancestry:
        for value in (s.ms(EVENT_TIME_MAX_SO_FAR), s.ms(EVENT_TIME_MAX)):
            if value is not None and (best is None or value > best):
                best = value
    return best


def plan_days(
    ancestry: Sequence[SnapshotFact],
    zone: dt.tzinfo,
    grace_ms: int,
    prefix: str,
    day: dt.date | None,
    backfill_days: int,
) -> list[DayPlan]:
    """The days to tag: ``day`` alone, else the newest closed day and up to ``backfill_days``-1
    days before it (oldest first). Which of them already have a tag is decided by the caller.

    >>> utc = dt.timezone.utc
    >>> chain = [SnapshotFact(1, None, {EVENT_TIME_MIN: "0", "sparkext.event-time.max":
    ...          str(2 * DAY_MS + 7_200_000)})]
    >>> [(p.day.isoformat(), p.closed) for p in plan_days(chain, utc, 3_600_000, "et_", None, 2)]
    [('1970-01-01', True), ('1970-01-02', True)]
    >>> plan_days(chain, utc, 3_600_000, "et_", dt.date(1970, 1, 3), 1)[0].closed
    False
    """
    mark = watermark_ms(ancestry)
    if mark is None:
        raise EventTimeError(
            "The table has no event-time metadata (no ingest_cdc commit); daily tags need the "
            "event times ingest_cdc records."
        )
    first = min(
        (start for s in ancestry if (start := s.ms(EVENT_TIME_MIN)) is not None), default=mark
    )

    def plan(d: dt.date) -> DayPlan:
        end = day_end_ms(d, zone)
        return DayPlan(d, f"{prefix}{d.isoformat()}", end, mark >= end + 1 + grace_ms)

    if day is not None:
        return [plan(day)]
    newest = day_of(mark - grace_ms, zone) - dt.timedelta(days=1)
    while newest >= day_of(first, zone) and not plan(newest).closed:
        newest -= dt.timedelta(days=1)
    days = [newest - dt.timedelta(days=i) for i in range(max(1, backfill_days))]
    return [plan(d) for d in sorted(days) if d >= day_of(first, zone)]
