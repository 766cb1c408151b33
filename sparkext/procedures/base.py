"""What a procedure or table function declares about itself, as data.

A routine is a name, a one-line doc, its parameters, its options, its output columns and a ``run``
function. The registry (:mod:`sparkext.procedures.registry`) maps names to routines; ``help()`` and
argument binding read these declarations and nothing else.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkext import times

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef


class ParamType(enum.Enum):
    """Parameter types, named as Spark SQL names them in ``help()``."""

    STRING = "string"
    LONG = "bigint"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    TIMESTAMP = "timestamp"
    INTERVAL = "interval"
    STRING_MAP = "map<string,string>"
    STRING_ARRAY = "array<string>"
    TABLE = "table"  # a string naming an existing table; bound to a TableRef


class Kind(enum.Flag):
    PROCEDURE = enum.auto()  # CALL sparkext.name(...)
    FUNCTION = enum.auto()  # SELECT ... FROM sparkext.name(...)


@dataclass(frozen=True)
class Param:
    name: str
    type: ParamType
    doc: str
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class Option:
    """One key accepted inside ``options => map(...)``; values arrive as strings."""

    key: str
    default: str
    doc: str
    parse: Callable[[str], Any] = str
    # a prefix option (key ends with "."): every given key starting with it is accepted and
    # passed through unparsed; the bound value is a dict of those keys
    prefix: bool = False


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: str  # Spark DDL type, e.g. "bigint"
    doc: str


@dataclass(frozen=True)
class Context:
    """What a running routine may use: the session and how to report progress."""

    spark: SparkSession
    progress: Callable[[str], None] = lambda message: None


@dataclass(frozen=True)
class BoundArgs:
    """Arguments after binding: every declared parameter has a value (its default if omitted)."""

    values: Mapping[str, Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def table(self, name: str = "table") -> TableRef:
        return self.values[name]


@dataclass(frozen=True)
class Routine:
    """A procedure and/or table function: its declaration and the function that runs it."""

    name: str
    doc: str
    params: tuple[Param, ...]
    output: tuple[OutputColumn, ...]
    run: Callable[[Context, BoundArgs], DataFrame | list[tuple[Any, ...]]]
    kind: Kind = Kind.PROCEDURE
    options: tuple[Option, ...] = ()
    # the table-function form when it takes other parameters or returns other columns than the
    # procedure; empty ``output`` there means the columns depend on the arguments (a table)
    function: Routine | None = None

    def for_kind(self, kind: Kind) -> Routine:
        return self.function if kind == Kind.FUNCTION and self.function is not None else self

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def output_ddl(self) -> str:
        return ", ".join(f"{c.name} {c.type}" for c in self.output)

    @property
    def kind_label(self) -> str:
        both = Kind.PROCEDURE | Kind.FUNCTION
        if self.kind == both:
            return "procedure, table function"
        return "procedure" if self.kind == Kind.PROCEDURE else "table function"


def parse_boolean(text: str) -> bool:
    """Option parser for ``true``/``false``.

    >>> parse_boolean("TRUE")
    True
    """
    if text.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.lower() == "true"


def parse_positive(text: str) -> int:
    """Option parser for a positive integer.

    >>> parse_positive("3")
    3
    """
    value = int(text)
    if value <= 0:
        raise ValueError("expected a positive number")
    return value


def describe(value: Any) -> str:
    """Render a bound value the way a user wrote it, for error messages.

    >>> describe("x"), describe(True), describe(3)
    ("'x'", 'true', '3')
    """
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        return times.sql_literal(value)
    if isinstance(value, dict):
        return "map(" + ", ".join(f"{describe(k)}, {describe(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        return "array(" + ", ".join(describe(v) for v in value) + ")"
    return str(value)


def type_label(value: Any) -> str:
    """The Spark-ish type name of a Python value, for error messages."""
    for python_type, label in (
        (bool, "boolean"),
        (int, "bigint"),
        (float, "double"),
        (Decimal, "decimal"),
        (str, "string"),
        (dt.datetime, "timestamp"),
        (dt.date, "date"),
        (dt.timedelta, "interval"),
        (dict, "map"),
        (list, "array"),
    ):
        if isinstance(value, python_type):
            return label
    return "NULL" if value is None else type(value).__name__
