"""The event-time planner: base choice, pruning, expiry (pure, no Spark)."""

from __future__ import annotations

import pytest

from sparkext.errors import SnapshotExpiredError
from sparkext.planning.event_time import SnapshotFact, plan_as_of

pytestmark = pytest.mark.pure


def cdc(sid, parent, low, high, so_far=None, pos="m:1", log=True):
    summary = {
        "sparkext.event-time.min": str(low),
        "sparkext.event-time.max": str(high),
        "sparkext.cdc.max-position": pos,
    }
    if so_far is not None:
        summary["sparkext.event-time.max-so-far"] = str(so_far)
    if log:
        summary["sparkext.cdc.events-location"] = f"/ck/events/batch={sid}"
    return SnapshotFact(sid, parent, summary)


def other(sid, parent):
    return SnapshotFact(sid, parent, {"operation": "replace"})


CHAIN = [
    other(1, None),  # a bulk load before CDC
    cdc(2, 1, 10, 20, pos="m:2"),
    cdc(3, 2, 15, 30, pos="m:3"),  # events 15..30
    other(4, 3),  # rewrite_equality_deletes: same content as 3
    cdc(5, 4, 5, 50, pos="m:5"),  # a late event at 5 and new ones up to 50
    cdc(6, 5, 60, 70, pos="m:6"),
]


def test_base_is_the_newest_snapshot_whose_running_max_is_at_most_t0():
    plan = plan_as_of(CHAIN, 35)
    assert plan.base_snapshot_id == 4  # the conversion after 3, not 3 itself
    assert [c.snapshot_id for c in plan.changes] == [5]  # 6 starts at 60 > 35
    assert plan.pruned == 1
    assert plan.base_max_position == "m:3"
    assert plan.earlier_logs == ("/ck/events/batch=2", "/ck/events/batch=3")


def test_exactly_on_a_commit_max_takes_that_commit_as_base():
    assert plan_as_of(CHAIN, 30).base_snapshot_id == 4
    assert plan_as_of(CHAIN, 29).base_snapshot_id == 2


def test_before_any_cdc_event_the_bulk_load_is_the_base():
    plan = plan_as_of(CHAIN, 12)
    assert plan.base_snapshot_id == 1 and plan.base_max_position is None
    # 2 (10..20) and 5 (a late event at 5) may hold events <= 12; 3 starts at 15
    assert [c.snapshot_id for c in plan.changes] == [2, 5]


def test_after_the_last_event_the_current_snapshot_and_nothing_to_replay():
    plan = plan_as_of(CHAIN, 10**12)
    assert plan.base_snapshot_id == 6 and plan.changes == () and plan.pruned == 0


def test_recorded_running_max_wins_over_the_retained_commits():
    # an expired commit had events up to 100: the retained summary says so
    chain = [cdc(7, None, 1, 5, so_far=100), cdc(8, 7, 101, 110, so_far=110)]
    plan = plan_as_of(chain, 50)
    assert plan.base_snapshot_id is None and [c.snapshot_id for c in plan.changes] == [7]


def test_first_commit_past_t0_starts_empty_when_it_is_the_first_snapshot():
    plan = plan_as_of([cdc(1, None, 10, 20)], 5)
    assert plan.base_snapshot_id is None and plan.changes == () and plan.pruned == 1


def test_expired_base_needs_permission_then_replays_every_log():
    chain = [cdc(3, 2, 15, 30), cdc(5, 3, 40, 50)]  # 2 expired
    with pytest.raises(SnapshotExpiredError, match="allow-full-replay"):
        plan_as_of(chain, 20)
    plan = plan_as_of(chain, 20, allow_full_replay=True)
    assert plan.full_replay and plan.full_replay_roots == ("/ck/events",)
    assert plan_as_of(chain, 35).base_snapshot_id == 3  # a retained base needs no replay


def test_empty_table():
    plan = plan_as_of([], 5)
    assert plan.base_snapshot_id is None and plan.changes == ()
