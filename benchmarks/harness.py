"""Result type and timing helpers shared by every benchmark."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Result:
    """One comparison: our figure beside the baseline's, measured in the same run."""

    benchmark: str
    metric: str  # what the figures are, e.g. "median ms per statement"
    ours: float
    baseline_name: str
    baseline: float
    goal: str  # the goal, in words
    met: bool
    notes: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("inf")

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def interleaved_medians(
    ours: Callable[[], object], baseline: Callable[[], object], rounds: int, warmup: int = 20
) -> tuple[list[float], list[float]]:
    """Time ``ours`` and ``baseline`` alternately (so drift hits both); return seconds per call."""
    for _ in range(warmup):
        ours()
        baseline()
    ours_times: list[float] = []
    base_times: list[float] = []
    for i in range(rounds):
        pair = ((ours, ours_times), (baseline, base_times))
        for fn, sink in pair if i % 2 == 0 else reversed(pair):
            start = time.perf_counter()
            fn()
            sink.append(time.perf_counter() - start)
    return ours_times, base_times


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000
