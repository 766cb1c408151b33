"""The Iceberg side of CDC ingestion: create the table, read its CDC progress, commit a batch.

A batch commits as ONE Iceberg transaction: optional schema evolution, optional truncate, and a
RowDelta of data files plus equality-delete files, validated against the snapshot the batch
started from. The source progress goes into the snapshot summary, so a restart can tell whether a
batch already landed.

Floor: iceberg (the Iceberg Java API). Near 700 lines on purpose: the table's reader and its
batch committer share the per-table facts they cache (field ids, progress records), and split
apart each would need the other's internals.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.executors.cdc.files import WrittenFile
    from sparkext.executors.cdc.partitioning import PartitionField

from sparkext.errors import BatchOutdatedError, IngestError
from sparkext.executors.cdc.partitioning import PartitionField
from sparkext.iceberg.catalog import metadata_name, split_name
from sparkext.iceberg.commit import CommitRequest, commit, delete_files, new_run_id
from sparkext.iceberg.data_files import add_written_files, remove_live_files
from sparkext.iceberg.errors import is_java
from sparkext.iceberg.types import iceberg_type
from sparkext.planning.summary import (
    BATCH_ID,
    CHECKPOINT_ID,
    EVENT_LOGS,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    EVENT_TIME_MIN,
    EVENTS_LOCATION,
    MAX_POSITION,
    SOURCE_PROGRESS,
    TRUNCATE_POSITION,
)
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import string_map

__all__ = [
    "BATCH_ID",
    "CHECKPOINT_ID",
    "EVENTS_LOCATION",
    "EVENT_LOGS",
    "EVENT_TIME_MAX",
    "EVENT_TIME_MAX_SO_FAR",
    "EVENT_TIME_MIN",
    "MAX_POSITION",
    "SOURCE_PROGRESS",
    "TRUNCATE_POSITION",
    "CdcCommit",
    "CdcTable",
    "ConcurrentChange",
    "create_table",
]

_SCAN_BACK = 1000  # snapshots searched for our own progress records


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL type, e.g. "bigint"
    field_id: int
    required: bool


@dataclass(frozen=True)
class Progress:
    """What earlier batches of this table recorded in their snapshot summaries."""

    max_position: str | None
    truncate_position: str | None
    source_progress: Mapping[str, str]
    batches: Mapping[str, int]  # checkpoint id -> last committed batch id
    event_time_max_so_far: int | None = None
    # another writer changed data since this checkpoint's last commit (or that commit is not
    # in the retained history): this checkpoint's key cache cannot decide alone
    foreign_since_ours: bool = True
    # this checkpoint's batches >= cache_floor were committed after every other writer's change
    cache_floor: int | None = None


@dataclass(frozen=True)
class CommitRecord:
    """One ingest_cdc commit: its snapshot, commit time and snapshot summary."""

    snapshot_id: int
    committed_ms: int
    summary: Mapping[str, str]


@dataclass(frozen=True)
class ConcurrentChange:
    """A snapshot another writer committed after a batch was planned, as the batch's check sees
    it: which keys it may have touched."""

    snapshot_id: int
    operation: str | None
    checkpoint_id: str | None  # set for ingest_cdc commits
    removed_data_files: bool  # truncates and row-level rewrites: keys not knowable cheaply
    truncate_position: str | None  # the newest truncate the table had after this snapshot
    equality_delete_paths: tuple[str, ...]  # every key an ingest_cdc commit touched is in these


_SHAPES: dict[tuple[str, str, str], Any] = {}  # see _remembered
_SHAPES_MAX = 256


def _remembered(spark: SparkSession, table, what: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered per schema and partition spec (their JSON: two py4j calls): a
    micro-batch asks for the key, columns, field ids and partition fields several times, each a
    walk of Java objects (~70 py4j calls), and they depend only on those two. Keyed by content,
    not ids: tables sharing a uuid (registered copies, catalog branches) may give one id to
    different schemas."""
    iceberg = jvm_of(spark).org.apache.iceberg
    state = (
        what,
        str(iceberg.SchemaParser.toJson(table.schema())),
        str(iceberg.PartitionSpecParser.toJson(table.spec())),
    )
    found = _SHAPES.get(state)
    if found is None:
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.pop(next(iter(_SHAPES)))  # the oldest entry (_SHAPES_MAX > 0: there is one)
        found = _SHAPES[state] = compute()
    return copy.deepcopy(found)


class CdcTable:
    """An Iceberg table written by ingest_cdc. Holds the Java table; never hands it out."""

    def __init__(self, spark: SparkSession, name: str):
        self._spark = spark
        self.name = name
        self._table = jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, name
        )

    # ---- reading ------------------------------------------------------------------------
    def refresh(self) -> None:
        """Refresh the Java table and, when it is another object, the one Spark's catalog
        caches: reads pinned to a snapshot this table knows must find it in Spark too.

        Spark's catalog drops its cached table 30 s (by default) after its last use and loads
        a new one on the next read; this object lives on beside it, and only a refresh tells the
        new one about commits made since it was loaded (another process's, found by our refresh).
        """
        self._table.refresh()
        cached = jvm_of(self._spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self._spark._jsparkSession, self.name
        )
        if not cached.equals(self._table):
            cached.refresh()  # after ours: Spark's table knows at least every snapshot ours does

    def _memo(self, what: str, compute: Callable[[], Any]) -> Any:
        return _remembered(self._spark, self._table, what, compute)

    def columns(self) -> list[Column]:
        return self._memo("columns", self._columns)

    def _columns(self) -> list[Column]:
        from pyspark.sql.types import StructType

        jvm = jvm_of(self._spark)
        schema = self._table.schema()
        struct = StructType.fromJson(
            json.loads(jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(schema).json())
        )
        return [
            Column(
                f.name,
                f.dataType.simpleString(),
                schema.findField(f.name).fieldId(),
                not f.nullable,
            )
            for f in struct.fields
        ]

    def key(self) -> list[str]:
        return self._memo("key", self._key)

    def _key(self) -> list[str]:
        schema = self._table.schema()
        return [
            str(schema.findColumnName(i))
            for i in sorted(int(i) for i in _iterate(schema.identifierFieldIds()))
        ]

    def current_summary(self) -> dict[str, str]:
        """The current snapshot's summary (empty for a table without snapshots)."""
        snapshot = self._table.currentSnapshot()
        return {} if snapshot is None else string_map(snapshot.summary())

    def key_was_narrower(self, key: Sequence[str]) -> bool:
        """Whether an earlier schema of the table gave a key column another type (int before
        an ``ALTER … TYPE bigint``): files written then hold the narrower type. Not remembered
        by shape: two tables of one current schema can have different histories."""
        current = self._table.schema()
        ids = [current.findField(k).fieldId() for k in key if current.findField(k) is not None]
        for schema in _iterate(self._table.schemas().values()):
            for field_id in ids:
                old = schema.findField(field_id)
                if old is not None and not old.type().equals(current.findField(field_id).type()):
                    return True
        return False

    def is_partitioned(self) -> bool:
        return not self._table.spec().isUnpartitioned()

    def make_key(self, columns: Sequence[str]) -> None:
        """Make ``columns`` the table's identifier fields in ONE schema commit, marking them
        required first where they are optional (Iceberg's identifier fields must be; Spark's
        ``ALTER COLUMN … SET NOT NULL`` refuses). The caller checked they hold no NULL."""
        update = self._table.updateSchema()
        optional = [c.name for c in self.columns() if c.name in columns and not c.required]
        if optional:
            update = update.allowIncompatibleChanges()
            for name in optional:
                update = update.requireColumn(name)
        names = jvm_of(self._spark).java.util.ArrayList()
        for name in columns:
            names.add(name)
        update.setIdentifierFields(names).commit()
        self.refresh()

    def partition_fields(self) -> list[PartitionField]:
        """The current spec's fields (void fields of dropped partitions left out)."""
        return self._memo("partition_fields", self._partition_fields)

    def _partition_fields(self) -> list[PartitionField]:

        types = {c.field_id: c.type for c in self.columns()}
        schema = self._table.schema()
        fields = []
        for field in _iterate(self._table.spec().fields()):
            transform = str(field.transform().toString())
            if transform == "void":
                continue
            source = int(field.sourceId())
            fields.append(
                PartitionField(
                    str(field.name()),
                    str(schema.findColumnName(source)),
                    transform,
                    types.get(source, "?"),
                )
            )
        return fields

    def format_version(self) -> int:
        return int(self._table.operations().current().formatVersion())

    def data_directory(self) -> str:
        location = str(self._table.locationProvider().newDataLocation("probe"))
        return location.rsplit("/", 1)[0]

    def current_snapshot_id(self) -> int | None:
        snapshot = self._table.currentSnapshot()
        return int(snapshot.snapshotId()) if snapshot is not None else None

    def metrics_properties(self) -> dict[str, str]:
        """The table's ``write.metadata.metrics.*`` properties (executors compute file metrics)."""
        prefix = "write.metadata.metrics."
        util = jvm_of(self._spark).org.apache.iceberg.util.PropertyUtil
        found = util.propertiesWithPrefix(self._table.properties(), prefix)  # usually empty
        return {prefix + k: v for k, v in string_map(found).items()}

    def property(self, key: str) -> str | None:
        value = self._table.properties().get(key)
        return str(value) if value is not None else None

    def progress(
        self, checkpoint_id: str, cache_from: int | None = None, snapshot_id: int | None = None
    ) -> Progress:
        """Walk back from the snapshot (default: the current one) to the newest commit of any
        checkpoint (the high-water marks) and of this checkpoint (its last batch).

        With ``cache_from`` the walk goes on to find ``cache_floor``: this checkpoint's batches
        from that one on were all committed after the newest change by another writer, so their
        key-cache entries are still the keys' versions. Usually the first snapshot answers all.
        """
        snapshot = (
            self._table.snapshot(snapshot_id)
            if snapshot_id is not None
            else self._table.currentSnapshot()
        )
        max_position = truncate = None
        time_so_far: int | None = None
        source: dict[str, str] = {}
        found_latest = False
        ours_latest: int | None = None
        cache_floor: int | None = None
        foreign = False
        seen = 0
        while snapshot is not None and seen < _SCAN_BACK:
            summary = snapshot.summary()
            checkpoint = summary.get(CHECKPOINT_ID)
            mine = checkpoint is not None and str(checkpoint) == checkpoint_id
            if not mine and str(snapshot.operation()) != "replace":
                foreign = True  # "replace" (compaction, delete rewrite) keeps every row
            if checkpoint is not None and not found_latest:
                found_latest = True
                position = summary.get(MAX_POSITION)
                max_position = str(position) if position is not None else None
                truncate = summary.get(TRUNCATE_POSITION)
                truncate = str(truncate) if truncate is not None else None
                source = json.loads(str(summary.get(SOURCE_PROGRESS) or "{}"))
                so_far = summary.get(EVENT_TIME_MAX_SO_FAR) or summary.get(EVENT_TIME_MAX)
                time_so_far = int(str(so_far)) if so_far is not None else None
            if mine:
                batch = int(str(summary.get(BATCH_ID)))
                ours_latest = batch if ours_latest is None else ours_latest
                if not foreign:
                    cache_floor = batch
            if ours_latest is not None and (
                foreign
                or cache_from is None
                or (cache_floor is not None and cache_floor <= cache_from)
            ):
                break
            parent = snapshot.parentId()
            snapshot = self._table.snapshot(parent) if parent is not None else None
            seen += 1
        batches = {checkpoint_id: ours_latest} if ours_latest is not None else {}
        return Progress(
            max_position, truncate, source, batches, time_so_far, cache_floor is None, cache_floor
        )

    def cdc_commits(self, every: bool, limit: int = _SCAN_BACK) -> list[CommitRecord]:
        """ingest_cdc's commits, newest first, walking back from the current snapshot (after a
        refresh): every one (up to ``limit`` snapshots back) when ``every``, else only each
        checkpoint's newest (the walk stops once every checkpoint in the table's event-log
        property is found)."""
        self._table.refresh()
        wanted = set(self.event_logs())
        if not every and not wanted:
            return []  # no ingest_cdc job recorded itself on this table
        found: list[CommitRecord] = []
        seen_checkpoints: set[str] = set()
        snapshot = self._table.currentSnapshot()
        steps = 0
        while snapshot is not None and steps < limit:
            summary = {str(k): str(v) for k, v in dict(snapshot.summary()).items()}
            checkpoint = summary.get(CHECKPOINT_ID)
            if checkpoint is not None and (every or checkpoint not in seen_checkpoints):
                seen_checkpoints.add(checkpoint)
                when = int(snapshot.timestampMillis())
                found.append(CommitRecord(int(snapshot.snapshotId()), when, summary))
            if not every and wanted and wanted <= seen_checkpoints:
                break
            parent = snapshot.parentId()
            snapshot = self._table.snapshot(parent) if parent is not None else None
            steps += 1
        return found

    def committed_batches(self) -> dict[str, int]:
        """Checkpoint id -> the highest batch id it committed, over the retained snapshots (one
        metadata query; a row per checkpoint reaches the driver)."""
        from pyspark.sql import functions as F

        checkpoint = F.col("summary").getItem(CHECKPOINT_ID)
        rows = (
            self._spark.table(metadata_name(self._spark, self.name, "snapshots"))
            .where(checkpoint.isNotNull())
            .groupBy(checkpoint.alias("checkpoint"))
            .agg(F.max(F.col("summary").getItem(BATCH_ID).cast("bigint")).alias("batch"))
            .collect()
        )
        return {r.checkpoint: int(r.batch) for r in rows if r.batch is not None}

    def event_logs(self) -> dict[str, str]:
        """Checkpoint id -> event-log root of every checkpoint that committed to this table."""
        return json.loads(self.property(EVENT_LOGS) or "{}")

    def equality_delete_paths(self, snapshot_id: int | None) -> list[str]:
        """Live equality-delete files as of ``snapshot_id``, sorted: the snapshot's delete
        manifests read through the Java table (file paths only cross py4j).

        Not through Spark's ``delete_files`` metadata table: Spark's catalog caches the table,
        and a snapshot another process committed after that is unknown to the cached one.

        Raises:
            BatchOutdatedError: the table has no such snapshot, even after a refresh.
        """
        if snapshot_id is None:
            return []

        snapshot = self._snapshot(snapshot_id)
        manifest_files = jvm_of(self._spark).org.apache.iceberg.ManifestFiles
        io, specs = self._table.io(), self._table.specs()
        paths: set[str] = set()
        for manifest in _iterate(snapshot.deleteManifests(io)):
            reader = manifest_files.readDeleteManifest(manifest, io, specs)
            try:
                for f in _iterate(reader):  # live entries only, as delete_files lists them
                    if str(f.content().toString()) == "EQUALITY_DELETES":
                        paths.add(str(f.location()))
            finally:
                reader.close()
        return sorted(paths)

    def _snapshot(self, snapshot_id: int):
        """The Java snapshot, refreshing the table once when it does not know it (yet)."""
        snapshot = self._table.snapshot(snapshot_id)
        if snapshot is None:
            self.refresh()  # another process may have committed it since the load
            snapshot = self._table.snapshot(snapshot_id)
        if snapshot is None:
            raise BatchOutdatedError(
                f"Snapshot {snapshot_id} is not in the history of {self.name} (another writer "
                "may have expired it); nothing of this batch was committed: run ingest_cdc again."
            )
        return snapshot

    # ---- writing ------------------------------------------------------------------------
    def begin(self) -> CdcCommit:
        return CdcCommit(self._spark, self._table, self.name)


def create_table(
    spark: SparkSession,
    name: str,
    columns: Sequence[tuple[str, str]],
    key: Sequence[str],
    properties: Mapping[str, str],
    partition_by: Sequence[tuple[str, str, int | None]] = (),
) -> CdcTable:
    """Create a format-v2 table whose identifier fields are ``key``.

    ``partition_by``: (transform, column, argument) triples, e.g. ("bucket", "id", 16).
    """
    jvm = jvm_of(spark)
    types = jvm.org.apache.iceberg.types.Types
    fields = jvm.java.util.ArrayList()
    for index, (column, spark_type) in enumerate(columns, start=1):
        field_type = iceberg_type(jvm, spark_type)
        if column in key:
            fields.add(types.NestedField.required(index, column, field_type))
        else:
            fields.add(types.NestedField.optional(index, column, field_type))
    identifier = jvm.java.util.HashSet()
    for index, (column, _) in enumerate(columns, start=1):
        if column in key:
            identifier.add(jvm.java.lang.Integer.valueOf(index))
    schema = jvm.org.apache.iceberg.Schema(fields, identifier)

    parts = split_name(spark, name)  # Spark's own parser: quoting, default catalog
    manager = spark._jsparkSession.sessionState().catalogManager()
    if len(parts) > 2 and manager.isCatalogRegistered(parts[0]):
        catalog, rest = manager.catalog(parts[0]), parts[1:]
    else:
        catalog, rest = manager.currentCatalog(), parts
    gateway = spark.sparkContext._gateway
    assert gateway is not None  # a running SparkContext has its py4j gateway
    levels = gateway.new_array(jvm.String, len(rest) - 1)
    for i, level in enumerate(rest[:-1]):
        levels[i] = level
    namespace = jvm.org.apache.iceberg.catalog.Namespace.of(levels)
    table_id = jvm.org.apache.iceberg.catalog.TableIdentifier.of(namespace, rest[-1])
    props = jvm.java.util.HashMap()
    for k, v in properties.items():
        props.put(k, v)
    spec = jvm.org.apache.iceberg.PartitionSpec.builderFor(schema)
    for transform, column, argument in partition_by:
        if transform == "identity":
            spec = spec.identity(column)
        elif transform == "bucket":
            spec = spec.bucket(column, int(argument or 0))
        else:
            spec = spec.truncate(column, int(argument or 0))
    try:
        catalog.icebergCatalog().createTable(table_id, schema, spec.build(), props)
    except Exception as error:  # another process created it first: use theirs if it fits
        if not is_java(error, "AlreadyExistsException"):
            raise
        table = CdcTable(spark, name)
        if set(table.key()) != set(key):
            raise IngestError(
                f"Table '{name}' was created by another writer at the same time with primary "
                f"key ({', '.join(table.key())}), not ({', '.join(key)}); pass the same "
                "primary_key to every ingest_cdc writing it."
            ) from None
        return table
    return CdcTable(spark, name)


def _marks_over(table, summary: Mapping[str, str]) -> dict[str, str]:
    """The batch's high-water marks merged with the newest ingest_cdc commit of ``table`` (the
    commit's base): another writer may have committed since the batch read them, and a mark
    must never go down (a lower one lets older changes skip the lookup)."""
    snapshot = table.currentSnapshot()
    seen = 0
    while snapshot is not None and seen < _SCAN_BACK:
        theirs = snapshot.summary()
        if theirs.get(CHECKPOINT_ID) is not None:
            break
        parent = snapshot.parentId()
        snapshot = table.snapshot(parent) if parent is not None else None
        seen += 1
    else:
        return {}
    if snapshot is None:
        return {}
    merged: dict[str, str] = {}
    for mark in (MAX_POSITION, TRUNCATE_POSITION):
        values = [str(v) for v in (summary.get(mark), theirs.get(mark)) if v is not None]
        if values:
            merged[mark] = max(values)
    times = [
        int(str(v))
        for v in (summary.get(EVENT_TIME_MAX_SO_FAR), theirs.get(EVENT_TIME_MAX_SO_FAR))
        if v is not None
    ]
    if times:
        merged[EVENT_TIME_MAX_SO_FAR] = str(max(times))
    progress = json.loads(str(theirs.get(SOURCE_PROGRESS) or "{}"))
    for partition, position in json.loads(summary.get(SOURCE_PROGRESS) or "{}").items():
        progress[partition] = max(position, progress.get(partition, position))
    merged[SOURCE_PROGRESS] = json.dumps(progress, sort_keys=True)
    return merged


class CdcCommit:
    """One batch's commit: schema changes, truncate, and the RowDelta, in ONE Iceberg snapshot.

    Built through the commit layer (:mod:`sparkext.iceberg.commit`): validated from the snapshot
    the batch started from, re-staged on a lost race, never cleaned up on an unknown state.
    """

    def __init__(self, spark: SparkSession, table, name: str):
        self._spark = spark
        self._table = table
        self._name = name
        self._start = table.currentSnapshot()
        self._additions: list[tuple[str, str]] = []
        self._widenings: list[tuple[str, str]] = []
        self._field_ids: dict[str, int] | None = None

    @property
    def start_snapshot_id(self) -> int | None:
        return int(self._start.snapshotId()) if self._start is not None else None

    def evolve(self, additions: Iterable[tuple[str, str]], widenings: Iterable[tuple[str, str]]):
        """Record schema changes; they are staged with the batch's files, in its commit."""
        self._additions += list(additions)
        self._widenings += list(widenings)
        self._field_ids = None

    def _stage_schema(self, txn) -> None:
        if not self._additions and not self._widenings:
            return
        jvm = jvm_of(self._spark)
        schema = txn.table().schema()
        update = txn.updateSchema()
        for column, spark_type in self._additions:
            if schema.findField(column) is None:  # another writer may have added it already
                update = update.addColumn(column, iceberg_type(jvm, spark_type))
        for column, spark_type in self._widenings:
            update = update.updateColumn(column, iceberg_type(jvm, spark_type))
        update.commit()

    @staticmethod
    def _ids(table) -> dict[str, int]:
        """Field ids by name, nested fields by path (``tags.element``, ``m.key``)."""
        schema = table.schema()
        return {name: int(field_id) for field_id, name in string_map(schema.idToName()).items()}

    def field_ids(self) -> dict[str, int]:
        """Field ids of the batch's schema (after its changes), which the files are written with."""
        if self._field_ids is None and not (self._additions or self._widenings):
            self._field_ids = _remembered(
                self._spark, self._table, "field_ids", lambda: self._ids(self._table)
            )
        if self._field_ids is None:
            scratch = self._table.newTransaction()  # staged only, never committed
            self._stage_schema(scratch)
            self._field_ids = self._ids(scratch.table())
        return dict(self._field_ids)

    def commit(
        self,
        files: Sequence[WrittenFile],
        key: Sequence[str],
        summary: Mapping[str, str],
        truncate: bool,
        run_id: str | None = None,
        check: Callable[[Sequence[ConcurrentChange]], None] | None = None,
        event_log: tuple[str, str] | None = None,
        what: str = "this batch",
    ) -> int:
        """Commit the files (and truncate) atomically; return the new snapshot id. ``what``
        names the batch in sentences ("micro-batch 3": a Ctrl-C lists what landed by it).

        ``check`` sees the snapshots other writers committed since the batch was planned and
        raises when one of them touched the batch's keys (the batch must then be decided again);
        disjoint writers commit side by side. ``event_log``: (checkpoint id, event-log root),
        recorded in the table's ``sparkext.cdc.event-logs`` property.
        """

        expected_ids = self.field_ids()

        def build(attempt) -> None:
            self._stage_schema(attempt.txn)
            staged = attempt.txn.table()
            if self._additions or self._widenings:
                found = self._ids(staged)
            else:  # a committed schema (its id names one content): remembered
                found = _remembered(self._spark, staged, "field_ids", lambda: self._ids(staged))
            if found != expected_ids:
                raise BatchOutdatedError(
                    f"Another writer changed the schema of {self._name} while this batch was "
                    "being written; nothing of this batch was committed: run ingest_cdc again."
                )
            attempt.update_summary(_marks_over(attempt.table, summary))
            if event_log is not None:
                self._record_event_log(attempt.txn, *event_log)
            delta = self._row_delta(attempt.txn, files, key, truncate)
            attempt.stamp(delta).commit()

        def check_changes(attempt) -> None:
            if check is not None:
                check([self._change(snapshot) for snapshot in attempt.java_since_plan])

        request = CommitRequest(
            check=check_changes,
            table_name=self._name,
            planned_snapshot_id=self.start_snapshot_id,
            build=build,
            what=what,
            rerun_hint="run ingest_cdc again",
            summary=summary,
            run_id=run_id or new_run_id(),
        )
        return commit(self._spark, self._table, request).snapshot_id

    def _row_delta(self, txn, files: Sequence[WrittenFile], key: Sequence[str], truncate: bool):
        delta = txn.newRowDelta()
        if truncate:  # every live file goes, in the same snapshot as the batch's new files
            start = self._start.snapshotId() if self._start is not None else None
            delta = remove_live_files(self._table, delta, start)
        delta = add_written_files(self._spark, txn.table(), delta, files, key)
        if not truncate:
            # no table-wide validation: writers on other keys must not starve this one; the
            # batch's ``check`` reads which keys the snapshots since the plan touched
            return delta
        if self._start is not None:
            delta = delta.validateFromSnapshot(self._start.snapshotId())
        return delta.validateNoConflictingDataFiles().validateNoConflictingDeleteFiles()

    def _change(self, snapshot) -> ConcurrentChange:

        summary = snapshot.summary()
        operation = snapshot.operation()
        checkpoint = summary.get(CHECKPOINT_ID)
        removed = int(str(summary.get("deleted-data-files") or 0)) > 0
        paths = tuple(
            str(f.location())
            for f in _iterate(snapshot.addedDeleteFiles(self._table.io()))
            if str(f.content().toString()) == "EQUALITY_DELETES"
        )
        return ConcurrentChange(
            snapshot_id=int(snapshot.snapshotId()),
            operation=str(operation) if operation is not None else None,
            checkpoint_id=str(checkpoint) if checkpoint is not None else None,
            removed_data_files=removed,
            truncate_position=(
                str(summary.get(TRUNCATE_POSITION))
                if summary.get(TRUNCATE_POSITION) is not None
                else None
            ),
            equality_delete_paths=paths,
        )

    @staticmethod
    def _record_event_log(txn, checkpoint_id: str, root: str) -> None:
        value = txn.table().properties().get(EVENT_LOGS)
        logs = json.loads(str(value)) if value is not None else {}
        if logs.get(checkpoint_id) != root:
            logs[checkpoint_id] = root
            txn.updateProperties().set(EVENT_LOGS, json.dumps(logs, sort_keys=True)).commit()

    def discard(self, files: Sequence[WrittenFile]) -> None:
        """Delete the files of a batch that was definitely not committed (best effort)."""

        delete_files(self._table, [f.path for f in files])
