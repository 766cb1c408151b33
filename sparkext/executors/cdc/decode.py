"""Executor side of decoding: JSON lines -> one flat row per event (``mapInArrow``).

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

import pyarrow as pa

from sparkext.executors.cdc import fastjson
from sparkext.executors.cdc.debezium import as_text, decode, parse_json

DECODED_DDL = (
    "op string, position string, event_time_ms bigint, ts_ms bigint, source_db string, "
    "source_table string, before_json string, after_json string, key_json string, "
    "value_schema string, row_types string, reject string, raw string, source_file string, "
    "source_partition string, after_values int, before_values int"
)
_ARROW_TYPES = {"bigint": pa.int64(), "int": pa.int32(), "string": pa.string()}
_ARROW_SCHEMA = pa.schema(
    [
        pa.field(name, _ARROW_TYPES[kind])
        for name, kind in (f.split(" ") for f in DECODED_DDL.split(", "))
    ]
)
_FIELDS = _ARROW_SCHEMA.names
# Input column set by the driver for an input it could not give the decoder (a vanished file).
INPUT_REJECT = "input_reject"
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
    """Merge per-row type signatures; a column seen only as null is left out.

    A null says nothing about a column's type: typing it (as a string, say) would refuse the
    first real value. It becomes a column in the first batch with a value; until then its
    nulls are what the table gives a missing column anyway.

    >>> merge_types([{"a": "bigint", "b": None}, {"a": "double", "c": "boolean"}])
    {'a': 'double', 'c': 'boolean'}
    """
    merged: dict[str, str | None] = {}
    for signature in signatures:
        for name, found in signature.items():
            merged[name] = _wider(merged.get(name), found) if name in merged else found
    return {name: found for name, found in merged.items() if found is not None}


def _bytes(column: pa.Array | pa.ChunkedArray) -> list[bytes | None]:
    """Values as bytes: a string column may hold invalid UTF-8 (Spark's text source does not
    check), which Arrow would only notice, fatally, when converting it to Python."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary() if pa.types.is_string(column.type) else pa.large_binary())
    return column.to_pylist()


def _unread_row(reason: str, file: str | None) -> tuple:
    row = dict.fromkeys(_FIELDS)
    row.update(reject=reason, source_file=file, source_partition=source_partition(file))
    return tuple(row.values())


def _values(image: dict | None) -> int | None:
    """How many of an image's columns hold a value (not null): the typing step compares it
    with the values its conversion produced, and looks for a wrong type only on a difference.

    >>> _values({"a": 1, "b": None, "c": {}}), _values(None)
    (2, None)
    """
    return None if image is None else len(image) - list(image.values()).count(None)


def _shape(image: dict | None) -> tuple | None:
    """What :func:`row_types` depends on (names and Python types), built at C speed: a key
    for remembering its answer."""
    return None if image is None else (*image, *map(type, image.values()))


def _dump(value, exact: bool = False) -> str | None:
    return None if value is None else fastjson.dumps(value, exact)


def split_document(text: str | bytes) -> list[str | bytes]:
    """One JSON document (an object, or an array of records) -> one line per record.

    A document that is not UTF-8, not JSON or nested too deeply comes back whole, for
    ``decode`` to reject with its reason.

    >>> split_document('[{"a": 1}, null]')
    ['{"a":1}', 'null']
    >>> split_document('{not json')
    ['{not json']
    """
    decoded, not_utf8 = as_text(text)
    if not_utf8:
        return [text]
    document, bad = parse_json(decoded.strip())
    if bad:
        return [decoded]
    items = document if isinstance(document, list) else [document]
    return [json.dumps(item, separators=(",", ":")) for item in items]


def decode_documents(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body for whole files (``input-format`` json-files)."""
    return decode_lines(batches, documents=True)


def decode_lines(
    batches: Iterator[pa.RecordBatch], documents: bool = False
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``value`` (binary or string), ``source_file`` and, when the driver
    could not read an input, ``input_reject`` (its reason) in; DECODED_DDL rows out.

    ``value`` is taken as bytes, so a line that is not UTF-8 is rejected by itself, not the
    whole task.
    """
    last_schema = last_types = None
    types_of: dict[tuple, str | None] = {}  # row shapes -> their row_types JSON
    partitions: dict[str | None, str] = {}  # file -> its Kafka partition
    for batch in batches:
        rows: list[tuple] = []  # in _FIELDS order; turned into columns at C speed at the end
        values: Sequence[str | bytes | None] = _bytes(batch.column("value"))
        files = batch.column("source_file").to_pylist()
        unread = (
            batch.column(INPUT_REJECT).to_pylist()
            if INPUT_REJECT in batch.schema.names
            else [None] * len(values)
        )
        if documents:
            triples = [
                (line, f, u)
                for v, f, u in zip(values, files, unread, strict=True)
                for line in ([v] if u else split_document(v or b""))
            ]
            values = [t[0] for t in triples]
            files = [t[1] for t in triples]
            unread = [t[2] for t in triples]
        for value, file, reason in zip(values, files, unread, strict=True):
            if reason:
                rows.append(_unread_row(reason, file))
                continue
            line = value or b""
            exact = fastjson.needs_stdlib(line)  # NaN, huge integers: json, not orjson
            event = decode(line, exact)
            if event is None:
                continue
            after, before = event.after, event.before
            schema = _dump(event.value_schema, exact)
            if schema == last_schema:
                schema = None  # only the first line of a run carries its schema
            else:
                last_schema = schema
            types = None
            if event.value_schema is None and event.reject is None:
                shape = (_shape(after), _shape(before), exact)
                if shape in types_of:
                    types = types_of[shape]
                else:
                    types = types_of[shape] = _dump(row_types(after, before), exact)
                    if len(types_of) > 4096:  # a source whose rows keep changing shape
                        types_of.clear()
                if types == last_types:
                    types = None  # only when it changes: the driver merges distinct ones
                else:
                    last_types = types
            if file not in partitions:
                partitions[file] = source_partition(file)
            rows.append(
                (
                    event.op,
                    event.position,
                    event.event_time_ms,
                    event.ts_ms,
                    event.source_db,
                    event.source_table,
                    _dump(before, exact),
                    _dump(after, exact),
                    _dump(event.key, exact),
                    schema,
                    types,
                    event.reject,
                    as_text(line)[0] if event.reject else None,
                    file,
                    partitions[file],
                    _values(after),
                    _values(before),
                )
            )
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(_FIELDS)
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, _ARROW_SCHEMA, strict=True)],
            schema=_ARROW_SCHEMA,
        )
