"""The Python API says what it does: run_backfill's and run_stream's docstrings cover every
parameter, what they return and raise, and where UDF modules must be importable; what they
return has a short repr that names the key facts (not 18 KB of sqlglot tree)."""

from __future__ import annotations

import inspect
from datetime import datetime

import pytest

from sparkext.streaming import BackfillPlan, BackfillResult, StreamRun, run_backfill, run_stream
from sparkext.streaming.backfill import commit_counts
from sparkext.streaming.context import StaticCatalog
from sparkext.streaming.rewrite import plan_batch

JOB = """
CREATE TABLE bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECONDS);
INSERT INTO lake.db.per_minute
SELECT auction, window_start, window_end, count(*) AS bids
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' MINUTE))
GROUP BY auction, window_start, window_end;
INSERT INTO lake.db.big_bids SELECT auction, price, dateTime FROM bid WHERE price > 100;
"""
START, END = datetime(2024, 1, 1, 10), datetime(2024, 1, 1, 12)
LIMIT = 300  # characters: a line a user can read


class Huge:
    """Stands in for a DataFrame or a Spark object whose repr must not show."""

    def __repr__(self) -> str:
        return "HUGE" * 5000


@pytest.mark.parametrize("function", [run_backfill, run_stream], ids=lambda f: f.__name__)
def test_the_docstring_covers_every_parameter_the_return_the_errors_and_udfs(function):
    doc = inspect.getdoc(function)
    for name in inspect.signature(function).parameters:
        assert f"    {name}: " in doc, f"{function.__name__} does not document {name}"
    for section in ("Args:", "Returns:", "Raises:", "StreamingSqlError", "UdfError"):
        assert section in doc
    udfs = doc[doc.index("UDFs:") :]
    for fact in ("driver", "executors' Python", "spark.submit.pyFiles", "--py-files"):
        assert fact in udfs


def test_start_from_interval_and_available_now_are_explained():
    doc = inspect.getdoc(run_stream)
    assert "start_from: emit only results after this time" in doc
    assert "interval: the trigger interval" in doc and "monitor-interval" in doc
    assert "available_now: process what the sources hold now" in doc


def test_a_backfill_plan_repr_names_its_queries_sinks_and_range():
    plan = plan_batch(JOB, START, END, StaticCatalog())
    assert len(repr(plan.queries[0])) > 2000  # what a plan used to print
    ran = BackfillPlan(plan.job, plan.ddl, plan.queries, START, END)
    text = repr(ran)
    assert text == (
        "BackfillPlan(queries=2, sinks=['lake.db.per_minute', 'lake.db.big_bids'], "
        "range=[2024-01-01 10:00:00, 2024-01-01 12:00:00))"
    )
    assert ran.script() == plan.script()  # still the plan: fields and behaviour kept
    unbounded = BackfillPlan(plan.job, plan.ddl, plan.queries, None, END)
    assert "range=[beginning, 2024-01-01 12:00:00)" in repr(unbounded)


def test_a_backfill_result_repr_leaves_the_frame_out():
    result = BackfillResult("lake.db.x", 8811, 120, 4, 1.25)
    assert repr(result) == (
        "BackfillResult(sink='lake.db.x', snapshot_id=8811, rows_added=120, rows_deleted=4, "
        "seconds=1.25)"
    )
    selected = BackfillResult(None, None, None, None, 0.5, frame=Huge())
    assert len(repr(selected)) < LIMIT and "HUGE" not in repr(selected)
    assert isinstance(selected.frame, Huge)


class Query:
    def __init__(self, active: bool, error: object = None, broken: bool = False):
        self.active, self.error, self.broken = active, error, broken

    @property
    def isActive(self) -> bool:
        if self.broken:
            raise RuntimeError("py4j: the session is gone")
        return self.active

    def exception(self):
        return self.error

    def __repr__(self) -> str:
        return "HUGE" * 5000


@pytest.mark.parametrize(
    ("query", "failures", "state"),
    [
        (Query(True), [], "running"),
        (Query(False), [], "stopped"),
        (Query(False, error=object()), [], "failed"),
        (Query(False), [ValueError("bad row")], "failed"),
        (Query(True, broken=True), [], "stopped"),
    ],
    ids=["running", "stopped", "spark error", "batch failure", "session gone"],
)
def test_a_stream_run_repr_says_checkpoint_state_and_queries(query, failures, state):
    run = StreamRun(query, "file:/checkpoints/bids", failures, ["lake.db.a", "lake.db.b"])
    text = repr(run)
    assert len(text) < LIMIT and "HUGE" not in text
    assert text.startswith(
        f"StreamRun(checkpoint='file:/checkpoints/bids', state='{state}', queries=2, "
        "sinks=['lake.db.a', 'lake.db.b']"
    )
    assert run.state == state
    assert ("failures=1" in text) == bool(failures)


def test_commit_counts_are_one_phrase_per_kind_of_commit():
    assert commit_counts(5, 1440, 1440, "overwrite") == "1440 rows added, 1440 deleted (snapshot 5)"
    assert commit_counts(6, 12, 0, "append") == "12 rows appended (snapshot 6)"
    assert commit_counts(7, 3, 0, "upsert") == "3 rows upserted, 0 keys deleted (snapshot 7)"
    assert commit_counts(None, 0, 0, "append") == "no commit: nothing changed"
