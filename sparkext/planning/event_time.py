"""Plan a table's state as of an event time T0 (Yanxuan's consistent snapshot). Pure Python.

Input: the current snapshot's ancestry, oldest first, with each snapshot's summary. Commits of
``ingest_cdc`` carry the batch's event-time bounds, the running maximum event time, the source
position high-water mark and where the batch's event log lies. Other commits (compaction,
equality-delete conversion, maintenance) change no logical content and inherit their parent's.

The plan:

1. the base s1 is the newest snapshot such that every event ingested up to it has an event time
   <= T0 (its running maximum <= T0); it is read through Iceberg time travel;
2. the event logs of the CDC commits after s1 are replayed, except those whose minimum event time
   is > T0 (pruned by the summary alone); only events with event time <= T0 count;
3. when s1 is no longer retained (expired), the plan is a full replay of every event log, but only
   if the caller allows it; otherwise one error sentence says what to do.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparkext.errors import SnapshotExpiredError
from sparkext.planning.summary import (
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    EVENT_TIME_MIN,
    EVENTS_LOCATION,
    MAX_POSITION,
    TRUNCATE_POSITION,
)


@dataclass(frozen=True)
class SnapshotFact:
    snapshot_id: int
    parent_id: int | None
    summary: Mapping[str, str]
    operation: str | None = None  # append, overwrite, delete, replace

    @property
    def is_logged(self) -> bool:
        """Every row this snapshot adds is in an event log, or it adds no logical rows."""
        return (self.is_cdc and EVENTS_LOCATION in self.summary) or self.operation in (
            "replace",
            "delete",
        )

    @property
    def is_cdc(self) -> bool:
        """A commit of ingest_cdc that carries event-time bounds."""
        return EVENT_TIME_MAX in self.summary

    def ms(self, key: str) -> int | None:
        value = self.summary.get(key)
        return int(value) if value not in (None, "") else None


@dataclass(frozen=True)
class ChangeLog:
    """One CDC commit after the base whose events may count."""

    snapshot_id: int
    location: str | None  # None: the commit predates event logs (cannot be replayed)
    event_time_min: int
    event_time_max: int


@dataclass(frozen=True)
class EventTimePlan:
    as_of_ms: int
    base_snapshot_id: int | None  # None: start from an empty table
    base_max_position: str | None  # source high-water mark at the base (None: no CDC yet)
    base_truncate_position: str | None  # newest truncate applied at or before the base
    changes: tuple[ChangeLog, ...]  # CDC commits after the base to replay, oldest first
    pruned: int  # CDC commits after the base skipped because their min event time is > T0
    earlier_logs: tuple[str, ...]  # event logs at or before the base (late-event check)
    full_replay_roots: tuple[str, ...] = ()  # set only for a full replay: every batch there
    # the base's whole history is retained, and these snapshots up to it may have added rows
    # that no event log holds (bulk loads, user writes); None: history not fully retained
    unlogged_snapshots: tuple[int, ...] | None = None
    # the source high-water mark after each of ``earlier_logs``' commits: a log holds no
    # position above its mark (None: unknown)
    earlier_marks: tuple[str | None, ...] = ()

    @property
    def full_replay(self) -> bool:
        return bool(self.full_replay_roots)

    def earlier_logs_reaching(self, position: str) -> tuple[str, ...]:
        """The logs at or before the base that may hold a position >= ``position``: the high-
        water mark only grows, so the logs before the first commit that reached it are skipped.

        >>> p = EventTimePlan(0, 3, None, None, (), 0, ("a", "b", "c"), earlier_marks=("1",
        ...                   "5", "9"))
        >>> p.earlier_logs_reaching("4"), p.earlier_logs_reaching("0")
        (('b', 'c'), ('a', 'b', 'c'))
        """
        if len(self.earlier_marks) != len(self.earlier_logs):
            return self.earlier_logs
        return tuple(
            log
            for log, mark in zip(self.earlier_logs, self.earlier_marks, strict=True)
            if mark is None or mark >= position
        )


def has_event_time(ancestry: Sequence[SnapshotFact]) -> bool:
    return any(s.is_cdc for s in ancestry)


def _running_max(ancestry: Sequence[SnapshotFact]) -> list[int | None]:
    """Max event time of everything ingested up to each snapshot (summaries, else computed)."""
    result: list[int | None] = []
    current: int | None = None
    for s in ancestry:
        if s.is_cdc:
            recorded = s.ms(EVENT_TIME_MAX_SO_FAR)
            high = s.ms(EVENT_TIME_MAX)
            candidates = [v for v in (recorded, high, current) if v is not None]
            current = max(candidates) if candidates else current
        result.append(current)
    return result


def _root(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[0]


def plan_as_of(
    ancestry: Sequence[SnapshotFact], as_of_ms: int, *, allow_full_replay: bool = False
) -> EventTimePlan:
    """Choose the base snapshot and the change logs to replay for T0 = ``as_of_ms``.

    ``ancestry`` runs from the oldest retained ancestor to the current snapshot. Empty: the table
    has no snapshot, so the state is empty.

    >>> s = [SnapshotFact(1, None, {EVENT_TIME_MIN: "5", EVENT_TIME_MAX: "9"}),
    ...      SnapshotFact(2, 1, {EVENT_TIME_MIN: "3", EVENT_TIME_MAX: "20"})]
    >>> p = plan_as_of(s, 10)
    >>> p.base_snapshot_id, [c.snapshot_id for c in p.changes]
    (1, [2])
    >>> plan_as_of(s, 4).base_snapshot_id is None, plan_as_of(s, 99).changes
    (True, ())
    """
    if not ancestry:
        return EventTimePlan(as_of_ms, None, None, None, (), 0, ())
    running = _running_max(ancestry)
    first_after = next(
        (i for i, s in enumerate(ancestry) if s.is_cdc and (running[i] or 0) > as_of_ms), None
    )
    if first_after is None:
        base_index: int | None = len(ancestry) - 1
    elif first_after > 0:
        base_index = first_after - 1
    elif ancestry[0].parent_id is None:
        base_index = None  # the very first commit already goes past T0: start empty
    else:
        return _expired(ancestry, as_of_ms, allow_full_replay)
    base = ancestry[base_index] if base_index is not None else None
    upto = [] if base_index is None else list(ancestry[: base_index + 1])
    last_cdc = next((s for s in reversed(upto) if s.is_cdc), None)
    after = ancestry[(base_index + 1) if base_index is not None else 0 :]
    changes, pruned = [], 0
    for s in after:
        if not s.is_cdc:
            continue
        low, high = s.ms(EVENT_TIME_MIN), s.ms(EVENT_TIME_MAX)
        if low is None or high is None or low > as_of_ms:
            pruned += 1
            continue
        changes.append(ChangeLog(s.snapshot_id, s.summary.get(EVENTS_LOCATION), low, high))
    return EventTimePlan(
        as_of_ms=as_of_ms,
        base_snapshot_id=base.snapshot_id if base is not None else None,
        base_max_position=last_cdc.summary.get(MAX_POSITION) if last_cdc else None,
        base_truncate_position=last_cdc.summary.get(TRUNCATE_POSITION) if last_cdc else None,
        changes=tuple(changes),
        pruned=pruned,
        earlier_logs=tuple(
            s.summary[EVENTS_LOCATION] for s in upto if s.is_cdc and EVENTS_LOCATION in s.summary
        ),
        earlier_marks=tuple(
            s.summary.get(MAX_POSITION) for s in upto if s.is_cdc and EVENTS_LOCATION in s.summary
        ),
        unlogged_snapshots=(
            tuple(s.snapshot_id for s in upto if not s.is_logged)
            if ancestry[0].parent_id is None
            else None
        ),
    )


def _expired(
    ancestry: Sequence[SnapshotFact], as_of_ms: int, allow_full_replay: bool
) -> EventTimePlan:
    oldest = ancestry[0]
    if not allow_full_replay:
        raise SnapshotExpiredError(
            f"The base snapshot for this event time has expired (the oldest retained snapshot "
            f"{oldest.snapshot_id} already holds later events); pass "
            "options => map('allow-full-replay', 'true') to rebuild the state from every event "
            "log instead (reads the whole history)."
        )
    roots = sorted(
        {_root(s.summary[EVENTS_LOCATION]) for s in ancestry if EVENTS_LOCATION in s.summary}
    )
    if not roots:
        raise SnapshotExpiredError(
            "The base snapshot for this event time has expired and no retained commit points to "
            "an event log to replay; the state as of that time cannot be rebuilt."
        )
    return EventTimePlan(
        as_of_ms=as_of_ms,
        base_snapshot_id=None,
        base_max_position=None,
        base_truncate_position=None,
        changes=(),
        pruned=0,
        earlier_logs=(),
        full_replay_roots=tuple(roots),
    )
