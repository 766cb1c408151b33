"""The maintenance planner against a brute-force statement of its rules (fixed seeds)."""

from __future__ import annotations

import random

import pytest

from sparkext.planning.changelog_stream import Registration
from sparkext.planning.maintenance import (
    Hold,
    ManifestStats,
    Policy,
    Ref,
    Snapshot,
    holds,
    manifest_decision,
    plan_expiry,
)


def history(rng: random.Random, n: int) -> tuple[dict[int, Snapshot], int, list[int]]:
    """A main line of ``n`` snapshots (ties in time included) and a few rolled-back ones."""
    snapshots, main, t = {}, [], 0
    for i in range(1, n + 1):
        t += rng.choice((0, 1, 5, 10))
        parent = main[-1] if main else None
        snapshots[i] = Snapshot(i, parent, t)
        main.append(i)
    for j in range(n + 1, n + 1 + rng.randint(0, 3)):  # off every branch
        snapshots[j] = Snapshot(j, rng.choice(main), rng.randint(0, t))
    return snapshots, main[-1], main


@pytest.mark.parametrize("seed", range(200))
def test_expiry_never_touches_what_the_rules_keep(seed):
    rng = random.Random(seed)
    snapshots, head, main = history(rng, rng.randint(1, 40))
    now = max(s.timestamp_ms for s in snapshots.values()) + rng.randint(0, 20)
    policy = Policy(snapshot_max_age_ms=rng.randint(1, 60), min_snapshots=rng.randint(1, 6))
    tag = rng.choice(list(snapshots))
    refs = [Ref("main", "BRANCH", head), Ref("t", "TAG", tag)]
    held = [Hold(rng.choice(main), f"consumer '{i}'") for i in range(rng.randint(0, 2))]
    plan = plan_expiry(snapshots, refs, head, policy, held, now)
    expired = set(plan.expire)
    cutoff = now - policy.snapshot_max_age_ms
    newest = set(main[-policy.min_snapshots :])
    deepest_hold = min((main.index(h.snapshot_id) for h in held), default=len(main))
    for sid in expired:
        assert snapshots[sid].timestamp_ms < cutoff  # old enough
        assert sid not in newest and sid != tag and sid != head
        if sid in main:
            assert main.index(sid) < deepest_hold  # never at or after a hold
    # brute force: everything old, unprotected and on main or off every branch IS expired
    for sid, snapshot in snapshots.items():
        protected = sid in newest or sid == tag or (sid in main and main.index(sid) >= deepest_hold)
        if snapshot.timestamp_ms < cutoff and not protected:
            assert sid in expired, (seed, sid)
    assert set(plan.held).isdisjoint(expired)


def test_another_branch_keeps_its_history():
    s = {1: Snapshot(1, None, 0), 2: Snapshot(2, 1, 1), 3: Snapshot(3, 1, 2), 4: Snapshot(4, 3, 3)}
    refs = [Ref("main", "BRANCH", 4), Ref("audit", "BRANCH", 2)]
    plan = plan_expiry(s, refs, 4, Policy(snapshot_max_age_ms=1, min_snapshots=1), [], 100)
    assert plan.expire == (3,)  # 1 is on audit's history, 2 is its head


def test_a_consumer_before_the_first_snapshot_keeps_the_whole_history():
    s = {1: Snapshot(1, None, 0), 2: Snapshot(2, 1, 1), 3: Snapshot(3, 2, 2)}
    held = holds(s, 3, [Registration("c", None, heartbeat_ms=100)], Policy(), 100)
    plan = plan_expiry(s, [Ref("main", "BRANCH", 3)], 3, Policy(1, 1), held, 100)
    assert plan.expire == () and plan.held == (1, 2)
    assert "changelog consumer 'c'" in plan.reason


def test_manifest_measures():
    policy = Policy(manifest_min_count=4)
    mb = 1 << 20
    assert manifest_decision(ManifestStats((mb,) * 3, 1, 8 * mb), policy).rewrite is False
    spread = manifest_decision(ManifestStats((mb,) * 12, 2, 8 * mb), policy)
    assert spread.rewrite and "per partition" in spread.reason
    big = manifest_decision(ManifestStats((40 * mb,), 1, 8 * mb), policy)
    assert big.rewrite and "5.0×" in big.reason
    small = manifest_decision(ManifestStats((1000,) * 4, 100, 8 * mb), policy)
    assert small.rewrite and "4 small manifests" in small.reason
