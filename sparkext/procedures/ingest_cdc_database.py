"""CALL sparkext.ingest_cdc_database(namespace, source, checkpoint [, options]).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.cdc.ingest_cdc`, which does the work;
the options are declared in :mod:`sparkext.actions.cdc.options`). Every Debezium topic of a
landing root (or of a Kafka topic pattern) into an Iceberg table of its own in ``namespace``,
created on first sight, each with its own commit per micro-batch, from one Spark stream and one
checkpoint (see :mod:`sparkext.actions.cdc.database`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions.cdc import options
from sparkext.actions.cdc.ingest_cdc import event_time, ingest_cdc_database
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:

    results = ingest_cdc_database(
        context, args["namespace"], args["source"], args["checkpoint"], args.options
    )
    return [
        (
            r.topic,
            r.table,
            r.created,
            r.metrics.events,
            r.metrics.inserted,
            r.metrics.updated,
            r.metrics.deleted,
            r.metrics.duplicates,
            r.metrics.late,
            r.metrics.rejected,
            r.metrics.files_missing,
            r.metrics.commits,
            r.metrics.batches_replayed,
            event_time(r.metrics.min_event_time_ms),
            event_time(r.metrics.max_event_time_ms),
            r.status,
        )
        for r in results
    ]


ROUTINE = Routine(
    name="ingest_cdc_database",
    doc="Ingest every Debezium topic of a landing root or Kafka pattern, one Iceberg table each.",
    params=(
        Param("namespace", ParamType.STRING, "namespace of the tables, e.g. 'lake.db'", True),
        Param(
            "source",
            ParamType.STRING,
            "landing root of a Kafka Connect sink (<root>/topics/<topic>/... or "
            "<root>/<topic>/...), or kafka:<topic regex>",
            True,
        ),
        Param(
            "checkpoint",
            ParamType.STRING,
            "one directory for the stream and every table's progress",
            True,
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=options.DATABASE_OPTIONS,
    output=(
        OutputColumn("topic", "string", "the Debezium topic (its directory under the root)"),
        OutputColumn("table", "string", "the Iceberg table it lands in (NULL: ignored)"),
        OutputColumn("created", "boolean", "whether this call created the table"),
        OutputColumn("events", "bigint", "change events read (an ignored topic: its records)"),
        OutputColumn("inserted", "bigint", "keys whose last change was c or r"),
        OutputColumn("updated", "bigint", "keys whose last change was u"),
        OutputColumn("deleted", "bigint", "keys whose last change was d"),
        OutputColumn("duplicates", "bigint", "events skipped: same key and source position"),
        OutputColumn("late", "bigint", "events older than the key's current version"),
        OutputColumn(
            "rejected", "bigint", "events written to <checkpoint>/tables/<table>/rejected"
        ),
        OutputColumn("files_missing", "bigint", "planned input files deleted before read"),
        OutputColumn("commits", "bigint", "Iceberg commits of the table (one per micro-batch)"),
        OutputColumn("batches_replayed", "bigint", "batches the table had committed (restart)"),
        OutputColumn("min_event_time", "timestamp", "earliest source.ts_ms applied"),
        OutputColumn("max_event_time", "timestamp", "latest source.ts_ms applied"),
        OutputColumn(
            "status",
            "string",
            "ok, no new events, <n> rejected, not created: ..., ignored: ... or excluded: ...",
        ),
    ),
    run=run,
)
