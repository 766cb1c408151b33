"""CALL / SELECT sparkext.cdc_lag(table [, as_of, options]): how far a CDC table is behind.

One row per ingest job (checkpoint) that wrote the table: the source commit time and position
its commits reached, the newest Debezium heartbeat it confirmed, and the lag behind the source
(sparkext.planning.lag). ``history => true`` gives one row per retained commit instead.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    parse_boolean,
)
from sparkext.times import from_millis

HISTORY = "history"
HISTORY_DEFAULT = "false"


def _time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else from_millis(ms)


def _as_of_ms(value: Any) -> int | None:
    from sparkext.errors import ProcedureArgumentError

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


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    from sparkext.actions.cdc.lag import table_lags
    from sparkext.planning.positions import family, readable

    table = args.table()
    context.progress(f"reading the commits of {table.name}")
    rows = table_lags(context.spark, table.name, _as_of_ms(args["as_of"]), args.options[HISTORY])
    return [
        (
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
        for r in rows
    ]


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
    options=(
        Option(
            HISTORY,
            HISTORY_DEFAULT,
            "one row per retained ingest_cdc commit (as_of = its commit time) instead of one "
            "per ingest job",
            parse_boolean,
        ),
    ),
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
