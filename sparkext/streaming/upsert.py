"""Upserts into a primary-key sink: the rows of every key that changed, in one Iceberg commit.

An updating query (an aggregate without a window, keep-last dedup, Top-N, a join without a time
bound) is evaluated over the whole history twice — before the range's end (``new``) and before
its start (``old``; in stream mode the sink itself) — and the difference is written the way
Flink's upsert sinks and ``ingest_cdc`` write: for a key whose row changed, an equality delete
on the key and the new row; for a key that disappeared, the delete alone. Both kinds go into one
snapshot, where Iceberg applies the deletes only to older data (a delete and its new row share a
sequence number). Files are written on the executors (:mod:`sparkext.executors.cdc.files`); the
driver
commits them through the commit layer, validated from the snapshot the write started from: any
other commit to the sink meanwhile (a compaction excepted) fails the write, which then removes
its files and says so in one sentence.

Floor: streaming.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.errors import CommitConflictError, StreamingWriteError
from sparkext.executors.cdc.files import (
    DATA,
    EQUALITY_DELETES,
    FILE_SCHEMA_DDL,
    KIND,
    WrittenFile,
    file_writer,
)
from sparkext.executors.cdc.files import remove_written as remove
from sparkext.executors.cdc.partitioning import unsupported
from sparkext.iceberg.catalog import metadata_name
from sparkext.iceberg.cdc_table import CdcTable
from sparkext.iceberg.commit import discard_unless_unknown
from sparkext.identifiers import col, cols, map_in_arrow

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from sparkext.iceberg.cdc_table import ConcurrentChange

PRESENT = "_sparkext_present"
UNTIL = "sparkext.upsert.until"  # snapshot summary: the point in time the sink's keys are at


@dataclass(frozen=True)
class UpsertResult:
    snapshot_id: int | None  # None: no key changed, nothing committed
    upserted: int  # keys written with a new row
    deleted: int  # keys that disappeared


def _same(left: str, right: str, columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    same = F.lit(True)
    for name in columns:
        same = same & col(left, name).eqNullSafe(col(right, name))
    return same


def _one_per_key(frame: DataFrame, key: Sequence[str]) -> DataFrame:
    """One row per key: the greatest (a deterministic pick, so every evaluation of the plan
    agrees; Flink keeps whichever came last)."""
    from pyspark.sql import functions as F

    columns = list(frame.columns)
    others = [c for c in columns if c not in key]
    if not others:
        return frame.distinct()
    return (
        frame.groupBy(*cols(key))
        .agg(F.max(F.struct(*cols(others))).alias("_row"))
        .select(*cols(key), *[col("_row", c).alias(c) for c in others])
        .select(*cols(columns))
    )


def changes(
    new: DataFrame, old: DataFrame | None, key: Sequence[str], sink: DataFrame | None = None
) -> DataFrame:
    """The rows to write, with ``__kind``: a changed key's new row (DATA) and its equality
    delete (EQUALITY_DELETES, carrying the same values), and a vanished key's delete.

    ``new`` and ``old`` have the sink's columns; rows are compared null-safely, column by
    column. A key the query gives twice keeps its greatest row. ``old`` None: every key of
    ``new`` is written, none deleted. ``sink``: the sink's rows; a change it already holds is
    left out (a replay writes nothing).
    """
    from pyspark.sql import functions as F

    columns = list(new.columns)
    n = _one_per_key(new, key).withColumn(PRESENT, F.lit(True)).alias("n")
    vanished = None
    if old is not None and sink is None:  # one pass over one join: the common case
        o = _one_per_key(old.select(*cols(columns)), key).withColumn(PRESENT, F.lit(True))
        joined = n.join(
            o.alias("o"), [col("n", k).eqNullSafe(col("o", k)) for k in key], "full_outer"
        )
        written, gone = col("n", PRESENT), col("n", PRESENT).isNull()
        kinds = (
            F.when(
                written & (col("o", PRESENT).isNull() | ~_same("n", "o", columns)),
                F.array(F.lit(DATA), F.lit(EQUALITY_DELETES)),
            )
            .when(gone, F.array(F.lit(EQUALITY_DELETES)))
            .otherwise(F.array().cast("array<int>"))
        )
        values = [F.when(written, col("n", c)).otherwise(col("o", c)).alias(c) for c in columns]
        return joined.select(F.explode(kinds).alias(KIND), *values)
    if old is None:
        changed = n.select(*cols(columns))
    else:
        o = _one_per_key(old.select(*cols(columns)), key).withColumn(PRESENT, F.lit(True))
        joined = n.join(
            o.alias("o"), [col("n", k).eqNullSafe(col("o", k)) for k in key], "full_outer"
        )
        changed = joined.where(
            col("n", PRESENT) & (col("o", PRESENT).isNull() | ~_same("n", "o", columns))
        ).select(*[col("n", c).alias(c) for c in columns])
        vanished = joined.where(col("n", PRESENT).isNull()).select(
            *[col("o", c).alias(c) for c in columns]
        )
    if sink is not None:
        s = sink.select(*cols(columns)).alias("s")
        changed = changed.alias("c").join(s, _same("c", "s", columns), "left_anti")
        if vanished is not None:
            keys = [col("v", k).eqNullSafe(col("s", k)) for k in key]
            vanished = vanished.alias("v").join(s, keys, "left_semi")
    # both kinds from the same row: a delete and its new row can never disagree
    both = F.explode(F.array(F.lit(DATA), F.lit(EQUALITY_DELETES))).alias(KIND)
    rows = changed.select(both, *cols(columns))
    if vanished is not None:
        rows = rows.unionByName(
            vanished.select(F.lit(EQUALITY_DELETES).alias(KIND), *cols(columns))
        )
    return rows


def upserted_until(spark: SparkSession, sink: str) -> datetime | None:
    """The newest point in time an upsert brought ``sink``'s keys to (the largest
    ``sparkext.upsert.until`` of its retained snapshots), as an instant."""
    from pyspark.sql import functions as F

    marks = (
        spark.table(metadata_name(spark, sink, "snapshots"))
        .select(F.col("summary")[UNTIL].alias("until"))
        .where(F.col("until").isNotNull())
        .distinct()
        .collect()  # metadata: one value per upsert commit at most
    )
    found = [times.parse_instant(m.until) for m in marks]
    return max(found) if found else None


def upsert(
    spark: SparkSession,
    sink: str,
    key: Sequence[str],
    new: DataFrame,
    old: DataFrame | None,
    summary: Mapping[str, str],
    run_id: str,
    rerun_hint: str,
    against_sink: bool = False,
) -> UpsertResult:
    """Write the difference between ``old`` and ``new`` into ``sink`` in one commit.

    ``against_sink``: compare ``new`` with the sink's own rows instead of ``old`` — a stream's
    sink converges on the query's rows, late rows included. Either way a change the sink
    already holds (read at the snapshot the commit is validated from) is not written again.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    by_lower = {c.lower(): c for c in new.columns}
    key = [by_lower.get(k.lower(), k) for k in key]  # as the sink spells its columns
    table = CdcTable(spark, sink)
    table.refresh()
    bad = unsupported(table.partition_fields(), list(key))
    if bad:
        raise StreamingWriteError(
            f"{sink} is partitioned by {', '.join(bad)}, which is not derived from its primary "
            f"key ({', '.join(key)}); an upsert sink needs partition fields on key columns "
            "(identity, bucket[N] or truncate[W]) so a key's deletes land in its rows' partition."
        )
    commit = table.begin()  # validated from here: the snapshot before the rows were computed
    held = None  # the sink's rows at the snapshot the commit is validated from
    if commit.start_snapshot_id is not None:
        reader = spark.read.option("snapshot-id", str(commit.start_snapshot_id))
        held = reader.table(sink).select(*cols(new.columns))
    # compared with the sink itself, nothing it holds is written again anyway
    rows = changes(new, held, key) if against_sink else changes(new, old, key, held)
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    null_key = F.lit(False)
    for k in key:
        null_key = null_key | col(k).isNull()
    try:
        stats = rows.agg(
            F.sum(F.when(F.col(KIND) == DATA, 1).otherwise(0)).alias("upserted"),
            F.sum(F.when(F.col(KIND) != DATA, 1).otherwise(0)).alias("deletes"),
            F.sum(F.when((F.col(KIND) == DATA) & null_key, 1).otherwise(0)).alias("null_keys"),
        ).first()  # one row
        assert stats is not None  # an aggregate without grouping has exactly one row
        if stats.null_keys:
            raise StreamingWriteError(
                f"{stats.null_keys} row(s) for {sink} have a NULL in the primary key "
                f"({', '.join(key)}), which a key column cannot hold; filter them out or "
                "COALESCE the key in the query."
            )
        upserted, deleted = (
            int(stats.upserted or 0),
            int(stats.deletes or 0) - int(stats.upserted or 0),
        )
        if not upserted and not deleted:
            return UpsertResult(None, 0, 0)
        directory = table.data_directory()
        prefix = f"upsert-{run_id[:8]}-{uuid.uuid4().hex[:8]}"
        writer = file_writer(
            directory,
            commit.field_ids(),
            prefix,
            table.partition_fields(),
            table.metrics_properties(),
        )
        ordered = rows.coalesce(max(1, spark.sparkContext.defaultParallelism // 2))
        written = map_in_arrow(ordered.sortWithinPartitions(*cols(key)), writer, FILE_SCHEMA_DDL)
        try:
            described = written.collect()  # one small row per written file
        except Exception:
            remove(directory, prefix)
            raise
    finally:
        rows.unpersist()
    files = [
        WrittenFile(
            r.path, r.kind, r.records, r.bytes, tuple(json.loads(r.partition or "[]")), r.metrics
        )
        for r in described
    ]

    def check(concurrent: Sequence[ConcurrentChange]) -> None:
        others = [c for c in concurrent if c.operation != "replace"]
        if others:
            raise CommitConflictError(
                f"Another writer committed to {sink} (snapshot {others[0].snapshot_id}) while "
                f"this upsert was computed; nothing was written: {rerun_hint}."
            )

    with discard_unless_unknown(lambda: commit.discard(files), sink, "this batch"):
        snapshot_id = commit.commit(
            files, list(key), dict(summary), truncate=False, run_id=run_id, check=check
        )
    return UpsertResult(snapshot_id, upserted, deleted)
