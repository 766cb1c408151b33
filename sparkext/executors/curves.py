"""Space-filling-curve keys for clustering rows by several columns (Z-order and Hilbert).

This is the pure, vectorised core of clustering a table by k columns: every row gets one
non-negative int64 key, and sorting by that key keeps rows that are close in all k columns
close in the output, so each written file covers a small box of the k-dimensional space and
min/max statistics prune files for predicates on any of the columns.

The work is split the way a Spark job runs it:

1. On the driver, :func:`boundaries` turns a small sample of each column into sorted quantile
   boundaries.
2. On the executors, batch by batch (``mapInArrow``), :func:`curve_key` maps every value to
   its bucket among the boundaries (:func:`ranks`), scales the bucket to ``bits`` bits
   (:func:`bits_per_column`), and combines the k ranks into one key with :func:`zorder` or
   :func:`hilbert`.

Ranks come from quantiles of the data, not from the values' bytes, so every column spreads
over its whole rank range whatever its type or skew. That is the point for strings that share
a long prefix ('user_000000123', 'https://example.com/item/...'): a Z-order over the first
eight bytes of such strings, as Iceberg's ``zorder`` does, sees one value and clusters nothing.

Orders match Spark's ascending sort: nulls first (a null's rank is 0, shared with the lowest
bucket), NaN after every other float including +inf, -0.0 equal to 0.0, strings and binary by
unsigned bytes (for UTF-8 the same as by code points).

No pyspark here; numpy and pyarrow only, and no loop over rows.

>>> import numpy as np
>>> import pyarrow as pa
>>> city = pa.array(["Oslo", "Lima", "Rome", "Kyiv", "Oslo", "Lima", None])
>>> year = pa.array([2001, 1999, 2024, 2010, 1999, 2024, 2001])
>>> bounds = [boundaries(city, 4), boundaries(year, 4)]
>>> bounds[0].to_pylist(), bounds[1].to_pylist()
(['Lima', 'Oslo', 'Rome'], [2001, 2010, 2024])
>>> key = curve_key([city, year], bounds, "hilbert")
>>> rows = [(city[i].as_py(), year[i].as_py()) for i in np.argsort(key, kind="stable")]
>>> rows  # doctest: +NORMALIZE_WHITESPACE
[('Lima', 1999), (None, 2001), ('Kyiv', 2010), ('Lima', 2024), ('Rome', 2024),
 ('Oslo', 2001), ('Oslo', 1999)]

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from sparkext.errors import ProcedureArgumentError, did_you_mean

__all__ = [
    "CURVES",
    "MAX_BITS_PER_COLUMN",
    "MAX_COLUMNS",
    "MIN_COLUMNS",
    "bits_per_column",
    "boundaries",
    "curve_key",
    "hilbert",
    "ranks",
    "zorder",
]

Ranks = npt.NDArray[np.uint64]
Keys = npt.NDArray[np.int64]
ArrayLike: TypeAlias = pa.Array | pa.ChunkedArray

MIN_COLUMNS = 2
MAX_COLUMNS = 8
MAX_BITS_PER_COLUMN = 20
"""2**20 buckets per column is already finer than a sample-based quantile can resolve."""

_KEY_BITS = 63  # the key must stay a non-negative Spark LongType
_MAX_RANK_BITS = 32  # bucket * 2**bits must not overflow uint64 for any realistic bucket count

# Recent pyarrow (26 here; apache/arrow#49679) searches strings in C++; older ones use ours.
_ARROW_SEARCH_SORTED = hasattr(pc, "search_sorted")


# -- ranks ---------------------------------------------------------------------------------


def boundaries(sample: ArrayLike, buckets: int) -> pa.Array:
    """Return sorted, distinct quantile boundaries that cut ``sample`` into ``buckets`` buckets.

    The result has at most ``buckets - 1`` values of the sample's type (dictionaries decoded),
    sorted in Spark's order; nulls in the sample are ignored. A value ``v`` falls in bucket
    ``i`` when exactly ``i`` boundaries are ``<= v`` (see :func:`ranks`). When the sample has
    at most ``buckets`` distinct values, every distinct value gets a bucket of its own, so a
    rare value of a low-cardinality column is never merged into its neighbour. The sample's
    smallest value is never a boundary: it would leave bucket 0 empty.

    Args:
        sample: a sample of one column, small enough for the driver.
        buckets: how many buckets to aim for; more than ``2**bits`` gains nothing in
            :func:`ranks`.

    Raises:
        ValueError: ``buckets`` is below 1.
        ProcedureArgumentError: the column's type cannot be ordered (see :func:`ranks`).

    >>> boundaries(pa.array([5, 1, None, 3, 3, 9, 7, 3, 1, 2]), 3).to_pylist()
    [3, 5]
    >>> boundaries(pa.array([0.0, 0.0, 0.0, 0.0, float("nan"), 1.5]), 16).to_pylist()
    [1.5, nan]
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}.")
    values = _plain(sample)
    if pat.is_dictionary(values.type):
        values = values.dictionary_decode()
    values = values.drop_null()
    kind = _kind(values.type)
    if len(values) == 0 or buckets == 1:
        return values.slice(0, 0)

    # Sort, then mark where each run of equal values starts.
    if kind == "fixed":
        keys = _fixed_key(values)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts_run = np.empty(len(keys), dtype=bool)
        starts_run[0] = True
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=starts_run[1:])
    else:
        order = pc.sort_indices(values).to_numpy()
        ordered = values.take(order)
        starts_run = np.concatenate(
            [[True], pc.not_equal(ordered[1:], ordered[:-1]).to_numpy(zero_copy_only=False)]
        )
    run_starts = np.flatnonzero(starts_run)
    if len(run_starts) <= buckets:
        picked = run_starts[1:]
    else:
        n = len(order)
        quantiles = np.arange(1, buckets, dtype=np.int64) * n // buckets
        run_of = np.cumsum(starts_run) - 1  # run number of every sorted position
        runs = np.unique(run_of[quantiles])
        picked = run_starts[runs[runs > 0]]
    return values.take(order[picked])


def ranks(values: ArrayLike, bounds: ArrayLike, bits: int) -> Ranks:
    """Return each value's quantile bucket among ``bounds``, scaled to ``[0, 2**bits)``.

    The bucket of ``v`` is the number of boundaries ``<= v`` (a ``searchsorted`` with
    ``side='right'``), ``0 .. len(bounds)``; it is scaled to ``bucket * 2**bits //
    (len(bounds) + 1)`` so that a column with few buckets still spreads over the whole range,
    and its top bits, the ones a curve key sorts on first, still tell its buckets apart.
    ``value_a < value_b`` implies ``rank_a <= rank_b``, in Spark's order:

    - nulls rank 0 (nulls first; they share 0 with the lowest bucket),
    - floats: NaN after +inf, -0.0 equal to 0.0,
    - strings and binary: by unsigned bytes, the whole value (no prefix truncation),
    - decimals by value, booleans false < true, dates and times as numbers,
      timestamps by instant (the time zone is only a label).

    Supported: integers, floats, decimals, booleans, dates, times, timestamps, durations,
    string and binary (plain, large, view and fixed-size), and dictionaries of any of them
    (only the dictionary is searched).

    Args:
        values: one batch of a column.
        bounds: that column's boundaries from :func:`boundaries`; cast to ``values``' type
            when it differs (string vs large_string, a timestamp unit or zone).
        bits: rank width, 1 to 32.

    Raises:
        ValueError: ``bits`` is out of range, or ``bounds`` holds nulls or is not sorted and
            distinct.
        ProcedureArgumentError: the column's type cannot be ordered.

    >>> ranks(pa.array([None, -1, 3, 4, 100]), pa.array([0, 4]), bits=3).tolist()
    [0, 0, 2, 5, 5]
    """
    if not 1 <= bits <= _MAX_RANK_BITS:
        raise ValueError(f"bits must be between 1 and {_MAX_RANK_BITS}, got {bits}.")
    values = _plain(values)
    bounds = _plain(bounds)
    if pat.is_dictionary(bounds.type):
        bounds = bounds.dictionary_decode()

    if pat.is_dictionary(values.type):
        # Search the (small) dictionary once; rows just look their entry up.
        per_entry = ranks(values.dictionary, bounds, bits)
        indices = values.indices.fill_null(0).to_numpy(zero_copy_only=False)
        out = per_entry[indices]
        return _nulls_first(out, values)

    kind = _kind(values.type)
    if bounds.type != values.type:
        if _family(bounds.type) != _family(values.type):
            raise ValueError(
                f"bounds of type {bounds.type} cannot rank values of type {values.type}; "
                "compute them from a sample of the same column."
            )
        bounds = bounds.cast(values.type)
    if bounds.null_count:
        raise ValueError("bounds must not contain nulls; compute them with boundaries().")
    if kind == "fixed":
        bound_keys = _fixed_key(bounds)
        if np.any(bound_keys[1:] <= bound_keys[:-1]):
            raise ValueError("bounds must be sorted and distinct; compute them with boundaries().")
        bucket = np.searchsorted(bound_keys, _fixed_key(values), side="right")
    else:
        if len(bounds) > 1 and not pc.all(pc.less(bounds[:-1], bounds[1:])).as_py():
            raise ValueError("bounds must be sorted and distinct; compute them with boundaries().")
        bucket = _search_bytes(bounds, values)
    out = bucket.astype(np.uint64) * np.uint64(1 << bits) // np.uint64(len(bounds) + 1)
    return _nulls_first(out, values)


def _plain(array: ArrayLike) -> pa.Array:
    """One contiguous Array; view types become their large variants (sortable by pyarrow)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not isinstance(array, pa.Array):
        raise TypeError(f"expected a pyarrow Array, got {type(array).__name__}.")
    if pat.is_string_view(array.type):
        return array.cast(pa.large_string())
    if pat.is_binary_view(array.type):
        return array.cast(pa.large_binary())
    return array


def _kind(data_type: pa.DataType) -> str:
    """'fixed' for types searched as numpy keys, 'bytes' for variable-width ones."""
    if (
        pat.is_integer(data_type)
        or pat.is_floating(data_type)
        or pat.is_boolean(data_type)
        or pat.is_decimal(data_type)
        or pat.is_fixed_size_binary(data_type)
        or (pat.is_temporal(data_type) and not pat.is_interval(data_type))
    ):
        return "fixed"
    if pat.is_string(data_type) or pat.is_large_string(data_type):
        return "bytes"
    if pat.is_binary(data_type) or pat.is_large_binary(data_type):
        return "bytes"
    raise ProcedureArgumentError(
        f"Cannot cluster by a column of type {data_type}: use a number, decimal, boolean, "
        "date, timestamp, string or binary column."
    )


_FAMILIES: tuple[tuple[str, Callable[[pa.DataType], bool]], ...] = (
    ("string", lambda t: pat.is_string(t) or pat.is_large_string(t)),
    ("binary", lambda t: pat.is_binary(t) or pat.is_large_binary(t)),
    ("integer", pat.is_integer),
    ("floating", pat.is_floating),
    ("decimal", pat.is_decimal),
    ("boolean", pat.is_boolean),
    ("date", pat.is_date),
    ("time", pat.is_time),
    ("timestamp", pat.is_timestamp),
    ("duration", pat.is_duration),
    ("fixed_size_binary", pat.is_fixed_size_binary),
)


def _family(data_type: pa.DataType) -> str:
    """Types whose values a cast carries over without changing their order."""
    return next((name for name, test in _FAMILIES if test(data_type)), str(data_type))


def _fixed_key(array: pa.Array) -> np.ndarray:
    """A numpy array whose natural (numpy) order is Spark's order of ``array``'s values.

    Values in null slots are arbitrary; callers mask them.
    """
    data_type = array.type
    n, offset = len(array), array.offset
    if pat.is_boolean(data_type):
        filled = array.fill_null(False).to_numpy(zero_copy_only=False)
        return np.asarray(filled, dtype=np.uint8)
    if n == 0 or array.buffers()[1] is None:
        return np.zeros(n, dtype=np.int64)
    buffer = array.buffers()[1]
    if pat.is_decimal(data_type) or pat.is_fixed_size_binary(data_type):
        # Fixed-width bytes compare as numpy 'S' items (memcmp over equal widths).
        width = data_type.byte_width
        raw = np.frombuffer(buffer, dtype=np.uint8, count=(offset + n) * width)
        rows = raw.reshape(-1, width)[offset:]
        if pat.is_decimal(data_type):
            # Little-endian two's complement -> big-endian offset binary: byte order = value order.
            rows = rows[:, ::-1].copy()
            rows[:, 0] ^= 0x80
        else:
            rows = np.ascontiguousarray(rows)
        return rows.view(f"S{width}").reshape(n)
    if pat.is_floating(data_type) or pat.is_integer(data_type):
        dtype = np.dtype(data_type.to_pandas_dtype())
    else:  # dates, times, timestamps and durations: integers since an epoch, in one unit
        dtype = np.dtype(f"int{data_type.bit_width}")
    numbers = np.frombuffer(buffer, dtype=dtype, count=offset + n)[offset:]
    return _float_key(numbers) if pat.is_floating(data_type) else numbers


def _float_key(floats: np.ndarray) -> np.ndarray:
    """Unsigned integers ordered as Spark orders floats: -0.0 == 0.0, NaN last, NaN == NaN."""
    normal = floats.copy()
    normal[np.isnan(normal)] = np.nan  # one positive quiet NaN, above +inf once keyed
    normal += 0  # -0.0 + 0 is +0.0
    unsigned = normal.view(f"uint{normal.dtype.itemsize * 8}")
    sign = unsigned.dtype.type(1) << unsigned.dtype.type(normal.dtype.itemsize * 8 - 1)
    # Negative floats order backwards by bits: flip all; positive ones go above them.
    return np.where(unsigned & sign, ~unsigned, unsigned | sign)


def _search_bytes(bounds: pa.Array, values: pa.Array) -> np.ndarray:
    """``searchsorted(bounds, values, side='right')`` for string/binary arrays, in C++."""
    if _ARROW_SEARCH_SORTED:
        found = pc.search_sorted(bounds, values, side="right")
        return found.fill_null(0).to_numpy(zero_copy_only=False)
    return _binary_search(bounds, values)


def _binary_search(bounds: pa.Array, values: pa.Array) -> np.ndarray:
    """The portable fallback: one vectorised comparison per bit of ``len(bounds)``.

    Every row's answer is built from the top bit down: add ``step`` while the bound at
    ``answer + step`` is still ``<= value``; pyarrow compares all rows at once.
    """
    count = len(bounds)
    answer = np.zeros(len(values), dtype=np.int64)
    step = 1 << max(count.bit_length() - 1, 0) if count else 0
    while step:
        candidate = answer + step
        probe = bounds.take(np.minimum(candidate, count) - 1)
        below = pc.less_equal(probe, values).fill_null(False).to_numpy(zero_copy_only=False)
        answer = np.where(below & (candidate <= count), candidate, answer)
        step >>= 1
    return answer


def _nulls_first(out: np.ndarray, values: pa.Array) -> Ranks:
    if values.null_count:
        out[values.is_null().to_numpy(zero_copy_only=False)] = 0
    return out.astype(np.uint64, copy=False)


# -- curves --------------------------------------------------------------------------------


def bits_per_column(k: int) -> int:
    """Return the rank width each of ``k`` columns gets in a curve key: ``min(20, 63 // k)``.

    ``63 // k`` keeps the interleaved key within a non-negative int64 (Spark's LongType). The
    cap of 20 bits (about a million buckets per column) is finer than any sample-based
    quantile can resolve and than the boxes a table's files can cover, so more bits would
    only lengthen the Hilbert loop.

    >>> [bits_per_column(k) for k in range(2, 9)]
    [20, 20, 15, 12, 10, 9, 7]
    """
    if not 1 <= k <= _KEY_BITS:
        raise ValueError(f"k must be between 1 and {_KEY_BITS}, got {k}.")
    return min(MAX_BITS_PER_COLUMN, _KEY_BITS // k)


def zorder(ranks: Sequence[npt.ArrayLike], bits: int) -> Keys:
    """Interleave the bits of k ``bits``-bit ranks into one int64 key (Morton order).

    Bit ``i`` of column ``j`` lands at bit ``i * k + (k - 1 - j)``: the key's top group holds
    every column's top bit, column 0 first. ``k * bits`` must be at most 63.

    >>> zorder([[0b11, 0b00], [0b01, 0b11]], bits=2).tolist()  # 1011 and 0101
    [11, 5]
    """
    columns = _rank_columns(ranks, bits)
    return _interleave(columns, bits)


def hilbert(ranks: Sequence[npt.ArrayLike], bits: int) -> Keys:
    """Return the Hilbert index of k-dimensional points (2 <= k <= 8, ``k * bits <= 63``).

    Consecutive indices are neighbouring cells (L1 distance 1), which Z-order lacks: its jumps
    make some files span large boxes. Skilling's method ("Programming the Hilbert curve", AIP
    Conf. Proc. 707, 2004): turn the coordinates into the index's "transpose" (k numbers whose
    interleaved bits are the index), then interleave as :func:`zorder` does. The transform
    walks the bits from the top, undoing the rotation/reflection of each sub-cube with
    whole-array operations, then Gray-encodes.

    >>> hilbert([[0, 0, 1, 1], [0, 1, 1, 0]], bits=1).tolist()  # the 2x2 cells in curve order
    [0, 1, 2, 3]
    """
    columns = _rank_columns(ranks, bits)
    k = len(columns)
    if not MIN_COLUMNS <= k <= MAX_COLUMNS:
        raise ValueError(f"hilbert takes {MIN_COLUMNS} to {MAX_COLUMNS} columns, got {k}.")
    # bits <= 31 here, so uint32 halves the memory traffic of the loop below.
    x = [column.astype(np.uint32) for column in columns]
    one = np.uint32(1)
    scratch = np.empty_like(x[0])
    swap = np.empty_like(x[0])
    for level in range(bits - 1, 0, -1):
        low = np.uint32((1 << level) - 1)  # the bits below this level
        for i in range(k):
            # Where coordinate i has this level's bit, invert the low bits of coordinate 0;
            # elsewhere exchange the low bits of coordinates 0 and i.
            np.right_shift(x[i], np.uint32(level), out=scratch)
            np.bitwise_and(scratch, one, out=scratch)
            np.negative(scratch, out=scratch)  # all ones where the bit is set
            if i == 0:
                np.bitwise_and(scratch, low, out=scratch)
                np.bitwise_xor(x[0], scratch, out=x[0])
                continue
            np.bitwise_xor(x[0], x[i], out=swap)
            np.bitwise_and(swap, low, out=swap)
            np.bitwise_and(swap, ~scratch, out=swap)  # exchange only where not inverting
            np.bitwise_and(scratch, low, out=scratch)
            np.bitwise_or(scratch, swap, out=scratch)
            np.bitwise_xor(x[0], scratch, out=x[0])
            np.bitwise_xor(x[i], swap, out=x[i])
    # Gray encode.
    for i in range(1, k):
        np.bitwise_xor(x[i], x[i - 1], out=x[i])
    # Bit b of the correction is the parity of the last coordinate's bits above b.
    correction = x[-1] >> one
    shift = 1
    while shift < bits:
        correction ^= correction >> np.uint32(shift)
        shift <<= 1
    for column in x:
        np.bitwise_xor(column, correction, out=column)
    return _interleave([column.astype(np.uint64) for column in x], bits)


def _rank_columns(ranks: Sequence[npt.ArrayLike], bits: int) -> list[Ranks]:
    """Validate k rank arrays of ``bits`` bits each and return them as uint64."""
    k = len(ranks)
    if k < 1:
        raise ValueError("at least one rank column is needed.")
    if bits < 1 or k * bits > _KEY_BITS:
        raise ValueError(
            f"{k} columns of {bits} bits do not fit an int64 key: k * bits must be 1 to 63."
        )
    columns = []
    for column in ranks:
        array = np.asarray(column)
        if array.dtype.kind not in "iu":
            raise ValueError(f"ranks must be integers, got dtype {array.dtype}.")
        if array.size and (array.min() < 0 or array.max() >> bits):
            raise ValueError(f"ranks must be in [0, 2**{bits}).")
        columns.append(array.astype(np.uint64, copy=False).reshape(-1))
    if len({len(column) for column in columns}) > 1:
        raise ValueError("rank columns must all have the same length.")
    return columns


def _interleave(columns: list[Ranks], bits: int) -> Keys:
    k = len(columns)
    table = _spread_table(k)
    key = np.zeros(len(columns[0]), dtype=np.uint64)
    for j, column in enumerate(columns):
        for byte in range((bits + 7) // 8):
            chunk = (column >> np.uint64(8 * byte)) & np.uint64(0xFF)
            spread = table[chunk] << np.uint64(8 * byte * k + (k - 1 - j))
            np.bitwise_or(key, spread, out=key)
    return key.view(np.int64)


_SPREAD_TABLES: dict[int, np.ndarray] = {}


def _spread_table(k: int) -> np.ndarray:
    """For every byte value, the byte's bits moved from position ``i`` to ``i * k``."""
    if k not in _SPREAD_TABLES:
        byte = np.arange(256, dtype=np.uint64)
        table = np.zeros(256, dtype=np.uint64)
        for i in range(8):
            if i * k < 64:
                table |= ((byte >> np.uint64(i)) & np.uint64(1)) << np.uint64(i * k)
        _SPREAD_TABLES[k] = table
    return _SPREAD_TABLES[k]


# -- one key per row -----------------------------------------------------------------------

CURVES: dict[str, Callable[[Sequence[npt.ArrayLike], int], Keys]] = {
    "zorder": zorder,
    "hilbert": hilbert,
}


def curve_key(columns: Sequence[ArrayLike], bounds: Sequence[ArrayLike], curve: str) -> Keys:
    """Return one sortable non-negative int64 key per row for clustering by ``columns``.

    Each column is ranked against its boundaries (:func:`ranks`, nulls first) with
    :func:`bits_per_column` bits, and the ranks are combined along ``curve``: ``'zorder'``
    (bit interleaving; cheaper) or ``'hilbert'`` (no long jumps, so tighter files). Sorting
    rows by the key (a Spark LongType) clusters them.

    Args:
        columns: 2 to 8 arrays of one batch, all of the same length.
        bounds: each column's boundaries from :func:`boundaries`, in the same order.
        curve: ``'zorder'`` or ``'hilbert'``.

    Raises:
        ProcedureArgumentError: an unknown curve, fewer than 2 or more than 8 columns, a type
            that cannot be ordered, or a different number of bounds than columns.
    """
    if curve not in CURVES:
        raise ProcedureArgumentError(
            f"Unknown curve '{curve}'{did_you_mean(str(curve), CURVES)}: use 'zorder' or 'hilbert'."
        )
    k = len(columns)
    if not MIN_COLUMNS <= k <= MAX_COLUMNS:
        hint = "sort by that column instead" if k == 1 else "cluster by fewer columns"
        raise ProcedureArgumentError(
            f"A {curve} key clusters {MIN_COLUMNS} to {MAX_COLUMNS} columns, got {k}: {hint}."
        )
    if len(bounds) != k:
        raise ProcedureArgumentError(
            f"Got {len(bounds)} boundary arrays for {k} columns: give one per column."
        )
    bits = bits_per_column(k)
    return CURVES[curve]([ranks(c, b, bits) for c, b in zip(columns, bounds, strict=True)], bits)
