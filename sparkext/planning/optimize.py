"""Plan one tiered_optimize run from file metadata. Pure: no Spark, no JVM.

Bilibili Magnus's three levels (seed 002 §3), per partition:

* **L0** merges a partition's small files written by writers (and earlier L0 outputs still
  small) once there are ``l0_min_files`` of them, or converts its equality deletes: cheap and
  immediate;
* **L1** clusters the partition's level-0 data (writers' files and L0 outputs, any size) once
  ``l1_min_bytes`` of it have accumulated;
* **L2** re-clusters the whole partition after ``l2_every_l1_runs`` L1 runs, when its clustered
  files' layout has decayed (:func:`clustering_depth`), or once it has been idle.

A higher level subsumes the lower ones in the same partition and run. A file's level is the
``sparkext.optimize.level`` of the REPLACE snapshot that added it; files added by writers are
level 0. When that snapshot has expired (``LEVEL_UNKNOWN``) the level is inferred from the size:
a small file is level 0, a larger one is settled (level 1) and only L2 rewrites it again.

The number of L1 runs since the partition's last L2 needs no counter that could go stale: L2
rewrites every file of the partition, so it is the number of distinct snapshots that added the
partition's live level-1 files.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LEVEL_UNKNOWN = -1  # the adding snapshot expired: the level is inferred from the size
LEVELS = (0, 1, 2)


@dataclass(frozen=True)
class DataFileFact:
    """A live data file, as the ``entries`` metadata table (and its snapshot) describe it."""

    path: str
    partition: str  # "<spec id>:<partition as JSON>"
    bytes: int
    records: int
    snapshot_id: int  # the snapshot that added it
    sequence_number: int  # data sequence number
    level: int = 0  # from the adding snapshot's summary; writers' files are 0
    # (lower, upper) bounds per cluster column, comparable values; absent when not collected
    bounds: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    selected: bool = True  # its partition lies wholly inside the `where` predicate
    merged: bool = False  # written by an L0 merge (not by a writer)


@dataclass(frozen=True)
class Settings:
    target_file_bytes: int = 128 * 1024 * 1024
    small_file_bytes: int = 16 * 1024 * 1024  # Amoro: the target / 8 is a fragment
    l0_min_files: int = 12  # Amoro's minor-optimizing trigger
    l1_min_bytes: int = 2 * 1024**3  # Magnus: > 2 GB of new data
    l2_every_l1_runs: int = 10  # Magnus: every 10 L1 runs
    l2_max_depth_ratio: float = 4.0  # decayed: depth above this many times the ideal depth
    l2_idle_ms: int | None = None  # re-cluster a partition idle this long (None: never)
    cluster_columns: tuple[str, ...] = ()
    levels: frozenset[int] = frozenset(LEVELS)  # the levels this run may act on
    forced: frozenset[int] = frozenset()  # levels named by the caller: run whatever the trigger


@dataclass(frozen=True)
class Group:
    """One unit of work: one partition, one level, exactly these files, one commit."""

    partition: str
    level: int  # the level the output files get
    files: tuple[DataFileFact, ...]
    reason: str
    convert_deletes: bool = False  # L0: convert the partition's equality deletes too

    @property
    def input_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def start_sequence_number(self) -> int:
        """The largest data sequence number among the inputs (what a rewrite must not exceed:
        deletes committed after the plan still apply to the rewritten rows)."""
        return max((f.sequence_number for f in self.files), default=0)


def effective_level(f: DataFileFact, settings: Settings) -> int:
    """The file's level; an unknown one inferred from its size.

    >>> s = Settings(small_file_bytes=100)
    >>> [effective_level(DataFileFact("p", "0:{}", b, 1, 1, 1, lv), s)
    ...  for b, lv in ((50, 2), (50, LEVEL_UNKNOWN), (500, LEVEL_UNKNOWN))]
    [2, 0, 1]
    """
    if f.level != LEVEL_UNKNOWN:
        return f.level
    return 0 if f.bytes < settings.small_file_bytes else 1


def l0_inputs(small: Sequence[DataFileFact], min_files: int) -> list[DataFileFact]:
    """The small files an L0 merge takes: the writers' once there are ``min_files`` of them,
    plus earlier L0 outputs once those number ``min_files`` too (counting the new one).

    Size-tiered, so a byte is merged O(log) times before L1 takes it, not once per commit:
    merging every small file each time would rewrite the growing L0 output after every commit.

    >>> def f(name, merged=False):
    ...     return DataFileFact(name, "0:{}", 1, 1, 1, 1, merged=merged)
    >>> [g.path for g in l0_inputs([f("w1"), f("w2"), f("m1", True)], 2)]
    ['w1', 'w2', 'm1']
    >>> [g.path for g in l0_inputs([f("w1"), f("w2"), f("m1", True)], 3)]
    []
    >>> [g.path for g in l0_inputs([f("w1"), f("w2"), f("w3"), f("m1", True)], 3)]
    ['w1', 'w2', 'w3']
    """
    fresh = [f for f in small if not f.merged]
    if len(fresh) < min_files:
        return []
    merged = [f for f in small if f.merged]
    return fresh + merged if len(merged) + 1 >= min_files else fresh


def l1_runs(files: Iterable[DataFileFact], settings: Settings) -> int:
    """L1 runs since the partition's last L2: distinct snapshots that added its level-1 files."""
    return len({f.snapshot_id for f in files if effective_level(f, settings) == 1})


def clustering_depth(files: Sequence[DataFileFact], columns: Sequence[str]) -> float | None:
    """How many files a point lookup on one cluster column must open, on average: for each
    column, the mean over files of the number of files whose [lower, upper] contains that
    file's lower bound; then the mean over the columns. 1.0 is a perfect linear layout of one
    column; a k-column curve over n files ideally gives about n ** (1 - 1/k) per column. None
    when no column has bounds on two files or more. O(n log n) per column.

    >>> def f(lo, hi):
    ...     return DataFileFact(f"{lo}", "0:{}", 1, 1, 1, 1, 1, {"a": (lo, hi)})
    >>> clustering_depth([f(0, 9), f(10, 19), f(20, 29)], ["a"])
    1.0
    >>> clustering_depth([f(0, 29), f(0, 29), f(0, 29)], ["a"])
    3.0
    """
    depths = []
    for column in columns:
        spans = [f.bounds[column] for f in files if column in f.bounds]
        spans = [(lo, hi) for lo, hi in spans if lo is not None and hi is not None]
        if len(spans) < 2:
            continue
        lowers = sorted(lo for lo, _ in spans)
        uppers = sorted(hi for _, hi in spans)
        total = 0
        for lo, _ in spans:  # files starting at or before lo, minus those ending before it
            total += bisect.bisect_right(lowers, lo) - bisect.bisect_left(uppers, lo)
        depths.append(total / len(spans))
    return sum(depths) / len(depths) if depths else None


def ideal_depth(files: int, columns: int) -> float:
    """The depth a fresh clustering of ``files`` files on ``columns`` columns gives."""
    if files <= 1 or columns <= 0:
        return 1.0
    depth: float = files ** (1 - 1 / columns)  # int ** float is typed Any; it is a float here
    return max(1.0, depth)


def plan(
    files: Iterable[DataFileFact],
    settings: Settings,
    equality_delete_partitions: Iterable[str] = (),
    last_commit_ms: Mapping[str, int] | None = None,
    now_ms: int | None = None,
) -> list[Group]:
    """The groups of one run, at most one per partition, oldest partition key first.

    >>> s = Settings(small_file_bytes=100, l0_min_files=3, l1_min_bytes=1000,
    ...              cluster_columns=("a",))
    >>> small = [DataFileFact(f"s{i}", "0:{}", 10, 1, i, i) for i in range(3)]
    >>> [(g.level, len(g.files), g.reason) for g in plan(small, s)]
    [(0, 3, '3 small files (>= 3)')]
    >>> big = [DataFileFact(f"b{i}", "0:{}", 600, 1, i, i) for i in range(2)]
    >>> [(g.level, len(g.files), g.reason) for g in plan(big + small, s)]
    [(1, 5, '1,230 bytes at level 0 (>= 1,000)')]
    """
    by_partition: dict[str, list[DataFileFact]] = defaultdict(list)
    for f in files:
        if f.selected:
            by_partition[f.partition].append(f)
    deletes = set(equality_delete_partitions)
    groups = []
    for partition in sorted(by_partition):
        chosen = _partition_group(
            partition,
            sorted(by_partition[partition], key=lambda f: (f.sequence_number, f.path)),
            settings,
            partition in deletes,
            None if last_commit_ms is None else last_commit_ms.get(partition),
            now_ms,
        )
        if chosen is not None:
            groups.append(chosen)
    return groups


def _partition_group(
    partition: str,
    files: list[DataFileFact],
    settings: Settings,
    has_equality_deletes: bool,
    last_commit_ms: int | None,
    now_ms: int | None,
) -> Group | None:
    clusters = bool(settings.cluster_columns)
    levels = {id(f): effective_level(f, settings) for f in files}
    level0 = [f for f in files if levels[id(f)] == 0]
    clustered = [f for f in files if levels[id(f)] >= 1]
    if 2 in settings.levels and clusters:
        reason = _l2_reason(files, clustered, level0, settings, last_commit_ms, now_ms)
        if reason is not None and len(files) > 0:
            return Group(partition, 2, tuple(files), reason)
    if 1 in settings.levels and clusters and level0:
        pending = sum(f.bytes for f in level0)
        if 1 in settings.forced:
            return Group(partition, 1, tuple(level0), "l1 requested")
        if pending >= settings.l1_min_bytes:
            reason = f"{pending:,} bytes at level 0 (>= {settings.l1_min_bytes:,})"
            return Group(partition, 1, tuple(level0), reason)
    if 0 in settings.levels:
        small = [f for f in level0 if f.bytes < settings.small_file_bytes]
        if 0 in settings.forced and (len(small) >= 2 or has_equality_deletes):
            return Group(partition, 0, tuple(small), "l0 requested", has_equality_deletes)
        inputs = l0_inputs(small, settings.l0_min_files)
        if inputs:
            fresh = sum(1 for f in inputs if not f.merged)
            reason = f"{fresh} small files (>= {settings.l0_min_files})"
            if fresh < len(inputs):
                reason += f" and {len(inputs) - fresh} earlier L0 outputs"
            return Group(partition, 0, tuple(inputs), reason, has_equality_deletes)
        if has_equality_deletes:
            reason = "equality deletes to convert"
            merged = tuple(small) if len(small) >= 2 else ()
            return Group(partition, 0, merged, reason, True)
    return None


def _l2_reason(
    files: list[DataFileFact],
    clustered: list[DataFileFact],
    level0: list[DataFileFact],
    settings: Settings,
    last_commit_ms: int | None,
    now_ms: int | None,
) -> str | None:
    if 2 in settings.forced:
        return "l2 requested"
    runs = l1_runs(files, settings)
    if runs >= settings.l2_every_l1_runs:
        return f"{runs} L1 runs since the last L2 (>= {settings.l2_every_l1_runs})"
    # decay needs something clustered since the last L2: an L2's own output is as clustered as
    # its columns allow (truncated string bounds, few distinct values) and must not re-trigger
    depth = clustering_depth(clustered, settings.cluster_columns) if runs >= 1 else None
    if depth is not None:
        ideal = ideal_depth(len(clustered), len(settings.cluster_columns))
        if depth > settings.l2_max_depth_ratio * ideal:
            return (
                f"clustering depth {depth:.1f} > {settings.l2_max_depth_ratio:g} x the "
                f"ideal {ideal:.1f}"
            )
    idle = settings.l2_idle_ms
    if idle is not None and last_commit_ms is not None and now_ms is not None:
        unsettled = runs >= 2 or bool(level0)  # a cold partition's unclustered data too
        if now_ms - last_commit_ms >= idle and unsettled:
            return f"idle for {(now_ms - last_commit_ms) // 1000:,} s with {runs} L1 run(s)"
    return None


@dataclass(frozen=True)
class Layout:
    """What table_health shows of a partition's optimisation (Magnus' per-partition view)."""

    level_bytes: tuple[int, int, int]  # bytes of live data files at level 0, 1, 2
    clustering_depth: float | None  # of the clustered (level >= 1) files; None: not measurable

    @property
    def optimized_share(self) -> float | None:
        """Bytes at L1/L2 over all bytes; None for an empty partition."""
        total = sum(self.level_bytes)
        return None if total == 0 else (self.level_bytes[1] + self.level_bytes[2]) / total


def layouts(
    files: Iterable[DataFileFact], settings: Settings, key: Callable[[str], Any] = lambda p: p
) -> dict[Any, Layout]:
    """Per partition (grouped by ``key`` of the partition string): level mix and depth.

    >>> s = Settings(small_file_bytes=100, cluster_columns=("a",))
    >>> def f(lo, hi, level, size=500):
    ...     return DataFileFact(f"{lo}", "0:{}", size, 1, 1, 1, level, {"a": (lo, hi)})
    >>> out = layouts([f(0, 9, 1), f(10, 19, 2), f(0, 19, 0, 50)], s)["0:{}"]
    >>> out.level_bytes, out.clustering_depth, round(out.optimized_share, 2)
    ((50, 500, 500), 1.0, 0.95)
    """
    grouped: dict[Any, list[DataFileFact]] = defaultdict(list)
    for f in files:
        grouped[key(f.partition)].append(f)
    out = {}
    for partition, members in grouped.items():
        sizes = [0, 0, 0]
        clustered = []
        for f in members:
            level = effective_level(f, settings)
            sizes[min(level, 2)] += f.bytes
            if level >= 1:
                clustered.append(f)
        depth = (
            clustering_depth(clustered, settings.cluster_columns)
            if settings.cluster_columns
            else None
        )
        out[partition] = Layout((sizes[0], sizes[1], sizes[2]), depth)
    return out
