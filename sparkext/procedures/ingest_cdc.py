"""CALL sparkext.ingest_cdc(table, source, checkpoint [, primary_key, create, options]).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.cdc.ingest_cdc`, which does the work;
the options are declared in :mod:`sparkext.actions.cdc.options`). Debezium change events in a
file landing zone become equality-delete upserts into an Iceberg merge-on-read table, one atomic
commit per micro-batch.
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.cdc import options
from sparkext.actions.cdc.ingest_cdc import event_time, ingest_cdc
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:

    m = ingest_cdc(
        context,
        args["table"],
        args["source"],
        args["checkpoint"],
        args["primary_key"],
        args["create"],
        args.options,
    )
    return [
        (
            m.events,
            m.inserted,
            m.updated,
            m.deleted,
            m.duplicates,
            m.late,
            m.rejected,
            m.files_missing,
            m.commits,
            event_time(m.min_event_time_ms),
            event_time(m.max_event_time_ms),
            m.lookups_made,
            m.lookups_avoided,
            m.batches_replayed,
        )
    ]


ROUTINE = Routine(
    name="ingest_cdc",
    doc="Ingest Debezium change files into an Iceberg merge-on-read table (equality deletes).",
    params=(
        Param("table", ParamType.STRING, "target Iceberg table, e.g. 'lake.db.orders'", True),
        Param(
            "source",
            ParamType.STRING,
            "directory or glob of Debezium JSON-lines files, or kafka:<topic>[,<topic>...]",
            True,
        ),
        Param(
            "checkpoint", ParamType.STRING, "directory for progress, rejects and key cache", True
        ),
        Param("primary_key", ParamType.STRING, "key column(s), comma-separated"),
        Param("create", ParamType.BOOLEAN, "create the table from the first events", default=False),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=options.OPTIONS,
    output=(
        OutputColumn("events", "bigint", "change events read (tombstones excluded)"),
        OutputColumn("inserted", "bigint", "keys whose last change was c or r"),
        OutputColumn("updated", "bigint", "keys whose last change was u"),
        OutputColumn("deleted", "bigint", "keys whose last change was d"),
        OutputColumn("duplicates", "bigint", "events skipped: same key and source position"),
        OutputColumn("late", "bigint", "events older than the key's current version"),
        OutputColumn("rejected", "bigint", "events written to <checkpoint>/rejected"),
        OutputColumn(
            "files_missing",
            "bigint",
            "planned input files deleted before they were read (each also a rejected row)",
        ),
        OutputColumn("commits", "bigint", "Iceberg commits (one per micro-batch)"),
        OutputColumn("min_event_time", "timestamp", "earliest source.ts_ms applied"),
        OutputColumn("max_event_time", "timestamp", "latest source.ts_ms applied"),
        OutputColumn("lookups", "bigint", "keys looked up in the table"),
        OutputColumn("lookups_avoided", "bigint", "keys resolved without reading the table"),
        OutputColumn("batches_replayed", "bigint", "batches found already committed (restart)"),
    ),
    run=run,
)
