"""The Iceberg side of rewrite_equality_deletes: delete-file facts, partition selection, commit.

Facts come from the ``entries`` metadata table at the plan's snapshot (so partition keys are the
same strings the executors compute for data files); the Java ``DeleteFile`` objects needed to
remove files stay in this module, looked up by path. The commit is ONE RewriteFiles validated
from the snapshot the plan started from.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sparkext import identifiers
from sparkext.errors import CommitConflictError, ProcedureArgumentError
from sparkext.iceberg.commit import CommitRequest, commit, delete_files
from sparkext.iceberg.data_files import java_metrics
from sparkext.iceberg.errors import spark_message
from sparkext.literals import sql_string
from sparkext.planning.equality_deletes import DeleteFileFact
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import map_values

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from sparkext.iceberg.catalog import TableRef

SUMMARY_OPERATION = "sparkext.operation"
OPERATION = "rewrite_equality_deletes"


@dataclass(frozen=True)
class KeyColumn:
    field_id: int
    name: str
    spark_type: str  # Spark DDL type, e.g. "bigint"


@dataclass(frozen=True)
class NewDeleteFile:
    """A delete file written by an executor, to be added by the commit."""

    path: str
    partition: str  # "<spec id>:<JSON>"
    records: int
    file_size: int
    sequence_number: int
    referenced_data_file: str | None = None  # DVs: the one data file
    content_offset: int | None = None  # DVs: where the blob sits in the Puffin file
    content_size: int | None = None
    metrics: str | None = None  # JSON Iceberg metrics computed by the writer (see cdc.files)

    @property
    def is_dv(self) -> bool:
        return self.content_offset is not None  # v2 files may name one data file, too


def partition_key(partition: SparkColumn | None, spec_id: SparkColumn) -> SparkColumn:
    """The string data and delete files are grouped by: ``<spec id>:<partition JSON>``."""
    from pyspark.sql import functions as F

    body = F.lit("{}") if partition is None else F.coalesce(F.to_json(partition), F.lit("{}"))
    return F.concat(spec_id.cast("string"), F.lit(":"), body)


class DeleteTable:
    """An Iceberg table whose delete files are being rewritten. Java objects never leave it."""

    def __init__(self, spark: SparkSession, ref: TableRef):
        self._spark = spark
        self.ref = ref
        self._table = jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, ref.name
        )
        self._java_files: dict[tuple[str, int], Any] = {}  # py4j DeleteFile objects
        self._partitions: dict[str, tuple[int, object]] = {}
        self._unpartitioned: tuple[int, list[int]] | None = None  # (spec count, ids), cached

    # ---- facts --------------------------------------------------------------------------
    def refresh(self) -> None:
        self._table.refresh()
        self._unpartitioned = None

    def current_snapshot_id(self) -> int | None:
        snapshot = self._table.currentSnapshot()
        return int(snapshot.snapshotId()) if snapshot is not None else None

    def format_version(self) -> int:
        return int(self._table.operations().current().formatVersion())

    def key_columns(self, field_ids: Sequence[int]) -> list[KeyColumn]:
        """Equality columns by field id, named and typed as in the current schema."""
        from pyspark.sql.types import StructType

        jvm = jvm_of(self._spark)
        schema = self._table.schema()
        struct = StructType.fromJson(
            json.loads(jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(schema).json())
        )
        types = {f.name: f.dataType.simpleString() for f in struct.fields}
        out = []
        for field_id in field_ids:
            name = schema.findColumnName(field_id)
            if name is None or str(name) not in types:
                raise ProcedureArgumentError(
                    f"Equality deletes of {self.ref.name} use field id {field_id}, which is not "
                    "a top-level column of the current schema; convert them with "
                    "rewrite_data_files instead."
                )
            out.append(KeyColumn(field_id, str(name), types[str(name)]))
        return out

    def data_files(self, snapshot_id: int) -> DataFrame:
        """Live data files at the snapshot: file_path, data_seq, pkey, unpartitioned, format."""
        from pyspark.sql import functions as F

        entries = self._entries(snapshot_id).where("status < 2 AND data_file.content = 0")
        unpartitioned = self._unpartitioned_specs()
        return entries.select(
            F.col("data_file.file_path").alias("file_path"),
            F.col("sequence_number").alias("data_seq"),
            partition_key(self._partition_column(entries), F.col("data_file.spec_id")).alias(
                "pkey"
            ),
            F.col("data_file.spec_id").isin(unpartitioned).alias("unpartitioned"),
            F.upper(F.col("data_file.file_format")).alias("format"),
            F.col("data_file.record_count").alias("records"),
        )

    def delete_files(self, snapshot_id: int, where: str | None) -> list[DeleteFileFact]:
        """Facts about every live delete file at the snapshot (metadata rows only)."""
        from pyspark.sql import functions as F

        entries = self._entries(snapshot_id).where("status < 2 AND data_file.content > 0")
        rows = entries.select(
            F.col("data_file.file_path").alias("path"),
            F.col("data_file.content").alias("content"),
            F.col("sequence_number").alias("seq"),
            F.col("data_file.spec_id").alias("spec_id"),
            partition_key(self._partition_column(entries), F.col("data_file.spec_id")).alias(
                "pkey"
            ),
            F.col("data_file.record_count").alias("records"),
            F.col("data_file.file_size_in_bytes").alias("bytes"),
            F.upper(F.col("data_file.file_format")).alias("format"),
            F.col("data_file.equality_ids").alias("equality_ids"),
            F.col("data_file.referenced_data_file").alias("referenced"),
            F.col("data_file.content_size_in_bytes").alias("content_size"),
            F.col("data_file.content_offset").alias("content_offset"),
        ).collect()
        self._load_java_files(snapshot_id)
        selector = self._partition_selector(where)
        unpartitioned = set(self._unpartitioned_specs())
        facts = []
        for r in rows:
            offset = None if r.content_offset is None else int(r.content_offset)
            java = self._java_files.get((r.path, -1 if offset is None else offset))
            if java is None:
                raise CommitConflictError(
                    f"Delete file {r.path} is listed by {self.ref.name}.entries but not by its "
                    "manifests; run the procedure again."
                )
            self._partitions.setdefault(r.pkey, (int(r.spec_id), java.partition()))
            facts.append(
                DeleteFileFact(
                    path=r.path,
                    content=int(r.content),
                    sequence_number=int(r.seq),
                    partition=r.pkey,
                    spec_unpartitioned=int(r.spec_id) in unpartitioned,
                    records=int(r.records),
                    bytes=int(r.content_size if r.format == "PUFFIN" else r.bytes),
                    file_format=r.format,
                    equality_ids=tuple(int(i) for i in (r.equality_ids or ())),
                    referenced_data_file=r.referenced,
                    content_offset=offset,
                    # a table-wide delete is never wholly inside a partition predicate
                    selected=(not where or int(r.spec_id) not in unpartitioned) and selector(java),
                )
            )
        return facts

    def _entries(self, snapshot_id: int) -> DataFrame:
        return (
            self._spark.read.format("iceberg")
            .option("snapshot-id", str(snapshot_id))
            .load(identifiers.join((*self.ref.parts, "entries")))
        )

    @staticmethod
    def _partition_column(entries: DataFrame) -> SparkColumn | None:
        from pyspark.sql import functions as F

        fields = cast("StructType", entries.schema["data_file"].dataType).fieldNames()
        return F.col("data_file.partition") if "partition" in fields else None

    def _unpartitioned_specs(self) -> list[int]:
        """Ids of the unpartitioned specs (asked once per table state: ~10 py4j calls)."""
        if self._unpartitioned is None:
            specs = self._table.specs()
            ids = [int(k) for k in _iterate(specs.keySet()) if specs.get(k).isUnpartitioned()]
            self._unpartitioned = (int(specs.size()), ids)
        return self._unpartitioned[1]

    def _load_java_files(self, snapshot_id: int) -> None:
        jvm = jvm_of(self._spark)
        snapshot = self._table.snapshot(snapshot_id)
        io, specs = self._table.io(), self._table.specs()
        manifests = snapshot.deleteManifests(io)
        for m in range(manifests.size()):
            reader = jvm.org.apache.iceberg.ManifestFiles.readDeleteManifest(
                manifests.get(m), io, specs
            )
            try:
                iterator = reader.iterator()
                while iterator.hasNext():
                    f = iterator.next().copyWithoutStats()
                    offset = f.contentOffset()
                    ident = (str(f.location()), -1 if offset is None else int(offset))
                    self._java_files[ident] = f
            finally:
                reader.close()

    def partition_selector(self, where: str | None):
        """A predicate on Java content files: is the file's partition wholly inside ``where``?"""
        return self._partition_selector(where)

    def _partition_selector(self, where: str | None):
        """A predicate on Java delete files: is the file's partition wholly inside ``where``?"""
        if not where:
            return lambda java_file: True
        jvm = jvm_of(self._spark)
        converter = jvm.org.apache.spark.sql.execution.datasources.SparkExpressionConverter

        try:
            resolved = converter.collectResolvedSparkExpression(
                self._spark._jsparkSession, self.ref.name, where
            )
            expression = converter.convertToIcebergExpression(resolved)
        except Exception as error:
            message = spark_message(error)
            if message is None:
                raise
            raise ProcedureArgumentError(
                f"Cannot use where => {sql_string(where)} on {self.ref.name} ({message}); write a "
                "predicate on partition columns, e.g. where => \"day = DATE '2026-11-21'\"."
            ) from None
        self._check_partition_columns(expression, where)
        projections = jvm.org.apache.iceberg.expressions.Projections
        evaluators: dict[int, Any] = {}  # py4j Evaluator objects

        def selected(java_file) -> bool:
            spec_id = int(java_file.specId())
            if spec_id not in evaluators:
                spec = self._table.specs().get(spec_id)
                strict = projections.strict(spec).project(expression)
                evaluators[spec_id] = jvm.org.apache.iceberg.expressions.Evaluator(
                    spec.partitionType(), strict
                )
            return bool(evaluators[spec_id].eval(java_file.partition()))

        return selected

    def _check_partition_columns(self, expression, where: str) -> None:
        jvm = jvm_of(self._spark)
        schema = self._table.schema()
        expressions = jvm.java.util.ArrayList()
        expressions.add(expression)
        ids = jvm.org.apache.iceberg.expressions.Binder.boundReferences(
            schema.asStruct(), expressions, False
        )
        sources = set()
        for spec in map_values(self._table.specs()):
            for field in _iterate(spec.fields()):
                sources.add(int(field.sourceId()))
        others = sorted(str(schema.findColumnName(i)) for i in ids if int(i) not in sources)
        if others:
            raise ProcedureArgumentError(
                f"where => {sql_string(where)} uses column "
                f"{', '.join(repr(o) for o in others)}, but only "
                f"partition source columns of {self.ref.name} may be used: the procedure works "
                "on whole partitions."
            )

    def partitioned_data_min_sequence(self, snapshot_id: int) -> int | None:
        """Oldest data sequence number among data files of a partitioned spec (None: none)."""
        from pyspark.sql import functions as F

        unpartitioned = self._unpartitioned_specs()
        assert self._unpartitioned is not None
        if len(unpartitioned) == self._unpartitioned[0]:
            return None  # every spec is unpartitioned: no job needed
        data = self.data_files(snapshot_id).where(~F.col("unpartitioned"))
        row = data.agg(F.min("data_seq")).first()
        assert row is not None  # a global aggregate has one row
        value = row[0]
        return None if value is None else int(value)

    def spec_unpartitioned(self, partition: str) -> bool:
        return int(partition.split(":", 1)[0]) in self._unpartitioned_specs()

    def deleted_rows(
        self, snapshot_id: int, keys: Sequence[KeyColumn], where: str | None
    ) -> DataFrame:
        """Rows some delete removes at the snapshot: ``file_path``, ``pos`` and keys ``d0..dn``.

        Iceberg's ``_deleted`` metadata column marks deleted rows instead of dropping them, so
        only key columns are read and rows no delete touches are filtered out before any join.
        """
        from pyspark.sql import functions as F

        rows = (
            self._spark.read.format("iceberg")
            .option("snapshot-id", str(snapshot_id))
            .load(identifiers.join(self.ref.parts))
        )
        if where:
            rows = rows.where(where)
        return rows.where(F.col("_deleted")).select(
            F.col("_file").alias("file_path"),
            F.col("_pos").alias("pos"),
            *[identifiers.col(k.name).alias(f"d{i}") for i, k in enumerate(keys)],
        )

    def positions_of(self, files: Sequence[DeleteFileFact]) -> DataFrame:
        """Positions held by existing position-delete files / DVs: file_path, pos, del_seq."""
        from pyspark.sql import functions as F

        deletes = self._spark.read.format("iceberg").load(
            identifiers.join((*self.ref.parts, "position_deletes"))
        )
        offset = (
            F.coalesce(F.col("content_offset"), F.lit(-1))
            if "content_offset" in deletes.columns
            else F.lit(-1).cast("bigint")
        )
        wanted = self._spark.createDataFrame(
            [(f.path, f.ident[1], f.sequence_number) for f in files],
            "delete_file_path string, offset bigint, del_seq bigint",
        )
        return (
            deletes.select("file_path", "pos", "delete_file_path", offset.alias("offset"))
            .join(F.broadcast(wanted), ["delete_file_path", "offset"])
            .select("file_path", "pos", "del_seq")
        )

    # ---- writing ------------------------------------------------------------------------
    def data_directory(self) -> str:
        location = str(self._table.locationProvider().newDataLocation("probe"))
        return location.rsplit("/", 1)[0]

    def commit(
        self,
        start_snapshot_id: int,
        removed: Sequence[DeleteFileFact],
        added: Sequence[NewDeleteFile],
        summary: Mapping[str, str],
        newest_equality_sequence: int | None = None,
    ) -> int:
        """Remove the replaced delete files and add the new ones in ONE RewriteFiles.

        The checks Iceberg's RewriteFiles does not make (data files rewritten with an older
        sequence number; a DV added for a data file we add one for) run inside every commit
        attempt, over exactly the snapshots the commit's compare-and-swap replaces.
        """

        iceberg = jvm_of(self._spark).org.apache.iceberg
        referenced = {a.referenced_data_file for a in added if a.is_dv}

        def check(attempt) -> None:
            io = attempt.table.io()
            self._check_no_rewritten_data(attempt.java_since_plan, io, newest_equality_sequence)
            self._check_no_new_dvs(attempt.java_since_plan, io, referenced)

        def build(attempt) -> None:
            table = attempt.table
            rewrite = table.newRewrite().validateFromSnapshot(start_snapshot_id)
            for f in removed:
                rewrite = rewrite.deleteFile(self._java_files[f.ident])
            for a in added:
                rewrite = rewrite.addFile(self._delete_file(iceberg, table, a), a.sequence_number)
            attempt.stamp(rewrite).commit()

        request = CommitRequest(
            table_name=self.ref.name,
            planned_snapshot_id=start_snapshot_id,
            build=build,
            check=check,
            what="the equality-delete conversion",
            rerun_hint="run the procedure again",
            summary=summary,
        )
        return commit(self._spark, self._table, request).snapshot_id

    def _delete_file(self, iceberg, table, a: NewDeleteFile):
        spec_id, partition = self._partition_of(a.partition)
        spec = table.specs().get(spec_id)
        builder = iceberg.FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()
        builder = builder.withPath(a.path).withFileSizeInBytes(a.file_size)
        if not spec.isUnpartitioned():
            builder = builder.withPartition(partition)
        if a.is_dv:
            builder = (
                builder.withFormat(iceberg.FileFormat.PUFFIN)
                .withRecordCount(a.records)
                .withReferencedDataFile(a.referenced_data_file)
                .withContentOffset(a.content_offset)
                .withContentSizeInBytes(a.content_size)
            )
        elif a.referenced_data_file is not None:
            # file-scoped: the reference tells readers which data file it is for, so the
            # footer need not be read for file_path bounds
            builder = (
                builder.withFormat(iceberg.FileFormat.PARQUET)
                .withRecordCount(a.records)
                .withReferencedDataFile(a.referenced_data_file)
            )
        else:
            metrics = java_metrics(self._spark, table, a.path, a.metrics, deletes=True)
            builder = builder.withFormat(iceberg.FileFormat.PARQUET).withMetrics(metrics)
        return builder.build()

    def _partition_of(self, pkey: str) -> tuple[int, object]:
        if pkey in self._partitions:
            return self._partitions[pkey]
        spec_id = int(pkey.split(":", 1)[0])
        if self._table.specs().get(spec_id).isUnpartitioned():
            return spec_id, None
        raise KeyError(f"no known partition object for {pkey}")

    def discard(self, paths: Sequence[str]) -> None:
        """Delete files this run wrote but did not commit (best effort)."""

        delete_files(self._table, paths)

    def _check_no_rewritten_data(self, since_plan, io, newest: int | None) -> None:
        """Fail if a writer added data files OLDER than a converted delete since the plan.

        A compaction (rewrite_data_files keeps the starting sequence number) can rewrite a data
        file into one an equality delete still applies to; removing that delete would bring its
        rows back. RewriteFiles does not check this when it only swaps delete files.
        """
        if newest is None:
            return
        for snapshot in since_plan:
            added = snapshot.addedDataFiles(io).iterator()
            while added.hasNext():
                seq = added.next().dataSequenceNumber()
                if seq is not None and int(seq) < newest:
                    raise CommitConflictError(
                        f"Another writer rewrote data files of {self.ref.name} (snapshot "
                        f"{snapshot.snapshotId()}) while its equality deletes were being "
                        "converted; nothing was committed, run the procedure again."
                    )

    def _check_no_new_dvs(self, since_plan, io, referenced: set[str | None]) -> None:
        """Fail if a writer added a DV for a data file we add one for (at most one DV per file)."""
        referenced = referenced - {None}
        if not referenced:
            return
        for snapshot in since_plan:
            added = snapshot.addedDeleteFiles(io).iterator()
            while added.hasNext():
                f = added.next()
                ref = f.referencedDataFile()
                if str(f.format()) == "PUFFIN" and ref is not None and str(ref) in referenced:
                    raise CommitConflictError(
                        f"Another writer added a deletion vector for {ref} of {self.ref.name} "
                        "while its equality deletes were being converted; nothing was "
                        "committed, run the procedure again."
                    )
