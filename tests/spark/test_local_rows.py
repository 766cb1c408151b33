"""Procedure results built on the JVM (``local_frame``) equal ``createDataFrame``'s, value for
value, for every type a routine declares, on each of its paths (a local relation; without the
extension's jar, a JSON literal; too large for the plan, ``createDataFrame``); a wrong type still
fails; collecting a routine's rows starts no Spark job, so no Python worker either."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import time
from decimal import Decimal

import pytest

import sparkext
from sparkext.procedures.registry import ROUTINES
from sparkext.routing import local_rows
from sparkext.routing.local_rows import local_frame
from sparkext.spark import local_relation

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


_groups = itertools.count(1)


@pytest.fixture(params=["local relation", "json literal", "create data frame"])
def path(request, monkeypatch) -> str:
    """Each way ``local_frame`` can build a result, forced."""
    if request.param == "json literal":  # as in a session without the extension's jar
        monkeypatch.setattr(local_relation, "local_relation", lambda *args: None)
    elif request.param == "create data frame":  # as a result above the local relation's bound
        monkeypatch.setattr(local_rows, "MAX_LOCAL_BYTES", 0)
        monkeypatch.setattr(local_rows, "MAX_LITERAL_CHARS", 0)
    return request.param


def _plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().nodeName()


def _jobs(spark, run) -> int:
    """How many Spark jobs ``run()`` started on this thread. The status tracker learns of jobs
    from the listener bus, in order: once a marker job run after it is known, so is every job
    ``run`` started."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    group, marker = f"local-rows-{next(_groups)}", f"local-rows-marker-{next(_groups)}"
    try:
        context.setJobGroup(group, "counted")
        run()
        context.setJobGroup(marker, "marker")
        spark.range(1).collect()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    for _ in range(600):
        if tracker.getJobIdsForGroup(marker):
            return len(tracker.getJobIdsForGroup(group))
        time.sleep(0.05)
    raise AssertionError("the marker job never reached the status tracker")


def test_collecting_a_routines_rows_runs_no_job_on_either_route(spark):
    """``help``'s rows are a local relation through spark.sql and sparkext.sql alike: collected
    by a local table scan, no job (so no Python worker), as Iceberg's procedures' rows are."""
    assert _jobs(spark, lambda: spark.range(3).collect()) >= 1  # the count sees a job
    for statement in ("CALL sparkext.help()", "SELECT * FROM sparkext.help()"):
        for route in (spark.sql, sparkext.sql):
            frame = route(statement)
            assert _plan(frame) == "LocalTableScan", (route, statement)
            assert _jobs(spark, frame.collect) == 0, (route, statement)
            assert len(frame.collect()) == len(ROUTINES)


def test_types_round_trip_in_a_session_time_zone_that_is_not_utc(spark, path):
    """Timestamps (top level and nested), dates, decimals, maps, arrays, structs, binary, floats
    and nulls come out as ``createDataFrame`` makes them, and read the same in the session's
    zone."""
    ddl = (
        "s string, d decimal(20,4), m map<string,bigint>, a array<timestamp>, t timestamp, "
        "day date, st struct<x:int,y:string>, b binary, f float, ntz timestamp_ntz"
    )
    stamp = dt.datetime(2024, 3, 10, 2, 30)  # an hour that does not exist in Los Angeles
    rows = [
        (
            "x",
            Decimal("-1234567890123456.7891"),
            {"a": 1, "b": None},
            [stamp, None, stamp.replace(tzinfo=dt.timezone.utc)],
            dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
            dt.date(2020, 2, 29),
            (1, "y"),
            bytearray(b"\x00\xff"),
            1.5,
            dt.datetime(2024, 1, 1, 12),
        ),
        {"s": "only a name", "t": stamp},
        (None,) * 10,
    ]
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        ours, theirs = local_frame(spark, rows, ddl), spark.createDataFrame(rows, ddl)
        assert ours.schema == theirs.schema
        assert ours.collect() == theirs.collect()
        as_text = [f"cast({c} as string)" for c in ours.columns]
        assert ours.selectExpr(*as_text).collect() == theirs.selectExpr(*as_text).collect()
        assert local_frame(spark, [], ddl).collect() == []
        if path == "local relation":
            assert _plan(ours) == "LocalTableScan"
    finally:
        spark.conf.unset("spark.sql.session.timeZone")


def test_random_rows_equal_create_data_frame(spark, path):
    rng = random.Random(7)
    rows = [tuple(_value(k, rng) for k in "sbidft") for _ in range(300)]
    ours = local_frame(spark, rows, DDL)
    theirs = spark.createDataFrame(rows, DDL)
    assert ours.schema == theirs.schema
    for mine, expected in zip(ours.collect(), theirs.collect(), strict=True):
        assert all(_same(a, b) for a, b in zip(mine, expected, strict=True)), (mine, expected)


def test_dicts_empty_and_every_declared_output(spark, path):
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


def test_a_wrong_type_fails_as_before(spark, path):
    with pytest.raises(TypeError, match="LongType"):
        local_frame(spark, [("x", "not a number", None, None, None, None)], DDL)


def test_text_spark_would_substitute_or_unescape_stays_as_it_was(spark, path):
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
