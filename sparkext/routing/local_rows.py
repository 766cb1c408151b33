"""A procedure's result rows as a DataFrame that Spark collects without a job or a Python worker.

``spark.createDataFrame(list_of_rows)`` ships pickled rows to an RDD that a Python worker decodes
when the DataFrame is collected: ~160-340 ms for a dozen rows on two cores, more than most
procedures take. Even rows built on the JVM from a literal (``from_json`` + ``inline`` over one
row) cost a Spark job at each collect: ~30-45 ms for ``help``'s 13 rows, where Iceberg's
procedures answer with rows held in the plan. So the rows go to the JVM the way
``createDataFrame`` sends them (one pickle of the rows in Spark's internal form, unpickled and
converted by Spark's own ``EvaluatePython.makeFromJava``) and become a ``LocalRelation``
(``io.sparkext.spark.LocalRows``, one py4j call): collecting it is a local table scan, and every
type, null, timestamp, decimal, map and array is what ``createDataFrame`` makes of it. Values are
checked against the declared schema with PySpark's own verifier first, so a routine returning a
wrong type fails as it did with ``createDataFrame``.

A local relation lives in the plan: on the driver, in py4j's message (base64 text) and in each
task that reads it inside a bigger query. Above ``MAX_LOCAL_BYTES`` of pickle, a result takes
``createDataFrame`` (a job with a Python worker at each read, but nothing large in the plan).
Where the extension's jar is not loaded (a session built without sparkext's settings), the rows
travel as one JSON literal that ``from_json`` + ``inline`` expand on the JVM: a job but no Python
worker. Up to ``SQL_TEXT_CHARS`` whose names need no quoting that is one SQL statement (built
with sqlglot), its JSON as base64, which the parser's ``${...}`` substitution and escape settings
cannot touch; timestamps cross it as the microseconds PySpark itself would store (naive datetimes
in the driver's local zone, aware ones exactly).

Floor: routing.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sparkext.identifiers import col
from sparkext.spark import local_relation as relation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

MAX_LOCAL_BYTES = 8 << 20  # larger results take createDataFrame (the plan would carry them)
MAX_LITERAL_CHARS = 8 << 20  # the same bound for the JSON literal, where there is no jar
SQL_TEXT_CHARS = 64 << 10  # larger literals are not put through the SQL parser
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def local_frame(spark: SparkSession, rows: Sequence[Any], ddl: str) -> DataFrame:
    """``rows`` (tuples, Rows or dicts) as a DataFrame of the schema ``ddl``, held in the plan."""
    schema, verify, schema_json = _schema(ddl)
    internal = []
    for row in rows:
        verify(row)
        internal.append(schema.toInternal(row))  # what createDataFrame pickles
    if schema.names:
        pickled = pickle.dumps(internal, protocol=pickle.HIGHEST_PROTOCOL)
        if len(pickled) <= MAX_LOCAL_BYTES:
            frame = relation.local_relation(spark, pickled, schema_json)
            if frame is not None:
                return frame
    return _json_frame(spark, rows, schema)


@functools.lru_cache(maxsize=256)
def _schema(ddl: str) -> tuple[StructType, Callable[[Any], None], str]:
    """The schema of ``ddl``, its verifier and its JSON: parsing asks the JVM (three round
    trips), and a routine's output never changes."""
    from pyspark.sql.types import StructType, _make_type_verifier, _parse_datatype_string

    schema = _parse_datatype_string(ddl)
    assert isinstance(schema, StructType)
    return schema, _make_type_verifier(schema), schema.json()


def _json_frame(spark: SparkSession, rows: Sequence[Any], schema: StructType) -> DataFrame:
    """Verified ``rows`` as one JSON literal expanded on the JVM (no jar, or too large for it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType, TimestampType

    names = schema.names
    stamps = {f.name for f in schema.fields if isinstance(f.dataType, TimestampType)}
    timestamp = TimestampType()
    records: list[dict[str, Any]] = []
    for row in rows:
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
    try:
        text = json.dumps(records, separators=(",", ":"), allow_nan=False)
    except TypeError:  # a value JSON has no form for (a Decimal, bytes, a nested timestamp)
        text = None
    if not names or text is None or len(text) > MAX_LITERAL_CHARS:
        return spark.createDataFrame(list(rows), schema=schema)
    wire = StructType(
        [StructField(f.name, LongType() if f.name in stamps else f.dataType) for f in schema.fields]
    )
    if len(text) <= SQL_TEXT_CHARS and _plain_names(wire):
        return spark.sql(_select(text, ArrayType(wire).simpleString(), names, stamps))
    parsed = F.inline(F.from_json(F.lit(text), ArrayType(wire))).alias(*names)
    return (
        spark.range(0, 1, 1, 1)  # one row, one partition: the literal is expanded once
        .select(parsed)
        .select(*((F.timestamp_micros(col(n)) if n in stamps else col(n)).alias(n) for n in names))
    )


def _plain_names(data_type: Any) -> bool:
    """Whether every field name, nested ones too, reads the same unquoted in a DDL string."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        return all(
            _PLAIN_NAME.fullmatch(f.name) and _plain_names(f.dataType) for f in data_type.fields
        )
    if isinstance(data_type, ArrayType):
        return _plain_names(data_type.elementType)
    if isinstance(data_type, MapType):
        return _plain_names(data_type.keyType) and _plain_names(data_type.valueType)
    return True


def _select(text: str, ddl: str, names: Sequence[str], stamps: set[str]) -> str:
    """``SELECT <names> FROM (SELECT inline(from_json(<text>, <ddl>)))``, timestamps converted
    from the microseconds they cross as; the text as base64 (Spark's parser substitutes
    ``${name}`` inside string literals too, and reads their escapes as the session says).

    >>> sql = _select('[{"a":1}]', "array<struct<a:bigint>>", ["a"], {"a"})
    >>> for part in sql.split(" FROM "):
    ...     print(part)
    SELECT TIMESTAMP_MICROS(`a`) AS `a`
    (SELECT INLINE(FROM_JSON(CAST(UNBASE64('W3siYSI6MX1d') AS STRING), 'array<struct<a:bigint>>')))
    """
    import base64

    from sqlglot import exp

    encoded = base64.b64encode(text.encode()).decode("ascii")
    json_text = exp.cast(exp.func("unbase64", exp.Literal.string(encoded)), "string")
    rows = exp.select(exp.func("inline", exp.func("from_json", json_text, exp.Literal.string(ddl))))
    columns = [
        exp.alias_(exp.func("timestamp_micros", exp.column(n, quoted=True)), n, quoted=True)
        if n in stamps
        else exp.column(n, quoted=True)
        for n in names
    ]
    return exp.select(*columns).from_(rows.subquery()).sql(dialect="spark")
