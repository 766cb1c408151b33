"""Bad input, systematically (issue 53): calls of every routine generated from its declaration.

Hypothesis builds each call from the routine's parameters and options, then makes it wrong in at
least one way a user could: an unknown parameter, an unknown option key, a missing required
argument, a value of the wrong type, or a table name nobody has (quotes, backquotes, dots,
unicode, ``; DROP TABLE …``, 10,000 characters). Around it the other arguments are anything:
NULLs, empty and huge strings, odd identifiers, odd option values. Every call must be refused
with one sentence and no Java or Python trace, leave every table's snapshot where it was and
leave no file behind. The default tier runs a fixed seed and a small budget; the stress tier
runs a larger one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkext
from sparkext.declarations import Kind, ParamType, Routine
from sparkext.literals import sql_string
from sparkext.procedures.registry import ROUTINES

T = "lake.fuzz.t"
ODD_NAMES = (
    "",
    "x" * 10_000,
    "lake.fuzz.t'; DROP TABLE lake.fuzz.t; --",
    "lake.fuzz.`t`",
    "lake.fuzz.no_such",
    "lake..t",
    "`lake`.`fuzz`.`t``x`",
    "湖.表",
    "lake.fuzz.t\n",
    "a.b.c.d.e",
    "${hiveconf:x}",
    "NULL",
    "lake.fuzz.t%",
    "\\",
)
ODD_STRINGS = (*ODD_NAMES, "1", "-1", "true", "2026-13-45", "0x", "1e999", "l9", "'", "\u0000")
WRONG = {
    ParamType.STRING: ("map('a', 'b')", "array(1)"),
    ParamType.TABLE: ("42", "true", "array('lake.fuzz.t')"),
    ParamType.LONG: ("'abc'", "true", "1.5e400", "array(1)"),
    ParamType.DOUBLE: ("'x'", "map('a', 'b')"),
    ParamType.BOOLEAN: ("3", "'maybe'"),
    ParamType.TIMESTAMP: ("'not a time'", "true", "array(1)"),
    ParamType.INTERVAL: ("'soon'", "true"),
    ParamType.STRING_MAP: ("'x'", "array('a')", "map(1, 2)"),
    ParamType.STRING_ARRAY: ("3", "'x'"),
    ParamType.SNAPSHOT: ("true", "array(1)", "map('a', 'b')"),
}


def plausible(kind: ParamType, routine: Routine) -> st.SearchStrategy[str]:
    """Values of the right type, odd ones included."""
    strings = st.sampled_from(ODD_STRINGS).map(sql_string)
    keys = [o.key for o in routine.options] or ["k"]
    option_values = st.sampled_from(["", "0", "-1", "99999999999999999999", "x" * 5000, "true"])
    return {
        ParamType.STRING: strings | st.just("NULL"),
        ParamType.TABLE: st.just(sql_string(T)),
        ParamType.LONG: st.sampled_from(["0", "-1", "1", "9223372036854775807", "NULL"]),
        ParamType.DOUBLE: st.sampled_from(["0.0", "-1.5", "1e308", "NULL"]),
        ParamType.BOOLEAN: st.sampled_from(["true", "false", "NULL"]),
        ParamType.TIMESTAMP: st.sampled_from(
            ["TIMESTAMP '2026-01-01 00:00:00'", "TIMESTAMP '1900-01-01 00:00:00'", "NULL"]
        ),
        ParamType.INTERVAL: st.sampled_from(["INTERVAL 1 HOUR", "INTERVAL -1 DAY", "NULL"]),
        ParamType.STRING_MAP: st.lists(
            st.tuples(st.sampled_from(keys), option_values), max_size=3
        ).map(
            lambda kv: "map(" + ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in kv) + ")"
        ),
        ParamType.STRING_ARRAY: st.lists(strings, max_size=3).map(
            lambda v: f"array({', '.join(v)})"
        ),
        ParamType.SNAPSHOT: st.sampled_from(["1", "'v1'", "TIMESTAMP '2026-01-01 00:00:00'"]),
    }[kind]


@st.composite
def bad_calls(draw) -> str:
    name = draw(st.sampled_from(sorted(ROUTINES)))
    base = ROUTINES[name]
    kinds = [k for k in (Kind.PROCEDURE, Kind.FUNCTION) if k in base.kind]
    kind = draw(st.sampled_from(kinds))
    routine = base.for_kind(kind)
    args = {p.name: draw(plausible(p.type, routine)) for p in routine.params if p.required}
    for param in routine.params:
        if not param.required and draw(st.booleans()):
            args[param.name] = draw(plausible(param.type, routine))
    # at least one thing a binding must refuse
    wrongs = ["unknown parameter"]
    if routine.options:
        wrongs.append("unknown option")
    if any(p.required for p in routine.params):
        wrongs.append("missing required")
    if any(p.type in WRONG for p in routine.params):
        wrongs.append("wrong type")
    if any(p.type == ParamType.TABLE for p in routine.params):
        wrongs.append("no such table")
    wrong = draw(st.sampled_from(wrongs))
    if wrong == "unknown parameter":
        args[draw(st.sampled_from(["nosuch", "tabel", "`x`", "table2"]))] = "1"
    elif wrong == "unknown option":
        option = next(p.name for p in routine.params if p.type == ParamType.STRING_MAP)
        key = draw(st.sampled_from(["no-such-option", "", "x" * 300, "a'b", "k.`v`"]))
        args[option] = f"map({sql_string(key)}, 'v')"
    elif wrong == "missing required":
        args.pop(draw(st.sampled_from([p.name for p in routine.params if p.required])))
    elif wrong == "wrong type":
        param = draw(st.sampled_from([p for p in routine.params if p.type in WRONG]))
        args[param.name] = draw(st.sampled_from(WRONG[param.type]))
    else:
        param = next(p for p in routine.params if p.type == ParamType.TABLE)
        # Spark reads these two as lake.fuzz.t itself (quotes and a trailing line break)
        odd = [n for n in ODD_NAMES if n not in ("lake.fuzz.`t`", "lake.fuzz.t\n")]
        args[param.name] = sql_string(draw(st.sampled_from(odd)))
    text = ", ".join(f"{k} => {v}" for k, v in args.items())
    if kind == Kind.PROCEDURE:
        return f"CALL sparkext.{name}({text})"
    return f"SELECT * FROM sparkext.{name}({text})"


def _files(root: Path) -> set[str]:
    audit = os.path.join("sparkext", "audit_log")  # the audit log's own rows are expected
    return {os.path.join(d, f) for d, _, files in os.walk(root) if audit not in d for f in files}


def _snapshots(spark) -> dict[str, int | None]:
    out = {}
    for row in spark.sql("SHOW TABLES IN lake.fuzz").collect():
        name = f"lake.fuzz.{row.tableName}"
        first = spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at DESC")
        got = first.first()
        out[name] = got[0] if got else None
    return out


@pytest.fixture(scope="module")
def fuzz_table(spark):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.fuzz")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} (id bigint, v string) USING iceberg")
    spark.sql(f"INSERT INTO {T} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"ALTER TABLE {T} CREATE TAG v1")
    return T


def _check(spark, warehouse: Path, sql: str, route: str) -> None:
    from pyspark.errors import PySparkException

    before, files = _snapshots(spark), _files(warehouse)
    try:
        if route == "python":
            sparkext.sql(sql).collect()
        else:
            spark.sql(sql).collect()
    except (sparkext.SparkextError, PySparkException) as error:
        message = str(error)
    else:
        raise AssertionError(f"accepted: {sql[:500]}")
    shown = f"{sql[:300]} -> {message[:300]}"
    assert message.strip() and "\n" not in message.strip(), shown
    for trace in ("\tat ", "Traceback", "java.lang.", "py4j", "Exception:", "Error:"):
        assert trace not in message, shown
    assert _snapshots(spark) == before, shown
    assert _files(warehouse) == files, shown


def _fuzz(spark, warehouse, budget: int):
    @settings(
        max_examples=budget,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(sql=bad_calls(), route=st.sampled_from(["python", "spark.sql"]))
    def run(sql, route):
        _check(spark, warehouse, sql, route)

    run()


def test_generated_bad_calls_are_one_sentence_and_change_nothing(spark, warehouse, fuzz_table):
    _fuzz(spark, warehouse, budget=60)


@pytest.mark.stress
def test_generated_bad_calls_at_a_larger_budget(spark, warehouse, fuzz_table):
    _fuzz(spark, warehouse, budget=1500)
