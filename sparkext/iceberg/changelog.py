"""The Iceberg side of a changelog: snapshot metadata, the files each snapshot touches, and reads
of data files through Iceberg's own reader.

Which deletes apply to which data file is Iceberg's planning, never ours: a snapshot's
``newScan().useSnapshot(id).planFiles()`` gives every live data file with its delete files
(partition, sequence number and bounds matching; position deletes, deletion vectors and
equality deletes alike). A data file is affected by a snapshot when one of its delete files
was added by that snapshot. Reads stage those ``FileScanTask`` objects in Iceberg's
``ScanTaskSetManager`` and read them with ``spark.read.option("scan-task-set-id", ...)``,
selecting the ``_file`` and ``_pos`` metadata columns: deletes and
schema evolution are applied by Iceberg's reader. Each read's physical plan is fixed (its tasks
fetched) before the set is removed again, so the returned DataFrames outlive the staging.

Java objects never leave :class:`ChangelogTable`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sparkext.planning.changelog import (
    Change,
    History,
    Lane,
    Needs,
    ReadSet,
    Ref,
    SnapshotFiles,
    SnapshotMeta,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef

FILE, POS = "_file", "_pos"  # Iceberg's metadata columns: data file location, row position


def _iterate(java_iterable: Any) -> Iterator[Any]:
    iterator = java_iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _delete_key(delete: Any) -> tuple[str, int]:
    """A delete file's identity: its location, and its offset for a DV (many share a file)."""
    offset = delete.contentOffset()
    return str(delete.location()), -1 if offset is None else int(offset)


class ChangelogTable:
    """One table, read for one changelog. Planned scans and data files are kept by path."""

    def __init__(self, spark: SparkSession, ref: TableRef):
        self._spark = spark
        self.ref = ref
        self._jvm = spark._jvm
        self._table = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, ref.name
        )
        self._files: dict[str, Any] = {}  # path -> Java DataFile
        self._planned: dict[int, dict[str, Any]] = {}  # snapshot id -> path -> FileScanTask

    # ---- metadata ----------------------------------------------------------------------
    def history(self) -> History:
        """Every retained snapshot, the refs (tags and branches) and the current snapshot."""
        snapshots = {}
        for s in _iterate(self._table.snapshots()):
            parent = s.parentId()
            snapshots[int(s.snapshotId())] = SnapshotMeta(
                snapshot_id=int(s.snapshotId()),
                parent_id=int(parent) if parent is not None else None,
                timestamp_ms=int(s.timestampMillis()),
                operation=str(s.operation()) if s.operation() is not None else None,
                summary={str(k): str(v) for k, v in (s.summary() or {}).items()},
            )
        refs = {
            str(name): Ref(str(name), int(ref.snapshotId()), bool(ref.isBranch()))
            for name, ref in self._table.refs().items()
        }
        current = self._table.currentSnapshot()
        return History(
            table=self.ref.name,
            snapshots=snapshots,
            refs=refs,
            current_snapshot_id=int(current.snapshotId()) if current is not None else None,
        )

    def snapshot_files(self, change: Change, needs: Needs) -> SnapshotFiles:
        """The data files a snapshot added and removed, and the ones its new deletes reach."""
        snapshot = self._table.snapshot(change.snapshot.snapshot_id)
        io = self._table.io()
        added = self._remember(snapshot.addedDataFiles(io)) if needs.added else []
        removed = self._remember(snapshot.removedDataFiles(io)) if needs.removed else []
        affected: list[str] = []
        added_with_deletes: list[str] = []
        if needs.deletes:
            new = {_delete_key(d) for d in _iterate(snapshot.addedDeleteFiles(io))}
            if new:
                fresh = set(added)
                for path, task in self._plan(change.snapshot.snapshot_id).items():
                    if any(_delete_key(d) in new for d in task.deletes()):
                        (added_with_deletes if path in fresh else affected).append(path)
        return SnapshotFiles(
            added=tuple(added),
            removed=tuple(removed),
            affected=tuple(sorted(affected)),
            added_with_deletes=tuple(sorted(added_with_deletes)),
        )

    def _remember(self, data_files: Any) -> list[str]:
        paths = []
        for f in _iterate(data_files):
            path = str(f.location())
            self._files[path] = f
            paths.append(path)
        return paths

    def _plan(self, snapshot_id: int) -> dict[str, Any]:
        """Iceberg's planning of the whole table at a snapshot: data file -> its scan task."""
        if snapshot_id not in self._planned:
            tasks = self._table.newScan().useSnapshot(snapshot_id).planFiles()
            planned = {}
            try:
                for task in _iterate(tasks):
                    path = str(task.file().location())
                    planned[path] = task
                    self._files.setdefault(path, task.file())
            finally:
                tasks.close()
            self._planned[snapshot_id] = planned
        return self._planned[snapshot_id]

    # ---- reads --------------------------------------------------------------------------
    def read(self, read_set: ReadSet) -> DataFrame:
        """One scan over the set's files: every column (rows lane) or only positions, plus
        ``_file`` and ``_pos``. Rows of a file read "as written" ignore every delete file."""
        from pyspark.sql import DataFrame

        tasks = self._jvm.java.util.ArrayList()
        for item in read_set.reads:
            if item.deletes_at is None:
                tasks.add(self._as_written(item.path))
            else:
                tasks.add(self._plan(item.deletes_at)[item.path])
        manager = self._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        set_id = f"sparkext-changelog-{uuid.uuid4()}"
        manager.stageTasks(self._table, set_id, tasks)
        try:
            # the catalog's table with the option (not format("iceberg").load, which gives the
            # "rewrite" table: on v3 tables its row-lineage columns hide _file and _pos)
            staged = self._spark.read.option("scan-task-set-id", set_id).table(self.ref.name)
            columns = [FILE, POS]
            if read_set.lane == Lane.ROWS:
                columns = [*staged.columns, *columns]
            frame = staged.select(*columns)
            # Fix the physical plan now: its scan fetches the staged tasks once, here, and the
            # frame below reads that plan's RDD, so the set can go (no shuffle: nothing runs).
            java = frame._jdf
            fixed = self._spark._jsparkSession.internalCreateDataFrame(
                java.queryExecution().toRdd(), java.schema(), False
            )
            return DataFrame(fixed, self._spark)
        finally:
            manager.removeTasks(self._table, set_id)

    def _as_written(self, path: str) -> Any:
        """A scan task of the data file with no delete file: its rows as written."""
        iceberg = self._jvm.org.apache.iceberg
        data_file = self._files[path]
        spec = self._table.specs().get(data_file.specId())
        no_deletes = self._spark.sparkContext._gateway.new_array(iceberg.DeleteFile, 0)
        return iceberg.BaseFileScanTask(
            data_file,
            no_deletes,
            iceberg.SchemaParser.toJson(spec.schema()),
            iceberg.PartitionSpecParser.toJson(spec),
            iceberg.expressions.ResidualEvaluator.unpartitioned(
                iceberg.expressions.Expressions.alwaysTrue()
            ),
        )
