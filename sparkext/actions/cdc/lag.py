"""Action behind cdc_lag and table_health's lag columns: read the commits, apply planning.lag.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql import SparkSession

from sparkext.actions.cdc import heartbeats
from sparkext.iceberg.cdc_table import (
    BATCH_ID,
    CHECKPOINT_ID,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    MAX_POSITION,
    CdcTable,
)
from sparkext.planning.lag import Commit, Lag, lags

EVENTS_DIRECTORY = "/events"  # ingest_cdc's event-log root is <checkpoint>/events


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
