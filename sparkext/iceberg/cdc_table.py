"""The Iceberg side of CDC ingestion: create the table, read its CDC progress, commit a batch.

A batch commits as ONE Iceberg transaction: optional schema evolution, optional truncate, and a
RowDelta of data files plus equality-delete files, validated against the snapshot the batch
started from. The source progress goes into the snapshot summary, so a restart can tell whether a
batch already landed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.cdc.files import WrittenFile
    from sparkext.cdc.partitioning import PartitionField

from sparkext.cdc.summary import (
    BATCH_ID,
    CHECKPOINT_ID,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    EVENT_TIME_MIN,
    EVENTS_LOCATION,
    MAX_POSITION,
    SOURCE_PROGRESS,
    TRUNCATE_POSITION,
)

__all__ = [
    "BATCH_ID",
    "CHECKPOINT_ID",
    "EVENTS_LOCATION",
    "EVENT_TIME_MAX",
    "EVENT_TIME_MAX_SO_FAR",
    "EVENT_TIME_MIN",
    "MAX_POSITION",
    "SOURCE_PROGRESS",
    "TRUNCATE_POSITION",
    "CdcCommit",
    "CdcTable",
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


def _iceberg_type(jvm, spark_type: str):
    types = jvm.org.apache.iceberg.types.Types
    simple = {
        "int": types.IntegerType.get,
        "bigint": types.LongType.get,
        "string": types.StringType.get,
        "double": types.DoubleType.get,
        "float": types.FloatType.get,
        "boolean": types.BooleanType.get,
        "date": types.DateType.get,
        "timestamp": types.TimestampType.withZone,
        "binary": types.BinaryType.get,
    }
    if spark_type in simple:
        return simple[spark_type]()
    if spark_type.startswith("decimal("):
        precision, scale = spark_type[8:-1].split(",")
        return types.DecimalType.of(int(precision), int(scale))
    raise ValueError(f"unsupported column type {spark_type}")


def _int_array(spark, values: Sequence[int]):
    array = spark.sparkContext._gateway.new_array(spark._jvm.int, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


class CdcTable:
    """An Iceberg table written by ingest_cdc. Holds the Java table; never hands it out."""

    def __init__(self, spark: SparkSession, name: str):
        self._spark = spark
        self.name = name
        self._table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, name
        )

    # ---- reading ------------------------------------------------------------------------
    def refresh(self) -> None:
        self._table.refresh()

    def columns(self) -> list[Column]:
        from pyspark.sql.types import StructType

        jvm = self._spark._jvm
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
        schema = self._table.schema()
        return [str(schema.findColumnName(i)) for i in sorted(schema.identifierFieldIds())]

    def is_partitioned(self) -> bool:
        return not self._table.spec().isUnpartitioned()

    def partition_fields(self) -> list[PartitionField]:
        """The current spec's fields (void fields of dropped partitions left out)."""
        from sparkext.cdc.partitioning import PartitionField

        types = {c.field_id: c.type for c in self.columns()}
        schema = self._table.schema()
        fields = []
        for field in self._table.spec().fields():
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

    def property(self, key: str) -> str | None:
        value = self._table.properties().get(key)
        return str(value) if value is not None else None

    def progress(self, checkpoint_id: str) -> Progress:
        """Walk back from the current snapshot to the newest commit of ours, and of this checkpoint.

        Usually both are the current snapshot, so this reads one summary.
        """
        snapshot = self._table.currentSnapshot()
        max_position = truncate = None
        time_so_far: int | None = None
        source: dict[str, str] = {}
        batches: dict[str, int] = {}
        found_latest = False
        seen = 0
        while snapshot is not None and seen < _SCAN_BACK:
            summary = snapshot.summary()
            checkpoint = summary.get(CHECKPOINT_ID)
            if checkpoint is not None:
                if not found_latest:
                    found_latest = True
                    max_position = str(summary.get(MAX_POSITION))
                    truncate = summary.get(TRUNCATE_POSITION)
                    truncate = str(truncate) if truncate is not None else None
                    source = json.loads(str(summary.get(SOURCE_PROGRESS) or "{}"))
                    so_far = summary.get(EVENT_TIME_MAX_SO_FAR) or summary.get(EVENT_TIME_MAX)
                    time_so_far = int(str(so_far)) if so_far is not None else None
                if str(checkpoint) == checkpoint_id:
                    batches[checkpoint_id] = int(summary.get(BATCH_ID))
                    break
            parent = snapshot.parentId()
            snapshot = self._table.snapshot(parent) if parent is not None else None
            seen += 1
        return Progress(max_position, truncate, source, batches, time_so_far)

    # ---- writing ------------------------------------------------------------------------
    def begin(self) -> CdcCommit:
        return CdcCommit(self._spark, self._table)


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
    jvm = spark._jvm
    types = jvm.org.apache.iceberg.types.Types
    fields = jvm.java.util.ArrayList()
    for index, (column, spark_type) in enumerate(columns, start=1):
        iceberg_type = _iceberg_type(jvm, spark_type)
        if column in key:
            fields.add(types.NestedField.required(index, column, iceberg_type))
        else:
            fields.add(types.NestedField.optional(index, column, iceberg_type))
    identifier = jvm.java.util.HashSet()
    for index, (column, _) in enumerate(columns, start=1):
        if column in key:
            identifier.add(jvm.java.lang.Integer.valueOf(index))
    schema = jvm.org.apache.iceberg.Schema(fields, identifier)
    from sparkext.iceberg.catalog import split_name

    parts = split_name(spark, name)  # Spark's own parser: quoting, default catalog
    manager = spark._jsparkSession.sessionState().catalogManager()
    if len(parts) > 2 and manager.isCatalogRegistered(parts[0]):
        catalog, rest = manager.catalog(parts[0]), parts[1:]
    else:
        catalog, rest = manager.currentCatalog(), parts
    levels = spark.sparkContext._gateway.new_array(jvm.String, len(rest) - 1)
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
    catalog.icebergCatalog().createTable(table_id, schema, spec.build(), props)
    return CdcTable(spark, name)


class CdcCommit:
    """One batch's transaction: schema changes, truncate, and the RowDelta, committed together."""

    def __init__(self, spark: SparkSession, table):
        self._spark = spark
        self._table = table
        self._start = table.currentSnapshot()
        self._txn = table.newTransaction()

    def evolve(self, additions: Iterable[tuple[str, str]], widenings: Iterable[tuple[str, str]]):
        additions, widenings = list(additions), list(widenings)
        if not additions and not widenings:
            return
        jvm = self._spark._jvm
        update = self._txn.updateSchema()
        for column, spark_type in additions:
            update = update.addColumn(column, _iceberg_type(jvm, spark_type))
        for column, spark_type in widenings:
            update = update.updateColumn(column, _iceberg_type(jvm, spark_type))
        update.commit()

    def _partition(self, spec, values: Sequence[str]):
        """Iceberg's PartitionData for partition strings (parsed by Iceberg, typed in Java)."""
        jvm = self._spark._jvm
        strings = jvm.java.util.ArrayList()
        for value in values:
            strings.add(value)
        probe = (  # DataFiles parses the strings into a typed PartitionData for the spec
            jvm.org.apache.iceberg.DataFiles.builder(spec)
            .withPath("partition-probe.parquet")
            .withFileSizeInBytes(0)
            .withRecordCount(0)
            .withPartitionValues(strings)
            .build()
        )
        return probe.partition()

    def field_ids(self) -> dict[str, int]:
        schema = self._txn.table().schema()
        return {str(f.name()): int(f.fieldId()) for f in schema.columns()}

    def commit(
        self,
        files: Sequence[WrittenFile],
        key: Sequence[str],
        summary: Mapping[str, str],
        truncate: bool,
    ) -> int:
        """Commit the files (and truncate) atomically; return the new snapshot id."""
        from sparkext.cdc.files import DATA

        jvm = self._spark._jvm
        iceberg = jvm.org.apache.iceberg
        table = self._txn.table()
        spec, io = table.spec(), table.io()
        metrics = iceberg.MetricsConfig.forTable(table)
        schema = table.schema()
        key_ids = _int_array(self._spark, [schema.findField(k).fieldId() for k in key])
        delta = self._txn.newRowDelta()
        if truncate:  # every live file goes, in the same snapshot as the batch's new files
            removed_deletes = set()
            scan = self._table.newScan()  # the snapshot the batch started from
            if self._start is not None:
                scan = scan.useSnapshot(self._start.snapshotId())
            tasks = scan.planFiles()
            try:
                iterator = tasks.iterator()
                while iterator.hasNext():
                    task = iterator.next()
                    delta = delta.removeRows(task.file())
                    for delete in task.deletes():
                        if str(delete.location()) not in removed_deletes:
                            removed_deletes.add(str(delete.location()))
                            delta = delta.removeDeletes(delete)
            finally:
                tasks.close()
        for f in files:
            file_metrics = iceberg.parquet.ParquetUtil.fileMetrics(io.newInputFile(f.path), metrics)
            partition = self._partition(spec, f.partition) if f.partition else None
            if f.kind == DATA:
                builder = (
                    iceberg.DataFiles.builder(spec)
                    .withPath(f.path)
                    .withFormat(iceberg.FileFormat.PARQUET)
                    .withFileSizeInBytes(f.bytes)
                    .withMetrics(file_metrics)
                )
                if partition is not None:
                    builder = builder.withPartition(partition)
                delta = delta.addRows(builder.build())
            else:
                builder = (
                    iceberg.FileMetadata.deleteFileBuilder(spec)
                    .ofEqualityDeletes(key_ids)
                    .withPath(f.path)
                    .withFormat(iceberg.FileFormat.PARQUET)
                    .withFileSizeInBytes(f.bytes)
                    .withMetrics(file_metrics)
                )
                if partition is not None:
                    builder = builder.withPartition(partition)
                delta = delta.addDeletes(builder.build())
        if self._start is not None:
            delta = delta.validateFromSnapshot(self._start.snapshotId())
        delta = delta.validateNoConflictingDataFiles().validateNoConflictingDeleteFiles()
        for k, v in summary.items():
            delta = delta.set(k, v)
        from sparkext.iceberg.errors import commit_conflicts

        with commit_conflicts(
            lambda message: (
                f"Another writer changed {table.name()} while this batch was being "
                f"written ({message}); run ingest_cdc again: nothing of this batch was committed."
            )
        ):
            delta.commit()
            self._txn.commitTransaction()
        self._table.refresh()
        return int(self._table.currentSnapshot().snapshotId())
