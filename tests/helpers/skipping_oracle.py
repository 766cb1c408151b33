"""An independent oracle of file skipping: which data files a skipping index may drop for a
predicate (the predicate JSON the JVM hands the Python driver, issue 56's contract), worked out
from each file's own rows without the index code.

For each candidate file it gives bounds ``lo <= keep <= hi`` on what a correct index keeps:

* ``lo`` (the file must be kept): a value of the file makes the leaf TRUE, combined through the
  predicate's AND/OR. A file holding a row that makes the whole predicate TRUE always has ``lo``
  = 1 (the caller checks that against Spark's own answer).
* ``hi`` (the file may be kept): 1, except where the answer is exact.

Where ``lo == hi`` the surviving file is asserted exactly. The semantics (the core brief's):

* NOT moves down by De Morgan; a leaf's complement under SQL's three-valued logic (not = is
  <>, not in, not < is >=, not <=> is "distinct from", not is_null is is_not_null); the NOT of
  anything else, and ``unknown``, may be true. A comparison with NULL is never true (``in``
  ignores NULL elements; ``not in`` with a NULL element is never true).
* A conjunction's ``< <= > >=`` leaves on one (column, type, fold) are one range.
* A leaf on a column without an index, and a file the index does not list: kept. Several
  indexes on a column: kept only if each may.
* Every index type answers ``is null`` / ``is not null`` exactly (each entry records both).
* bitmap (the file's exact set of distinct values, up to max_distinct): exact for = <=> in <>
  not-in, ranges, starts_with / ends_with / contains / like, on the column, lower(col) or
  upper(col): a value of the set makes the leaf TRUE.
* bloom_range_filter: ``hi`` from the file's exact min / max (a point or range outside them).
* token_bitmap (the file's exact set of lower-cased tokens, runs of ``str.isalnum``): for =, in,
  like, starts_with, ends_with, contains (on the column, or lower(col) as given), each
  alphanumeric run of a literal part of the pattern must be a token when a separator or the
  string's start / end is on both sides, a token's prefix / suffix when on one side only, part
  of a token otherwise. token_bloom_filter: ``lo`` from the whole tokens.
* ngram_bitmap (the file's exact set of lower-cased n-grams): every n-gram of each literal part
  of at least n characters is in the set. ngram_bloom_filter: ``lo`` from the same.

Pure Python; values are canonical: ints, ``Decimal``, days for dates, microseconds for
timestamps, ``str``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

BITMAP_MAX_DISTINCT = 1024
TOKEN_MAX_DISTINCT = 65536
EPOCH = dt.date(1970, 1, 1)
EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def canonical(value: Any) -> Any:
    """A Python value read from Parquet as the oracle compares it."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        delta = value - EPOCH_TS
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - EPOCH).days
    if isinstance(value, bool):
        return int(value)
    return value


def json_value(value: Any, type_name: str) -> Any:
    """A value of the predicate JSON as the oracle compares it."""
    if value is None:
        return None
    if type_name.startswith("decimal"):
        return Decimal(value)
    if type_name in ("float", "double") and isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    if type_name == "boolean":
        return int(value)
    return value


def tokens(text: str) -> set[str]:
    out, run = set(), []
    for ch in text.lower():
        if ch.isalnum():
            run.append(ch)
        elif run:
            out.add("".join(run))
            run = []
    if run:
        out.add("".join(run))
    return out


def ngrams(text: str, n: int) -> set[str]:
    text = text.lower()
    return {text[i : i + n] for i in range(len(text) - n + 1)}


@dataclass
class FileFacts:
    """One data file's rows, column by column (canonical values, None for NULL)."""

    path: str
    columns: Mapping[str, Sequence[Any]]
    _cache: dict = field(default_factory=dict)

    def values(self, column: str) -> Sequence[Any]:
        return self.columns.get(column, ())

    def distinct(self, column: str) -> set[Any]:
        key = ("distinct", column)
        if key not in self._cache:
            self._cache[key] = {v for v in self.values(column) if v is not None}
        return self._cache[key]

    def has_null(self, column: str) -> bool:
        return any(v is None for v in self.values(column)) or column not in self.columns

    def tokens(self, column: str) -> set[str]:
        key = ("tokens", column)
        if key not in self._cache:
            self._cache[key] = set().union(*(tokens(v) for v in self.distinct(column)))
        return self._cache[key]

    def ngrams(self, column: str, n: int) -> set[str]:
        key = ("ngrams", column, n)
        if key not in self._cache:
            self._cache[key] = set().union(*(ngrams(v, n) for v in self.distinct(column)))
        return self._cache[key]


# ---------------------------------------------------------------------------------------------
# row-level truth of one leaf (SQL three-valued logic: None = unknown)


def like_regex(pattern: str, escape: str = "\\") -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _fold(value: Any, leaf: Mapping[str, Any]) -> Any:
    fold = leaf.get("fold")
    if value is None or fold is None:
        return value
    return value.lower() if fold == "lower" else value.upper()


def leaf_true(leaf: Mapping[str, Any], value: Any) -> bool | None:
    """Whether a row whose column holds ``value`` makes ``leaf`` TRUE (None: NULL)."""
    op = leaf["op"]
    if op == "is_null":
        return value is None
    if op == "is_not_null":
        return value is not None
    t = leaf.get("type", "")
    if op in ("eq_null_safe", "ne_null_safe"):
        probe = json_value(leaf["value"], t)
        if value is None or probe is None:
            same = value is None and probe is None
        else:
            same = _fold(value, leaf) == probe
        return same if op == "eq_null_safe" else not same
    if value is None:
        return None
    value = _fold(value, leaf)
    if op in ("in", "not_in"):
        probes = [json_value(v, t) for v in leaf["values"]]
        if value in [p for p in probes if p is not None]:
            return op == "in"
        if any(p is None for p in probes):
            return None
        return op == "not_in"
    if op in ("starts_with", "ends_with", "contains"):
        probe = leaf["value"]
        return {
            "starts_with": value.startswith,
            "ends_with": value.endswith,
            "contains": value.__contains__,
        }[op](probe)
    if op == "like":
        return like_regex(leaf["pattern"], leaf.get("escape", "\\")).fullmatch(value) is not None
    if op == "rlike":
        try:
            return re.search(leaf["pattern"], value) is not None
        except re.error:
            return False  # cannot tell: the caller's lower bound stays weaker
    probe = json_value(leaf["value"], t)
    if probe is None:
        return None
    return {
        "eq": value == probe,
        "ne": value != probe,
        "lt": value < probe,
        "le": value <= probe,
        "gt": value > probe,
        "ge": value >= probe,
    }[op]


# ---------------------------------------------------------------------------------------------
# NOT pushed down, SQL's NULL rules


NEGATE = {
    "eq": "ne",
    "ne": "eq",
    "eq_null_safe": "ne_null_safe",
    "ne_null_safe": "eq_null_safe",
    "in": "not_in",
    "not_in": "in",
    "lt": "ge",
    "ge": "lt",
    "le": "gt",
    "gt": "le",
    "is_null": "is_not_null",
    "is_not_null": "is_null",
}
TRUE = {"op": "const", "value": True}
FALSE = {"op": "const", "value": False}


def push_not(node: Mapping[str, Any], negate: bool = False) -> dict[str, Any]:
    """The predicate with NOT pushed down (De Morgan; a leaf's complement) and SQL's NULL rules
    applied (a comparison with NULL is never true): and / or / const / leaf nodes. A NOT the
    complement table does not cover (``not like``…) and ``unknown`` may be true: const TRUE."""
    op = node["op"]
    if op == "not":
        return push_not(node["arg"], not negate)
    if op in ("and", "or"):
        flipped = {"and": "or", "or": "and"}[op] if negate else op
        return {"op": flipped, "args": [push_not(a, negate) for a in node["args"]]}
    if op == "unknown":
        return dict(TRUE)
    leaf = dict(node)
    if negate:
        if op not in NEGATE:
            return dict(TRUE)
        leaf["op"] = NEGATE[op]
    return _null_rules(leaf)


def _null_rules(leaf: dict[str, Any]) -> dict[str, Any]:
    op = leaf["op"]
    if op in ("eq", "ne", "lt", "le", "gt", "ge", "starts_with", "ends_with", "contains"):
        return dict(FALSE) if leaf.get("value") is None else leaf
    if op == "in":
        values = [v for v in leaf["values"] if v is not None]
        return {**leaf, "values": values} if values else dict(FALSE)
    if op == "not_in":
        if any(v is None for v in leaf["values"]):
            return dict(FALSE)
        return leaf if leaf["values"] else {"op": "is_not_null", "col": leaf["col"]}
    if op == "eq_null_safe" and leaf.get("value") is None:
        return {"op": "is_null", "col": leaf["col"]}
    if op == "ne_null_safe" and leaf.get("value") is None:
        return {"op": "is_not_null", "col": leaf["col"]}
    return leaf


# ---------------------------------------------------------------------------------------------
# per index type: (lo, hi) of one leaf on one file


@dataclass(frozen=True)
class Index:
    """A declared index; ``paths``: the data files its entries list (None: every file)."""

    type: str
    column: str
    options: Mapping[str, str] = field(default_factory=dict)
    paths: frozenset[str] | None = None

    @property
    def n(self) -> int:
        return int(self.options.get("n", "3"))

    @property
    def folds(self) -> bool:
        return self.options.get("case_sensitive", "false").lower() != "true"


def literal_parts(leaf: Mapping[str, Any]) -> list[tuple[str, bool, bool]] | None:
    """(literal, anchored at the string's start, anchored at its end) of a string leaf."""
    op = leaf["op"]
    if op in ("eq", "eq_null_safe"):
        return [(leaf["value"], True, True)]
    if op == "starts_with":
        return [(leaf["value"], True, False)]
    if op == "ends_with":
        return [(leaf["value"], False, True)]
    if op == "contains":
        return [(leaf["value"], False, False)]
    if op != "like":
        return None
    pattern, escape = leaf["pattern"], leaf.get("escape", "\\")
    parts: list[tuple[str, bool, bool]] = []
    current: list[str] = []
    at_start = True
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            current.append(pattern[i + 1])
            i += 2
            continue
        if ch in "%_":
            if current:
                parts.append(("".join(current), at_start, False))
                current = []
            at_start = False
        else:
            current.append(ch)
        i += 1
    if current:
        parts.append(("".join(current), at_start, True))
    return parts


def _runs(text: str) -> list[tuple[int, int]]:
    out, start = [], None
    for i, ch in enumerate(text):
        if ch.isalnum() and start is None:
            start = i
        elif not ch.isalnum() and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(text)))
    return out


def token_conditions(
    parts: list[tuple[str, bool, bool]], lower: bool, whole_only: bool
) -> list[tuple[str, str]]:
    """(kind, run) a file's tokens must satisfy: "token" (a whole token), "prefix", "suffix" or
    "inside" a token (only whole tokens when ``whole_only``)."""
    out = []
    for text, start, end in parts:
        for a, b in _runs(text):
            left = a > 0 or start
            right = b < len(text) or end
            run = text[a:b].lower() if lower else text[a:b]
            kind = (
                "token" if left and right else "prefix" if left else "suffix" if right else "inside"
            )
            if kind == "token" or not whole_only:
                out.append((kind, run))
    return out


def tokens_hold(conditions: list[tuple[str, str]], file_tokens: set[str]) -> bool:
    for kind, run in conditions:
        if kind == "token":
            ok = run in file_tokens
        elif kind == "prefix":
            ok = any(t.startswith(run) for t in file_tokens)
        elif kind == "suffix":
            ok = any(t.endswith(run) for t in file_tokens)
        else:
            ok = any(run in t for t in file_tokens)
        if not ok:
            return False
    return True


def _alternatives(leaf: Mapping[str, Any]) -> list[list[tuple[str, bool, bool]]] | None:
    """The literal parts a matching value has, one list per alternative (an ``in``: per value);
    None: a text index cannot read this leaf."""
    if leaf.get("type") not in (None, "", "string"):
        return None
    if leaf["op"] == "in":
        if not all(isinstance(v, str) for v in leaf["values"]):
            return None
        return [[(v, True, True)] for v in leaf["values"]]
    parts = literal_parts(leaf)
    return None if parts is None else [parts]


def _text_bounds(index: Index, leaf: Mapping[str, Any], facts: FileFacts, row: bool):
    loose = (row, True)
    fold = leaf.get("fold")
    if not index.folds or fold == "upper":  # the oracle knows case-folded indexes only
        return loose
    alternatives = _alternatives(leaf)
    if alternatives is None:
        return loose
    lower = fold is None  # an unfolded leaf probes lower-cased text; lower(col) as given
    exact = index.type.endswith("_bitmap")
    held_any = False
    for parts in alternatives:
        if index.type.startswith("token"):
            conditions = token_conditions(parts, lower, whole_only=not exact)
            if not conditions:
                return loose
            held = tokens_hold(conditions, facts.tokens(leaf["col"]))
        else:
            cut = ngrams if lower else _raw_ngrams
            grams = set().union(*(cut(text, index.n) for text, _, _ in parts))
            if not grams:
                return loose
            held = grams <= facts.ngrams(leaf["col"], index.n)
        held_any = held_any or held
    held_any = held_any and bool(facts.distinct(leaf["col"]))
    return (held_any, held_any) if exact else (held_any, True)


def _raw_ngrams(text: str, n: int) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


BITMAP_OPS = frozenset(
    {"eq", "eq_null_safe", "ne_null_safe", "in", "ne", "not_in", "lt", "le", "gt", "ge"}
    | {"range", "starts_with", "ends_with", "contains", "like"}
)


def index_bounds(index: Index, leaf: Mapping[str, Any], facts: FileFacts) -> tuple[bool, bool]:
    """(lo, hi) of ``index``'s answer to ``leaf`` (a leaf or a range group on its column)."""
    op = leaf["op"]
    column = leaf["col"]
    row = exists_row(leaf, facts)
    loose = (row, True)  # whatever a sound index answers
    if op in ("is_null", "is_not_null"):
        return (row, row)  # every entry records NULL / non-null
    if index.type == "bitmap":
        limit = int(index.options.get("max_distinct", BITMAP_MAX_DISTINCT))
        if len(facts.distinct(column)) > limit or op not in BITMAP_OPS:
            return loose
        return (row, row)
    if index.type == "bloom_range_filter":
        values = facts.distinct(column)
        if leaf.get("fold") or not values:
            return loose
        low, high = min(values), max(values)
        if op in ("lt", "le", "gt", "ge", "range"):
            bounds = leaf["bounds"] if op == "range" else [leaf]
            inside = all(
                leaf_true(b, low if b["op"] in ("lt", "le") else high) is True for b in bounds
            )
            if op == "range":  # the intersection must meet [min, max]
                inside = inside and _interval_meets(bounds, low, high)
            return (row, inside)
        if op in ("eq", "eq_null_safe", "in"):
            probes = [leaf["value"]] if op != "in" else leaf["values"]
            t = leaf.get("type", "")
            inside = any(p is not None and low <= json_value(p, t) <= high for p in probes)
            return (row, inside)
        return loose
    if index.type in ("token_bitmap", "token_bloom_filter", "ngram_bitmap", "ngram_bloom_filter"):
        return _text_bounds(index, leaf, facts, row)
    return loose


def _interval_meets(bounds: Sequence[Mapping[str, Any]], low: Any, high: Any) -> bool:
    """Whether the intersection of the bounds meets [low, high] (as real intervals)."""
    lo, lo_open, hi, hi_open = low, False, high, False
    for b in bounds:
        v = json_value(b["value"], b.get("type", ""))
        if b["op"] in ("gt", "ge") and (v > lo or (v == lo and b["op"] == "gt")):
            lo, lo_open = v, b["op"] == "gt"
        if b["op"] in ("lt", "le") and (v < hi or (v == hi and b["op"] == "lt")):
            hi, hi_open = v, b["op"] == "lt"
    return lo < hi or (lo == hi and not lo_open and not hi_open)


def exists_row(leaf: Mapping[str, Any], facts: FileFacts) -> bool:
    """Whether a value of the file (NULL included) makes the leaf (or range group) TRUE."""
    column = leaf["col"]
    values = list(facts.distinct(column)) + ([None] if facts.has_null(column) else [])
    parts = leaf["bounds"] if leaf["op"] == "range" else [leaf]
    return any(all(leaf_true(p, v) is True for p in parts) for v in values)


def leaf_bounds(
    leaf: Mapping[str, Any], facts: FileFacts | None, indexes: Sequence[Index]
) -> tuple[bool, bool]:
    """(lo, hi) of one leaf: each index on its column answers; the file is kept only if all say
    it may. A file no index lists (``facts`` None) and a column without an index: kept."""
    if facts is None:
        return (True, True)
    on_column = [
        i for i in indexes if i.column == leaf["col"] and (i.paths is None or facts.path in i.paths)
    ]
    if not on_column:
        return (True, True)
    lo = hi = True
    for index in on_column:
        a, b = index_bounds(index, leaf, facts)
        lo, hi = lo and a, hi and b
    return lo, hi


def _flatten(args: Sequence[Mapping[str, Any]], op: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for arg in args:
        if arg["op"] == op:
            out.extend(_flatten(arg["args"], op))
        else:
            out.append(dict(arg))
    return out


def _group_ranges(args: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conjunction's lt/le/gt/ge leaves on one (column, type, fold) as one range group."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    rest = []
    for arg in args:
        if arg["op"] in ("lt", "le", "gt", "ge"):
            groups.setdefault((arg["col"], arg.get("type"), arg.get("fold")), []).append(arg)
        else:
            rest.append(arg)
    for (col, type_name, fold), group in groups.items():
        if len(group) == 1:
            rest.append(group[0])
        else:
            rest.append({"op": "range", "col": col, "type": type_name, "fold": fold,
                         "bounds": group})  # fmt: skip
    return rest


def bounds(
    node: Mapping[str, Any], facts: FileFacts | None, indexes: Sequence[Index]
) -> tuple[bool, bool]:
    """(lo, hi) for a predicate :func:`push_not` made."""
    op = node["op"]
    if op == "const":
        return (node["value"], node["value"])
    if op == "or":
        results = [bounds(a, facts, indexes) for a in _flatten(node["args"], "or")]
        return any(r[0] for r in results), any(r[1] for r in results)
    if op == "and":
        args = _group_ranges(_flatten(node["args"], "and"))
        results = [bounds(a, facts, indexes) for a in args]
        return all(r[0] for r in results), all(r[1] for r in results)
    return leaf_bounds(node, facts, indexes)


def expected(
    predicate: Mapping[str, Any],
    files: Sequence[FileFacts | None],
    indexes: Sequence[Index],
) -> list[tuple[bool, bool]]:
    """(lo, hi) per candidate; ``None`` facts: a file the index does not list."""
    pushed = push_not(predicate)
    return [bounds(pushed, f, indexes) for f in files]
