"""sparkext.executors.curves: quantile ranks and Z-order/Hilbert keys, held against oracles.

The oracles are written here independently of the module: a recursive Hilbert curve built from
its textbook definition (four transformed copies of the previous order), the reflected Gray
code (the first-order Hilbert curve in any dimension), a bit-by-bit interleave, and Spark's
documented sort order (nulls first, NaN last, -0.0 == 0.0, strings by unsigned bytes) as
Python sort keys.
"""

from __future__ import annotations

import ast
import datetime as dt
import itertools
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sparkext.errors import ProcedureArgumentError
from sparkext.executors import curves
from sparkext.executors.curves import (
    bits_per_column,
    boundaries,
    curve_key,
    hilbert,
    ranks,
    zorder,
)

# -- curve oracles ---------------------------------------------------------------------------


def grid(k: int, bits: int) -> np.ndarray:
    """Every cell of the k-dimensional grid of side 2**bits, one row per cell."""
    return np.array(list(itertools.product(range(2**bits), repeat=k)), dtype=np.uint64)


def curve_order(curve, k: int, bits: int) -> np.ndarray:
    """The grid's cells in the order of their curve index, after checking it is a bijection."""
    cells = grid(k, bits)
    index = curve([cells[:, j] for j in range(k)], bits)
    assert index.dtype == np.int64
    assert np.array_equal(np.sort(index), np.arange(2 ** (k * bits)))
    return cells[np.argsort(index)].astype(np.int64)


def textbook_hilbert_2d(order: int) -> list[tuple[int, int]]:
    """The 2-D Hilbert curve by its recursive definition, as (x, y) = (column 0, column 1).

    Order 1 visits (0,0) (0,1) (1,1) (1,0). Order n is four copies of order n-1 of side h:
    lower-left transposed, upper-left and upper-right translated, lower-right anti-transposed,
    so that each copy starts next to where the previous one ended.
    """
    if order == 1:
        return [(0, 0), (0, 1), (1, 1), (1, 0)]
    h = 2 ** (order - 1)
    base = textbook_hilbert_2d(order - 1)
    return (
        [(y, x) for x, y in base]
        + [(x, y + h) for x, y in base]
        + [(x + h, y + h) for x, y in base]
        + [(h - 1 - y + h, h - 1 - x) for x, y in base]
    )


def interleave_bit_by_bit(rows: list[list[int]], bits: int) -> int:
    """Morton code of one point: for each bit from the top, column 0's bit first."""
    key = 0
    for bit in reversed(range(bits)):
        for value in rows:
            key = (key << 1) | ((value >> bit) & 1)
    return key


# -- Hilbert ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, bits", [(2, 1), (2, 2), (2, 3), (2, 5), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2)]
)
def test_hilbert_is_a_bijection_whose_steps_are_unit_moves(k, bits):
    cells = curve_order(hilbert, k, bits)
    steps = np.abs(np.diff(cells, axis=0)).sum(axis=1)
    assert np.all(steps == 1)
    assert cells[0].tolist() == [0] * k  # starts at the origin


@pytest.mark.parametrize("k, bits", [(2, 2), (2, 5), (3, 2), (4, 2)])
def test_zorder_is_a_bijection_but_jumps(k, bits):
    cells = curve_order(zorder, k, bits)
    steps = np.abs(np.diff(cells, axis=0)).sum(axis=1)
    assert steps.max() > 1  # what the Hilbert curve avoids


def test_hilbert_first_order_by_hand():
    # The four cells of the 2x2 grid: up, right, down.
    assert hilbert([[0, 0, 1, 1], [0, 1, 1, 0]], bits=1).tolist() == [0, 1, 2, 3]


def test_hilbert_second_order_by_hand():
    expected = [
        (0, 0), (1, 0), (1, 1), (0, 1),
        (0, 2), (0, 3), (1, 3), (1, 2),
        (2, 2), (2, 3), (3, 3), (3, 2),
        (3, 1), (2, 1), (2, 0), (3, 0),
    ]  # fmt: skip
    assert [tuple(cell) for cell in curve_order(hilbert, 2, 2).tolist()] == expected


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6])
def test_hilbert_2d_matches_the_recursive_definition(bits):
    expected = textbook_hilbert_2d(bits)
    assert [tuple(cell) for cell in curve_order(hilbert, 2, bits).tolist()] == expected


@pytest.mark.parametrize("k", range(2, 9))
def test_hilbert_first_order_is_the_reflected_gray_code(k):
    gray = [i ^ (i >> 1) for i in range(2**k)]
    expected = [[(g >> (k - 1 - j)) & 1 for j in range(k)] for g in gray]
    assert curve_order(hilbert, k, 1).tolist() == expected


@pytest.mark.parametrize("k, bits", [(2, 4), (3, 3), (4, 2)])
def test_hilbert_fills_each_aligned_subcube_before_leaving_it(k, bits):
    cells = curve_order(hilbert, k, bits)
    for level in range(1, bits):
        side = 2**level
        for block in cells.reshape(-1, side**k, k):
            assert np.all(block.max(axis=0) - block.min(axis=0) == side - 1)
            assert np.all(block.min(axis=0) % side == 0)


def test_hilbert_uses_the_whole_63_bits():
    for k in range(2, 9):
        bits = 63 // k
        top = np.full(3, 2**bits - 1, dtype=np.uint64)
        zero = np.zeros(3, dtype=np.uint64)
        keys = hilbert([top if j == 0 else zero for j in range(k)], bits)
        assert keys.dtype == np.int64
        # The curve ends next to the origin along column 0: the last index of the grid.
        assert keys.tolist() == [2 ** (k * bits) - 1] * 3


# -- Z-order ---------------------------------------------------------------------------------


@pytest.mark.parametrize("k, bits", [(1, 63), (2, 20), (2, 31), (3, 21), (4, 15), (7, 9), (8, 7)])
def test_zorder_equals_a_bit_by_bit_interleave(k, bits):
    rng = np.random.default_rng(k * 100 + bits)
    columns = [rng.integers(0, 2**bits, size=200, dtype=np.uint64) for _ in range(k)]
    columns[0][:2] = [0, 2**bits - 1]
    for column in columns[1:]:
        column[:2] = [0, 2**bits - 1]
    keys = zorder(columns, bits)
    assert keys.dtype == np.int64
    assert keys.min() >= 0
    expected = [
        interleave_bit_by_bit([int(c[row]) for c in columns], bits) for row in range(len(keys))
    ]
    assert keys.tolist() == expected
    assert keys[1] == 2 ** (k * bits) - 1


def test_zorder_column_0_holds_the_top_bit_of_each_group():
    assert zorder([[1], [0], [0]], bits=1).tolist() == [0b100]
    assert zorder([[0], [0], [1]], bits=1).tolist() == [0b001]
    assert zorder([[0b10], [0b01]], bits=2).tolist() == [0b1001]


def test_curves_reject_ranks_that_do_not_fit():
    with pytest.raises(ValueError, match=r"k \* bits must be 1 to 63"):
        zorder([[0], [0]], bits=32)
    with pytest.raises(ValueError, match=r"ranks must be in \[0, 2\*\*3\)"):
        hilbert([[8], [0]], bits=3)
    with pytest.raises(ValueError, match="same length"):
        zorder([[0, 1], [0]], bits=3)
    with pytest.raises(ValueError, match="hilbert takes 2 to 8 columns, got 9"):
        hilbert([[0]] * 9, bits=7)


def test_bits_per_column_fits_63_bits_and_caps_at_20():
    assert [bits_per_column(k) for k in range(1, 10)] == [20, 20, 20, 15, 12, 10, 9, 7, 7]
    for k in range(1, 64):
        assert 1 <= k * bits_per_column(k) <= 63


# -- ranks: Spark's order as Python sort keys --------------------------------------------------


def spark_order(value, data_type: pa.DataType):
    """Sort key of one value in Spark's ascending order (nulls first)."""
    if value is None:
        return (0,)
    if pa.types.is_floating(data_type):
        return (2,) if math.isnan(value) else (1, value + 0.0)
    if isinstance(value, str):
        return (1, value.encode("utf-8"))
    return (1, value)


def assert_monotone(values: pa.Array, rank: np.ndarray) -> None:
    """Ranks never decrease in Spark's order, and equal values share a rank."""
    keys = [spark_order(v, values.type) for v in values.to_pylist()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ordered = rank[order]
    assert np.all(np.diff(ordered.astype(np.int64)) >= 0)
    for left, right in itertools.pairwise(order):
        if keys[left] == keys[right]:
            assert rank[left] == rank[right], (values[left], values[right])


def with_nulls(array: pa.Array, rng: np.random.Generator) -> pa.Array:
    mask = rng.random(len(array)) < 0.05
    return pa.array(array.to_pylist(), type=array.type, mask=mask)


def random_arrays(rng: np.random.Generator, n: int) -> dict[str, pa.Array]:
    ints = rng.integers(-(2**62), 2**62, n)
    small = rng.integers(-128, 128, n)
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    floats[rng.random(n) < 0.05] = np.nan
    floats[rng.random(n) < 0.05] = -0.0
    floats[rng.random(n) < 0.05] = 0.0
    floats[rng.random(n) < 0.02] = np.inf
    floats[rng.random(n) < 0.02] = -np.inf
    text = [
        rng.choice(["", "a", "é", "z", "user_0000000", "https://example.com/item/"])
        + str(rng.integers(0, 10**6))
        for _ in range(n)
    ]
    raw = [bytes(rng.integers(0, 256, rng.integers(0, 4)).astype(np.uint8)) for _ in range(n)]
    with np.errstate(over="ignore"):  # huge doubles become ±inf in float32, on purpose
        floats32 = floats.astype(np.float32)
    return {
        "int8": pa.array(small, pa.int8()),
        "int16": pa.array(small * 200, pa.int16()),
        "int32": pa.array(small * 10**7, pa.int32()),
        "int64": pa.array(ints, pa.int64()),
        "uint64": pa.array(rng.integers(0, 2**64, n, dtype=np.uint64), pa.uint64()),
        "float64": pa.array(floats, pa.float64()),
        "float32": pa.array(floats32, pa.float32()),
        "bool": pa.array(rng.random(n) < 0.3),
        "decimal128": pa.array([Decimal(int(i)).scaleb(-4) for i in ints], pa.decimal128(30, 4)),
        "decimal256": pa.array([Decimal(int(i)) * 10**40 for i in ints], pa.decimal256(70, 0)),
        "string": pa.array(text, pa.string()),
        "large_string": pa.array(text, pa.large_string()),
        "binary": pa.array(raw, pa.binary()),
        "fixed_size_binary": pa.array([(r + b"\0\0\0")[:3] for r in raw], pa.binary(3)),
        "date32": pa.array(small * 1000, pa.int32()).cast(pa.date32()),
        "timestamp": pa.array(ints // 1000, pa.timestamp("us")),
        "timestamp_tz": pa.array(ints // 1000, pa.timestamp("us", tz="Asia/Shanghai")),
        "timestamp_ns": pa.array(ints, pa.timestamp("ns", tz="UTC")),
    }


@pytest.fixture(scope="module")
def arrays() -> dict[str, pa.Array]:
    return random_arrays(np.random.default_rng(0), 3000)


@pytest.mark.parametrize("name", list(random_arrays(np.random.default_rng(0), 1)))
def test_ranks_are_monotone_in_sparks_order(arrays, name):
    values = with_nulls(arrays[name], np.random.default_rng(1))
    for buckets in (2, 7, 64, 4096):
        bounds = boundaries(values.slice(0, 1000), buckets)
        assert len(bounds) <= buckets - 1
        rank = ranks(values, bounds, bits=10)
        assert rank.dtype == np.uint64
        assert rank.max() < 2**10
        assert_monotone(values, rank)
        assert np.all(rank[values.is_null().to_numpy(zero_copy_only=False)] == 0)


def test_ranks_of_a_slice_equal_the_slice_of_ranks():
    # Arrays from record batches often start at an offset into their buffers.
    rng = np.random.default_rng(3)
    for name, values in random_arrays(rng, 500).items():
        bounds = boundaries(values, 32)
        whole = ranks(values, bounds, bits=8)
        part = values.slice(123, 200)
        assert ranks(part, bounds, bits=8).tolist() == whole[123:323].tolist(), name


def test_ranks_are_the_scaled_bucket_with_nulls_first():
    values = pa.array([None, -5, 0, 1, 2, 3, 9, None])
    bounds = pa.array([0, 2, 3])
    # searchsorted side='right': a value equal to a boundary belongs to the bucket above it.
    assert ranks(values, bounds, bits=4).tolist() == [0, 0, 4, 4, 8, 12, 12, 0]


# -- ranks: the cases a byte-prefix Z-order gets wrong -----------------------------------------


def test_strings_sharing_a_long_prefix_spread_over_the_whole_range():
    bits = 20
    keys = [f"user_{i:010d}" for i in range(1000)]
    assert len({k.encode()[:12] for k in keys}) == 1  # a 12-byte common prefix
    values = pa.array(np.random.default_rng(5).permutation(keys).tolist())
    rank = ranks(values, boundaries(values, 2**bits), bits)
    in_key_order = rank[np.argsort(values.to_numpy(zero_copy_only=False))]
    assert np.all(np.diff(in_key_order.astype(np.int64)) > 0)  # every key its own rank
    assert in_key_order[0] == 0 and in_key_order[-1] == 999 * 2**bits // 1000
    # Uniform over the range: each sixteenth of it holds a sixteenth of the keys.
    counts = np.bincount((rank >> (bits - 4)).astype(np.int64), minlength=16)
    assert counts.min() >= 62 and counts.max() <= 63


def test_urls_from_a_sample_split_rows_evenly():
    rng = np.random.default_rng(6)
    urls = pa.array([f"https://example.com/item/{i}" for i in rng.integers(0, 10**9, 20_000)])
    bounds = boundaries(urls.slice(0, 5000), 64)
    assert len(bounds) == 63
    rank = ranks(urls, bounds, bits=6)  # 64 buckets, one rank each
    counts = np.bincount(rank.astype(np.int64), minlength=64)
    assert counts.min() > 20_000 / 64 * 0.6 and counts.max() < 20_000 / 64 * 1.4
    assert_monotone(urls.slice(0, 2000), rank[:2000])


def test_heavy_skew_keeps_order_and_spreads_the_tail():
    rng = np.random.default_rng(8)
    n = 20_000
    values = np.zeros(n)
    tail = rng.random(n) < 0.01
    values[tail] = rng.lognormal(10, 3, tail.sum())
    array = pa.array(values)
    rank = ranks(array, boundaries(array, 1024), bits=10)
    assert_monotone(array, rank)
    assert np.all(rank[~tail] == 0)  # the zeros are the lowest bucket...
    assert len(np.unique(rank[tail])) > 5  # ...and the tail is not one bucket
    assert rank.max() > 2**10 - 2**10 // 100


def test_negative_floats_signed_zero_infinities_and_nan():
    values = [-math.inf, -1e300, -1.5, -5e-324, -0.0, 0.0, 5e-324, 2.5, math.inf, math.nan]
    # float32 turns -1e300 into -inf and ±5e-324 into ±0.0.
    for data_type, distinct in ((pa.float64(), [0, 1, 2, 3, 4, 6, 7, 8, 9]),
                                (pa.float32(), [0, 2, 4, 7, 8, 9])):  # fmt: skip
        array = pa.array([*values, -math.nan, None], data_type)
        assert len(boundaries(array, 64)) == len(distinct) - 1  # every value but the smallest
        rank = ranks(array, boundaries(array, 64), bits=8).tolist()
        assert rank[4] == rank[5]  # -0.0 == 0.0
        assert rank[9] == rank[10] == max(rank)  # NaN of either sign after +inf
        assert rank[8] < rank[9]
        assert rank[11] == 0  # null first
        in_order = [rank[i] for i in distinct]
        assert in_order == sorted(set(in_order))


def test_timestamps_with_a_zone_rank_by_instant():
    instants = [0, 1_700_000_000_000_000, -86_400_000_000, 1, None]
    shanghai = pa.array(instants, pa.timestamp("us", tz="Asia/Shanghai"))
    bounds_utc = pa.array([0, 1_000_000], pa.timestamp("us", tz="UTC"))
    bounds_ms = pa.array([0, 1_000], pa.timestamp("ms", tz="America/Los_Angeles"))
    expected = ranks(pa.array(instants, pa.int64()), pa.array([0, 1_000_000]), bits=4)
    assert ranks(shanghai, bounds_utc, bits=4).tolist() == expected.tolist() == [5, 10, 0, 5, 0]
    assert ranks(shanghai, bounds_ms, bits=4).tolist() == expected.tolist()
    naive = pa.array([dt.datetime(2024, 1, 1), dt.datetime(1970, 1, 1), None], pa.timestamp("us"))
    assert ranks(naive, boundaries(naive, 4), bits=2).tolist() == [2, 0, 0]


def test_strings_and_binary_order_by_unsigned_bytes():
    text = pa.array(["z", "é", "a", "a\x00", "a\x01", "", "Z"])
    assert boundaries(text, 16).to_pylist() == ["Z", "a", "a\x00", "a\x01", "z", "é"]
    raw = pa.array([b"\x7f", b"\x80", b"\xff", b"\x00", b"", b"\x00\x00"])
    assert boundaries(raw, 16).to_pylist() == [b"\x00", b"\x00\x00", b"\x7f", b"\x80", b"\xff"]
    # Six buckets over 8 ranks: bucket * 8 // 6.
    assert ranks(raw, boundaries(raw, 16), bits=3).tolist() == [4, 5, 6, 1, 0, 2]


def test_decimals_rank_by_value_across_the_sign():
    values = pa.array(
        [Decimal("-1.00"), Decimal("0.01"), Decimal("-0.01"), Decimal("0"), None],
        pa.decimal128(38, 2),
    )
    bounds = boundaries(values, 8)
    assert bounds.to_pylist() == [Decimal("-0.01"), Decimal("0.00"), Decimal("0.01")]
    assert ranks(values, bounds, bits=2).tolist() == [0, 3, 1, 2, 0]
    # A boundary with another precision or scale is cast to the values' type.
    wider = pa.array([Decimal("0")], pa.decimal128(10, 0))
    assert ranks(values, wider, bits=1).tolist() == [0, 1, 0, 1, 0]


def test_dictionary_encoded_strings_rank_like_plain_strings():
    plain = pa.array(["b", None, "a", "c", "b", "user_0000000x", None, "a"])
    bounds = boundaries(plain, 4)
    encoded = plain.dictionary_encode()
    assert ranks(encoded, bounds, bits=4).tolist() == ranks(plain, bounds, bits=4).tolist()
    assert boundaries(encoded, 4).to_pylist() == bounds.to_pylist()
    # A null inside the dictionary, and dictionary bounds.
    odd = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2]), pa.array(["x", None, "a"]))
    assert ranks(odd, bounds.dictionary_encode(), bits=4).tolist() == [12, 0, 0, 0]


def test_booleans_and_dates():
    flags = pa.array([True, False, None, True])
    assert boundaries(flags, 4).to_pylist() == [True]
    assert ranks(flags, boundaries(flags, 4), bits=5).tolist() == [16, 0, 0, 16]
    days = pa.array([dt.date(2024, 5, 1), dt.date(1969, 12, 31), None, dt.date(2000, 1, 1)])
    assert ranks(days, boundaries(days, 4), bits=2).tolist() == [2, 0, 0, 1]


def test_chunked_arrays_and_large_strings_are_accepted():
    chunked = pa.chunked_array([["b", "a"], ["c", None]], pa.large_string())
    bounds = boundaries(chunked, 4)  # large_string bounds for string values below
    assert ranks(pa.array(["b", "a", "c", None]), bounds, bits=2).tolist() == [1, 0, 2, 0]


def test_the_portable_binary_search_agrees_with_pyarrows(arrays, monkeypatch):
    rng = np.random.default_rng(9)
    for name in ("string", "large_string", "binary"):
        values = with_nulls(arrays[name], rng)
        for buckets in (1, 2, 3, 100, 5000):
            bounds = boundaries(values.slice(0, 1500), buckets)
            monkeypatch.setattr(curves, "_ARROW_SEARCH_SORTED", True)
            fast = ranks(values, bounds, bits=12)
            monkeypatch.setattr(curves, "_ARROW_SEARCH_SORTED", False)
            assert ranks(values, bounds, bits=12).tolist() == fast.tolist(), (name, buckets)


# -- boundaries --------------------------------------------------------------------------------


def test_boundaries_are_quantiles_of_the_non_null_sample():
    sample = pa.array(list(range(100)) + [None] * 50)
    assert boundaries(sample, 4).to_pylist() == [25, 50, 75]
    assert boundaries(sample, 1).to_pylist() == []
    assert boundaries(pa.array([None, None], pa.int64()), 4).to_pylist() == []
    assert boundaries(pa.array([7, 7, 7]), 4).to_pylist() == []


def test_boundaries_give_every_value_of_a_small_domain_its_own_bucket():
    # 'rare' is far below 1/buckets of the sample, yet it is not merged into 'common'.
    sample = pa.array(["common"] * 990 + ["rare"] * 2 + ["mid"] * 8)
    assert boundaries(sample, 3).to_pylist() == ["mid", "rare"]


def test_boundaries_never_repeat_a_value_of_a_skewed_sample():
    sample = pa.array([0] * 990 + list(range(1, 11)))
    bounds = boundaries(sample, 100)
    assert bounds.to_pylist() == sorted(set(bounds.to_pylist()))
    assert 0 not in bounds.to_pylist()


# -- curve_key ---------------------------------------------------------------------------------


def files_hit(order: np.ndarray, column: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """Mean number of 100 equal files, rows taken in ``order``, whose [min, max] meets a range."""
    files = column[order].reshape(100, -1)
    lo, hi = files.min(axis=1), files.max(axis=1)
    hits = (lo[None, :] <= high[:, None]) & (hi[None, :] >= low[:, None])
    return float(hits.sum(axis=1).mean())


def test_curves_cluster_two_columns_far_better_than_a_linear_sort():
    rng = np.random.default_rng(42)
    a, b = rng.random(100_000), rng.random(100_000)
    columns = [pa.array(a), pa.array(b)]
    bounds = [boundaries(column.slice(0, 10_000), 4096) for column in columns]
    low = rng.random(500) * 0.99
    points = rng.random(500)

    linear = np.argsort(a, kind="stable")
    linear_b = files_hit(linear, b, low, low + 0.01)
    assert linear_b > 95  # sorting by a spreads b over every file
    hit = {}
    for curve in ("zorder", "hilbert"):
        order = np.argsort(curve_key(columns, bounds, curve), kind="stable")
        hit[curve] = (files_hit(order, b, low, low + 0.01), files_hit(order, a, low, low + 0.01))
        assert hit[curve][0] * 3 <= linear_b, (curve, hit[curve])
        assert files_hit(order, b, points, points) * 3 <= files_hit(linear, b, points, points)
    assert sum(hit["hilbert"]) < sum(hit["zorder"])  # no long jumps, tighter files


def test_curve_key_ranks_and_combines_mixed_types(arrays):
    rng = np.random.default_rng(11)
    columns = [
        arrays["string"].dictionary_encode(),
        arrays["timestamp_tz"],
        arrays["float64"],
        with_nulls(arrays["decimal128"], rng),
    ]
    bounds = [boundaries(column.slice(0, 500), 256) for column in columns]
    bits = bits_per_column(4)
    rank = [ranks(column, bound, bits) for column, bound in zip(columns, bounds, strict=True)]
    assert curve_key(columns, bounds, "zorder").tolist() == zorder(rank, bits).tolist()
    keys = curve_key(columns, bounds, "hilbert")
    assert keys.dtype == np.int64 and keys.min() >= 0
    assert keys.tolist() == hilbert(rank, bits).tolist()


# -- errors ------------------------------------------------------------------------------------


def test_an_unknown_curve_names_the_allowed_ones():
    columns = [pa.array([1]), pa.array([2])]
    with pytest.raises(ProcedureArgumentError) as error:
        curve_key(columns, columns, "hilbret")
    assert str(error.value) == (
        "Unknown curve 'hilbret' (did you mean 'hilbert'?): use 'zorder' or 'hilbert'."
    )
    assert isinstance(error.value, ValueError)
    with pytest.raises(ProcedureArgumentError) as error:
        curve_key(columns, columns, "linear")
    assert str(error.value) == "Unknown curve 'linear': use 'zorder' or 'hilbert'."


def test_curve_keys_take_2_to_8_columns():
    with pytest.raises(ProcedureArgumentError) as error:
        curve_key([pa.array([1])], [pa.array([1])], "zorder")
    assert str(error.value) == (
        "A zorder key clusters 2 to 8 columns, got 1: sort by that column instead."
    )
    nine = [pa.array([1])] * 9
    with pytest.raises(ProcedureArgumentError) as error:
        curve_key(nine, nine, "hilbert")
    assert str(error.value) == (
        "A hilbert key clusters 2 to 8 columns, got 9: cluster by fewer columns."
    )
    with pytest.raises(ProcedureArgumentError) as error:
        curve_key(nine[:2], nine[:3], "hilbert")
    assert str(error.value) == "Got 3 boundary arrays for 2 columns: give one per column."


def test_a_column_type_without_an_order_is_refused():
    lists = pa.array([[1], [2]])
    with pytest.raises(ProcedureArgumentError) as error:
        boundaries(lists, 4)
    assert str(error.value) == (
        "Cannot cluster by a column of type list<item: int64>: use a number, decimal, boolean, "
        "date, timestamp, string or binary column."
    )


def test_bad_bounds_and_bits_are_refused():
    values = pa.array([1, 2, 3])
    with pytest.raises(ValueError, match="sorted and distinct"):
        ranks(values, pa.array([2, 1]), bits=4)
    with pytest.raises(ValueError, match="sorted and distinct"):
        ranks(pa.array(["a"]), pa.array(["b", "b"]), bits=4)
    with pytest.raises(ValueError, match="must not contain nulls"):
        ranks(values, pa.array([1, None]), bits=4)
    with pytest.raises(ValueError) as error:
        ranks(values, pa.array(["1"]), bits=4)
    assert str(error.value) == (
        "bounds of type string cannot rank values of type int64; "
        "compute them from a sample of the same column."
    )
    with pytest.raises(ValueError, match="bits must be between 1 and 32, got 0"):
        ranks(values, pa.array([1]), bits=0)
    with pytest.raises(ValueError, match="buckets must be at least 1, got 0"):
        boundaries(values, 0)


def test_the_module_imports_no_spark():
    tree = ast.parse(Path(curves.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not imported & {"pyspark", "py4j"}
