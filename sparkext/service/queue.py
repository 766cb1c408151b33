"""The optimisation service's priority queue: pure Python.

Order (smallest key first):

1. **tier** — 0: optimisation of a *fresh* partition (data committed within ``fresh_window``,
   default 1 hour: what real-time readers query now); 1: due maintenance actions of a table;
   2: optimisation of older partitions (history, backfills). A table's skipping-index build
   (job kind ``index``) is tier 1 too, with benefit 0: after the fresh groups that write the
   files it indexes;
2. **expected benefit**, highest first:
   ``(files_in − files_out + 8 × [converts equality deletes]) / (1 + GiB rewritten)`` where
   ``files_out = ceil(bytes_in / target file size)``: files a reader no longer opens (an
   equality-delete file costs a reader about as much as eight data files: it is joined against
   every data file before it), per unit of work. Clustering levels count their reclustered
   bytes as benefit too: ``+ GiB rewritten`` (the pruning they restore). Maintenance: 1.
3. the order jobs were queued (first come, first served among equals).

At most one job per table runs at a time (:meth:`JobQueue.pop`) and a table's job is queued
once per (table, partition, kind): a later plan replaces an earlier one still waiting.

Floor: service.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection
from dataclasses import dataclass, field

GIB = 1 << 30
DELETE_FILE_WEIGHT = 8
FRESH, MAINTENANCE, HISTORY = 0, 1, 2
INDEX = "index"  # a job kind: build the table's skipping indexes (tier MAINTENANCE)


@dataclass(frozen=True)
class Job:
    table: str
    kind: str  # "L0", "L1", "L2", "maintain" or "index"
    partition: str | None = None
    reason: str = ""
    tier: int = HISTORY
    benefit: float = 0.0
    actions: frozenset[str] = frozenset()  # maintain: the actions that are due
    input_files: int = 0
    input_bytes: int = 0
    label: str | None = None  # the partition as people read it (JSON)

    @property
    def key(self) -> tuple[str, str | None, str]:
        return (self.table, self.partition, self.kind)

    def describe(self) -> str:
        where = f" {self.label}" if self.label else ""
        if self.kind == "maintain":
            return f"{self.table} maintain {','.join(sorted(self.actions))}"
        return f"{self.table}{where} {self.kind}"


def benefit(
    input_files: int, input_bytes: int, target_bytes: int, level: int, converts_deletes: bool
) -> float:
    """The expected benefit of one optimisation group (module docstring).

    >>> round(benefit(12, 12 << 20, 128 << 20, 0, False), 2)  # 12 small files into 1
    10.87
    >>> benefit(2, 2 << 20, 128 << 20, 0, True) > benefit(2, 2 << 20, 128 << 20, 0, False)
    True
    """
    gib = input_bytes / GIB
    files_out = max(1, math.ceil(input_bytes / max(target_bytes, 1)))
    gain: float = max(0, input_files - files_out) + (DELETE_FILE_WEIGHT if converts_deletes else 0)
    if level >= 1:
        gain += gib
    return gain / (1 + gib)


def tier_of(last_commit_ms: int | None, now_ms: int, fresh_window_ms: int) -> int:
    """Fresh (0) when the partition received data within the window, else history (2).

    >>> tier_of(90, 100, 20), tier_of(50, 100, 20), tier_of(None, 100, 20)
    (0, 2, 2)
    """
    if last_commit_ms is not None and now_ms - last_commit_ms <= fresh_window_ms:
        return FRESH
    return HISTORY


@dataclass
class JobQueue:
    """Jobs by priority; one running job per table."""

    _waiting: dict[tuple[str, str | None, str], tuple[tuple[int, float, int], Job]] = field(
        default_factory=dict
    )
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def put(self, job: Job) -> None:
        """Queue ``job``, replacing a waiting job with the same key (its newer plan)."""
        previous = self._waiting.get(job.key)
        sequence = previous[0][2] if previous else next(self._order)
        self._waiting[job.key] = ((job.tier, -job.benefit, sequence), job)

    def pop(self, busy: Collection[str]) -> Job | None:
        """The first job by priority whose table is not in ``busy``."""
        ready = [(k, j) for k, j in self._waiting.values() if j.table not in busy]
        if not ready:
            return None
        _, job = min(ready, key=lambda item: item[0])
        del self._waiting[job.key]
        return job

    def drop_table(self, table: str) -> None:
        for key in [k for k in self._waiting if k[0] == table]:
            del self._waiting[key]

    def __len__(self) -> int:
        return len(self._waiting)

    def tables(self) -> set[str]:
        return {job.table for _, job in self._waiting.values()}
