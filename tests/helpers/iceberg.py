"""Test helpers that build Iceberg state the way other writers (Flink) do, through the Java API.

Tests may reach py4j directly; the product keeps that inside sparkext/iceberg/.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any


def java_table(spark, name: str):
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )


def add_equality_deletes(
    spark, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Commit one equality-delete file on ``columns`` of an unpartitioned table (Flink-style)."""
    jvm = spark._jvm
    table = java_table(spark, name)
    schema = table.schema()
    field_ids = [schema.findField(c).fieldId() for c in columns]
    ids = spark.sparkContext._gateway.new_array(jvm.int, len(field_ids))
    for i, field_id in enumerate(field_ids):
        ids[i] = field_id
    names = jvm.java.util.ArrayList()
    for column in columns:
        names.add(column)
    delete_schema = schema.select(names)
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(
        schema, table.spec(), ids, delete_schema, None
    )
    location = table.locationProvider().newDataLocation(f"eq-delete-{uuid.uuid4()}.parquet")
    output = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
        table.io().newOutputFile(location)
    )
    writer = factory.newEqDeleteWriter(output, jvm.org.apache.iceberg.FileFormat.PARQUET, None)
    for row in rows:
        record = jvm.org.apache.iceberg.data.GenericRecord.create(delete_schema)
        for column, value in zip(columns, row, strict=True):
            # py4j passes small Python ints as java.lang.Integer: keep keys strings or ints
            record.setField(column, value)
        writer.write(record)
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()


def flink_commit(
    spark,
    name: str,
    equality_columns: Sequence[str],
    inserts: Sequence[dict[str, Any]] = (),
    deletes: Sequence[dict[str, Any]] = (),
) -> None:
    """Commit one RowDelta the way a Flink upsert writer does: per partition, a data file of
    ``inserts`` and an equality-delete file of ``deletes`` (full rows: the partition comes from
    them; only ``equality_columns`` are written). Deletes do not apply to rows of the same commit.
    """
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    table = java_table(spark, name)
    schema, spec = table.schema(), table.spec()
    ids = spark.sparkContext._gateway.new_array(jvm.int, len(equality_columns))
    for i, column in enumerate(equality_columns):
        ids[i] = schema.findField(column).fieldId()
    names = jvm.java.util.ArrayList()
    for column in equality_columns:
        names.add(column)
    delete_schema = schema.select(names)
    factory = iceberg.data.GenericAppenderFactory(schema, spec, ids, delete_schema, None)
    columns = [str(f.name()) for f in schema.columns()]

    def record(row: dict[str, Any], record_schema, record_columns):
        out = iceberg.data.GenericRecord.create(record_schema)
        for column in record_columns:
            out.setField(column, row.get(column))
        return out

    def partition_of(row: dict[str, Any]):
        if spec.isUnpartitioned():
            return None, "unpartitioned"
        key = iceberg.PartitionKey(spec, schema)
        key.partition(record(row, schema, columns))
        return key, str(spec.partitionToPath(key))

    def output():
        location = table.locationProvider().newDataLocation(f"flink-{uuid.uuid4()}.parquet")
        return iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            table.io().newOutputFile(location)
        )

    delta = table.newRowDelta()
    for rows, is_delete in ((inserts, False), (deletes, True)):
        groups: dict[str, tuple[Any, list]] = {}
        for row in rows:
            key, path = partition_of(row)
            groups.setdefault(path, (key, []))[1].append(row)
        for key, group in groups.values():
            if is_delete:
                writer = factory.newEqDeleteWriter(output(), iceberg.FileFormat.PARQUET, key)
                for row in group:
                    writer.write(record(row, delete_schema, equality_columns))
                writer.close()
                delta = delta.addDeletes(writer.toDeleteFile())
            else:
                writer = factory.newDataWriter(output(), iceberg.FileFormat.PARQUET, key)
                for row in group:
                    writer.write(record(row, schema, columns))
                writer.close()
                delta = delta.addRows(writer.toDataFile())
    delta.commit()


def old_sequence_compaction(spark, name: str) -> None:
    """Rewrite one base data file (sequence number 1) into a copy that KEEPS sequence number 1,
    as a compaction started before later deletes does (rewrite_data_files keeps its starting
    sequence number): equality deletes newer than 1 still apply to the copy."""
    jvm = spark._jvm
    table = java_table(spark, name)
    tasks = table.newScan().planFiles().iterator()
    old = tasks.next().file()
    while int(old.dataSequenceNumber()) != 1:
        old = tasks.next().file()
    copy = (
        jvm.org.apache.iceberg.DataFiles.builder(table.spec())
        .copy(old)
        .withPath(old.location() + ".copy.parquet")
        .build()
    )
    with open(old.location(), "rb") as src, open(copy.location(), "wb") as dst:
        dst.write(src.read())
    removed, added = jvm.java.util.HashSet(), jvm.java.util.HashSet()
    removed.add(old)
    added.add(copy)
    table.newRewrite().dataSequenceNumber(1).rewriteFiles(removed, added).commit()


def transient_commit(spark, name: str, rows: list[dict], deleted: list[int]) -> None:
    """One commit that adds a data file and position-deletes some of its rows (as a Flink
    writer does for a row inserted and deleted within one checkpoint)."""
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    table = java_table(spark, name)
    schema, spec = table.schema(), table.spec()
    factory = iceberg.data.GenericAppenderFactory(schema, spec)

    def output(prefix: str):
        location = table.locationProvider().newDataLocation(f"{prefix}-{uuid.uuid4()}.parquet")
        return iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            table.io().newOutputFile(location)
        )

    writer = factory.newDataWriter(output("data"), iceberg.FileFormat.PARQUET, None)
    for row in rows:
        record = iceberg.data.GenericRecord.create(schema)
        for column, value in row.items():
            record.setField(column, value)
        writer.write(record)
    writer.close()
    data = writer.toDataFile()
    deletes = factory.newPosDeleteWriter(output("pos"), iceberg.FileFormat.PARQUET, None)
    for position in deleted:
        deletes.write(iceberg.deletes.PositionDelete.create().set(data.location(), position, None))
    deletes.close()
    table.newRowDelta().addRows(data).addDeletes(deletes.toDeleteFile()).commit()
