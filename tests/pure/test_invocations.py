from __future__ import annotations

import pytest
from sqlglot import exp

from sparkext.errors import SqlParseError
from sparkext.routing.invocations import find_table_functions, parse_call
from sparkext.routing.tokens import split_statements


def one(sql: str):
    return split_statements(sql)[0]


def test_parse_call_with_named_arguments():
    call = parse_call(
        one("CALL sparkext.table_health(table => 'lake.db.t', options => map('a', '1'))")
    )
    assert call is not None and call.name == "table_health"
    assert [a.name for a in call.args] == ["table", "options"]
    assert isinstance(call.args[0].expression, exp.Literal)


def test_parse_call_is_case_insensitive_and_positional():
    call = parse_call(one("call SparkExt.Table_Health('lake.db.t')"))
    assert call is not None and call.name == "table_health"
    assert call.args[0].name is None


def test_other_calls_are_not_ours():
    assert parse_call(one("CALL lake.system.expire_snapshots(table => 'db.t')")) is None
    assert parse_call(one("SELECT 1")) is None


def test_call_without_parentheses_is_a_parse_error():
    with pytest.raises(SqlParseError, match=r"line 1, column 6: 'sparkext.help' must be followed"):
        parse_call(one("CALL sparkext.help"))


def test_trailing_tokens_after_call_are_rejected():
    with pytest.raises(SqlParseError, match=r"unexpected 'extra' after the CALL's closing"):
        parse_call(one("CALL sparkext.help() extra"))


def test_bad_argument_expression_reports_line_and_column():
    with pytest.raises(SqlParseError, match=r"^Cannot parse the arguments at line 2, column 14"):
        parse_call(one("CALL sparkext.help(\n  name => 1 +)"))


def test_unclosed_parenthesis():
    with pytest.raises(SqlParseError, match=r"the '\(' opened here is never closed"):
        find_table_functions(one("SELECT * FROM sparkext.help("))


def test_table_functions_in_from_join_cte_and_subquery():
    sql = (
        "WITH c AS (SELECT * FROM sparkext.help()) "
        "SELECT * FROM c JOIN sparkext.table_health('lake.db.t') h ON true, "
        "sparkext.help('x') "
        "WHERE EXISTS (SELECT 1 FROM sparkext.help())"
    )
    found = find_table_functions(one(sql))
    assert [f.name for f in found] == ["help", "table_health", "help", "help"]
    assert all(sql[f.start : f.end].lower().startswith("sparkext.") for f in found)
    assert all(sql[f.end - 1] == ")" for f in found)


def test_functions_outside_table_position_are_left_to_spark():
    assert find_table_functions(one("SELECT sparkext.udf(x), a FROM t")) == []
    assert find_table_functions(one("SELECT a, sparkext.udf(x) FROM t")) == []
    assert find_table_functions(one("SELECT * FROM sparkext.plain_table")) == []
    assert find_table_functions(one("SELECT 'FROM sparkext.help()'")) == []
