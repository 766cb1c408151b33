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
    "value_schema string, reject string, raw string, source_file string, source_partition string"
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


def _dump(value) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def decode_lines(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: columns ``value`` and ``source_file`` in, DECODED_DDL rows out."""
    last_schema = None
    for batch in batches:
        out: dict[str, list] = {name: [] for name in _FIELDS}
        values = batch.column("value").to_pylist()
        files = batch.column("source_file").to_pylist()
        for line, file in zip(values, files, strict=True):
            event = decode(line or "")
            if event is None:
                continue
            schema = _dump(event.value_schema)
            if schema == last_schema:
                schema = None  # only the first line of a run carries its schema
            else:
                last_schema = schema
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
