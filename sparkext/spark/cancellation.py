"""Run one statement so that Ctrl-C cancels it: its Spark jobs, its streaming queries, its commits.

spark-sql cancels a statement's jobs on Ctrl-C and keeps the session. PySpark's own SIGINT
handler cannot do that safely from the thread that is blocked inside a py4j call (it re-enters
the same socket: ``RuntimeError: reentrant call``), and cancelling the jobs alone does not stop
a procedure's driver-side work: ``ingest_cdc`` commits its batch after the jobs are done.

So a statement runs on a worker thread in its own job group, while the main thread waits where a
``KeyboardInterrupt`` can reach it. On Ctrl-C the main thread marks the statement cancelled,
cancels the job group, stops the streaming queries the statement started and waits for the
worker to wind down. The commit layer (:mod:`sparkext.iceberg.commit`) checks the mark just
before its one atomic swap and records every commit it makes, so a cancelled procedure either
committed nothing or the user is told exactly which snapshots landed (a swap already under way
completes: the catalog's compare-and-swap cannot be interrupted halfway).

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from sparkext.errors import SparkextError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


@dataclass(frozen=True)
class CommitMade:
    """A snapshot a statement committed through sparkext's commit layer."""

    table: str
    snapshot_id: int
    what: str


@dataclass
class Statement:
    """The statement running now: its job group, whether it was cancelled, what it committed."""

    group: str = field(default_factory=lambda: f"sparkext-{uuid.uuid4().hex[:12]}")
    cancelled: threading.Event = field(default_factory=threading.Event)
    commits: list[CommitMade] = field(default_factory=list)


class StatementCancelled(SparkextError):
    """The user cancelled the statement (Ctrl-C); ``commits`` are the snapshots that landed."""

    def __init__(self, commits: list[CommitMade], still_running: bool = False):
        self.commits = list(commits)
        self.still_running = still_running
        super().__init__(cancelled_sentence(self.commits, still_running))


def cancelled_sentence(commits: list[CommitMade], still_running: bool = False) -> str:
    """What a cancel leaves behind, in one sentence.

    >>> cancelled_sentence([])
    'Cancelled; nothing was committed.'
    >>> cancelled_sentence([CommitMade("lake.db.t", 42, "batch 3")])
    'Cancelled; committed before the cancel took effect: lake.db.t snapshot 42 (batch 3).'
    >>> cancelled_sentence([], still_running=True).startswith("Cancelled; the statement is still")
    True
    """
    if still_running:
        done = "".join(f", after {c.table} snapshot {c.snapshot_id}" for c in commits)
        return (
            f"Cancelled; the statement is still winding down in the background{done} and may "
            "yet commit what it had started (see the table history)."
        )
    if not commits:
        return "Cancelled; nothing was committed."
    made = ", ".join(f"{c.table} snapshot {c.snapshot_id} ({c.what})" for c in commits)
    return f"Cancelled; committed before the cancel took effect: {made}."


_lock = threading.Lock()
_local = threading.local()  # the statement a thread works for (worker, foreachBatch threads)
_running: Statement | None = None  # the statement the worker runs now (for observers)


def current() -> Statement | None:
    """The statement this thread works for: set on the worker thread while it runs one, and
    on the threads a statement's streaming queries call back on (see :func:`bound`)."""
    return getattr(_local, "statement", None)


def running() -> Statement | None:
    """The statement the shared worker runs now, whatever thread asks (progress, tests)."""
    return _running


@contextlib.contextmanager
def bound(statement: Statement | None) -> Iterator[None]:
    """Make ``statement`` this thread's current one for the block: a ``foreachBatch`` callback
    runs on a py4j thread, and its commits belong to the statement that started the query."""
    saved = getattr(_local, "statement", None)
    _local.statement = statement
    try:
        yield
    finally:
        _local.statement = saved


def raise_if_cancelled() -> None:
    """Called by writers right before an irreversible step (the commit swap) and by progress
    reports (cooperative cancel points between Spark jobs)."""
    statement = current()
    if statement is not None and statement.cancelled.is_set():
        raise StatementCancelled(statement.commits)


def record_commit(table: str, snapshot_id: int, what: str) -> None:
    """Called by the commit layer (and by writers that commit through Spark) after a commit."""
    statement = current()
    if statement is not None:
        with _lock:
            statement.commits.append(CommitMade(table, snapshot_id, what))


def _is_cancellation(error: BaseException) -> bool:
    """A failure caused by the cancel (a cancelled job, an interrupted thread, a stopped
    query), as opposed to one the cancel merely revealed (e.g. an unknown commit state)."""
    if isinstance(error, StatementCancelled):
        return True
    text = f"{type(error).__name__}: {error}".lower()
    return any(word in text for word in ("cancel", "interrupt", "stopped", "killed"))


@contextlib.contextmanager
def _sigint(handler) -> Iterator[None]:
    """Use ``handler`` for SIGINT in the block (main thread only; others cannot set it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interruptible():
    """Ctrl-C raises KeyboardInterrupt in the main thread while a statement runs (instead of
    PySpark's handler, which calls into the JVM from inside a py4j call)."""
    return _sigint(signal.default_int_handler)


def _ignoring_interrupts():
    """No signal may cut a py4j call of this thread short."""
    return _sigint(signal.SIG_IGN)


@contextlib.contextmanager
def _deferring_interrupts() -> Iterator[list[bool]]:
    """No signal may cut a py4j call of this thread short, but a Ctrl-C meanwhile is not lost:
    the list yielded holds True once one came (an interrupted system call is retried, PEP 475).
    """
    caught: list[bool] = []
    with _sigint(lambda *_: caught.append(True)):
        yield caught


class _Worker:
    """ONE daemon thread that runs statements in turn: one py4j connection (PySpark pins a JVM
    thread to each Python thread), and a statement abandoned by a second Ctrl-C never keeps
    the process from exiting."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="sparkext-statement", daemon=True).start()

    def submit(self, function: Callable[[], T]) -> Future:
        future: Future = Future()
        self._jobs.put((future, function))
        return future

    def _loop(self) -> None:
        while True:
            future, function = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function())
            except BaseException as error:  # handed to the waiting thread as is
                future.set_exception(error)


_worker: _Worker | None = None


def _the_worker() -> _Worker:
    global _worker
    with _lock:
        if _worker is None:
            _worker = _Worker()
        return _worker


class Runner:
    """Runs statements one at a time on ONE worker thread (one py4j connection, reused), each in
    a job group of its own, cancellable with Ctrl-C.

    ``owns_session``: nothing else uses this Spark session (the shell), so a cancel may also
    cancel jobs that escaped the job group (those a streaming query's ``foreachBatch`` starts
    on its own threads).
    """

    def __init__(self, spark: SparkSession, owns_session: bool = False):
        self.spark = spark
        self.owns_session = owns_session

    def run(
        self,
        work: Callable[[], T],
        description: str = "",
        statement: Statement | None = None,
        on_cancel: Callable[[], None] = lambda: None,
    ) -> T:
        """Return ``work()``; on Ctrl-C cancel it and raise :class:`StatementCancelled`.

        ``on_cancel`` runs right after a Ctrl-C (e.g. stop a spinner). A second Ctrl-C while
        cancelling stops waiting for the worker (``still_running``). A failure the cancel did
        not cause (an unknown commit state, say) is raised as itself.
        """
        statement = statement or Statement()
        context = self.spark.sparkContext

        def target() -> T:
            global _running
            if statement.cancelled.is_set():  # cancelled while queued behind another one
                raise StatementCancelled([])
            _local.statement = statement  # set and cleared by the worker: a statement left
            _running = statement  # by a second Ctrl-C stays cancelled until it really ends
            context.setJobGroup(statement.group, description[:200], interruptOnCancel=True)
            try:
                return work()
            finally:
                # None removes a property (PySpark's annotation says str)
                context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
                _local.statement = None
                _running = None

        with _deferring_interrupts() as caught:  # a py4j call must not be cut short
            queries_before = {q.id for q in self.spark.streams.active}
            future = _the_worker().submit(target)
        try:  # around the handler's installation too: a Ctrl-C may land as it is installed
            if caught:
                raise KeyboardInterrupt
            with _interruptible():
                return _wait(future)
        except KeyboardInterrupt:
            pass
        with _ignoring_interrupts():  # nothing below may be cut short by a signal
            statement.cancelled.set()
            if future.cancel():  # still queued behind another statement: never runs
                raise StatementCancelled([]) from None
            on_cancel()
        stopped: list[bool] = []
        canceller = threading.Thread(
            target=self._cancel,
            args=(statement, queries_before, future, stopped),
            name="sparkext-cancel",
            daemon=True,
        )
        canceller.start()
        try:
            with _interruptible():
                result = _wait(future)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for the worker
            raise StatementCancelled(statement.commits, still_running=True) from None
        except Exception as error:
            if _is_cancellation(error) or stopped:
                raise StatementCancelled(statement.commits) from None
            raise
        canceller.join(timeout=5)
        if stopped:  # a stopped query returns normally, but it did not finish
            raise StatementCancelled(statement.commits) from None
        return result  # it finished before the cancel reached it: a true result

    def _cancel(
        self, statement: Statement, queries_before: set[str], future: Future, stopped: list[bool]
    ) -> None:
        """Cancel the statement's jobs, stop the streaming queries it started, and keep
        cancelling until it ends: Spark cancels only the jobs running at the moment, and a
        statement may start another one after (a procedure's next step)."""
        context = self.spark.sparkContext
        seen = set(queries_before)

        def stop_new_queries() -> None:
            with contextlib.suppress(Exception):
                for query in self.spark.streams.active:
                    if query.id not in seen:
                        seen.add(query.id)
                        stopped.append(True)
                        with contextlib.suppress(Exception):
                            query.stop()

        stop_new_queries()
        while not future.done():
            with contextlib.suppress(Exception):
                context.cancelJobGroup(statement.group)
                if self.owns_session:  # jobs a foreachBatch starts run outside the group
                    context.cancelAllJobs()
            stop_new_queries()  # one the statement started after the cancel (it runs on)
            with contextlib.suppress(Exception):  # a timeout, or the statement's own error
                future.result(timeout=0.25)
        stop_new_queries()  # ... or as it ended

    def close(self) -> None:
        """Nothing to release: the worker thread is shared and a daemon (kept for callers)."""


def _wait(future: Future, swallow: bool = False):
    """Wait in short steps so a signal reaches this thread promptly."""
    while True:
        try:
            return future.result(timeout=0.2)
        except FutureTimeout:
            continue
        except Exception:
            if swallow:
                return None
            raise
