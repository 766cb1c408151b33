"""Run one planned round of rewrite_equality_deletes: Spark jobs on executors, then one commit.

1. Keys of the equality-delete files to convert are read on executors (by field id).
2. Rows some delete removes at the plan's snapshot (``_deleted``; key columns, ``_file``, ``_pos``
   only) are joined to them: null-safe equality on every key column, the data file older than the
   delete (data sequence number < the delete's), same partition unless the delete is table-wide.
3. Positions of existing position-delete files / DVs being merged are added, minus those whose
   data file is gone (dangling).
4. Executors write Parquet position-delete files (v2) or one DV per data file in Puffin files
   (v3); the driver collects one small row per written file and commits ONE RewriteFiles.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from sparkext.errors import SparkextError
from sparkext.executors.cdc.files import remove_written
from sparkext.executors.deletes.writers import (
    DIRECT_READ_UNSUPPORTED,
    WRITTEN_DDL,
    data_key_reader,
    deletion_vector_writer,
    direct_delete_writer,
    equality_key_reader,
    position_delete_writer,
)
from sparkext.iceberg.commit import discard_unless_unknown
from sparkext.iceberg.delete_files import OPERATION, SUMMARY_OPERATION, NewDeleteFile
from sparkext.literals import in_list
from sparkext.planning.equality_deletes import DeleteFileFact, RoundPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from sparkext.iceberg.delete_files import DeleteTable, KeyColumn


@dataclass(frozen=True)
class RoundResult:
    equality_files_removed: int
    position_files_added: int
    deletion_vectors_added: int
    positions: int
    position_files_merged: int
    dangling_positions: int
    bytes_added: int
    snapshot_id: int | None


ROWS_PER_TASK = 1_000_000  # data rows whose keys one task reads
BROADCAST_KEYS_MAX = 2_000_000  # delete keys up to this many rows are broadcast to the join


def _candidate_rows(
    spark: SparkSession,
    table: DeleteTable,
    snapshot_id: int,
    files: Sequence[DeleteFileFact],
    keys: Sequence[KeyColumn],
    data_files: DataFrame,
    where: str | None,
    has_global: bool,
    iceberg_reader: bool = False,
) -> tuple[DataFrame, bool]:
    """Data rows that may match a delete key: file_path, pos, d0..dn, data_seq, pkey.

    Parquet data files are read directly on executors (key columns only, prefiltered on the
    first key column); otherwise Iceberg's scan with ``_deleted`` gives only deleted rows.
    Returns the rows and whether they are already the exact matches (one key column, direct
    read: the prefilter compared against applicable deletes only, nulls matching nulls).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    candidates = None if iceberg_reader else _candidate_files(spark, files, data_files, has_global)
    if candidates is None:
        rows = table.deleted_rows(snapshot_id, keys, None if has_global else where)
        return rows.join(data_files, "file_path"), False
    ddl = ", ".join(
        ["file_path string", "pos bigint", "data_seq bigint", "pkey string"]
        + [f"d{i} {k.spark_type}" for i, k in enumerate(keys)]
    )
    arrow = to_arrow_schema(spark.createDataFrame([], ddl).schema)
    deletes = [(f.path, f.sequence_number, None if f.is_global else f.partition) for f in files]
    reader = data_key_reader([k.field_id for k in keys], deletes, arrow)
    # pyspark's stubs want Iterable -> Iterable; the readers take and give iterators
    return candidates.mapInArrow(reader, ddl), len(keys) == 1  # type: ignore[arg-type]


def _candidate_files(
    spark: SparkSession, files: Sequence[DeleteFileFact], data_files: DataFrame, has_global: bool
) -> DataFrame | None:
    """Data files some of ``files`` may apply to, as a DataFrame of (file_path, data_seq, pkey)
    spread evenly over tasks by row count; None when one of them is not Parquet (then
    Iceberg's own reader is used). Collects one metadata row per candidate data file."""
    from pyspark.sql import functions as F

    newest = max(f.sequence_number for f in files)
    candidates = data_files.where(F.col("data_seq") < newest)
    if not has_global:
        partitions = in_list("pkey", sorted({f.partition for f in files}))
        assert partitions is not None  # strings always have a literal
        candidates = candidates.where(partitions)
    described = candidates.select("file_path", "data_seq", "pkey", "format", "records").collect()
    if any(d.format != "PARQUET" for d in described):
        return None
    # Every Python task costs a fixed ~0.2 s here: as few tasks as the data needs, at most
    # one wave of the cluster's cores.
    total = sum(d.records for d in described)
    tasks = max(
        1,
        min(len(described), spark.sparkContext.defaultParallelism, -(-total // ROWS_PER_TASK)),
    )
    buckets: list[list[tuple[str, int, str]]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for d in sorted(described, key=lambda d: -d.records):  # biggest first, to the lightest task
        i = loads.index(min(loads))
        buckets[i].append((d.file_path, d.data_seq, d.pkey))
        loads[i] += d.records
    # mypy cannot infer a lambda with a default argument (b binds the buckets for the tasks)
    rdd = spark.sparkContext.parallelize(range(tasks), tasks).flatMap(lambda i, b=buckets: b[i])  # type: ignore[misc]
    return spark.createDataFrame(rdd, "file_path string, data_seq bigint, pkey string")


def _direct(
    spark: SparkSession,
    table: DeleteTable,
    plan: RoundPlan,
    data_files: DataFrame,
    directory: str,
    v3: bool,
    target_file_size: int,
) -> list[Row] | None:
    """One job that matches and writes (single key column, nothing to merge); None if it
    does not apply."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if len(plan.equality_ids) != 1 or len(plan.equality_ids[0]) != 1 or plan.merge:
        return None
    has_global = any(f.is_global for f in plan.convert)
    candidates = _candidate_files(spark, plan.convert, data_files, has_global)
    if candidates is None:
        return None
    (key,) = table.key_columns(plan.equality_ids[0])
    first_type = to_arrow_schema(spark.createDataFrame([], f"k {key.spark_type}").schema)[0].type
    deletes = [
        (f.path, f.sequence_number, None if f.is_global else f.partition) for f in plan.convert
    ]
    prefix = f"rewrite-{uuid.uuid4().hex[:8]}"
    writer = direct_delete_writer(
        key.field_id, first_type, deletes, directory, prefix, v3, target_file_size
    )
    # pyspark's stubs want Iterable -> Iterable; the writers take and give iterators
    return _collect_written(candidates.mapInArrow(writer, WRITTEN_DDL), directory, prefix)  # type: ignore[arg-type]


def _collect_written(frame: DataFrame, directory: str, prefix: str) -> list[Row]:
    """Run a writer job and collect its one row per file; a failed job leaves no files."""

    try:
        return frame.collect()
    except Exception:
        remove_written(directory, prefix)  # files of the tasks that did finish
        raise


def _equality_positions(
    spark: SparkSession,
    table: DeleteTable,
    snapshot_id: int,
    plan: RoundPlan,
    data_files: DataFrame,
    where: str | None,
    iceberg_reader: bool = False,
) -> tuple[DataFrame | None, bool]:
    """Positions (file_path, pos, pkey) the equality deletes remove; and whether each occurs
    once (no dedup needed)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    parallelism = spark.sparkContext.defaultParallelism
    has_global = any(f.is_global for f in plan.convert)
    out = None
    unique = len(plan.equality_ids) == 1
    for ids in plan.equality_ids:
        keys = table.key_columns(ids)
        files = [f for f in plan.convert if f.equality_ids == ids]
        ddl = ", ".join(
            ["del_seq bigint", "del_pkey string"]
            + [f"k{i} {k.spark_type}" for i, k in enumerate(keys)]
        )
        rows, exact = _candidate_rows(
            spark, table, snapshot_id, files, keys, data_files, where, has_global, iceberg_reader
        )
        if exact:
            joined = rows.select("file_path", "pos", "pkey")
            out = joined if out is None else out.unionByName(joined)
            continue
        unique = False
        arrow = to_arrow_schema(spark.createDataFrame([], ddl).schema)
        descriptors = spark.createDataFrame(
            [(f.path, f.sequence_number, None if f.is_global else f.partition) for f in files],
            "path string, del_seq bigint, del_pkey string",
        ).repartition(max(1, min(len(files), parallelism)))
        # pyspark's stubs want Iterable -> Iterable; the readers take and give iterators
        delete_keys = descriptors.mapInArrow(equality_key_reader(ids, arrow), ddl)  # type: ignore[arg-type]
        if sum(f.records for f in files) <= BROADCAST_KEYS_MAX:
            delete_keys = F.broadcast(delete_keys)
        matches = reduce(
            lambda a, b: a & b,
            [rows[f"d{i}"].eqNullSafe(delete_keys[f"k{i}"]) for i in range(len(keys))],
        )
        joined = (
            rows.join(delete_keys, matches)
            .where(
                (F.col("data_seq") < F.col("del_seq"))
                & (F.col("del_pkey").isNull() | (F.col("del_pkey") == F.col("pkey")))
            )
            .select("file_path", "pos", "pkey")
        )
        out = joined if out is None else out.unionByName(joined)
    return out, unique


def run_round(
    spark: SparkSession,
    table: DeleteTable,
    snapshot_id: int,
    plan: RoundPlan,
    where: str | None,
    target_file_size: int,
    progress: Callable[[str], None],
    file_granularity: bool = True,
) -> RoundResult:
    """Match, write and commit one planned round.

    The data side is read straight from Parquet first; if an executor cannot (no field ids, a
    filesystem pyarrow does not know, a key column missing from an old file) the round is
    redone with Iceberg's own reader, which handles all of those.
    """

    args = (spark, table, snapshot_id, plan, where, target_file_size, progress, file_granularity)
    try:
        outcome = _write(*args, iceberg_reader=False)
    except SparkextError:
        raise
    except Exception as error:
        if DIRECT_READ_UNSUPPORTED not in str(error):
            raise  # a real failure: reported as itself, not hidden by a second run
        reason = str(error).split(DIRECT_READ_UNSUPPORTED + ": ", 1)[-1].splitlines()[0]
        progress(
            f"reading Parquet keys directly is not possible ({reason[:200]}); "
            "using Iceberg's reader"
        )
        outcome = _write(*args, iceberg_reader=True)
    return _commit(table, snapshot_id, plan, *outcome, progress)


def _write(
    spark: SparkSession,
    table: DeleteTable,
    snapshot_id: int,
    plan: RoundPlan,
    where: str | None,
    target_file_size: int,
    progress: Callable[[str], None],
    file_granularity: bool,
    iceberg_reader: bool,
) -> tuple[list[Row], list[DeleteFileFact], list[DeleteFileFact], int, bool]:
    """Run the Spark jobs of a round; return what the commit needs."""
    from pyspark.sql import functions as F

    v3 = table.format_version() >= 3
    data_files = table.data_files(snapshot_id).cache()
    progress(f"matching {len(plan.convert)} equality-delete files against data rows")
    if (v3 or file_granularity) and not iceberg_reader:
        direct = _direct(
            spark, table, plan, data_files, table.data_directory(), v3, target_file_size
        )
        if direct is not None:
            data_files.unpersist()
            return direct, [], [], 0, v3
    positions, unique = _equality_positions(
        spark, table, snapshot_id, plan, data_files, where, iceberg_reader
    )
    merge = list(plan.merge)
    dangling_dvs: list[DeleteFileFact] = []
    if (v3 or file_granularity) and merge:
        if positions is not None:  # used twice: which data files are hit, then the write
            positions = positions.persist()
        merge, dangling_dvs = _scoped_to_merge(table, merge, positions, data_files)
    existing = None
    dangling_positions = 0
    if merge:
        progress(f"merging {len(merge)} position-delete files")
        held = table.positions_of(merge).join(data_files, "file_path", "left")
        live = held.where(F.col("data_seq").isNotNull() & (F.col("data_seq") <= F.col("del_seq")))
        dangling_positions = held.where(F.col("data_seq").isNull()).count()
        existing = live.select("file_path", "pos", "pkey")
    parts = [p for p in (positions, existing) if p is not None]
    written: list[Row] = []
    if parts:
        every = reduce(lambda a, b: a.unionByName(b), parts)
        if len(parts) > 1 or not unique:
            every = every.distinct()
        prefix = f"rewrite-{uuid.uuid4().hex[:8]}"
        directory = table.data_directory()
        shuffle_conf = spark.conf.get("spark.sql.shuffle.partitions")
        assert shuffle_conf is not None  # a conf with a default: always set
        shuffle = int(shuffle_conf)
        if v3:
            writer = deletion_vector_writer(directory, prefix, target_file_size)
            ordered = every.repartition(shuffle, "file_path").sortWithinPartitions(
                "file_path", "pos"
            )
        else:
            writer = position_delete_writer(directory, prefix, target_file_size)
            group = F.col("file_path") if file_granularity else F.col("pkey")
            ordered = (
                every.withColumn("group", group)
                .repartition(shuffle, "group")
                .sortWithinPartitions("group", "file_path", "pos")
            )
        progress("writing delete files")
        # pyspark's stubs want Iterable -> Iterable; the writers take and give iterators
        written = _collect_written(ordered.mapInArrow(writer, WRITTEN_DDL), directory, prefix)  # type: ignore[arg-type]
    data_files.unpersist()
    if positions is not None:
        positions.unpersist()
    return written, merge, dangling_dvs, dangling_positions, v3


def _commit(
    table: DeleteTable,
    snapshot_id: int,
    plan: RoundPlan,
    written: Sequence[Row],
    merge: Sequence[DeleteFileFact],
    dangling_dvs: Sequence[DeleteFileFact],
    dangling_positions: int,
    v3: bool,
    progress: Callable[[str], None],
) -> RoundResult:
    """Commit a round's files; if the commit fails they go, unless it may have landed."""

    paths = [w.path for w in written]
    with discard_unless_unknown(
        lambda: table.discard(paths), table.ref.name, "the equality-delete conversion"
    ):
        return _commit_written(
            table, snapshot_id, plan, written, merge, dangling_dvs, dangling_positions, v3, progress
        )


def _commit_written(
    table: DeleteTable,
    snapshot_id: int,
    plan: RoundPlan,
    written: Sequence[Row],
    merge: Sequence[DeleteFileFact],
    dangling_dvs: Sequence[DeleteFileFact],
    dangling_positions: int,
    v3: bool,
    progress: Callable[[str], None],
) -> RoundResult:
    added = [
        NewDeleteFile(
            path=w.path,
            partition=w.pkey,
            records=int(w.records),
            file_size=int(w.file_size),
            sequence_number=plan.sequence_number(w.pkey, table.spec_unpartitioned(w.pkey)),
            referenced_data_file=w.referenced_data_file,
            content_offset=None if w.content_offset is None else int(w.content_offset),
            content_size=None if w.content_size is None else int(w.content_size),
            metrics=w.metrics,
        )
        for w in written
    ]
    removed = [*plan.convert, *merge, *dangling_dvs]
    counts = {
        "equality-delete-files-removed": len(plan.convert),
        "position-delete-files-merged": len(merge) + len(dangling_dvs),
        "delete-files-added": len(added),
    }
    summary = {SUMMARY_OPERATION: OPERATION, **{f"sparkext.{k}": str(v) for k, v in counts.items()}}
    snapshot = None
    if removed:
        progress(f"committing: -{len(removed)} delete files, +{len(added)}")
        newest = max((f.sequence_number for f in plan.convert), default=None)
        snapshot = table.commit(snapshot_id, removed, added, summary, newest)
    return RoundResult(
        equality_files_removed=len(plan.convert),
        position_files_added=0 if v3 else len(added),
        deletion_vectors_added=len(added) if v3 else 0,
        positions=sum(a.records for a in added),
        position_files_merged=len(merge) + len(dangling_dvs),
        dangling_positions=int(dangling_positions),
        bytes_added=sum({a.path: a.file_size for a in added}.values()),
        snapshot_id=snapshot,
    )


def _scoped_to_merge(
    table: DeleteTable,
    candidates: list[DeleteFileFact],
    positions: DataFrame | None,
    data_files: DataFrame,
) -> tuple[list[DeleteFileFact], list[DeleteFileFact]]:
    """Split file-scoped candidates (DVs; v2 files naming one data file) into those to merge
    (their data file gets new positions, or has several delete files) and dangling ones.

    Files not scoped to one data file are always folded in; the data files they name then get
    a new file too, so an existing file-scoped delete of such a data file is merged as well
    (at most one DV per data file).
    """
    from collections import Counter

    legacy = [f for f in candidates if not f.is_file_scoped]
    dvs = [f for f in candidates if f.is_file_scoped]
    targets = []
    if positions is not None:
        targets.append(positions.select("file_path"))
    if legacy:
        targets.append(table.positions_of(legacy).select("file_path"))
    hit: set[str | None] = set()
    if targets:
        union = reduce(lambda a, b: a.unionByName(b), targets).distinct()
        hit = {r.file_path for r in union.collect()}  # data file paths: metadata-sized
    counts = Counter(f.referenced_data_file for f in dvs)
    hit |= {ref for ref, n in counts.items() if n > 1}
    referenced = [f.referenced_data_file for f in dvs]
    of_referenced = in_list("file_path", referenced)
    assert of_referenced is not None  # strings always have a literal
    live = {r.file_path for r in data_files.where(of_referenced).select("file_path").collect()}
    merge = legacy + [f for f in dvs if f.referenced_data_file in hit & live]
    dangling = [f for f in dvs if f.referenced_data_file not in live]
    return merge, dangling
