"""One SQL text for stream and batch.

* :mod:`.dialect` — Flink-style streaming SQL on sqlglot;
* :func:`to_batch` — the bounded batch Spark SQL of a job over [start, end) (rules in
  :mod:`.rules`, one per construct);
* :func:`run_backfill` — run it once over a range (``sparkext-sql backfill``); returns
  ``(BackfillPlan, [BackfillResult, …])``: what ran, and each query's sink, snapshot and rows;
* :func:`run_stream` — run it continuously (``sparkext-sql stream``); returns a started
  :class:`~sparkext.streaming.stream.StreamRun` (``wait()``, ``stop()``);
* :func:`udf` — UDFs shared by both modes (their module must be importable on the driver and
  on the executors: see :func:`run_backfill`).

``run_backfill``, ``run_stream`` and their result types are imported on first use, so
``import sparkext.streaming`` stays light.

Floor: streaming.
"""

from typing import Any

from sparkext.streaming.rewrite import plan_batch, to_batch
from sparkext.streaming.udf import udf

__all__ = [
    "BackfillPlan",
    "BackfillResult",
    "StreamRun",
    "plan_batch",
    "run_backfill",
    "run_stream",
    "to_batch",
    "udf",
]

_LAZY = {
    "run_backfill": "sparkext.streaming.backfill",
    "BackfillPlan": "sparkext.streaming.backfill",
    "BackfillResult": "sparkext.streaming.backfill",
    "run_stream": "sparkext.streaming.stream",
    "StreamRun": "sparkext.streaming.stream",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
