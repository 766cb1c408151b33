"""One text per value, the same on the source database and on the lake: what reconcile hashes.

A source column (its database type) and its lake column (the type ingest_cdc's mapping gave it,
:mod:`sparkext.actions.cdc.types`) belong to one *family*; each family has a source SQL template per
dialect and a Spark expression, written so that equal values give equal text:

============  ==========================================  =========================================
family        source types                                canonical text
============  ==========================================  =========================================
``int``       integers, MySQL year, tinyint(1)            decimal digits
``decimal``   numeric/decimal, money                      digits, no trailing fractional zeros
``float``     real, double precision, float, double       the double's shortest text rounded to 10
                                                          places, as ``decimal`` (|x| < 10^28)
``bool``      boolean (PostgreSQL)                        ``true`` / ``false``
``text``      text, char, varchar, json(b), uuid, xml,    the value's own text (PostgreSQL's output
              inet, cidr, macaddr, enums, set             function; ``char(n)`` padded)
``hex``       bytea, binary, varbinary, blob              lower-case hex of the bytes
``ntz``       timestamp, datetime                         ``YYYY-MM-DD HH:MM:SS.ffffff``
``instant``   timestamptz, MySQL timestamp                microseconds since the epoch
``days``      date                                        days since 1970-01-01
``micros``    time (and PostgreSQL interval)              microseconds (Debezium's: a month is
                                                          30.4375 days)
``list``      int[], bigint[], text[], varchar[], bool[]  JSON text of the array
============  ==========================================  =========================================

Anything else (bit strings, geometries, hstore, arrays of other types) is not compared; the
result names those columns. NULL is its own token (``chr(30)``), so NULL and '' differ. A row's
text is its key columns then its compared columns, joined by ``chr(31)``; its hash is the first
64 bits of the MD5 of that text as a signed integer, available in PostgreSQL, MySQL and Spark
alike. Segments compare ``count`` and the exact sum of their rows' hashes.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

NULL_TOKEN = 30  # chr(30): a NULL value
SEPARATOR = 31  # chr(31): between values

_POSTGRES_FAMILIES = {
    "smallint": "int", "integer": "int", "bigint": "int",
    "numeric": "decimal", "money": "decimal",
    "real": "float", "double precision": "float",
    "boolean": "bool",
    "text": "text", "character varying": "text", "character": "text", "json": "text",
    "jsonb": "text", "uuid": "text", "xml": "text", "inet": "text", "cidr": "text",
    "macaddr": "text", "citext": "text", "enum": "text",
    "bytea": "hex",
    "timestamp without time zone": "ntz",
    "timestamp with time zone": "instant",
    "date": "days",
    "time without time zone": "micros", "interval": "micros",
}  # fmt: skip
_POSTGRES_LISTS = {"_int2", "_int4", "_int8", "_text", "_varchar", "_bool"}
_MYSQL_FAMILIES = {
    "tinyint": "int", "smallint": "int", "mediumint": "int", "int": "int", "bigint": "int",
    "year": "int",
    "decimal": "decimal",
    "float": "float", "double": "float",
    "char": "text", "varchar": "text", "tinytext": "text", "text": "text",
    "mediumtext": "text", "longtext": "text", "enum": "text", "set": "text", "json": "text",
    "binary": "hex", "varbinary": "hex", "tinyblob": "hex", "blob": "hex", "mediumblob": "hex",
    "longblob": "hex",
    "datetime": "ntz", "timestamp": "instant", "date": "days", "time": "micros",
}  # fmt: skip
# lake (Spark) types each family accepts: a column whose lake type is not among them is not
# compared (the table was created some other way)
_LAKE_TYPES = {
    "int": ("tinyint", "smallint", "int", "bigint", "decimal"),
    "decimal": ("decimal", "string"),
    "float": ("float", "double"),
    "bool": ("boolean",),
    "text": ("string",),
    "hex": ("binary",),
    "ntz": ("timestamp_ntz",),
    "instant": ("timestamp",),
    "days": ("date",),
    "micros": ("bigint",),
    "list": ("array",),
}


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str  # information_schema.columns.data_type, lower case
    detail: str = ""  # PostgreSQL udt_name, MySQL column_type


def family(dialect: str, column: SourceColumn, lake_type: str) -> str | None:
    """The family a source column and its lake column are compared in, or None (not compared).

    >>> family("postgres", SourceColumn("n", "numeric", "numeric"), "decimal(38,10)")
    'decimal'
    >>> family("postgres", SourceColumn("b", "bit", "bit"), "binary") is None
    True
    >>> family("mysql", SourceColumn("f", "tinyint", "tinyint(1)"), "smallint")
    'int'
    """
    if dialect == "postgres":
        if column.data_type == "array":
            found = "list" if column.detail in _POSTGRES_LISTS else None
        else:  # enums arrive as "enum" (the caller reads pg_type); hstore & co. are not compared
            found = _POSTGRES_FAMILIES.get(column.data_type)
    else:
        found = _MYSQL_FAMILIES.get(column.data_type)
    base = lake_type.split("(", 1)[0].split("<", 1)[0]
    if found is None or base not in _LAKE_TYPES[found]:
        return None
    return found


def _trimmed_sql(dialect: str, text: str) -> str:
    if dialect == "postgres":
        return (
            f"CASE WHEN strpos({text}, '.') > 0 THEN rtrim(rtrim({text}, '0'), '.') ELSE {text} END"
        )
    return (
        f"CASE WHEN LOCATE('.', {text}) > 0 THEN TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM "
        f"{text})) ELSE {text} END"
    )


def source_sql(dialect: str, kind: str, column: str, column_type: SourceColumn) -> str:
    """The canonical text of a (quoted) source column, in the source's SQL.

    >>> source_sql("postgres", "days", '"d"', SourceColumn("d", "date"))
    '(("d") - DATE \\'1970-01-01\\')::text'
    """
    c = f"({column})"
    if dialect == "postgres":
        if kind == "micros" and column_type.data_type == "interval":
            return (
                f"round(((extract(year from {c}) * 12 + extract(month from {c})) * 30.4375 * 86400"
                f" + extract(day from {c}) * 86400 + extract(hour from {c}) * 3600"
                f" + extract(minute from {c}) * 60 + extract(second from {c})) * 1000000)"
                "::bigint::text"
            )
        return {
            "int": f"{c}::text",
            "decimal": _trimmed_sql(dialect, f"{c}::numeric::text"),
            # the shortest text that reads back as the same double (PostgreSQL >= 12, also
            # under pgjdbc's extra_float_digits=3), rounded: never a 15-digit conversion
            "float": _trimmed_sql(dialect, f"round({c}::float8::text::numeric, 10)::text"),
            "bool": f"{c}::text",
            "text": f"format('%s', {c})",
            "hex": f"encode({c}, 'hex')",
            "ntz": f"to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')",
            "instant": f"(extract(epoch from {c}) * 1000000)::bigint::text",
            "days": f"({c} - DATE '1970-01-01')::text",
            "micros": f"(extract(epoch from {c}) * 1000000)::bigint::text",
            "list": f"to_json({c})::text",
        }[kind]
    return {
        "int": f"CAST({c} AS CHAR)",
        "decimal": _trimmed_sql(dialect, f"CAST({c} AS CHAR)"),
        "float": _trimmed_sql(dialect, f"CAST(CAST({c} AS DECIMAL(65,10)) AS CHAR)"),
        "text": f"CAST({c} AS CHAR)",
        "hex": f"LOWER(HEX({c}))",
        "ntz": f"DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')",
        "instant": f"CAST(ROUND(UNIX_TIMESTAMP({c}) * 1000000) AS CHAR)",
        "days": f"CAST(DATEDIFF({c}, '1970-01-01') AS CHAR)",
        "micros": f"CAST(ROUND(TIME_TO_SEC({c}) * 1000000) AS CHAR)",
    }[kind]


def lake_column(kind: str, value: Column, lake_type: str) -> Column:
    """The canonical text of a lake column (Spark expressions only)."""
    from pyspark.sql import functions as F

    def trimmed(text: Column) -> Column:
        stripped = F.regexp_replace(F.regexp_replace(text, "0+$", ""), "\\.$", "")
        return F.when(F.instr(text, ".") > 0, stripped).otherwise(text)

    def plain(decimal: Column, scale: int) -> Column:
        """A decimal's digits without exponent (Spark writes 3.33E-8 for small ones)."""
        if scale <= 0:
            return decimal.cast("decimal(38,0)").cast("string")
        unscaled = (decimal * F.lit(10**scale)).cast("decimal(38,0)").cast("string")
        digits = F.regexp_replace(unscaled, "^-", "")
        width = F.greatest(F.length(digits), F.lit(scale + 1))
        padded = F.call_function("lpad", digits, width, F.lit("0"))
        cut = F.length(padded) - scale
        text = F.concat(
            padded.substr(F.lit(1), cut),
            F.lit("."),
            padded.substr(cut + 1, F.lit(scale)),
        )
        return F.concat(F.when(unscaled.startswith("-"), "-").otherwise(""), text)

    if kind == "decimal":
        scale = _scale(lake_type)
        return trimmed(value.cast("string") if scale is None else plain(value, scale))
    if kind == "float":  # Java's text of the double (float widened), rounded half up
        return trimmed(plain(value.cast("double").cast("string").cast("decimal(38,10)"), 10))
    if kind == "hex":
        return F.lower(F.hex(value))
    if kind == "ntz":
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if kind == "instant":
        return F.unix_micros(value).cast("string")
    if kind == "days":
        return F.unix_date(value).cast("string")
    if kind == "list":
        return F.to_json(value)
    return value.cast("string")


def _scale(lake_type: str) -> int | None:
    """The scale of a ``decimal(p,s)`` lake type (None: not a decimal).

    >>> _scale("decimal(12,2)"), _scale("string")
    (2, None)
    """
    if not lake_type.startswith("decimal("):
        return None
    return int(lake_type[len("decimal(") : -1].split(",")[1])


def source_row_text(dialect: str, parts: Sequence[str]) -> str:
    """The source's row text of canonical column texts ``parts``."""
    if dialect == "postgres":
        values = ", ".join(f"coalesce({p}, chr({NULL_TOKEN}))" for p in parts)
        return f"concat_ws(chr({SEPARATOR}), {values})"
    values = ", ".join(f"COALESCE({p}, CHAR({NULL_TOKEN} USING utf8mb4))" for p in parts)
    return f"CONCAT_WS(CHAR({SEPARATOR} USING utf8mb4), {values})"


def source_hash(dialect: str, text: str) -> str:
    """The signed 64-bit hash of a row text, in the source's SQL."""
    if dialect == "postgres":
        return f"('x' || substr(md5({text}), 1, 16))::bit(64)::bigint"
    return f"CAST(CONV(SUBSTR(MD5({text}), 1, 16), 16, -10) AS SIGNED)"


def lake_row_text(parts: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    null = F.lit(chr(NULL_TOKEN))
    return F.concat_ws(chr(SEPARATOR), *(F.coalesce(p, null) for p in parts))


def lake_hash(text: Column) -> Column:
    from pyspark.sql import functions as F

    return F.conv(F.substring(F.md5(text), 1, 16), 16, -10).cast("bigint")
