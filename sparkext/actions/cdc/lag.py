"""Action behind cdc_lag and table_health's lag columns: read the commits, apply planning.lag.

Floor: actions (the routine :mod:`sparkext.procedures.cdc_lag` calls :func:`cdc_lag` and gets
typed :class:`LagRow` values back; this module declares its options).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from sparkext.actions.cdc import heartbeats
from sparkext.declarations import Option, parse_boolean
from sparkext.errors import ProcedureArgumentError
from sparkext.iceberg.cdc_table import (
    BATCH_ID,
    CHECKPOINT_ID,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    MAX_POSITION,
    CdcTable,
)
from sparkext.planning.lag import Commit, Lag, lags
from sparkext.planning.positions import family, readable
from sparkext.times import from_millis

EVENTS_DIRECTORY = "/events"  # ingest_cdc's event-log root is <checkpoint>/events

HISTORY = "history"
HISTORY_DEFAULT = "false"

OPTIONS = (
    Option(
        HISTORY,
        HISTORY_DEFAULT,
        "one row per retained ingest_cdc commit (as_of = its commit time) instead of one "
        "per ingest job",
        parse_boolean,
    ),
)


def _int(summary: Mapping[str, str], key: str) -> int | None:
    value = summary.get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def checkpoint_locations(table: CdcTable) -> dict[str, str]:
    """Checkpoint id -> its directory, from the table's event-log property."""
    return {
        checkpoint: root.removesuffix(EVENTS_DIRECTORY)
        for checkpoint, root in table.event_logs().items()
    }


def table_lags(
    spark: SparkSession, name: str, as_of_ms: int | None = None, history: bool = False
) -> list[Lag]:
    """cdc_lag's rows for table ``name`` (newest first); none when no ingest_cdc commit is
    retained. ``as_of_ms`` defaults to now."""
    table = CdcTable(spark, name)
    commits = [
        Commit(
            checkpoint_id=record.summary[CHECKPOINT_ID],
            snapshot_id=record.snapshot_id,
            committed_ms=record.committed_ms,
            batch_id=_int(record.summary, BATCH_ID),
            source_time_ms=_int(record.summary, EVENT_TIME_MAX_SO_FAR)
            or _int(record.summary, EVENT_TIME_MAX),
            batch_source_time_ms=_int(record.summary, EVENT_TIME_MAX),
            position=record.summary.get(MAX_POSITION),
        )
        for record in table.cdc_commits(every=history)
    ]
    locations = checkpoint_locations(table)
    confirmed: dict[str, tuple[int, int]] = {}
    for checkpoint, location in locations.items():
        found = heartbeats.read(location)
        if found is not None:
            confirmed[checkpoint] = (found.heartbeat_ms, found.confirmed_ms)
    now = as_of_ms if as_of_ms is not None else int(time.time() * 1000)
    return lags(commits, confirmed, locations, now, history)


@dataclass(frozen=True)
class LagRow:
    """One row of cdc_lag: an ingest job's lag now (or, with history, at one of its commits)."""

    checkpoint_id: str
    checkpoint: str | None
    snapshot_id: int
    committed_at: dt.datetime | None
    batch_id: int | None
    source_time: dt.datetime | None
    source_position: str | None  # as the connector writes it
    position_family: str | None
    position_key: str | None  # as ingest_cdc orders it
    heartbeat_time: dt.datetime | None
    complete_through: dt.datetime | None
    as_of: dt.datetime | None
    lag_ms: int | None
    commit_delay_ms: int | None

    def row(self) -> tuple[Any, ...]:
        """The routine's output row (its declared columns, in order)."""
        return (
            self.checkpoint_id, self.checkpoint, self.snapshot_id, self.committed_at,
            self.batch_id, self.source_time, self.source_position, self.position_family,
            self.position_key, self.heartbeat_time, self.complete_through, self.as_of,
            self.lag_ms, self.commit_delay_ms,
        )  # fmt: skip


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else from_millis(ms)


def as_of_ms(value: Any) -> int | None:
    """``as_of =>`` in epoch milliseconds (None: now); naive values are taken as UTC."""
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        raise ProcedureArgumentError(
            f"as_of must be a timestamp, got {value!r}; write TIMESTAMP '2026-11-21 08:00:00' "
            "or leave it out for now."
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)


def cdc_lag(
    spark: SparkSession,
    name: str,
    as_of: Any = None,
    history: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> tuple[LagRow, ...]:
    """cdc_lag's rows for table ``name`` at ``as_of`` (a timestamp; default: now)."""
    progress(f"reading the commits of {name}")
    return tuple(
        LagRow(
            r.commit.checkpoint_id,
            r.checkpoint,
            r.commit.snapshot_id,
            _time(r.commit.committed_ms),
            r.commit.batch_id,
            _time(r.commit.source_time_ms),
            readable(r.commit.position),
            family(r.commit.position),
            r.commit.position,
            _time(r.heartbeat_ms),
            _time(r.complete_through_ms),
            _time(r.as_of_ms),
            r.lag_ms,
            r.commit_delay_ms,
        )
        for r in table_lags(spark, name, as_of_ms(as_of), history)
    )
