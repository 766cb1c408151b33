"""Ctrl-C in the shell: a real SIGINT reaches the main thread while a statement runs.

The signal is sent to this process (``pthread_kill`` of the main thread) exactly as a terminal
sends it, so the path under test is the one a user's Ctrl-C takes: the Runner's handler, the job
group's cancellation, the commit layer's last check, and the one line printed.
"""

from __future__ import annotations

import io
import re
import signal
import threading
import time

import pytest

from sparkext.cli.progress import Progress
from sparkext.cli.shell import Shell
from sparkext.spark import cancellation
from tests.helpers.cdc_calls import events, land, table_rows
from tests.helpers.shell_lines import said

FOREVER = "SELECT sum(hash(id)) AS s FROM range(0, 400000000000, 1, 2)"


_pending: list[threading.Event] = []


@pytest.fixture(autouse=True)
def _no_interrupt_outlives_its_test():
    """A test whose interrupt never fired must not fire it into a later test's statement."""
    yield
    while _pending:
        _pending.pop().set()


def _interrupt_when(predicate, timeout: float = 240.0, running: bool = True) -> threading.Thread:
    """Send SIGINT to the main thread once ``predicate()`` holds (while a statement runs,
    unless ``running`` is False); never after the test ends."""
    main = threading.main_thread().ident
    over = threading.Event()
    _pending.append(over)

    def loop() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not over.is_set():
            if (cancellation.running() is not None or not running) and predicate():
                signal.pthread_kill(main, signal.SIGINT)
                return
            over.wait(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def _no_active_jobs(spark, within: float = 30.0) -> bool:
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not tracker.getActiveJobsIds():
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_cancels_the_statements_jobs_and_the_next_statement_answers(spark):
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, out=out, err=err)
    tracker = spark.sparkContext.statusTracker()
    before = signal.getsignal(signal.SIGINT)
    _interrupt_when(lambda: bool(tracker.getActiveStageIds()))
    assert not shell.run_text(f"{FOREVER}; SELECT 'not reached' AS s")
    assert shell.cancelled
    assert said(err.getvalue()) == "Cancelled; nothing was committed."
    assert "not reached" not in out.getvalue()
    assert _no_active_jobs(spark), "the cancelled statement's jobs are still running"
    assert shell.run_text("SELECT 42 AS answer")
    assert "| 42 " in out.getvalue()
    # The handler in place before the statement is back once it is over.
    assert signal.getsignal(signal.SIGINT) is before


def test_a_cancelled_ingest_says_exactly_which_batches_committed(spark, tmp_path, table_name):
    """Cancelled after its first commit: the sentence lists exactly the snapshots that the
    statement made, nothing else landed, and a rerun completes the rest."""
    landing = tmp_path / "in"
    expected: dict[int, dict] = {}
    for batch in range(4):
        specs = [("c", batch * 100 + k, batch * 100 + k, f"n{batch}") for k in range(20)]
        land(landing, f"{batch:02d}.json", events(*specs))
        expected.update({k: {"id": k, "name": f"n{batch}"} for _, k, _, _ in specs})
    call = (
        f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{landing}', "
        f"checkpoint => '{tmp_path / 'ck'}', primary_key => 'id', create => true, "
        "options => map('max-files-per-batch', '1'))"
    )
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, out=out, err=err)

    def committed_once() -> bool:
        statement = cancellation.running()
        return statement is not None and len(statement.commits) >= 1

    _interrupt_when(committed_once)
    assert not shell.run_text(call)
    sentence = err.getvalue().strip().splitlines()[-1]
    assert sentence.startswith("Cancelled; committed before the cancel took effect: ")
    # each snapshot named with the micro-batch that made it, never "this batch"
    assert "(micro-batch " in sentence and "this batch" not in sentence, sentence
    reported = [int(n) for n in re.findall(rf"{re.escape(table_name)} snapshot (\d+)", sentence)]
    snapshots = spark.sql(f"SELECT snapshot_id FROM {table_name}.snapshots").collect()
    made = [r.snapshot_id for r in snapshots]
    # The table's creation is its own metadata commit (no snapshot); every snapshot is a batch.
    assert sorted(reported) == sorted(made) and 1 <= len(made) < 4
    assert _no_active_jobs(spark)
    assert shell.run_text(call)  # the rest, once: replay-safe after a cancel
    assert table_rows(spark, table_name, ["id", "name"]) == expected


def test_progress_lines_when_stderr_is_not_a_terminal(spark):
    """Redirected output still hears from a long statement: its stage and its tasks."""
    err = io.StringIO()
    progress = Progress(err, spark, group=None, tty=False, heartbeat=0.3, quiet_for=0.0)
    progress("batch 1: writing files")
    try:
        # four tasks of a second each: long by the clock, not by how fast the rows are made
        spark.range(0, 4, 1, 4).selectExpr(
            "java_method('java.lang.Thread', 'sleep', 1000L) AS slept"
        ).collect()
    finally:
        progress.stop()
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("… ") for line in lines)
    assert "batch 1: writing files" in lines[0]
    assert any(re.search(r"stage \d+: \d+/4 tasks", line) for line in lines), lines
    count = len(lines)
    time.sleep(0.5)
    assert len(err.getvalue().splitlines()) == count  # stopped means silent


def test_a_cancelled_backfill_names_the_sinks_it_committed(spark, tmp_path):
    """Two queries; Ctrl-C once the first committed (the second waits for it): the first sink's
    snapshot is named, the second sink gets nothing."""
    from sparkext.spark.cancellation import Runner, StatementCancelled
    from sparkext.streaming import run_backfill
    from tests.spark.test_streaming import BIDS_1, BIDS_DDL, BIDS_JOB_HEAD, _ids, append

    n = next(_ids)
    bids, first, second = (f"lake.test.{name}_{n}" for name in ("bids", "first", "second"))
    spark.sql(f"CREATE TABLE {bids} ({BIDS_DDL}) USING iceberg")
    append(spark, bids, BIDS_DDL, BIDS_1)
    body = "".join(
        f"CREATE TABLE {sink} (bidtime TIMESTAMP, item STRING);\n"
        f"INSERT INTO {sink} SELECT bidtime, item FROM {bids};\n"
        for sink in (first, second)
    )
    job = BIDS_JOB_HEAD.format(bids=bids) + body

    def progress(line: str) -> None:
        if line.startswith("backfill 2/2") and ":" not in line.split(": ", 1)[1]:
            statement = cancellation.current()
            assert statement is not None and statement.cancelled.wait(120)

    def committed_once() -> bool:
        statement = cancellation.running()
        return statement is not None and len(statement.commits) >= 1

    _interrupt_when(committed_once)
    runner = Runner(spark)
    try:
        runner.run(lambda: run_backfill(spark, job, "2020-04-15", "2020-04-16", progress=progress))
    except StatementCancelled as cancelled:
        sentence = str(cancelled)
    else:
        raise AssertionError("the backfill was not cancelled")
    finally:
        runner.close()
    snapshot = spark.sql(f"SELECT snapshot_id FROM {first}.snapshots").collect()
    assert len(snapshot) == 1
    assert sentence == (
        "Cancelled; committed before the cancel took effect: "
        f"{first} snapshot {snapshot[0].snapshot_id} (backfill 1)."
    )
    assert spark.sql(f"SELECT * FROM {second}.snapshots").count() == 0


def test_ctrl_c_between_two_statements_stops_the_text_with_one_line(spark, monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, out=out, err=err)
    ran: list[str] = []
    original = Shell.run_statement

    def run_statement(self, statement, quiet=False, fmt=None):
        if ran:
            raise KeyboardInterrupt  # as a Ctrl-C landing after the first statement
        ran.append(statement.text)
        return original(self, statement, quiet, fmt)

    monkeypatch.setattr(Shell, "run_statement", run_statement)
    assert not shell.run_text("SELECT 1 AS a; SELECT 2 AS b")
    assert shell.cancelled and ran == ["SELECT 1 AS a"]
    assert err.getvalue().splitlines()[-1] == "Cancelled; the statements before this point ran."


def test_a_statement_cancelled_while_queued_never_runs(spark):
    """A statement waiting behind one that is still winding down is dropped on Ctrl-C."""
    from sparkext.spark.cancellation import Runner, StatementCancelled, _the_worker

    gate = threading.Event()
    _the_worker().submit(lambda: gate.wait(60))  # the worker is busy with something else
    ran = threading.Event()
    # Whatever handler was in place, make sure "the Runner's is installed" can only mean that
    # Runner.run is waiting (Python's own default is the very handler the Runner installs).
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    handler_installed = lambda: signal.getsignal(signal.SIGINT) is signal.default_int_handler  # noqa: E731
    _interrupt_when(handler_installed, timeout=30, running=False)
    try:
        Runner(spark).run(ran.set)
    except StatementCancelled as cancelled:
        assert str(cancelled) == "Cancelled; nothing was committed."
    else:
        raise AssertionError("not cancelled")
    finally:
        gate.set()
        signal.signal(signal.SIGINT, previous)
    time.sleep(0.5)
    assert not ran.is_set()


def test_a_query_the_statement_starts_after_the_cancel_is_stopped_too(spark):
    """A statement still starting things when Ctrl-C comes (sparkext-sql stream planning its
    queries) starts its query after the cancel: that query is stopped as well, and the
    statement is reported cancelled, not finished."""
    from sparkext.spark.cancellation import Runner, StatementCancelled

    started: list = []

    def work():
        statement = cancellation.current()
        assert statement is not None and statement.cancelled.wait(120)
        query = (  # what the statement does next, unaware of the cancel
            spark.readStream.format("rate")
            .option("rowsPerSecond", 1)
            .load()
            .writeStream.format("noop")
            .start()
        )
        started.append(query)
        return query

    _interrupt_when(lambda: True)
    try:
        Runner(spark).run(work)
    except StatementCancelled as cancelled:
        assert str(cancelled) == "Cancelled; nothing was committed."
    else:
        raise AssertionError("the statement was reported as finished")
    assert started and not started[0].isActive
    assert all(q.id != started[0].id for q in spark.streams.active)
