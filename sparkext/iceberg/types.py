"""Spark SQL type names -> Iceberg types (through py4j), for tables sparkext creates or evolves."""

from __future__ import annotations


def iceberg_type(jvm, spark_type: str):
    """The Iceberg type for a Spark SQL type name (``int``, ``decimal(10,2)``, ...)."""
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
