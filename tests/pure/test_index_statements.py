"""CREATE INDEX, DROP INDEX and SHOW INDEXES are read from their tokens into the routines' calls.

No Spark: the statements become invocations of create_index / drop_index / show_indexes whose
arguments are what a CALL would pass; what is Spark's own (USING btree) is left to Spark.
"""

from __future__ import annotations

import pytest

from sparkext.errors import SqlParseError, UsageError
from sparkext.planning.skipping import INDEX_TYPES, options_doc
from sparkext.routing.index_statements import CREATE, DROP, SHOW, recognise
from sparkext.routing.tokens import split_statements
from tests.helpers.doc_blocks import ROOT


def call(sql: str):
    found = recognise(split_statements(sql)[0])
    if found is None:
        return None
    return found.routine, {a.name: a.sql for a in found.invocation.args}


def test_create_index_binds_every_part_of_the_statement():
    assert call(
        "CREATE INDEX IF NOT EXISTS rid ON TABLE lake.db.`t-1` USING Bloom_Filter (request_id) "
        "OPTIONS (fpp = 0.01, 'max_bytes' '1MB', a.b = true, c -1)"
    ) == (
        CREATE,
        {
            "table": "'lake.db.`t-1`'",
            "name": "'rid'",
            "type": "'bloom_filter'",
            "column": "'request_id'",
            "options": "MAP('fpp', '0.01', 'max_bytes', '1MB', 'a.b', 'true', 'c', '-1')",
            "if_not_exists": "TRUE",
        },
    )


def test_create_index_in_lower_case_with_keyword_names_and_no_options():
    assert call("create index data on t using bitmap(`status`)") == (
        CREATE,
        {"table": "'t'", "name": "'data'", "type": "'bitmap'", "column": "'status'"},
    )


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_every_index_type_is_sparkexts(index_type):
    assert call(f"CREATE INDEX i ON t USING {index_type.upper()} (c)")[0] == CREATE


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE INDEX i ON t USING btree (c)",  # Spark's own, for JDBC tables
        "CREATE INDEX i ON t (c)",
        "CREATE TABLE t (id int)",
        "SHOW TABLES",
        "SELECT 1",
        "DROP INDEX i",  # no table: Spark's to answer
        "DROP TABLE t",
    ],
)
def test_other_statements_are_left_to_spark(sql):
    assert call(sql) is None


def test_drop_and_show():
    assert call("DROP INDEX IF EXISTS rid ON TABLE lake.db.t") == (
        DROP,
        {"table": "'lake.db.t'", "name": "'rid'", "if_exists": "TRUE"},
    )
    assert call("drop index rid on t") == (DROP, {"table": "'t'", "name": "'rid'"})
    for word in ("FROM", "IN", "ON"):
        assert call(f"SHOW INDEXES {word} lake.db.t") == (SHOW, {"table": "'lake.db.t'"})
    assert call("show index in `my db`.t") == (SHOW, {"table": "'`my db`.t'"})


@pytest.mark.parametrize(
    "sql, sentence",
    [
        (
            "CREATE INDEX i ON t USING bloom_filter",
            "Cannot parse the CREATE INDEX statement at line 1, column 39: expected '(' and the "
            "column; write CREATE INDEX name ON table USING bloom_filter (column) [OPTIONS (key = "
            "value)].",
        ),
        (
            "CREATE INDEX i t USING bloom_filter (c)",
            "Cannot parse the CREATE INDEX statement at line 1, column 16: expected ON; write "
            "CREATE INDEX name ON table USING bloom_filter (column) [OPTIONS (key = value)].",
        ),
        (
            "CREATE INDEX i ON t USING bitmap (c) OPTIONS (max_distinct)",
            "Cannot parse the CREATE INDEX statement at line 1, column 59: expected a value for "
            "option 'max_distinct' (a string, number, true or false); write CREATE INDEX name ON "
            "table USING bloom_filter (column) [OPTIONS (key = value)].",
        ),
        (
            "CREATE INDEX i ON t USING bitmap (c) extra",
            "Cannot parse the CREATE INDEX statement at line 1, column 38: unexpected 'extra'; "
            "write CREATE INDEX name ON table USING bloom_filter (column) [OPTIONS (key = "
            "value)].",
        ),
        (
            "SHOW INDEXES lake.db.t",
            "Cannot parse the SHOW INDEXES statement at line 1, column 14: expected FROM, IN or "
            "ON and the table; write SHOW INDEXES FROM table.",
        ),
    ],
)
def test_a_malformed_statement_is_one_sentence_with_its_position(sql, sentence):
    with pytest.raises(SqlParseError) as raised:
        call(sql)
    assert str(raised.value) == sentence


def test_two_columns_get_the_declarations_sentence():
    with pytest.raises(UsageError) as raised:
        call("CREATE INDEX i ON t USING bloom_filter (a, b)")
    assert str(raised.value) == (
        "An index covers one column, not 2 (a, b): create one index per column."
    )


def test_the_guide_lists_every_option_of_every_type():
    guide = (ROOT / "docs" / "guides" / "skipping-indexes.md").read_text(encoding="utf-8")
    for index_type, options in options_doc().items():
        assert f"`{index_type}`" in guide, index_type
        for key, default, _ in options:
            assert f"| `{key}` | `{default}` |" in guide, (index_type, key)
