"""The oracle of tests/spark/test_skipping_differential.py, on its own: hand-worked cases, and
idxcore's ``prune`` inside the oracle's bounds on random files and predicates (the Spark-level
test then needs a Spark session only for what Spark adds: the filter's translation, the scan,
the rows)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from tests.helpers.skipping_oracle import (
    FileFacts,
    Index,
    bounds,
    canonical,
    expected,
    like_regex,
    literal_parts,
    push_not,
    token_conditions,
)


def leaf(op: str, col: str = "w", **rest) -> dict:
    return {"op": op, "col": col, "type": rest.pop("type", "string"), **rest}


def test_like_patterns_and_token_conditions():
    assert like_regex("a\\%b_c%").fullmatch("a%bxcdef")
    assert not like_regex("a\\%b_c%").fullmatch("a%bcdef")
    parts = literal_parts(leaf("like", pattern="% timeout %"))
    assert parts == [(" timeout ", False, False)]
    assert token_conditions(parts, lower=True, whole_only=False) == [("token", "timeout")]
    parts = literal_parts(leaf("like", pattern="Time out%"))
    assert token_conditions(parts, lower=True, whole_only=False) == [
        ("token", "time"),
        ("prefix", "out"),
    ]
    parts = literal_parts(leaf("like", pattern="%time-out_x"))
    assert token_conditions(parts, lower=False, whole_only=False) == [
        ("suffix", "time"),
        ("prefix", "out"),
        ("suffix", "x"),
    ]
    assert token_conditions(parts, lower=False, whole_only=True) == []


def test_not_is_pushed_down_with_sql_null_rules():
    tree = {
        "op": "not",
        "arg": {
            "op": "and",
            "args": [
                leaf("eq", "i", type="int", value=5),
                leaf("lt", "i", type="int", value=3),
                leaf("like", pattern="a%"),
                {"op": "in", "col": "i", "type": "int", "values": [1, None]},
            ],
        },
    }
    pushed = push_not(tree)
    assert pushed["op"] == "or"
    ops = [a["op"] for a in pushed["args"]]
    assert ops == ["ne", "ge", "const", "const"]
    assert pushed["args"][2]["value"] is True  # not like: may be true
    assert pushed["args"][3]["value"] is False  # not in with a NULL: never true


def test_bounds_of_the_exact_types():
    facts = FileFacts(
        "f",
        {
            "i": [1, 5, 9, None],
            "w": ["Upstream timeout after 3 ms", "cache miss"],
        },
    )
    indexes = [Index("bitmap", "i"), Index("token_bitmap", "w"), Index("ngram_bitmap", "w")]

    def check(node: dict) -> tuple[bool, bool]:
        return bounds(push_not(node), facts, indexes)

    assert check(leaf("eq", "i", type="int", value=5)) == (True, True)
    assert check(leaf("eq", "i", type="bigint", value=6)) == (False, False)
    # a range group: no single value is in (5, 9)
    both = {"op": "and", "args": [leaf("gt", "i", type="int", value=5),
                                  leaf("lt", "i", type="int", value=9)]}  # fmt: skip
    assert check(both) == (False, False)
    assert check(leaf("like", pattern="%TIMEOUT%")) == (True, True)  # folded index, unfolded leaf
    assert check(leaf("like", pattern="%timeouts%")) == (False, False)
    assert check(leaf("like", pattern="%time out%")) == (False, False)
    assert check(leaf("like", pattern="%eout aft%")) == (True, True)
    assert check(leaf("like", pattern="%ss%")) == (True, True)  # too short for 3-grams
    assert check(leaf("like", pattern="%ab%")) == (False, False)  # no token holds "ab"
    assert check(leaf("eq", value="cache miss")) == (True, True)
    assert check(leaf("eq", value="cache hit")) == (False, False)
    assert check(leaf("like", fold="lower", pattern="%TIMEOUT%")) == (False, False)
    assert check({"op": "not", "arg": leaf("like", pattern="%x%")}) == (True, True)
    assert expected(leaf("eq", "i", type="int", value=6), [None], indexes) == [(True, True)]
    assert expected({"op": "in", "col": "i", "type": "int", "values": [None]}, [None], []) == [
        (False, False)
    ]


def test_canonical_values():
    assert canonical(dt.date(1970, 1, 2)) == 1
    assert canonical(dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)) == 1_000_000
    assert canonical(dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000  # timestamp_ntz
    assert canonical(Decimal("1.50")) == Decimal("1.5")


# ---------------------------------------------------------------------------------------------
# the core inside the oracle's bounds

COLUMNS = {"i": "int", "d": "decimal(9,2)", "s": "string", "w": "string", "t": "string"}
INDEXES = [
    ("bitmap", "i"),
    ("bloom_range_filter", "i"),
    ("bitmap", "d"),
    ("bloom_filter", "s"),
    ("token_bitmap", "w"),
    ("ngram_bitmap", "w"),
    ("token_bloom_filter", "t"),
    ("ngram_bloom_filter", "t"),
]
WORDS = ["alpha", "beta", "gamma", "delta", "time", "timeout", "out", "Tmo", "x"]


def _text(rng: random.Random, group: int) -> str:
    words = WORDS[group % 4 : group % 4 + 4]
    return rng.choice([" ", "-", ", "]).join(rng.choice(words) for _ in range(rng.randint(1, 4)))


def _file(rng: random.Random, group: int) -> dict[str, list]:
    n = rng.randint(1, 8)

    def maybe(value):
        return None if rng.random() < 0.1 else value

    return {
        "i": [maybe(group * 3 + rng.randint(0, 5)) for _ in range(n)],
        "d": [maybe(Decimal(rng.randint(0, 40)) / 4) for _ in range(n)],
        "s": [maybe(f"k{group}{rng.randint(0, 3)}") for _ in range(n)],
        "w": [maybe(_text(rng, group)) for _ in range(n)],
        "t": [maybe(_text(rng, group + 1)) for _ in range(n)],
    }


def _leaf(rng: random.Random) -> dict:
    col = rng.choice(list(COLUMNS))
    if col == "i":
        op = rng.choice(["eq", "ne", "lt", "le", "gt", "ge", "in", "eq_null_safe", "is_null"])
        value = rng.randint(-2, 30)
        if op == "in":
            return {"op": op, "col": col, "type": "int", "values": [value, rng.randint(0, 30)]}
        return {"op": op, "col": col, "type": rng.choice(["int", "bigint"]), "value": value}
    if col == "d":
        op = rng.choice(["eq", "lt", "ge", "in", "ne"])
        value = str(Decimal(rng.randint(0, 40)) / 4)
        if op == "in":
            return {"op": op, "col": col, "type": "decimal(9,2)", "values": [value]}
        return {"op": op, "col": col, "type": "decimal(10,2)", "value": value}
    if col == "s":
        op = rng.choice(["eq", "in", "is_not_null", "eq_null_safe"])
        value = f"k{rng.randint(0, 9)}{rng.randint(0, 3)}"
        if op == "in":
            return {"op": op, "col": col, "type": "string", "values": [value, "k00"]}
        return {"op": op, "col": col, "type": "string", "value": value}
    word = rng.choice(WORDS)
    pattern = rng.choice(
        [f"%{word}%", f"{word} %", f"% {word}", f"%{word[:3]}%", f"{word}", f"%{word} %",
         f"%{word[1:]}-%", "%a_p%"]
    )  # fmt: skip
    out = {"op": "like", "col": col, "type": "string", "pattern": pattern, "escape": "\\"}
    if rng.random() < 0.2:
        out = {"op": "contains", "col": col, "type": "string", "value": word}
    if rng.random() < 0.2:
        out["fold"] = "lower"
    return out


def _predicate(rng: random.Random, depth: int = 0) -> dict:
    if depth < 3 and rng.random() < 0.5:
        op = rng.choice(["and", "or", "not"])
        if op == "not":
            return {"op": "not", "arg": _predicate(rng, depth + 1)}
        return {"op": op, "args": [_predicate(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    return _leaf(rng)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_core_keeps_what_the_oracle_bounds(seed):
    skipping = pytest.importorskip("sparkext.planning.skipping")
    rng = random.Random(seed)
    files = {f"f{g}.parquet": _file(rng, g) for g in range(12)}
    loaded = []
    for number, (kind, column) in enumerate(INDEXES):
        spec = skipping.validate_spec(f"ix{number}", kind, [column], {}, COLUMNS)
        entries = [
            (path, skipping.build_entry(spec, COLUMNS[column], _arrow(COLUMNS[column], values)))
            for path, values in ((p, f[column]) for p, f in files.items())
        ]
        loaded.append(skipping.decode_blob(skipping.encode_blob(spec, COLUMNS[column], entries)))
    oracle_indexes = [Index(kind, column) for kind, column in INDEXES]
    candidates = [*files, "unlisted.parquet"]
    facts = [FileFacts(p, f) for p, f in files.items()] + [None]
    exact = 0
    for _ in range(600):
        predicate = _predicate(rng)
        keep = skipping.prune(loaded, predicate, candidates).keep.tolist()
        for path, k, (lo, hi) in zip(
            candidates, keep, expected(predicate, facts, oracle_indexes), strict=True
        ):
            assert lo <= k <= hi, (predicate, path, files.get(path), k, lo, hi)
            exact += lo == hi
    assert exact > 0.5 * 600 * len(candidates)


def _arrow(type_name: str, values: list) -> pa.Array:
    if type_name == "int":
        return pa.array(values, pa.int32())
    if type_name.startswith("decimal"):
        return pa.array(values, pa.decimal128(9, 2))
    return pa.array(values, pa.string())
