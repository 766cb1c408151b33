"""The Iceberg side of tiered_optimize: file facts, staged rewrites, ONE RewriteFiles per group.

Facts come from the ``entries`` metadata table at the plan's snapshot (size, records, adding
snapshot, sequence numbers and, for the cluster columns, typed bounds from
``readable_metrics``); a file's level is the ``sparkext.optimize.level`` of the snapshot that
added it. The Java ``FileScanTask`` of every live file comes from one scan of that snapshot and
never leaves this module: a group's tasks are staged with Iceberg's ``ScanTaskSetManager``, read
back with the ``scan-task-set-id`` option (so exactly those files are read, with the deletes
that applied to them at the planned snapshot), written with ``rewritten-file-scan-task-set-id``
(Iceberg's writer hands the new files to its ``FileRewriteCoordinator`` instead of committing),
and committed here as ONE RewriteFiles validated from the planned snapshot, carrying that
snapshot's data sequence number: equality deletes committed meanwhile by a CDC writer still
apply to the rewritten rows (apache/iceberg#7218), and a position delete or DV added meanwhile
on a rewritten file fails the group (Iceberg's validation), which then leaves nothing behind.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext import identifiers
from sparkext.iceberg.commit import CommitRequest, commit, delete_files
from sparkext.iceberg.delete_files import DeleteTable, partition_key
from sparkext.planning.optimize import LEVEL_UNKNOWN, DataFileFact
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import map_values

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef

OPERATION = "tiered_optimize"
SUMMARY_OPERATION = "sparkext.operation"
SUMMARY_LEVEL = "sparkext.optimize.level"
SUMMARY_PARTITION = "sparkext.optimize.partition"
SUMMARY_REASON = "sparkext.optimize.reason"
SUMMARY_CURVE = "sparkext.optimize.curve"
SUMMARY_CLUSTER_BY = "sparkext.optimize.cluster-by"


@dataclass(frozen=True)
class TableFacts:
    """What one plan reads: the planned snapshot and its live data files."""

    snapshot_id: int
    sequence_number: int
    files: tuple[DataFileFact, ...]
    equality_delete_partitions: frozenset[str]  # selected partitions with equality deletes
    last_commit_ms: Mapping[str, int]  # newest commit that added a live file, per partition
    now_ms: int


@dataclass(frozen=True)
class Rewritten:
    """The files a group's Spark write produced (not committed yet)."""

    group_id: str
    files: int
    bytes: int
    records: int
    paths: tuple[str, ...]


CACHE_CATALOG = "spark.sql.catalog.default_cache_iceberg"


class OptimizeTable:
    """An Iceberg table being optimised. Java objects never leave it."""

    def __init__(self, spark: SparkSession, ref: TableRef):
        self._spark = spark
        self.ref = ref
        self.deletes = DeleteTable(spark, ref)  # equality-delete conversion and partitions
        self._table = jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, ref.name
        )
        self._tasks: dict[str, Any] = {}  # path -> FileScanTask at the planned snapshot
        self._planned: int | None = None
        self._written: dict[str, Any] = {}  # group id -> Java Set<DataFile>
        # Iceberg's source registers the catalog of staged scans on first use, unguarded: two
        # threads' first staged reads at once (the optimisation service) can miss it
        if spark.conf.get(CACHE_CATALOG, None) is None:
            spark.conf.set(CACHE_CATALOG, "org.apache.iceberg.spark.SparkCachedTableCatalog")

    # ---- facts --------------------------------------------------------------------------
    def refresh(self) -> None:
        self._table.refresh()
        self.deletes.refresh()

    def current_snapshot_id(self) -> int | None:
        snapshot = self._table.currentSnapshot()
        return int(snapshot.snapshotId()) if snapshot is not None else None

    def column_names(self) -> list[str]:
        return [str(f.name()) for f in _iterate(self._table.schema().columns())]

    def partition_source_columns(self) -> set[str]:
        schema = self._table.schema()
        return {
            str(schema.findColumnName(f.sourceId()))
            for spec in map_values(self._table.specs())
            for f in _iterate(spec.fields())
        }

    def facts(self, snapshot_id: int, where: str | None, cluster_by: Sequence[str]) -> TableFacts:
        """Live data files at the snapshot, each with its level, bounds and whether selected.

        Metadata tables only (two small Spark queries) unless ``where`` needs Iceberg's strict
        partition projection: then the snapshot's file scan is planned here; otherwise it is
        planned only when a group is staged, so a call with nothing due stays cheap.
        """
        import time

        self._planned = snapshot_id
        self._tasks = {}
        files = file_facts(self._spark, self.ref, cluster_by, snapshot_id)
        if where:
            selected = self._plan_tasks(where)
            files = [dataclasses.replace(f, selected=f.path in selected) for f in files]
            equality = frozenset(
                f.partition
                for f in self.deletes.delete_files(snapshot_id, where)
                if f.content == 2 and f.selected
            )
        else:
            equality = frozenset(equality_delete_partitions(self._spark, self.ref, snapshot_id))
        commit_ms = {
            int(s.snapshotId()): int(s.timestampMillis()) for s in _iterate(self._table.snapshots())
        }
        last_commit: dict[str, int] = {}
        for f in files:
            if f.snapshot_id in commit_ms:
                last_commit[f.partition] = max(
                    last_commit.get(f.partition, 0), commit_ms[f.snapshot_id]
                )
        return TableFacts(
            snapshot_id=snapshot_id,
            sequence_number=int(self._table.snapshot(snapshot_id).sequenceNumber()),
            files=tuple(files),
            equality_delete_partitions=equality,
            last_commit_ms=last_commit,
            now_ms=int(time.time() * 1000),
        )

    def _task(self, path: str) -> Any:
        if not self._tasks:
            self._plan_tasks(None)
        return self._tasks[path]

    def _plan_tasks(self, where: str | None) -> set[str]:
        """Scan the planned snapshot once: keep every live file's task; return the selected
        paths (the file's partition lies wholly inside ``where``)."""
        selector = self.deletes.partition_selector(where)
        scan = self._table.newScan().useSnapshot(self._planned).ignoreResiduals()
        self._tasks = {}
        selected = set()
        tasks = scan.planFiles()
        try:
            iterator = tasks.iterator()
            while iterator.hasNext():
                task = iterator.next()
                java_file = task.file()
                path = str(java_file.location())
                self._tasks[path] = task
                if selector(java_file):
                    selected.add(path)
        finally:
            tasks.close()
        return selected

    def spec_id_of(self, path: str) -> int:
        return int(self._task(path).file().specId())

    def deletes_of(self, paths: Sequence[str]) -> tuple[int, int]:
        """(delete files, of which removable) applying to ``paths`` at the planned snapshot:
        DVs and file-scoped position deletes of these files go with them."""
        seen, removable = set(), set()
        for path in paths:
            for delete in _iterate(self._task(path).deletes()):
                ident = (str(delete.location()), _offset(delete))
                seen.add(ident)
                if _file_scoped(jvm_of(self._spark), delete):
                    removable.add(ident)
        return len(seen), len(removable)

    # ---- rewriting ----------------------------------------------------------------------
    @contextlib.contextmanager
    def staged(self, paths: Sequence[str]) -> Iterator[str]:
        """Stage exactly ``paths`` (their tasks at the planned snapshot) under a fresh group id;
        read them with :meth:`read_staged`, write with :meth:`write_staged`. Cleans up."""
        jvm = jvm_of(self._spark)
        group_id = f"sparkext-optimize-{uuid.uuid4().hex}"
        tasks = jvm.java.util.ArrayList()
        for path in paths:
            tasks.add(self._task(path))
        cache = _static_get(self._spark, jvm.org.apache.iceberg.spark.SparkTableCache)
        manager = jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        coordinator = jvm.org.apache.iceberg.spark.FileRewriteCoordinator.get()
        cache.add(group_id, self._table)
        manager.stageTasks(self._table, group_id, tasks)
        try:
            yield group_id
        finally:
            with contextlib.suppress(Exception):
                cache.remove(group_id)
                manager.removeTasks(self._table, group_id)
                coordinator.clearRewrite(self._table, group_id)

    def read_staged(self, group_id: str, split_bytes: int) -> DataFrame:
        return (
            self._spark.read.format("iceberg")
            .option("scan-task-set-id", group_id)
            .option("split-size", str(split_bytes))
            .option("file-open-cost", "0")
            .load(group_id)
        )

    def write_staged(
        self, group_id: str, frame: DataFrame, spec_id: int, target_file_bytes: int
    ) -> Rewritten:
        """Write ``frame`` as the replacement of the staged files; nothing is committed."""
        (
            frame.write.format("iceberg")
            .option("rewritten-file-scan-task-set-id", group_id)
            .option("target-file-size-bytes", str(target_file_bytes))
            .option("use-table-distribution-and-ordering", "false")
            .option("distribution-mode", "none")
            .option("output-spec-id", str(spec_id))
            .mode("append")
            .save(group_id)
        )
        coordinator = jvm_of(self._spark).org.apache.iceberg.spark.FileRewriteCoordinator.get()
        new = coordinator.fetchNewFiles(self._table, group_id)
        self._written[group_id] = new
        paths, size, records = [], 0, 0
        for f in _iterate(new):
            paths.append(str(f.location()))
            size += int(f.fileSizeInBytes())
            records += int(f.recordCount())
        return Rewritten(group_id, len(paths), size, records, tuple(paths))

    def commit(
        self,
        planned: TableFacts,
        replaced: Sequence[str],
        written: Rewritten,
        summary: Mapping[str, str],
        check: Callable[[], None] = lambda: None,
    ) -> int:
        """Replace ``replaced`` by the written files in ONE RewriteFiles (see the module doc).

        DVs and file-scoped position deletes of the replaced files are removed with them;
        partition-scoped position deletes stay (they may name other files too).
        """

        new_files = self._written.pop(written.group_id)
        removable = {}
        for path in replaced:
            for delete in _iterate(self._task(path).deletes()):
                if _file_scoped(jvm_of(self._spark), delete):
                    removable[(str(delete.location()), _offset(delete))] = delete

        def build(attempt) -> None:
            check()
            rewrite = (
                attempt.table.newRewrite()
                .validateFromSnapshot(planned.snapshot_id)
                .dataSequenceNumber(planned.sequence_number)
            )
            for path in replaced:
                rewrite = rewrite.deleteFile(self._task(path).file())
            for f in _iterate(new_files):
                rewrite = rewrite.addFile(f)
            for delete in removable.values():
                rewrite = rewrite.deleteFile(delete)
            attempt.stamp(rewrite).commit()

        request = CommitRequest(
            table_name=self.ref.name,
            planned_snapshot_id=planned.snapshot_id,
            build=build,
            what=f"the optimisation of {summary.get(SUMMARY_PARTITION, 'a partition')}",
            rerun_hint="run tiered_optimize again",
            summary=summary,
        )
        return commit(self._spark, self._table, request).snapshot_id

    def discard(self, written: Rewritten) -> None:
        """Delete files a group wrote but did not commit (definitely not committed only)."""

        self._written.pop(written.group_id, None)
        delete_files(self._table, written.paths)


def file_facts(
    spark: SparkSession, ref: TableRef, cluster_by: Sequence[str], snapshot_id: int | None = None
) -> list[DataFileFact]:
    """Every live data file (at ``snapshot_id``, default the current snapshot) with its level
    and its bounds on ``cluster_by``, from the ``entries`` and ``snapshots`` metadata tables:
    one small row per file, no data read. A file whose adding snapshot expired has level
    ``LEVEL_UNKNOWN``."""
    from pyspark.sql import functions as F

    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    entries = reader.load(identifiers.join((*ref.parts, "entries")))
    entries = entries.where("status < 2 AND data_file.content = 0")
    snapshots = (
        spark.table(ref.metadata_table("snapshots"))
        .select(
            "snapshot_id",
            F.col("summary")[SUMMARY_LEVEL].alias("level"),
            F.col("summary")[SUMMARY_OPERATION].alias("operation"),
        )
        .collect()
    )
    levels, merges = levels_and_merges(
        (int(r.snapshot_id), r.level, r.operation) for r in snapshots
    )
    bound_columns = bound_columns_of(entries, cluster_by)
    rows = entries.select(
        F.col("data_file.file_path").alias("path"),
        partition_key(DeleteTable._partition_column(entries), F.col("data_file.spec_id")).alias(
            "pkey"
        ),
        F.col("data_file.file_size_in_bytes").alias("bytes"),
        F.col("data_file.record_count").alias("records"),
        F.col("snapshot_id"),
        F.col("sequence_number"),
        *[
            F.struct(
                F.col("readable_metrics")[m]["lower_bound"].alias("lo"),
                F.col("readable_metrics")[m]["upper_bound"].alias("hi"),
            ).alias(f"b{i}")
            for i, (_, m) in enumerate(bound_columns)
        ],
    ).collect()  # metadata: one small row per live data file
    return [fact_of(r, int(r.bytes), levels, merges, bound_columns) for r in rows]


def levels_and_merges(
    snapshots: Iterable[tuple[int, str | None, str | None]],
) -> tuple[dict[int, int], set[int]]:
    """Each snapshot's level, and the snapshots of L0 merges (their files are "earlier L0
    outputs"), from (snapshot id, summary level, summary operation)."""
    levels: dict[int, int] = {}
    merges: set[int] = set()
    for snapshot_id, level, operation in snapshots:
        levels[snapshot_id] = _level_of(level)
        if operation == OPERATION and levels[snapshot_id] == 0:
            merges.add(snapshot_id)
    return levels, merges


def bound_columns_of(entries: Any, cluster_by: Sequence[str]) -> list[tuple[str, str]]:
    """(cluster column, its ``readable_metrics`` field) for each cluster column the entries
    table has metrics for, matched case-insensitively."""
    metrics = (
        entries.schema["readable_metrics"].dataType.fieldNames()
        if "readable_metrics" in entries.columns
        else []
    )
    lower = {m.lower(): m for m in metrics}
    return [(c, lower[c.lower()]) for c in cluster_by if c.lower() in lower]


def fact_of(
    r: Any,
    size: int,
    levels: dict[int, int],
    merges: set[int],
    bound_columns: Sequence[tuple[str, str]],
) -> DataFileFact:
    """One entries row (path, pkey, records, snapshot_id, sequence_number, ``b<i>`` bounds) as
    the planner's fact."""
    return DataFileFact(
        path=r.path,
        partition=r.pkey,
        bytes=size,
        records=int(r.records),
        snapshot_id=int(r.snapshot_id),
        sequence_number=int(r.sequence_number),
        level=levels.get(int(r.snapshot_id), LEVEL_UNKNOWN),
        bounds={
            c: (r[f"b{i}"].lo, r[f"b{i}"].hi)
            for i, (c, _) in enumerate(bound_columns)
            if r[f"b{i}"] is not None
        },
        merged=int(r.snapshot_id) in merges,
    )


def equality_delete_partitions(
    spark: SparkSession, ref: TableRef, snapshot_id: int | None = None
) -> set[str]:
    """Partition keys with live equality-delete files at the snapshot (``entries``)."""
    from pyspark.sql import functions as F

    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    entries = reader.load(identifiers.join((*ref.parts, "entries")))
    keys = (
        entries.where("status < 2 AND data_file.content = 2")
        .select(
            partition_key(DeleteTable._partition_column(entries), F.col("data_file.spec_id")).alias(
                "pkey"
            )
        )
        .distinct()
        .collect()
    )
    return {r.pkey for r in keys}


def _static_get(spark: SparkSession, java_class: Any) -> Any:
    """``Class.get()`` for a class whose static ``get()`` py4j cannot tell from its instance
    ``get(String)`` (SparkTableCache): called through reflection."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None  # a running SparkContext has its py4j gateway
    no_types = gateway.new_array(gateway.jvm.java.lang.Class, 0)
    no_args = gateway.new_array(gateway.jvm.java.lang.Object, 0)
    return java_class._java_lang_class.getMethod("get", no_types).invoke(None, no_args)


def _level_of(value: Any) -> int:
    """A snapshot's level: its ``sparkext.optimize.level``, else 0 (a writer's commit)."""
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _offset(delete: Any) -> int:
    offset = delete.contentOffset()
    return -1 if offset is None else int(offset)


def _file_scoped(jvm: Any, delete: Any) -> bool:
    """A DV, or a position-delete file whose deletes all name one data file."""
    return bool(jvm.org.apache.iceberg.util.ContentFileUtil.isFileScoped(delete))
