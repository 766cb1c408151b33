"""Decode Debezium change events (JSON, with or without the Kafka Connect ``schema`` wrapper).

Pure Python, no Spark: runs on executors inside ``mapInArrow`` and in unit tests on the samples.
One input line is one Kafka record value, or ``{"key": ..., "value": ...}`` when the landing zone
keeps keys. Tombstones (a null value) decode to ``None`` and are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

OPS = {"c", "r", "u", "d", "t"}
_DIGITS = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Event:
    """One decoded change event; ``reject`` is set (and the rest may be empty) when unusable."""

    op: str | None
    position: str | None
    event_time_ms: int | None
    ts_ms: int | None
    source_db: str | None
    source_table: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    key: dict[str, Any] | None
    value_schema: dict[str, Any] | None  # the Connect schema of ``after``, when wrapped
    reject: str | None = None


def _unwrap(message: Any) -> tuple[Any, dict | None]:
    """Return (payload, schema) of a Connect-JSON message, wrapped or bare."""
    if isinstance(message, dict) and "payload" in message and set(message) <= {"schema", "payload"}:
        schema = message.get("schema")
        return message["payload"], schema if isinstance(schema, dict) else None
    return message, None


def _row_schema(schema: dict | None) -> dict | None:
    if not schema:
        return None
    for field in schema.get("fields") or []:
        if field.get("field") == "after":
            return field
    return None


def position(source: dict[str, Any], ts_ms: int | None) -> str:
    """A string that sorts like the change's place in the source log.

    MySQL: binlog file number, position, row. PostgreSQL: LSN. Otherwise the commit time.

    >>> position({"file": "mysql-bin.000003", "pos": 484, "row": 0}, None)
    'm:0000000003:00000000000000000484:0000000000'
    >>> position({"lsn": 24023128}, None)
    'p:00000000000024023128'
    """
    file, pos = source.get("file"), source.get("pos")
    if file is not None and pos is not None:
        match = _DIGITS.search(str(file))
        number = int(match.group(1)) if match else 0
        return f"m:{number:010d}:{int(pos):020d}:{int(source.get('row') or 0):010d}"
    if source.get("lsn") is not None:
        return f"p:{int(source['lsn']):020d}"
    when = source.get("ts_ms") or ts_ms or 0
    return f"t:{int(when):020d}"


def _reject(reason: str) -> Event:
    return Event(None, None, None, None, None, None, None, None, None, None, reason)


def decode(line: str) -> Event | None:
    """Decode one line; ``None`` for a tombstone or blank line, an Event with ``reject`` if bad."""
    text = line.strip()
    if not text or text == "null":
        return None
    try:
        message = json.loads(text)
    except ValueError as error:
        return _reject(f"malformed JSON: {error}")
    key = None
    if isinstance(message, dict) and "value" in message and ("key" in message or len(message) <= 3):
        key_payload, _ = _unwrap(message.get("key"))
        key = key_payload if isinstance(key_payload, dict) else None
        message = message.get("value")
    payload, schema = _unwrap(message)
    if payload is None:
        return None  # tombstone
    if not isinstance(payload, dict):
        return _reject("not a Debezium change event: the value is not a JSON object")
    op = payload.get("op")
    if op not in OPS:
        return _reject(f"not a Debezium change event: op is {op!r}, expected one of c, r, u, d, t")
    source = payload.get("source") if isinstance(payload.get("source"), dict) else {}
    ts_ms = payload.get("ts_ms")
    event_time = source.get("ts_ms") or (source.get("ts_sec") or 0) * 1000 or ts_ms
    before, after = payload.get("before"), payload.get("after")
    if op in ("c", "r", "u") and not isinstance(after, dict):
        return _reject(f"op '{op}' without an 'after' row")
    if op == "d" and not isinstance(before, dict):
        return _reject("op 'd' without a 'before' row")
    return Event(
        op=op,
        position=position(source, ts_ms),
        event_time_ms=int(event_time) if event_time is not None else None,
        ts_ms=int(ts_ms) if ts_ms is not None else None,
        source_db=source.get("db"),
        source_table=source.get("table"),
        before=before if isinstance(before, dict) else None,
        after=after if isinstance(after, dict) else None,
        key=key,
        value_schema=_row_schema(schema),
    )


# Kafka Connect schema types (and Debezium logical types) -> Spark SQL types.
_CONNECT_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}
_LOGICAL_TYPES = {
    "io.debezium.time.Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Timestamp": "timestamp",
    "org.apache.kafka.connect.data.Timestamp": "timestamp",
    "io.debezium.time.MicroTimestamp": "timestamp",
    "io.debezium.time.NanoTimestamp": "timestamp",
    "io.debezium.time.ZonedTimestamp": "timestamp",
}


def connect_columns(row_schema: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(column, Spark type, Debezium logical type) for each field of a Connect row schema.

    >>> date = {"field": "d", "type": "int32", "name": "io.debezium.time.Date"}
    >>> connect_columns({"fields": [{"field": "id", "type": "int32"}, date]})
    [('id', 'int', None), ('d', 'date', 'io.debezium.time.Date')]
    """
    columns = []
    for field in row_schema.get("fields") or []:
        logical = field.get("name")
        spark_type = _LOGICAL_TYPES.get(logical or "") or _CONNECT_TYPES.get(field.get("type"))
        if spark_type is None:
            spark_type = "string"  # structs, arrays, unknown: kept as JSON text
            logical = "json"
        columns.append((field["field"], spark_type, logical))
    return columns
