"""Canonical values: one form per column for what a data file holds and what a query asks.

Building (on executors, from the Parquet file's Arrow arrays) and probing (on the driver, from
the predicate JSON) go through this module, so a value is hashed and compared the same way on
both sides. Each column type has one *domain*:

- ``int``: tinyint, smallint, int, bigint, boolean (0/1), date (days since 1970-01-01),
  timestamp and timestamp_ntz (microseconds since the epoch), decimal with a precision up to 18
  (the unscaled integer at the column's scale) -- as int64;
- ``float``: float and double, as float64 (a float widened exactly), -0.0 made 0.0 and every
  NaN the one quiet NaN, so Spark's ``0.0 = -0.0`` and ``NaN = NaN`` hold;
- ``bytes``: string (UTF-8; bytes compare as code points do), binary, and decimal with a
  precision above 18 (the unscaled integer plus 2^127 as 16 big-endian bytes, so bytes compare
  as numbers do).

Every value also has an unsigned 64-bit *order key* in the int and float domains: int64 with its
sign bit flipped; a float's IEEE bits with every bit flipped when negative and the sign bit set
otherwise. Keys sort as Spark sorts values (NaN above +Infinity).

A probe value of another type than the column (after Spark's widening casts) is converted
exactly; when it cannot be (3000000000 for an int column, 1.5 for a decimal(5,0)), it matches no
value. A probe of an unrelated type (a string for an int column) cannot be answered.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import base64
import math
import re
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SIGN = 1 << 63
KEY_MAX = (1 << 64) - 1
_WIDE = 1 << 127
NAN_BITS = 0x7FF8000000000000

_INTEGRAL_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "integer": 32, "bigint": 64, "long": 64}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_SIMPLE = {"string", "binary", "boolean", "date", "timestamp", "timestamp_ntz"}


@dataclass(frozen=True)
class ColumnType:
    """A top-level atomic column's Spark type, as the index needs it."""

    name: str
    kind: str  # integral float decimal string binary boolean date timestamp timestamp_ntz
    bits: int = 64  # integral and float widths
    precision: int = 0
    scale: int = 0

    @property
    def domain(self) -> str:
        """``int``, ``float`` or ``bytes`` (see the module docstring)."""
        if self.kind == "float":
            return "float"
        if self.kind in ("string", "binary") or (self.kind == "decimal" and self.precision > 18):
            return "bytes"
        return "int"


class Unanswerable(ValueError):
    """A probe value cannot be compared with the column (unrelated types): keep the file."""


def column_type(name: str) -> ColumnType:
    """Parse a Spark type name (``DataType.simpleString``).

    >>> column_type("decimal(10,2)")
    ColumnType(name='decimal(10,2)', kind='decimal', bits=64, precision=10, scale=2)

    Raises:
        ValueError: a nested or unknown type.
    """
    text = name.strip().lower()
    if text in _INTEGRAL_BITS:
        return ColumnType(text, "integral", _INTEGRAL_BITS[text])
    if text in ("float", "real"):
        return ColumnType(text, "float", 32)
    if text == "double":
        return ColumnType(text, "float", 64)
    match = _DECIMAL.fullmatch(text)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return ColumnType(f"decimal({precision},{scale})", "decimal", 64, precision, scale)
    if text == "decimal":
        return ColumnType("decimal(10,0)", "decimal", 64, 10, 0)
    if text in _SIMPLE:
        return ColumnType(text, text)
    if re.fullmatch(r"(var)?char\(\d+\)", text):
        return ColumnType(text, "string")
    raise ValueError(f"not an atomic column type: {name}")


# -- the column side: Arrow arrays to canonical arrays -------------------------------------------


@dataclass(frozen=True)
class Canonical:
    """A file's non-null values in canonical form, and whether it holds nulls / non-nulls."""

    domain: str
    values: Any  # int64 ndarray, float64 ndarray or pa.LargeBinaryArray
    has_null: bool
    has_non_null: bool

    def __len__(self) -> int:
        return len(self.values)


def canonical_values(column: ColumnType, values: pa.Array | pa.ChunkedArray | None) -> Canonical:
    """The canonical non-null values of one data file's column (``None``: no such column, so
    every row reads as NULL)."""
    if values is None:
        return Canonical(column.domain, _empty(column.domain), True, False)
    array = _one_array(values)
    nulls = array.null_count
    present = array.drop_null() if nulls else array
    canon = _convert(column, present)
    return Canonical(column.domain, canon, nulls > 0, len(present) > 0)


def distinct(canon: Canonical) -> Canonical:
    """The same values without duplicates (sorted by order key in the int and float domains)."""
    if canon.domain == "bytes":
        values: Any = pc.unique(canon.values)
    elif canon.domain == "float":
        values = np.unique(canon.values.view(np.uint64)).view(np.float64)
    else:
        values = np.unique(canon.values)
    return Canonical(canon.domain, values, canon.has_null, canon.has_non_null)


def _empty(domain: str) -> Any:
    if domain == "bytes":
        return pa.array([], pa.large_binary())
    return np.zeros(0, np.float64 if domain == "float" else np.int64)


def _one_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    decoded = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in chunks]
    if not decoded:
        value_type = values.type
        if pa.types.is_dictionary(value_type):
            value_type = value_type.value_type
        return pa.array([], value_type)
    return decoded[0] if len(decoded) == 1 else pa.concat_arrays(decoded)


def _convert(column: ColumnType, array: pa.Array) -> Any:
    kind = column.kind
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    arrow = array.type
    if kind == "string" and pa.types.is_fixed_size_binary(arrow) and arrow.byte_width == 16:
        # an Iceberg uuid column: Spark shows it as the UUID's text
        text = [str(uuid.UUID(bytes=b)).encode() for b in array.to_pylist()]
        return pa.array(text, pa.large_binary())
    if kind in ("string", "binary"):
        return array.cast(pa.large_binary())
    if kind == "float":
        out = array.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
        return canonical_floats(out)
    if kind == "decimal":
        return _decimals(column, array)
    if kind in ("timestamp", "timestamp_ntz"):
        return _micros(array)
    if kind == "date":
        if pa.types.is_date64(arrow):
            return np.floor_divide(array.cast(pa.int64()).to_numpy(), 86_400_000)
        return array.cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64)
    if kind == "boolean":
        return array.to_numpy(zero_copy_only=False).astype(np.int64)
    return array.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def canonical_floats(values: np.ndarray) -> np.ndarray:
    """-0.0 → 0.0 and every NaN → the one quiet NaN, in place; returns ``values``."""
    values[values == 0] = 0.0
    values[np.isnan(values)] = np.nan
    return values


def _micros(array: pa.Array) -> np.ndarray:
    arrow = array.type
    unit = arrow.unit if pa.types.is_timestamp(arrow) else "us"
    raw = array.cast(pa.timestamp(unit)).cast(pa.int64()).to_numpy(zero_copy_only=False)
    raw = np.asarray(raw, np.int64)
    if unit == "us":
        return raw
    if unit == "ns":
        return np.asarray(np.floor_divide(raw, 1000))
    return np.asarray(raw * (1000 if unit == "ms" else 1_000_000))


def _decimals(column: ColumnType, array: pa.Array) -> Any:
    arrow = array.type
    if not (pa.types.is_decimal128(arrow) and arrow.scale == column.scale):
        array = array.cast(pa.decimal128(38, column.scale))
    raw = np.frombuffer(array.buffers()[1], np.uint8)
    raw = raw[array.offset * 16 : (array.offset + len(array)) * 16].reshape(-1, 16)
    if column.precision <= 18:
        return raw[:, :8].copy().view("<i8").reshape(-1).astype(np.int64)
    wide = raw[:, ::-1].copy()  # big-endian two's complement
    wide[:, 0] ^= 0x80  # + 2^127: sorts as numbers
    return pa.Array.from_buffers(
        pa.large_binary(),
        len(wide),
        [None, pa.py_buffer(np.arange(len(wide) + 1, dtype=np.int64) * 16), pa.py_buffer(wide)],
    )


def int_keys(values: np.ndarray) -> np.ndarray:
    """Order keys of int64 values."""
    return np.asarray(values.view(np.uint64) ^ np.uint64(SIGN))


def float_keys(values: np.ndarray) -> np.ndarray:
    """Order keys of canonical float64 values."""
    bits = values.view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    return np.where(negative, ~bits, bits | np.uint64(SIGN))


def order_keys(domain: str, values: np.ndarray) -> np.ndarray:
    """Order keys of an int or float domain's canonical values."""
    return float_keys(values) if domain == "float" else int_keys(values)


# -- the probe side: JSON values of the predicate to canonical scalars ---------------------------


def float_key(value: float) -> int:
    """The order key of one canonical float."""
    (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return int(bits ^ KEY_MAX) if bits >> 63 else int(bits | SIGN)


def wide_bytes(unscaled: int) -> bytes:
    """A wide decimal's canonical bytes (its unscaled integer, clamped to 128 bits)."""
    clamped = min(max(unscaled, -_WIDE), _WIDE - 1)
    return (clamped + _WIDE).to_bytes(16, "big")


class NoMatch(Exception):
    """The probe value is no value of the column's type: it equals no value."""


def probe_number(type_name: str, value: Any) -> Fraction | float:
    """A numeric probe value exactly: a Fraction for integral and decimal types, a float for
    float and double (a float rounded to float32, as Spark holds it)."""
    probe = column_type(type_name)
    if probe.kind == "float":
        if isinstance(value, str):
            named = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
            if value not in named:
                raise Unanswerable(value)
            number = named[value]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        else:
            raise Unanswerable(value)
        if probe.bits == 32 and math.isfinite(number):
            number = float(np.float32(number))
        return 0.0 if number == 0 else number
    if probe.kind in ("integral", "date", "timestamp", "timestamp_ntz"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise Unanswerable(value)
        return Fraction(value)
    if probe.kind == "decimal":
        try:
            return Fraction(Decimal(str(value)))
        except (InvalidOperation, ValueError):
            raise Unanswerable(value) from None
    raise Unanswerable(value)


_COMPATIBLE = {
    "integral": ("integral", "decimal"),
    "decimal": ("integral", "decimal"),
    "float": ("float",),
    "string": ("string",),
    "binary": ("binary",),
    "boolean": ("boolean",),
    "date": ("date",),
    "timestamp": ("timestamp",),
    "timestamp_ntz": ("timestamp_ntz",),
}


def check_probe_type(column: ColumnType, type_name: str) -> ColumnType:
    """The probe's type, if it compares with the column; else Unanswerable."""
    try:
        probe = column_type(type_name)
    except ValueError:
        raise Unanswerable(type_name) from None
    if probe.kind not in _COMPATIBLE[column.kind]:
        raise Unanswerable(type_name)
    return probe


def _unscaled(column: ColumnType, number: Fraction) -> Fraction:
    return number * 10**column.scale if column.kind == "decimal" else number


def _int_range(column: ColumnType) -> tuple[int, int]:
    if column.kind == "integral":
        return -(1 << (column.bits - 1)), (1 << (column.bits - 1)) - 1
    if column.kind == "decimal":
        return -(10**column.precision) + 1, 10**column.precision - 1
    if column.kind == "boolean":
        return 0, 1
    return -SIGN, SIGN - 1


def probe_value(column: ColumnType, type_name: str, value: Any) -> int | float | bytes:
    """A probe value in the column's canonical form (an int, a canonical float, or bytes).

    >>> probe_value(column_type("decimal(5,2)"), "decimal(5,2)", "1.5")
    150
    >>> probe_value(column_type("int"), "bigint", 3000000000)
    Traceback (most recent call last):
    ...
    sparkext.planning.skipping.values.NoMatch: 3000000000

    Raises:
        NoMatch: the value is no value of the column's type (equals nothing).
        Unanswerable: the types do not compare.
    """
    probe = check_probe_type(column, type_name)
    if value is None:
        raise NoMatch(value)
    if column.kind in ("string", "binary"):
        if not isinstance(value, str):
            raise Unanswerable(value)
        if column.kind == "string":
            return value.encode("utf-8", "surrogatepass")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise Unanswerable(value) from None
    if column.kind == "boolean":
        if not isinstance(value, bool):
            raise Unanswerable(value)
        return int(value)
    number = probe_number(probe.name, value)
    if column.kind == "float":
        if column.bits == 32 and math.isfinite(number) and float(np.float32(number)) != number:
            raise NoMatch(value)
        return float(number)
    unscaled = _unscaled(column, Fraction(number))
    low, high = _int_range(column)
    if unscaled.denominator != 1 or not low <= unscaled <= high:
        raise NoMatch(value)
    if column.domain == "bytes":
        return wide_bytes(int(unscaled))
    return int(unscaled)


@dataclass(frozen=True)
class Bound:
    """One side of a range in the canonical form: an order key (int and float domains, always
    inclusive) or bytes (with ``inclusive``). ``None`` values mean unbounded."""

    value: int | bytes
    inclusive: bool = True


def probe_bound(
    column: ColumnType, type_name: str, value: Any, op: str
) -> tuple[Bound | None, Bound | None]:
    """``column <op> value`` (op: lt le gt ge) as (low, high) bounds in the canonical form.

    In the int and float domains bounds are inclusive order keys; an empty range comes back as
    ``low.value > high.value``.

    Raises:
        NoMatch: the value is NULL (the comparison is never true).
        Unanswerable: the types do not compare.
    """
    probe = check_probe_type(column, type_name)
    if value is None:
        raise NoMatch(value)
    upper = op in ("lt", "le")
    inclusive = op in ("le", "ge")
    if column.kind in ("string", "binary"):
        canon = probe_value(column, type_name, value)
        assert isinstance(canon, bytes)
        side = Bound(canon, inclusive)
        return (None, side) if upper else (side, None)
    if column.kind == "float":
        number = float(probe_number(probe.name, value))
        key = float_key(0.0 if number == 0 else (math.nan if math.isnan(number) else number))
        if not inclusive:
            key = key - 1 if upper else key + 1
        if key < 0 or key > KEY_MAX:  # below the smallest key or above the largest: empty
            return (Bound(1), Bound(0))
        return (None, Bound(key)) if upper else (Bound(key), None)
    if column.kind == "boolean":
        if not isinstance(value, bool):
            raise Unanswerable(value)
        exact = Fraction(int(value))
    else:
        exact = _unscaled(column, Fraction(probe_number(probe.name, value)))
    if upper:
        limit = math.floor(exact) if inclusive else math.ceil(exact) - 1
    else:
        limit = math.ceil(exact) if inclusive else math.floor(exact) + 1
    if column.domain == "bytes":
        side = Bound(wide_bytes(limit))
        return (None, side) if upper else (side, None)
    key = limit + SIGN
    if key < 0 or key > KEY_MAX:
        empty = (key < 0) == upper
        if empty:
            return (Bound(1), Bound(0))
        return (None, None)
    return (None, Bound(key)) if upper else (Bound(key), None)


def canonical_key(domain: str, canon: int | float | bytes) -> int | bytes:
    """A canonical scalar as an order key (int and float domains) or as its bytes."""
    if domain == "float":
        assert isinstance(canon, float)
        return float_key(canon)
    if domain == "int":
        assert isinstance(canon, int)
        return canon + SIGN
    assert isinstance(canon, bytes)
    return canon
