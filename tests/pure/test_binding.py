from __future__ import annotations

import datetime as dt

import pytest

from sparkext.declarations import Option, OutputColumn, Param, ParamType, Routine
from sparkext.errors import OptionError, ProcedureArgumentError
from sparkext.routing.binding import bind
from sparkext.routing.constants import literal_value
from sparkext.routing.invocations import parse_call
from sparkext.routing.tokens import split_statements

ROUTINE = Routine(
    name="demo",
    doc="a routine for tests",
    params=(
        Param("table", ParamType.TABLE, "table", required=True),
        Param("limit", ParamType.LONG, "limit", default=10),
        Param("dry_run", ParamType.BOOLEAN, "dry run", default=False),
        Param("as_of", ParamType.TIMESTAMP, "as of"),
        Param("options", ParamType.STRING_MAP, "options", default={}),
        Param("at", ParamType.SNAPSHOT, "a point in the table's history"),
    ),
    options=(Option("min-files", "5", "minimum files", int),),
    output=(OutputColumn("x", "bigint", "x"),),
    run=lambda context, args: [],
)


def python_evaluate(expressions):
    """Literal evaluation only; Spark evaluation is covered by the Spark tests."""
    values = []
    for e in expressions:
        ok, value = literal_value(e)
        assert ok, e
        values.append(value)
    return values


def call(sql: str, evaluate=python_evaluate):
    invocation = parse_call(split_statements(sql)[0])
    return bind(ROUTINE, invocation.args, evaluate, lambda name: f"<{name}>")


def test_named_binding_fills_defaults_and_resolves_tables():
    bound = call("CALL sparkext.demo(limit => 3, table => 'db.t')")
    assert bound["table"] == "<db.t>"
    assert bound["limit"] == 3
    assert bound["dry_run"] is False
    assert bound.options == {"min-files": 5}


def test_positional_binding():
    bound = call("CALL sparkext.demo('db.t', 7, true)")
    assert (bound["limit"], bound["dry_run"]) == (7, True)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CALL sparkext.demo(tabel => 'x')",
            "sparkext.demo has no parameter 'tabel' (did you mean 'table'?); "
            "parameters: table, limit, dry_run, as_of, options, at.",
        ),
        (
            "CALL sparkext.demo(limit => 1)",
            "Missing required parameter(s) 'table' for sparkext.demo; "
            "see CALL sparkext.help('demo').",
        ),
        (
            "CALL sparkext.demo(table => 'a', table => 'b')",
            "Parameter 'table' is given more than once in sparkext.demo(...); keep one.",
        ),
        (
            "CALL sparkext.demo('a', limit => 1)",
            "Named and positional arguments cannot be mixed in sparkext.demo(...); write every "
            "argument as name => value, or none.",
        ),
        (
            "CALL sparkext.demo(table => 'a', limit => 'ten')",
            "Parameter 'limit' of sparkext.demo expects a bigint, got 'ten' (string).",
        ),
        (
            "CALL sparkext.demo(table => 'a', dry_run => 1)",
            "Parameter 'dry_run' of sparkext.demo expects a boolean, got 1 (bigint).",
        ),
        (
            "CALL sparkext.demo(table => 'a', as_of => 5)",
            "Parameter 'as_of' of sparkext.demo expects a timestamp, got 5 (bigint) "
            "(write TIMESTAMP '2026-11-21 00:00:00').",
        ),
        (
            "CALL sparkext.demo(table => 'a', limit => orders)",
            "Parameter 'limit' of sparkext.demo must be a constant, but 'orders' is a name; "
            "quote it as a string: 'orders'.",
        ),
        (
            "CALL sparkext.demo(table => 'a', at => true)",
            "Parameter 'at' of sparkext.demo expects a snapshot, got true (boolean) (write a "
            "snapshot id such as 5837411, a tag or branch name such as 'v1', or a time such as "
            "TIMESTAMP '2026-11-21 08:00:00').",
        ),
        (
            "CALL sparkext.demo('a', 1, true, NULL, NULL, NULL, 6)",
            "sparkext.demo takes at most 6 argument(s) (table, limit, dry_run, as_of, options, "
            "at) but 7 were given.",
        ),
        (
            "CALL sparkext.demo(table => NULL)",
            "Parameter 'table' of sparkext.demo is required and cannot be NULL.",
        ),
    ],
)
def test_argument_errors(sql, message):
    with pytest.raises(ProcedureArgumentError) as caught:
        call(sql)
    assert str(caught.value) == message


def test_name_errors_never_evaluate_anything():
    def explode(expressions):
        raise AssertionError("evaluated")

    with pytest.raises(ProcedureArgumentError, match="no parameter"):
        call("CALL sparkext.demo(nope => 1)", explode)


def test_unknown_option_lists_valid_keys():
    def with_map(expressions):
        return [{"min-file": "3"} if i == 1 else "t" for i, _ in enumerate(expressions)]

    with pytest.raises(OptionError) as caught:
        call("CALL sparkext.demo(table => 't', options => map('min-file', '3'))", with_map)
    assert str(caught.value) == (
        "Unknown option 'min-file' for sparkext.demo (did you mean 'min-files'?); "
        "valid options: min-files."
    )


def test_invalid_option_value():
    def with_map(expressions):
        return ["t", {"min-files": "many"}]

    with pytest.raises(OptionError, match=r"Option 'min-files' of sparkext.demo has an invalid"):
        call("CALL sparkext.demo(table => 't', options => map('min-files', 'many'))", with_map)


def test_timestamp_values_pass_through():
    when = dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)
    bound = call(
        "CALL sparkext.demo(table => 't', as_of => TIMESTAMP '2026-11-21 00:00:00')",
        lambda expressions: ["t", when],
    )
    assert bound["as_of"] == when


LISTS = Routine(
    name="lists",
    doc="a routine with an array<string> parameter",
    params=(
        Param("names", ParamType.STRING_ARRAY, "names"),
        Param("options", ParamType.STRING_MAP, "options", default={}),
    ),
    output=(OutputColumn("x", "bigint", "x"),),
    run=lambda context, args: [],
)


def bind_lists(sql: str, values: list):
    invocation = parse_call(split_statements(sql)[0])
    return bind(LISTS, invocation.args, lambda expressions: values, lambda name: name)


def test_a_null_inside_an_array_of_strings_stays_null():
    bound = bind_lists("CALL sparkext.lists(names => array('a', NULL, 'b'))", [["a", None, "b"]])
    assert bound["names"] == ["a", None, "b"]


def test_array_elements_of_other_types_become_their_sql_text():
    bound = bind_lists("CALL sparkext.lists(names => array(true, 2))", [[True, 2]])
    assert bound["names"] == ["true", "2"]


def test_a_null_map_value_is_refused_in_one_sentence():
    with pytest.raises(ProcedureArgumentError) as caught:
        bind_lists("CALL sparkext.lists(options => map('k', NULL))", [{"k": None}])
    assert str(caught.value) == (
        "Parameter 'options' of sparkext.lists has a NULL value for key 'k'; "
        "give it a value or leave the key out."
    )


def test_a_bare_table_name_is_that_name():
    """``table => lake.db.t`` as users type it; quoted parts keep their quotes for the parser."""
    assert call("CALL sparkext.demo(table => orders)")["table"] == "<orders>"
    assert call("CALL sparkext.demo(table => lake.db.t)")["table"] == "<lake.db.t>"
    assert call("CALL sparkext.demo(table => `lake`.db.`t x`)")["table"] == "<`lake`.db.`t x`>"


def test_a_string_for_a_timestamp_is_cast_by_spark_in_the_session_zone():
    seen = []

    def spark_like(expressions):
        seen.extend(e.sql("spark") for e in expressions)
        return ["t", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)]

    call("CALL sparkext.demo(table => 't', as_of => '2026-01-01 08:00:00')", spark_like)
    assert seen[1] == "CAST('2026-01-01 08:00:00' AS TIMESTAMP)"
    seen.clear()
    call("CALL sparkext.demo(table => 't', as_of => DATE '2026-01-01')", spark_like)
    assert seen[1] == "CAST(CAST('2026-01-01' AS DATE) AS TIMESTAMP)"


@pytest.mark.parametrize(
    ("written", "value", "text"),
    [
        ("1210247136009801999", 1210247136009801999, "1210247136009801999"),
        ("'1210247136009801999'", "1210247136009801999", "1210247136009801999"),
        ("'v1'", "v1", "v1"),
        (
            "TIMESTAMP '2026-11-21 08:00:00'",
            dt.datetime(2026, 11, 21, 8, tzinfo=dt.timezone.utc),
            "2026-11-21T08:00:00+00:00",
        ),
        ("DATE '2026-11-21'", dt.date(2026, 11, 21), "2026-11-21"),
    ],
)
def test_a_snapshot_is_an_id_a_ref_or_a_time_as_written(written, value, text):
    bound = call(f"CALL sparkext.demo(table => 't', at => {written})", lambda e: ["t", value])
    assert bound["at"] == text


def test_an_option_written_as_a_parameter_says_where_it_goes():
    with pytest.raises(ProcedureArgumentError) as caught:
        call("CALL sparkext.demo(table => 't', min_files => 3)")
    assert str(caught.value) == (
        "'min_files' is an option of sparkext.demo, not a parameter: write "
        "options => map('min-files', 3)."
    )


def test_a_whole_number_for_a_string_parameter_is_its_digits():
    strings = Routine(
        name="strings",
        doc="a routine with a string parameter",
        params=(Param("value", ParamType.STRING, "a string"),),
        output=(OutputColumn("x", "bigint", "x"),),
        run=lambda context, args: [],
    )
    invocation = parse_call(split_statements("CALL sparkext.strings(20261121)")[0])
    bound = bind(strings, invocation.args, python_evaluate, lambda name: name)
    assert bound["value"] == "20261121"
    for bad in ("true", "1.5"):
        invocation = parse_call(split_statements(f"CALL sparkext.strings({bad})")[0])
        with pytest.raises(ProcedureArgumentError, match="expects a string"):
            bind(strings, invocation.args, python_evaluate, lambda name: name)
