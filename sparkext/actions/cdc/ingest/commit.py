"""Commit: a batch's files and its source progress as ONE Iceberg transaction, checked against
what other writers committed since it was planned; the commit policy of ingest_cdc in one place.

Floor: actions (driver side of ingest_cdc). The policy: a batch is one atomic commit whose
snapshot summary records its checkpoint and batch id (a replayed batch is skipped, so a restart
after a crash applies it exactly once); an unknown commit state keeps the files (the commit may
have landed), any other failure discards them; a batch whose keys another writer changed
meanwhile raises :class:`KeysChanged` (the pipeline decides it again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sparkext.actions.cdc.checkpoint import remove_batches_before, remove_tree
from sparkext.actions.cdc.ingest.columns import read_columns
from sparkext.actions.cdc.ingest.write import discard, write_late
from sparkext.actions.cdc.model import max_position
from sparkext.errors import BatchOutdatedError
from sparkext.iceberg import cdc_table as keys
from sparkext.iceberg.commit import discard_unless_unknown
from sparkext.identifiers import cols

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkext.actions.cdc.ingest.state import Context, Plan, Written
    from sparkext.actions.cdc.model import Metrics, Truncate
    from sparkext.iceberg.cdc_table import ConcurrentChange, Progress


class KeysChanged(BatchOutdatedError):
    """Another writer committed changes to keys of this batch after it was decided."""


def commit_batch(
    context: Context,
    metrics: Metrics,
    plan: Plan,
    typed: DataFrame,
    decided: DataFrame,
    truncate: Truncate | None,
    progress: Progress,
    bounds: tuple[int | None, int | None, str],
    written: Written,
    committed: Callable[[int], None],
) -> None:
    """Count the batch's figures, keep its late events, and commit it; ``committed(batch_id)``
    once its snapshot is in the table."""
    from pyspark.sql import functions as F

    commit, key = plan.commit, plan.key
    batch_id, per_partition = plan.batch_id, plan.per_partition
    files, stats = written.files, written.figures
    m = metrics
    m.inserted += stats.inserted
    m.updated += stats.updated
    m.deleted += stats.deleted
    m.late += stats.late
    m.duplicates += stats.duplicate_keys + stats.duplicates_in_batch
    m.lookups_made += stats.lookups
    m.lookups_avoided += stats.keys - stats.lookups
    m.add_times(stats.min_time, stats.max_time)

    if stats.late or stats.duplicate_keys:
        try:
            write_late(context, typed, decided, key, batch_id)
        except BaseException:
            discard(context, plan, written)  # never committed: no file of it may stay
            raise
    applied = decided.where(F.col("status") == "apply")  # not observed: read again below
    context.hooks.reached("after-write")

    truncate_position = truncate.position if truncate else None
    new_position = max_position(progress.max_position, stats.max_position, truncate_position)
    merged = dict(progress.source_progress)
    for partition, pos in per_partition.items():
        if pos is not None:
            merged[partition] = max_position(merged.get(partition), pos) or pos
    summary = {
        keys.CHECKPOINT_ID: context.checkpoint_id,
        keys.BATCH_ID: str(batch_id),
        keys.SOURCE_PROGRESS: json.dumps(merged, sort_keys=True),
    }
    if new_position is not None:
        summary[keys.MAX_POSITION] = new_position
    truncate_mark = max_position(progress.truncate_position, truncate_position)
    if truncate_mark is not None:
        summary[keys.TRUNCATE_POSITION] = truncate_mark
    low, high, events_location = bounds
    summary[keys.EVENTS_LOCATION] = events_location
    if low is not None and high is not None:  # both or neither: bounds of the same events
        summary[keys.EVENT_TIME_MIN] = str(low)
        summary[keys.EVENT_TIME_MAX] = str(high)
        so_far = progress.event_time_max_so_far
        summary[keys.EVENT_TIME_MAX_SO_FAR] = str(high if so_far is None else max(so_far, high))
    if not files and truncate_position is None and low is None:
        return  # no valid event at all (only rejects or tombstones): nothing to record
    # A batch of only late or duplicate events still commits (no files): its snapshot
    # carries the event log an event-time snapshot needs, and replay safety stays uniform.
    context.progress(f"batch {batch_id}: committing {len(files)} file(s)")

    def check(changes: Sequence[ConcurrentChange]) -> None:
        check_changes(
            context, changes, applied, key, truncate is not None, progress.truncate_position
        )

    # the one policy: a failed commit deletes the batch's files unless its state is unknown
    what = f"micro-batch {batch_id}"
    with discard_unless_unknown(lambda: commit.discard(files), context.settings.table, what):
        snapshot = commit.commit(
            files,
            key,
            summary,
            truncate=truncate is not None and truncate.all,
            check=check,
            event_log=(context.checkpoint_id, context.events_root()),
            what=what,
        )
    m.commits += 1
    m.snapshot_ids.append(snapshot)
    committed(batch_id)
    context.progress(f"batch {batch_id}: committed snapshot {snapshot}")
    context.hooks.reached("after-commit")
    _prune_key_cache(context, batch_id)


def check_changes(
    context: Context,
    changes: Sequence[ConcurrentChange],
    applied: DataFrame,
    key: Sequence[str],
    truncating: bool,
    planned_truncate: str | None = None,
) -> None:
    """Raise :class:`KeysChanged` when a snapshot committed since the plan touched a key this
    batch writes (the batch must be decided again); pass when the writers' keys are disjoint.

    Every key an ingest_cdc commit changes is in its equality-delete files, so overlap is a
    semi-join of those files' keys with the batch's (on executors). Compactions and delete
    rewrites ("replace") change no row; other writers' commits, truncates and row-level
    rewrites cannot be read cheaply and always count as touching.
    """
    if truncating and changes:  # a truncate removes the planned files: any change counts
        first = changes[0]
        raise KeysChanged(f"snapshot {first.snapshot_id} ({first.operation}) was committed")
    changing = [c for c in changes if c.operation != "replace"]
    if not changing:
        return
    opaque = [
        c
        for c in changing
        if c.checkpoint_id is None
        or c.removed_data_files
        or (  # another writer's truncate reaches keys it did not list
            c.truncate_position is not None
            and (planned_truncate is None or c.truncate_position > planned_truncate)
        )
    ]
    if opaque:
        first = (opaque or changing)[0]
        raise KeysChanged(
            f"snapshot {first.snapshot_id} ({first.operation}) was committed meanwhile"
        )
    paths = sorted({p for c in changing for p in c.equality_delete_paths})
    if not paths:
        return
    key_types = {f.name: f.dataType.simpleString() for f in applied.select(*cols(key)).schema}
    touched = read_columns(context.spark, paths, key_types, key)
    if not touched.join(applied.select(*cols(key)), list(key), "left_semi").isEmpty():
        raise KeysChanged(
            f"another writer changed keys of this batch (snapshot {changing[-1].snapshot_id})"
        )


def _prune_key_cache(context: Context, batch_id: int) -> None:
    remove_batches_before(context.key_cache_dir(), batch_id - context.settings.key_cache_batches)
    # the key cache Spark wrote before the writers kept it (a cache: only lookups it saved)
    remove_tree(context.legacy_key_cache_dir())
