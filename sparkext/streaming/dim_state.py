"""A streaming job's dimension state: kept in executor memory, brought forward by deltas.

A temporal join in a stream (``JOIN dim FOR SYSTEM_TIME AS OF f.ts`` on the event-time
attribute, or on a ``PROCTIME()`` column: a lookup) used to read its dimension again for every
micro-batch: the state as of the range's start (base snapshot + event logs) or the whole current
snapshot. Here each dimension is read once; every later micro-batch

1. pins the dimension's current snapshot (one snapshot per micro-batch, recorded in the sink
   commit's summary under ``sparkext.stream.dimension-snapshots``),
2. asks :func:`sparkext.planning.dim_join.plan_refresh` how to reach it: nothing to do, a
   *delta* (the event logs ``ingest_cdc`` wrote for the new commits, or the changelog of a
   table without them), or a *reload* when that reads fewer bytes or a delta cannot be applied
   (a rollback, a commit that changed rows without an event log, a schema change),
3. folds the delta into the state with the rule ``ingest_cdc`` and ``snapshot_as_of_event_time``
   apply (per key the newest source position wins; a truncate removes every older row), and
   keeps the result as a local checkpoint in the executors' block managers (lineage cut, so a
   long run's plans stay small; the previous state's blocks are released).

Event mode keeps the state as of the range's start (``low``) plus the *pending* events — logged
events later than ``low`` — from which each range's versions are built
(:func:`sparkext.actions.history.versions.versions_from`), so a micro-batch sees exactly the
versions
``backfill`` computes from scratch for the same range and the same dimension snapshot. A delta
is as cheap as the new events, so one commit is visible to the next micro-batch however rarely
the dimension commits, and a backlog of many commits is one delta (or one reload, if cheaper).

Nothing is written to the checkpoint: a restart rebuilds the state from the table with one
reload, which is the same state (the fold is a function of the logged events).

Floor: streaming.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.actions.cdc.checkpoint import tree_size
from sparkext.actions.history.as_of import EVENT_TIME, OP, POSITION, SYSTEM_NAMES, read_logs
from sparkext.actions.history.changelog import changelog
from sparkext.actions.history.versions import (
    MARK,
    cdc_range,
    earlier_events,
    is_cdc_table,
    truncates,
    undominated,
    versions_in_place,
)
from sparkext.errors import EventTimeError
from sparkext.iceberg.catalog import (
    identifier_columns,
    refreshed_snapshot_id,
    release_checkpoint,
    resolve_table,
)
from sparkext.iceberg.delete_files import SUMMARY_OPERATION
from sparkext.iceberg.snapshots import ancestry, live_files
from sparkext.identifiers import col, cols
from sparkext.planning.changelog import RangeRequest
from sparkext.planning.dim_join import NewCommit, Refresh, plan_refresh
from sparkext.planning.summary import EVENTS_LOCATION

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from sparkext.planning.event_time import SnapshotFact
    from sparkext.streaming.context import ViewSpec

DIMENSIONS_KEY = "sparkext.stream.dimension-snapshots"  # sink summary: {table: snapshot id}
BROADCAST_VERSIONS = 200_000  # changes in a range up to this many are joined to the state in place


@dataclass(frozen=True)
class RefreshRecord:
    """What one micro-batch did to one dimension's state (``DimensionStates.records``)."""

    batch: int
    table: str
    kind: str  # 'keep', 'delta' or 'reload'
    snapshot_id: int | None
    bytes_read: int
    seconds: float
    reason: str


@dataclass
class _Held:
    snapshot_id: int | None
    names: tuple[str, ...]  # the columns the state was built with
    key: tuple[str, ...]
    low: datetime | None  # event mode: the state's time (an instant)
    state: DataFrame
    pending: DataFrame | None = None  # event mode: logged events later than ``low``


@dataclass
class DimensionStates:
    """Every dimension of one stream run, kept between its micro-batches."""

    spark: SparkSession
    progress: Callable[[str], None] = lambda message: None
    reload_factor: float = 1.0  # reload when the delta is bigger than this × the table's bytes
    records: list[RefreshRecord] = field(default_factory=list)
    pins: dict[str, int | None] = field(default_factory=dict)
    _held: dict[tuple[str, str], _Held] = field(default_factory=dict)
    _batch: int = -1

    def begin_batch(self, batch_id: int) -> None:
        """A new micro-batch: each dimension is pinned again at its first use."""
        self._batch = batch_id
        self.pins = {}

    def summary(self) -> dict[str, str]:
        """The sink commit's record of the dimension snapshots this micro-batch joined."""
        if not self.pins:
            return {}
        return {DIMENSIONS_KEY: json.dumps(self.pins, sort_keys=True)}

    def frame(self, view: ViewSpec) -> DataFrame:
        """The rows of ``view`` for this micro-batch, from the kept state."""
        if view.kind == "lookup":
            return self._lookup(view.table)
        return self._versions(view)

    def close(self) -> None:
        """Release every kept state (the stream has stopped)."""

        # stop() and wait() may both close, on two threads: take the states out once
        held_states = []
        while self._held:
            try:
                held_states.append(self._held.popitem()[1])
            except KeyError:  # emptied by the other thread meanwhile
                break
        for held in held_states:
            release_checkpoint(held.state)
            if held.pending is not None:
                release_checkpoint(held.pending)

    # ---- pinning and planning ------------------------------------------------------------

    def _pin(self, table: str) -> int | None:

        if table not in self.pins:
            self.pins[table] = refreshed_snapshot_id(self.spark, table)
        return self.pins[table]

    def _plan(self, table: str, held: _Held | None, pinned: int | None, cdc: bool) -> Refresh:

        ref = resolve_table(self.spark, table)
        total = 0
        if held is None or held.snapshot_id == pinned:
            return plan_refresh(None if held is None else held.snapshot_id, pinned, [], total)
        chain = ancestry(self.spark, ref)
        ids = [s.snapshot_id for s in chain]
        if pinned in ids:
            chain = chain[: ids.index(pinned) + 1]
            ids = ids[: len(chain)]
            total = int(chain[-1].summary.get("total-files-size", "0") or 0)
        if held.snapshot_id not in ids or pinned not in ids:
            return plan_refresh(held.snapshot_id, pinned, None, total, self.reload_factor)
        commits = []
        for fact in chain[ids.index(held.snapshot_id) + 1 :]:
            summary = fact.summary
            location = summary.get(EVENTS_LOCATION) if cdc else None
            no_rows = fact.operation == "replace" or SUMMARY_OPERATION in summary
            if cdc:
                size = tree_size(location)[1] if location else 0
            else:  # a changelog reads what the commit added and removed
                size = int(summary.get("added-files-size", "0") or 0) + int(
                    summary.get("removed-files-size", "0") or 0
                )
                location = "changelog" if not no_rows else None
            commits.append(NewCommit(fact.snapshot_id, location, not no_rows, size))
        return plan_refresh(held.snapshot_id, pinned, commits, total, self.reload_factor)

    def _record(
        self,
        table: str,
        refresh: Refresh,
        snapshot_id: int | None,
        bytes_read: int,
        started: float,
    ) -> None:
        record = RefreshRecord(
            self._batch,
            table,
            refresh.kind,
            snapshot_id,
            bytes_read,
            round(time.monotonic() - started, 3),
            refresh.reason,
        )
        self.records.append(record)
        if refresh.kind != "keep":
            self.progress(
                f"batch {self._batch}: dimension {table} {refresh.kind} to snapshot "
                f"{snapshot_id} ({refresh.reason}; {bytes_read} bytes read, {record.seconds} s)"
            )

    def _keep(self, slot: tuple[str, str], held: _Held) -> None:

        old = self._held.get(slot)
        self._held[slot] = held
        if old is not None:
            if old.state is not held.state:
                release_checkpoint(old.state)
            if old.pending is not None and old.pending is not held.pending:
                release_checkpoint(old.pending)

    # ---- event mode: versions over a range -----------------------------------------------

    def _versions(self, view: ViewSpec) -> DataFrame:
        from pyspark.sql import functions as F

        started = time.monotonic()
        spark, table = self.spark, view.table
        zone = times.session_zone(spark)
        pinned = self._pin(table)
        slot = ("versions", table)
        held = self._held.get(slot)
        schema = spark.table(table).schema
        user = [(f.name, f.dataType) for f in schema.fields if f.name not in SYSTEM_NAMES]
        names = tuple(n for n, _ in user)
        low = None if view.low is None else times.instant(view.low, zone)
        high = times.instant(view.high, zone)
        usable = (
            held is not None
            and low is not None
            and held.low is not None  # always set in event mode
            and held.low <= low
            and held.names == names
        )
        refresh = self._plan(table, held if usable else None, pinned, cdc=True)
        bytes_read = refresh.delta_bytes if refresh.kind == "delta" else 0
        if refresh.kind == "reload":
            found = cdc_range(spark, table, view.low, None)
            state = _checkpoint(found.base.repartition(*cols(found.key)))
            pending = None
            if found.changes is not None:  # without the changes that can never be valid
                floors = None
                if found.floors is not None:
                    floors = found.floors.select(
                        *cols(found.key),
                        F.lit(MARK).alias(OP),
                        POSITION,
                        times.lit(found.low).alias(EVENT_TIME),
                    )
                pending = _checkpoint(
                    undominated(found.changes, floors, found.key, found.truncate_floor)
                )
            held = _Held(found.snapshot_id, names, tuple(found.key), found.low, state, pending)
            self.pins[table] = found.snapshot_id
            bytes_read = _live_bytes(spark, table, found.snapshot_id)
        else:
            assert held is not None and low is not None
            assert held.low is not None  # event mode's states have a time
            key = list(held.key)
            events, marks = held.pending, None
            if refresh.logs:  # new events; a late one may never be valid (an earlier delete)
                new = read_logs(spark, list(refresh.logs), user, key)
                assert new is not None
                chain = _chain_to(spark, table, held.snapshot_id)
                marks = earlier_events(spark, chain, user, key, new)
                events = new if events is None else events.unionByName(new)
                events = undominated(events, marks, key)
            due = None
            if events is not None and (low > held.low or refresh.logs):
                due = events.where(F.col(EVENT_TIME) <= times.lit(low))
            if due is not None and due.isEmpty():  # nothing to fold: the state stays as it is
                assert events is not None  # due is taken from them
                pending = _checkpoint(events) if refresh.logs else events
                held = _Held(pinned, names, held.key, low, held.state, pending)
            elif due is not None:
                if marks is not None:  # what the state's rows and missing keys came from
                    assert held.low is not None  # as above (mypy forgets it past `held = …`)
                    known = marks.where(F.col(EVENT_TIME) <= times.lit(held.low))
                    due = due.unionByName(known, allowMissingColumns=True)
                assert events is not None  # due is taken from them
                temporaries: list[DataFrame] = []
                state = _checkpoint(_fold(held.state, due, list(names), key, temporaries))
                pending = _checkpoint(events.where(F.col(EVENT_TIME) > times.lit(low)))
                _release(temporaries)
                held = _Held(pinned, names, held.key, low, state, pending)
            else:
                held = _Held(pinned, names, held.key, low, held.state, held.pending)
        self._keep(slot, held)
        self._record(table, refresh, held.snapshot_id, bytes_read, started)
        changes = held.pending
        if changes is not None:
            changes = changes.where(F.col(EVENT_TIME) < times.lit(high))
            cut = truncates(changes)
            if cut:
                when = times.wall_clock_text(times.from_micros(min(cut)[0]), zone)
                raise EventTimeError(
                    f"Table '{table}' was truncated at event time {when}, inside the range; an "
                    "event-time temporal join in a streaming job cannot place a truncate per "
                    "key: backfill the ranges before and after it separately, or use "
                    "sparkext.dim_join_changelog, which does."
                )
            count = changes.count()  # a job over the pending events (kept, small)
            if count == 0:  # the dimension did not change inside the range
                changes = None
        small = changes is not None and count <= BROADCAST_VERSIONS
        return versions_in_place(held.state, changes, list(names), list(held.key), small)

    # ---- processing mode: one snapshot ---------------------------------------------------

    def _lookup(self, table: str) -> DataFrame:

        started = time.monotonic()
        spark = self.spark
        pinned = self._pin(table)
        slot = ("lookup", table)
        held = self._held.get(slot)
        names = tuple(spark.table(table).columns)
        cdc = is_cdc_table(spark, table)
        usable = held is not None and held.names == names
        refresh = self._plan(table, held if usable else None, pinned, cdc=cdc)
        bytes_read = refresh.delta_bytes if refresh.kind == "delta" else 0
        key = identifier_columns(spark, table)
        if refresh.kind == "reload" or pinned is None:
            frame = (
                spark.table(table)
                if pinned is None
                else (spark.read.option("snapshot-id", str(pinned)).table(table))
            )
            frame = frame.repartition(*cols(key)) if key else frame
            held = _Held(pinned, names, tuple(key), None, _checkpoint(frame))
            bytes_read = _live_bytes(spark, table, pinned)
        elif refresh.kind == "delta":
            assert held is not None
            temporaries: list[DataFrame] = []
            state = (
                _fold_logs(
                    spark,
                    table,
                    held.state,
                    held.snapshot_id,
                    refresh.logs,
                    names,
                    key,
                    temporaries,
                )
                if cdc
                else _fold_changelog(
                    spark, table, held.state, held.snapshot_id, pinned, key, temporaries
                )
            )
            if not cdc and key:  # the changelog's rows came by a union: partition by key again
                state = state.repartition(*cols(key))
            held = _Held(pinned, names, held.key, None, _checkpoint(state))
            _release(temporaries)
        assert held is not None  # no state yet plans a reload
        self._keep(slot, held)
        self._record(table, refresh, held.snapshot_id, bytes_read, started)
        return held.state


def _checkpoint(frame: DataFrame) -> DataFrame:
    """``frame`` computed now and kept in the executors' block managers, lineage cut.

    Adaptive execution is off while it is computed: Spark 3.5 records a local checkpoint's
    partitioning only from a non-adaptive plan, and a state partitioned by key must say so, or
    every join of a micro-batch's facts with it shuffles the whole state again."""
    conf = frame.sparkSession.conf
    adaptive = conf.get("spark.sql.adaptive.enabled", "true")
    assert adaptive is not None  # a default was given
    conf.set("spark.sql.adaptive.enabled", "false")
    try:
        return frame.localCheckpoint(eager=True)
    finally:
        conf.set("spark.sql.adaptive.enabled", adaptive)


def _release(frames: list[DataFrame]) -> None:

    for frame in frames:
        release_checkpoint(frame)


def _live_bytes(spark: SparkSession, table: str, snapshot_id: int | None) -> int:

    if snapshot_id is None:
        return 0
    return live_files(spark, resolve_table(spark, table), snapshot_id)[1]


def _fold(
    state: DataFrame,
    events: DataFrame,
    names: list[str],
    key: list[str],
    temporaries: list[DataFrame],
) -> DataFrame:
    """``state`` (user columns, ``_cdc_position``, ``_cdc_event_time``) after ``events``:
    per key the newest source position wins (a delete removes the key); a truncate removes every
    row older than it. ``events`` may carry marks (op
    :data:`~sparkext.actions.history.versions.MARK`:
    earlier events the state already reflects, deletes included): a mark never becomes a row,
    but a change older than it is dropped, as ingest_cdc drops it. The winners are small and
    broadcast: the state is scanned in memory and
    keeps its partitioning by key unless the events add keys it does not hold. Checkpoints made
    on the way are added to ``temporaries`` (released once the result is kept)."""
    from pyspark.sql import functions as F

    others = [n for n in names if n not in key]
    newest = F.struct(POSITION, F.col(OP) != MARK)  # a mark loses a tie with its own event
    newest_truncate = events.where(F.col(OP) == "t").agg(F.max(POSITION).alias("p")).first()
    assert newest_truncate is not None  # an aggregate without grouping has one row
    truncate = newest_truncate.p
    winners = (
        events.where(F.col(OP) != "t")
        .groupBy(*cols(key))
        .agg(F.max_by(F.struct(*cols(others), OP, POSITION, EVENT_TIME), newest).alias("w"))
        .select(*cols(key), *(col("w", n).alias(n) for n in others),
                F.col(f"w.{OP}").alias("w_op"), F.col(f"w.{POSITION}").alias("w_pos"),
                F.col(f"w.{EVENT_TIME}").alias("w_et"))
    )  # fmt: skip
    if truncate is not None:
        winners = winners.where(F.col("w_pos") > F.lit(truncate))
        state = state.where(F.col(POSITION).isNotNull() & (F.col(POSITION) > F.lit(truncate)))
    winners = winners.localCheckpoint(eager=True)  # small; read by two joins
    temporaries.append(winners)
    # 1. keys the state holds: a projection of the state joined to the broadcast winners, so the
    #    state keeps its partitioning (no shuffle)
    joined = state.join(F.broadcast(winners), key, "left")
    newer = (
        F.col("w_pos").isNotNull()
        & (F.col("w_op") != MARK)
        & (F.col(POSITION).isNull() | (F.col("w_pos") > F.col(POSITION)))
    )

    def winner(c: str) -> Column:
        if c in names:
            return winners[c]
        return F.col({POSITION: "w_pos", EVENT_TIME: "w_et"}.get(c, "w_op"))

    updated = joined.where(~(newer & (F.col("w_op") == "d"))).select(
        *(  # the key columns pass through unaliased: an alias would hide their partitioning
            state[c] if c in key else F.when(newer, winner(c)).otherwise(state[c]).alias(c)
            for c in state.columns
        )
    )
    # 2. keys only the winners know: added by a union, re-partitioned by key (a shuffle, only
    #    when the dimension gained keys)
    fresh = winners.join(state.select(*cols(key)), key, "left_anti").where(
        ~F.col("w_op").isin("d", MARK)
    )
    if fresh.isEmpty():
        return updated
    added = fresh.select(*(winner(c).alias(c) for c in state.columns))
    return updated.unionByName(added).repartition(*cols(key))


def _fold_logs(
    spark: SparkSession,
    table: str,
    state: DataFrame,
    held: int | None,
    logs: Sequence[str],
    names: tuple[str, ...],
    key: list[str],
    temporaries: list[DataFrame],
) -> DataFrame:
    """An ingest_cdc table's rows (every column, system ones included) at snapshot ``held``
    after the events of ``logs``: the fold ingest_cdc itself applies (a late change older than
    the key's last event, a delete included, or than a truncate is dropped), so it equals the
    table at the new snapshot."""

    schema = dict((f.name, f.dataType) for f in state.schema.fields)
    user = [(n, schema[n]) for n in names if n not in SYSTEM_NAMES]
    events = read_logs(spark, list(logs), user, key)
    if events is None:
        return state
    marks = earlier_events(spark, _chain_to(spark, table, held), user, key, events)
    if marks is not None:
        events = events.unionByName(marks, allowMissingColumns=True)
    return _fold(state, events, [n for n, _ in user], key, temporaries)


def _chain_to(spark: SparkSession, table: str, snapshot_id: int | None) -> list[SnapshotFact]:
    """The table's retained snapshots up to ``snapshot_id``, oldest first (metadata only)."""

    chain = ancestry(spark, resolve_table(spark, table))
    ids = [s.snapshot_id for s in chain]
    return chain[: ids.index(snapshot_id) + 1] if snapshot_id in ids else []


def _fold_changelog(
    spark: SparkSession,
    table: str,
    state: DataFrame,
    held: int | None,
    pinned: int | None,
    key: list[str],
    temporaries: list[DataFrame],
) -> DataFrame:
    """A table's rows after its changelog (held, pinned]: rows of every changed key (or, without
    identifier fields, every changed row) are replaced by the range's net inserts."""
    from pyspark.sql import functions as F

    request = RangeRequest(start=None if held is None else str(held), end=str(pinned))
    identity = key or state.columns
    rows = changelog(
        spark,
        resolve_table(spark, table),
        request,
        identifier_columns=identity,
        net_changes=True,
        compute_updates=False,
    ).localCheckpoint(eager=True)
    temporaries.append(rows)
    changed = rows.select(*cols(identity)).distinct()
    inserted = rows.where(F.col("_change_type").isin("INSERT", "UPDATE_AFTER"))
    matches = [state[c].eqNullSafe(changed[c]) for c in identity]
    condition = matches[0]
    for match in matches[1:]:
        condition = condition & match
    kept = state.join(F.broadcast(changed), condition, "left_anti")
    return kept.unionByName(inserted.select(*cols(state.columns)))
