"""The rewrite_equality_deletes planner: pure, over delete-file facts."""

from __future__ import annotations

from sparkext.planning.equality_deletes import (
    EQUALITY_DELETES,
    POSITION_DELETES,
    DeleteFileFact,
    PlanSettings,
    plan_round,
)


def eq(path, seq, partition='0:{"p":"a"}', unpartitioned=False, **kw):
    return DeleteFileFact(
        path, EQUALITY_DELETES, seq, partition, unpartitioned, 10, 100, equality_ids=(1,), **kw
    )


def pos(path, seq, partition='0:{"p":"a"}', **kw):
    return DeleteFileFact(path, POSITION_DELETES, seq, partition, False, 5, 50, **kw)


def test_whole_partitions_oldest_first_within_the_cap():
    files = [eq("a1", 5), eq("a2", 6), eq("b1", 2, '0:{"p":"b"}'), eq("c1", 9, '0:{"p":"c"}')]
    plan = plan_round(files, PlanSettings(max_files_per_commit=3))
    assert [f.path for f in plan.convert] == ["b1", "a1", "a2"]
    assert plan.remaining == 1


def test_an_oversized_partition_is_split_rather_than_starved():
    files = [eq(f"a{i}", i) for i in range(5)]
    plan = plan_round(files, PlanSettings(max_files_per_commit=2))
    assert [f.path for f in plan.convert] == ["a0", "a1"] and plan.remaining == 3


def test_threshold_counts_files_per_partition():
    files = [eq("a1", 1), eq("a2", 2), eq("b1", 3, '0:{"p":"b"}')]
    plan = plan_round(files, PlanSettings(min_equality_delete_files=2))
    assert [f.path for f in plan.convert] == ["a1", "a2"]
    assert plan.remaining == 0  # b is below the threshold: not eligible, not "remaining"


def test_new_files_take_the_largest_replaced_sequence_number():
    files = [eq("a1", 4), eq("a2", 7), pos("pa", 9), pos("pb", 3, '0:{"p":"b"}')]
    plan = plan_round(files, PlanSettings())
    assert plan.sequence_number('0:{"p":"a"}', False) == 9
    assert [f.path for f in plan.merge] == ["pa"]  # b has a single file and no new deletes


def test_crowded_partitions_are_merged_without_new_deletes():
    files = [pos("p1", 1, '0:{"p":"b"}'), pos("p2", 2, '0:{"p":"b"}')]
    plan = plan_round(files, PlanSettings())
    assert plan.convert == () and [f.path for f in plan.merge] == ["p1", "p2"]
    assert plan_round(files, PlanSettings(merge_position_deletes=False)).is_empty


def test_v3_candidates_are_dvs_where_deletes_land_and_legacy_files():
    dv = pos("x.puffin", 3, file_format="PUFFIN", referenced_data_file="d1", content_offset=4)
    elsewhere = pos(
        "y.puffin",
        3,
        '0:{"p":"b"}',
        file_format="PUFFIN",
        referenced_data_file="d2",
        content_offset=4,
    )
    legacy = pos("old.parquet", 2, '0:{"p":"b"}')
    quiet = pos(
        "z.puffin",
        3,
        '0:{"p":"c"}',
        file_format="PUFFIN",
        referenced_data_file="d3",
        content_offset=4,
    )
    plan = plan_round([eq("a1", 5), dv, elsewhere, legacy, quiet], PlanSettings(format_version=3))
    # partition b's legacy file is folded into DVs, so b's DVs are candidates too (a data file
    # it names may already have one); c has nothing to do
    assert [f.path for f in plan.merge] == ["old.parquet", "x.puffin", "y.puffin"]


def test_unconvertible_files_are_reported_not_touched():
    avro = eq("a.avro", 3, file_format="AVRO")
    table_wide = eq("g", 8, "0:{}", unpartitioned=True)
    settings = PlanSettings(partitioned_data_min_sequence=2)
    plan = plan_round([avro, table_wide], settings)
    assert plan.convert == ()
    assert [p for p, _ in plan.skipped] == ["a.avro", "g"]
    # a table-wide delete older than every partitioned data file is fine
    plan = plan_round([eq("g", 1, "0:{}", unpartitioned=True)], settings)
    assert [f.path for f in plan.convert] == ["g"] and plan.global_sequence_number == 1


def test_files_outside_the_where_are_left():
    plan = plan_round([eq("a1", 1, selected=False), eq("b1", 2, '0:{"p":"b"}')], PlanSettings())
    assert [f.path for f in plan.convert] == ["b1"] and plan.remaining == 0


def test_file_granularity_merges_only_data_files_with_several_delete_files():
    a1 = pos("a1", 1, referenced_data_file="d1")
    a2 = pos("a2", 2, referenced_data_file="d1")
    b = pos("b", 3, referenced_data_file="d2")
    plan = plan_round([a1, a2, b], PlanSettings())
    assert [f.path for f in plan.merge] == ["a1", "a2"]
    # partition granularity: the crowded partition is merged whole
    plan = plan_round([a1, a2, b], PlanSettings(file_granularity=False))
    assert [f.path for f in plan.merge] == ["a1", "a2", "b"]
