"""One SQL text for stream and batch.

* :mod:`.dialect` — Flink-style streaming SQL on sqlglot;
* :func:`to_batch` — the bounded batch Spark SQL of a job over [start, end) (rules in
  :mod:`.rules`, one per construct);
* :func:`run_backfill` / :func:`run_stream` — run it (``sparkext-sql backfill`` / ``stream``);
* :func:`udf` — UDFs shared by both modes.
"""

from sparkext.streaming.rewrite import plan_batch, to_batch
from sparkext.streaming.udf import udf

__all__ = ["plan_batch", "run_backfill", "run_stream", "to_batch", "udf"]


def __getattr__(name: str):
    if name == "run_backfill":
        from sparkext.streaming.backfill import run_backfill

        return run_backfill
    if name == "run_stream":
        from sparkext.streaming.stream import run_stream

        return run_stream
    raise AttributeError(name)
