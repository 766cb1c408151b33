"""Debezium / Kafka Connect types -> table types, and the typed rows of a micro-batch.

``connect_columns`` and ``merge_columns`` are pure (unit-tested without Spark); ``typed_rows``
builds Spark column expressions only: every value is converted on executors, exactly.

The mapping follows Debezium's MySQL and PostgreSQL connectors with the JSON converter
(``schemas.enable=true``):

* ``org.apache.kafka.connect.data.Decimal`` (``precise`` mode: base64 of the big-endian two's
  complement unscaled integer, ``scale`` and ``connect.decimal.precision`` parameters) ->
  ``decimal(p, s)``; precision 38 when the parameter is missing; more than 38 digits (Iceberg's
  limit) -> ``string`` holding the exact decimal text. ``double`` and ``string`` modes are plain
  ``float64`` / ``string`` fields and map as such.
* ``io.debezium.data.VariableScaleDecimal`` (PostgreSQL ``numeric`` without precision, a struct of
  ``scale`` and ``value``) -> ``decimal(38,10)`` by default (option ``variable-scale-decimal``:
  another ``decimal(p,s)``, or ``string`` for the exact text). A value with more digits than the
  column holds is rejected, never rounded.
* Zone-less times (``io.debezium.time.Timestamp`` / ``MicroTimestamp`` / ``NanoTimestamp`` and
  Connect's ``Timestamp``: MySQL ``DATETIME``, PostgreSQL ``timestamp``) -> ``timestamp_ntz``
  (Iceberg ``timestamp``); ``ZonedTimestamp`` (ISO-8601 text with an offset) -> ``timestamp``
  (Iceberg ``timestamptz``). Nanoseconds are truncated to microseconds (Iceberg's precision).
* Times of day (``io.debezium.time.Time`` ms, ``MicroTime`` us, ``NanoTime`` ns, Connect's
  ``Time`` ms) -> ``bigint`` microseconds: Spark 3.5 cannot read Iceberg's ``time`` and MySQL's
  ``TIME`` is a duration (negative, or over 24 hours); ``ZonedTime`` stays ISO text.
* Arrays of primitives, strings and dates -> Iceberg lists; structs, maps and other arrays -> JSON
  text. An unknown logical type keeps its base type's mapping and is reported once per column.

Floor: actions (driver side of ingest_cdc). Over 600 lines on purpose: the type table of every
Debezium / Kafka Connect logical type is data, and the rows' typing reads it in one place.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sparkext.errors import SchemaChangeError
from sparkext.identifiers import col
from sparkext.spark.reused import reused

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
JSON_TEXT = "json"  # structs, maps and arrays that are not lists of simple values
ARRAY = "array"
MAX_PRECISION = 38  # Iceberg's (and Spark's) largest decimal
DEFAULT_PRECISION = MAX_PRECISION  # a Connect Decimal without connect.decimal.precision
VARIABLE_SCALE_DEFAULT = "decimal(38,10)"

# Kafka Connect schema types -> Spark SQL types.
_CONNECT_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "bigint",
    # Kafka Connect's JsonConverter names FLOAT32 / FLOAT64 "float" / "double" in the schema it
    # writes (Debezium's own examples say float32 / float64): both spellings
    "float": "float",
    "double": "double",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}
# Logical types with a table type of their own: name -> (Spark type, JSON type of the value).
_LOGICAL_TYPES = {
    "io.debezium.time.Date": ("date", "int"),
    "org.apache.kafka.connect.data.Date": ("date", "int"),
    "io.debezium.time.Timestamp": ("timestamp_ntz", "bigint"),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp_ntz", "bigint"),
    "io.debezium.time.MicroTimestamp": ("timestamp_ntz", "bigint"),
    "io.debezium.time.NanoTimestamp": ("timestamp_ntz", "bigint"),
    ZONED_TIMESTAMP: ("timestamp", "string"),
    "io.debezium.time.Time": ("bigint", "bigint"),
    "org.apache.kafka.connect.data.Time": ("bigint", "bigint"),
    "io.debezium.time.MicroTime": ("bigint", "bigint"),
    "io.debezium.time.NanoTime": ("bigint", "bigint"),
}
# Known logical types whose base type is already the right table type.
_AS_BASE = {
    "io.debezium.time.Year",  # int32
    "io.debezium.time.ZonedTime",  # ISO-8601 text with offset
    "io.debezium.time.MicroDuration",  # int64 microseconds
    "io.debezium.time.Interval",  # ISO-8601 duration text (interval.handling.mode=string)
    "io.debezium.data.Json",
    "io.debezium.data.Enum",
    "io.debezium.data.EnumSet",
    "io.debezium.data.Uuid",
    "io.debezium.data.Xml",
    "io.debezium.data.Ltree",
    "io.debezium.data.Bits",  # bytes
}
_KNOWN_PREFIXES = ("io.debezium.data.geometry.",)  # structs: JSON text
# Microseconds per unit of the integer time types.
_MICROS = {
    "io.debezium.time.Timestamp": 1000,
    "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
    "io.debezium.time.Time": 1000,
    "org.apache.kafka.connect.data.Time": 1000,
    "io.debezium.time.MicroTime": 1,
}
_NANOS = {"io.debezium.time.NanoTimestamp", "io.debezium.time.NanoTime"}
_ELEMENT_TYPES = {**_CONNECT_TYPES}  # list elements: primitives, strings, dates
_ELEMENT_LOGICAL = {
    "io.debezium.time.Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    **{name: "string" for name in _AS_BASE if name.startswith("io.debezium.data.")},
}
_DECIMAL_TYPE = re.compile(r"^decimal\((\d+),(-?\d+)\)$")


class UnknownLogicalTypeWarning(UserWarning):
    """A Connect field names a logical type sparkext does not know; its base type was used."""


def decimal_type(text: str) -> tuple[int, int] | None:
    """(precision, scale) of a Spark ``decimal(p,s)`` type name, else None.

    >>> decimal_type("decimal(10,2)"), decimal_type("bigint")
    ((10, 2), None)
    """
    match = _DECIMAL_TYPE.match(text.replace(" ", ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def decimal_column(precision: int | None, scale: int) -> str:
    """The table type of a Connect Decimal: ``decimal(p,s)``, or ``string`` beyond 38 digits.

    A negative scale (an unscaled value times 10^-scale) becomes scale 0 with more digits.

    >>> decimal_column(10, 2), decimal_column(None, 0), decimal_column(65, 30)
    ('decimal(10,2)', 'decimal(38,0)', 'string')
    >>> decimal_column(5, -3)
    'decimal(8,0)'
    """
    digits = DEFAULT_PRECISION if precision is None else precision
    if scale < 0:
        digits, scale = digits - scale, 0
    digits = max(digits, scale, 1)
    return "string" if digits > MAX_PRECISION else f"decimal({digits},{scale})"


def logical_parts(logical: str | None) -> tuple[str, dict[str, str]]:
    """Split a logical-type tag of :func:`connect_columns` into its name and parameters.

    >>> logical_parts("org.apache.kafka.connect.data.Decimal;scale=2;digits=10")
    ('org.apache.kafka.connect.data.Decimal', {'scale': '2', 'digits': '10'})
    """
    name, *params = (logical or "").split(";")
    return name, dict(p.split("=", 1) for p in params)


def _tag(name: str, **params: Any) -> str:
    return ";".join([name, *(f"{k}={v}" for k, v in params.items())])


def _element(items: Any) -> tuple[str, str] | None:
    """(Spark element type, element logical name) of a list's ``items`` schema, if supported."""
    if not isinstance(items, dict):
        return None
    name = items.get("name")
    if name:
        found = _ELEMENT_LOGICAL.get(name)
        return (found, name) if found else None
    found = _ELEMENT_TYPES.get(items["type"]) if "type" in items else None
    return (found, "") if found else None


def connect_column(
    field: Mapping[str, Any], variable_scale_decimal: str = VARIABLE_SCALE_DEFAULT
) -> tuple[str, str, str | None]:
    """(column, Spark type, logical-type tag) of one Connect field; see :func:`connect_columns`."""
    name, base, logical = field["field"], field.get("type"), field.get("name")
    params = field.get("parameters") or {}
    if logical == DECIMAL:
        scale = int(params.get("scale", 0))
        precision = params.get("connect.decimal.precision")
        precision = int(precision) if precision is not None else None
        digits = (precision if precision is not None else DEFAULT_PRECISION) + max(0, -scale)
        tag = _tag(DECIMAL, scale=scale, digits=max(digits, scale, 1))
        return name, decimal_column(precision, scale), tag
    if logical == VARIABLE_SCALE_DECIMAL:
        return name, variable_scale_decimal, _tag(VARIABLE_SCALE_DECIMAL)
    if logical in _LOGICAL_TYPES:
        return name, _LOGICAL_TYPES[logical][0], logical
    if base == "array":
        element = _element(field.get("items"))
        if element is not None:
            return name, f"array<{element[0]}>", _tag(ARRAY, items=element[1])
        return name, "string", JSON_TEXT
    if base not in _CONNECT_TYPES:
        return name, "string", JSON_TEXT  # structs and maps (geometries too): JSON text
    return name, _CONNECT_TYPES[base], logical  # plain, known-as-base or unknown logical


def unknown_logical(logical: str | None) -> bool:
    """A logical-type name sparkext does not know (its base type's mapping is used).

    >>> unknown_logical("io.debezium.data.Uuid"), unknown_logical("com.example.Money")
    (False, True)
    """
    name, _ = logical_parts(logical)
    if not name or name in (DECIMAL, VARIABLE_SCALE_DECIMAL, JSON_TEXT, ARRAY):
        return False
    return (
        name not in _LOGICAL_TYPES and name not in _AS_BASE and not name.startswith(_KNOWN_PREFIXES)
    )


def connect_columns(
    row_schema: dict[str, Any],
    variable_scale_decimal: str = VARIABLE_SCALE_DEFAULT,
    notice: Callable[[str], None] | None = None,
) -> list[tuple[str, str, str | None]]:
    """(column, Spark type, logical-type tag) for each field of a Connect row schema.

    The tag is the Debezium logical type name, with parameters for decimals and lists
    (:func:`logical_parts`), or ``json`` for values kept as JSON text. An unknown logical type
    keeps its base type and is reported through ``notice`` (default: a warning, once per column
    and process).

    >>> date = {"field": "d", "type": "int32", "name": "io.debezium.time.Date"}
    >>> connect_columns({"fields": [{"field": "id", "type": "int32"}, date]})
    [('id', 'int', None), ('d', 'date', 'io.debezium.time.Date')]
    """
    columns = []
    for field in row_schema.get("fields") or []:
        column = connect_column(field, variable_scale_decimal)
        if unknown_logical(column[2]):
            message = (
                f"column {column[0]}: unknown logical type {column[2]}, stored as its base "
                f"type {column[1]}"
            )
            if notice is not None:
                notice(message)
            else:
                warnings.warn(message, UnknownLogicalTypeWarning, stacklevel=2)
        columns.append(column)
    return columns


def merge_column(
    name: str, old: tuple[str, str | None], new: tuple[str, str | None]
) -> tuple[str, str | None]:
    """The (type, tag) of a column two schemas of one batch give.

    Widenings Iceberg allows win (int -> bigint, float -> double, a decimal's precision at the
    same scale); a decimal whose scale changed cannot be decoded with one scale and stops the
    batch; any other difference keeps the first (rows of the other schema are then rejected).

    >>> merge_column("m", ("decimal(10,2)", "d;scale=2"), ("decimal(12,2)", "d;scale=2"))
    ('decimal(12,2)', 'd;scale=2')
    """
    (old_type, _), (new_type, _) = old, new
    if (old_type, new_type) in (("int", "bigint"), ("float", "double")):
        return new
    old_dec, new_dec = decimal_type(old_type), decimal_type(new_type)
    if old_dec and new_dec:
        if old_dec[1] != new_dec[1]:
            raise SchemaChangeError(
                f"Column '{name}' changed from {old_type} to {new_type} within one batch of "
                "the source and a decimal's scale cannot change in Iceberg; ingestion stopped "
                "and nothing of this batch was committed (add a new column in the source "
                "instead, or recreate the table)."
            )
        return new if new_dec[0] > old_dec[0] else old
    old_scale = logical_parts(old[1])[1].get("scale")
    new_scale = logical_parts(new[1])[1].get("scale")
    if old_scale is not None and new_scale is not None and old_scale != new_scale:
        raise SchemaChangeError(
            f"Column '{name}' changed its decimal scale from {old_scale} to {new_scale} within "
            "one batch of the source; ingestion stopped and nothing of this batch was committed."
        )
    return old


# ---- typed rows (Spark expressions) ---------------------------------------------------------


def _raw_type(spark_type: str, logical: str | None) -> str:
    """The Spark type ``from_json`` reads the JSON value of a column as."""
    name, params = logical_parts(logical)
    if name == DECIMAL:
        return "binary"  # base64 text (the JSON converter's decimal.format=BASE64), decoded
    if name == VARIABLE_SCALE_DECIMAL:
        return "struct<scale:int,value:binary>"
    if name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[name][1]
    if name == ARRAY and spark_type.startswith("array<"):
        element = params.get("items")
        return "array<int>" if _ELEMENT_LOGICAL.get(element or "") == "date" else spark_type
    return spark_type


def _fn(name: str, *args: Column) -> Column:
    """A Spark SQL function whose arguments are all columns (PySpark wants ints for some)."""
    from pyspark.sql import functions as F

    return F.call_function(name, *args)


def unscaled_digits(value: Column) -> Column:
    """``struct(negative, digits)``: the sign and the decimal digits of |x| for big-endian two's
    complement bytes x (NULL for NULL or empty bytes).

    Exact for any length: the magnitude is accumulated 32 bits at a time into base-10^9 limbs
    (an array of bigints that grows as needed), so no step can overflow. Spark expressions of a
    size independent of the value, no Python on the rows.
    """
    from pyspark.sql import functions as F

    hexed = F.hex(value)
    negative = F.substring(hexed, 1, 1).isin("8", "9", "A", "B", "C", "D", "E", "F")
    # two's complement: the magnitude of a negative x is ~x + 1
    inverted = F.translate(hexed, "0123456789ABCDEF", "FEDCBA9876543210")
    magnitude = F.when(negative, inverted).otherwise(hexed)
    chunks = F.greatest(F.ceil(F.length(magnitude) / 8).cast("int"), F.lit(1))
    padded = _fn("lpad", magnitude, chunks * 8, F.lit("0"))
    words = F.transform(
        F.sequence(F.lit(1), chunks),
        lambda i: F.conv(padded.substr((i - 1) * 8 + 1, F.lit(8)), 16, 10).cast("bigint"),
    )
    base = F.lit(1_000_000_000).cast("bigint")
    empty = F.array().cast("array<bigint>")

    def times_plus(limbs: Column, multiplier: int, add: Column) -> Column:
        """limbs x multiplier + add, little-endian base 10^9 (multiplier, add <= 2^32)."""
        factor = F.lit(multiplier).cast("bigint")

        def finish(state: Column) -> Column:
            carry = state["carry"]  # at most 2^32 + 1: one or two more limbs
            high = _fn("div", carry, base)
            return F.concat(
                state["out"],
                F.when(carry > 0, F.array(carry % base)).otherwise(empty),
                F.when(high > 0, F.array(high)).otherwise(empty),
            )

        # the carry read in ``finish``, where the state is a lambda variable: read from the
        # aggregate itself, each reading would repeat the whole fold (and the fold it is
        # applied to), an expression growing by a factor at every level
        return F.aggregate(
            limbs,
            F.struct(empty.alias("out"), add.alias("carry")),
            lambda st, limb: F.struct(
                F.concat(st["out"], F.array((limb * factor + st["carry"]) % base)).alias("out"),
                _fn("div", limb * factor + st["carry"], base).alias("carry"),
            ),
            finish,
        )

    limbs = F.aggregate(words, empty, lambda acc, word: times_plus(acc, 1 << 32, word))
    limbs = times_plus(limbs, 1, F.when(negative, F.lit(1)).otherwise(F.lit(0)).cast("bigint"))
    text = F.concat_ws(
        "",
        F.transform(
            F.reverse(limbs), lambda x: _fn("lpad", x.cast("string"), F.lit(9), F.lit("0"))
        ),
    )
    # the digits once (a lambda variable), not the whole computation twice
    digits = F.transform(
        F.array(F.regexp_replace(text, "^0+", "")),
        lambda d: F.when(d == "", F.lit("0")).otherwise(d),
    )[0]
    return F.when(F.length(value) > 0, F.struct(negative.alias("negative"), digits.alias("digits")))


def decimal_text(negative: Column, digits: Column, scale: Column) -> Column:
    """The exact decimal text of (-1 if ``negative``) x ``digits`` x 10^-``scale``.

    ``digits`` has no leading zeros ("0" for zero); a negative scale appends zeros.
    """
    from pyspark.sql import functions as F

    padded = _fn("lpad", digits, F.greatest(F.length(digits), scale + 1), F.lit("0"))
    cut = F.length(padded) - scale
    unsigned = (
        F.when(digits == "0", F.lit("0"))
        .when(scale == 0, digits)
        .when(
            scale > 0,
            F.concat(
                padded.substr(F.lit(1), cut), F.lit("."), padded.substr(cut + 1, F.lit(10**6))
            ),
        )
        .otherwise(F.concat(digits, _fn("repeat", F.lit("0"), -scale)))
    )
    return F.concat(F.when(negative & (digits != "0"), "-").otherwise(""), unsigned)


def decimal_fits(digits: Column, scale: Column, precision: int, target_scale: int) -> Column:
    """Whether ``digits`` x 10^-``scale`` is exactly a ``decimal(precision, target_scale)``:
    at most ``precision - target_scale`` integer digits and no nonzero digit past the scale."""
    from pyspark.sql import functions as F

    zero = digits == "0"
    integer_digits = F.when(zero, 0).otherwise(F.greatest(F.length(digits) - scale, F.lit(0)))
    trailing = F.length(digits) - F.length(F.regexp_replace(digits, "0+$", ""))
    fraction_digits = F.when(zero, 0).otherwise(F.greatest(scale - trailing, F.lit(0)))
    return (integer_digits <= precision - target_scale) & (fraction_digits <= target_scale)


def _ntz_from_micros(micros: Column) -> Column:
    """TIMESTAMP_NTZ of a wall clock given as microseconds since 1970-01-01 00:00, with no
    time zone in play (the session's is ignored), exact for any year."""
    from pyspark.sql import functions as F

    day = 86_400_000_000
    rest = F.pmod(micros, F.lit(day).cast("bigint"))
    days = _fn("div", micros - rest, F.lit(day).cast("bigint")).cast("int")
    seconds = (rest.cast("decimal(18,0)") / F.lit(1_000_000).cast("decimal(7,0)")).cast(
        "decimal(18,6)"
    )
    epoch = F.expr("TIMESTAMP_NTZ'1970-01-01 00:00:00'")
    return epoch + F.make_dt_interval(days, F.lit(0), F.lit(0), seconds)


ntz_from_micros = _ntz_from_micros  # bootstrap_cdc types copied rows the same way


def _micros(value: Column, logical: str) -> Column:
    """Microseconds of an integer time value (nanoseconds floored to microseconds)."""
    from pyspark.sql import functions as F

    value = value.cast("bigint")
    if logical in _NANOS:
        return _fn("div", value - F.pmod(value, F.lit(1000).cast("bigint")), F.lit(1000))
    return value * F.lit(_MICROS[logical]).cast("bigint")


_ZONED = r"^[+-]?\d{4,}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:?\d\d(:\d\d)?)$"


def _decimal_parts(value: Column, logical: str | None) -> tuple[Column, Column] | None:
    """(unscaled bytes, scale) of a decimal column as ``from_json`` read it; None otherwise."""
    from pyspark.sql import functions as F

    kind, params = logical_parts(logical)
    if kind == DECIMAL:
        return value, F.lit(int(params["scale"]))
    if kind == VARIABLE_SCALE_DECIMAL:
        return value["value"], value["scale"]
    return None


def _convert_decimal(
    parts: tuple[Column, Column], unscaled: Column, name: str, target: str, logical: str | None
) -> tuple[Column, Column]:
    """(value of type ``target``, why it does not fit or NULL) of a decimal column, from its
    :func:`unscaled_digits` ``unscaled``: exact, never rounded."""
    from pyspark.sql import functions as F

    scale = parts[1]
    digits = unscaled["digits"]
    text = decimal_text(unscaled["negative"], digits, scale)
    target_decimal = decimal_type(target)
    if target_decimal is not None:
        fits = decimal_fits(digits, scale, *target_decimal)
    else:  # kept as text (more than 38 digits, or variable-scale as string)
        declared = logical_parts(logical)[1].get("digits")
        fits = F.lit(True) if declared is None else F.length(digits) <= int(declared)
    present = unscaled.isNotNull() & scale.isNotNull()
    value = F.when(present & fits, text.cast(target))
    problem = F.when(
        present & ~fits,
        F.concat(F.lit("value '"), text, F.lit(f"' of column {name} does not fit {target}")),
    )
    return value, problem


def _convert(value: Column, target: str, logical: str | None) -> Column:
    """The value of type ``target`` of a non-decimal column as ``from_json`` read it
    (:func:`_raw_type`); NULL when it is not one."""
    from pyspark.sql import functions as F

    kind, params = logical_parts(logical)
    if kind == ZONED_TIMESTAMP and target == "timestamp":
        # has an offset: exact; an impossible date (month 13) is NULL, hence a reject, also
        # under spark.sql.ansi.enabled (where a cast would fail the whole batch)
        parsed = F.call_function("try_to_timestamp", value).cast("timestamp")
        return F.when(value.rlike(_ZONED), parsed)
    if kind in _MICROS or kind in _NANOS:
        micros = _micros(value, kind)
        if target == "timestamp_ntz":
            return _ntz_from_micros(micros)
        if target == "timestamp":  # a table created when zone-less times were UTC instants
            return F.timestamp_micros(micros)
        return micros.cast(target)
    if kind in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return F.date_from_unix_date(value).cast(target)
    if kind == ARRAY and _ELEMENT_LOGICAL.get(params.get("items") or "") == "date":
        return F.transform(value, F.date_from_unix_date).cast(target)
    return value.cast(target)


def typed_rows(
    valid: DataFrame,
    columns: Mapping[str, str],
    logical: Mapping[str, str],
    key: Sequence[str],
) -> tuple[DataFrame, DataFrame]:
    """Rows with typed ``after``/``before`` structs, key columns and ``missing_key``; and the
    rejects (``reject``, ``raw``, ``source_file``) of the rows flagged ``missing_key``.

    A row is rejected when a value is not of its column's type (``value 'abc' of column qty is
    not a bigint``: a value never silently becomes NULL), does not fit it (a decimal), or its
    key is missing. Only Spark expressions, all of it on executors; each step is its own
    projection so that no conversion is built (or run) twice. The expressions are built once per
    schema (:func:`_typing`) and reused by every later batch.
    """
    counted = tuple(c for c in ("after_values", "before_values") if c in valid.columns)
    steps, rejects = _typing(
        tuple(columns.items()), tuple(sorted(logical.items())), tuple(key), counted
    )
    typed = valid
    for step in steps:
        typed = typed.select(*step)
    return typed, typed.where("missing_key").select(*rejects)


@reused
def _typing(
    columns: tuple[tuple[str, str], ...],
    logical_items: tuple[tuple[str, str], ...],
    key: tuple[str, ...],
    counted: tuple[str, ...],
) -> tuple[tuple[tuple[Column | str, ...], ...], tuple[Column, ...]]:
    """The projections of :func:`typed_rows`, applied in order, and the rejects' columns.

    ``counted``: which of the decoder's value counts (``after_values``, ``before_values``) the
    input has."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    types = dict(columns)
    logical = dict(logical_items)
    names = list(types)
    steps: list[tuple[Column | str, ...]] = []
    json_schema = StructType(
        [
            StructField(name, _parse_datatype_string(_raw_type(types[name], logical.get(name))))
            for name in names
        ]
    )
    steps.append(
        (
            "*",
            F.from_json("after_json", json_schema).alias("__a"),
            F.from_json("before_json", json_schema).alias("__b"),
        )
    )
    images = ("__a", "__b")
    decimals = {
        (image, i): parts
        for image in images
        for i, name in enumerate(names)
        if (parts := _decimal_parts(col(image, name), logical.get(name))) is not None
    }
    if decimals:  # the digits of every decimal once, in their own projection
        steps.append(
            (
                "*",
                *(
                    unscaled_digits(parts[0]).alias(f"{image}_u{i}")
                    for (image, i), parts in decimals.items()
                ),
            )
        )
    values, problems = [], []
    for image in images:
        for i, name in enumerate(names):
            target, kind = types[name], logical.get(name)
            parts = decimals.get((image, i))
            if parts is None:
                values.append(_convert(col(image, name), target, kind).alias(f"{image}_v{i}"))
                continue
            value, problem = _convert_decimal(parts, F.col(f"{image}_u{i}"), name, target, kind)
            values.append(value.alias(f"{image}_v{i}"))
            problems.append((image, i, problem))
    steps.append(("*", *values))
    # A wrong type shows as a value the conversion turned into NULL. The decoder counted each
    # image's values: while the conversion produced as many, nothing can be wrong and the raw
    # image is not parsed again (as text, to quote the bad value); only a row that differs is.
    sources = {"__a": ("after_json", "after_values"), "__b": ("before_json", "before_values")}
    raw_images = []
    for image in images:
        text, count = sources[image]
        produced = sum(
            (F.col(f"{image}_v{i}").isNotNull().cast("int") for i in range(len(names))), F.lit(0)
        )
        differs = (
            F.coalesce(F.col(count), F.lit(0)) != produced if count in counted else F.lit(True)
        )
        raw_images.append(
            F.when(differs, F.from_json(text, "map<string,string>")).alias(f"__r{image[-1]}")
        )
    steps.append(("*", *raw_images))
    reasons = []
    for image in images:
        found = {i: p for img, i, p in problems if img == image}
        for i, name in enumerate(names):
            raw = F.col(f"__r{image[-1]}").getItem(name)
            wrong = F.when(
                raw.isNotNull() & F.col(f"{image}_v{i}").isNull(),
                F.concat(
                    F.lit("value '"),
                    F.substring(raw, 1, 100),
                    F.lit(f"' of column {name} is not a {types[name]}"),
                ),
            )
            reasons.append(F.coalesce(found[i], wrong) if i in found else wrong)
    type_reject = F.coalesce(*reasons) if reasons else F.lit(None).cast("string")
    # the key of a delete is in its before-image; of anything else in its after-image
    keys = {
        k: F.when(F.col("op") == "d", F.col(f"__b_v{i}")).otherwise(F.col(f"__a_v{i}"))
        for i, k in enumerate(names)
        if k in key
    }
    missing = F.lit(False)
    for k in key:
        missing = missing | keys[k].isNull()
    missing = missing & (F.col("op") != "t")
    steps.append(
        (
            "op",
            "position",
            "event_time_ms",
            "ts_ms",
            "source_partition",
            "source_file",
            "after_json",
            "before_json",
            F.struct(*(F.col(f"__a_v{i}").alias(n) for i, n in enumerate(names))).alias("after"),
            F.struct(*(F.col(f"__b_v{i}").alias(n) for i, n in enumerate(names))).alias("before"),
            type_reject.alias("type_reject"),
            *(keys[k].alias(k) for k in key),
            # the reasons again rather than a projection of their own: Spark evaluates a
            # repeated subexpression of one projection once
            (type_reject.isNotNull() | missing).alias("missing_key"),
        )
    )
    rejects = (
        F.coalesce("type_reject", F.lit(f"missing key column(s) {', '.join(key)}")).alias("reject"),
        F.coalesce("after_json", "before_json").alias("raw"),
        F.col("source_file"),
    )
    return tuple(steps), rejects
