"""The pure planning of dim_join_changelog: join keys, output columns, truncates, refreshes."""

from __future__ import annotations

import pytest

from sparkext.errors import ProcedureArgumentError
from sparkext.planning.dim_join import (
    KeyPair,
    NewCommit,
    output_columns,
    parse_on,
    plan_refresh,
    truncate_floors,
)


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("item_id", [("item_id", "item_id")]),
        (" item_id , `region` ", [("item_id", "item_id"), ("region", "region")]),
        ("f.item = d.item_id", [("item", "item_id")]),
        ("d.item_id = f.item", [("item", "item_id")]),
        ("item = item_id", [("item", "item_id")]),
        ("clicks.item = items.id AND f.r = d.region", [("item", "id"), ("r", "region")]),
        ("(f.a = d.b)", [("a", "b")]),
    ],
)
def test_on_is_read_into_fact_and_dimension_columns(text, pairs):
    found = parse_on(text, ["clicks"], ["items"])
    assert [(p.fact, p.dim) for p in found] == pairs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "on is empty"),
        ("a,,b", "is not a list of column names"),
        ("f.a", "is not a list of column names"),
        ("f.a > d.b", "must be column equalities joined by AND"),
        ("f.a = d.b OR f.c = d.c", "must be column equalities joined by AND"),
        ("f.a = 1", "must be column equalities"),
        ("f.a = f.b", "compares two columns of one side"),
        ("x.a = d.b", "qualified by 'x', which is neither"),
    ],
)
def test_bad_on_is_one_sentence(text, message):
    with pytest.raises(ProcedureArgumentError, match=message):
        parse_on(text)


def test_output_columns_default_prefix_and_clashes():
    keys = [KeyPair("item", "id")]
    dims = ["id", "name", "price"]
    assert output_columns(["item", "ts"], dims, keys, None, "").columns == (
        ("name", "name"),
        ("price", "price"),
    )
    assert output_columns(["item"], dims, keys, ["PRICE"], "d_").columns == (("price", "d_price"),)
    with pytest.raises(ProcedureArgumentError, match="clash with the facts' column 'name'"):
        output_columns(["item", "name"], dims, keys, None, "")
    with pytest.raises(ProcedureArgumentError, match="clash with the facts' column '_dim_version'"):
        output_columns(["item"], ["id", "_dim_version"], keys, None, "", ("_dim_version",))
    with pytest.raises(ProcedureArgumentError, match="'cost' is not a column of the dimension"):
        output_columns(["item"], dims, keys, ["cost"], "")
    with pytest.raises(ProcedureArgumentError, match="'item' is not a column of the facts"):
        output_columns(["ts"], dims, keys, None, "")


def test_truncate_floors_are_the_newest_position_so_far():
    assert truncate_floors([]) == []
    assert truncate_floors([(5, "b"), (1, "c"), (9, "a")]) == [(1, "c"), (5, "c"), (9, "c")]
    assert truncate_floors([(1, "a"), (2, "c")]) == [(1, "a"), (2, "c")]


def test_refresh_is_chosen_by_what_the_commits_allow_and_cost():
    logged = [NewCommit(2, "log/2", True, 40), NewCommit(3, None, False, 0)]
    assert plan_refresh(None, 5, [], 100).kind == "reload"
    assert plan_refresh(5, 5, [], 100).kind == "keep"
    assert plan_refresh(1, 3, None, 100).kind == "reload"  # not an ancestor any more
    delta = plan_refresh(1, 3, logged, 100)
    assert (delta.kind, delta.logs, delta.delta_bytes) == ("delta", ("log/2",), 40)
    assert plan_refresh(1, 3, logged, 30).kind == "reload"  # cheaper to reload
    assert plan_refresh(1, 3, logged, 100, reload_factor=0.0).kind == "reload"
    unlogged = [*logged, NewCommit(4, None, True, 0)]
    refresh = plan_refresh(1, 4, unlogged, 10**9)
    assert (
        refresh.kind == "reload" and "commit 4 changed rows without an event log" in refresh.reason
    )
    backlog = [NewCommit(i, f"log/{i}", True, 10) for i in range(2, 102)]
    caught_up = plan_refresh(1, 101, backlog, 10**6)
    assert caught_up.kind == "delta" and len(caught_up.logs) == 100  # one delta, not 100
