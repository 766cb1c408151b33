"""Plan a changelog stream's micro-batches and read consumer registrations: pure, over metadata.

**Progress.** A stream's position is the last snapshot it consumed (``None``: before the table's
first snapshot). Each micro-batch is the changelog of (position, head], where the head is the
current snapshot of the table or of a branch, along the head's ancestry. A batch is *planned*
(id, start, end) in the checkpoint before its rows go to the consumer and *committed* after the
consumer returns, as Spark's offset and commit logs; a planned batch that was never committed is
delivered again with the same id and range (:func:`next_step`).

**Lost ranges.** When the snapshots between the position and the head are no longer retained
(``expire_snapshots`` ran past the stream) or no longer on the head's history (a rollback), the
changes in between cannot be read: :func:`next_step` raises one sentence naming the range, never
skipping it.

**Consumers.** A stream registers itself so maintenance keeps the snapshots it still needs: the
table property ``sparkext.changelog.consumer.<name>`` holds JSON ``{"snapshot-id": <last
consumed, null before the first snapshot>, "heartbeat": <epoch ms>, "checkpoint": <location>,
"ttl-ms": <ms>, "branch": <branch or null>}``, written when the stream starts and after every
commit. A registration whose heartbeat is older than its TTL (default 7 days) is stale and
protects nothing. :func:`oldest_needed` says which snapshot maintenance must keep, with every
snapshot committed after it.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkext.errors import ChangelogRangeLostError, OptionError
from sparkext.planning.changelog import History, SnapshotMeta

CONSUMER_PREFIX = "sparkext.changelog.consumer."
TTL_DEFAULT_MS = 7 * 24 * 3600 * 1000
EARLIEST, LATEST = "earliest", "latest"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def parse_consumer_name(text: str) -> str:
    """A consumer name: letters, digits, ``_``, ``-`` and ``.`` (it becomes part of a table
    property key).

    >>> parse_consumer_name("orders-to-es")
    'orders-to-es'
    """
    name = text.strip()
    if name and not _NAME.fullmatch(name):
        raise ValueError("expected a name of letters, digits, '_', '-' and '.' such as 'to-es'")
    return name


# ---- progress ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedBatch:
    """One micro-batch: the changelog of (start_id, end_id]; ``start_id`` None is before the
    table's first snapshot."""

    batch_id: int
    start_id: int | None
    end_id: int

    def to_json(self) -> dict[str, Any]:
        return {"batch-id": self.batch_id, "start": self.start_id, "end": self.end_id}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PlannedBatch:
        start = value.get("start")
        return cls(int(value["batch-id"]), None if start is None else int(start), int(value["end"]))


@dataclass(frozen=True)
class Progress:
    """What a checkpoint holds: where the stream started, the last planned and the last
    committed batch. Written as one JSON document (:meth:`to_text`), replaced atomically."""

    table: str
    branch: str | None
    start_id: int | None  # the position before the first batch
    planned: PlannedBatch | None = None
    committed: PlannedBatch | None = None

    @property
    def consumed(self) -> int | None:
        """The last snapshot consumed: the end of the last committed batch, or the start."""
        return self.committed.end_id if self.committed is not None else self.start_id

    @property
    def pending(self) -> PlannedBatch | None:
        """The planned batch the consumer has not finished, if any."""
        done = self.committed.batch_id if self.committed is not None else -1
        if self.planned is not None and self.planned.batch_id > done:
            return self.planned
        return None

    @property
    def next_batch_id(self) -> int:
        last = max(
            (b.batch_id for b in (self.planned, self.committed) if b is not None), default=-1
        )
        return last + 1

    def plan(self, batch: PlannedBatch) -> Progress:
        return Progress(self.table, self.branch, self.start_id, batch, self.committed)

    def commit(self, batch: PlannedBatch) -> Progress:
        return Progress(self.table, self.branch, self.start_id, self.planned, batch)

    def to_text(self) -> str:
        return json.dumps(
            {
                "version": 1,
                "table": self.table,
                "branch": self.branch,
                "start-snapshot-id": self.start_id,
                "planned": None if self.planned is None else self.planned.to_json(),
                "committed": None if self.committed is None else self.committed.to_json(),
            }
        )

    @classmethod
    def from_text(cls, text: str) -> Progress:
        value = json.loads(text)
        start = value.get("start-snapshot-id")
        planned, committed = value.get("planned"), value.get("committed")
        return cls(
            table=str(value["table"]),
            branch=value.get("branch"),
            start_id=None if start is None else int(start),
            planned=None if planned is None else PlannedBatch.from_json(planned),
            committed=None if committed is None else PlannedBatch.from_json(committed),
        )


def head_id(history: History, branch: str | None) -> int | None:
    """The snapshot a stream follows: the branch's head, or the table's current snapshot.

    >>> head_id(History("t", {}, current_snapshot_id=None), None) is None
    True
    """
    if branch is None:
        return history.current_snapshot_id
    ref = history.refs.get(branch)
    if ref is None or not ref.is_branch:
        known = ", ".join(sorted(n for n, r in history.refs.items() if r.is_branch)) or "none"
        raise OptionError(
            f"'{branch}' is not a branch of {history.table} (its branches: {known}); give "
            "'branch' as one of them, or leave it out to follow the current snapshot."
        )
    return ref.snapshot_id


def start_position(
    history: History, branch: str | None, starting: str, start_snapshot_id: int | None
) -> int | None:
    """Where a new checkpoint starts: after ``start_snapshot_id``, after the head
    (``latest``), or before the first snapshot (``earliest``).

    >>> h = History("t", {1: SnapshotMeta(1, None, 10, "append")}, current_snapshot_id=1)
    >>> start_position(h, None, "earliest", None), start_position(h, None, "latest", None)
    (None, 1)
    """
    head = head_id(history, branch)  # a branch that is none is refused whatever the start
    if start_snapshot_id is not None:
        if start_snapshot_id not in history.snapshots:
            raise OptionError(
                f"'start-snapshot-id'='{start_snapshot_id}' is not a retained snapshot of "
                f"{history.table}; choose one of SELECT snapshot_id FROM {history.table}.snapshots."
            )
        return start_snapshot_id
    return head if starting == LATEST else None


@dataclass(frozen=True)
class Step:
    """What the stream does next: deliver ``batch`` (``again``: a planned batch re-delivered
    after a restart), or nothing (``batch`` None: it is at the head). ``snapshots``: the
    snapshots of the range, oldest first; ``changes_rows``: whether any of them can change a row
    (a range of REPLACE snapshots only is committed without calling the consumer)."""

    batch: PlannedBatch | None
    again: bool = False
    snapshots: tuple[SnapshotMeta, ...] = ()

    @property
    def changes_rows(self) -> bool:
        return any(not s.is_replace for s in self.snapshots)


def next_step(
    history: History,
    progress: Progress,
    max_snapshots: int | None = None,
    checkpoint: str = "",
    until: int | None = None,
) -> Step:
    """The next micro-batch of a stream at ``progress`` over the table's ``history``, up to
    the head (or up to ``until``, a head seen before: "what is available now").

    >>> h = History("t", {1: SnapshotMeta(1, None, 10, "append"),
    ...                   2: SnapshotMeta(2, 1, 20, "append"),
    ...                   3: SnapshotMeta(3, 2, 30, "replace")}, current_snapshot_id=3)
    >>> step = next_step(h, Progress("t", None, None), max_snapshots=2)
    >>> step.batch, [s.snapshot_id for s in step.snapshots]
    (PlannedBatch(batch_id=0, start_id=None, end_id=2), [1, 2])
    >>> next_step(h, Progress("t", None, 2)).changes_rows
    False
    >>> next_step(h, Progress("t", None, 3)).batch is None
    True
    """
    pending = progress.pending
    if pending is not None:
        taken = _range(history, pending.start_id, pending.end_id, progress, checkpoint)
        return Step(pending, again=True, snapshots=taken)
    head = until if until is not None else head_id(history, progress.branch)
    consumed = progress.consumed
    if head is None or head == consumed:
        return Step(None)
    taken = _range(history, consumed, head, progress, checkpoint)
    if not taken:
        return Step(None)
    if max_snapshots is not None and len(taken) > max_snapshots:
        taken = taken[:max_snapshots]
    batch = PlannedBatch(progress.next_batch_id, consumed, taken[-1].snapshot_id)
    return Step(batch, snapshots=taken)


def _range(
    history: History, start: int | None, end: int, progress: Progress, checkpoint: str
) -> tuple[SnapshotMeta, ...]:
    """The snapshots in (start, end] along end's ancestry, oldest first, or the lost-range
    sentence."""
    chain = history.ancestors(end)  # newest first; empty when end itself expired
    taken: list[SnapshotMeta] = []
    for snapshot in chain:
        if start is not None and snapshot.snapshot_id == start:
            return tuple(reversed(taken))
        taken.append(snapshot)
    if start is None and chain and chain[-1].parent_id is None:
        return tuple(reversed(taken))  # from the table's first snapshot, all retained
    raise _lost(history, start, end, chain, progress, checkpoint)


def _lost(
    history: History,
    start: int | None,
    end: int,
    chain: list[SnapshotMeta],
    progress: Progress,
    checkpoint: str,
) -> ChangelogRangeLostError:
    table = history.table
    where = f", checkpoint {checkpoint}" if checkpoint else ""
    if start is not None and start in history.snapshots and chain and chain[-1].parent_id is None:
        return ChangelogRangeLostError(
            f"The changes of {table} after snapshot {start} cannot be read: snapshot {start}, "
            f"the last one this stream consumed{where}, is no longer an "
            f"ancestor of snapshot {end} (the table "
            f"was rolled back or the branch replaced); start a new checkpoint with "
            f"'start-snapshot-id' set to a snapshot of the current history."
        )
    if chain:
        oldest = chain[-1].snapshot_id
        through, restart = f"snapshot {oldest}", f"'start-snapshot-id'='{oldest}'"
    else:  # the head itself is gone (a branch pointing at an expired snapshot cannot be)
        through, restart = f"snapshot {end}", "'starting'='latest'"
    if start is None:
        lost = f"from its first snapshot through {through} (the oldest one retained on its history)"
    else:
        lost = (
            f"after snapshot {start} (the last one this stream consumed{where}) through "
            f"{through} (the oldest one retained on its history)"
        )
    return ChangelogRangeLostError(
        f"The changes of {table} {lost} are lost because the snapshots in between have "
        f"expired; reload the table's current state and start a new checkpoint with {restart}, "
        "and register the consumer (option 'consumer-name') so maintenance keeps the snapshots "
        "it still needs."
    )


# ---- consumer registrations ------------------------------------------------------------------


@dataclass(frozen=True)
class Registration:
    """One registered changelog consumer, as its table property says."""

    name: str
    snapshot_id: int | None  # the last snapshot it consumed (None: before the first one)
    heartbeat_ms: int
    checkpoint: str = ""
    ttl_ms: int = TTL_DEFAULT_MS
    branch: str | None = None

    @property
    def key(self) -> str:
        return consumer_key(self.name)

    def is_stale(self, now_ms: int) -> bool:
        """Its heartbeat is older than its TTL: it protects nothing any more.

        >>> Registration("a", 1, heartbeat_ms=0, ttl_ms=10).is_stale(11)
        True
        """
        return now_ms - self.heartbeat_ms > self.ttl_ms

    def to_text(self) -> str:
        return json.dumps(
            {
                "snapshot-id": self.snapshot_id,
                "heartbeat": self.heartbeat_ms,
                "checkpoint": self.checkpoint,
                "ttl-ms": self.ttl_ms,
                "branch": self.branch,
            },
            sort_keys=True,
        )


def consumer_key(name: str) -> str:
    """The table property of a consumer.

    >>> consumer_key("to-es")
    'sparkext.changelog.consumer.to-es'
    """
    return CONSUMER_PREFIX + name


def parse_registration(name: str, text: str) -> Registration | None:
    """A registration from its property value; None when it is not one (hand-edited JSON).

    >>> parse_registration("a", '{"snapshot-id": 5, "heartbeat": 7}')
    Registration(name='a', snapshot_id=5, heartbeat_ms=7, checkpoint='', ttl_ms=604800000, \
branch=None)
    >>> parse_registration("a", "nonsense") is None
    True
    """
    try:
        value = json.loads(text)
        snapshot = value.get("snapshot-id")
        return Registration(
            name=name,
            snapshot_id=None if snapshot is None else int(snapshot),
            heartbeat_ms=int(value["heartbeat"]),
            checkpoint=str(value.get("checkpoint") or ""),
            ttl_ms=int(value.get("ttl-ms") or TTL_DEFAULT_MS),
            branch=value.get("branch"),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def registrations(properties: Mapping[str, str]) -> list[Registration]:
    """Every readable consumer registration among a table's properties, by name."""
    found = []
    for key, value in sorted(properties.items()):
        if key.startswith(CONSUMER_PREFIX):
            registration = parse_registration(key[len(CONSUMER_PREFIX) :], value)
            if registration is not None:
                found.append(registration)
    return found


@dataclass(frozen=True)
class Needed:
    """What maintenance must keep for the live consumers: ``snapshot_id`` (None: nothing, or
    the whole history when ``whole_history``) and every snapshot committed at or after
    ``timestamp_ms`` (so ``expire_snapshots(older_than => timestamp_ms)`` keeps them);
    ``consumer`` is the one furthest behind."""

    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    consumer: str | None = None
    whole_history: bool = False


def oldest_needed(history: History, consumers: Iterable[Registration], now_ms: int) -> Needed:
    """The oldest snapshot a live (not stale) consumer still needs: the last one it consumed
    (its next batch starts there). A consumer whose snapshot is already gone needs nothing
    (its stream reports the lost range); one before the first snapshot needs the whole history.

    >>> h = History("t", {1: SnapshotMeta(1, None, 10, "append"),
    ...                   2: SnapshotMeta(2, 1, 20, "append")}, current_snapshot_id=2)
    >>> live = [Registration("a", 2, 100), Registration("b", 1, 100),
    ...         Registration("stale", 1, 0, ttl_ms=5)]
    >>> oldest_needed(h, live, now_ms=110)
    Needed(snapshot_id=1, timestamp_ms=10, consumer='b', whole_history=False)
    """
    best: Needed = Needed()
    for consumer in consumers:
        if consumer.is_stale(now_ms):
            continue
        if consumer.snapshot_id is None:
            roots = [s for s in history.snapshots.values() if s.parent_id is None]
            first = min(roots, key=lambda s: s.timestamp_ms, default=None)
            return Needed(
                first.snapshot_id if first else None,
                first.timestamp_ms if first else None,
                consumer.name,
                whole_history=True,
            )
        snapshot = history.snapshots.get(consumer.snapshot_id)
        if snapshot is None:
            continue
        if best.timestamp_ms is None or snapshot.timestamp_ms < best.timestamp_ms:
            best = Needed(snapshot.snapshot_id, snapshot.timestamp_ms, consumer.name)
    return best


@dataclass(frozen=True)
class ConsumerStatus:
    registration: Registration
    stale: bool


@dataclass(frozen=True)
class ConsumerReport:
    """A table's registered changelog consumers (stale ones marked) and what they still need."""

    table: str
    consumers: tuple[ConsumerStatus, ...]
    needed: Needed


def consumer_report(history: History, properties: Mapping[str, str], now_ms: int) -> ConsumerReport:
    """Every registration of the table, whether it is stale, and :func:`oldest_needed`.

    >>> h = History("t", {1: SnapshotMeta(1, None, 10, "append")}, current_snapshot_id=1)
    >>> r = consumer_report(h, {consumer_key("a"): Registration("a", 1, 0).to_text()}, 5)
    >>> [(c.registration.name, c.stale) for c in r.consumers], r.needed.snapshot_id
    ([('a', False)], 1)
    """
    found = registrations(properties)
    return ConsumerReport(
        history.table,
        tuple(ConsumerStatus(r, r.is_stale(now_ms)) for r in found),
        oldest_needed(history, found, now_ms),
    )
