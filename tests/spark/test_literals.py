"""sparkext.literals.in_list against Python's own membership test, on Spark."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

from sparkext.literals import in_list, in_list_sql


def test_two_thousand_strings_with_nulls_match_python_membership(spark):
    rng = random.Random(20261122)
    alphabet = ["a", "'", "\\", '"', "`", "é", "字", " ", ";", "\n", "%", "_"]
    universe = ["".join(rng.choices(alphabet, k=rng.randint(0, 6))) for _ in range(4000)]
    rows = [*universe, None, None]
    wanted = [*rng.sample(universe, 2000), None]
    frame = spark.createDataFrame([(v,) for v in rows], "`we``ird.key` string")
    found = frame.where(in_list("we`ird.key", wanted)).collect()
    expected = [v for v in rows if v in set(wanted)]  # None matches None: null-safe
    assert sorted(found, key=repr) == sorted([(v,) for v in expected], key=repr)
    without_null = frame.where(in_list("we`ird.key", [w for w in wanted if w is not None]))
    assert without_null.where("`we``ird.key` IS NULL").count() == 0


@pytest.mark.parametrize(
    ("ddl", "values", "wanted"),
    [
        ("bigint", [-(2**63), 0, 2**63 - 1, 7], [2**63 - 1, -(2**63)]),
        ("decimal(20,2)", [Decimal("1.50"), Decimal("-0.01"), Decimal("3")], [Decimal("1.5")]),
        ("date", [dt.date(1900, 1, 1), dt.date(2026, 11, 22)], [dt.date(2026, 11, 22)]),
        ("binary", [b"\x00'", b"ab", b""], [b"\x00'", b""]),
        ("double", [1.5, float("nan"), float("-inf")], [float("nan"), 1.5]),
        ("boolean", [True, False, None], [False]),
    ],
)
def test_other_key_types(spark, ddl, values, wanted):
    frame = spark.createDataFrame([(v,) for v in values], f"k {ddl}")
    found = [r.k for r in frame.where(in_list("k", wanted)).collect()]
    assert len(found) == len(wanted)


def test_timestamps_have_no_literal_and_an_empty_list_matches_nothing(spark):
    assert in_list_sql("t", [dt.datetime(2026, 1, 1)]) is None
    assert spark.range(3).where(in_list("id", [])).count() == 0
