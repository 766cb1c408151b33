"""Spark SQL type names -> Iceberg types (through py4j), for tables sparkext creates or evolves.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import itertools
import re

# Ids of list elements: Iceberg gives every nested field fresh ids when it creates a table
# (TableMetadata.newTableMetadata) or adds a column (UpdateSchema.addColumn), so these only
# have to differ from every other id of the schema being built: top-level columns count from 1.
_ELEMENT_IDS = itertools.count(1_000_000)
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def iceberg_type(jvm, spark_type: str):
    """The Iceberg type for a Spark SQL type name (``int``, ``decimal(10,2)``, ``array<int>``).

    ``timestamp`` is Iceberg's ``timestamptz`` (an instant), ``timestamp_ntz`` its ``timestamp``
    (a wall clock without zone); lists have optional elements.
    """
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
        "timestamp_ntz": types.TimestampType.withoutZone,
        "binary": types.BinaryType.get,
    }
    if spark_type in simple:
        return simple[spark_type]()
    decimal = _DECIMAL.match(spark_type)
    if decimal:
        return types.DecimalType.of(int(decimal.group(1)), int(decimal.group(2)))
    if spark_type.startswith("array<") and spark_type.endswith(">"):
        element = iceberg_type(jvm, spark_type[len("array<") : -1])
        return types.ListType.ofOptional(next(_ELEMENT_IDS), element)
    raise ValueError(f"unsupported column type {spark_type}")
