"""The service's priority queue: tiers, benefit, first come first served, one job per table."""

from __future__ import annotations

import random

import pytest

from sparkext.iceberg.catalog import parse_patterns
from sparkext.service.queue import FRESH, HISTORY, MAINTENANCE, Job, JobQueue, benefit, tier_of


def test_fresh_before_maintenance_before_history_then_benefit():
    q = JobQueue()
    q.put(Job("t1", "L0", "h", tier=HISTORY, benefit=100))
    q.put(Job("t2", "maintain", None, tier=MAINTENANCE, benefit=1))
    q.put(Job("t3", "L0", "f1", tier=FRESH, benefit=1))
    q.put(Job("t4", "L0", "f2", tier=FRESH, benefit=5))
    order = [q.pop(busy=()).table for _ in range(4)]
    assert order == ["t4", "t3", "t2", "t1"]
    assert q.pop(busy=()) is None


def test_one_job_per_table_and_a_newer_plan_replaces_the_waiting_one():
    q = JobQueue()
    q.put(Job("t", "L0", "a", benefit=1))
    q.put(Job("t", "L0", "b", benefit=2))
    q.put(Job("u", "L0", "a", benefit=0))
    assert q.pop(busy={"t"}).table == "u"
    q.put(Job("t", "L0", "a", benefit=9))  # replaces, keeps its place among equals
    assert len(q) == 2
    assert q.pop(busy=()).partition == "a"


def test_a_replaced_job_keeps_its_place_among_equals():
    q = JobQueue()
    q.put(Job("t", "L0", "first"))
    q.put(Job("u", "L0", "second"))
    q.put(Job("t", "L0", "first", reason="newer plan"))  # same key, same priority
    first = q.pop(busy=())
    assert (first.partition, first.reason) == ("first", "newer plan")


@pytest.mark.parametrize("seed", range(20))
def test_pop_order_is_the_sorted_order(seed):
    rng = random.Random(seed)
    q, jobs = JobQueue(), []
    for i in range(30):
        job = Job(f"t{i}", "L0", str(i), tier=rng.choice((0, 1, 2)), benefit=rng.randint(0, 3))
        q.put(job)
        jobs.append((job.tier, -job.benefit, i, job))
    expected = [j for *_, j in sorted(jobs, key=lambda x: x[:3])]
    assert [q.pop(busy=()) for _ in range(30)] == expected


def test_benefit_counts_files_removed_and_deletes_per_gib():
    small = benefit(40, 40 << 20, 128 << 20, 0, False)
    assert small > benefit(4, 4 << 20, 128 << 20, 0, False)
    assert benefit(1, 1 << 20, 128 << 20, 0, False) == 0  # one file: nothing to merge
    assert benefit(2, 2 << 20, 128 << 20, 0, True) > 8
    big = benefit(40, 40 << 30, 1 << 30, 0, False)  # 40 full files: nothing gained
    assert big == 0


def test_tier_of_uses_the_window():
    assert tier_of(1000, 1500, 600) == FRESH
    assert tier_of(1000, 2000, 600) == HISTORY


def test_patterns_are_checked():
    assert parse_patterns("lake.ods.*") == ("lake.ods.*",)
    with pytest.raises(ValueError, match=r"catalog\.namespace\.table"):
        parse_patterns("ods.*")
