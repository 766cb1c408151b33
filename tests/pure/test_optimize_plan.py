"""tiered_optimize's pure planner: levels, triggers, subsumption, the clustering depth."""

from __future__ import annotations

import random

import pytest

from sparkext.planning.optimize import (
    LEVEL_UNKNOWN,
    DataFileFact,
    Settings,
    clustering_depth,
    ideal_depth,
    l1_runs,
    plan,
)

pytestmark = pytest.mark.pure

KB = 1024
SETTINGS = Settings(
    small_file_bytes=100 * KB,
    l0_min_files=4,
    l1_min_bytes=1000 * KB,
    l2_every_l1_runs=3,
    cluster_columns=("a", "b"),
)


def fact(name, size_kb, snapshot, level=0, partition='0:{"d":1}', bounds=None, selected=True):
    return DataFileFact(
        name, partition, size_kb * KB, size_kb, snapshot, snapshot, level, bounds or {},
        selected,
    )  # fmt: skip


def shapes(groups):
    return [
        (g.partition, g.level, sorted(f.path for f in g.files), g.convert_deletes) for g in groups
    ]


def test_l0_waits_for_enough_small_files_then_merges_them_all():
    three = [fact(f"w{i}", 10, i) for i in range(3)]
    assert plan(three, SETTINGS) == []
    four = [*three, fact("w3", 10, 3), fact("big", 500, 4)]
    assert shapes(plan(four, SETTINGS)) == [('0:{"d":1}', 0, ["w0", "w1", "w2", "w3"], False)]


def test_l0_converts_equality_deletes_even_below_the_file_count():
    files = [fact("w0", 10, 1), fact("w1", 10, 2)]
    groups = plan(files, SETTINGS, equality_delete_partitions=['0:{"d":1}'])
    assert shapes(groups) == [('0:{"d":1}', 0, ["w0", "w1"], True)]
    lone = plan([fact("w0", 10, 1)], SETTINGS, equality_delete_partitions=['0:{"d":1}'])
    assert shapes(lone) == [('0:{"d":1}', 0, [], True)]  # nothing to merge, deletes to convert


def test_l1_clusters_level0_data_once_enough_accumulated_and_subsumes_l0():
    files = [fact(f"w{i}", 90, i) for i in range(8)] + [fact("l0out", 400, 9, level=0)]
    assert l1_runs(files, SETTINGS) == 0
    (group,) = plan(files, SETTINGS)
    assert group.level == 1 and len(group.files) == 9
    assert "1,146,880 bytes at level 0 (>= 1,024,000)" in group.reason
    clustered = [fact("c1", 600, 20, level=1)]
    assert plan([*clustered, *files[:3]], SETTINGS) == []  # too few bytes for L1, files for L0


def test_l1_never_touches_clustered_files_and_l2_takes_the_whole_partition():
    level1 = [fact(f"r{run}f{i}", 600, 100 + run, level=1) for run in range(2) for i in range(2)]
    fresh = [fact(f"w{i}", 300, i) for i in range(4)]
    (group,) = plan([*level1, *fresh], SETTINGS)
    assert group.level == 1 and sorted(f.path for f in group.files) == ["w0", "w1", "w2", "w3"]
    third = [fact(f"r2f{i}", 600, 102, level=1) for i in range(2)]  # the third L1 run
    (group,) = plan([*level1, *third, *fresh], SETTINGS)
    assert group.level == 2 and len(group.files) == 10
    assert group.reason == "3 L1 runs since the last L2 (>= 3)"


def test_levels_named_by_the_caller_run_whatever_their_trigger():
    files = [fact("a", 600, 1, level=2), fact("b", 600, 2, level=2)]
    assert plan(files, SETTINGS) == []
    forced = Settings(**{**SETTINGS.__dict__, "levels": frozenset({2}), "forced": frozenset({2})})
    (group,) = plan(files, forced)
    assert (group.level, group.reason, len(group.files)) == (2, "l2 requested", 2)
    only_l0 = Settings(**{**SETTINGS.__dict__, "levels": frozenset({0})})
    many = [fact(f"w{i}", 300, i) for i in range(10)]  # L1 would trigger, but only L0 may run
    assert plan(many, only_l0) == []


def test_without_cluster_columns_only_l0_runs():
    plain = Settings(**{**SETTINGS.__dict__, "cluster_columns": ()})
    files = [fact(f"w{i}", 90, i) for i in range(20)]
    (group,) = plan(files, plain)
    assert group.level == 0 and len(group.files) == 20


def test_unselected_partitions_and_expired_levels():
    files = [fact(f"w{i}", 10, i, partition='0:{"d":2}', selected=False) for i in range(9)]
    assert plan(files, SETTINGS) == []
    # adding snapshots expired: small files count as level 0, large ones as settled
    expired = [fact(f"x{i}", 10, i, level=LEVEL_UNKNOWN) for i in range(4)]
    expired += [fact("y", 900, 50, level=LEVEL_UNKNOWN), fact("z", 900, 51, level=LEVEL_UNKNOWN)]
    (group,) = plan(expired, SETTINGS)
    assert group.level == 0 and sorted(f.path for f in group.files) == ["x0", "x1", "x2", "x3"]
    assert l1_runs(expired, SETTINGS) == 2  # two settled files of two snapshots


def test_the_clustering_depth_matches_a_brute_force_count():
    rng = random.Random(20261123)
    files = []
    for i in range(60):
        lo, width = rng.randint(0, 1000), rng.randint(0, 300)
        s = f"user_0000000{rng.randint(0, 9999):04d}"
        files.append(fact(f"f{i}", 1, i, bounds={"a": (lo, lo + width), "b": (s, s + "z")}))
    for column in ("a", "b"):
        spans = [f.bounds[column] for f in files]
        brute = sum(sum(1 for lo2, hi2 in spans if lo2 <= lo <= hi2) for lo, _ in spans)
        assert clustering_depth(files, [column]) == pytest.approx(brute / len(spans))


def test_a_decayed_layout_triggers_l2_and_a_fresh_one_does_not():
    # a fresh 2-column clustering of 16 files: a 4 x 4 grid of boxes
    grid = [
        fact(
            f"g{x}{y}",
            600,
            1,
            level=1,
            bounds={"a": (x * 10, x * 10 + 9), "b": (y * 10, y * 10 + 9)},
        )
        for x in range(4)
        for y in range(4)
    ]
    assert clustering_depth(grid, ["a", "b"]) == 4.0 == ideal_depth(16, 2)
    assert plan(grid, SETTINGS) == []
    # 20 files each spanning the whole range: every lookup opens all of them
    smeared = [
        fact(f"s{i}", 600, 1, level=1, bounds={"a": (0, 39), "b": (0, 39)}) for i in range(20)
    ]
    (group,) = plan(smeared, SETTINGS)
    assert group.level == 2 and group.reason.startswith("clustering depth 20.0 > 4 x the ideal 4.5")


def test_an_idle_partition_with_unclustered_data_is_reclustered():
    files = [fact("c", 600, 1, level=1), fact("w", 50, 2)]
    idle = Settings(**{**SETTINGS.__dict__, "l2_idle_ms": 3_600_000})
    key = '0:{"d":1}'
    assert plan(files, idle, last_commit_ms={key: 0}, now_ms=3_599_999) == []
    (group,) = plan(files, idle, last_commit_ms={key: 0}, now_ms=3_600_000)
    assert group.level == 2 and group.reason.startswith("idle for 3,600 s")
    settled = [fact("c", 600, 1, level=2)]
    assert plan(settled, idle, last_commit_ms={key: 0}, now_ms=10**9) == []


def test_l0_merges_its_own_outputs_only_once_they_are_many_size_tiered():
    merged = [
        DataFileFact(f"m{i}", '0:{"d":1}', 30 * KB, 30, 10 + i, 10 + i, 0, merged=True)
        for i in range(2)
    ]
    fresh = [fact(f"w{i}", 10, i) for i in range(4)]
    groups = plan([*merged, *fresh], SETTINGS)  # 2 earlier outputs (+1 new) < 4: left alone
    assert shapes(groups) == [('0:{"d":1}', 0, ["w0", "w1", "w2", "w3"], False)]
    third = DataFileFact("m2", '0:{"d":1}', 30 * KB, 30, 13, 13, 0, merged=True)
    groups = plan([*merged, third, *fresh], SETTINGS)
    assert shapes(groups) == [('0:{"d":1}', 0, ["m0", "m1", "m2", "w0", "w1", "w2", "w3"], False)]
    assert "3 earlier L0 outputs" in groups[0].reason


def test_an_l2_output_never_retriggers_l2_by_depth_alone():
    """Bounds an L2 cannot separate (truncated string bounds, few distinct values): a fresh
    L2's files overlap completely, but nothing was clustered since, so no new L2 is due."""
    settings = Settings(small_file_bytes=1, cluster_columns=("a",))
    l2 = [
        fact(f"l2_{i}", 500, 7, level=2, bounds={"a": ("user_0000", "user_0001")})
        for i in range(20)
    ]
    assert plan(l2, settings) == []
    l1 = fact("l1", 500, 8, level=1, bounds={"a": ("user_0000", "user_0001")})
    groups = plan([*l2, l1], settings)  # one L1 run since: now decay counts
    assert [g.level for g in groups] == [2] and "clustering depth" in groups[0].reason
