"""Driving ingest_cdc from tests: land Debezium events as files, CALL the procedure, read rows.

Written once for every CDC test module (they used to carry their own copies).
"""

from __future__ import annotations

import json
from typing import Any

import sparkext
from tests.helpers.cdc_source import COLUMNS


def ingest(
    table: str, landing, checkpoint, extra: str = "", *, options: str = "", key: str = "id"
) -> dict:
    """One CALL; ``options``: the contents of ``map(...)``; ``extra``: more text for the call."""
    if options:
        extra = f", options => map({options}){extra}"
    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
            f"checkpoint => '{checkpoint}', primary_key => '{key}', create => true{extra})"
        )
        .first()
        .asDict()
    )


def land(directory, name: str, items: list, raw_lines: list[str] = ()) -> None:
    """One JSON-lines file of events (plus raw lines, e.g. bad input) in the landing zone."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in items] + list(raw_lines)
    (directory / name).write_text("\n".join(lines) + "\n")


def binlog_event(op: str, before: Any, after: Any, pos: int) -> dict:
    """A Debezium MySQL change event at binlog position ``pos`` of mysql-bin.000001."""
    return {
        "op": op,
        "before": before,
        "after": after,
        "source": {
            "file": "mysql-bin.000001",
            "pos": pos,
            "row": 0,
            "ts_ms": pos * 1000,
            "db": "shop",
            "table": "t",
        },
        "ts_ms": pos * 1000 + 5,
    }


def events(*specs) -> list[dict]:
    """(op, id, pos, name) tuples -> Debezium events of a two-column table."""
    return [
        binlog_event(
            op,
            None if op == "c" else {"id": key, "name": "old"},
            None if op == "d" else {"id": key, "name": name},
            pos,
        )
        for op, key, pos, name in specs
    ]


def table_rows(spark, table: str, columns=COLUMNS) -> dict[int, dict]:
    return {r.id: r.asDict() for r in spark.table(table).select(*columns).collect()}
