"""What the shell shows while a statement runs: a spinner on a terminal, progress lines otherwise.

On a terminal (stderr is a TTY) a rich spinner shows the procedure's latest stage and the tasks
of its running Spark stages; it is cleared before any result is printed. When stderr is not a
terminal (``-e``/``-f`` with output redirected, cron, CI logs) nothing is printed for a statement
that finishes within :data:`QUIET_SECONDS`; after that one line per stage change, and a line
every :data:`HEARTBEAT_SECONDS` while nothing changes, so a long procedure is never silent.

Floor: top (command line).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, TextIO

from sparkext.spark import cancellation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUIET_SECONDS = 10.0
HEARTBEAT_SECONDS = 10.0
_POLL_SECONDS = 0.5
PLACEHOLDER = "running…"


def task_counts(spark: SparkSession, group: str | None) -> str:
    """``"stage 14: 3/8 tasks"`` for the running stages of ``group``'s jobs (all jobs when
    ``group`` is None), from Spark's status tracker: metadata only, no job is started."""
    tracker = spark.sparkContext.statusTracker()
    active = sorted(tracker.getActiveStageIds())
    if group is not None and active:
        wanted: set[int] = set()
        for job_id in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job_id)
            if info is not None:
                wanted.update(list(info.stageIds))
        active = [stage_id for stage_id in active if stage_id in wanted]
    parts = []
    for stage_id in active:
        stage = tracker.getStageInfo(stage_id)
        if stage is not None:
            parts.append(f"stage {stage_id}: {stage.numCompletedTasks}/{stage.numTasks} tasks")
    return ", ".join(parts)


class Progress:
    """Reports one statement's progress to ``err`` until :meth:`stop` (idempotent)."""

    def __init__(
        self,
        err: TextIO,
        spark: SparkSession | None = None,
        group: str | None = None,
        tty: bool | None = None,
        heartbeat: float = HEARTBEAT_SECONDS,
        quiet_for: float = QUIET_SECONDS,
    ):
        self.err = err
        self.spark = spark
        self.group = group
        self.tty = err.isatty() if tty is None else tty
        self.heartbeat = heartbeat
        self.quiet_for = quiet_for
        self.message = PLACEHOLDER
        self._started = time.monotonic()
        self._printed_message: str | None = None
        self._printed_at = 0.0
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._status = None
        if self.tty:
            from rich.console import Console

            self._status = Console(file=err).status(self.message)
            self._status.start()
        self._thread = threading.Thread(target=self._loop, name="sparkext-progress", daemon=True)
        self._thread.start()

    def __call__(self, message: str) -> None:
        """A procedure's stage message (``progress(...)`` in :class:`~sparkext.declarations.
        Context`); also a cancel point: after Ctrl-C the statement stops at its next stage."""
        cancellation.raise_if_cancelled()
        with self._lock:
            self.message = message
        self._tick()

    def permanent(self, message: str) -> None:
        """A line that stays (a commit's result), printed above the spinner, or as is."""
        with self._lock:
            if self._status is not None and not self._done.is_set():
                self._status.console.print(message, highlight=False, markup=False)
            else:
                self.err.write(message + "\n")
                self.err.flush()

    def _tasks(self) -> str:
        if self.spark is None:
            return ""
        try:
            return task_counts(self.spark, self.group)
        except Exception:  # the tracker is best effort; never fail a statement for it
            return ""

    def _tick(self) -> None:
        if self._done.is_set():
            return
        if self._status is None and time.monotonic() - self._started < self.quiet_for:
            return
        tasks = self._tasks()  # py4j calls, outside the lock the worker's reports need
        with self._lock:
            if self._done.is_set():
                return
            elapsed = time.monotonic() - self._started
            message = self.message
            if self._status is not None:
                self._status.update(f"{message} ({tasks})" if tasks else message)
                return
            if elapsed < self.quiet_for:
                return
            changed = message != self._printed_message
            if not changed and time.monotonic() - self._printed_at < self.heartbeat:
                return
            if message == PLACEHOLDER and not tasks:
                return  # nothing to say yet beyond "running"
            line = f"… {elapsed:.0f} s: {message}" + (f" ({tasks})" if tasks else "")
            self.err.write(line + "\n")
            self.err.flush()
            self._printed_message = message
            self._printed_at = time.monotonic()

    def _loop(self) -> None:
        while not self._done.wait(_POLL_SECONDS):
            self._tick()

    def stop(self) -> None:
        """Clear the spinner (before a result or an error is printed) and stop reporting."""
        with self._lock:
            if self._done.is_set():
                return
            self._done.set()
            if self._status is not None:
                self._status.stop()
