"""A procedure's result rows as a DataFrame that Spark evaluates without a Python worker.

``spark.createDataFrame(list_of_rows)`` ships pickled rows to an RDD that a Python worker decodes
when the DataFrame is collected: ~160-340 ms for a dozen rows on two cores, more than most
procedures take. Here the rows travel as one JSON literal in the plan, and Spark's own
``from_json`` + ``inline`` turn it into rows on the JVM (~55 ms, measured beside it). Values are
checked against the declared schema with PySpark's own verifier first, so a routine returning a
wrong type fails as it did with ``createDataFrame``; timestamps cross as the microseconds
PySpark itself would store (naive datetimes in the driver's local zone, aware ones exactly).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MAX_LITERAL_CHARS = 8 << 20  # larger results take createDataFrame (the plan would carry them)


def local_frame(spark: SparkSession, rows: Sequence[Any], ddl: str) -> DataFrame:
    """``rows`` (tuples, Rows or dicts) as a DataFrame of the schema ``ddl``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        LongType,
        StructField,
        StructType,
        TimestampType,
        _make_type_verifier,
        _parse_datatype_string,
    )

    from sparkext.identifiers import col

    schema = _parse_datatype_string(ddl)
    assert isinstance(schema, StructType)
    names = schema.names
    verify = _make_type_verifier(schema)
    stamps = {f.name for f in schema.fields if isinstance(f.dataType, TimestampType)}
    timestamp = TimestampType()
    records: list[dict[str, Any]] = []
    for row in rows:
        verify(row)
        values = [row.get(n) for n in names] if isinstance(row, Mapping) else list(row)
        record = {}
        for name, value in zip(names, values, strict=True):
            if value is not None and name in stamps:
                value = timestamp.toInternal(value)
            elif isinstance(value, float) and not math.isfinite(value):
                # Spark's JSON reader takes these spellings of the non-finite doubles
                value = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            record[name] = value
        records.append(record)
    text = json.dumps(records, separators=(",", ":"), allow_nan=False)
    if not names or len(text) > MAX_LITERAL_CHARS:
        return spark.createDataFrame(list(rows), schema=schema)
    wire = StructType(
        [StructField(f.name, LongType() if f.name in stamps else f.dataType) for f in schema.fields]
    )
    parsed = F.inline(F.from_json(F.lit(text), ArrayType(wire))).alias(*names)
    return (
        spark.range(0, 1, 1, 1)  # one row, one partition: the literal is expanded once
        .select(parsed)
        .select(*((F.timestamp_micros(col(n)) if n in stamps else col(n)).alias(n) for n in names))
    )
