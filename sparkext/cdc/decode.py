"""Executor side of decoding: JSON lines -> one flat row per event (``mapInArrow``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pyarrow as pa

from sparkext.cdc.debezium import decode

DECODED_DDL = (
    "op string, position string, event_time_ms bigint, ts_ms bigint, source_db string, "
    "source_table string, before_json string, after_json string, key_json string, "
    "value_schema string, row_types string, reject string, raw string, source_file string, "
    "source_partition string"
)
_FIELDS = [f.split(" ")[0] for f in DECODED_DDL.split(", ")]
_PARTITION = (re.compile(r"partition=(\d+)"), re.compile(r"\+(\d+)\+\d+\.[^/]*$"))


def source_partition(path: str | None) -> str:
    """The Kafka partition of a landing-zone file, from its path; "0" when it does not say.

    >>> source_partition("s3://b/topics/db.t/partition=3/db.t+3+0000000100.json")
    '3'
    >>> source_partition("/landing/orders-1.json")
    '0'
    """
    for pattern in _PARTITION:
        match = pattern.search(path or "")
        if match:
            return match.group(1)
    return "0"


def _json_type(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    return "string"  # strings, and nested objects kept as JSON text


def row_types(*images: dict | None) -> dict[str, str | None]:
    """Spark types of a schema-less event's row images, as JSON inference would give them.

    >>> row_types({"id": 1, "p": 2.5, "n": None}, {"id": 1, "n": "x"})
    {'id': 'bigint', 'p': 'double', 'n': 'string'}
    """
    types: dict[str, str | None] = {}
    for image in images:
        for name, value in (image or {}).items():
            found = _json_type(value)
            if types.get(name) is None or found is not None:
                types[name] = (
                    found if types.get(name) in (None, found) else _wider(types[name], found)
                )
    return types


def _wider(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    if {a, b} == {"bigint", "double"}:
        return "double"
    return a if a == b else "string"


def merge_types(signatures: list[dict[str, str | None]]) -> dict[str, str]:
    """Merge per-row type signatures; a column seen only as null becomes a string.

    >>> merge_types([{"a": "bigint", "b": None}, {"a": "double", "c": "boolean"}])
    {'a': 'double', 'b': 'string', 'c': 'boolean'}
    """
    merged: dict[str, str | None] = {}
    for signature in signatures:
        for name, found in signature.items():
            merged[name] = _wider(merged.get(name), found) if name in merged else found
    return {name: found or "string" for name, found in merged.items()}


def _dump(value) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def split_document(text: str) -> list[str]:
    """One JSON document (an object, or an array of records) -> one line per record.

    >>> split_document('[{"a": 1}, null]')
    ['{"a":1}', 'null']
    >>> split_document('{not json')
    ['{not json']
    """
    try:
        document = json.loads(text)
    except ValueError:
        return [text]  # rejected by decode with the parser's reason
    items = document if isinstance(document, list) else [document]
    return [json.dumps(item, separators=(",", ":")) for item in items]


def decode_documents(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body for whole files (``input-format`` json-files)."""
    return decode_lines(batches, documents=True)


def decode_lines(
    batches: Iterator[pa.RecordBatch], documents: bool = False
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: columns ``value`` and ``source_file`` in, DECODED_DDL rows out."""
    last_schema = last_types = None
    for batch in batches:
        out: dict[str, list] = {name: [] for name in _FIELDS}
        values = batch.column("value").to_pylist()
        files = batch.column("source_file").to_pylist()
        if documents:
            pairs = [
                (line, f)
                for v, f in zip(values, files, strict=True)
                for line in split_document(v or "")
            ]
            values, files = [p[0] for p in pairs], [p[1] for p in pairs]
        for line, file in zip(values, files, strict=True):
            event = decode(line or "")
            if event is None:
                continue
            schema = _dump(event.value_schema)
            if schema == last_schema:
                schema = None  # only the first line of a run carries its schema
            else:
                last_schema = schema
            types = None
            if event.value_schema is None and event.reject is None:
                types = _dump(row_types(event.after, event.before))
                if types == last_types:
                    types = None  # only when it changes: the driver merges distinct ones
                else:
                    last_types = types
            row = {
                "op": event.op,
                "position": event.position,
                "event_time_ms": event.event_time_ms,
                "ts_ms": event.ts_ms,
                "source_db": event.source_db,
                "source_table": event.source_table,
                "before_json": _dump(event.before),
                "after_json": _dump(event.after),
                "key_json": _dump(event.key),
                "value_schema": schema,
                "row_types": types,
                "reject": event.reject,
                "raw": line if event.reject else None,
                "source_file": file,
                "source_partition": source_partition(file),
            }
            for name in _FIELDS:
                out[name].append(row[name])
        yield pa.RecordBatch.from_pydict(
            out,
            schema=pa.schema(
                [pa.field(n, pa.int64() if n.endswith("_ms") else pa.string()) for n in _FIELDS]
            ),
        )
