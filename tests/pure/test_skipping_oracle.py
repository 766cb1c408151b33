"""The skipping indexes against a brute-force oracle (sparkext.planning.skipping).

Random files of random rows (ints, bigints, words with case and Unicode, uuids, decimals narrow
and wide, dates, timestamps, doubles with -0.0/NaN/Infinity, floats, booleans, binary, NULLs,
missing columns) are indexed by every index type; random predicates (AND/OR/NOT, IN, NULL
tests, ranges, LIKE/RLIKE/starts_with, lower()/upper(), probe types wider than the column) are
evaluated by the oracle below, written from SQL's rules and without the package's code:

1. no false negative, ever: every file with a row for which the predicate is TRUE is kept;
2. the exact types answer exactly: a bitmap keeps precisely the files that some row-value of
   theirs lets through (the oracle evaluates each leaf on every distinct value of the file),
   a token bitmap on whole-token leaves precisely the files holding all the tokens, an n-gram
   bitmap precisely the files holding all the literal parts' n-grams;
3. the blooms' false-positive share of single-value probes of absent values stays within 3x
   their configured fpp.
"""

from __future__ import annotations

import base64
import functools
import math
import random
import re
import uuid
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from sparkext.planning.skipping import build_entry, decode_blob, encode_blob, prune, validate_spec

pytestmark = pytest.mark.pure

TYPES = {
    "i": "int",
    "b": "bigint",
    "s": "string",
    "u": "string",
    "d": "decimal(10,2)",
    "w": "decimal(24,3)",
    "dt": "date",
    "ts": "timestamp",
    "tn": "timestamp_ntz",
    "f": "double",
    "r": "float",
    "bo": "boolean",
    "bin": "binary",
}
ARROW = {
    "i": pa.int32(),
    "b": pa.int64(),
    "s": pa.string(),
    "u": pa.large_string(),
    "d": pa.decimal128(10, 2),
    "w": pa.decimal128(24, 3),
    "dt": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "tn": pa.timestamp("us"),
    "f": pa.float64(),
    "r": pa.float32(),
    "bo": pa.bool_(),
    "bin": pa.binary(),
}
INDEXES = [
    ("i", "bloom_filter", {}),
    ("i", "bitmap", {"max_distinct": "3"}),
    ("i", "bloom_range_filter", {"step": "2"}),
    ("b", "bloom_range_filter", {}),
    ("b", "bitmap", {}),
    ("s", "bitmap", {"max_distinct": "4"}),
    ("s", "bloom_filter", {}),
    ("s", "token_bloom_filter", {}),
    ("s", "token_bitmap", {}),
    ("s", "token_bitmap", {"case_sensitive": "true", "max_distinct": "12"}),
    ("s", "ngram_bloom_filter", {}),
    ("s", "ngram_bitmap", {"n": "2", "case_sensitive": "true"}),
    ("s", "ngram_bitmap", {"max_distinct": "40"}),
    ("u", "bloom_filter", {}),
    ("u", "bitmap", {}),
    ("u", "ngram_bloom_filter", {"n": "4"}),
    ("d", "bitmap", {}),
    ("d", "bloom_range_filter", {"step": "5"}),
    ("d", "bloom_filter", {}),
    ("w", "bitmap", {}),
    ("w", "bloom_filter", {}),
    ("dt", "bloom_range_filter", {"step": "3"}),
    ("ts", "bloom_range_filter", {}),
    ("ts", "bitmap", {}),
    ("tn", "bloom_filter", {}),
    ("f", "bloom_filter", {}),
    ("f", "bitmap", {}),
    ("f", "bloom_range_filter", {}),
    ("r", "bitmap", {}),
    ("r", "bloom_range_filter", {"step": "1"}),
    ("bo", "bitmap", {}),
    ("bin", "bloom_filter", {}),
    ("bin", "bitmap", {}),
]

WORDS = [
    "error", "Error", "ERROR", "timeout", "TimeOut", "time", "out", "outage", "user", "alice",
    "Bob", "x_y", "a-b", "İstanbul", "ΣΟΦΙΑ", "σοφια", "straße", "STRASSE", "naïve", "100%",
    "50_50", "/api/v2", "ok", "42", "id=7", "ǅemal", "ﬁne", "", "a\\b", "(x)", "..",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", "/", "=", ": ", "-", "\t"]


def f32(x: float) -> float:
    return float(np.float32(x))


POOLS = {
    "i": [*range(-12, 12), -(2**31), 2**31 - 1],
    "b": [k * 10**12 + j for k in (-3, 0, 5) for j in (0, 1, 77)] + [-(2**63), 2**63 - 1],
    "d": [Decimal(v) for v in ("-2.25", "0.00", "1.50", "3.14", "99999999.99", "-99999999.99")],
    "w": [Decimal(v) for v in ("12345678901234567890.123", "-1.000", "0.001", "5.000", "-0.500")],
    "dt": [-1000, -1, 0, 1, 365, 19000, 19001],
    "ts": [-(10**15), -1, 0, 1, 1_700_000_000_000_000, 1_700_000_000_000_001],
    "tn": [0, 86_400_000_000, 1_700_000_000_000_000],
    "f": [-0.0, 0.0, 1.5, -1.5, math.nan, math.inf, -math.inf, 1e300, 2.5],
    "r": [f32(0.1), 0.5, -3.25, math.nan, -0.0, math.inf, f32(1e-3)],
    "bo": [True, False],
    "bin": [b"", b"\x00", b"\x00\x01", b"\xff", b"abc"],
}


def make_text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    out = words[0]
    for word in words[1:]:
        out += rng.choice(SEPARATORS) + word
    return out


def make_files(rng: random.Random, count: int) -> dict[str, dict[str, list]]:
    uuids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(30)]
    texts = [make_text(rng) for _ in range(60)]
    pools = {**POOLS, "u": uuids, "s": texts}
    files = {}
    for number in range(count):
        rows = rng.choice([0, 1, 2, 3, 5, 8, 12])
        columns = {}
        for column in TYPES:
            if rng.random() < 0.08:
                columns[column] = None  # a file written before the column existed
                continue
            chosen = rng.sample(pools[column], min(len(pools[column]), rng.randint(1, 5)))
            null_share = rng.choice([0.0, 0.0, 0.2, 0.6, 1.0])
            columns[column] = [
                None if rng.random() < null_share else rng.choice(chosen) for _ in range(rows)
            ]
        files[f"s3://b/t/data/{number:04d}.parquet"] = {"rows": rows, **columns}
    return files


def arrow(column: str, values: list, rng: random.Random) -> pa.Array:
    array = pa.array(values, ARROW[column])
    if column in ("s", "u", "i") and rng.random() < 0.3:
        array = array.dictionary_encode()
    if rng.random() < 0.2 and len(array) > 1:
        return pa.chunked_array([array.slice(0, 1), array.slice(1)])
    return array


def build(files, indexes, rng):
    loaded = []
    for number, (column, kind, options) in enumerate(indexes):
        spec = validate_spec(f"ix{number}", kind, [column], options, TYPES)
        entries = []
        for path, file in files.items():
            values = file[column]
            array = None if values is None else arrow(column, values, rng)
            entries.append((path, build_entry(spec, TYPES[column], array)))
        loaded.append(decode_blob(encode_blob(spec, TYPES[column], entries)))
    return loaded


# -- the oracle: SQL's three-valued logic over Python values --------------------------------------


@functools.lru_cache(maxsize=4096)
def probe_py(type_name: str, value):
    """A predicate JSON value as the Python value the oracle compares."""
    if value is None:
        return None
    if type_name in ("float", "double"):
        number = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value)
        return f32(number) if type_name == "float" else float(number)
    if type_name.startswith("decimal"):
        return Decimal(value)
    if type_name == "binary":
        return base64.b64decode(value)
    return value


def compare(a, b) -> int:
    if isinstance(a, float) or isinstance(b, float):
        a_nan, b_nan = math.isnan(a), math.isnan(b)
        if a_nan or b_nan:
            return 0 if a_nan and b_nan else (1 if a_nan else -1)
        return (a > b) - (a < b)
    if isinstance(a, bool):
        a, b = int(a), int(b)
    if isinstance(a, int | Decimal):
        a, b = Decimal(a), Decimal(b)
    return (a > b) - (a < b)


@functools.lru_cache(maxsize=4096)
def like_regex(pattern: str, escape: str):
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == escape:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append("." if char == "_" else ".*" if char == "%" else re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def folded(leaf, x):
    fold = leaf.get("fold")
    return x.lower() if fold == "lower" else x.upper() if fold == "upper" else x


def eval_leaf(leaf, x, unknown):
    op = leaf["op"]
    if op == "unknown":
        return unknown
    if op == "is_null":
        return x is None
    if op == "is_not_null":
        return x is not None
    if op == "eq_null_safe":
        v = probe_py(leaf["type"], leaf["value"])
        if x is None or v is None:
            return x is None and v is None
        return compare(folded(leaf, x), v) == 0
    if x is None:
        return None
    x = folded(leaf, x)
    if op == "in":
        values = [probe_py(leaf["type"], v) for v in leaf["values"]]
        if any(v is not None and compare(x, v) == 0 for v in values):
            return True
        return None if any(v is None for v in values) else False
    if op in ("eq", "lt", "le", "gt", "ge"):
        v = probe_py(leaf["type"], leaf["value"])
        if v is None:
            return None
        c = compare(x, v)
        return {"eq": c == 0, "lt": c < 0, "le": c <= 0, "gt": c > 0, "ge": c >= 0}[op]
    if op == "starts_with":
        return x.startswith(leaf["value"])
    if op == "ends_with":
        return x.endswith(leaf["value"])
    if op == "contains":
        return leaf["value"] in x
    if op == "like":
        return like_regex(leaf["pattern"], leaf.get("escape", "\\")).fullmatch(x) is not None
    if op == "rlike":
        return re.search(leaf["pattern"], x) is not None
    raise AssertionError(op)


def eval_row(node, row, unknown):
    op = node["op"]
    if op == "and":
        results = [eval_row(a, row, unknown) for a in node["args"]]
        return False if False in results else (None if None in results else True)
    if op == "or":
        results = [eval_row(a, row, unknown) for a in node["args"]]
        return True if True in results else (None if None in results else False)
    if op == "not":
        result = eval_row(node["arg"], row, unknown)
        return None if result is None else not result
    return eval_leaf(node, row.get(node.get("col")), unknown(row, node))


def nodes(node):
    yield node
    for child in node.get("args", []) + ([node["arg"]] if "arg" in node else []):
        yield from nodes(child)


def rows_of(files):
    """Per file, its rows as dicts (a missing column reads as NULL)."""
    return {
        path: [
            {c: (None if file[c] is None else file[c][r]) for c in TYPES}
            for r in range(file["rows"])
        ]
        for path, file in files.items()
    }


def must_keep(rows, predicate, salt: int) -> set[str]:
    """The files with a row for which the predicate is TRUE. An unknown leaf stands for any
    condition the index cannot read: per row and leaf an arbitrary TRUE, FALSE or NULL."""
    found = set()
    ordinal = {id(node): n for n, node in enumerate(nodes(predicate))}
    for number, (path, file_rows) in enumerate(rows.items()):
        for r, row in enumerate(file_rows):

            def unknown(row, node, r=r, number=number):
                mixed = salt * 7919 + number * 104729 + r * 31 + ordinal[id(node)]
                return (True, False, None)[mixed % 3]

            if eval_row(predicate, row, unknown) is True:
                found.add(path)
                break
    return found


# -- random predicates ----------------------------------------------------------------------------


def json_value(column: str, value):
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


PROBE_TYPES = {
    "i": ["int", "bigint"],
    "b": ["bigint"],
    "d": ["decimal(10,2)", "decimal(12,2)"],
    "w": ["decimal(24,3)", "decimal(30,3)"],
    "r": ["float", "double"],
}
ODD_VALUES = {
    "i": [3_000_000_000, -3_000_000_000, 99],
    "b": [5],
    "d": [Decimal("1.505"), Decimal("-0.001"), Decimal("1e12")],
    "w": [Decimal("0.0005"), Decimal("1e25")],
    "dt": [5000],
    "ts": [123],
    "tn": [5],
    "f": [0.25, -1e-300],
    "r": [0.1, 0.3],
    "bin": [b"zz"],
}


def random_value(rng, column, files_values):
    if column in ("s", "u"):
        choices = files_values.get(column) or ["none"]
        value = rng.choice(choices)
        return rng.choice([value, value.upper(), value.lower(), value + "x", make_text(rng)])
    if rng.random() < 0.25:
        return rng.choice([*ODD_VALUES.get(column, []), None])
    return rng.choice(POOLS[column])


def text_literal(rng, seen) -> str:
    base = rng.choice(seen) if seen and rng.random() < 0.8 else make_text(rng)
    if not base:
        return base
    start = rng.randrange(len(base))
    return base[start : start + rng.randint(1, 12)]


def like_of(rng, literal_parts) -> str:
    out = "" if rng.random() < 0.3 else "%"
    for index, part in enumerate(literal_parts):
        for char in part:
            if char in "%_\\":
                out += "\\" + char
            elif rng.random() < 0.05:
                out += "_"
            else:
                out += char
        if index < len(literal_parts) - 1:
            out += rng.choice(["%", "_", "%_"])
    return out + ("" if rng.random() < 0.3 else "%")


def rlike_of(rng, literal_parts) -> str:
    body = ".*".join(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", p) for p in literal_parts)
    return ("^" if rng.random() < 0.3 else "") + body + ("$" if rng.random() < 0.3 else "")


def random_leaf(rng, files_values, columns=None, text_ok=True):
    column = rng.choice(columns or list(TYPES))
    type_name = rng.choice(PROBE_TYPES.get(column, [TYPES[column]]))
    leaf = {"col": column, "type": type_name}
    roll = rng.random()
    if roll < 0.08:
        return {"op": rng.choice(["is_null", "is_not_null"]), "col": column}
    if roll < 0.1:
        return {"op": "unknown"}
    if column in ("s", "u") and text_ok and roll < 0.55:
        seen = files_values.get(column) or ["none"]
        fold = rng.choice([None, None, "lower", "upper"])
        parts = [text_literal(rng, seen) for _ in range(rng.randint(1, 2))]
        change = {"lower": str.lower, "upper": str.upper}.get(fold, lambda s: s)
        parts = [change(p) for p in parts]
        op = rng.choice(["starts_with", "ends_with", "contains", "like", "like", "rlike"])
        if op == "like":
            leaf.update(op="like", pattern=like_of(rng, parts))
            if rng.random() < 0.2:
                leaf.update(pattern=leaf["pattern"].replace("\\", "!"), escape="!")
                if "!" in "".join(parts):
                    return {"op": "unknown"}
        elif op == "rlike":
            if any(c in "".join(parts) for c in "\n\r\u0085\u2028\u2029"):
                return {"op": "unknown"}
            leaf.update(op="rlike", pattern=rlike_of(rng, parts))
        else:
            leaf.update(op=op, value=parts[0])
        if fold:
            leaf["fold"] = fold
        return leaf
    op = rng.choice(["eq", "eq", "in", "eq_null_safe", "lt", "le", "gt", "ge"])
    if column == "bin" and op in ("lt", "le", "gt", "ge"):
        op = "eq"
    if op == "in":
        values = [random_value(rng, column, files_values) for _ in range(rng.randint(1, 4))]
        leaf.update(op="in", values=[json_value(column, v) for v in values])
    else:
        leaf.update(op=op, value=json_value(column, random_value(rng, column, files_values)))
    if column in ("s", "u") and rng.random() < 0.15:
        leaf["fold"] = rng.choice(["lower", "upper"])
        if isinstance(leaf.get("value"), str):
            leaf["value"] = folded(leaf, leaf["value"])
    if type_name == "float":  # Spark holds a float literal as a float
        for key in ("value",):
            if isinstance(leaf.get(key), float):
                leaf[key] = f32(leaf[key])
    return leaf


def random_predicate(rng, files_values, depth=0, columns=None, text_ok=True):
    roll = rng.random()
    if depth >= 3 or roll < 0.4:
        return random_leaf(rng, files_values, columns, text_ok)
    if roll < 0.55:
        return {
            "op": "not",
            "arg": random_predicate(rng, files_values, depth + 1, columns, text_ok),
        }
    args = [
        random_predicate(rng, files_values, depth + 1, columns, text_ok)
        for _ in range(rng.randint(2, 3))
    ]
    return {"op": rng.choice(["and", "or"]), "args": args}


def present_values(files):
    found: dict[str, list] = {"s": [], "u": []}
    for file in files.values():
        for column in ("s", "u"):
            found[column].extend(v for v in (file[column] or []) if v is not None)
    return {c: sorted(set(v)) for c, v in found.items()}


# -- 1. no false negative -------------------------------------------------------------------------


def run_no_false_negative(seed: int, file_count: int, predicates: int):
    rng = random.Random(seed)
    files = make_files(rng, file_count)
    loaded = build(files, INDEXES, rng)
    values = present_values(files)
    candidates = [*files, "s3://b/t/data/unlisted.parquet"]
    rows = rows_of(files)
    pruned_some = 0
    for number in range(predicates):
        predicate = random_predicate(rng, values)
        pruned = prune(loaded, predicate, candidates)
        keep = {c for c, k in zip(candidates, pruned.keep, strict=True) if k}
        missed = must_keep(rows, predicate, seed * 100_000 + number) - keep
        assert not missed, (predicate, sorted(missed))
        # a file no index lists is kept unless the predicate can hold for no row at all
        assert pruned.keep[-1] == prune([], predicate, candidates[-1:]).keep[0], predicate
        pruned_some += len(candidates) - len(keep)
    assert pruned_some > predicates * file_count * 0.1  # the indexes do skip files


def test_no_file_that_holds_a_matching_row_is_ever_skipped():
    run_no_false_negative(seed=56, file_count=36, predicates=5000)


@pytest.mark.stress
def test_no_false_negative_stress():
    for seed in range(5):
        run_no_false_negative(seed=1000 + seed, file_count=80, predicates=10_000)


# -- 2. the exact types answer exactly ------------------------------------------------------------


def never_true(leaf, negated) -> bool:
    """SQL: a comparison with NULL is never TRUE, negated or not; so is an IN of NULLs only,
    and a NOT IN whose list holds a NULL."""
    op = leaf["op"]
    if op in ("eq", "lt", "le", "gt", "ge", "starts_with", "ends_with", "contains"):
        return leaf.get("value") is None
    if op == "in":
        nulls = [v is None for v in leaf["values"]]
        return any(nulls) if negated else all(nulls)
    return False


FALSE_NODE = ("false", None)


def _flatten(node, negated):
    """(kind, parts) with NOT pushed down by De Morgan only: kind is and/or/leaf/false; leaves
    that are never TRUE are FALSE, and an AND or OR of one part is that part."""
    op = node["op"]
    if op == "not":
        return _flatten(node["arg"], not negated)
    if op in ("and", "or"):
        kind = ("and" if op == "and" else "or") if not negated else ("or" if op == "and" else "and")
        parts = []
        for arg in node["args"]:
            sub = _flatten(arg, negated)
            if sub == FALSE_NODE:
                if kind == "and":
                    return FALSE_NODE
                continue
            parts.extend(sub[1] if sub[0] == kind else [sub])
        if not parts:
            return FALSE_NODE
        return parts[0] if len(parts) == 1 else (kind, parts)
    if never_true(node, negated):
        return FALSE_NODE
    return ("leaf", (node, negated))


RANGES = ("lt", "le", "gt", "ge")


def file_may(node, column, xs):
    """May some value of ``xs`` (the file's distinct values, None for NULL) satisfy the tree,
    leaf by leaf (a conjunction's comparisons of one column taken together)?"""
    kind, parts = node
    if kind == "false":
        return False
    if kind == "leaf":
        leaf, negated = parts
        if leaf.get("col") != column:
            return True
        return any(eval_leaf(leaf, x, None) is (not negated) for x in xs)
    if kind == "or":
        return any(file_may(p, column, xs) for p in parts)
    groups: dict[tuple, list] = {}
    rest = []
    for part in parts:
        if part[0] == "leaf" and part[1][0]["op"] in RANGES and part[1][0].get("col") == column:
            leaf = part[1][0]
            groups.setdefault((leaf["col"], leaf["type"], leaf.get("fold")), []).append(part[1])
        else:
            rest.append(part)
    for group in groups.values():
        if not any(all(eval_leaf(lf, x, None) is (not n) for lf, n in group) for x in xs):
            return False
    return all(file_may(p, column, xs) for p in rest)


def negates_text(node, negated=False) -> bool:
    op = node["op"]
    if op == "not":
        return negates_text(node["arg"], not negated)
    if op in ("and", "or"):
        return any(negates_text(a, negated) for a in node["args"])
    if op == "unknown":
        return True
    return negated and op in ("starts_with", "ends_with", "contains", "like", "rlike")


EXACT = [
    ("i", "bitmap", {}),
    ("b", "bitmap", {}),
    ("s", "bitmap", {}),
    ("u", "bitmap", {}),
    ("d", "bitmap", {}),
    ("w", "bitmap", {}),
    ("ts", "bitmap", {}),
    ("f", "bitmap", {}),
    ("r", "bitmap", {}),
    ("bo", "bitmap", {}),
    ("bin", "bitmap", {}),
]


def test_a_bitmap_keeps_exactly_the_files_its_values_let_through():
    check_bitmaps_exactly(seed=57, file_count=30)


@pytest.mark.stress
def test_the_exact_types_stress():
    for seed in range(6):
        check_bitmaps_exactly(seed=2000 + seed, file_count=70)
        check_token_bitmaps_exactly(seed=3000 + seed, file_count=70)
        check_ngram_bitmaps_exactly(seed=4000 + seed, file_count=70)


def check_bitmaps_exactly(seed, file_count):
    rng = random.Random(seed)
    files = make_files(rng, file_count)
    loaded = build(files, EXACT, rng)
    values = present_values(files)
    paths = list(files)
    compared = 0
    for index, (column, _, _) in zip(loaded, EXACT, strict=True):
        for _ in range(300):
            predicate = random_predicate(rng, values, columns=[column])
            if negates_text(predicate):
                continue
            tree = _flatten(predicate, False)
            expected = []
            for file in files.values():
                # a file without the column reads as NULLs (the index cannot count them)
                column_values = [None] if file[column] is None else file[column]
                xs = {repr(x): x for x in column_values}.values()
                expected.append(file_may(tree, column, list(xs)))
            got = prune([index], predicate, paths).keep.tolist()
            assert got == expected, (column, predicate)
            compared += 1
    assert compared > 2500


def file_tokens(texts, case_sensitive):
    def tokens(text):
        out, word = [], ""
        for char in text + " ":
            if char.isalnum():
                word += char
            elif word:
                out.append(word)
                word = ""
        return out

    found = set()
    for text in texts:
        if case_sensitive:
            found |= set(tokens(text))
        else:
            found |= {t.lower() for t in tokens(text)} | set(tokens(text.lower()))
    return found


def test_a_token_bitmap_keeps_exactly_the_files_with_all_whole_tokens():
    check_token_bitmaps_exactly(seed=58, file_count=40)


def check_token_bitmaps_exactly(seed, file_count):
    rng = random.Random(seed)
    files = make_files(rng, file_count)
    for case_sensitive in (False, True):
        options = {"case_sensitive": str(case_sensitive).lower()}
        (index,) = build(files, [("s", "token_bitmap", options)], rng)
        per_file = [
            (file_tokens([v for v in (f["s"] or []) if v is not None], case_sensitive), f)
            for f in files.values()
        ]
        pool = [*sorted(set().union(*(t for t, _ in per_file))), "absent", "Absent", "zz9"]
        for _ in range(400):
            predicate, needs = token_predicate(rng, pool, case_sensitive)
            expected = [
                any(v is not None for v in (f["s"] or [])) and needs(tokens)
                for tokens, f in per_file
            ]
            assert prune([index], predicate, list(files)).keep.tolist() == expected, predicate


def token_predicate(rng, pool, case_sensitive):
    """A tree of whole-token leaves, and the oracle: does a file's token set satisfy it?"""
    if rng.random() < 0.3:
        parts = [token_predicate(rng, pool, case_sensitive) for _ in range(2)]
        op = rng.choice(["and", "or"])
        combine = all if op == "and" else any
        return (
            {"op": op, "args": [p for p, _ in parts]},
            lambda tokens: combine(n(tokens) for _, n in parts),
        )
    words = [rng.choice(pool) for _ in range(rng.randint(1, 3))]
    fold = None if case_sensitive or rng.random() < 0.5 else "lower"
    if fold:
        words = [w.lower() for w in words]
    wanted = {w if case_sensitive or fold else w.lower() for w in words}
    text = " ".join(words)
    form = rng.choice(["eq", "like_mid", "like_start", "like_end", "contains", "starts", "ends"])
    leaf = {"col": "s", "type": "string"}
    if form == "eq":
        leaf.update(op="eq", value=text)
    elif form == "like_mid":
        leaf.update(op="like", pattern=f"% {text} %")
    elif form == "like_start":
        leaf.update(op="like", pattern=f"{text} %")
    elif form == "like_end":
        leaf.update(op="like", pattern=f"%={text}")
    elif form == "contains":
        leaf.update(op="contains", value=f"/{text}/")
    elif form == "starts":
        leaf.update(op="starts_with", value=f"{text}:")
    else:
        leaf.update(op="ends_with", value=f" {text}")
    if fold:
        leaf["fold"] = fold
    return leaf, lambda tokens: wanted <= tokens


def file_ngrams(texts, n, case_sensitive):
    found = set()
    for text in texts:
        if case_sensitive:
            found |= {text[i : i + n] for i in range(len(text) - n + 1)}
        else:
            lower = text.lower()
            found |= {lower[i : i + n] for i in range(len(lower) - n + 1)}
            found |= {text[i : i + n].lower() for i in range(len(text) - n + 1)}
    return found


def test_an_ngram_bitmap_keeps_exactly_the_files_with_all_ngrams():
    check_ngram_bitmaps_exactly(seed=59, file_count=40)


def check_ngram_bitmaps_exactly(seed, file_count):
    rng = random.Random(seed)
    files = make_files(rng, file_count)
    values = present_values(files)
    for n, case_sensitive in ((3, False), (2, True), (4, False)):
        options = {"n": str(n), "case_sensitive": str(case_sensitive).lower()}
        (index,) = build(files, [("s", "ngram_bitmap", options)], rng)
        per_file = []
        for f in files.values():
            texts = [v for v in (f["s"] or []) if v is not None]
            per_file.append((file_ngrams(texts, n, case_sensitive), bool(texts)))
        for _ in range(400):
            parts = [text_literal(rng, values["s"]) for _ in range(rng.randint(1, 2))]
            fold = None if rng.random() < 0.6 else "lower"
            if fold:
                parts = [p.lower() for p in parts]
            op = rng.choice(["contains", "starts_with", "ends_with", "like", "eq"])
            leaf = {"op": op, "col": "s", "type": "string"}
            if op == "like":
                leaf["pattern"] = (
                    "%" + "%".join(re.sub(r"([%_\\])", r"\\\1", p) for p in parts) + "%"
                )
            else:
                parts = parts[:1]
                leaf["value"] = parts[0]
            if fold:
                leaf["fold"] = fold
            answerable = not (fold and case_sensitive) and any(len(p) >= n for p in parts)
            grams = set()
            for part in parts:
                for i in range(len(part) - n + 1):
                    gram = part[i : i + n]
                    grams.add(gram.lower() if not case_sensitive and not fold else gram)
            expected = [has and (not answerable or grams <= have) for have, has in per_file]
            assert prune([index], leaf, list(files)).keep.tolist() == expected, leaf


# -- 3. the blooms' false positives ---------------------------------------------------------------


def false_positive_share(kind, column_type, make, absent, fpp, rows=400, present=set):
    """The share of kept files among eq probes of values a file does not hold (``present``:
    what a file's values hold, as probes)."""
    rng = random.Random(60)
    spec = validate_spec("ix", kind, ["c"], {"fpp": str(fpp)}, {"c": column_type})
    data = {f"f{f}": make(rng, rows) for f in range(45)}
    entries = [(p, build_entry(spec, column_type, pa.array(v))) for p, v in data.items()]
    index = decode_blob(encode_blob(spec, column_type, entries))
    probes = kept = 0
    for path, values in data.items():
        held = present(values)
        for value in absent(rng, values):
            if value in held:
                continue
            leaf = {"op": "eq", "col": "c", "type": column_type, "value": value}
            kept += int(prune([index], leaf, [path]).keep[0])
            probes += 1
    assert probes > 2000
    return kept / probes


@pytest.mark.parametrize("fpp", [0.01, 0.05])
def test_bloom_filter_false_positives_stay_near_fpp(fpp):
    share = false_positive_share(
        "bloom_filter",
        "bigint",
        lambda rng, n: [rng.randrange(10**12) for _ in range(n)],
        lambda rng, values: [rng.randrange(10**12) for _ in range(60)],
        fpp,
    )
    assert share <= 3 * fpp, share


def test_bloom_range_filter_point_false_positives_stay_near_fpp():
    def absent(rng, values):
        low, high = min(values), max(values)
        return [rng.randint(low, high) for _ in range(60)]

    share = false_positive_share(
        "bloom_range_filter",
        "bigint",
        lambda rng, n: [rng.randrange(10**9) for _ in range(n)],
        absent,
        0.01,
    )
    assert share <= 0.03, share


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def words(rng, count, size):
    return ["".join(rng.choice(LETTERS) for _ in range(size)) for _ in range(count)]


def test_token_bloom_false_positives_stay_near_fpp():
    share = false_positive_share(
        "token_bloom_filter",
        "string",
        lambda rng, n: [" ".join(words(rng, 3, 7)) for _ in range(n)],
        lambda rng, values: words(rng, 60, 7),
        0.01,
        rows=150,
        present=lambda values: {w for v in values for w in v.split()},
    )
    assert share <= 0.03, share


def test_ngram_bloom_false_positives_stay_near_fpp():
    share = false_positive_share(
        "ngram_bloom_filter",
        "string",
        lambda rng, n: words(rng, n, 4),
        lambda rng, values: words(rng, 80, 3),
        0.01,
        rows=200,
        present=lambda values: {v[i : i + 3] for v in values for i in range(2)},
    )
    assert share <= 0.03, share
