"""Decide: each key's last change in the batch applies, is late, or is a duplicate. Only keys
that may be out of order (position at or below the table's high-water mark) are compared with
their current version: the key cache first (keys of recent batches), then the table's rows and
deletes (event logs and equality-delete files), all as of the snapshot the batch was planned on.

Floor: actions (driver side of ingest_cdc). Builds the decisions as DataFrames; the writers'
job reads them (see write.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.actions.cdc.ingest.columns import OP, POSITION, all_applied, read_columns
from sparkext.identifiers import cols
from sparkext.literals import IN_LIST_PRUNES_MAX, in_list

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkext.actions.cdc.ingest.state import BatchState, Context, Plan
    from sparkext.iceberg.cdc_table import Progress


def decide(
    context: Context,
    state: BatchState,
    grouped: DataFrame,
    plan: Plan,
    known: str | None,
    progress: Progress,
) -> DataFrame:
    """Add ``status`` (apply / late / duplicate); look up only keys that may be out of order."""
    from pyspark.sql import functions as F

    truncate_position = progress.truncate_position

    position = F.col("last.position")
    if known is None:
        return all_applied(grouped)
    if state.all_newer(known):
        # every change is newer than anything applied: nothing can be late, no lookups; the
        # per-key rows are read once, by the writers: not cached
        return all_applied(grouped)
    grouped = state.persisted.persist(grouped)  # read by the check below, then by the writers
    suspicious = grouped.where(position <= F.lit(known))
    if suspicious.isEmpty():
        return all_applied(grouped)
    safe = grouped.where(position > F.lit(known)).withColumn("version", F.lit(None).cast("string"))
    version = _versions(context, state, suspicious, plan, progress)
    if truncate_position is not None:
        version = version.withColumn(
            "version", F.greatest(F.col("version"), F.lit(truncate_position))
        )
    combined = safe.withColumn("looked_up", F.lit(False)).unionByName(version)
    status = (
        F.when(F.col("version").isNull() | (position > F.col("version")), "apply")
        .when(position == F.col("version"), "duplicate")
        .otherwise("late")
    )
    return state.persisted.persist(combined.withColumn("status", status))  # the late events' too


def _versions(
    context: Context, state: BatchState, suspicious: DataFrame, plan: Plan, progress: Progress
) -> DataFrame:
    """Suspicious keys with ``version``: the key cache first, then the table's rows/deletes.

    Everything is read as of the snapshot the batch started from (the commit's check covers
    what comes after). The key cache only knows this checkpoint's writes: it decides alone
    only while no other writer changed data since this checkpoint's last commit.
    """
    from pyspark.sql import functions as F

    key = plan.key
    cache = None if progress.foreign_since_ours else _key_cache(context, plan, progress.cache_floor)
    keys = suspicious.select(*cols(key))
    if cache is not None:
        cached = keys.join(cache, list(key), "inner")
        unresolved = keys.join(cache.select(*cols(key)), list(key), "left_anti")
    else:
        cached = None
        unresolved = keys
    start = plan.commit.start_snapshot_id
    reader = context.spark.read
    if start is not None:
        reader = reader.option("snapshot-id", start)
    current = reader.table(context.settings.table).select(*cols(key), F.col(POSITION).alias("v"))
    tombstones = _tombstones(context, plan)
    versions = current if tombstones is None else current.unionByName(tombstones)
    unresolved = state.persisted.persist(unresolved)
    count = unresolved.count()
    listed = None
    if len(key) == 1 and count <= IN_LIST_PRUNES_MAX:
        # Iceberg skips files by their key bounds for a literal IN list of up to 200 values;
        # built as ONE expression (one py4j call); None: a key type without literals
        values = [r[0] for r in unresolved.collect()]  # at most 200 keys
        listed = in_list(key[0], values)
    if listed is not None:
        versions = versions.where(listed)
    elif count <= context.settings.lookup_in_list_max:
        # more keys prune no file: keep only their rows, without shuffling the table
        versions = versions.join(F.broadcast(unresolved), list(key), "left_semi")
    looked_up = (
        unresolved.join(versions, list(key), "left")
        .groupBy(*cols(key))
        .agg(F.max("v").alias("version"))
        .withColumn("looked_up", F.lit(True))
    )
    if cached is not None:
        looked_up = looked_up.unionByName(
            cached.withColumnRenamed("v", "version").withColumn("looked_up", F.lit(False))
        )
    return suspicious.join(looked_up, list(key), "left").withColumn(
        "looked_up", F.coalesce("looked_up", F.lit(False))
    )


def _tombstones(context: Context, plan: Plan) -> DataFrame | None:
    """Deleted keys with the deleting event's position.

    From the event logs of every checkpoint that wrote the table (every delete ever
    ingested, so still there after rewrite_equality_deletes turned the equality deletes into
    position deletes; the table's ``sparkext.cdc.event-logs`` property lists them) and from
    the equality-delete files live in the snapshot the batch started from. Another
    checkpoint's batches count up to the last one it committed.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    spark, own = context.spark, context.checkpoint_id
    key, batch_id = plan.key, plan.batch_id
    found: list[DataFrame] = []
    roots = {**plan.table.event_logs(), own: context.events_root()}
    # another writer's batch counts once committed (its log is written before the commit);
    # a checkpoint whose snapshots all expired counts whole
    committed = plan.table.committed_batches() if len(roots) > 1 else {}
    narrower = plan.table.key_was_narrower(key)
    for checkpoint, root in sorted(roots.items()):
        try:
            # the columns wanted, in the table's types: older batches' files may hold a
            # narrower type of a widened column (int before bigint), which no schema merge
            # of the footers accepts
            logs = read_columns(
                spark, [root], plan.columns, key, (OP, "string"), (POSITION, "string"),
                ("batch", "int"), narrower_keys=narrower, base_path=root,
            )  # fmt: skip
        except AnalysisException:  # no event log yet, or a removed checkpoint
            continue
        deleted = F.col(OP) == "d"
        if checkpoint == own:
            deleted = deleted & (F.col("batch") < batch_id)  # not this batch's own
        elif checkpoint in committed:
            deleted = deleted & (F.col("batch") <= committed[checkpoint])
        found.append(logs.where(deleted).select(*cols(key), F.col(POSITION).alias("v")))
    paths = plan.table.equality_delete_paths(plan.commit.start_snapshot_id)
    if paths:
        # files without a position (another engine's) read it as NULL, which never wins
        deletes = read_columns(
            spark, paths, plan.columns, key, (POSITION, "string"), narrower_keys=narrower
        )
        found.append(
            deletes.where(F.col(POSITION).isNotNull()).select(
                *cols(key), F.col(POSITION).alias("v")
            )
        )
    if not found:
        return None
    union = found[0]
    for more in found[1:]:
        union = union.unionByName(more)
    return union


def _key_cache(context: Context, plan: Plan, floor: int | None = None) -> DataFrame | None:
    """Keys -> versions this checkpoint applied in its recent batches; only batches from
    ``floor`` on (committed after every other writer's change)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    key, batch_id = plan.key, plan.batch_id
    path = context.key_cache_dir()
    try:  # "batch" comes from the batch=N directories
        cache = read_columns(
            context.spark, [path], plan.columns, key, ("position", "string"), ("batch", "int"),
            narrower_keys=plan.table.key_was_narrower(key), base_path=path,
        )  # fmt: skip
    except AnalysisException:  # no cache yet
        return None
    keep_from = max(batch_id - context.settings.key_cache_batches, floor or 0)
    return (
        cache.where((F.col("batch") < batch_id) & (F.col("batch") >= keep_from))
        .groupBy(*cols(key))
        .agg(F.max("position").alias("v"))
    )
