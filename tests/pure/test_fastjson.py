"""The executors' JSON (orjson where it is exact) gives the standard library's values: the same
decoded rows, value for value, for the shared Debezium samples and for random and nasty lines."""

from __future__ import annotations

import json
import math
import random

import pyarrow as pa
import pytest

import sparkext.executors.cdc.fastjson as fastjson
from sparkext.executors.cdc.decode import decode_lines
from tests.helpers.fixtures import DEBEZIUM_SAMPLES

SAMPLES = DEBEZIUM_SAMPLES
NASTY = [
    '{"a": NaN, "b": Infinity, "c": -Infinity}',
    '{"n": 184467440737095516150, "m": -99999999999999999999999}',
    '{"u": 18446744073709551615, "i": -9223372036854775808}',
    '{"s": "\\ud800 lone surrogate"}',
    '{"s": "caf\\u00e9 \\u4e2d\\u6587 \\ud83d\\ude00", "t": "tab\\tquote\\"back\\\\"}',
    '{"f": 1e16, "g": 0.1, "h": -0.0, "k": 5e-324, "l": 1.7976931348623157e308}',
    '{"dup": 1, "dup": 2}',
    '{"deep": [[[[[[[[[[{"x": null}]]]]]]]]]]}',
    '{"not json"',
]


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.randint(-(2**70), 2**70)
    if kind == 1:
        return rng.choice([rng.uniform(-1e300, 1e300), rng.random(), math.nan, math.inf, 0.0])
    if kind == 2:
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)]))
            for _ in range(rng.randrange(8))
        )
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.randint(-1000, 1000)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randrange(4))}


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


@pytest.mark.parametrize("text", NASTY)
def test_nasty_lines_read_as_json_reads_them(text):
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            fastjson.loads(text)
        return
    assert _same(fastjson.loads(text), expected)
    exact = fastjson.needs_stdlib(text)
    assert json.loads(fastjson.dumps(expected, exact)) == expected or "NaN" in text


def test_random_documents_round_trip_exactly():
    rng = random.Random(22)
    for _ in range(3000):
        value = {"after": _random_value(rng), "pos": rng.randint(0, 2**63)}
        text = json.dumps(value)
        exact = fastjson.needs_stdlib(text)
        assert _same(fastjson.loads(text, exact), json.loads(text)), text
        again = fastjson.dumps(fastjson.loads(text, exact), exact)
        assert _same(json.loads(again), json.loads(text)), (text, again)


def _decoded(lines: list[bytes]) -> list[dict]:
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array(lines, pa.binary()), "source_file": ["/l/f.json"] * len(lines)}
    )
    rows = []
    for out in decode_lines(iter([batch])):
        for row in out.to_pylist():
            for name in ("before_json", "after_json", "key_json", "value_schema", "row_types"):
                row[name] = None if row[name] is None else json.loads(row[name])
            rows.append(row)
    return rows


def test_decoded_rows_equal_the_standard_librarys(monkeypatch):
    lines = []
    for path in sorted(SAMPLES.glob("*.json")):
        document = json.loads(path.read_text())
        records = document if isinstance(document, list) else [document]
        lines += [json.dumps(record).encode() for record in records]
    lines += [t.encode() for t in NASTY]
    lines += [b'{"op":"c","after":{"id":1,"x":NaN},"source":{"pos":1,"file":"f","ts_ms":1}}']
    assert len(lines) > 20, len(lines)
    fast = _decoded(lines)
    monkeypatch.setattr(fastjson, "orjson", None)
    slow = _decoded(lines)
    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)
