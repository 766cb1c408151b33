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
