"""The pure plan of event-time tags: how a tag is made, which days are closed, staleness."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from sparkext.errors import EventTimeError
from sparkext.planning.event_time import ChangeLog, EventTimePlan, SnapshotFact
from sparkext.planning.event_time_tags import (
    BASE,
    CHANGES,
    EXISTS,
    REWRITE,
    TagRecord,
    check_tag_name,
    day_end_ms,
    decide,
    late_commits,
    load_records,
    plan_days,
    with_record,
)

pytestmark = pytest.mark.pure
HOUR = 3_600_000
SHANGHAI = zoneinfo.ZoneInfo("Asia/Shanghai")


def record(tag="t", as_of=10, snapshot=5, planned_from=4) -> TagRecord:
    return TagRecord(tag, as_of, snapshot, 3, planned_from, CHANGES, 1, 2, 300, 0)


def plan(base=3, changes=1, full=False) -> EventTimePlan:
    logs = tuple(ChangeLog(9 + i, f"/log/{i}", 1, 20) for i in range(changes))
    roots = ("/root",) if full else ()
    return EventTimePlan(10, base, "p", None, logs, 0, (), full_replay_roots=roots)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (plan(), CHANGES),
        (plan(changes=0), BASE),
        (plan(base=None), REWRITE),
        (plan(base=None, full=True), REWRITE),
    ],
)
def test_how_a_new_tag_is_made(p, expected):
    assert decide(p, "t", None, None, None, False, "T0") == expected


def test_an_existing_tag_is_kept_for_the_same_event_time_and_refused_for_another():
    assert decide(plan(), "t", 5, "tag", record(as_of=10), False, "T0") == EXISTS
    with pytest.raises(EventTimeError, match=r"already exists \(made as of another"):
        decide(plan(), "t", 5, "tag", record(as_of=11), False, "T0")
    with pytest.raises(EventTimeError, match="not made by snapshot_as_of_event_time"):
        decide(plan(), "t", 5, "tag", None, False, "T0")
    assert decide(plan(), "t", 5, "tag", record(as_of=11), True, "T0") == CHANGES  # replace
    with pytest.raises(EventTimeError, match="name of a branch"):
        decide(plan(), "t", 5, "branch", None, True, "T0")


@pytest.mark.parametrize("name", ["", "a b", "x'y", "ünï/"])
def test_tag_names_every_engine_can_quote(name):
    with pytest.raises(EventTimeError, match="not a usable tag name"):
        check_tag_name(name)


def test_late_commits_count_only_later_commits_with_events_at_or_before_t0():
    chain = [
        SnapshotFact(4, None, {"sparkext.event-time.min": "1"}),
        SnapshotFact(5, 4, {"sparkext.event-time.min": "10"}),  # at T0: counts
        SnapshotFact(6, 5, {}),  # a compaction
        SnapshotFact(7, 6, {"sparkext.event-time.min": "11"}),
    ]
    assert late_commits(record(planned_from=4), chain) == 1
    assert late_commits(record(planned_from=5), chain) == 0
    assert late_commits(record(planned_from=99), chain) == 2  # expired: every retained one


def test_records_round_trip_and_prune_tags_that_are_gone():
    text = with_record(None, record("a"), [])
    text = with_record(text, record("b"), ["a", "b"])
    assert sorted(load_records(text)) == ["a", "b"]
    assert sorted(load_records(with_record(text, record("c"), ["c"]))) == ["c"]
    assert load_records('{"a": {"as_of_ms": 1}}') == {}  # an unreadable entry is skipped


def cdc(low_ms: int, high_ms: int, sid: int = 1) -> SnapshotFact:
    return SnapshotFact(
        sid, None, {"sparkext.event-time.min": str(low_ms), "sparkext.event-time.max": str(high_ms)}
    )


def shanghai_ms(day: int, hour: float) -> int:
    moment = dt.datetime(2026, 11, day, tzinfo=SHANGHAI) + dt.timedelta(hours=hour)
    return int(moment.timestamp() * 1000)


def test_a_day_closes_after_its_end_plus_the_grace_in_the_session_zone():
    chain = [cdc(shanghai_ms(20, 1), shanghai_ms(21, 0.99))]  # 00:59:24 the next day
    assert plan_days(chain, SHANGHAI, HOUR, "et_", None, 1) == []  # 11-20 not closed yet
    chain = [cdc(shanghai_ms(20, 1), shanghai_ms(21, 1))]
    [day] = plan_days(chain, SHANGHAI, HOUR, "et_", None, 1)
    assert (day.day, day.tag, day.closed) == (dt.date(2026, 11, 20), "et_2026-11-20", True)
    assert day.as_of_ms == shanghai_ms(21, 0) - 1  # the day's last millisecond, local
    # in UTC the same instants fall on other days
    [utc_day] = plan_days(chain, dt.timezone.utc, HOUR, "et_", None, 1)
    assert utc_day.day == dt.date(2026, 11, 19)


def test_backfill_days_and_an_explicit_day():
    chain = [cdc(shanghai_ms(17, 3), shanghai_ms(21, 2))]
    days = plan_days(chain, SHANGHAI, HOUR, "et_", None, 3)
    assert [d.day.day for d in days] == [18, 19, 20]
    days = plan_days(chain, SHANGHAI, HOUR, "et_", None, 10)
    assert [d.day.day for d in days] == [17, 18, 19, 20]  # not before the first event's day
    [open_day] = plan_days(chain, SHANGHAI, HOUR, "et_", dt.date(2026, 11, 21), 1)
    assert not open_day.closed


def test_a_dst_day_is_23_hours_long():
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    start = day_end_ms(dt.date(2026, 3, 28), paris) + 1
    assert day_end_ms(dt.date(2026, 3, 29), paris) + 1 - start == 23 * HOUR


def test_a_table_without_event_times_is_one_sentence():
    with pytest.raises(EventTimeError, match="no event-time metadata"):
        plan_days([SnapshotFact(1, None, {})], SHANGHAI, HOUR, "et_", None, 1)
