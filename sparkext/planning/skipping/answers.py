"""How each index type answers one leaf: may some row of a file satisfy it?

Every entry records whether its file holds a NULL and a non-null value, so every index answers
``is null``/``is not null`` and ``<=>``'s NULL side, and no value condition can hold in a file
of NULLs only. Beyond that, per type:

- **bloom_filter**: ``=``, ``<=>``, ``in`` (a value's bits all set → may).
- **bitmap**: the file's exact set of distinct values (unless it had more than
  ``max_distinct``): ``=``, ``<=>``, ``in``, ``<>``, ``not in``, ``<``, ``<=``, ``>``, ``>=``, and
  for strings ``starts_with``, ``ends_with``, ``contains``, ``like``, ``rlike`` (a Java regex in
  the subset :func:`.text.java_regex` reads) and all of these on ``lower(col)``/``upper(col)``,
  each by testing the set's values.
- **bloom_range_filter**: the file's exact min and max, and a bloom filter of the dyadic blocks
  holding its values (at every level, ``step`` bits of the order key per level). A point
  (``=``, ``in``) probes level 0; a range (``<``... and their conjunctions on the column) is cut
  into at most 512 aligned blocks, each probed with its ancestors: a file may match when one
  block and all its ancestors are present. ``<>``, ``not in``: only a file whose min = max.
- **token_bloom_filter** / **token_bitmap**: ``=``, ``in``, ``starts_with``, ``ends_with``,
  ``contains``, ``like``, ``rlike`` by the tokens a matching value must have (see
  :mod:`.text`): every whole token must be in the file; the bitmap also needs each partial
  token to be a prefix / suffix / part of one of the file's tokens.
- **ngram_bloom_filter** / **ngram_bitmap**: the same predicates by n-grams: every n-gram of
  every literal part of at least ``n`` characters must be in the file.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkext.planning.skipping import hashing, spec
from sparkext.planning.skipping import text as textmod
from sparkext.planning.skipping.blob import LoadedIndex
from sparkext.planning.skipping.entries import levels
from sparkext.planning.skipping.predicate import Leaf
from sparkext.planning.skipping.structures import ExactSets
from sparkext.planning.skipping.values import (
    KEY_MAX,
    NoMatch,
    Unanswerable,
    canonical_key,
    probe_bound,
    probe_value,
)

MAX_RANGE_PROBES = 512
_TEXT_OPS = frozenset({"starts_with", "ends_with", "contains", "like", "rlike"})
Answer = np.ndarray | None
_NEEDS_VALUE = frozenset(
    {"eq", "ne", "eq_null_safe", "in", "not_in", "lt", "le", "gt", "ge", "range"}
    | {"starts_with", "ends_with", "contains", "like", "rlike"}
)


def answer(index: LoadedIndex, leaf: Leaf, rows: np.ndarray) -> tuple[np.ndarray, bool]:
    """(may, answered): per row, may some row of that file satisfy ``leaf``; ``answered`` tells
    whether the index itself answered (not only its NULL flags)."""
    op = leaf.op
    if op == "is_null":
        return index.has_null[rows], True
    if op == "is_not_null":
        return index.has_non_null[rows], True
    if op == "ne_null_safe":
        value_leaf = Leaf("ne", leaf.col, leaf.type, leaf.value, fold=leaf.fold)
        try:
            found = _values(index, value_leaf, rows)
        except (Unanswerable, ValueError, TypeError, ArithmeticError, pa.ArrowException):
            found = None
        values = index.has_non_null[rows] if found is None else index.has_non_null[rows] & found
        return index.has_null[rows] | values, True
    base = index.has_non_null[rows]
    if op not in _NEEDS_VALUE:
        return np.ones(len(rows), bool), False
    try:
        found = _values(index, leaf, rows)
    except (Unanswerable, ValueError, TypeError, ArithmeticError, pa.ArrowException):
        found = None  # a value or pattern this index cannot read: keep
    if found is None:
        return base, False
    return base & found, True


def _values(index: LoadedIndex, leaf: Leaf, rows: np.ndarray) -> Answer:
    """Per row, may one of its non-null values satisfy the leaf? None: this type cannot say."""
    kind = index.spec.type
    if kind == spec.BLOOM_FILTER:
        return _bloom_filter(index, leaf, rows)
    if kind == spec.BITMAP:
        return _usable(index, rows, _bitmap(index, leaf, rows))
    if kind == spec.BLOOM_RANGE_FILTER:
        return _bloom_range(index, leaf, rows)
    if kind in (spec.TOKEN_BLOOM_FILTER, spec.TOKEN_BITMAP):
        return _usable(index, rows, _text(index, leaf, rows, _token_probe))
    return _usable(index, rows, _text(index, leaf, rows, _ngram_probe))


def _usable(index: LoadedIndex, rows: np.ndarray, found: Answer) -> Answer:
    """Rows whose set overflowed may hold anything."""
    return None if found is None else found | index.overflow[rows]


def _probes(index: LoadedIndex, leaf: Leaf) -> list[Any]:
    """The canonical values of an eq/in leaf (values that match nothing left out)."""
    given = leaf.values if leaf.op in ("in", "not_in") else (leaf.value,)
    found = []
    for value in given:
        try:
            found.append(probe_value(index.column, leaf.type, value))
        except NoMatch:
            continue
    return found


# -- bloom_filter --------------------------------------------------------------------------------


def _bloom_filter(index: LoadedIndex, leaf: Leaf, rows: np.ndarray) -> Answer:
    if leaf.op not in ("eq", "eq_null_safe", "in") or leaf.fold or index.blooms is None:
        return None
    probes = _probes(index, leaf)
    return index.blooms.probe_any(_hash_canonical(index, probes), rows)


def _hash_canonical(index: LoadedIndex, probes: list[Any]) -> np.ndarray:
    if index.column.domain == "bytes":
        return hashing.hash_bytes(probes)
    if index.column.domain == "float":
        words = np.array(probes, np.float64).view(np.uint64)
    else:
        words = np.array(probes, np.int64).view(np.uint64)
    return hashing.hash_words(words)


# -- bitmap --------------------------------------------------------------------------------------


def _bitmap(index: LoadedIndex, leaf: Leaf, rows: np.ndarray) -> Answer:
    sets = index.sets
    assert sets is not None
    op = leaf.op
    if leaf.fold or op in _TEXT_OPS:
        mask = _string_mask(index, sets, leaf)
        return None if mask is None else sets.rows_with_mask(mask)[rows]
    if op in ("eq", "eq_null_safe", "in", "ne", "not_in"):
        probes = [canonical_key(index.column.domain, p) for p in _probes(index, leaf)]
        ids = sets.ids(probes) if probes else np.zeros(0, np.int64)
        if op in ("ne", "not_in"):
            return np.asarray((sets.counts - sets.count_ids(ids))[rows] > 0)
        return np.asarray(sets.rows_with_ids(ids)[rows])
    low, high = _bounds(index, leaf)
    if sets.domain == "bytes":
        mask = _bytes_in_range(sets.vocab, low, high)
    else:
        mask = (sets.vocab >= np.uint64(low)) & (sets.vocab <= np.uint64(high))
    return np.asarray(sets.rows_with_mask(mask)[rows])


def _string_mask(index: LoadedIndex, sets: ExactSets, leaf: Leaf) -> np.ndarray | None:
    """Per vocabulary entry: does the value satisfy the leaf (a string leaf, or any leaf on
    lower(col)/upper(col))?"""
    if index.column.kind != "string" or leaf.type not in ("string", ""):
        return None
    strings = sets.strings(leaf.fold)
    op = leaf.op
    result: Any
    if op == "starts_with":
        result = pc.starts_with(strings, pattern=leaf.value)
    elif op == "ends_with":
        result = pc.ends_with(strings, pattern=leaf.value)
    elif op == "contains":
        result = pc.match_substring(strings, pattern=leaf.value)
    elif op == "like":
        like = textmod.like_re2(leaf.pattern, leaf.escape)
        if like is None:
            return None
        result = pc.match_substring_regex(strings, pattern=like)
    elif op == "rlike":
        regex = textmod.java_regex(leaf.pattern)
        if regex is None:
            return None
        compiled = re.compile(regex.python)
        return np.array([compiled.search(s) is not None for s in strings.to_pylist()], bool)
    elif op in ("eq", "eq_null_safe", "in", "ne", "not_in"):
        given = leaf.values if op in ("in", "not_in") else (leaf.value,)
        if not all(isinstance(v, str) for v in given):
            return None
        wanted = pa.array(list(given), pa.large_string())
        hit = pc.is_in(strings, value_set=wanted).to_numpy(zero_copy_only=False)
        return np.asarray(~hit if op in ("ne", "not_in") else hit, bool)
    elif op in ("lt", "le", "gt", "ge", "range"):
        bounds = leaf.bounds if op == "range" else ((op, leaf.value),)
        mask = np.ones(len(strings), bool)
        for bound_op, value in bounds:
            if not isinstance(value, str):
                return None
            compare = {"lt": pc.less, "le": pc.less_equal, "gt": pc.greater, "ge": pc.greater_equal}
            mask &= compare[bound_op](strings, pa.scalar(value, pa.large_string())).to_numpy(
                zero_copy_only=False
            )
        return mask
    else:
        return None
    return np.asarray(result.to_numpy(zero_copy_only=False), bool)


def _bounds(index: LoadedIndex, leaf: Leaf) -> tuple[Any, Any]:
    """The leaf's range as inclusive (low, high) order keys, or bytes bounds (bytes domain:
    (low Bound | None, high Bound | None))."""
    bounds = leaf.bounds if leaf.op == "range" else ((leaf.op, leaf.value),)
    if index.column.domain == "bytes":
        low = high = None
        for op, value in bounds:
            lo, hi = probe_bound(index.column, leaf.type, value, op)
            if lo is not None and (low is None or _tighter(lo, low, True)):
                low = lo
            if hi is not None and (high is None or _tighter(hi, high, False)):
                high = hi
        return low, high
    key_low, key_high = 0, KEY_MAX
    for op, value in bounds:
        lo, hi = probe_bound(index.column, leaf.type, value, op)
        if lo is not None:
            assert isinstance(lo.value, int)
            key_low = max(key_low, lo.value)
        if hi is not None:
            assert isinstance(hi.value, int)
            key_high = min(key_high, hi.value)
    return key_low, key_high


def _tighter(new: Any, old: Any, lower: bool) -> bool:
    if new.value != old.value:
        return bool(new.value > old.value) if lower else bool(new.value < old.value)
    return not new.inclusive


def _bytes_in_range(vocab: pa.Array, low: Any, high: Any) -> np.ndarray:
    mask = np.ones(len(vocab), bool)
    for bound, above in ((low, True), (high, False)):
        if bound is None:
            continue
        scalar = pa.scalar(bound.value, pa.large_binary())
        if above:
            test = pc.greater_equal if bound.inclusive else pc.greater
        else:
            test = pc.less_equal if bound.inclusive else pc.less
        mask &= test(vocab, scalar).to_numpy(zero_copy_only=False)
    return mask


# -- bloom_range_filter --------------------------------------------------------------------------


def _bloom_range(index: LoadedIndex, leaf: Leaf, rows: np.ndarray) -> Answer:
    if leaf.fold or index.blooms is None:
        return None
    op = leaf.op
    low_keys, high_keys = index.min_key[rows], index.max_key[rows]
    domain = index.column.domain
    if op in ("eq", "eq_null_safe", "in", "ne", "not_in"):
        keys = np.array([canonical_key(domain, p) for p in _probes(index, leaf)], np.uint64)
        if op in ("ne", "not_in"):
            single = low_keys == high_keys
            return np.asarray(~single | ~np.isin(low_keys, keys))
        inside = (low_keys[:, None] <= keys[None, :]) & (keys[None, :] <= high_keys[:, None])
        candidates = np.nonzero(inside.any(axis=1))[0]
        out = np.zeros(len(rows), bool)
        if len(candidates):
            hashes = hashing.hash_blocks(np.zeros(len(keys), np.uint64), keys)
            present = index.blooms.probe(hashes, rows[candidates])
            out[candidates] = (present & inside[candidates]).any(axis=1)
        ends = (low_keys[:, None] == keys[None, :]) | (high_keys[:, None] == keys[None, :])
        return np.asarray(out | ends.any(axis=1))
    if op not in ("lt", "le", "gt", "ge", "range"):
        return None
    low, high = _bounds(index, leaf)
    overlap = np.asarray(
        (high_keys >= np.uint64(low)) & (low_keys <= np.uint64(high)) & (low <= high)
    )
    # a file's min and max are values of it: one inside the range answers; the bloom filter is
    # asked only about files whose values straddle the range
    lo, hi = np.uint64(low), np.uint64(high)
    settled = ((lo <= low_keys) & (low_keys <= hi)) | ((lo <= high_keys) & (high_keys <= hi))
    chosen = np.nonzero(overlap & ~settled)[0]
    if not len(chosen):
        return overlap
    blocks = dyadic_blocks(low, high, index.step)
    if blocks is None:
        return overlap
    block_levels, block_prefixes, parents, wanted = _with_ancestors(blocks, index.step)
    present = index.blooms.probe(hashing.hash_blocks(block_levels, block_prefixes), rows[chosen])
    # top-down: a block may hold a value only if its parent may (ids are parents first)
    parent_of = np.array(parents, np.int64)
    for level in sorted(set(block_levels.tolist()), reverse=True):
        at = np.nonzero((block_levels == level) & (parent_of >= 0))[0]
        if len(at):
            present[:, at] &= present[:, parent_of[at]]
    out = np.array(overlap, bool)
    out[chosen] = present[:, wanted].any(axis=1)
    return out


def dyadic_blocks(low: int, high: int, step: int) -> list[tuple[int, int]] | None:
    """The aligned blocks (level, prefix) covering the keys ``low..high`` exactly, fewest first
    at the top level; ``None`` beyond :data:`MAX_RANGE_PROBES` blocks.

    >>> dyadic_blocks(3, 40, 4)
    [(1, 1), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 9), (0, 10), (0, 11), (0, 12), \
(0, 13), (0, 14), (0, 15), (0, 32), (0, 33), (0, 34), (0, 35), (0, 36), (0, 37), (0, 38), (0, 39), \
(0, 40)]
    """
    blocks: list[tuple[int, int]] = []
    level = 0
    top = levels(step) - 1
    while low <= high:
        shift = level * step
        width = 1 << shift
        if level == top:
            blocks.extend((level, p) for p in range(low >> shift, (high >> shift) + 1))
            break
        parent = width << step
        # the partial parent blocks at each end are covered at this level
        while low <= high and low % parent:
            blocks.append((level, low >> shift))
            low += width
        while low <= high and (high + 1) % parent:
            blocks.append((level, high >> shift))
            high -= width
        if len(blocks) > MAX_RANGE_PROBES:
            return None
        level += 1
    if len(blocks) > MAX_RANGE_PROBES:
        return None
    return sorted(blocks, key=lambda b: (-b[0], b[1]))


def _with_ancestors(
    blocks: list[tuple[int, int]], step: int
) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """The blocks and all their ancestors once, parents before children: (levels, prefixes,
    the parent's index or -1 per block, the indexes of the given blocks)."""
    top = levels(step) - 1
    everything = set(blocks)
    for level, prefix in blocks:
        for up in range(level + 1, top + 1):
            everything.add((up, prefix >> ((up - level) * step)))
    ordered = sorted(everything, key=lambda b: (-b[0], b[1]))
    index_of = {block: at for at, block in enumerate(ordered)}
    parents = [
        index_of[(level + 1, prefix >> step)] if level < top else -1 for level, prefix in ordered
    ]
    return (
        np.array([b[0] for b in ordered], np.uint64),
        np.array([b[1] for b in ordered], np.uint64),
        parents,
        np.array([index_of[b] for b in blocks], np.int64),
    )


# -- token and n-gram indexes ---------------------------------------------------------------------


def _segments(leaf: Leaf) -> list[list[textmod.Segment]] | None:
    """Alternatives (an ``in`` has one per value), each the segments a matching value has."""
    op = leaf.op
    if op in ("eq", "eq_null_safe", "in"):
        values = leaf.values if op == "in" else (leaf.value,)
        if not all(isinstance(v, str) for v in values):
            return None
        return [textmod.equality_segments(v) for v in values]
    if op == "starts_with":
        return [[textmod.Segment(leaf.value, at_start=True)]]
    if op == "ends_with":
        return [[textmod.Segment(leaf.value, at_end=True)]]
    if op == "contains":
        return [[textmod.Segment(leaf.value)]]
    if op == "like":
        found = textmod.like_segments(leaf.pattern, leaf.escape)
        return None if found is None else [found]
    if op == "rlike":
        regex = textmod.java_regex(leaf.pattern)
        return None if regex is None else [regex.segments]
    return None


Probe = Callable[[LoadedIndex, list[textmod.Segment], bool, np.ndarray], Answer]


def _text(index: LoadedIndex, leaf: Leaf, rows: np.ndarray, probe: Probe) -> Answer:
    if leaf.type not in ("string", ""):
        return None
    case_sensitive = index.spec.option(spec.CASE_SENSITIVE) == "true"
    if leaf.fold == "upper" or (leaf.fold == "lower" and case_sensitive):
        return None
    lower_probe = not case_sensitive and leaf.fold is None  # lower-case what the leaf gives
    alternatives = _segments(leaf)
    if alternatives is None:
        return None
    out = np.zeros(len(rows), bool)
    for segments in alternatives:
        found = probe(index, segments, lower_probe, rows)
        if found is None:
            return None
        out |= found
    return out


def _token_probe(
    index: LoadedIndex, segments: list[textmod.Segment], lower: bool, rows: np.ndarray
) -> Answer:
    exact: list[bytes] = []
    partial: list[textmod.Need] = []
    for segment in segments:
        for need in textmod.token_needs(segment):
            if need.kind == "exact":
                token = need.text.lower() if lower else need.text
                exact.append(token.encode("utf-8", "surrogatepass"))
            elif not lower or "Σ" not in need.text:
                partial.append(textmod.Need(need.kind, need.text.lower() if lower else need.text))
    if index.sets is None:
        if not exact or index.blooms is None:
            return None
        return index.blooms.probe_all(hashing.hash_bytes(exact), rows)
    if not exact and not partial:
        return None
    sets = index.sets
    out = np.ones(len(rows), bool)
    ids = sets.ids(exact) if exact else np.zeros(0, np.int64)
    if (ids < 0).any():
        return np.zeros(len(rows), bool)
    for at in ids:
        out &= sets.rows_with_ids(np.array([at]))[rows]
    if partial:
        strings = sets.strings()
        for need in partial:
            test = {"prefix": pc.starts_with, "suffix": pc.ends_with, "infix": pc.match_substring}
            mask = test[need.kind](strings, pattern=need.text).to_numpy(zero_copy_only=False)
            out &= sets.rows_with_mask(np.asarray(mask, bool))[rows]
    return out


def _ngram_probe(
    index: LoadedIndex, segments: list[textmod.Segment], lower: bool, rows: np.ndarray
) -> Answer:
    n = int(index.spec.option(spec.N))
    grams: set[bytes] = set()
    for segment in segments:
        for gram in textmod.ngrams(segment.text, n):
            grams.add(textmod.ngram_key(gram.lower() if lower else gram))
    if not grams:
        return None
    wanted = sorted(grams)
    if index.sets is None:
        assert index.blooms is not None
        return index.blooms.probe_all(hashing.hash_bytes(wanted), rows)
    ids = index.sets.ids(wanted)
    if (ids < 0).any():
        return np.zeros(len(rows), bool)
    out = np.ones(len(rows), bool)
    for at in ids:
        out &= index.sets.rows_with_ids(np.array([at]))[rows]
    return out
