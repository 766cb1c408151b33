"""One data file's index entry: built from the column's Arrow values, and read back.

An entry is little-endian bytes: a format byte (2), a flags byte (1 = the file holds a NULL,
2 = it holds a non-null value, 4 = too many distinct values for a bitmap: the entry answers
only NULL questions, 8 = the bloom filter was capped at ``max_bytes``), then by type:

- bloom_filter, token_bloom_filter, ngram_bloom_filter: ``u8 k, u32 distinct, u32 nbytes``,
  the bitset (``nbytes`` bytes, a multiple of 8: :mod:`.hashing` says how it is sized and probed);
- bloom_range_filter: ``u8 k, u64 min_key, u64 max_key, u32 distinct, u32 blocks, u32 nbytes``,
  the bitset;
- bitmap, token_bitmap, ngram_bitmap: ``u32 count``, then (unless flag 4) the distinct values:
  ``count`` int64 or float64 (int and float domains, sorted by order key), or ``count`` u32
  lengths then the bytes (bytes domain, tokens in UTF-8, n-grams in UTF-32LE).

Format 1 (power-of-two bitsets probed by a mask) is refused: :func:`parse_entry` raises, so a
blob holding such an entry does not decode and its queries read every file until it is rebuilt.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkext.planning.skipping import hashing, spec, text
from sparkext.planning.skipping.spec import IndexSpec
from sparkext.planning.skipping.values import (
    Canonical,
    ColumnType,
    canonical_values,
    column_type,
    distinct,
    order_keys,
)

FORMAT = 2  # 2: bitsets in size classes of 64-bit words, probed by multiply-shift
HAS_NULL = 1
HAS_NON_NULL = 2
OVERFLOW = 4
CAPPED = 8

_HEAD = struct.Struct("<BB")
_BLOOM = struct.Struct("<BII")
_RANGE = struct.Struct("<BQQIII")
_SET = struct.Struct("<I")


def build_entry(
    index: IndexSpec, column_type_name: str, values: pa.Array | pa.ChunkedArray | None
) -> bytes:
    """The entry of one data file: ``values`` are the column's values in that file as pyarrow
    reads them (``None``: the file has no such column, so every row reads NULL).

    >>> entry = build_entry(IndexSpec("ix", "bitmap", "c", {"max_distinct": "8"}), "int",
    ...                     pa.array([3, None, 3, 1]))
    >>> parse_entry(entry, "bitmap", "int").values
    array([1, 3])
    """
    column = column_type(column_type_name)
    canon = canonical_values(column, values)
    flags = (HAS_NULL if canon.has_null else 0) | (HAS_NON_NULL if canon.has_non_null else 0)
    kind = index.type
    if kind == spec.BLOOM_FILTER:
        unique = distinct(canon)
        return _bloom(index, flags, value_hashes(unique))
    if kind == spec.BITMAP:
        unique = distinct(canon)
        return _set(flags, unique.domain, unique.values, int(index.option(spec.MAX_DISTINCT)))
    if kind == spec.BLOOM_RANGE_FILTER:
        return _range(index, flags, distinct(canon))
    unique_texts = pc.unique(canon.values)
    case_sensitive = index.option(spec.CASE_SENSITIVE) == "true"
    if kind in (spec.TOKEN_BLOOM_FILTER, spec.TOKEN_BITMAP):
        words = text.index_tokens_of(unique_texts, case_sensitive)
    else:
        words = text.index_ngrams_of(unique_texts, int(index.option(spec.N)), case_sensitive)
    if kind in (spec.TOKEN_BLOOM_FILTER, spec.NGRAM_BLOOM_FILTER):
        return _bloom(index, flags, hashing.hash_binary(words))
    return _set(flags, "bytes", words, int(index.option(spec.MAX_DISTINCT)))


def value_hashes(canon: Canonical) -> np.ndarray:
    """The hashes of canonical values."""
    if canon.domain == "bytes":
        return hashing.hash_binary(canon.values)
    return hashing.hash_words(canon.values.view(np.uint64))


def _bloom(index: IndexSpec, flags: int, hashes: np.ndarray) -> bytes:
    hashes = np.unique(hashes)
    k, nbytes, flags = _sized(index, flags, len(hashes))
    bits = hashing.bloom_build(hashes, k, nbytes)
    return _HEAD.pack(FORMAT, flags) + _BLOOM.pack(k, len(hashes), nbytes) + bits


def _sized(index: IndexSpec, flags: int, distinct: int) -> tuple[int, int, int]:
    """(k, nbytes, flags) of a bloom filter of ``distinct`` values (:mod:`.hashing`)."""
    fpp = float(index.option(spec.FPP))
    k = hashing.bloom_k(fpp)
    nbytes = hashing.bloom_bytes(distinct, fpp, int(index.option(spec.MAX_BYTES)))
    if nbytes and hashing.bloom_bytes(distinct, fpp, spec.MAX_BLOOM_BYTES << 10) > nbytes:
        flags |= CAPPED
        k = hashing.capped_k(distinct, nbytes, k)
    return k, nbytes, flags


def levels(step: int) -> int:
    """How many levels a range tree of ``step`` bits per level has."""
    return -(-64 // step)


def range_blocks(keys: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (level, prefix) blocks of order keys, for every level."""
    all_levels, all_prefixes = [], []
    for level in range(levels(step)):
        prefixes = np.unique(keys >> np.uint64(level * step))
        all_levels.append(np.full(len(prefixes), level, np.uint64))
        all_prefixes.append(prefixes)
    return np.concatenate(all_levels), np.concatenate(all_prefixes)


def _range(index: IndexSpec, flags: int, unique: Canonical) -> bytes:
    keys = order_keys(unique.domain, unique.values)
    step = int(index.option(spec.STEP))
    level_of, prefixes = range_blocks(keys, step)
    hashes = hashing.hash_blocks(level_of, prefixes)
    k, nbytes, flags = _sized(index, flags, len(hashes))
    low, high = (int(keys.min()), int(keys.max())) if len(keys) else (0, 0)
    head = _RANGE.pack(k, low, high, len(keys), len(hashes), nbytes)
    return _HEAD.pack(FORMAT, flags) + head + hashing.bloom_build(hashes, k, nbytes)


def _set(flags: int, domain: str, values: Any, max_distinct: int) -> bytes:
    count = len(values)
    head = _HEAD.pack(FORMAT, flags | (OVERFLOW if count > max_distinct else 0)) + _SET.pack(count)
    if count > max_distinct:
        return head
    if domain != "bytes":
        return (
            head
            + np.ascontiguousarray(values).astype("<i8" if domain == "int" else "<f8").tobytes()
        )
    offsets, data = hashing.binary_parts(values)
    return head + np.diff(offsets).astype("<u4").tobytes() + data.tobytes()


@dataclass(frozen=True)
class Entry:
    """A parsed entry (the fields its type has; the others stay empty)."""

    has_null: bool
    has_non_null: bool
    overflow: bool = False
    capped: bool = False
    k: int = 0
    distinct: int = 0
    bits: bytes = b""
    min_key: int = 0
    max_key: int = 0
    values: Any = None  # set types: int64/float64 ndarray, or (lengths ndarray, data bytes)


def parse_entry(data: bytes, index_type: str, column_type_name: str) -> Entry:
    """Read an entry back."""
    version, flags = _HEAD.unpack_from(data)
    if version != FORMAT:
        raise ValueError(f"index entry format {version} is not {FORMAT}")
    has_null, has_non_null = bool(flags & HAS_NULL), bool(flags & HAS_NON_NULL)
    overflow, capped = bool(flags & OVERFLOW), bool(flags & CAPPED)
    at = _HEAD.size
    if index_type in (spec.BLOOM_FILTER, spec.TOKEN_BLOOM_FILTER, spec.NGRAM_BLOOM_FILTER):
        k, count, nbytes = _BLOOM.unpack_from(data, at)
        at += _BLOOM.size
        return Entry(has_null, has_non_null, overflow, capped, k, count, data[at : at + nbytes])
    if index_type == spec.BLOOM_RANGE_FILTER:
        k, low, high, count, _blocks, nbytes = _RANGE.unpack_from(data, at)
        at += _RANGE.size
        bits = data[at : at + nbytes]
        return Entry(has_null, has_non_null, overflow, capped, k, count, bits, low, high)
    (count,) = _SET.unpack_from(data, at)
    at += _SET.size
    if overflow:
        return Entry(has_null, has_non_null, True, capped, distinct=count)
    domain = column_type(column_type_name).domain if index_type == spec.BITMAP else "bytes"
    if domain != "bytes":
        values = np.frombuffer(data, "<i8" if domain == "int" else "<f8", count, at)
        return Entry(has_null, has_non_null, False, capped, distinct=count, values=values)
    lengths = np.frombuffer(data, "<u4", count, at).astype(np.int64)
    at += 4 * count
    return Entry(has_null, has_non_null, False, capped, distinct=count, values=(lengths, data[at:]))


def column_domain(index_type: str, column: ColumnType) -> str:
    """The domain of what an index's entries hold (text indexes hold bytes)."""
    return column.domain if index_type in (spec.BITMAP, spec.BLOOM_FILTER) else "bytes"
