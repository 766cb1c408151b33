"""How far a CDC table is behind its source: pure arithmetic over what its commits recorded.

For each checkpoint (one ingest job) the lake holds every source change up to its
*complete-through* time: the newest source commit time it applied (``source.ts_ms``, the snapshot
summaries' ``sparkext.event-time.max-so-far``), or a newer Debezium heartbeat that a run confirmed
after draining its source (:mod:`sparkext.actions.cdc.heartbeats`). Lag is ``as_of -
complete_through``:
with heartbeats it stays right while the source is idle; without them it grows from the last
change, which is all a lake can know (Debezium's own MilliSecondsBehindSource keeps its last value
instead, DBZ-8885).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Commit:
    """One ingest_cdc commit, as its snapshot summary recorded it."""

    checkpoint_id: str
    snapshot_id: int
    committed_ms: int
    batch_id: int | None
    source_time_ms: int | None  # newest source commit time applied so far (max-so-far)
    batch_source_time_ms: int | None  # newest source commit time of this batch's events
    position: str | None  # the family-encoded high-water mark (sparkext.planning.positions)


@dataclass(frozen=True)
class Lag:
    """A row of cdc_lag: one checkpoint's state now, or at one of its commits (history)."""

    commit: Commit
    checkpoint: str | None  # its location, from the table's event-log property
    heartbeat_ms: int | None
    complete_through_ms: int | None
    as_of_ms: int
    lag_ms: int | None
    commit_delay_ms: int | None  # commit time - the batch's newest source change


def complete_through(source_time_ms: int | None, heartbeat_ms: int | None) -> int | None:
    """The newer of the two; ``None`` when neither is known.

    >>> complete_through(10, 25), complete_through(None, 7), complete_through(None, None)
    (25, 7, None)
    """
    known = [t for t in (source_time_ms, heartbeat_ms) if t is not None]
    return max(known) if known else None


def lags(
    commits: Sequence[Commit],
    heartbeats: Mapping[str, tuple[int, int]],
    locations: Mapping[str, str],
    as_of_ms: int,
    history: bool,
) -> list[Lag]:
    """Rows newest first. ``heartbeats``: checkpoint id -> (heartbeat time, confirmed at).

    Now (``history`` false): one row per checkpoint from its newest commit and its newest
    confirmed heartbeat; ``as_of`` is the given time. History: one row per commit, ``as_of``
    its commit time, a heartbeat counting only when it was confirmed by then.

    >>> c = Commit("a", 1, committed_ms=1_000, batch_id=0, source_time_ms=900,
    ...            batch_source_time_ms=900, position=None)
    >>> [(r.lag_ms, r.commit_delay_ms) for r in lags([c], {}, {}, 5_000, False)]
    [(4100, 100)]
    >>> [r.lag_ms for r in lags([c], {"a": (4_500, 4_600)}, {}, 5_000, False)]
    [500]
    >>> [r.lag_ms for r in lags([c], {"a": (4_500, 4_600)}, {}, 5_000, True)]
    [100]
    """
    rows: list[Lag] = []
    newest_seen: set[str] = set()
    for commit in sorted(commits, key=lambda c: (c.committed_ms, c.snapshot_id), reverse=True):
        if not history and commit.checkpoint_id in newest_seen:
            continue
        newest_seen.add(commit.checkpoint_id)
        at = commit.committed_ms if history else as_of_ms
        beat = heartbeats.get(commit.checkpoint_id)
        # a heartbeat counts from when a run confirmed it (history: by that commit) and never
        # for a time before it was written (as_of in the past, or a simulated clock)
        heartbeat_ms = (
            beat[0]
            if beat is not None and beat[0] <= at and (not history or beat[1] <= at)
            else None
        )
        through = complete_through(commit.source_time_ms, heartbeat_ms)
        delay = (
            commit.committed_ms - commit.batch_source_time_ms
            if commit.batch_source_time_ms is not None
            else None
        )
        rows.append(
            Lag(
                commit,
                locations.get(commit.checkpoint_id),
                heartbeat_ms,
                through,
                at,
                at - through if through is not None else None,
                delay,
            )
        )
    return rows


def table_lag(rows: Sequence[Lag]) -> Lag | None:
    """The table's lag: its freshest checkpoint's (an old job's checkpoint that another one
    replaced does not make the table stale).

    >>> table_lag([]) is None
    True
    """
    known = [r for r in rows if r.complete_through_ms is not None]
    return max(known, key=lambda r: r.complete_through_ms or 0) if known else None
