"""The Iceberg side of a changelog: snapshot metadata, the files each snapshot touches, and reads
of data files through Iceberg's own reader.

Which deletes apply to which data file is Iceberg's planning, never ours: a snapshot's
``newScan().useSnapshot(id).planFiles()`` gives every live data file with its delete files
(partition, sequence number and bounds matching; position deletes, deletion vectors and
equality deletes alike). A data file is affected by a snapshot when one of its delete files
was added by that snapshot. Reads stage those ``FileScanTask`` objects in Iceberg's
``ScanTaskSetManager`` and read them with ``spark.read.option("scan-task-set-id", ...)``,
selecting the ``_file`` and ``_pos`` metadata columns: deletes and schema evolution are applied
by Iceberg's reader. The physical plan of the reads is fixed (their tasks fetched) before the
sets are removed again, so the returned DataFrames outlive the staging.

Equality runs read equality-delete files the same way: a staged task whose "data file" is the
delete file, projecting only the equality columns (by field id, through the table's FileIO), and
label each delete and data file with its partition spec and values, Iceberg's rule for which
equality deletes apply to which data files.

Snapshots never change, so what was learnt about one (its files, the scan tasks of the files it
reads) is kept, per table UUID, in a bounded cache: a changelog over a range that was read
before (a stream's next batch, overlapping ranges) plans nothing again. Java objects never leave
this module.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext.identifiers import col, cols
from sparkext.planning.changelog import (
    Change,
    EqualityDelete,
    FileRead,
    History,
    KeyDelete,
    Lane,
    Needs,
    ReadSet,
    Ref,
    SnapshotFiles,
    SnapshotMeta,
)
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from sparkext.iceberg.catalog import TableRef

FILE, POS = "_file", "_pos"  # Iceberg's metadata columns: data file location, row position
# Equality columns matched by name on rows Spark reads from the delete files: top-level types
# whose Parquet form Spark reads as Iceberg's reader does (not timestamps, floats, uuid, nested).
_MATCHABLE_TYPES = frozenset({"boolean", "int", "long", "string", "date", "binary"})


class _Lru:
    """A small thread-safe LRU map."""

    def __init__(self, size: int):
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


@dataclass(frozen=True)
class _Known:
    """What one snapshot's manifests said: its files, and the Java data files it may read as
    written (added, removed, or affected by its deletes)."""

    files: SnapshotFiles
    data_files: dict[str, Any]
    records: dict[str, int]  # rows of the files its new deletes reach (from planning)
    equality_files: dict[str, Any]  # its new equality-delete files, by location
    # their equality field ids, in order (names are the CURRENT schema's: looked up per read)
    equality_ids: dict[str, tuple[int, ...]]


# (table uuid, snapshot id) -> _Known; (table uuid, snapshot id) -> {path: FileScanTask planned
# at that snapshot} for the paths some read needed
_SNAPSHOTS = _Lru(1024)
_PLANNED = _Lru(1024)
_AS_WRITTEN = _Lru(20000)  # (table uuid, path) -> FileScanTask without deletes
_REMOVED = _Lru(1024)  # (table uuid, snapshot id) -> the data files it removed
_LABELS = _Lru(20000)  # (table uuid, data file path) -> its partition label
_EVERYTHING = Needs(added=True, removed=True, deletes=True, parent_deletes=True)


class ChangelogTable:
    """One table, read for one changelog."""

    def __init__(self, spark: SparkSession, ref: TableRef):
        self._spark = spark
        self.ref = ref
        self._jvm = jvm_of(spark)
        self._table = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, ref.name
        )
        self._metadata = json.loads(
            self._jvm.org.apache.iceberg.TableMetadataParser.toJson(
                self._table.operations().current()
            )
        )
        self._uuid = str(self._metadata["table-uuid"])
        self._specs: dict[int, tuple[str, str]] = {}  # spec id -> (schema JSON, spec JSON)
        self._no_deletes: Any = None
        self._residual: Any = None

    # ---- metadata ----------------------------------------------------------------------
    def schema(self) -> StructType:
        """The current schema as Spark sees it: every change is read in it."""
        from pyspark.sql.types import StructType

        convert = self._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert
        return StructType.fromJson(json.loads(convert(self._table.schema()).json()))

    def identifier_columns(self) -> list[str]:
        """The current schema's identifier fields (its primary key), in field-id order."""
        schemas = {s["schema-id"]: s for s in self._metadata.get("schemas", [])}
        current = schemas.get(self._metadata.get("current-schema-id"), {})
        names = {f["id"]: f["name"] for f in current.get("fields", [])}
        return [names[i] for i in sorted(current.get("identifier-field-ids", [])) if i in names]

    def history(self) -> History:
        """Every retained snapshot, the refs (tags and branches) and the current snapshot."""
        snapshots = {}
        for s in self._metadata.get("snapshots", []):
            summary = {str(k): str(v) for k, v in (s.get("summary") or {}).items()}
            snapshots[int(s["snapshot-id"])] = SnapshotMeta(
                snapshot_id=int(s["snapshot-id"]),
                parent_id=s.get("parent-snapshot-id"),
                timestamp_ms=int(s["timestamp-ms"]),
                operation=summary.get("operation"),
                summary=summary,
            )
        refs = {
            name: Ref(name, int(ref["snapshot-id"]), ref.get("type") == "branch")
            for name, ref in (self._metadata.get("refs") or {}).items()
        }
        current = self._metadata.get("current-snapshot-id")
        return History(
            table=self.ref.name,
            snapshots=snapshots,
            refs=refs,
            current_snapshot_id=int(current) if current is not None and current != -1 else None,
        )

    def snapshot_files(self, change: Change, needs: Needs) -> SnapshotFiles:
        """The data files a snapshot added and removed, and the ones its new deletes reach."""
        known = self._learn(change.snapshot.snapshot_id, needs)
        if not known.equality_ids:
            return known.files
        equality = tuple(
            EqualityDelete(path, self._equality_columns(ids))
            for path, ids in known.equality_ids.items()
        )
        return dataclasses.replace(known.files, equality_deletes=equality)

    def removed_files(self, snapshot_id: int) -> frozenset[str]:
        """The data files a snapshot removed (for REPLACE snapshots inside a range)."""
        key = (self._uuid, snapshot_id)
        found = _REMOVED.get(key)
        if found is None:
            snapshot = self._table.snapshot(snapshot_id)
            found = frozenset(
                str(f.location()) for f in _iterate(snapshot.removedDataFiles(self._table.io()))
            )
            _REMOVED.put(key, found)
        return found

    def partition_label(self, snapshot_id: int, path: str) -> str:
        """Which equality deletes may apply to a data file, as Iceberg decides it: its spec id
        and partition values (a delete applies when its label is equal, or ``*``)."""
        key = (self._uuid, path)  # a file's spec and partition never change
        label = _LABELS.get(key)
        if label is None:
            label = self._label(self._data_file(snapshot_id, path), False)
            _LABELS.put(key, label)
        return label

    def _data_file(self, snapshot_id: int, path: str) -> Any:
        """The Java data file ``path`` a snapshot added, removed or reached."""
        data_file = self._learn(snapshot_id, _EVERYTHING).data_files.get(path)
        if data_file is None:  # learnt from the summary alone: look at everything once more
            _SNAPSHOTS.put((self._uuid, snapshot_id), None)
            data_file = self._learn(snapshot_id, _EVERYTHING).data_files[path]
        return data_file

    def _label(self, content_file: Any, is_delete: bool) -> str:
        spec_id = int(content_file.specId())
        spec = self._table.specs().get(spec_id)
        if spec.isUnpartitioned():
            return "*" if is_delete else json.dumps([spec_id])
        partition = content_file.partition()
        values = [partition.get(i) for i in range(int(partition.size()))]
        return json.dumps([spec_id, values], default=str)

    def _learn(self, sid: int, needs: Needs) -> _Known:
        known = _SNAPSHOTS.get((self._uuid, sid))
        if known is not None:
            return known
        snapshot = self._table.snapshot(sid)
        io = self._table.io()
        data_files: dict[str, Any] = {}
        added = self._remember(snapshot.addedDataFiles(io), data_files) if needs.added else []
        removed = self._remember(snapshot.removedDataFiles(io), data_files) if needs.removed else []
        affected: list[str] = []
        added_with_deletes: list[str] = []
        planned: dict[str, Any] = {}
        records: dict[str, int] = {}
        equality_files: dict[str, Any] = {}
        equality_ids: dict[str, tuple[int, ...]] = {}
        if needs.deletes:
            new_files = list(_iterate(snapshot.addedDeleteFiles(io)))
            new = {_delete_key(d) for d in new_files}
            if all(str(d.content()) == "EQUALITY_DELETES" for d in new_files):
                for d in new_files:
                    path = str(d.location())
                    equality_files[path] = d
                    ids = tuple(int(i) for i in _iterate(d.equalityFieldIds()))
                    # a format Spark's staged scan may not read like Parquet: no key matching
                    equality_ids[path] = ids if str(d.format()) == "PARQUET" else ()
            if new:
                fresh = set(added)
                for path, task, deletes, count in self._plan(sid):
                    if new.intersection(deletes):
                        (added_with_deletes if path in fresh else affected).append(path)
                        planned[path] = task
                        records[path] = count
                        data_files.setdefault(path, task.file())
        files = SnapshotFiles(
            added=tuple(added),
            removed=tuple(removed),
            affected=tuple(sorted(affected)),
            added_with_deletes=tuple(sorted(added_with_deletes)),
        )
        known = _Known(files, data_files, records, equality_files, equality_ids)
        _SNAPSHOTS.put((self._uuid, sid), known)
        if planned:
            _PLANNED.put((self._uuid, sid), {**(_PLANNED.get((self._uuid, sid)) or {}), **planned})
        return known

    def _equality_columns(self, field_ids: tuple[int, ...]) -> tuple[str, ...] | None:
        """The current names of these equality fields, when each kept its name and type in
        every schema of the table and is a top-level column of a type matched exactly by
        Spark's equality; else ``None`` (the snapshot takes the general reads)."""
        schemas = self._metadata.get("schemas", [])
        current = self._metadata.get("current-schema-id")
        names: list[str] = []
        for field_id in field_ids:
            seen = {
                (f["name"], json.dumps(f["type"]))
                for schema in schemas
                for f in schema.get("fields", [])
                if f["id"] == field_id
            }
            now = [
                f
                for schema in schemas
                if schema.get("schema-id") == current
                for f in schema.get("fields", [])
                if f["id"] == field_id
            ]
            kind = str(now[0]["type"]) if now else ""
            if len(seen) != 1 or not (kind in _MATCHABLE_TYPES or kind.startswith("decimal(")):
                return None
            names.append(now[0]["name"])
        return tuple(names) or None

    @staticmethod
    def _remember(java_files: Any, into: dict[str, Any]) -> list[str]:
        paths = []
        for f in _iterate(java_files):
            path = str(f.location())
            into[path] = f
            paths.append(path)
        return paths

    def _plan(self, snapshot_id: int) -> Iterator[tuple[str, Any, set[tuple[str, int]], int]]:
        """Iceberg's planning of the whole table at a snapshot: (data file, task, its deletes,
        its rows)."""
        parser = self._jvm.org.apache.iceberg.ScanTaskParser
        tasks = self._table.newScan().useSnapshot(snapshot_id).planFiles()
        try:
            for task in _iterate(tasks):
                try:
                    described = json.loads(parser.toJson(task))  # one call, not one per field
                except Exception:
                    # equality delete after a partition change) fails the parser (PySpark
                    # raises it as its IllegalArgumentException): ask field by field
                    data = task.file()
                    deletes = {_delete_key(d) for d in _iterate(task.deletes())}
                    yield str(data.location()), task, deletes, int(data.recordCount())
                    continue
                deletes = {
                    (d["file-path"], int(d.get("content-offset", -1)))
                    for d in described.get("delete-files", [])
                }
                data_file = described["data-file"]
                yield data_file["file-path"], task, deletes, int(data_file["record-count"])
        finally:
            tasks.close()

    # ---- reads --------------------------------------------------------------------------
    def read(self, read_sets: Sequence[ReadSet], set_column: str) -> DataFrame:
        """One scan per read set, unioned, with the set's index in ``set_column``: every column
        (rows lane) or none (positions lane), plus ``_file`` and ``_pos``. A file read "as
        written" ignores every delete file; otherwise it gets the deletes Iceberg plans at
        ``deletes_at``."""
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F

        self._plan_missing([r for s in read_sets for r in s.reads])
        manager = self._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        staged: list[str] = []
        try:
            frames = []
            for read_set in read_sets:
                tasks = self._jvm.java.util.ArrayList()
                for item in read_set.reads:
                    tasks.add(self._task(item))
                set_id = f"sparkext-changelog-{uuid.uuid4()}"
                manager.stageTasks(self._table, set_id, tasks)
                staged.append(set_id)
                # the catalog's table with the option (format("iceberg").load gives the
                # "rewrite" table: on v3 tables its row-lineage columns hide _file and _pos)
                frame = self._spark.read.option("scan-task-set-id", set_id).table(self.ref.name)
                columns = [FILE, POS]
                if read_set.lane == Lane.ROWS:
                    columns = [*frame.columns, *columns]
                frames.append(frame.select(*cols(columns), F.lit(read_set.index).alias(set_column)))
            union = frames[0]
            for frame in frames[1:]:
                union = union.unionByName(frame)
            # Fix the physical plan now: its scans fetch the staged tasks once, here, and the
            # frame below reads that plan's RDD, so the sets can go (no shuffle: nothing runs).
            java = union._jdf
            fixed = self._spark._jsparkSession.internalCreateDataFrame(
                java.queryExecution().toRdd(), java.schema(), False
            )
            return DataFrame(fixed, self._spark)
        finally:
            for set_id in staged:
                manager.removeTasks(self._table, set_id)

    def read_key_deletes(
        self, deletes: Sequence[KeyDelete], number: str, label: str
    ) -> list[tuple[tuple[str, ...], DataFrame]]:
        """The rows of these equality-delete files, read through Iceberg's reader as if they
        were data files (by field id, with the table's file IO; one scan per set of equality
        columns): those columns under their current names (``_sx_key<i>``), the file's
        ``number`` and its partition ``label`` (``*``: a global delete)."""
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F
        from sqlglot import exp

        manager = self._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        groups: dict[tuple[str, ...], list[KeyDelete]] = {}
        for delete in deletes:
            groups.setdefault(delete.columns, []).append(delete)
        result = []
        for columns, members in groups.items():
            tasks = self._jvm.java.util.ArrayList()
            labels = []
            for delete in members:
                task, java = self._delete_task(delete)
                tasks.add(task)
                labels.append((delete.path, delete.number, self._label(java, True)))
            set_id = f"sparkext-changelog-{uuid.uuid4()}"
            manager.stageTasks(self._table, set_id, tasks)
            try:
                frame = self._spark.read.option("scan-task-set-id", set_id).table(self.ref.name)
                keys = frame.select(
                    *(col(c).alias(f"_sx_key{i}") for i, c in enumerate(columns)), col(FILE)
                )
                java_frame = keys._jdf
                fixed = self._spark._jsparkSession.internalCreateDataFrame(
                    java_frame.queryExecution().toRdd(), java_frame.schema(), False
                )
            finally:
                manager.removeTasks(self._table, set_id)
            values = exp.values(
                [tuple(exp.convert(v) for v in row) for row in labels], "d", [FILE, number, label]
            )
            names = exp.select(
                exp.column(FILE),
                exp.cast(exp.column(number), "int").as_(number),
                exp.cast(exp.column(label), "string").as_(label),
            ).from_(values)
            by_file = F.broadcast(self._spark.sql(names.sql("spark")))
            result.append((columns, DataFrame(fixed, self._spark).join(by_file, FILE).drop(FILE)))
        return result

    def _delete_task(self, delete: KeyDelete) -> tuple[Any, Any]:
        """A scan task reading an equality-delete file as a data file (no deletes of its own),
        and the Java delete file."""
        known = self._learn(delete.snapshot_id, _EVERYTHING)
        java = known.equality_files[delete.path]
        iceberg = self._jvm.org.apache.iceberg
        spec = self._table.specs().get(int(java.specId()))
        data_file = (
            iceberg.DataFiles.builder(spec)
            .withPath(str(java.location()))
            .withFileSizeInBytes(java.fileSizeInBytes())
            .withRecordCount(java.recordCount())
            .withFormat(java.format())
            .withPartition(java.partition())
            .build()
        )
        return self._task_without_deletes(data_file), java

    def _plan_missing(self, reads: Sequence[FileRead]) -> None:
        """Plan each snapshot whose tasks some read needs and the cache does not have."""
        missing: dict[int, set[str]] = {}
        for item in reads:
            at = item.deletes_at
            if at is not None and item.path not in (_PLANNED.get((self._uuid, at)) or {}):
                missing.setdefault(at, set()).add(item.path)
        for at, paths in missing.items():
            found = {path: task for path, task, _, _ in self._plan(at) if path in paths}
            _PLANNED.put((self._uuid, at), {**(_PLANNED.get((self._uuid, at)) or {}), **found})

    def _task(self, item: FileRead) -> Any:
        if item.deletes_at is not None:
            return _PLANNED.get((self._uuid, item.deletes_at))[item.path]
        return self._as_written(item)

    def _as_written(self, item: FileRead) -> Any:
        """A scan task of the data file with no delete file: its rows as written."""
        task = _AS_WRITTEN.get((self._uuid, item.path))
        if task is not None:
            return task
        task = self._task_without_deletes(self._data_file(item.snapshot_id, item.path))
        _AS_WRITTEN.put((self._uuid, item.path), task)
        return task

    def _task_without_deletes(self, data_file: Any) -> Any:
        iceberg = self._jvm.org.apache.iceberg
        spec_id = int(data_file.specId())
        if spec_id not in self._specs:
            spec = self._table.specs().get(spec_id)
            self._specs[spec_id] = (
                iceberg.SchemaParser.toJson(spec.schema()),
                iceberg.PartitionSpecParser.toJson(spec),
            )
        schema_json, spec_json = self._specs[spec_id]
        if self._no_deletes is None:
            gateway = self._spark.sparkContext._gateway
            assert gateway is not None  # a running SparkContext has its py4j gateway
            self._no_deletes = gateway.new_array(iceberg.DeleteFile, 0)
            self._residual = iceberg.expressions.ResidualEvaluator.unpartitioned(
                iceberg.expressions.Expressions.alwaysTrue()
            )
        return iceberg.BaseFileScanTask(
            data_file, self._no_deletes, schema_json, spec_json, self._residual
        )

    def keys_fit_broadcast(self, deletes: Sequence[KeyDelete]) -> bool:
        """Whether the rows of these equality-delete files, grouped by key, are small enough to
        send to every executor: their record counts (manifests) times a generous key width,
        against four times Spark's broadcast-join threshold (the alternative shuffles every row
        read)."""
        limit = int(self._spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        total = 0
        for delete in deletes:
            java = self._learn(delete.snapshot_id, _EVERYTHING).equality_files[delete.path]
            total += int(java.recordCount()) * (48 + 16 * len(delete.columns))
        return limit > 0 and total <= 4 * limit

    def fits_broadcast(self, reads: Sequence[FileRead]) -> bool:
        """Whether the positions of these reads (rows from the manifests, times a path and a
        position) fit Spark's broadcast-join threshold: then they are joined without a shuffle.
        Read from the manifests because the fixed reads carry no statistics Spark could use."""
        limit = int(self._spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        total = 0
        for item in reads:
            known = _SNAPSHOTS.get((self._uuid, item.snapshot_id))
            count = known.records.get(item.path) if known is not None else None
            if count is None:
                return False
            total += count * (len(item.path) + 16)
        return total <= limit


def _delete_key(delete: Any) -> tuple[str, int]:
    """A delete file's identity: its location, and its offset for a DV (many share a file)."""
    offset = delete.contentOffset()
    return str(delete.location()), -1 if offset is None else int(offset)
