from __future__ import annotations

import pytest

from sparkext.errors import SqlParseError
from sparkext.routing.tokens import is_complete, line_col, split_statements


def texts(sql: str) -> list[str]:
    return [s.text for s in split_statements(sql)]


def test_splits_on_top_level_semicolons_only():
    sql = "SELECT ';' AS a; SELECT `x;y` FROM t /* ; */; -- c;d\nSELECT 3"
    assert texts(sql) == ["SELECT ';' AS a", "SELECT `x;y` FROM t /* ; */", "-- c;d\nSELECT 3"]


def test_call_statements_split_like_any_other():
    # sqlglot treats CALL as an opaque command that would swallow the comment's ';'
    sql = "CALL sparkext.help() -- see;\n; SELECT 1"
    assert texts(sql) == ["CALL sparkext.help() -- see;", "SELECT 1"]


def test_empty_statements_and_trailing_comments_are_dropped():
    assert texts(";;  SELECT 1;; -- bye") == ["SELECT 1"]
    assert texts("  -- only a comment\n") == []


def test_statement_offsets_point_into_the_source():
    sql = "SELECT 1;\n\n  SELECT 2"
    second = split_statements(sql)[1]
    assert sql[second.start :].startswith("SELECT 2")
    assert line_col(sql, second.start) == (3, 3)


def test_unterminated_string_reports_its_position():
    with pytest.raises(SqlParseError) as caught:
        split_statements("SELECT 1;\nSELECT 'abc")
    assert str(caught.value) == (
        "Cannot parse the SQL at line 2, column 8: an unterminated string, quoted identifier "
        "or comment starts at ''abc'; close it."
    )
    assert (caught.value.line, caught.value.column) == (2, 8)


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("SELECT 1", False),
        ("SELECT 1;", True),
        ("SELECT ';'", False),
        ("SELECT 1; -- trailing", True),
        ("SELECT 'open;", False),
        ("", False),
    ],
)
def test_is_complete(text, complete):
    assert is_complete(text) is complete
