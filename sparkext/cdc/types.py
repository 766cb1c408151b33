"""Debezium / Kafka Connect types -> table types, and the typed rows of a micro-batch.

``connect_columns`` is pure (unit-tested without Spark); ``typed_rows`` builds Spark column
expressions only: every value is converted on executors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sparkext.identifiers import col

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Kafka Connect schema types (and Debezium logical types) -> Spark SQL types.
_CONNECT_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}
_LOGICAL_TYPES = {
    "io.debezium.time.Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Timestamp": "timestamp",
    "org.apache.kafka.connect.data.Timestamp": "timestamp",
    "io.debezium.time.MicroTimestamp": "timestamp",
    "io.debezium.time.NanoTimestamp": "timestamp",
    "io.debezium.time.ZonedTimestamp": "timestamp",
}


def connect_columns(row_schema: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(column, Spark type, Debezium logical type) for each field of a Connect row schema.

    >>> date = {"field": "d", "type": "int32", "name": "io.debezium.time.Date"}
    >>> connect_columns({"fields": [{"field": "id", "type": "int32"}, date]})
    [('id', 'int', None), ('d', 'date', 'io.debezium.time.Date')]
    """
    columns = []
    for field in row_schema.get("fields") or []:
        logical = field.get("name")
        spark_type = _LOGICAL_TYPES.get(logical or "") or _CONNECT_TYPES.get(field.get("type"))
        if spark_type is None:
            spark_type = "string"  # structs, arrays, unknown: kept as JSON text
            logical = "json"
        columns.append((field["field"], spark_type, logical))
    return columns


def typed_rows(
    valid: DataFrame,
    columns: Mapping[str, str],
    logical: Mapping[str, str],
    key: Sequence[str],
) -> tuple[DataFrame, DataFrame]:
    """Rows with typed ``after``/``before`` structs, key columns and ``missing_key``; and the
    rejects of rows whose key is missing."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    raw_type = {
        "io.debezium.time.Date": "int",
        "org.apache.kafka.connect.data.Date": "int",
        "io.debezium.time.Timestamp": "bigint",
        "org.apache.kafka.connect.data.Timestamp": "bigint",
        "io.debezium.time.MicroTimestamp": "bigint",
        "io.debezium.time.NanoTimestamp": "bigint",
    }
    json_schema = StructType(
        [
            StructField(name, _parse_datatype_string(raw_type.get(logical.get(name, ""), t)))
            for name, t in columns.items()
        ]
    )

    def convert(image: str, name: str) -> Column:
        value = col(image, name)
        kind = logical.get(name)
        if kind in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
            value = F.date_from_unix_date(value)
        elif kind in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
            value = F.timestamp_millis(value)
        elif kind == "io.debezium.time.MicroTimestamp":
            value = F.timestamp_micros(value)
        elif kind == "io.debezium.time.NanoTimestamp":
            value = F.timestamp_micros(F.floor(value / 1000))
        return value.cast(columns[name]).alias(name)

    parsed = valid.select(
        "*",
        F.from_json("after_json", json_schema).alias("a"),
        F.from_json("before_json", json_schema).alias("b"),
    )
    typed = parsed.select(
        "op",
        "position",
        "event_time_ms",
        "ts_ms",
        "source_partition",
        "after_json",
        "before_json",
        F.struct(*(convert("a", n) for n in columns)).alias("after"),
        F.struct(*(convert("b", n) for n in columns)).alias("before"),
        *(F.when(F.col("op") == "d", col("b", k)).otherwise(col("a", k)).alias(k) for k in key),
    )
    missing = F.lit(False)
    for k in key:
        missing = missing | col(k).isNull()
    missing = missing & (F.col("op") != "t")
    typed = typed.withColumn("missing_key", missing)
    rejects = typed.where("missing_key").select(
        F.lit(f"missing key column(s) {', '.join(key)}").alias("reject"),
        F.coalesce("after_json", "before_json").alias("raw"),
        F.lit(None).cast("string").alias("source_file"),
    )
    return typed, rejects
