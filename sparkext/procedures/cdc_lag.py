"""CALL / SELECT sparkext.cdc_lag(table [, as_of, options]): how far a CDC table is behind.

One row per ingest job (checkpoint) that wrote the table: the source commit time and position
its commits reached, the newest Debezium heartbeat it confirmed, and the lag behind the source
(sparkext.planning.lag). ``history => true`` gives one row per retained commit instead.

Floor: procedures (the SQL façade of :mod:`sparkext.actions.cdc.lag`, which does the work and
declares the options).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.cdc import lag as action
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    rows = action.cdc_lag(
        context.spark,
        args.table().name,
        args["as_of"],
        args.options[action.HISTORY],
        context.progress,
    )
    return [r.row() for r in rows]


ROUTINE = Routine(
    writes=False,
    name="cdc_lag",
    doc="How far a CDC table is behind its source, per ingest job (heartbeats count when idle).",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    params=(
        Param("table", ParamType.TABLE, "Iceberg table written by ingest_cdc", True),
        Param("as_of", ParamType.TIMESTAMP, "the time to measure lag at (default: now)"),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.OPTIONS,
    output=(
        OutputColumn("checkpoint_id", "string", "the ingest job (its checkpoint's id)"),
        OutputColumn("checkpoint", "string", "the job's checkpoint directory"),
        OutputColumn("snapshot_id", "bigint", "its newest commit (history: this commit)"),
        OutputColumn("committed_at", "timestamp", "when that commit was made"),
        OutputColumn("batch_id", "bigint", "the micro-batch that commit applied"),
        OutputColumn(
            "source_time",
            "timestamp",
            "newest source commit time (source.ts_ms) applied by then",
        ),
        OutputColumn(
            "source_position",
            "string",
            "newest source position applied, as the connector writes it (LSN, binlog file and "
            "position, SCN, ...)",
        ),
        OutputColumn("position_family", "string", "m, p, pl, s, o, g or t (ingest_cdc docs)"),
        OutputColumn("position_key", "string", "the same position as ingest_cdc orders it"),
        OutputColumn(
            "heartbeat_time",
            "timestamp",
            "newest Debezium heartbeat confirmed (heartbeat-source option of ingest_cdc)",
        ),
        OutputColumn(
            "complete_through",
            "timestamp",
            "the lake holds every source change up to here: the later of source_time and "
            "heartbeat_time",
        ),
        OutputColumn("as_of", "timestamp", "the time lag is measured at"),
        OutputColumn("lag_ms", "bigint", "as_of - complete_through, in milliseconds"),
        OutputColumn(
            "commit_delay_ms",
            "bigint",
            "committed_at - the newest source change of that batch, in milliseconds",
        ),
    ),
    run=run,
)
