"""One commit layer for every sparkext writer that commits through Iceberg's Java API.

Modelled on pyiceberg's ``table/update/validate.py`` and Iceberg's commit managers. An attempt:

1. opens a transaction on a freshly refreshed table state (the *base*);
2. walks the ancestry from the base back to the snapshot the plan read, raising when that
   snapshot is no longer an ancestor (a rollback, or a commit to another branch);
3. runs the writer's own checks over the snapshots committed since the plan;
4. stages the writer's operations in the transaction (Iceberg's validations run here, against
   the base), stamped with the run id in the snapshot summary;
5. swaps the table from the base to the staged metadata with ONE compare-and-swap
   (``TableOperations.commit(base, staged)``) — no hidden retry in between, so the checks of
   step 3 hold for exactly the state the commit replaces.

A lost race (``CommitFailedException``) discards what the attempt staged and starts over from
step 1, a bounded number of times with back-off. Everything else is told apart by the Java
exception class: a failed validation is a conflict (:class:`CommitConflictError`), an unknown
commit state is :class:`CommitStateUnknownError` and never deletes anything (the commit may have
landed), and any other failure keeps its cause for ``--verbose``. After a commit the new
snapshot's parent is checked to be the base, and Spark's cached plans over the table are
refreshed (as Iceberg's own procedures do).

Around that, the two other things every writer needs, written once here:

* :func:`discard_unless_unknown` — the files a writer wrote for a commit that failed are
  deleted unless the commit state is unknown (then they may be referenced, and stay);
* :func:`swap_property` — a table property read, decided on and replaced with the same single
  compare-and-swap, re-read and re-decided on a lost race (leases, consumer registrations).

Which Java exception means what is decided by :func:`sparkext.iceberg.errors.commit_failure`
alone. Floor: iceberg (the Iceberg Java API, through py4j).
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkext.errors import CommitConflictError, CommitStateUnknownError, SparkextError
from sparkext.iceberg.catalog import load_java_table
from sparkext.iceberg.errors import (
    LOST_RACE,
    UNKNOWN_STATE,
    VALIDATION,
    commit_failure,
    spark_message,
    translate,
)
from sparkext.spark import cancellation
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import string_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RUN_ID = "sparkext.run-id"
RETRIES_DEFAULT = 8  # ~25 s of back-off in all: a busy table (a service's lease and rewrites)
_BACKOFF_MIN_S = 0.1
_BACKOFF_MAX_S = 5.0


def new_run_id() -> str:
    """A fresh id that tags the snapshot one write makes (``sparkext.run-id`` in its summary)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class SnapshotInfo:
    """A committed snapshot as the writers' checks see it (no JavaObjects outside this package)."""

    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    operation: str | None
    summary: Mapping[str, str]


class Attempt:
    """One try at a commit, handed to the writer's ``check`` and ``build`` functions.

    ``table`` is the transaction's table (a JavaObject: only code of this package touches it);
    ``java_since_plan`` the snapshots committed after the planned one, oldest first.
    """

    def __init__(self, txn: Any, since_plan: list[Any], summary: Mapping[str, str]):
        self.txn = txn
        self.table = txn.table()
        self.java_since_plan = since_plan
        self._summary = dict(summary)

    def update_summary(self, values: Mapping[str, str]) -> None:
        """Change summary properties for this attempt (values that depend on the base)."""
        self._summary.update(values)

    def stamp(self, operation: Any) -> Any:
        """Set the run's summary properties on a snapshot-producing operation."""
        for key, value in self._summary.items():
            operation = operation.set(key, value)
        return operation


def _info(snapshot: Any) -> SnapshotInfo:
    parent = snapshot.parentId()
    operation = snapshot.operation()
    return SnapshotInfo(
        snapshot_id=int(snapshot.snapshotId()),
        parent_id=int(parent) if parent is not None else None,
        sequence_number=int(snapshot.sequenceNumber()),
        operation=str(operation) if operation is not None else None,
        summary=string_map(snapshot.summary()),
    )


def ancestors_between(metadata: Any, newest_id: int | None, oldest_exclusive: int | None):
    """Snapshots from ``newest_id`` back to (not including) ``oldest_exclusive``, newest first.

    Raises :class:`CommitConflictError` when ``oldest_exclusive`` is not an ancestor of
    ``newest_id`` (the walk reached the root or an expired parent without meeting it): the table
    was rolled back, or the planned snapshot belongs to another branch. ``oldest_exclusive=None``
    (the plan read an empty table) walks to the root.
    """
    chain = []
    current = newest_id
    while current is not None and current != oldest_exclusive:
        snapshot = metadata.snapshot(current)
        if snapshot is None:
            break
        chain.append(snapshot)
        parent = snapshot.parentId()
        current = int(parent) if parent is not None else None
    if oldest_exclusive is not None and current != oldest_exclusive:
        raise _NotAnAncestor(oldest_exclusive)
    return chain


class _NotAnAncestor(Exception):
    def __init__(self, snapshot_id: int):
        super().__init__(snapshot_id)
        self.snapshot_id = snapshot_id


@dataclass
class CommitRequest:
    """What a writer asks the commit layer to do.

    ``build`` stages the operations in ``attempt.txn`` (calling ``commit()`` on each pending
    update, after ``attempt.stamp``); ``check`` raises :class:`CommitConflictError` when a
    snapshot committed since the plan makes this commit wrong. Both may run several times.
    ``what`` names the change for error sentences ("this batch", "the conversion").
    """

    table_name: str
    planned_snapshot_id: int | None
    build: Callable[[Attempt], None]
    what: str
    rerun_hint: str
    check: Callable[[Attempt], None] = lambda attempt: None
    summary: Mapping[str, str] = field(default_factory=dict)
    run_id: str = field(default_factory=new_run_id)
    retries: int = RETRIES_DEFAULT
    ref: str | None = None  # a tag or branch whose snapshot the commit reports (None: main)


@dataclass(frozen=True)
class Committed:
    snapshot_id: int
    run_id: str
    attempts: int


def commit(spark: SparkSession, java_table: Any, request: CommitRequest) -> Committed:
    """Commit ``request`` to ``java_table`` (see the module docstring); return the new snapshot."""
    jvm = jvm_of(spark)
    ops = java_table.operations()
    summary = {**request.summary, RUN_ID: request.run_id}
    last_race: BaseException | None = None
    for attempt_number in range(1, request.retries + 2):
        txn = jvm.org.apache.iceberg.Transactions.newTransaction(request.table_name, ops)
        base = txn.startMetadata()
        base_current = base.currentSnapshot()
        base_id = int(base_current.snapshotId()) if base_current is not None else None
        try:
            since = ancestors_between(base, base_id, request.planned_snapshot_id)
        except _NotAnAncestor as missing:
            raise CommitConflictError(
                f"Snapshot {missing.snapshot_id} that {request.what} was planned from is no "
                f"longer an ancestor of {request.table_name}'s current state (rolled back, or "
                f"replaced); nothing was committed: {request.rerun_hint}."
            ) from None
        since.reverse()
        attempt = Attempt(txn, since, summary)
        request.check(attempt)
        try:
            request.build(attempt)
        except Exception as error:
            raise _classified(error, request) from error
        staged = txn.currentMetadata()
        try:
            cancellation.raise_if_cancelled()  # Ctrl-C: the last moment nothing has changed
        except cancellation.StatementCancelled:
            _discard_staged(ops, base, staged)  # definitely not committed: nothing is left
            raise
        try:
            _swap(ops, base, staged)
        except Exception as error:
            if commit_failure(error) == LOST_RACE:
                _discard_staged(ops, base, staged)  # definitely not committed
                last_race = error
                _sleep(attempt_number)
                continue
            # Anything else from the swap (a dropped connection after the catalog's update, a
            # 5xx) may have landed: unknown, like Iceberg's own non-cleanable failures, so no
            # caller deletes the files the commit may now reference.
            raise _unknown(error, request) from error
        if request.ref is None:
            snapshot_id = int(staged.currentSnapshot().snapshotId())
        else:
            snapshot_id = int(staged.ref(request.ref).snapshotId())
        cancellation.record_commit(request.table_name, snapshot_id, request.what)
        with contextlib.suppress(Exception):  # the commit landed: a failed refresh changes nothing
            java_table.refresh()
        refresh_spark_cache(spark, request.table_name)
        return Committed(snapshot_id, request.run_id, attempt_number)
    raise CommitConflictError(
        f"Other writers kept committing to {request.table_name} while {request.what} was being "
        f"committed ({request.retries + 1} attempts); nothing was committed: "
        f"{request.rerun_hint}."
    ) from last_race


def _swap(ops: Any, base: Any, staged: Any) -> None:
    """The one atomic step of a snapshot commit (tests stand in for it to lose races)."""
    _compare_and_swap(ops, base, staged)


def _compare_and_swap(ops: Any, base: Any, staged: Any) -> None:
    """The one atomic step: the catalog moves the table from ``base`` to ``staged`` or refuses.

    Shared by snapshot commits (through :func:`_swap`) and property swaps; kept apart from
    ``_swap`` so a test that makes data commits lose does not also take away a run's lease.
    """
    with _local_swap_lock(ops, base):
        ops.commit(base, staged)


@contextlib.contextmanager
def _local_swap_lock(ops: Any, base: Any) -> Iterator[None]:
    """Serialise swaps of a Hadoop-catalog table on a local disk across processes.

    Iceberg's Hadoop tables commit by "if version N+1 does not exist, rename to it", guarded by
    an in-JVM lock only; on a local file system the rename silently replaces a file another
    process renamed there a moment before, and that process's commit is lost. An exclusive
    ``flock`` on ``metadata/.sparkext-commit.lock`` makes check-and-rename atomic for every
    sparkext process (the embedded default catalog); catalogs with a real compare-and-swap
    (Hive, REST, JDBC, Glue, Nessie) are not touched.
    """
    location = str(base.metadataFileLocation() or "") if base is not None else ""
    kind = str(ops.getClass().getSimpleName())
    if kind != "HadoopTableOperations" or not location.startswith(("file:", "/")):
        yield
        return
    import fcntl
    import os
    from urllib.parse import urlparse

    directory = os.path.dirname(urlparse(location).path if "://" in location else location)
    if location.startswith("file:") and "://" not in location:
        directory = os.path.dirname(location[len("file:") :])
    with open(os.path.join(directory, ".sparkext-commit.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _classified(error: BaseException, request: CommitRequest) -> BaseException:
    """The one sentence for an error raised while staging or committing."""
    if isinstance(error, SparkextError):
        return error
    failure = commit_failure(error)
    message = spark_message(error) or str(error)
    if failure == UNKNOWN_STATE:
        return _unknown(error, request)
    if failure in (VALIDATION, LOST_RACE):
        return CommitConflictError(
            f"Another writer changed {request.table_name} in a way that conflicts with "
            f"{request.what} ({message}); nothing was committed: {request.rerun_hint}."
        )
    return translate(error) or error


def _unknown(error: BaseException, request: CommitRequest) -> CommitStateUnknownError:
    message = spark_message(error)
    if message is None:
        lines = str(error).strip().splitlines()
        message = lines[0] if lines else type(error).__name__
    return CommitStateUnknownError(
        f"The catalog could not say whether {request.what} was committed to "
        f"{request.table_name} ({message}); no file was deleted: look for snapshot "
        f"property {RUN_ID} = '{request.run_id}' in {request.table_name}'s snapshots "
        "before running again."
    )


def _sleep(attempt_number: int) -> None:
    delay = min(_BACKOFF_MAX_S, _BACKOFF_MIN_S * 2 ** (attempt_number - 1))
    time.sleep(delay * (0.5 + random.random()))


def _discard_staged(ops: Any, base: Any, staged: Any) -> None:
    """Delete the manifest lists and manifests an attempt wrote that no commit references.

    Only after a definite failure (the catalog refused the swap): the staged snapshots are not
    in the table, and the manifests written for them carry their snapshot id.
    """
    import contextlib

    io = ops.io()
    known = {int(s.snapshotId()) for s in _iterate(base.snapshots())}
    for snapshot in _iterate(staged.snapshots()):
        snapshot_id = int(snapshot.snapshotId())
        if snapshot_id in known:
            continue
        with contextlib.suppress(Exception):  # a leftover is an orphan, never a corruption
            for manifest in _iterate(snapshot.allManifests(io)):
                if manifest.snapshotId() is not None and int(manifest.snapshotId()) == snapshot_id:
                    io.deleteFile(manifest.path())
            io.deleteFile(snapshot.manifestListLocation())


def refresh_spark_cache(spark: SparkSession, table_name: str) -> None:
    """Re-cache Spark's cached plans that read ``table_name`` (``CACHE TABLE`` and friends)."""
    import contextlib

    with contextlib.suppress(Exception):  # a cache refresh must never fail a commit
        session = spark._jsparkSession
        plan = session.table(table_name).queryExecution().analyzed()
        while plan.getClass().getSimpleName() == "SubqueryAlias":
            plan = plan.child()
        session.sharedState().cacheManager().recacheByPlan(session, plan)


def snapshot_with_run_id(
    spark: SparkSession, table_name: str, run_id: str, limit: int = 1000
) -> int | None:
    """The snapshot of the current ancestry whose summary carries ``run_id`` (a Spark write's)."""

    table = load_java_table(spark, table_name)
    table.refresh()
    snapshot = table.currentSnapshot()
    seen = 0
    while snapshot is not None and seen < limit:
        if str(snapshot.summary().get(RUN_ID)) == run_id:
            return int(snapshot.snapshotId())
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
        seen += 1
    return None


def snapshot_facts(spark: SparkSession, table_name: str, snapshot_id: int) -> SnapshotInfo:
    """Summary and ids of one snapshot, from table metadata."""

    return _info(load_java_table(spark, table_name).snapshot(snapshot_id))


@contextlib.contextmanager
def discard_unless_unknown(
    discard: Callable[[], object], table_name: str, what: str
) -> Iterator[None]:
    """Run a commit attempt; when it fails, delete what it wrote unless the state is unknown.

    The one policy of every writer that writes files before it commits them. ``discard``
    deletes the attempt's files (best effort: a leftover is an orphan, and never hides the
    error that led here). A failure whose commit state is unknown keeps them — the commit may
    have landed and reference them — and raises :class:`CommitStateUnknownError`, whose
    sentence says nothing was deleted. Any other failure definitely committed nothing: the
    files go, and the error is raised as sparkext's translation (a Java or Spark error as one
    sentence, its cause chained for ``--verbose``; sparkext and plain Python errors as
    themselves). Only ``Exception`` counts as a failure: a ``KeyboardInterrupt`` mid-swap
    leaves the state unknown, so nothing is deleted for it.
    """
    try:
        yield
    except CommitStateUnknownError:
        raise  # the commit layer's sentence already says no file was deleted
    except Exception as error:
        if not isinstance(error, SparkextError) and commit_failure(error) == UNKNOWN_STATE:
            message = spark_message(error) or type(error).__name__
            raise CommitStateUnknownError(
                f"The catalog could not say whether {what} was committed to {table_name} "
                f"({message}); no file was deleted: check {table_name}'s snapshots before "
                "running again."
            ) from error
        with contextlib.suppress(Exception):
            discard()
        translated = None if isinstance(error, SparkextError) else translate(error)
        if translated is None:
            raise
        raise translated from error


def delete_files(java_table: Any, paths: Iterable[str]) -> int:
    """Delete ``paths`` through the table's FileIO, best effort; return how many went.

    For files a writer wrote for a commit that definitely did not land (see
    :func:`discard_unless_unknown`): an orphan left behind is harmless, so no failure here
    is raised over the error that led to the discard.
    """
    deleted = 0
    with contextlib.suppress(Exception):
        io = java_table.io()
        for path in sorted(set(paths)):
            with contextlib.suppress(Exception):
                io.deleteFile(path)
                deleted += 1
    return deleted


PROPERTY_ROUNDS = 8


@dataclass(frozen=True)
class PropertyChange:
    """What a :func:`swap_property` decision asks for: ``value`` None removes the property."""

    value: str | None


@dataclass(frozen=True)
class PropertySwap:
    """The outcome of :func:`swap_property`.

    ``previous`` is the value the last decision was made on (read from the base the swap
    replaced, when ``changed``); ``value`` the property's value after the call as far as this
    writer knows; ``attempts`` how many reads it took (lost races plus one).
    """

    key: str
    previous: str | None
    value: str | None
    changed: bool
    attempts: int


def _property_pause_s(round_number: int) -> float:
    return min(2.0, 0.1 * 2**round_number) * (0.5 + random.random())


def swap_property(
    spark: SparkSession,
    java_table: Any,
    table_name: str,
    key: str,
    decide: Callable[[str | None], PropertyChange | None],
    what: str,
    then: str,
    rounds: int = PROPERTY_ROUNDS,
    pause_s: Callable[[int], float] = _property_pause_s,
) -> PropertySwap:
    """Compare-and-swap table property ``key``: read it, ``decide`` on it, swap ONE change.

    ``decide(current)`` returns the change to make, or None to leave the property as it is (the
    call then returns at once, ``changed`` False). The change is staged with Iceberg's
    ``UpdateProperties`` in a transaction on the base just read, and swapped in with the same
    single ``TableOperations.commit(base, staged)`` as a data commit: when another commit
    landed in between, the swap is refused and the property is read and decided on again —
    never re-applied blindly (Iceberg's own ``UpdateProperties.commit()`` would re-apply it on
    the new metadata, overwriting a lease someone else just took). After ``rounds`` lost
    races :class:`CommitConflictError` says so in one sentence ("Could not update ``what`` of
    the table: ... ; ``then``."). Any other failure is raised as sparkext's translation.
    A property change is a metadata commit, not a snapshot: data writers that lose a race to
    it retry as for any other commit.
    """
    jvm = jvm_of(spark)
    ops = java_table.operations()
    for round_number in range(1, rounds + 1):
        ops.refresh()
        txn = jvm.org.apache.iceberg.Transactions.newTransaction(table_name, ops)
        base = txn.startMetadata()
        found = base.properties().get(key)
        current = str(found) if found is not None else None
        change = decide(current)
        if change is None:
            return PropertySwap(key, current, current, False, round_number)
        update = txn.updateProperties()
        update = update.remove(key) if change.value is None else update.set(key, change.value)
        update.commit()  # staged in the transaction only: nothing reaches the catalog here
        try:
            _compare_and_swap(ops, base, txn.currentMetadata())
        except Exception as error:
            if commit_failure(error) != LOST_RACE:
                translated = None if isinstance(error, SparkextError) else translate(error)
                if translated is None:
                    raise
                raise translated from error
            if round_number < rounds:
                time.sleep(pause_s(round_number))
            continue
        return PropertySwap(key, current, change.value, True, round_number)
    raise CommitConflictError(
        f"Could not update {what} of {table_name}: other commits kept winning the race "
        f"{rounds} times; {then}."
    ) from None
