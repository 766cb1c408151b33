"""A table's changelog as a stream of micro-batches for ``foreachBatch``-style consumers.

Each micro-batch is :func:`sparkext.actions.history.changelog.changelog` of (last consumed snapshot,
head], the head being the table's current snapshot or a branch's. Its rows stay on the
executors: the consumer gets a DataFrame and the batch id, as Spark's ``foreachBatch`` does.

Exactly-once, the way Spark's offset and commit logs give it: the batch (id, start, end) is
written to the checkpoint *before* the consumer gets it and marked committed *after* the
consumer returns. After a crash in between, the same batch id with the same range is delivered
again, so a sink that keeps the last batch id it wrote (or overwrites by batch id) ignores the
repeat; then the stream continues right after it. The checkpoint is one JSON file
(``<checkpoint>/changelog-stream.json``) replaced atomically on any filesystem pyarrow reaches
(:mod:`sparkext.fs`). Planning is pure (:mod:`sparkext.planning.changelog_stream`); the property
updates of a consumer registration go through :mod:`sparkext.iceberg.changelog_consumers`.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext import durations
from sparkext.actions.history.changelog import (
    CHANGE_OPTIONS,
    COMPUTE_UPDATES,
    IDENTIFIER_COLUMNS,
    NET_CHANGES,
    changelog,
)
from sparkext.declarations import (
    Kind,
    Option,
    Routine,
    bind_options,
    one_of,
    or_empty,
    parse_count,
    parse_long,
)
from sparkext.errors import CommitConflictError, OptionError, SparkextError
from sparkext.fs import Location
from sparkext.iceberg import changelog_consumers as consumers
from sparkext.iceberg.catalog import resolve_table
from sparkext.iceberg.changelog import ChangelogTable
from sparkext.planning.changelog import RangeRequest
from sparkext.planning.changelog_stream import (
    EARLIEST,
    LATEST,
    TTL_DEFAULT_MS,
    ConsumerReport,
    PlannedBatch,
    Progress,
    Registration,
    consumer_key,
    consumer_report,
    head_id,
    next_step,
    parse_consumer_name,
    start_position,
)
from sparkext.spark import cancellation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef
    from sparkext.planning.changelog import History

PROGRESS_FILE = "changelog-stream.json"
STARTING = "starting"
STARTING_DEFAULT = EARLIEST
START_SNAPSHOT_ID = "start-snapshot-id"
START_SNAPSHOT_ID_DEFAULT = ""
BRANCH = "branch"
BRANCH_DEFAULT = ""  # empty: the table's current snapshot
MAX_SNAPSHOTS = "max-snapshots-per-batch"
MAX_SNAPSHOTS_DEFAULT = ""  # empty: every snapshot up to the head in one batch
CONSUMER_NAME = "consumer-name"
CONSUMER_NAME_DEFAULT = ""  # empty: not registered (registration is opt-in)
CONSUMER_TTL = "consumer-ttl"
CONSUMER_TTL_DEFAULT = "7 days"
INTERVAL_DEFAULT = "10 seconds"
HEARTBEAT_EVERY_MS = 3_600_000  # an idle started stream refreshes its heartbeat this often

ROUTINE = Routine(
    name="changelog_stream",
    doc="A table's changelog as micro-batches for a foreachBatch-style consumer.",
    params=(),
    output=(),
    run=lambda context, args: [],  # a Python API: only its options are declared here
    kind=Kind.FUNCTION,
    options=(
        Option(STARTING, STARTING_DEFAULT, "a new checkpoint starts before the first "
               "snapshot (earliest) or after the head (latest)", one_of(EARLIEST, LATEST)),
        Option(START_SNAPSHOT_ID, START_SNAPSHOT_ID_DEFAULT, "a new checkpoint starts after "
               "this snapshot (exclusive)", or_empty(parse_long)),
        Option(BRANCH, BRANCH_DEFAULT, "follow this branch's head instead of the current "
               "snapshot", str),
        Option(MAX_SNAPSHOTS, MAX_SNAPSHOTS_DEFAULT, "at most this many snapshots per batch "
               "(default: all up to the head)", or_empty(parse_count)),
        Option(CONSUMER_NAME, CONSUMER_NAME_DEFAULT, "register the consumer under this name "
               "(table property sparkext.changelog.consumer.<name>) so maintenance keeps the "
               "snapshots it still needs", parse_consumer_name),
        Option(CONSUMER_TTL, CONSUMER_TTL_DEFAULT, "a registration whose heartbeat is older "
               "than this is stale and protects nothing", durations.parse_ms),
        *CHANGE_OPTIONS,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class BatchInfo:
    """One micro-batch: the changelog of snapshots (start, end] (start None: from the first
    snapshot). ``redelivered``: planned before a restart and delivered again; ``delivered``:
    False when the range held only REPLACE snapshots (compactions), which change no row and
    are committed without calling the consumer."""

    batch_id: int
    start_snapshot_id: int | None
    end_snapshot_id: int
    snapshots: int
    redelivered: bool = False
    delivered: bool = True


class ChangelogStream:
    """A changelog stream over one table and one checkpoint; see :func:`changelog_stream`."""

    def __init__(
        self,
        spark: SparkSession,
        table: str,
        checkpoint: str,
        options: Mapping[str, str] | None = None,
        progress: Callable[[str], None] = lambda message: None,
    ):

        self.spark = spark
        self._options = bind_options(ROUTINE, dict(options or {}))
        self.ref: TableRef = resolve_table(spark, table)
        self.table = self.ref.name
        self._identity = ".".join(self.ref.parts)
        self._location = Location.of(checkpoint)
        self.checkpoint = self._location.uri
        self._file = self._location.child(PROGRESS_FILE)
        self._report = progress
        self._consumer: Callable[[DataFrame, int], Any] | None = None
        self._lock = threading.Lock()  # one batch at a time per handle
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._error: BaseException | None = None
        self._heartbeat_ms = 0
        self.last_batch: BatchInfo | None = None
        self.current_batch: BatchInfo | None = None  # the batch the consumer is working on
        self.batches_delivered = 0
        consumers.refresh(spark, self.table)
        self._progress = self._load_or_create()
        self.register()

    # ---- public -------------------------------------------------------------------------
    @property
    def consumer_name(self) -> str:
        name: str = self._options[CONSUMER_NAME]
        return name

    @property
    def consumed_snapshot_id(self) -> int | None:
        """The last snapshot consumed (None: none yet, from before the first snapshot)."""
        return self._progress.consumed

    def foreach_batch(self, function: Callable[[DataFrame, int], Any]) -> ChangelogStream:
        """Set the consumer: called as ``function(frame, batch_id)`` once per micro-batch (again
        with the same id and rows after a crash before it returned). Returns the stream."""
        self._consumer = function
        return self

    def process_available(self, max_batches: int | None = None) -> list[BatchInfo]:
        """Deliver every change committed up to the head as it is now, in micro-batches (a
        pending batch from before a restart first), then return what was done. Like Spark's
        ``trigger(availableNow=True)``; runs on the calling thread."""
        self._need_consumer()
        until = None
        done: list[BatchInfo] = []
        while max_batches is None or len(done) < max_batches:
            info, until = self._run_once(until)
            if info is None:
                break
            done.append(info)
        return done

    def start(
        self, interval: str = INTERVAL_DEFAULT, available_now: bool = False
    ) -> ChangelogStream:
        """Poll the table every ``interval`` (e.g. ``'30 seconds'``) on a background thread
        and deliver each new range; ``stop()`` ends it, ``await_termination()`` waits for it.
        ``available_now``: deliver what is there now (:meth:`process_available`), then end."""
        self._need_consumer()
        if self.is_active:
            raise SparkextError(f"{self!r} is already started; stop() it first.")
        try:
            every = durations.parse_ms(interval) / 1000
        except ValueError as error:
            raise OptionError(f"interval '{interval}' is invalid: {error}.") from None
        self._stopping.clear()
        self._error = None
        statement = cancellation.current()  # a Ctrl-C of the statement that started it stops it

        def loop() -> None:
            with cancellation.bound(statement):
                try:
                    while not self._stopping.is_set():
                        until = None
                        while not self._stopping.is_set():
                            info, until = self._run_once(until if available_now else None)
                            if info is None:
                                break
                        if available_now:
                            return
                        self._idle_heartbeat()
                        self._wait(every)
                except BaseException as error:
                    self._error = error
                    self._report(f"changelog stream of {self.table} failed: {error}")

        self._thread = threading.Thread(target=loop, name="sparkext-changelog-stream", daemon=True)
        self._thread.start()
        return self

    @property
    def is_active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def exception(self) -> BaseException | None:
        """What stopped a started stream, if it failed."""
        return self._error

    def stop(self) -> None:
        """Stop a started stream after its current batch (the checkpoint stays: a new
        :func:`changelog_stream` on it resumes)."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until a started stream ends (True) or ``timeout`` seconds pass (False); raise
        the failure that ended it. Ctrl-C reaches the caller between short waits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_active:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            assert self._thread is not None
            self._thread.join(0.2)
        if self._error is not None:
            raise self._error
        return True

    def register(self) -> None:
        """Write (or refresh) this consumer's registration; nothing without ``consumer-name``."""
        if not self.consumer_name:
            return

        now = _now_ms()
        registration = Registration(
            name=self.consumer_name,
            snapshot_id=self._progress.consumed,
            heartbeat_ms=now,
            checkpoint=self.checkpoint,
            ttl_ms=self._options[CONSUMER_TTL] or TTL_DEFAULT_MS,
            branch=self._progress.branch,
        )
        try:
            consumers.set_property(self.spark, self.table, registration.key, registration.to_text())
            self._heartbeat_ms = now
        except CommitConflictError as error:  # conservative: the registration only lags
            self._report(str(error))

    def unregister(self) -> bool:
        """Remove this consumer's registration (True when there was one)."""
        if not self.consumer_name:
            return False
        return unregister_changelog_consumer(self.spark, self.table, self.consumer_name)

    def __repr__(self) -> str:
        state = (
            "running"
            if self.is_active
            else "failed"
            if self._error is not None
            else "stopped"
            if self._thread is not None
            else "idle"
        )
        consumer = f", consumer={self.consumer_name!r}" if self.consumer_name else ""
        branch = f", branch={self._progress.branch!r}" if self._progress.branch else ""
        return (
            f"ChangelogStream(table={self.table!r}{branch}, checkpoint={self.checkpoint!r}, "
            f"state={state!r}, consumed_snapshot_id={self._progress.consumed}, "
            f"batches_delivered={self.batches_delivered}{consumer})"
        )

    # ---- the loop -----------------------------------------------------------------------
    def _need_consumer(self) -> None:
        if self._consumer is None:
            raise SparkextError(
                f"{self!r} has no consumer; call foreach_batch(function) with a function of "
                "(frame, batch_id) first."
            )

    def _history(self) -> History:

        consumers.refresh(self.spark, self.table)
        return ChangelogTable(self.spark, self.ref).history()

    def _run_once(self, until: int | None) -> tuple[BatchInfo | None, int | None]:
        """Plan, deliver and commit one micro-batch; (None, …) when there is nothing to do.
        Returns the head it stops at, so "available now" stays what it was at the first call."""

        with self._lock:
            cancellation.raise_if_cancelled()
            history = self._history()
            if until is None:
                until = head_id(history, self._progress.branch)
            step = next_step(
                history, self._progress, self._options[MAX_SNAPSHOTS], self.checkpoint, until
            )
            batch = step.batch
            if batch is None:
                return None, until
            if not step.again:
                self._save(self._progress.plan(batch))  # written before anyone sees its rows
            info = BatchInfo(
                batch.batch_id,
                batch.start_id,
                batch.end_id,
                len(step.snapshots),
                redelivered=step.again,
                delivered=step.changes_rows,
            )
            self.current_batch = info
            if step.changes_rows:
                self._deliver(batch, info)
            self._save(self._progress.commit(batch))
            self.current_batch = None
            self.last_batch = info
            self.register()
            what = "delivered" if info.delivered else "had no row changes (compactions only)"
            again = " again (planned before a restart)" if info.redelivered else ""
            self._report(
                f"changelog {self.table}: batch {batch.batch_id}, snapshots "
                f"({_id(batch.start_id)}, {batch.end_id}], {what}{again}"
            )
            return info, until

    def _deliver(self, batch: PlannedBatch, info: BatchInfo) -> None:

        options = self._options
        frame = changelog(
            self.spark,
            self.ref,
            RangeRequest(start_snapshot_id=batch.start_id, end_snapshot_id=batch.end_id),
            compute_updates=options[COMPUTE_UPDATES],
            identifier_columns=options[IDENTIFIER_COLUMNS],
            net_changes=options[NET_CHANGES],
            progress=self._report,
        )
        cancellation.raise_if_cancelled()
        assert self._consumer is not None
        self._consumer(frame, batch.batch_id)
        self.batches_delivered += 1

    def _idle_heartbeat(self) -> None:
        if self.consumer_name and _now_ms() - self._heartbeat_ms >= min(
            HEARTBEAT_EVERY_MS, (self._options[CONSUMER_TTL] or TTL_DEFAULT_MS) // 4
        ):
            self.register()

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set() and time.monotonic() < deadline:
            cancellation.raise_if_cancelled()
            self._stopping.wait(min(0.2, max(0.0, deadline - time.monotonic())))

    # ---- the checkpoint -----------------------------------------------------------------
    def _save(self, progress: Progress) -> None:
        self._location.make_dirs()
        self._file.write_text(progress.to_text())
        self._progress = progress

    def _load_or_create(self) -> Progress:
        text = self._file.read_text()
        branch = self._options[BRANCH] or None
        if text is not None:
            found = Progress.from_text(text)
            if found.table != self._identity or found.branch != branch:
                on = f" branch {found.branch}" if found.branch else ""
                raise OptionError(
                    f"Checkpoint {self.checkpoint} belongs to the changelog stream of "
                    f"{found.table}{on}, not {self._identity}"
                    f"{' branch ' + branch if branch else ''}; give each stream its own "
                    "checkpoint."
                )
            return found
        history = self._history()
        start = start_position(
            history, branch, self._options[STARTING], self._options[START_SNAPSHOT_ID]
        )
        progress = Progress(self._identity, branch, start)
        self._save(progress)
        return progress


def _id(snapshot_id: int | None) -> str:
    return "start" if snapshot_id is None else str(snapshot_id)


def _now_ms() -> int:
    return int(time.time() * 1000)


def changelog_consumers(spark: SparkSession, table: str) -> ConsumerReport:
    """The table's registered changelog consumers (stale ones marked) and the oldest snapshot
    they still need."""

    ref = resolve_table(spark, table)
    properties = consumers.properties(spark, ref.name)
    history = ChangelogTable(spark, ref).history()
    return consumer_report(history, properties, _now_ms())


def unregister_changelog_consumer(spark: SparkSession, table: str, name: str) -> bool:
    """Remove a consumer's registration (True when there was one)."""

    ref = resolve_table(spark, table)
    return consumers.remove_property(spark, ref.name, consumer_key(name))
