"""Source positions per connector family (sparkext/planning/positions.py), from Debezium's
documented source blocks; the expected orders are worked by hand."""

from __future__ import annotations

import json

from sparkext.planning.positions import family, incomparable, position


def _pg(lsn: int, last_commit: int | None) -> dict:
    sequence = json.dumps([None if last_commit is None else str(last_commit), str(lsn)])
    return {"connector": "postgresql", "lsn": lsn, "txId": 1, "sequence": sequence}


def test_postgres_sorts_by_commit_then_change_lsn():
    """Materialize issue 5668: transactions a (changes at LSN 3, 5, 7; commit at 8) and b
    (changes at 4, 6; commit at 9) interleave in the WAL. Debezium streams them in commit order,
    a then b, and ``sequence`` = [last commit LSN, LSN] sorts that way; the LSN alone does not."""
    a_changes = [_pg(3, 0), _pg(5, 0), _pg(7, 0)]  # a's changes carry the last commit before a
    b_changes = [_pg(4, 8), _pg(6, 8)]  # b's changes: a committed at 8 before b's stream
    stream = a_changes + b_changes
    positions = [position(s, None) for s in stream]
    assert positions == sorted(positions)
    by_lsn = sorted(stream, key=lambda s: s["lsn"])
    assert [position(s, None) for s in by_lsn] != sorted(positions)  # LSN order is not it


def test_postgres_lsn_text_form_and_without_sequence():
    assert position({"lsn": "0/16B3748"}, None) == f"pl:{0x16B3748:020d}"
    assert position({"lsn": "1/0"}, None) == f"pl:{1 << 32:020d}"
    assert family(position({"lsn": 5}, None)) == "pl"
    assert family(position(_pg(5, None), None)) == "p"  # first event after start: no commit yet


def test_mysql_binlog_rotation_and_rows():
    older = position({"file": "mysql-bin.000009", "pos": 99999, "row": 3}, None)
    newer = position({"file": "mysql-bin.000010", "pos": 4, "row": 0}, None)
    second_row = position({"file": "mysql-bin.000010", "pos": 4, "row": 1}, None)
    assert older < newer < second_row


def test_sql_server_oracle_mongodb():
    sql = [
        {"commit_lsn": "00000025:00000d08:0025", "change_lsn": "00000025:00000d08:0002"},
        {"commit_lsn": "00000025:00000d08:0025", "change_lsn": "00000025:00000d08:0003"},
        {"commit_lsn": "00000025:00000e10:0003", "change_lsn": "00000025:00000d09:0001"},
    ]
    assert [position(s, None) for s in sql] == sorted(position(s, None) for s in sql)
    assert position({"scn": "9", "commit_scn": "20"}, None) > position(
        {"scn": "15", "commit_scn": "19"}, None
    )
    assert position({"ts_ms": 2000, "ord": 1}, None) > position({"ts_ms": 1000, "ord": 7}, None)
    assert {family(position(s, None)) for s in sql} == {"s"}


def test_families_never_compare_and_the_reason_names_both():
    mysql = position({"file": "mysql-bin.000001", "pos": 4}, None)
    timed = position({"ts_ms": 1}, None)
    assert family(mysql) != family(timed)
    reason = incomparable(family(timed), family(mysql))
    assert "commit times only" in reason and "MySQL binlog positions" in reason
