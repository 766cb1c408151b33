"""Write: a batch's data files (after-images), equality-delete files (key + full before-image)
and key cache in ONE job on executors, the event log with them or by a job of its own, and the
side outputs (rejects, late and duplicate events); files of a write that is not committed are
removed.

Floor: actions (driver side of ingest_cdc). Runs the writing jobs; commits nothing (commit.py).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sparkext.actions.cdc.checkpoint import remove_tree
from sparkext.actions.cdc.ingest.columns import (
    EVENT_TIME,
    OP,
    POSITION,
    event_log_columns,
    file_rows,
)
from sparkext.actions.cdc.ingest.figures import AppliedFigures, applied_figures, observed
from sparkext.actions.cdc.ingest.state import Written
from sparkext.errors import IngestError
from sparkext.executors.cdc.files import (
    DATA,
    EQUALITY_DELETES,
    EVENT_LOG,
    FILE_SCHEMA_DDL,
    KEY_LOG,
    KIND,
    EventLog,
    KeyLog,
    WrittenFile,
    file_writer,
    keep_only,
    remove_written,
)
from sparkext.fs import Location
from sparkext.identifiers import col, cols, map_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkext.actions.cdc.ingest.state import BatchState, Context, Plan
    from sparkext.actions.cdc.model import Metrics, Truncate

EVENT_LOG_EVENTS_PER_FILE = 25_000  # events per event-log file, up to one file per core


def write(
    context: Context,
    state: BatchState,
    plan: Plan,
    decided: DataFrame,
    truncate: Truncate | None,
    events: DataFrame | None = None,
) -> Written:
    """ONE job: the per-key decisions, the data and delete files and the key cache (written
    by the same tasks), with the batch's figures observed on the way; with ``events``, the
    batch's event log too (written by tasks of their own in the same job)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark, table, columns, key = context.spark, plan.table, plan.columns, plan.key
    batch_id = plan.batch_id
    observation = Observation()
    figures = applied_figures()
    applied = decided.observe(observation, *figures).where(F.col("status") == "apply")
    context.progress(f"batch {batch_id}: writing files")
    wiped = _wiped(context, plan.commit.start_snapshot_id, columns, truncate)
    rows = _rows(context, applied, columns, key, wiped)
    event_log = None
    if events is not None:
        event_dir = context.event_log_dir(batch_id)
        remove_tree(event_dir)  # a batch written again, or replayed, logs its events anew
        token = uuid.uuid4().hex[:12]
        event_log = EventLog(Location.of(event_dir).uri, spark.version, token)
        logged = events.select(
            F.lit(EVENT_LOG).alias(KIND), *event_log_columns(tuple(columns), key)
        )
        rows = rows.unionByName(logged.coalesce(event_log_files(context, state)))
    directory = table.data_directory()
    prefix = f"cdc-{context.checkpoint_id[:8]}-{batch_id:06d}-{uuid.uuid4().hex[:8]}"
    key_cache = context.key_cache_dir(batch_id)
    remove_tree(key_cache)  # a batch decided again, or replayed, starts its entries anew
    writer = file_writer(
        directory,
        plan.field_ids,
        prefix,
        table.partition_fields(),
        table.metrics_properties(),
        KeyLog(Location.of(key_cache).uri, tuple(key), POSITION, OP),  # absolute
        event_log,
    )
    written = map_in_arrow(rows, writer, FILE_SCHEMA_DDL)
    try:
        described = written.collect()  # one row per written file
    except Exception:
        remove_written(directory, prefix)  # files of the tasks that did finish
        raise
    files = [
        WrittenFile(
            r.path,
            r.kind,
            r.records,
            r.bytes,
            tuple(json.loads(r.partition or "[]")),
            r.metrics,
        )
        for r in described
        if r.kind in (DATA, EQUALITY_DELETES)
    ]
    # only the side files of this job's successful tasks: not a killed attempt's
    keep_only(key_cache, [r.path for r in described if r.kind == KEY_LOG])
    if event_log is not None:
        keep_only(event_log.directory, [r.path for r in described if r.kind == EVENT_LOG])
    stats = AppliedFigures.of(observed(observation, lambda: decided.agg(*figures).first()))
    return Written(files, stats, directory, prefix)


def discard(context: Context, plan: Plan, written: Written) -> None:
    """The files of a write whose batch is decided again or failed: not committed, never will
    be. Best effort (an orphan is harmless): never hides the error that led here."""
    with contextlib.suppress(Exception):
        plan.commit.discard(written.files)
    with contextlib.suppress(Exception):
        remove_written(written.directory, written.prefix)
    with contextlib.suppress(Exception):
        remove_tree(context.key_cache_dir(plan.batch_id))


def _wiped(
    context: Context, planned: int | None, columns: Mapping[str, str], truncate: Truncate | None
) -> DataFrame | None:
    """Rows a truncate removes when newer rows may exist: older than its position."""
    from pyspark.sql import functions as F

    if truncate is None or truncate.all:
        return None
    reader = context.spark.read
    if planned is not None:  # the snapshot the batch was planned on, like every read
        reader = reader.option("snapshot-id", planned)
    current = reader.table(context.settings.table)
    return current.where(F.col(POSITION) < F.lit(truncate.position)).select(
        F.lit(EQUALITY_DELETES).alias(KIND),
        *(col(c) for c in columns),
        F.lit("t").alias(OP),
        F.timestamp_millis(F.lit(truncate.event_time_ms).cast("bigint")).alias(EVENT_TIME),
        F.lit(truncate.position).alias(POSITION),
    )


def _rows(
    context: Context,
    applied: DataFrame,
    columns: Mapping[str, str],
    key: Sequence[str],
    wiped: DataFrame | None,
) -> DataFrame:
    """Data rows (after-images) and equality-delete rows (key + before-image) with __kind."""
    rows = file_rows(tuple(columns), tuple(key))
    both = applied.select(rows)
    if wiped is not None:
        both = both.unionByName(wiped)
    # already hash-partitioned by key from the dedup: narrow to a few files, no new shuffle
    return both.coalesce(
        max(1, context.spark.sparkContext.defaultParallelism // 2)
    ).sortWithinPartitions(*cols(key))


def write_event_log(context: Context, state: BatchState, typed: DataFrame, plan: Plan) -> str:
    """Every valid event of the batch, late and duplicate ones included, as Parquet (by a
    job of its own; a common batch's is written by its file writers, see :func:`write`).

    One row per event: key and user columns (the after-image; only the key for deletes,
    nothing for truncates), op, event time and source position. The snapshot summary points
    here (``sparkext.cdc.events-location``); snapshot_as_of_event_time replays these files.
    """
    path = context.event_log_dir(plan.batch_id)
    typed.select(*event_log_columns(tuple(plan.columns), plan.key)).coalesce(
        event_log_files(context, state)
    ).write.mode("overwrite").parquet(path)
    return path


def event_log_files(context: Context, state: BatchState) -> int:
    """Files of a batch's event log, written by the typing tasks themselves (no shuffle):
    one per 25,000 events, at most one per core, so a big batch is typed in parallel and a
    small one (or one of many small input partitions) does not leave small files. A batch
    typed with a guess is decoded by these tasks too: as many as its input has (up to one
    per core), its size being known only after them."""
    parallelism = context.spark.sparkContext.defaultParallelism
    wanted = max(state.input_partitions, -(-state.events // EVENT_LOG_EVENTS_PER_FILE))
    return max(1, min(parallelism, wanted))


def write_late(
    context: Context, typed: DataFrame, decided: DataFrame, key: Sequence[str], batch_id: int
) -> None:
    """The batch's late and duplicate events, with their images, under
    ``<checkpoint>/late/``."""
    from pyspark.sql import functions as F

    # every event at or below its key's current version, with its images: kept, not lost
    versions = decided.where(F.col("version").isNotNull()).select(*cols(key), "version")
    skipped = typed.where(F.col("op") != "t").join(versions, list(key))
    skipped.where(F.col("position") <= F.col("version")).select(
        *cols(key),
        F.when(F.col("position") == F.col("version"), "duplicate")
        .otherwise("late")
        .alias("status"),
        "op",
        "position",
        "event_time_ms",
        "version",
        "before_json",
        "after_json",
    ).coalesce(1).write.mode("overwrite").parquet(
        f"{context.settings.checkpoint}/late/batch={batch_id}"
    )


def record_rejects(
    context: Context,
    metrics: Metrics,
    rejects: DataFrame,
    batch_id: int,
    count: int | None,
    kind: str = "",
) -> None:
    """Write ``rejects`` when ``count`` says there are some; ``None``: there are, and they
    are counted as they are written (a count observed on a retried map stage can be too
    high; this write's result stage counts each row once)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark, settings = context.spark, context.settings
    path = f"{settings.checkpoint}/rejected/batch={batch_id}{kind}"
    if count is None:
        counting = Observation()
        rejects = rejects.coalesce(1).observe(counting, F.count(F.lit(1)).alias("n"))
        rejects.write.mode("overwrite").json(path)
        count = observed(
            counting,
            lambda: spark.read.json(path).agg(F.count(F.lit(1)).alias("n")).first(),
        )["n"]
        written = True
    else:
        written = False
    metrics.rejected += count
    if count:
        if not written:
            rejects.coalesce(1).write.mode("overwrite").json(path)
        if settings.fail_on_reject:
            raise IngestError(
                f"{count} event(s) were rejected and fail-on-reject is set; see {path}."
            )
