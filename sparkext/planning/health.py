"""The table health score: how much a partition (and a table) would gain from maintenance.

Score per partition, 0–100, starting at 100 and losing up to:

* 40 for small files: the share of the partition's data files that bin-packing its small files
  into target-size files would remove: ``(small_files - ceil(small_bytes / target)) / data_files``.
* 30 for equality deletes: every reader compares every row with every applicable equality
  delete, so 3 points per live equality-delete file, at most 30 (10 files or more).
* 20 for position deletes and deletion vectors: 10 × (delete files per data file, at most 1) and
  10 × (deleted rows / data rows, at most 1): rows read only to be thrown away.

The table score is the partition scores' mean weighted by data bytes (by file count when the
table holds no bytes), less up to 10 for snapshot history: 1 point per 100 retained snapshots.
A healthy table scores 100; a score under 60 is worth a rewrite_data_files or
rewrite_equality_deletes.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SMALL_FILE_RATIO = 0.75  # Iceberg rewrite_data_files' default min-file-size-bytes: 75% of target


def small_file_threshold(target_file_size_bytes: int) -> int:
    """Files below this size count as small: 75% of the target size, as rewrite_data_files does.

    >>> small_file_threshold(512 * 1024 * 1024)
    402653184
    """
    return int(target_file_size_bytes * SMALL_FILE_RATIO)


@dataclass(frozen=True)
class PartitionLoad:
    data_files: int
    data_bytes: int
    data_records: int
    small_files: int
    small_bytes: int
    position_delete_files: int  # including deletion vectors
    deleted_records: int  # position deletes and deletion vectors
    equality_delete_files: int


def partition_score(load: PartitionLoad, target_file_size_bytes: int) -> int:
    """Score one partition, 0–100 (see the module doc).

    >>> partition_score(PartitionLoad(1, 10, 5, 1, 10, 0, 0, 0), 100)
    100
    >>> partition_score(PartitionLoad(10, 100, 50, 10, 100, 0, 0, 0), 1000)
    64
    >>> partition_score(PartitionLoad(2, 10, 10, 0, 0, 2, 10, 12), 100)
    50
    """
    files = max(load.data_files, 1)
    packed = math.ceil(load.small_bytes / target_file_size_bytes) if load.small_bytes else 0
    removable = max(0, load.small_files - max(packed, 1)) if load.small_files > 1 else 0
    small = 40 * removable / files
    equality = min(30, 3 * load.equality_delete_files)
    position = 10 * min(1.0, load.position_delete_files / files) + 10 * min(
        1.0, load.deleted_records / max(load.data_records, 1)
    )
    return max(0, round(100 - small - equality - position))


def table_score(scores_and_bytes: list[tuple[int, int]], snapshot_count: int) -> int:
    """Combine partition scores (with their data bytes) and the snapshot count into 0–100.

    >>> table_score([(100, 10), (50, 30)], 0)
    62
    >>> table_score([], 250)
    98
    """
    weights = [b for _, b in scores_and_bytes]
    if scores_and_bytes and sum(weights) > 0:
        mean = sum(s * b for s, b in scores_and_bytes) / sum(weights)
    elif scores_and_bytes:
        mean = sum(s for s, _ in scores_and_bytes) / len(scores_and_bytes)
    else:
        mean = 100.0
    history = min(10.0, snapshot_count / 100)
    return max(0, round(mean - history))
