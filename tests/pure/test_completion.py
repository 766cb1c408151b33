"""Tab completion in the interactive shell (issue 50): the pure planner, on the real registry."""

from __future__ import annotations

from sparkext.cli.completion import complete
from sparkext.procedures.registry import ROUTINES

TABLES = ["orders", "lake.db.orders", "lake.db.events", "lake.ods.items"]


def texts(before: str) -> list[str]:
    return [c.text for c in complete(before, ROUTINES, lambda: TABLES)]


def test_routine_names_after_sparkext_dot():
    assert texts("CALL sparkext.ti") == ["tiered_optimize"]
    assert "changelog" not in texts("CALL sparkext.")  # a table function is not CALLed
    assert "changelog" in texts("SELECT * FROM sparkext.ch")
    assert texts("call SPARKEXT.ingest") == ["ingest_cdc", "ingest_cdc_database"]


def test_parameter_names_inside_the_call_leave_out_the_given_ones():
    assert texts("CALL sparkext.tiered_optimize(")[:2] == ["table => ", "where => "]
    assert texts("CALL sparkext.tiered_optimize(table => 'a', dr") == ["dry_run => "]
    assert "table => " not in texts("CALL sparkext.tiered_optimize(table => 'a', ")
    meta = {c.text: c.meta for c in complete("CALL sparkext.ingest_cdc(", ROUTINES, list)}
    assert meta["table => "] == "string, required"


def test_option_keys_inside_options_map():
    got = texts("CALL sparkext.tiered_optimize(table => 'a', options => map('l0")
    assert got == ["'l0.min-files'"]
    assert texts("CALL sparkext.tiered_optimize(options => map('l0.min-files', '") == []


def test_table_names_for_a_table_parameter_and_after_from():
    assert texts("CALL sparkext.table_health(table => 'lake.db.") == [
        "'lake.db.events'",
        "'lake.db.orders'",
    ]
    assert texts("SELECT * FROM lake.o") == ["lake.ods.items"]
    assert texts("SELECT * FROM or") == ["orders"]
    assert texts("SELECT or") == []  # not where a table goes


def test_nothing_inside_a_closed_call_or_a_plain_string():
    assert texts("CALL sparkext.help('x') ") == []
    assert texts("SELECT 'FROM lake.") == []
    assert texts("CALL sparkext.nope(") == []
