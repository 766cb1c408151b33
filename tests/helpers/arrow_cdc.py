"""One CDC commit the way a Flink upsert writer makes it, its files written with pyarrow: a
Parquet data file of the new row images and an equality-delete file of the changed and deleted
keys, added by ONE Iceberg RowDelta (an equality delete does not apply to rows of its own commit,
so an updated key's new image stays visible). No Spark job: a second thread can commit while the
first one queries. Unpartitioned tables only.

Tests and benchmarks reach py4j directly here; the product keeps that inside sparkext/iceberg/.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sparkext.fs import filesystem
from tests.helpers.iceberg import java_table


def _arrow_type(iceberg_type: Any) -> pa.DataType:
    name = str(iceberg_type.typeId().name())
    if name == "DECIMAL":
        return pa.decimal128(int(iceberg_type.precision()), int(iceberg_type.scale()))
    if name == "TIMESTAMP":
        zone = "UTC" if iceberg_type.shouldAdjustToUTC() else None
        return pa.timestamp("us", tz=zone)
    simple = {
        "BOOLEAN": pa.bool_(),
        "INTEGER": pa.int32(),
        "LONG": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "DATE": pa.date32(),
        "STRING": pa.string(),
        "BINARY": pa.binary(),
    }
    if name not in simple:
        raise ValueError(f"arrow_cdc writes atomic columns only, not {name}")
    return simple[name]


def arrow_schema(table: Any, columns: Sequence[str] | None = None) -> pa.Schema:
    """The Iceberg table's schema (or ``columns`` of it) as pyarrow's, with Parquet field ids."""
    fields = []
    for field in table.schema().columns():
        name = str(field.name())
        if columns is not None and name not in columns:
            continue
        fields.append(
            pa.field(
                name,
                _arrow_type(field.type()),
                nullable=bool(field.isOptional()),
                metadata={"PARQUET:field_id": str(int(field.fieldId()))},
            )
        )
    return pa.schema(fields)


def _write(table: Any, prefix: str, data: pa.Table) -> tuple[str, int]:
    location = str(table.locationProvider().newDataLocation(f"{prefix}-{uuid.uuid4()}.parquet"))
    fs, path = filesystem(location)
    with fs.open_output_stream(path) as out:
        pq.write_table(data, out)
    return location, int(fs.get_file_info(path).size)


def commit_changes(
    spark: Any,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    deleted_keys: Sequence[Any],
    key: str,
) -> int:
    """Commit ``rows`` (new images, every column) and an equality delete of ``deleted_keys``
    (the keys of updated rows' old images and of deleted rows) on ``key`` in one RowDelta;
    returns the new snapshot's id. Values are Python values (``datetime`` with a zone for a
    ``timestamp`` column, ``Decimal`` for a decimal, ``date`` for a date)."""
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    table = java_table(spark, name)
    spec = table.spec()
    if not spec.isUnpartitioned():
        raise ValueError("arrow_cdc commits to unpartitioned tables only")
    delta = table.newRowDelta()
    config = iceberg.MetricsConfig.forTable(table)
    if rows:
        schema = arrow_schema(table)
        data = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
        location, size = _write(table, "cdc-data", data)
        metrics = iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(location), config)
        delta = delta.addRows(
            iceberg.DataFiles.builder(spec)
            .withPath(location)
            .withFormat(iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(size)
            .withMetrics(metrics)
            .build()
        )
    if deleted_keys:
        key_schema = arrow_schema(table, [key])
        keys = pa.Table.from_pylist([{key: k} for k in deleted_keys], schema=key_schema)
        location, size = _write(table, "cdc-eq-delete", keys)
        ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
        ids[0] = table.schema().findField(key).fieldId()
        metrics = iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(location), config)
        delta = delta.addDeletes(
            iceberg.FileMetadata.deleteFileBuilder(spec)
            .ofEqualityDeletes(ids)
            .withPath(location)
            .withFormat(iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(size)
            .withMetrics(metrics)
            .build()
        )
    delta.commit()
    return int(table.currentSnapshot().snapshotId())
