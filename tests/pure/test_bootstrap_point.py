"""The bootstrap point against Debezium's positions of the changes around it
(sparkext/planning/bootstrap.py, sparkext/planning/positions.py): every change after the point sorts
above it, every change before at or below it."""

from __future__ import annotations

import json

from sparkext.planning.bootstrap import mysql_point, parse_position, pg_point
from sparkext.planning.positions import position

X = 30_679_272  # the WAL position just before the slot was made


def _pg(previous_commit: int | None, change: int) -> str:
    sequence = json.dumps([None if previous_commit is None else str(previous_commit), str(change)])
    return position({"lsn": change, "sequence": sequence}, None)


def test_the_slots_first_transaction_has_no_previous_commit_and_is_after():
    point = pg_point(X)
    # a new connector's first transaction: sequence [null, lsn], its changes after X
    assert _pg(None, X + 8) > point
    # later ones: the previous commit ended after the consistent point (>= X)
    assert _pg(X, X + 200) > point and _pg(X + 500, X + 40) > point
    # the first transaction still sorts before the second, whose first field is its commit end
    assert _pg(None, X + 8) < _pg(X + 120, X + 130)


def test_changes_before_the_point_sort_below_it():
    point = pg_point(X)
    assert _pg(X - 400, X - 100) < point
    assert _pg(None, X - 100) < point  # a connector's first transaction, long before


def test_mysql_point_is_below_the_first_event_at_the_recorded_position():
    point = parse_position("mysql-bin.000003:154")
    at = position({"file": "mysql-bin.000003", "pos": 154, "row": 0}, None)
    before = position({"file": "mysql-bin.000003", "pos": 120, "row": 3}, None)
    older_file = position({"file": "mysql-bin.000002", "pos": 9000, "row": 0}, None)
    assert before < point < at and older_file < point
    assert point == mysql_point("mysql-bin.000003", 154)


def test_a_stated_lsn_is_the_pg_point():
    assert parse_position(" 0/1D420E8 ") == pg_point(0x1D420E8)
    assert parse_position("p:00000000000000000001:00000000000000000000") is not None
    assert parse_position("") is None and parse_position("0/XYZ") is None
