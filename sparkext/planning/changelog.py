"""Plan an incremental changelog of an Iceberg table: the range, then what to read per snapshot.

Pure Python over snapshot metadata (no pyspark, no py4j), so every rule is unit-tested in
milliseconds. The Iceberg side (:mod:`sparkext.iceberg.changelog`) supplies the facts and runs the
reads; the runner (:mod:`sparkext.actions.history.changelog`) turns the rows into changes.

**Range.** Start exclusive, end inclusive, along the end's ancestry (parent links from the end
back to the start), as Iceberg's ``create_changelog_view``. Each end is a snapshot id, a tag or
branch, or a time (Iceberg's ``start-timestamp``/``end-timestamp``: the snapshot that was current
then, i.e. the newest ancestor committed at or before it). The end defaults to the current
snapshot, the start to "before the first snapshot". Every snapshot of the range and the start
must still be retained. REPLACE snapshots (compaction, delete-file rewrites) change no row: they
are walked through but get no change ordinal, exactly as in Iceberg.

**Reads, per snapshot S with parent P** (a data file is read through Iceberg's own reader with
the delete files Iceberg's planning gives it, or "as written" with none):

* ``ADDED``: files added in S, as written: their rows are INSERTs;
* ``BEFORE``: files removed in S, and files live at P that a delete file added in S applies to:
  their rows live at P (P's deletes applied) are the candidates for DELETE;
* ``AFTER``: those affected files, and files added in S that a delete added in S applies to:
  their positions live at S. A candidate not live at S is a DELETE; an added row not live at S was
  inserted and deleted within S (a transient: both an INSERT and a DELETE).

Reads of the same kind over different files share one scan (:func:`pack`), so a range of many
snapshots costs a few scans, not three per snapshot.

**Equality runs** (:func:`plan_reads`). A snapshot whose only deletes are equality deletes, that
removes no data file and whose deletes reach none of its own files (``ingest_cdc`` batches, Flink
upserts) deletes exactly the rows live at its parent whose equality columns match a row of one of
its delete files that Iceberg's planning applies to the row's file. For a run of consecutive such
snapshots, each data file they reach is read ONCE (``CANDIDATE``: its rows live at the parent of
the first snapshot of the run that reaches it) instead of twice per snapshot, and files added
inside the run are not read again at all: their ``ADDED`` rows are candidates too. A candidate is
deleted by the first of the run's delete files that applies to its file (Iceberg's rule: same
partition spec and partition, or a global delete; every delete of the run after the file's state is
newer than its rows), numbered in commit order and within the read's :attr:`FileRead.reach`, that
holds a row matching it (:class:`KeyDelete`); nothing else in a run can delete it, and REPLACE
snapshots between change no row (the reach of a file they remove ends there; its rows' new file is
read instead, as a candidate of the next delete reaching it). Delete files are read through
Iceberg's reader (by field id) and matched on the current names of their equality columns, so a
file is used this way only when those columns kept their names and types since it was written (else
the snapshot takes the general reads).

Assumed, as Iceberg's writers do: a commit that replaces a data file's delete files (a v3
deletion vector merged with the new positions, v2 file-scoped position deletes rewritten) keeps
every position they deleted. A commit that dropped deletes to bring rows back would not show
those rows as INSERTs.

Floor: planning (pure). Over 600 lines on purpose: the range resolution, the per-snapshot read
sets and the equality-run plan are one algebra over the same snapshot facts, tested together.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparkext import times
from sparkext.errors import ProcedureArgumentError

REPLACE = "replace"
# Iceberg's snapshot-summary keys (SnapshotSummary); a key a writer left out counts as "maybe".
ADDED_DATA_FILES = "added-data-files"
DELETED_DATA_FILES = "deleted-data-files"
ADDED_DELETE_FILES = "added-delete-files"
ADDED_DVS = "added-dvs"
TOTAL_DELETE_FILES = "total-delete-files"
TOTAL_DATA_FILES = "total-data-files"

_WHOLE_NUMBER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class SnapshotMeta:
    """One retained snapshot: ids, commit time, operation and summary (metadata only)."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None
    summary: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_replace(self) -> bool:
        return self.operation == REPLACE

    def count(self, key: str) -> int | None:
        """A summary count, ``None`` when the writer did not record it."""
        value = self.summary.get(key)
        return int(value) if value is not None and _WHOLE_NUMBER.fullmatch(value) else None

    def may(self, *keys: str) -> bool:
        """Whether any of these summary counts is non-zero or unknown. Iceberg's writers leave
        a zero count out but always write the totals; without totals nothing is known."""
        known = TOTAL_DATA_FILES in self.summary
        return any(self.count(k) != 0 if k in self.summary else not known for k in keys)


@dataclass(frozen=True)
class Ref:
    name: str
    snapshot_id: int
    is_branch: bool


@dataclass(frozen=True)
class History:
    """A table's retained snapshots, refs and current snapshot, as the planner sees them."""

    table: str
    snapshots: Mapping[int, SnapshotMeta]
    refs: Mapping[str, Ref] = field(default_factory=dict)
    current_snapshot_id: int | None = None

    def ancestors(self, snapshot_id: int) -> list[SnapshotMeta]:
        """``snapshot_id`` and its retained ancestors, newest first."""
        chain: list[SnapshotMeta] = []
        current = self.snapshots.get(snapshot_id)
        while current is not None:
            chain.append(current)
            parent = current.parent_id
            current = self.snapshots.get(parent) if parent is not None else None
        return chain

    def expired(self, snapshot_id: int) -> bool:
        """Known to have existed (a retained snapshot's parent) but no longer retained."""
        return snapshot_id not in self.snapshots and any(
            s.parent_id == snapshot_id for s in self.snapshots.values()
        )


@dataclass(frozen=True)
class Bound:
    """One end of the range as the user named it; ``written`` is how, for messages."""

    written: str
    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Change:
    """A snapshot of the range that can change rows, with its change ordinal."""

    ordinal: int
    snapshot: SnapshotMeta
    parent: SnapshotMeta | None  # None: the table's first snapshot


@dataclass(frozen=True)
class ChangelogRange:
    start_id: int | None  # exclusive; None: before the first snapshot
    end_id: int | None  # inclusive; None: the range is empty
    snapshots: tuple[SnapshotMeta, ...]  # (start, end], oldest first, REPLACE ones included
    changes: tuple[Change, ...]  # the non-REPLACE ones, with ordinals 0, 1, ...


def parse_bound(text: str, what: str, refs: Mapping[str, Ref], zone: dt.tzinfo) -> Bound:
    """A ``start``/``end`` argument: a tag or branch name, a snapshot id, or a time.

    A time is a wall clock in the session time zone (``2026-11-21 08:00:00``, ``2026-11-21``)
    or carries its offset (``2026-11-21T08:00:00+08:00``).

    >>> utc = dt.timezone.utc
    >>> parse_bound("42", "start", {}, utc).snapshot_id
    42
    >>> parse_bound("1970-01-01 00:00:01", "end", {}, utc).timestamp_ms
    1000
    >>> parse_bound("v1", "end", {"v1": Ref("v1", 7, False)}, utc).ref
    'v1'
    """
    written = f"{what} => '{text}'"
    name = text.strip()
    if name in refs:
        return Bound(written, ref=name)
    if _WHOLE_NUMBER.fullmatch(name):
        return Bound(written, snapshot_id=int(name))
    try:
        when = dt.datetime.fromisoformat(name)
    except ValueError:
        known = ", ".join(sorted(refs)) or "none"
        raise ProcedureArgumentError(
            f"The changelog {what} '{text}' is neither a snapshot id, a tag or branch (this "
            f"table has: {known}) nor a time; write a snapshot id such as 5837411, a ref name, "
            "or a time such as '2026-11-21 08:00:00'."
        ) from None
    return Bound(written, timestamp_ms=times.to_millis(when, zone))


def option_bound(key: str, value: int, is_time: bool) -> Bound:
    """A bound from Iceberg's read options: ``start-snapshot-id`` or ``start-timestamp`` (ms)."""
    written = f"option '{key}' = '{value}'"
    return Bound(written, timestamp_ms=value) if is_time else Bound(written, snapshot_id=value)


def one_bound(what: str, bounds: Sequence[Bound | None]) -> Bound | None:
    """The one way an end was given; two ways (a parameter and an option) is an error.

    >>> one_bound("start", [None, Bound("x", snapshot_id=1)]).snapshot_id
    1
    """
    given = [b for b in bounds if b is not None]
    if len(given) > 1:
        raise ProcedureArgumentError(
            f"The changelog {what} is given twice ({given[0].written} and {given[1].written}); "
            "keep one."
        )
    return given[0] if given else None


@dataclass(frozen=True)
class RangeRequest:
    """The range as given: ``start``/``end`` arguments and Iceberg's read options."""

    start: str | None = None
    end: str | None = None
    start_snapshot_id: int | None = None
    end_snapshot_id: int | None = None
    start_timestamp_ms: int | None = None
    end_timestamp_ms: int | None = None


def bounds(
    request: RangeRequest, refs: Mapping[str, Ref], zone: dt.tzinfo
) -> tuple[Bound | None, Bound | None]:
    """The start and end bounds, each given at most once (an argument or an option).

    >>> start, end = bounds(RangeRequest(start="3", end_timestamp_ms=9), {}, dt.timezone.utc)
    >>> start.snapshot_id, end.timestamp_ms
    (3, 9)
    """
    given = {
        "start": [
            parse_bound(request.start, "start", refs, zone) if request.start else None,
            _option("start-snapshot-id", request.start_snapshot_id, False),
            _option("start-timestamp", request.start_timestamp_ms, True),
        ],
        "end": [
            parse_bound(request.end, "end", refs, zone) if request.end else None,
            _option("end-snapshot-id", request.end_snapshot_id, False),
            _option("end-timestamp", request.end_timestamp_ms, True),
        ],
    }
    return one_bound("start", given["start"]), one_bound("end", given["end"])


def _option(key: str, value: int | None, is_time: bool) -> Bound | None:
    return None if value is None else option_bound(key, value, is_time)


def resolve_range(history: History, start: Bound | None, end: Bound | None) -> ChangelogRange:
    """The snapshots in (start, end] along the end's ancestry, with change ordinals.

    >>> h = History("t", {1: SnapshotMeta(1, None, 10, "append"),
    ...                   2: SnapshotMeta(2, 1, 20, "replace"),
    ...                   3: SnapshotMeta(3, 2, 30, "overwrite")}, current_snapshot_id=3)
    >>> r = resolve_range(h, None, None)
    >>> [s.snapshot_id for s in r.snapshots]
    [1, 2, 3]
    >>> [(c.ordinal, c.snapshot.snapshot_id) for c in r.changes]
    [(0, 1), (1, 3)]
    >>> later = resolve_range(h, Bound("s", timestamp_ms=25), None)
    >>> later.start_id, [c.snapshot.snapshot_id for c in later.changes]
    (2, [3])
    """
    if (
        start
        and end
        and start.timestamp_ms is not None
        and end.timestamp_ms is not None
        and start.timestamp_ms >= end.timestamp_ms
    ):
        raise ProcedureArgumentError(
            f"The changelog start ({start.written}) is not before its end ({end.written}); "
            "give a start time earlier than the end time."
        )
    end_id = resolve_end(history, end)
    if end_id is None:
        return ChangelogRange(None, None, (), ())
    chain = history.ancestors(end_id)  # newest first
    start_id = _resolve_start(history, start, chain)
    if start_id == end_id:
        return ChangelogRange(start_id, end_id, (), ())
    taken: list[SnapshotMeta] = []
    for snapshot in chain:
        if start_id is not None and snapshot.snapshot_id == start_id:
            break
        taken.append(snapshot)
    else:
        _check_chain_reaches(history, chain, start_id, start, end_id)
    taken.reverse()
    by_id = history.snapshots
    changes: list[Change] = []
    for snapshot in taken:
        if snapshot.is_replace:
            continue
        parent = by_id.get(snapshot.parent_id) if snapshot.parent_id is not None else None
        changes.append(Change(len(changes), snapshot, parent))
    return ChangelogRange(start_id, end_id, tuple(taken), tuple(changes))


def _lookup(history: History, bound: Bound, what: str) -> int:
    """The snapshot id a ref or id bound names, which must be retained."""
    if bound.ref is not None:
        return history.refs[bound.ref].snapshot_id
    assert bound.snapshot_id is not None
    snapshot_id = bound.snapshot_id
    if snapshot_id in history.snapshots:
        return snapshot_id
    if history.expired(snapshot_id):
        raise ProcedureArgumentError(
            f"Snapshot {snapshot_id} of {history.table} ({bound.written}) has expired; "
            f"choose a changelog {what} among the retained snapshots "
            f"(SELECT snapshot_id, committed_at FROM {history.table}.snapshots)."
        )
    raise ProcedureArgumentError(
        f"Snapshot {snapshot_id} ({bound.written}) is not a snapshot of {history.table}; list "
        f"them with SELECT snapshot_id, committed_at FROM {history.table}.snapshots."
    )


def resolve_end(history: History, end: Bound | None) -> int | None:
    """The snapshot an end bound names (Iceberg's rule for a time: the newest ancestor of the
    current snapshot committed at or before it); ``None`` when there is none."""
    if end is None:
        return history.current_snapshot_id
    if end.timestamp_ms is None:
        return _lookup(history, end, "end")
    # Iceberg: the newest ancestor of the current snapshot committed at or before the time
    current = history.current_snapshot_id
    chain = history.ancestors(current) if current is not None else []
    return next((s.snapshot_id for s in chain if s.timestamp_ms <= end.timestamp_ms), None)


def _resolve_start(
    history: History, start: Bound | None, chain: Sequence[SnapshotMeta]
) -> int | None:
    if start is None:
        return None
    if start.timestamp_ms is None:
        return _lookup(history, start, "start")
    at = start.timestamp_ms
    found = next((s for s in chain if s.timestamp_ms <= at), None)
    if found is not None:
        return found.snapshot_id
    oldest = chain[-1] if chain else None
    if oldest is not None and oldest.parent_id is not None:
        raise ProcedureArgumentError(
            f"The snapshots of {history.table} current at {start.written} have expired (the "
            f"oldest retained ancestor, {oldest.snapshot_id}, is newer); start at a later time "
            f"or at snapshot {oldest.snapshot_id}."
        )
    return None  # before the first snapshot


def _check_chain_reaches(
    history: History,
    chain: Sequence[SnapshotMeta],
    start_id: int | None,
    start: Bound | None,
    end_id: int,
) -> None:
    """The walk from the end ran out of retained parents before reaching the start."""
    oldest = chain[-1]
    if start_id is None:
        if oldest.parent_id is None:
            return  # reached the table's first snapshot: the whole history
        raise ProcedureArgumentError(
            f"The history of {history.table} before snapshot {oldest.snapshot_id} has expired, "
            f"so a changelog from the beginning cannot be read; give a start at or after "
            f"snapshot {oldest.snapshot_id}."
        )
    assert start is not None
    if oldest.parent_id is not None:  # the walk stopped at an expired parent
        raise ProcedureArgumentError(
            f"Snapshot {start_id} ({start.written}) is not a retained ancestor of the end "
            f"snapshot {end_id} of {history.table}: the end's history is retained back to "
            f"snapshot {oldest.snapshot_id} only; start at or after it."
        )
    raise ProcedureArgumentError(
        f"Snapshot {start_id} ({start.written}) is not an ancestor of the end snapshot {end_id} "
        f"of {history.table}; choose a start on the end's history (SELECT * FROM "
        f"{history.table}.history)."
    )


class Role(enum.Enum):
    ADDED = "added"  # rows as written: INSERTs
    BEFORE = "before"  # rows live at the parent: DELETE candidates
    AFTER = "after"  # positions live at the snapshot
    CANDIDATE = "candidate"  # rows live at the parent, matched with an equality run's deletes


@dataclass(frozen=True)
class Needs:
    """Which file facts a snapshot needs from the manifests (decided from its summary)."""

    added: bool  # list the data files it added
    removed: bool  # list the data files it removed
    deletes: bool  # it added delete files: plan it to find the data files they apply to
    parent_deletes: bool  # the parent has delete files: rows live there need planning


def needs(change: Change) -> Needs:
    """What to look up for one snapshot; a summary count a writer left out counts as "maybe".

    >>> s = SnapshotMeta(2, 1, 0, "append", {"added-data-files": "1", "total-data-files": "2"})
    >>> p = SnapshotMeta(1, None, 0, "append", {"total-data-files": "1", "total-delete-files": "0"})
    >>> needs(Change(0, s, p))
    Needs(added=True, removed=False, deletes=False, parent_deletes=False)
    """
    snapshot, parent = change.snapshot, change.parent
    return Needs(
        added=snapshot.may(ADDED_DATA_FILES),
        removed=snapshot.may(DELETED_DATA_FILES),
        deletes=snapshot.may(ADDED_DELETE_FILES, ADDED_DVS),
        parent_deletes=parent is not None and parent.may(TOTAL_DELETE_FILES),
    )


@dataclass(frozen=True)
class SnapshotFiles:
    """Data files one snapshot touches, by path (from its manifests and Iceberg's planning)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    affected: tuple[str, ...] = ()  # live at the parent; a delete added here applies to them
    added_with_deletes: tuple[str, ...] = ()  # added here; a delete added here applies to them
    # the delete files added here, when every one is an equality delete (else empty)
    equality_deletes: tuple[EqualityDelete, ...] = ()


@dataclass(frozen=True)
class EqualityDelete:
    """An equality-delete file and the current names of its equality columns (``None`` when
    one was renamed or retyped since it was written: it cannot be matched by name)."""

    path: str
    columns: tuple[str, ...] | None


@dataclass(frozen=True)
class FileRead:
    """One data file to read for one snapshot's changes."""

    path: str
    role: Role
    ordinal: int
    snapshot_id: int
    timestamp_ms: int
    deletes_at: int | None  # apply the deletes Iceberg plans at this snapshot; None: as written
    checked: bool = False  # ADDED: an AFTER read says which of its rows survive the snapshot
    # CANDIDATE, or ADDED in an equality run: the numbers (first, last) of the run's equality
    # deletes that may delete its rows (after the read's state, while the file is live); which
    # of them apply is Iceberg's partition rule (:attr:`KeyDelete` numbers are in commit order)
    reach: tuple[int, int] | None = None


def file_reads(change: Change, files: SnapshotFiles, parent_deletes: bool) -> list[FileRead]:
    """The reads that give one snapshot's changes.

    >>> s = SnapshotMeta(5, 4, 50, "overwrite")
    >>> reads = file_reads(Change(0, s, SnapshotMeta(4, None, 40, "append")),
    ...                    SnapshotFiles(added=("n",), affected=("f",)), parent_deletes=False)
    >>> [(r.path, r.role.value, r.deletes_at) for r in reads]
    [('n', 'added', None), ('f', 'before', None), ('f', 'after', 5)]
    """
    snapshot = change.snapshot
    sid = snapshot.snapshot_id
    parent_id = change.parent.snapshot_id if change.parent is not None else None
    with_deletes = set(files.added_with_deletes)

    def read(path: str, role: Role, deletes_at: int | None, checked: bool = False) -> FileRead:
        return FileRead(path, role, change.ordinal, sid, snapshot.timestamp_ms, deletes_at, checked)

    reads = [read(p, Role.ADDED, None, p in with_deletes) for p in files.added]
    before_at = parent_id if parent_deletes else None
    reads += [read(p, Role.BEFORE, before_at) for p in _unique((*files.removed, *files.affected))]
    reads += [
        read(p, Role.AFTER, sid) for p in _unique((*files.affected, *files.added_with_deletes))
    ]
    return reads


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))


@dataclass(frozen=True)
class KeyDelete:
    """An equality-delete file of an equality run, numbered in commit order: its rows delete
    the matching candidate rows of the data files it reaches (:attr:`FileRead.reached_by`)."""

    number: int
    path: str
    columns: tuple[str, ...]
    ordinal: int
    snapshot_id: int
    timestamp_ms: int


@dataclass(frozen=True)
class ReadPlan:
    reads: tuple[FileRead, ...]
    key_deletes: tuple[KeyDelete, ...] = ()


def equality_only(files: SnapshotFiles) -> bool:
    """Whether a snapshot's deletes can be matched by key (see "Equality runs" above).

    >>> files = SnapshotFiles(added=("n",), affected=("f",),
    ...                       equality_deletes=(EqualityDelete("d", ("id",)),))
    >>> equality_only(files), equality_only(SnapshotFiles(affected=("f",)))
    (True, False)
    """
    return (
        bool(files.equality_deletes)
        and all(d.columns for d in files.equality_deletes)
        and not files.removed
        and not files.added_with_deletes
    )


def plan_reads(
    changes: Sequence[Change],
    files: Mapping[int, SnapshotFiles],
    parent_deletes: Mapping[int, bool],
    removed_after: Mapping[int, frozenset[str]] | None = None,
) -> ReadPlan:
    """The reads (and numbered equality deletes) for a range: equality runs read each file they
    reach once, every other snapshot gets :func:`file_reads`. ``files`` and ``parent_deletes``
    are by change ordinal; ``removed_after[o]``: data files REPLACE snapshots removed after
    change ``o`` (before change ``o + 1``; ``-1``: before the first change).

    >>> snap = {o: SnapshotMeta(o + 10, o + 9, o, "overwrite") for o in range(3)}
    >>> eq = lambda name, *reached: SnapshotFiles(
    ...     added=(f"n{name}",), affected=reached,
    ...     equality_deletes=(EqualityDelete(f"d{name}", ("id",)),))
    >>> plan = plan_reads([Change(o, snap[o], snap[o]) for o in range(3)],
    ...                   {0: eq(0, "base"), 1: eq(1, "base", "n0"), 2: eq(2, "base", "n1")},
    ...                   {0: False, 1: False, 2: False}, {1: frozenset({"n1"})})
    >>> [(r.path, r.role.value, r.ordinal, r.reach) for r in plan.reads]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('n0', 'added', 0, (1, 2)), ('base', 'candidate', 0, (0, 2)),
     ('n1', 'added', 1, None), ('n2', 'added', 2, None)]
    >>> [(d.number, d.path, d.ordinal) for d in plan.key_deletes]
    [(0, 'd0', 0), (1, 'd1', 1), (2, 'd2', 2)]
    """
    removed_after = removed_after or {}
    eligible = {c.ordinal for c in changes if equality_only(files[c.ordinal])}
    seen: set[str] = set()
    key_deletes: list[KeyDelete] = []
    numbers: dict[int, tuple[int, int]] = {}  # ordinal -> (first, last) number of its deletes
    for change in changes:
        if change.ordinal not in eligible:
            continue
        first = len(key_deletes)
        for delete in files[change.ordinal].equality_deletes:
            if delete.path in seen:  # one file committed twice: not ours to reason about
                return ReadPlan(tuple(_general_reads(changes, files, parent_deletes)))
            seen.add(delete.path)
            assert delete.columns is not None
            snapshot = change.snapshot
            key_deletes.append(
                KeyDelete(
                    len(key_deletes),
                    delete.path,
                    delete.columns,
                    change.ordinal,
                    snapshot.snapshot_id,
                    snapshot.timestamp_ms,
                )
            )
        numbers[change.ordinal] = (first, len(key_deletes) - 1)
    run_end: dict[int, int] = {}
    for change in reversed(changes):
        o = change.ordinal
        if o in eligible:
            run_end[o] = run_end[o + 1] if o + 1 in eligible else o

    def reach(path: str, o: int, candidate: bool) -> tuple[int, int] | None:
        """Deletes that may delete a row of ``path`` read at change ``o``: from ``o``'s own
        (a candidate, live at ``o``'s parent) or the next change's (added by ``o``), until the
        run ends or a REPLACE removes the file."""
        start = o if candidate else o + 1
        end = run_end[o]
        for after in range(o, end):
            if path in removed_after.get(after, frozenset()):
                end = after
                break
        if start > end:
            return None
        return numbers[start][0], numbers[end][1]

    reads: list[FileRead] = []
    in_run: set[str] = set()  # files the current run reads already: added in it, or candidates
    for change in changes:
        o, snapshot = change.ordinal, change.snapshot
        these = files[o]
        if o not in eligible:
            reads += file_reads(change, these, parent_deletes[o])
            continue
        if o - 1 not in eligible:
            in_run = set()
        sid, ts = snapshot.snapshot_id, snapshot.timestamp_ms
        parent_id = change.parent.snapshot_id if change.parent is not None else None
        for path in these.added:
            reads.append(FileRead(path, Role.ADDED, o, sid, ts, None, reach=reach(path, o, False)))
        at = parent_id if parent_deletes[o] else None
        for path in these.affected:
            if path not in in_run:
                in_run.add(path)
                found = reach(path, o, True)
                reads.append(FileRead(path, Role.CANDIDATE, o, sid, ts, at, reach=found))
        in_run.update(these.added)
    return ReadPlan(tuple(reads), tuple(key_deletes))


def _general_reads(
    changes: Sequence[Change],
    files: Mapping[int, SnapshotFiles],
    parent_deletes: Mapping[int, bool],
) -> list[FileRead]:
    return [r for c in changes for r in file_reads(c, files[c.ordinal], parent_deletes[c.ordinal])]


class Lane(enum.Enum):
    ROWS = "rows"  # ADDED and BEFORE reads: every column
    POSITIONS = "positions"  # AFTER reads: file and position only


@dataclass(frozen=True)
class ReadSet:
    """Reads that run as ONE scan: each file at most once, so a row's file names its read."""

    lane: Lane
    index: int
    reads: tuple[FileRead, ...]


def pack(reads: Sequence[FileRead]) -> tuple[ReadSet, ...]:
    """Group reads into as few scans as possible: a file goes into the first scan of its lane
    that does not read it yet (a file read for two snapshots needs two scans).

    >>> def r(path, role, ordinal):
    ...     return FileRead(path, role, ordinal, ordinal, 0, None)
    >>> sets = pack([r("a", Role.ADDED, 0), r("b", Role.ADDED, 1), r("a", Role.BEFORE, 2),
    ...              r("a", Role.AFTER, 2)])
    >>> [(s.lane.value, s.index, [(x.path, x.ordinal) for x in s.reads]) for s in sets]
    [('rows', 0, [('a', 0), ('b', 1)]), ('rows', 1, [('a', 2)]), ('positions', 2, [('a', 2)])]
    """
    lanes: dict[Lane, list[tuple[set[str], list[FileRead]]]] = {Lane.ROWS: [], Lane.POSITIONS: []}
    for item in reads:
        lane = lanes[Lane.POSITIONS if item.role == Role.AFTER else Lane.ROWS]
        for paths, members in lane:
            if item.path not in paths:
                paths.add(item.path)
                members.append(item)
                break
        else:
            lane.append(({item.path}, [item]))
    result: list[ReadSet] = []
    for lane_kind in (Lane.ROWS, Lane.POSITIONS):
        for _, members in lanes[lane_kind]:
            result.append(ReadSet(lane_kind, len(result), tuple(members)))
    return tuple(result)


@dataclass(frozen=True)
class ChangeOptions:
    """How the changes are post-processed, with Iceberg's rules for the defaults."""

    compute_updates: bool
    net_changes: bool
    identifier_columns: tuple[str, ...]


def change_options(
    table: str,
    columns: Sequence[str],
    table_identifiers: Sequence[str],
    compute_updates: bool | None,
    identifier_columns: Sequence[str] | None,
    net_changes: bool,
) -> ChangeOptions:
    """Iceberg's defaults and refusals: updates are computed by default only when identifier
    columns are given; without given ones the table's identifier fields are used; net changes
    and update images do not combine.

    >>> change_options("t", ["id", "v"], ["id"], None, None, False)
    ChangeOptions(compute_updates=False, net_changes=False, identifier_columns=('id',))
    >>> change_options("t", ["id", "v"], [], None, ["id"], False).compute_updates
    True
    """
    given = identifier_columns is not None
    updates = compute_updates if compute_updates is not None else given
    identifiers = (
        tuple(identifier_columns) if identifier_columns is not None else tuple(table_identifiers)
    )
    unknown = [c for c in identifiers if c not in columns]
    if unknown:
        raise ProcedureArgumentError(
            f"Identifier column '{unknown[0]}' is not a column of {table}; columns: "
            f"{', '.join(columns)}."
        )
    if updates and net_changes:
        raise ProcedureArgumentError(
            "net_changes and compute_updates cannot be combined (Iceberg refuses it too); "
            "set compute_updates => false, or net_changes => false."
        )
    if updates and not identifiers:
        raise ProcedureArgumentError(
            f"Cannot compute updates of {table}: it has no identifier fields; give "
            "identifier_columns => array('id', ...) or set compute_updates => false."
        )
    return ChangeOptions(updates, net_changes, identifiers)
