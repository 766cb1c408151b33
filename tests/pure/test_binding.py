from __future__ import annotations

import datetime as dt

import pytest

from sparkext.errors import OptionError, ProcedureArgumentError
from sparkext.procedures.base import Option, OutputColumn, Param, ParamType, Routine
from sparkext.procedures.binding import bind
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
            "parameters: table, limit, dry_run, as_of, options.",
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
            "CALL sparkext.demo(table => 'a', as_of => '2026-01-01')",
            "Parameter 'as_of' of sparkext.demo expects a timestamp, got '2026-01-01' (string) "
            "(write TIMESTAMP '2026-11-21 00:00:00').",
        ),
        (
            "CALL sparkext.demo(table => orders)",
            "Parameter 'table' of sparkext.demo must be a constant, but 'orders' is a name; "
            "quote it as a string: 'orders'.",
        ),
        (
            "CALL sparkext.demo('a', 1, true, NULL, NULL, 6)",
            "sparkext.demo takes at most 5 argument(s) (table, limit, dry_run, as_of, options) "
            "but 6 were given.",
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
