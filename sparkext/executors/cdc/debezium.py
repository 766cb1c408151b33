"""Decode Debezium change events (JSON, with or without the Kafka Connect ``schema`` wrapper).

Pure Python, no Spark: runs on executors inside ``mapInArrow`` and in unit tests on the samples.
One input line is one Kafka record value, or ``{"key": ..., "value": ...}`` when the landing zone
keeps keys. Tombstones (a null value) decode to ``None`` and are ignored.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkext.executors.cdc import fastjson
from sparkext.planning.positions import position

OPS = {"c", "r", "u", "d", "t"}
# Deeper JSON is rejected: Python's parser and encoder recurse (RecursionError near 1,000
# levels) and Spark's JSON reader stops at 1,000; a change event needs about 5.
MAX_DEPTH = 500
_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


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


def _reject(reason: str) -> Event:
    return Event(None, None, None, None, None, None, None, None, None, None, reason)


def nesting_depth(text: str) -> int:
    """How deeply JSON text nests arrays and objects (brackets inside strings do not count).

    >>> nesting_depth('{"a": [1, {"b": "[[["}]}'), nesting_depth("7")
    (3, 0)
    """
    depth = deepest = 0
    for match in _NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def as_text(line: str | bytes) -> tuple[str, str | None]:
    """A line as text, and why it is not UTF-8 (then undecodable bytes are shown as ``\\xNN``).

    >>> as_text(b'{"n": "caf\\xe9"}')
    ('{"n": "caf\\\\xe9"}', 'not UTF-8 at byte offset 10 (0xe9)')
    """
    if isinstance(line, str):
        return line, None
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError as error:
        reason = f"not UTF-8 at byte offset {error.start} (0x{line[error.start]:02x})"
        return line.decode("utf-8", "backslashreplace"), reason


def parse_json(text: str, stdlib: bool | None = None) -> tuple[Any, str | None]:
    """``json.loads``, or the reason the text cannot be taken: malformed, or nested too deeply.

    >>> parse_json('{"a": 1}'), parse_json("[" * 600 + "]" * 600)[1]
    (({'a': 1}, None), 'nested deeper than 500 levels')
    """
    # counting brackets is C-fast; the exact depth is only needed when there are many
    if text.count("{") + text.count("[") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        return None, f"nested deeper than {MAX_DEPTH} levels"
    try:
        return fastjson.loads(text, stdlib), None
    except RecursionError:  # not reached with MAX_DEPTH well below the recursion limit
        return None, f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as error:
        return None, f"malformed JSON: {error}"


def decode(line: str | bytes, stdlib: bool | None = None) -> Event | None:
    """Decode one line; ``None`` for a tombstone or blank line, an Event with ``reject`` if bad.

    ``line`` may be bytes: a line that is not UTF-8 is rejected with the offset of the first
    bad byte. ``stdlib``: whether the line needs the standard library's JSON reader
    (:func:`sparkext.executors.cdc.fastjson.needs_stdlib`, asked when None).
    """
    text, not_utf8 = as_text(line)
    if not_utf8:
        return _reject(not_utf8)
    text = text.strip().removeprefix("\ufeff")  # a byte-order mark opening a file
    if not text or text == "null":
        return None
    message, bad = parse_json(text, stdlib)
    if bad:
        return _reject(bad)
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
    given_source = payload.get("source")
    source: dict[str, Any] = given_source if isinstance(given_source, dict) else {}
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
