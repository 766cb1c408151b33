"""A simulated MySQL table that emits Debezium events, and a landing zone that delivers them.

The model shares no code with sparkext: it is the oracle for ingest_cdc. ``SourceTable`` keeps
the true rows; ``Delivery`` hands events to files in batches with duplicates and late
(out-of-order) delivery; ``expected`` replays the delivered events the way a correct ingester
must: per key, the newest delivered change by binlog position, wiped by newer truncates.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLUMNS = ("id", "name", "qty", "price")


@dataclass
class SourceTable:
    seed: int
    key_space: int = 50
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    pos: int = 4
    clock_ms: int = 1_700_000_000_000
    extra_column: bool = False
    min_step_ms: int = 1  # 0: consecutive changes may share a timestamp (ties)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    def _row(self, key: int) -> dict[str, Any]:
        row = {
            "id": key,
            "name": self.random.choice(["ana", "bo", "chen", None, "d;e", "ünï"]),
            "qty": self.random.randint(-5, 1000),
            "price": round(self.random.uniform(0, 100), 2),
        }
        if self.extra_column:
            row["note"] = self.random.choice(["x", "y", None])
        return row

    def _emit(self, op: str, before, after) -> None:
        self.pos += self.random.randint(1, 300)
        self.clock_ms += self.random.randint(self.min_step_ms, 5000)
        self.events.append(
            {
                "before": before,
                "after": after,
                "source": {
                    "version": "2.7.0.Final",
                    "connector": "mysql",
                    "name": "sim",
                    "ts_ms": self.clock_ms,
                    "snapshot": "false",
                    "db": "shop",
                    "table": "orders",
                    "server_id": 1,
                    "gtid": None,
                    "file": "mysql-bin.000007",
                    "pos": self.pos,
                    "row": 0,
                },
                "op": op,
                "ts_ms": self.clock_ms + 40,
            }
        )

    def step(self) -> None:
        choice = self.random.random()
        live = sorted(self.rows)
        if choice < 0.01 and live:
            self.rows.clear()
            self._emit("t", None, None)
            return
        if choice < 0.45 or not live:
            key = self.random.randrange(self.key_space)  # may re-use a deleted key
            if key in self.rows:
                return self.step()
            self.rows[key] = self._row(key)
            self._emit("c", None, dict(self.rows[key]))
        elif choice < 0.8:
            key = self.random.choice(live)
            before = dict(self.rows[key])
            self.rows[key] = self._row(key)
            self._emit("u", before, dict(self.rows[key]))
        else:
            key = self.random.choice(live)
            before = self.rows.pop(key)
            self._emit("d", before, None)

    def run(self, steps: int) -> list[dict[str, Any]]:
        start = len(self.events)
        for _ in range(steps):
            self.step()
        return self.events[start:]


def position(event: dict[str, Any]) -> tuple[int, int, int]:
    s = event["source"]
    return (int(s["file"].rsplit(".", 1)[1]), int(s["pos"]), int(s["row"]))


def expected(delivered: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The table a correct ingester holds after these events, in any delivery order."""
    truncate = max((position(e) for e in delivered if e["op"] == "t"), default=None)
    newest: dict[int, dict[str, Any]] = {}
    for event in delivered:
        if event["op"] == "t":
            continue
        key = (event["after"] or event["before"])["id"]
        if truncate is not None and position(event) < truncate:
            continue
        if key not in newest or position(event) > position(newest[key]):
            newest[key] = event
    return {k: e["after"] for k, e in newest.items() if e["op"] != "d"}


@dataclass
class Delivery:
    """Writes events to landing files batch by batch, with duplicates and late delivery."""

    directory: Path
    seed: int
    duplicate_rate: float = 0.05
    late_rate: float = 0.1
    held: list[dict[str, Any]] = field(default_factory=list)
    delivered: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        self.directory.mkdir(parents=True, exist_ok=True)

    def deliver(self, events: list[dict[str, Any]], final: bool = False) -> list[dict]:
        batch = list(self.held)
        self.held = []
        for event in events:
            if not final and event["op"] != "t" and self.random.random() < self.late_rate:
                self.held.append(event)  # arrives in a later batch, after newer changes
            else:
                batch.append(event)
        batch.extend(
            self.random.sample(self.delivered, k=int(len(self.delivered) * self.duplicate_rate))
        )
        if final:
            batch.extend(self.held)
            self.held = []
        self.random.shuffle(batch)  # Kafka partitions interleave arbitrarily
        half = len(batch) // 2
        for part in (batch[:half], batch[half:]):
            if not part:
                continue
            self.files += 1
            path = (
                self.directory
                / f"partition={self.files % 2}"
                / f"shop.orders+{self.files % 2}+{self.files:010d}.json"
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(e) for e in part]
            lines.insert(self.random.randint(0, len(lines)), "null")  # a tombstone
            path.write_text("\n".join(lines) + "\n")
        self.delivered.extend(batch)
        return batch


def event_time(event: dict[str, Any]) -> int:
    return int(event["source"]["ts_ms"])


def state_as_of(
    delivered: list[dict[str, Any]], as_of_ms: int, initial: dict[int, dict] | None = None
) -> dict[int, dict[str, Any]]:
    """Replay, in event-time order (ties by binlog position), every delivered change <= T0.

    ``initial``: rows the table held before any change (a bulk load).
    """
    rows: dict[int, dict[str, Any]] = {k: dict(v) for k, v in (initial or {}).items()}
    counted = sorted(
        (e for e in delivered if event_time(e) <= as_of_ms),
        key=lambda e: (event_time(e), position(e)),
    )
    for event in counted:
        if event["op"] == "t":
            rows.clear()
        elif event["op"] == "d":
            rows.pop(event["before"]["id"], None)
        else:
            rows[event["after"]["id"]] = event["after"]
    return rows
