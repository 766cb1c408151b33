from __future__ import annotations

import pytest

from sparkext.planning.health import (
    PartitionLoad,
    partition_score,
    small_file_threshold,
    table_score,
)

TARGET = 128 * 1024 * 1024


def load(**changes) -> PartitionLoad:
    base = dict(
        data_files=1,
        data_bytes=TARGET,
        data_records=1000,
        small_files=0,
        small_bytes=0,
        position_delete_files=0,
        deleted_records=0,
        equality_delete_files=0,
    )
    base.update(changes)
    return PartitionLoad(**base)


def test_threshold_is_three_quarters_of_target():
    assert small_file_threshold(TARGET) == 96 * 1024 * 1024


def test_a_compact_partition_scores_100():
    assert partition_score(load(), TARGET) == 100


def test_one_small_file_alone_costs_nothing():
    assert partition_score(load(small_files=1, small_bytes=10), TARGET) == 100


def test_small_files_cost_the_share_compaction_would_remove():
    # 100 small files of 1 MB pack into 1 file: 99 of 100 files removable -> 40 * 0.99
    small = load(data_files=100, data_bytes=100 << 20, small_files=100, small_bytes=100 << 20)
    assert partition_score(small, TARGET) == 60


def test_equality_deletes_cost_three_points_each_up_to_thirty():
    assert partition_score(load(equality_delete_files=2), TARGET) == 94
    assert partition_score(load(equality_delete_files=50), TARGET) == 70


def test_position_deletes_cost_files_and_deleted_share():
    # one delete file per data file (10) and half the rows deleted (5)
    assert partition_score(load(position_delete_files=1, deleted_records=500), TARGET) == 85


def test_worst_partition_bottoms_at_ten():
    worst = load(
        data_files=100,
        data_bytes=100,
        small_files=100,
        small_bytes=100,
        equality_delete_files=99,
        position_delete_files=500,
        deleted_records=10**9,
    )
    assert partition_score(worst, TARGET) == 10


def test_table_score_weights_by_bytes_and_charges_history():
    assert table_score([(100, 3), (60, 1)], snapshot_count=0) == 90
    assert table_score([(100, 3), (60, 1)], snapshot_count=5000) == 80
    assert table_score([(100, 0), (50, 0)], snapshot_count=0) == 75


@pytest.mark.parametrize("snapshots", [0, 1, 999, 10**6])
def test_scores_stay_in_range(snapshots):
    assert 0 <= table_score([(0, 1)], snapshots) <= 100
