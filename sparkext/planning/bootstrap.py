"""Pure planning for bootstrap_cdc: the source position a copy is taken at, the type each source
column lands as (the type ingest_cdc gives the same column from Debezium's events), the SQL that
reads it, and the key ranges. No Spark, no database: unit-tested alone.

Positions are :mod:`sparkext.planning.positions` strings. A bootstrap point sorts *below* every
change
made after it and *at or above* every change the copy already holds, so a following ingest_cdc
applies exactly the changes after it (its per-key version of every copied row, and its truncate
mark, is the point).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot.expressions as exp

from sparkext.planning.reconcile import boundaries, identifier, table_sql

__all__ = [
    "Column",
    "boundaries",
    "column_plan",
    "lsn_number",
    "mysql_column_plan",
    "mysql_point",
    "parse_position",
    "pg_point",
    "range_predicates",
    "select_sql",
    "snapshot_guard",
    "table_sql",
    "text_literal",
]

_LSN = re.compile(r"^\s*([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})\s*$")
_BINLOG = re.compile(r"^\s*([^\s:]*?(\d+)):(\d+)\s*$")
_POSITION = re.compile(r"^(p:\d{20}:\d{20}|m:\d{10}:\d{20}:\d{10})$")
_ROW_MAX = 9_999_999_999  # the largest row number of a MySQL position (10 digits)


def lsn_number(text: str) -> int | None:
    """A PostgreSQL LSN ``'16/B374D848'`` as a number (None: not an LSN).

    >>> lsn_number("0/1D420E8"), lsn_number("mysql-bin.000003:154")
    (30679272, None)
    """
    match = _LSN.match(text)
    if not match:
        return None
    return (int(match.group(1), 16) << 32) + int(match.group(2), 16)


def pg_point(lsn: int) -> str:
    """The position of a PostgreSQL copy consistent at WAL position ``lsn``: below every change
    of a transaction that commits after it. Debezium's ``sequence`` is [the end of the previous
    commit, the change's LSN], so a transaction whose predecessor committed at or after ``lsn``
    sorts above ``p:<lsn>:0``; the first transaction a new connector sends has no previous
    commit and sorts by its change LSN (:func:`sparkext.planning.positions.position`).

    >>> pg_point(30679272)
    'p:00000000000030679272:00000000000000000000'
    """
    return f"p:{lsn:020d}:{0:020d}"


def mysql_point(file: str, pos: int) -> str:
    """The position of a MySQL copy taken at binlog ``file:pos`` (SHOW MASTER STATUS: the next
    event is written at ``pos``): just below the first row of an event at ``pos``.

    >>> mysql_point("mysql-bin.000003", 154)
    'm:0000000003:00000000000000000153:9999999999'
    """
    match = re.search(r"(\d+)$", file)
    number = int(match.group(1)) if match else 0
    return f"m:{number:010d}:{max(pos - 1, 0):020d}:{_ROW_MAX:010d}"


def parse_position(text: str) -> str | None:
    """A position stated by the user (a dump tool's recorded point) as a position string:
    a PostgreSQL LSN, a MySQL ``binlog-file:pos``, or a position string itself (None: neither).

    >>> parse_position("0/1D420E8")
    'p:00000000000030679272:00000000000000000000'
    >>> parse_position("mysql-bin.000003:154")
    'm:0000000003:00000000000000000153:9999999999'
    >>> parse_position("yesterday") is None
    True
    """
    text = text.strip()
    lsn = lsn_number(text)
    if lsn is not None:
        return pg_point(lsn)
    binlog = _BINLOG.match(text)
    if binlog:
        return mysql_point(binlog.group(1), int(binlog.group(3)))
    if _POSITION.match(text):
        return text
    return None


@dataclass(frozen=True)
class Column:
    """A source column: how the source SELECT reads it (``expression``), the Spark type the
    JDBC reader gives it (``read_type``), and the lake type (``spark_type``); a JDBC value of
    ``read_type`` becomes ``spark_type`` by ``convert`` (``cast``, ``date``, ``ntz``, ``ltz``)."""

    name: str
    source_type: str
    expression: str
    spark_type: str
    convert: str = "cast"


_SIMPLE = {
    "smallint": "int",  # Debezium: INT16 -> int
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "text": "string",
    "bytea": "binary",
}
_TEXT = ("character varying", "character", "citext", "name")
_ELEMENTS = {
    "smallint": "int",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "text": "string",
    "character varying": "string",
    "uuid": "string",
}
_NUMERIC = re.compile(r"^numeric\((\d+),(\d+)\)$")
_EPOCH_MICROS = "(extract(epoch from {c}) * 1000000)::bigint"
# io.debezium.time.MicroDuration: months of 365.25 / 12 days, days of 24 hours
_DURATION_MICROS = (
    "((extract(year from {c}) * 12 + extract(month from {c})) * 30.4375 * 86400000000"
    " + extract(day from {c}) * 86400000000 + extract(hour from {c}) * 3600000000"
    " + extract(minute from {c}) * 60000000 + extract(microseconds from {c}))::bigint"
)


_ALIASES = {
    "int2": "smallint",
    "int": "integer",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "bool": "boolean",
    "varchar": "character varying",
    "char": "character",
    "bpchar": "character",
    "decimal": "numeric",
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
    "timetz": "time with time zone",
}


def normalized(source_type: str) -> str:
    """``format_type``'s name of a type written in short (the DDL's spelling).

    >>> normalized("timestamptz"), normalized("varchar(40)"), normalized("int[]")
    ('timestamp with time zone', 'character varying(40)', 'integer[]')
    """
    text = source_type.strip().lower()
    array = text.endswith("[]")
    base = text[:-2] if array else text
    match = re.match(r"^([a-z0-9_ ]+?)\s*(\(.*\))?$", base)
    if match and match.group(1) in _ALIASES:
        name, args = _ALIASES[match.group(1)], match.group(2) or ""
        if name.startswith(("timestamp", "time ")) and args:  # timestamp(3) without time zone
            head, _, zone = name.partition(" ")
            base = f"{head}{args} {zone}"
        else:
            base = f"{name}{args}"
    return base + ("[]" if array else "")


def column_plan(name: str, source_type: str, variable_scale: str = "decimal(38,10)") -> Column:
    """How a PostgreSQL column (``format_type`` text) is read and typed, as ingest_cdc types the
    same column from Debezium's events with its default modes (docs/reference/bootstrap_cdc.md).

    >>> column_plan("qty", "integer").spark_type
    'int'
    >>> column_plan("price", "numeric(10,2)").spark_type
    'decimal(10,2)'
    >>> column_plan("ts", "timestamp(3) without time zone").expression
    '(extract(epoch from "ts") * 1000000)::bigint'
    >>> column_plan("doc", "jsonb").expression, column_plan("doc", "jsonb").spark_type
    ('"doc"::text', 'string')
    """
    c = identifier(name, "postgres")
    source_type = normalized(source_type)
    kind = re.sub(r"\(\d+(,\d+)?\)", "", source_type).strip()
    if source_type in _SIMPLE:
        return Column(name, source_type, c, _SIMPLE[source_type])
    if kind in _TEXT:
        return Column(name, source_type, c, "string")
    numeric = _NUMERIC.match(source_type.replace(" ", ""))
    if numeric:
        precision, scale = int(numeric.group(1)), int(numeric.group(2))
        if precision <= 38:
            return Column(name, source_type, c, f"decimal({precision},{scale})")
        return Column(name, source_type, f"{c}::text", "string")
    if source_type == "numeric":  # Debezium's VariableScaleDecimal: ingest_cdc's default type
        return Column(name, source_type, f"{c}::text", variable_scale)
    if kind == "date":
        return Column(name, source_type, f"({c} - DATE '1970-01-01')", "date", "date")
    if kind == "timestamp without time zone":
        return Column(name, source_type, _EPOCH_MICROS.format(c=c), "timestamp_ntz", "ntz")
    if kind == "timestamp with time zone":
        return Column(name, source_type, _EPOCH_MICROS.format(c=c), "timestamp", "ltz")
    if kind == "time without time zone":
        return Column(name, source_type, _EPOCH_MICROS.format(c=c), "bigint")
    if kind == "interval":
        return Column(name, source_type, _DURATION_MICROS.format(c=c), "bigint")
    if source_type.endswith("[]"):
        element = re.sub(r"\(\d+(,\d+)?\)", "", source_type[:-2]).strip()
        if element in _ELEMENTS:
            cast = "text" if _ELEMENTS[element] == "string" else element
            return Column(name, source_type, f"{c}::{cast}[]", f"array<{_ELEMENTS[element]}>")
        return Column(name, source_type, f"to_json({c})::text", "string")
    # uuid, json, jsonb, xml, inet, enums, ...: Debezium sends PostgreSQL's text of the value
    return Column(name, source_type, f"{c}::text", "string")


def select_sql(table: str, columns: Sequence[Column], dialect: str = "postgres") -> str:
    """The source query every range reads (Spark's JDBC reader adds the range's WHERE).

    >>> select_sql("public.t", [column_plan("id", "integer")])
    '(SELECT "id" AS "id" FROM "public"."t") AS src'
    >>> select_sql("shop.t", [mysql_column_plan("id", "int", "int(11)")], "mysql")
    '(SELECT CAST(`id` AS SIGNED) AS `id` FROM `shop`.`t`) AS src'
    """
    exprs = ", ".join(f"{c.expression} AS {identifier(c.name, dialect)}" for c in columns)
    return f"(SELECT {exprs} FROM {table_sql(table, dialect)}) AS src"


_MYSQL_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_MYSQL_TEXT = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
}  # fmt: skip
_MYSQL_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_MYSQL_GEOMETRY = {
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
    "multipolygon", "geometrycollection", "geomcollection",
}  # fmt: skip
_EPOCH_DIFF = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c})"


def mysql_column_plan(
    name: str, data_type: str, column_type: str, unsigned_bigint: str = "long"
) -> Column:
    """How a MySQL/MariaDB column (information_schema's ``data_type`` and ``column_type``) is
    read and typed, as ingest_cdc types it from the Debezium MySQL connector's events with its
    default modes (``bigint.unsigned.handling.mode`` is ``unsigned_bigint``: ``long`` wraps
    values above 2^63 - 1 as the connector does, ``precise`` keeps them as decimal(20,0)).
    The reading session's time zone is UTC (``SET time_zone = '+00:00'``), so a ``timestamp``
    is its instant and a ``datetime`` its wall-clock time.

    >>> mysql_column_plan("qty", "int", "int(10) unsigned").spark_type
    'bigint'
    >>> mysql_column_plan("flag", "tinyint", "tinyint(1)").spark_type
    'int'
    >>> mysql_column_plan("u", "bigint", "bigint(20) unsigned", "precise").spark_type
    'decimal(20,0)'
    >>> c = mysql_column_plan("at", "datetime", "datetime(6)")
    >>> c.expression, c.spark_type, c.convert
    ("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `at`)", 'timestamp_ntz', 'ntz')
    >>> mysql_column_plan("b", "bit", "bit(12)").expression
    "LPAD(HEX(`b`), 4, '0')"
    """
    c = identifier(name, "mysql")
    kind = data_type.strip().lower()
    detail = column_type.strip().lower()
    unsigned = "unsigned" in detail
    if kind in _MYSQL_INTEGERS:
        if kind == "bigint" and unsigned and unsigned_bigint == "precise":
            return Column(name, detail, f"CAST({c} AS CHAR)", "decimal(20,0)")
        # Debezium: INT16 for tinyint and smallint, INT32 for mediumint, int and smallint
        # unsigned, INT64 for bigint and int unsigned (tinyint(1) too is INT16, not BOOLEAN)
        wide = kind == "bigint" or (kind in ("int", "integer") and unsigned)
        return Column(name, detail, f"CAST({c} AS SIGNED)", "bigint" if wide else "int")
    if kind in ("decimal", "numeric"):
        match = re.search(r"\((\d+)(?:,(\d+))?\)", detail)
        precision, scale = (int(match.group(1)), int(match.group(2) or 0)) if match else (10, 0)
        if precision <= 38:
            return Column(name, detail, c, f"decimal({precision},{scale})")
        return Column(name, detail, f"CAST({c} AS CHAR)", "string")
    if kind == "float":
        return Column(name, detail, c, "float")
    if kind in ("double", "real"):
        return Column(name, detail, c, "double")
    if kind == "bit":
        match = re.search(r"\((\d+)\)", detail)
        bits = int(match.group(1)) if match else 1
        if bits == 1:  # Debezium: BOOLEAN
            return Column(name, detail, f"CAST({c} + 0 AS SIGNED)", "boolean")
        width = (bits + 7) // 8 * 2  # io.debezium.data.Bits: the value's bytes, little-endian
        return Column(name, detail, f"LPAD(HEX({c}), {width}, '0')", "binary", "bits")
    if kind in _MYSQL_TEXT:  # read as text, not CHAR(n): Spark would pad that to its length
        return Column(name, detail, f"CAST({c} AS CHAR)", "string")
    if kind == "json":
        return Column(name, detail, f"CAST({c} AS CHAR)", "string")
    if kind in _MYSQL_BINARY:
        return Column(name, detail, c, "binary")
    if kind == "date":
        return Column(name, detail, f"DATEDIFF({c}, '1970-01-01')", "date", "date")
    if kind == "datetime":
        return Column(name, detail, _EPOCH_DIFF.format(c=c), "timestamp_ntz", "ntz")
    if kind == "timestamp":
        return Column(name, detail, _EPOCH_DIFF.format(c=c), "timestamp", "ltz")
    if kind == "time":  # io.debezium.time.MicroTime: microseconds, negative and > 24 h too
        return Column(name, detail, f"CAST(ROUND(TIME_TO_SEC({c}) * 1000000) AS SIGNED)", "bigint")
    if kind == "year":
        return Column(name, detail, f"CAST({c} AS SIGNED)", "int")
    if kind in _MYSQL_GEOMETRY:  # Debezium's Geometry {wkb, srid} (a Point: {x, y, wkb, srid})
        parts = f"HEX(ST_AsWKB({c})), ':', ST_SRID({c})"
        if kind == "point":
            return Column(
                name, detail, f"CONCAT({parts}, ':', ST_X({c}), ':', ST_Y({c}))", "string", "point"
            )
        return Column(name, detail, f"CONCAT({parts})", "string", "geometry")
    return Column(name, detail, f"CAST({c} AS CHAR)", "string")


def snapshot_guard(snapshot_text: str) -> str:
    """A condition true in the exported snapshot (``txid_current_snapshot()`` text) and failing
    the query in any other: a range read outside it is an error, never a silent wrong copy.
    An uncorrelated sub-select, evaluated once per query.

    >>> snapshot_guard("770:770:").startswith("(SELECT CASE WHEN txid_current_snapshot()")
    True
    """
    text = text_literal(snapshot_text)
    note = text_literal("sparkext bootstrap_cdc: this range is not read in the exported snapshot ")
    return (
        f"(SELECT CASE WHEN txid_current_snapshot()::text = {text} THEN true "
        f"ELSE ({note} || txid_current_snapshot()::text)::boolean END)"
    )


def range_predicates(
    key: str, edges: Sequence[Any], numeric: bool, dialect: str = "postgres"
) -> list[str]:
    """One WHERE clause per key range, ``lo <= key < hi``, cut at ``edges`` (sorted by the
    source itself, so its own order and collation decide: every key is in exactly one range).

    >>> range_predicates("id", [10, 20], True)
    ['"id" < 10', '"id" >= 10 AND "id" < 20', '"id" >= 20']
    >>> range_predicates("k", ["m"], False)
    ['"k" < \\'m\\'', '"k" >= \\'m\\'']
    >>> range_predicates("id", [], True)
    ['1 = 1']
    """
    column = identifier(key, dialect)

    def literal(value: Any) -> str:
        if numeric:
            return str(int(value))
        return exp.Literal.string(str(value)).sql(dialect=dialect)

    bounds = [None, *edges, None]
    found = []
    for lo, hi in itertools.pairwise(bounds):
        parts = []
        if lo is not None:
            parts.append(f"{column} >= {literal(lo)}")
        if hi is not None:
            parts.append(f"{column} < {literal(hi)}")
        found.append(" AND ".join(parts) or "1 = 1")
    return found


def text_literal(value: str) -> str:
    """A PostgreSQL string literal.

    >>> text_literal("it's")
    "'it''s'"
    """
    return exp.Literal.string(value).sql(dialect="postgres")


def sample_percent(estimated_rows: float, segments: int, per_segment: int = 200) -> float:
    """TABLESAMPLE BERNOULLI percentage for about ``per_segment`` keys per range.

    >>> sample_percent(10_000_000, 16), sample_percent(100, 16)
    (0.032, 100.0)
    """
    if estimated_rows <= 0:
        return 100.0
    return min(100.0, round(100.0 * per_segment * segments / estimated_rows, 6))
