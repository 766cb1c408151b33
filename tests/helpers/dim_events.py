"""Debezium events for a customers(id, qty, name) dimension at given wall clocks, and a
helper that lands them and CALLs ingest_cdc (dimension-join tests)."""

from __future__ import annotations

import datetime as dt
import json

import sparkext


def timed_event(op: str, key: int, qty: int, day: str, clock: str, position: int, name="n"):
    """A Debezium MySQL event at ``day clock`` (UTC) and binlog ``position``."""
    ms = int(dt.datetime.fromisoformat(f"{day}T{clock}+00:00").timestamp() * 1000)
    before = None if op == "c" else {"id": key, "qty": 0, "name": name}
    after = None if op == "d" else {"id": key, "qty": qty, "name": name}
    return {
        "before": before,
        "after": after,
        "source": {"file": "mysql-bin.000001", "pos": position, "row": 0, "ts_ms": ms},
        "op": op,
        "ts_ms": ms,
    }


def ingest_batches(directory, table: str, batches, start: int = 1) -> None:
    """Each batch of events as one landing file and one ingest_cdc CALL (files numbered from
    ``start``, so later calls can add batches to the same landing zone)."""
    landing, checkpoint = directory / "landing", directory / "cdc"
    landing.mkdir(parents=True, exist_ok=True)
    for number, batch in enumerate(batches, start):
        (landing / f"{number:04d}.json").write_text("\n".join(json.dumps(e) for e in batch) + "\n")
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
        ).collect()
