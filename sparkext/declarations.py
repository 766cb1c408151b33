"""What a procedure or table function declares about itself, as data.

A routine is a name, a one-line doc, its parameters, its options, its output columns and a ``run``
function. The registry (:mod:`sparkext.procedures.registry`) maps names to routines; ``help()`` and
argument binding read these declarations and nothing else.

Floor: util.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkext import durations, times
from sparkext.errors import OptionError, did_you_mean
from sparkext.literals import sql_string

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
    # a point in a table's history: a snapshot id (bigint, or its digits as a string), a tag or
    # branch name, or a time (TIMESTAMP, DATE or a string); bound to its text
    SNAPSHOT = "snapshot"


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
        ref: TableRef = self.values[name]  # bound by routing.binding: a TABLE parameter's value
        return ref


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
    # an output column whose non-NULL value says that row's part of the work failed (the rows
    # are still the result); the shell's -e/-f exit non-zero when any row has one
    failure_column: str | None = None
    # whether a call changes a table (a policy's "read-only" grants only the routines that do
    # not): a flag, or a function of the bound arguments (health_report's record => true)
    writes: bool | Callable[[BoundArgs], bool] = True

    def writes_for(self, args: BoundArgs) -> bool:
        return self.writes(args) if callable(self.writes) else self.writes

    def tables_of(self, args: BoundArgs) -> list[str]:
        """The tables a call names: its table arguments and its ``target``, for the policy's
        table patterns and the audit log."""
        names = []
        for param in self.params:
            value = args.values.get(param.name)
            if param.type == ParamType.TABLE and value is not None:
                names.append(value.name)
            elif param.name == "target" and isinstance(value, str) and value:
                names.append(value)
        return names

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


def describe(value: Any) -> str:
    """Render a bound value the way a user wrote it, for error messages.

    >>> describe("x"), describe(True), describe(3)
    ("'x'", 'true', '3')
    >>> print(describe("day = DATE '2026-11-21'"))
    "day = DATE '2026-11-21'"
    """
    if isinstance(value, str):
        return sql_string(value)
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


# Option parsers: every ``options => map(...)`` value arrives as text and is read by one of these.
# A parser returns the value or raises Expected with what it expects, as a phrase; binding makes
# every failure the same sentence ("Option 'k' of sparkext.x expects <phrase>, got '<text>'."),
# so no parser lets Python's wording ("invalid literal for int() with base 10") through.

LONG_MAX = 2**63 - 1  # sizes go to Iceberg and Spark as Java longs

BYTE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*(\d+)\s*(?:([kmgt])(?:i?b)?|b)?\s*", re.ASCII | re.IGNORECASE)
_WHOLE = re.compile(r"\s*\+?(\d+)\s*", re.ASCII)

BYTES = "a positive whole number of bytes such as 134217728 or 128MB"
COUNT = "a positive whole number"
BOOLEAN = "true or false"


class Expected(ValueError):
    """A value does not parse; the message is what was expected, e.g. "true or false"."""


def parse_bytes(text: str) -> int:
    """A positive byte size: a whole number of bytes, or a whole number and a unit.

    Units follow Spark's byte-size settings (``spark.sql.files.maxPartitionBytes=128MB``),
    case-insensitive, with or without a space: ``b``; ``k``, ``kb``, ``kib``; ``m``, ``mb``,
    ``mib``; ``g``, ``gb``, ``gib``; ``t``, ``tb``, ``tib``. Every unit is binary, as Spark and
    the JVM read them: ``1KB`` = ``1KiB`` = 1024 bytes, ``128MB`` = ``128MiB`` = ``128m`` =
    134217728 bytes (2^20 per MB, never 10^6). Fractions (``1.5GB``) are refused, as Spark
    refuses them; so are 0 and sizes above a Java long.

    >>> parse_bytes("134217728"), parse_bytes("128MB"), parse_bytes("64 MiB"), parse_bytes("1g")
    (134217728, 134217728, 67108864, 1073741824)
    >>> parse_bytes("512k"), parse_bytes("2 KB"), parse_bytes("3B")
    (524288, 2048, 3)
    >>> try:
    ...     parse_bytes("four")
    ... except Expected as error:
    ...     print(error)
    a positive whole number of bytes such as 134217728 or 128MB
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise Expected(BYTES)
    unit = (match.group(2) or "").lower()
    value = int(match.group(1)) * BYTE_UNITS[unit]
    if not 0 < value <= LONG_MAX:
        raise Expected(BYTES)
    return value


def parse_count(text: str) -> int:
    """A positive whole number: ``10``.

    >>> parse_count("10")
    10
    >>> parse_count("0")
    Traceback (most recent call last):
    ...
    sparkext.declarations.Expected: a positive whole number
    """
    match = _WHOLE.fullmatch(text)
    if match is None or not 0 < int(match.group(1)) <= LONG_MAX:
        raise Expected(COUNT)
    return int(match.group(1))


def parse_boolean(text: str) -> bool:
    """``true`` or ``false``, in any case.

    >>> parse_boolean("TRUE")
    True
    """
    if text.strip().lower() not in ("true", "false"):
        raise Expected(BOOLEAN)
    return text.strip().lower() == "true"


def or_empty(parse: Callable[[str], object]) -> Callable[[str], object]:
    """``parse``, except that an empty value is ``None`` (the option's computed default).

    >>> or_empty(parse_bytes)(""), or_empty(parse_bytes)("1k")
    (None, 1024)
    """

    def parse_or_empty(text: str) -> object:
        return None if not text.strip() else parse(text)

    return parse_or_empty


def one_of(*choices: str) -> Callable[[str], str]:
    """One of ``choices`` (case-insensitive; the empty text too when "" is a choice).

    >>> one_of("file", "partition")("FILE")
    'file'
    >>> one_of("file", "partition")("rows")
    Traceback (most recent call last):
    ...
    sparkext.declarations.Expected: one of file, partition
    """

    def parse_choice(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise Expected("one of " + ", ".join(c for c in choices if c))
        return value

    return parse_choice


_LONG = re.compile(r"\s*([+-]?\d+)\s*")


def parse_long(text: str) -> int:
    """A Java long written in decimal: a snapshot id or epoch milliseconds.

    >>> parse_long(" 5837411 ")
    5837411
    """
    match = _LONG.fullmatch(text)
    if match is None or not -(2**63) <= int(match.group(1)) < 2**63:
        raise ValueError("expected a whole number such as 5837411")
    return int(match.group(1))


def parse_names(text: str) -> list[str]:
    """Comma-separated column names.

    >>> parse_names("id, region")
    ['id', 'region']
    """
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise ValueError("expected column names separated by commas, such as 'id,region'")
    return names


def label(routine: Routine) -> str:
    return f"sparkext.{routine.name}"


def bind_options(routine: Routine, given: Mapping[str, str] | None) -> dict[str, Any]:
    """Validate ``options => map(...)`` keys against the routine's declared options."""
    return bind_declared(label(routine), routine.options, given)


def bind_declared(
    where: str, options: Sequence[Option], given: Mapping[str, str] | None
) -> dict[str, Any]:
    """Validate ``given`` against ``options``, the options of routine ``where`` (``sparkext.x``,
    as its sentences name it): what an action that declares its options binds a Python API's
    ``options`` dict with, in the words ``options => map(...)`` gets."""
    declared = {o.key: o for o in options}
    result: dict[str, Any] = {
        key: {} if option.prefix else option.parse(option.default)
        for key, option in declared.items()
    }
    for key, raw in (given or {}).items():
        option = declared.get(key)
        prefix = next((o for o in options if o.prefix and key.startswith(o.key)), None)
        if option is None and prefix is not None:
            result[prefix.key][key] = raw
            continue
        if option is None:
            valid = ", ".join(sorted(declared)) or "none"
            raise OptionError(
                f"Unknown option '{key}' for {where}{did_you_mean(key, declared)}; "
                f"valid options: {valid}."
            )
        try:
            result[key] = option.parse(raw)
        except (TypeError, ValueError) as error:
            # Expected, or a parser's own ValueError("expected ..."): the one sentence shape
            expected = str(error) if isinstance(error, Expected) else ""
            if not expected and str(error).startswith("expected "):
                expected = str(error).removeprefix("expected ").rstrip(".")
            if expected:
                raise OptionError(
                    f"Option '{key}' of {where} expects {expected}, got {describe(raw)}."
                ) from None
            raise OptionError(
                f"Option '{key}' of {where} has an invalid value '{raw}': {error}."
            ) from None
    return result


def parse_duration(text: str) -> int:
    """A positive duration in milliseconds, in the one grammar (:mod:`sparkext.durations`).

    >>> parse_duration("6 hours"), parse_duration("2 weeks")
    (21600000, 1209600000)
    """
    try:
        return durations.parse_ms(text)
    except ValueError:
        raise Expected("a duration such as '6 hours' or '1 day'") from None


def parse_number_above(minimum: float, example: str) -> Callable[[str], float]:
    """A parser of numbers strictly above ``minimum`` (options of tiered_optimize, maintain)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise Expected(example) from None
        if not value > minimum:
            raise Expected(example)
        return value

    return parse


def parse_columns(text: str | None) -> tuple[str, ...]:
    """``'a, b'`` → ('a', 'b'); empty → ().

    >>> parse_columns(" a, b "), parse_columns("")
    (('a', 'b'), ())
    """
    return tuple(c.strip() for c in (text or "").split(",") if c.strip())


def resolve_options(
    declared: Sequence[Option],
    given: Mapping[str, str],
    properties: Mapping[str, str],
    prefix: str,
) -> dict[str, Any]:
    """Each option from ``options => map(...)``, else table property ``<prefix><key>``
    (``sparkext.optimize.<key>`` for tiered_optimize, ``sparkext.maintenance.<key>`` for
    maintain), else its
    default.

    >>> o = resolve_options((Option("min-files", "12", "", parse_count),), {},
    ...     {"sparkext.optimize.min-files": "5"}, "sparkext.optimize.")
    >>> o["min-files"]
    5
    """
    out = {}
    for option in declared:
        if option.key in given:
            raw, source = given[option.key], None
        elif prefix + option.key in properties:
            raw, source = properties[prefix + option.key], prefix + option.key
        else:
            raw, source = option.default, None
        try:
            out[option.key] = option.parse(raw)
        except ValueError as error:
            if source is None:
                raise  # binding already checked what the caller gave
            raise OptionError(
                f"Table property {source} = {sql_string(raw)} is not valid ({error}); fix it "
                f"with ALTER TABLE ... SET TBLPROPERTIES ('{source}' = ...)."
            ) from None
    return out
