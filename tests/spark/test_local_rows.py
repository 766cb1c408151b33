"""Procedure results built on the JVM (``local_frame``) equal ``createDataFrame``'s, value for
value, for every type a routine declares; a wrong type still fails."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest

from sparkext.procedures.registry import ROUTINES
from sparkext.routing.local_rows import local_frame

DDL = "s string, b bigint, i int, d double, f boolean, t timestamp"


def _value(kind: str, rng: random.Random):
    if rng.random() < 0.15:
        return None
    if kind == "s":
        return rng.choice(
            ["", "plain", 'quote " and \\ back', "line\nbreak", "é中文\u2028", "\x00"]
        )
    if kind == "b":
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(10**12), 10**12)])
    if kind == "i":
        return rng.choice([0, 2**31 - 1, -(2**31), rng.randint(-1000, 1000)])
    if kind == "d":
        return rng.choice(
            [0.0, -0.0, 1e308, 5e-324, math.inf, -math.inf, math.nan, rng.uniform(-1e6, 1e6)]
        )
    if kind == "f":
        return rng.choice([True, False])
    naive = dt.datetime(1900, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 2**52))
    return rng.choice([naive, naive.replace(tzinfo=dt.timezone(dt.timedelta(hours=8)))])


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


def test_random_rows_equal_create_data_frame(spark):
    rng = random.Random(7)
    rows = [tuple(_value(k, rng) for k in "sbidft") for _ in range(300)]
    ours = local_frame(spark, rows, DDL)
    theirs = spark.createDataFrame(rows, DDL)
    assert ours.schema == theirs.schema
    for mine, expected in zip(ours.collect(), theirs.collect(), strict=True):
        assert all(_same(a, b) for a, b in zip(mine, expected, strict=True)), (mine, expected)


def test_dicts_empty_and_every_declared_output(spark):
    assert local_frame(spark, [], DDL).collect() == []
    assert local_frame(spark, [{"s": "x", "t": None}], DDL).first().asDict() == {
        "s": "x",
        "b": None,
        "i": None,
        "d": None,
        "f": None,
        "t": None,
    }
    for routine in ROUTINES.values():  # every declared output schema parses and round-trips
        if routine.output:
            frame = local_frame(spark, [], routine.output_ddl)
            assert frame.columns == [c.name for c in routine.output]


def test_a_wrong_type_fails_as_before(spark):
    with pytest.raises(TypeError, match="LongType"):
        local_frame(spark, [("x", "not a number", None, None, None, None)], DDL)


def test_text_spark_would_substitute_or_unescape_stays_as_it_was(spark):
    """Spark's parser replaces ``${...}`` even inside string literals and reads their escapes as
    ``spark.sql.parser.escapedStringLiterals`` says: result values come back as they went in."""
    texts = ["${", "}", "${x}", "${env:HOME}", "${spark:spark.app.name}", "\\u00e9 \\' \\\\ '"]
    rows = [{"s": text} for text in texts]
    for escaped in ("false", "true"):
        spark.conf.set("spark.sql.parser.escapedStringLiterals", escaped)
        try:
            got = [r.s for r in local_frame(spark, rows, DDL).collect()]
        finally:
            spark.conf.unset("spark.sql.parser.escapedStringLiterals")
        assert got == texts, escaped
