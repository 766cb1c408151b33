"""Errors are one true sentence (issue 15, item 3): the pure half, no Spark.

Spark's own texts below are copied from Spark 3.5's messages (the Spark half,
tests/spark/test_error_sentences_spark.py, meets them for real).
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkext.actions.rewrite_equality_deletes import check_where
from sparkext.declarations import (
    Expected,
    Option,
    OutputColumn,
    Param,
    ParamType,
    Routine,
    bind_options,
    parse_bytes,
    parse_count,
)
from sparkext.errors import OptionError, ProcedureArgumentError, UnknownRoutineError
from sparkext.iceberg.errors import one_line
from sparkext.procedures.registry import ROUTINES
from sparkext.routing.binding import bind
from sparkext.routing.constants import literal_value
from sparkext.routing.invocations import parse_call
from sparkext.routing.router import scalar_use
from sparkext.routing.tokens import split_statements

# -- item 1: a typed literal that is no valid value ------------------------------------------

ROUTINE = Routine(
    name="demo",
    doc="a routine for tests",
    params=(
        Param("table", ParamType.STRING, "table", required=True),
        Param("as_of", ParamType.TIMESTAMP, "as of", required=True),
        Param("limit", ParamType.LONG, "limit", default=10),
        Param("options", ParamType.STRING_MAP, "options", default={}),
    ),
    options=(Option("size", "1024", "a size", parse_bytes),),
    output=(OutputColumn("x", "bigint", "x"),),
    run=lambda context, args: [],
)


def spark_like(expressions):
    """Literals as Python reads them; anything else as Spark's CAST does outside ANSI mode,
    for the values these tests use: NULL for the invalid texts, a value otherwise."""
    values = []
    for expression in expressions:
        ok, value = literal_value(expression)
        if not ok:
            text = expression.sql("spark")
            bad = ("13-45", "02-30", "'X'", "NOPE", "NULL")
            value = None if any(b in text.upper() for b in bad) else 1
            if value and "TIMESTAMP" in text:
                value = dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)
        values.append(value)
    return values


def call(sql: str, routine: Routine = ROUTINE):
    invocation = parse_call(split_statements(sql)[0])
    return bind(routine, invocation.args, spark_like, lambda name: name)


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (
            "as_of => TIMESTAMP '2026-13-45 00:00:00'",
            "Parameter 'as_of' of sparkext.demo: TIMESTAMP '2026-13-45 00:00:00' is not a valid "
            "timestamp; write it as TIMESTAMP 'yyyy-MM-dd HH:mm:ss'.",
        ),
        (
            "as_of => CAST('2026-02-30 00:00:00' AS TIMESTAMP)",
            "Parameter 'as_of' of sparkext.demo: TIMESTAMP '2026-02-30 00:00:00' is not a valid "
            "timestamp; write it as TIMESTAMP 'yyyy-MM-dd HH:mm:ss'.",
        ),
        (
            "as_of => TIMESTAMP_NTZ '2026-13-45 00:00:00'",
            "Parameter 'as_of' of sparkext.demo: TIMESTAMP_NTZ '2026-13-45 00:00:00' is not a "
            "valid timestamp; write it as TIMESTAMP_NTZ 'yyyy-MM-dd HH:mm:ss'.",
        ),
        (  # inside an expression: the literal that is NULL is named, not the whole
            "as_of => TIMESTAMP '2026-11-21 00:00:00' + (DATE '2026-13-45' - DATE '2026-11-21')",
            "Parameter 'as_of' of sparkext.demo: DATE '2026-13-45' is not a valid date; write it "
            "as DATE 'yyyy-MM-dd'.",
        ),
        (  # not the as_of: any parameter, and a CAST to another type
            "as_of => TIMESTAMP '2026-11-21 00:00:00', limit => CAST('x' AS BIGINT)",
            "Parameter 'limit' of sparkext.demo: CAST('x' AS BIGINT) is NULL: 'x' is not a valid "
            "BIGINT; write a whole number such as 42.",
        ),
        (  # a required parameter whose expression gives NULL without a literal to blame
            "as_of => from_unixtime(nope())",
            "Parameter 'as_of' of sparkext.demo is required, but FROM_UNIXTIME(NOPE()) evaluates "
            "to NULL; check the values in it.",
        ),
        (  # a NULL the user wrote keeps its own sentence
            "as_of => CAST(NULL AS TIMESTAMP)",
            "Parameter 'as_of' of sparkext.demo is required and cannot be NULL.",
        ),
    ],
)
def test_an_invalid_typed_literal_is_named_not_called_null(argument, message):
    with pytest.raises(ProcedureArgumentError) as caught:
        call(f"CALL sparkext.demo(table => 't', {argument})")
    assert str(caught.value) == message


def test_valid_typed_literals_bind():
    bound = call("CALL sparkext.demo(table => 't', as_of => TIMESTAMP '2026-11-21 00:00:00')")
    assert bound["as_of"] == dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)


# -- item 2: where => on an unpartitioned table ----------------------------------------------


def test_where_on_an_unpartitioned_table_says_so_and_what_to_do():
    with pytest.raises(ProcedureArgumentError) as caught:
        check_where("lake.db.t", False, "day = DATE '2026-11-21'")
    assert str(caught.value) == (
        "lake.db.t is unpartitioned, so where => \"day = DATE '2026-11-21'\" has no partition "
        "to select; leave where out to convert all of its equality deletes."
    )
    check_where("lake.db.t", True, "day = DATE '2026-11-21'")
    check_where("lake.db.t", False, None)


def test_catalyst_attribute_ids_never_reach_a_message():
    text = (
        "Cannot convert Spark filter: (v#63 IS NOT NULL) AND (UPPER(v#63) = 'A') to Iceberg "
        "expression; count(1)#399L"
    )
    assert one_line(text) == (
        "Cannot convert Spark filter: (v IS NOT NULL) AND (UPPER(v) = 'A') to Iceberg "
        "expression; count(1)"
    )


# -- item 3: option values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("134217728", 134217728),
        ("128MB", 128 * 2**20),
        ("128 MiB", 128 * 2**20),
        ("128mb", 128 * 2**20),
        ("64M", 64 * 2**20),
        ("1g", 2**30),
        ("1 GB", 2**30),
        ("512k", 512 * 1024),
        ("512 KiB", 512 * 1024),
        ("2t", 2 * 2**40),
        ("100b", 100),
        (" 7 ", 7),
    ],
)
def test_byte_sizes_are_binary_like_spark(text, size):
    assert parse_bytes(text) == size


@pytest.mark.parametrize(
    "text",
    ["four", "", "0", "-5", "1.5GB", "12 parsecs", "1ib", "MB", "١٢", "1_000", "9e9", "8EiB"],
)
def test_bad_byte_sizes_say_what_is_expected(text):
    with pytest.raises(Expected) as caught:
        parse_bytes(text)
    assert str(caught.value) == "a positive whole number of bytes such as 134217728 or 128MB"


@pytest.mark.parametrize("text", ["ten", "0", "-1", "1.0", "1e3"])
def test_bad_counts_say_what_is_expected(text):
    with pytest.raises(Expected, match=r"^a positive whole number$"):
        parse_count(text)


def test_an_option_value_error_is_one_sentence():
    with pytest.raises(OptionError) as caught:
        bind_options(ROUTINE, {"size": "four"})
    assert str(caught.value) == (
        "Option 'size' of sparkext.demo expects a positive whole number of bytes such as "
        "134217728 or 128MB, got 'four'."
    )
    assert bind_options(ROUTINE, {"size": "64MB"}) == {"size": 64 * 2**20}


def test_a_parsers_own_expected_error_gets_the_same_shape():
    def parse_mode(text: str) -> str:
        if text not in ("a", "b"):
            raise ValueError("expected a or b.")
        return text

    routine = Routine(
        "modes", "", (), (), lambda c, a: [], options=(Option("m", "a", "", parse_mode),)
    )
    with pytest.raises(OptionError) as caught:
        bind_options(routine, {"m": "c"})
    assert str(caught.value) == "Option 'm' of sparkext.modes expects a or b, got 'c'."


OPTIONS = [(r, o) for r in ROUTINES.values() for o in r.options if not o.prefix]


@pytest.mark.parametrize(
    ("routine", "option"), OPTIONS, ids=[f"{r.name}:{o.key}" for r, o in OPTIONS]
)
@pytest.mark.parametrize("bad", ["four", "-1", "1.5", "decimal(", "x,"])
def test_every_option_of_every_routine_refuses_in_the_one_shape(routine, option, bad):
    """No option lets Python's wording through ("invalid literal for int() with base 10")."""
    try:
        bind_options(routine, {option.key: bad})
    except OptionError as error:
        assert str(error).startswith(f"Option '{option.key}' of sparkext.{routine.name} expects ")
        assert str(error).endswith(", got '" + bad + "'.")
        assert "int()" not in str(error) and "literal" not in str(error)


def test_every_default_parses_and_flags_are_booleans():
    for _, option in OPTIONS:
        value = option.parse(option.default)
        if option.default in ("true", "false"):
            assert value is (option.default == "true"), option.key


# -- item 4: Spark's messages keep their detail, in one line ---------------------------------

SPARK_TEXTS = [
    (  # the detail after the colon
        "[INSERT_COLUMN_ARITY_MISMATCH.TOO_MANY_DATA_COLUMNS] Cannot write to `lake`.`test`.`p`, "
        "the reason is too many data columns:\nTable columns: `id`, `day`, `v`.\n"
        "Data columns: `col1`, `col2`, `col3`, `col4`.",
        "[INSERT_COLUMN_ARITY_MISMATCH.TOO_MANY_DATA_COLUMNS] Cannot write to `lake`.`test`.`p`, "
        "the reason is too many data columns: Table columns: `id`, `day`, `v`. Data columns: "
        "`col1`, `col2`, `col3`, `col4`.",
    ),
    (  # the hint kept, the query plan and its attribute ids dropped
        '[MISSING_AGGREGATION] The non-aggregating expression "id" is based on columns which '
        "are not participating in the GROUP BY clause.\nAdd the columns or the expression to the "
        'GROUP BY, aggregate the expression, or use "any_value(id)" if you do not care which of '
        "the values within a group is returned.;\nAggregate [day#396], [id#395L, count(1) AS "
        "count(1)#399L]\n+- SubqueryAlias lake.test.p\n   +- RelationV2[id#395L, day#396] "
        "lake.test.p lake.test.p\n",
        '[MISSING_AGGREGATION] The non-aggregating expression "id" is based on columns which are '
        "not participating in the GROUP BY clause. Add the columns or the expression to the "
        'GROUP BY, aggregate the expression, or use "any_value(id)" if you do not care which of '
        "the values within a group is returned.",
    ),
    (  # the position of an analysis error, after the first sentence
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`test`.`nope` cannot be found. "
        "Verify the spelling and correctness of the schema and catalog.\nIf you did not qualify "
        "the name with a schema, verify the current_schema() output, or qualify the name with "
        "the correct schema and catalog.\nTo tolerate the error on drop use DROP VIEW IF EXISTS "
        "or DROP TABLE IF EXISTS.; line 1 pos 14;\n'Project [*]\n+- 'UnresolvedRelation "
        "[lake, test, nope], [], false\n",
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`test`.`nope` cannot be found (line "
        "1, column 15). Verify the spelling and correctness of the schema and catalog. If you did "
        "not qualify the name with a schema, verify the current_schema() output, or qualify the "
        "name with the correct schema and catalog. To tolerate the error on drop use DROP VIEW "
        "IF EXISTS or DROP TABLE IF EXISTS.",
    ),
    (  # a runtime error's query context: the caret block goes, its position stays
        "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and "
        'return NULL instead. If necessary set "spark.sql.ansi.enabled" to "false" to bypass '
        "this error.\n== SQL(line 1, position 8) ==\nSELECT 1/0\n       ^^^\n",
        "[DIVIDE_BY_ZERO] Division by zero (line 1, column 8). Use `try_divide` to tolerate "
        'divisor being 0 and return NULL instead. If necessary set "spark.sql.ansi.enabled" to '
        '"false" to bypass this error.',
    ),
    (  # a task failure: the task's exception, no stack trace
        "Job aborted due to stage failure: Task 0 in stage 16.0 failed 1 times, most recent "
        "failure: Lost task 0.0 in stage 16.0 (TID 16) (host executor driver): "
        "java.lang.RuntimeException: 'false' is not true!\n\tat org.apache.spark.X.y(X.scala:1)"
        "\n\nDriver stacktrace:\n\tat org.apache.spark.Z.z(Z.scala:2)\n",
        "Job aborted due to stage failure: Task 0 in stage 16.0 failed 1 times, most recent "
        "failure: Lost task 0.0 in stage 16.0 (TID 16) (host executor driver): "
        "java.lang.RuntimeException: 'false' is not true!",
    ),
    (  # a SQLSTATE line is noise
        "[E] Something failed.\nSQLSTATE: 42000",
        "[E] Something failed.",
    ),
]


@pytest.mark.parametrize(("text", "sentence"), SPARK_TEXTS)
def test_spark_messages_are_one_line_with_their_detail(text, sentence):
    assert one_line(text) == sentence


def test_a_position_is_in_the_users_text():
    text = "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `idd` cannot be resolved.; line 1 pos 7"
    assert one_line(text, line_offset=4) == (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `idd` cannot be resolved (line 5, column 8)."
    )
    assert one_line(text, positions=False) == (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `idd` cannot be resolved."
    )


# -- item 5: a sparkext routine where a value goes -------------------------------------------

UNRESOLVED = (
    "[UNRESOLVED_ROUTINE] Cannot resolve function `sparkext`.`{}` on search path "
    "[`system`.`builtin`, `system`.`session`, `lake`] (line 1, column 8)."
)


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        (
            "table_health",
            "sparkext.table_health is a table function: use it in FROM (SELECT * FROM "
            "sparkext.table_health(...)) or as CALL sparkext.table_health(...).",
        ),
        (
            "ingest_cdc",
            "sparkext.ingest_cdc is a procedure, not a function: run it as "
            "CALL sparkext.ingest_cdc(...).",
        ),
        (
            "tabel_health",
            "Unknown function 'sparkext.tabel_health' at line 1, column 8 (did you mean "
            "'table_health'?); CALL sparkext.help() lists them.",
        ),
    ],
)
def test_a_routine_used_as_a_scalar_function_says_how_to_use_it(name, sentence):
    error = scalar_use(UNRESOLVED.format(name))
    assert isinstance(error, UnknownRoutineError)
    assert str(error) == sentence


def test_other_unresolved_functions_stay_sparks():
    text = "[UNRESOLVED_ROUTINE] Cannot resolve function `nope_fn` on search path [] (line 1)."
    assert scalar_use(text) is None


# -- item 6: trailing commas in a streaming job, refused as Flink refuses them ----------------

SINK = "INSERT INTO lake.db.s\n"


@pytest.mark.parametrize(
    ("job", "sentence"),
    [
        (
            SINK + "SELECT user_id, COUNT(*) FROM lake.db.clicks\n"
            "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), user_id,;",
            "line 3, column 50: the GROUP BY list ends with a comma before ';'; remove the "
            "trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT user_id FROM lake.db.clicks GROUP BY user_id,",
            "line 2, column 52: the GROUP BY list ends with a comma at the end of the job; "
            "remove the trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT user_id,\n  item_id,\nFROM lake.db.clicks",
            "line 3, column 10: the SELECT list ends with a comma before 'FROM'; remove the "
            "trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT user_id FROM lake.db.clicks ORDER BY ts, user_id,\nLIMIT 3",
            "line 2, column 56: the ORDER BY list ends with a comma before 'LIMIT'; remove the "
            "trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT ROW_NUMBER() OVER (PARTITION BY user_id, ORDER BY ts) FROM lake.db.c",
            "line 2, column 47: the PARTITION BY list ends with a comma before 'ORDER BY'; "
            "remove the trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT * FROM TABLE(TUMBLE(TABLE lake.db.c PARTITION BY (a, b,), "
            "DESCRIPTOR(ts), INTERVAL '1' MINUTE))",
            "line 2, column 62: the PARTITION BY list ends with a comma before ')'; remove the "
            "trailing comma (Flink SQL does not allow one).",
        ),
        (
            "CREATE TABLE lake.db.c (a INT, b INT,);\n" + SINK + "SELECT a FROM lake.db.c",
            "line 1, column 37: the list in parentheses ends with a comma before ')'; remove the "
            "trailing comma (Flink SQL does not allow one).",
        ),
        (
            SINK + "SELECT a,, b FROM lake.db.c",
            "line 2, column 9: two commas in a row; remove one (Flink SQL has no empty list item).",
        ),
    ],
)
def test_a_trailing_comma_in_a_job_is_a_parse_error_with_its_place(job, sentence):
    from sparkext.streaming.job import StreamingSqlError, check_syntax, parse_job

    for parse in (check_syntax, parse_job):
        with pytest.raises(StreamingSqlError) as caught:
            parse(job)
        assert str(caught.value) == sentence
        line, column = (int(n) for n in re.match(r"line (\d+), column (\d+)", sentence).groups())
        assert (caught.value.line, caught.value.column) == (line, column)
        assert job.splitlines()[line - 1][column - 1] == ","


@pytest.mark.parametrize(
    "job",
    [
        SINK + "SELECT ',)' AS a, LEFT(s, 1) FROM lake.db.c "
        "GROUP BY a, SESSION(ts, INTERVAL '1' MINUTE)",
        SINK + "SELECT a -- b,\nFROM lake.db.c",
        SINK + "SELECT a /* , */ FROM lake.db.c GROUP BY a, b",
    ],
)
def test_commas_inside_strings_comments_and_lists_are_fine(job):
    from sparkext.streaming.job import check_syntax

    check_syntax(job)


# -- item 7: a job's syntax checked before Spark starts ---------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_check_syntax_reports_a_syntax_error_with_line_and_column():
    from sparkext.streaming.job import StreamingSqlError, check_syntax

    job = (ROOT / "sql" / "jobs" / "clicks_per_minute.sql").read_text(encoding="utf-8")
    broken = job.replace("GROUP BY window_start", "GROUP window_start")
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "GROUP window" in text)
    with pytest.raises(StreamingSqlError) as caught:
        check_syntax(broken)
    assert caught.value.line == line and caught.value.column is not None
    assert str(caught.value).startswith(f"line {line}, column {caught.value.column}: ")


@pytest.mark.parametrize(
    ("job", "sentence"),
    [
        (
            SINK + "SELECT 'abc FROM lake.db.c",
            "line 2, column 8: an unterminated string, quoted identifier or comment starts at "
            "''abc FROM lake.db.c'; close it.",
        ),
        (
            "SET 'table.exec.state.ttl' = 'ten';\n" + SINK + "SELECT a FROM lake.db.c",
            "line 1, column 26: SET 'table.exec.state.ttl': 'ten' is not a duration; write a "
            "number and a unit, e.g. '10 minutes' or '1 h'.",
        ),
        (
            SINK + "SELECT * FROM lake.db.c MATCH_RECOGNIZE (ORDER BY ts)",
            "line 2, column 39: MATCH_RECOGNIZE (row pattern matching) has no Spark equivalent "
            "and sparkext does not run it; express the pattern with window functions (LAG/LEAD "
            "over the event time) or run this job on Flink.",
        ),
        (
            SINK + "SELECT a FROM lake.db.c WHERE AND b",
            "line 2, column 35: syntax error (near 'b').",
        ),
    ],
)
def test_check_syntax_raises_what_the_run_would(job, sentence):
    from sparkext.streaming.job import StreamingSqlError, check_syntax

    with pytest.raises(StreamingSqlError) as caught:
        check_syntax(job)
    assert str(caught.value) == sentence


def _shipped_jobs() -> list[tuple[str, str, str | None]]:
    from tests.pure.test_streaming_rules import load_cases

    jobs = [
        (path.name, path.read_text(encoding="utf-8"), None)
        for path in sorted((ROOT / "sql" / "jobs").glob("*.sql"))
    ]
    for path in sorted((ROOT / "tests" / "fixtures" / "streaming").glob("*.sql")):
        for case in load_cases(path):
            jobs.append((f"{path.stem}: {case.title}", case.preamble + "\n" + case.sql, case.error))
    return jobs


JOBS = _shipped_jobs()


@pytest.mark.parametrize(("name", "job", "error"), JOBS, ids=[name for name, _, _ in JOBS])
def test_shipped_jobs_and_fixtures_pass_check_syntax(name, job, error):
    """A fixture that expects an error may meet it here already (it is parse-level), and
    then it is the very same sentence."""
    from sparkext.streaming.job import StreamingSqlError, check_syntax

    try:
        check_syntax(job)
    except StreamingSqlError as caught:
        assert error is not None and error in str(caught), (name, str(caught))


def test_check_syntax_needs_no_spark_and_is_quick():
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from sparkext.streaming.job import check_syntax\n"
        f"text = Path({str(ROOT / 'sql' / 'jobs' / 'clicks_per_minute.sql')!r}).read_text()\n"
        "began = time.perf_counter()\n"
        "check_syntax(text)\n"
        "print(time.perf_counter() - began)\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert float(done.stdout) < 0.5
