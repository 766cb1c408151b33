"""One index's blob: the entries of many data files, and the decoded form that answers probes.

A blob is an Arrow IPC stream (zstd-compressed buffers) of one record batch with the columns
``path`` (string: the data file) and ``entry`` (binary: :mod:`.entries`), and the schema metadata
``skipping-index-format`` (``1``), ``index-name``, ``index-spec`` (the declaration's JSON) and
``column-type`` (the column's Spark type when built).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from sparkext.planning.skipping import spec
from sparkext.planning.skipping.entries import Entry, parse_entry
from sparkext.planning.skipping.spec import IndexSpec
from sparkext.planning.skipping.structures import BloomTable, ExactSets
from sparkext.planning.skipping.values import ColumnType, column_type, order_keys

BLOB_TYPE = "sparkext-skipping-index-v1"
BLOB_FORMAT = "1"
_FORMAT_KEY = b"skipping-index-format"
_NAME_KEY = b"index-name"
_SPEC_KEY = b"index-spec"
_TYPE_KEY = b"column-type"


def encode_blob(
    index: IndexSpec, column_type_name: str, entries: Sequence[tuple[str, bytes]]
) -> bytes:
    """One blob of (data-file path, entry) pairs (a path given twice keeps its last entry)."""
    latest = dict(entries)
    metadata = {
        _FORMAT_KEY: BLOB_FORMAT.encode(),
        _NAME_KEY: index.name.encode(),
        _SPEC_KEY: index.to_property().encode(),
        _TYPE_KEY: column_type_name.encode(),
    }
    schema = pa.schema([("path", pa.string()), ("entry", pa.large_binary())], metadata=metadata)
    batch = pa.record_batch(
        [pa.array(list(latest), pa.string()), pa.array(list(latest.values()), pa.large_binary())],
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def _read(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def blob_spec(data: bytes) -> tuple[IndexSpec, str]:
    """The spec and the column type a blob records."""
    metadata = pa.ipc.open_stream(pa.py_buffer(data)).schema.metadata or {}
    if metadata.get(_FORMAT_KEY) != BLOB_FORMAT.encode():
        raise ValueError(f"not a {BLOB_TYPE} blob of format {BLOB_FORMAT}")
    index = IndexSpec.from_property(metadata[_NAME_KEY].decode(), metadata[_SPEC_KEY].decode())
    return index, metadata[_TYPE_KEY].decode()


def blob_entries(data: bytes) -> list[tuple[str, bytes]]:
    """The (data-file path, entry) pairs of a blob."""
    table = _read(data)
    return list(zip(table["path"].to_pylist(), table["entry"].to_pylist(), strict=True))


class LoadedIndex:
    """A decoded blob: per data file (a *row*), its flags and the type's probe structures."""

    def __init__(
        self, index: IndexSpec, column_type_name: str, entries: Sequence[tuple[str, bytes]]
    ):
        self.spec = index
        self.column_type = column_type_name
        self.column: ColumnType = column_type(column_type_name)
        self.paths: list[str] = [path for path, _ in entries]
        self.row_of = {path: row for row, path in enumerate(self.paths)}
        parsed = [parse_entry(entry, index.type, column_type_name) for _, entry in entries]
        rows = len(parsed)
        self.has_null = np.array([e.has_null for e in parsed], bool)
        self.has_non_null = np.array([e.has_non_null for e in parsed], bool)
        self.overflow = np.array([e.overflow for e in parsed], bool)
        self.capped = np.array([e.capped for e in parsed], bool)
        self.blooms: BloomTable | None = None
        self.sets: ExactSets | None = None
        self.min_key = self.max_key = np.zeros(0, np.uint64)
        if index.type in spec.BLOOMS:
            self.blooms = BloomTable(rows, [(row, e.k, e.bits) for row, e in enumerate(parsed)])
        if index.type == spec.BLOOM_RANGE_FILTER:
            self.min_key = np.array([e.min_key for e in parsed], np.uint64)
            self.max_key = np.array([e.max_key for e in parsed], np.uint64)
            self.step = int(index.option(spec.STEP))
        if index.type in (spec.BITMAP, spec.TOKEN_BITMAP, spec.NGRAM_BITMAP):
            self.sets = self._exact_sets(parsed)
        self.nbytes = self._nbytes()

    def _exact_sets(self, parsed: list[Entry]) -> ExactSets:
        domain = self.column.domain if self.spec.type == spec.BITMAP else "bytes"
        sets = []
        for row, entry in enumerate(parsed):
            if entry.overflow:
                continue
            if domain == "bytes":
                lengths, data = entry.values
                offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
                array = pa.Array.from_buffers(
                    pa.large_binary(),
                    len(lengths),
                    [None, pa.py_buffer(offsets), pa.py_buffer(data)],
                )
                sets.append((row, array))
            else:
                sets.append((row, order_keys(domain, entry.values)))
        return ExactSets(domain, len(parsed), sets)

    def _nbytes(self) -> int:
        total = sum(len(p) + 64 for p in self.paths) * 2  # the paths and their dict
        total += self.has_null.nbytes * 4 + self.min_key.nbytes + self.max_key.nbytes
        if self.blooms is not None:
            total += self.blooms.nbytes
        if self.sets is not None:
            total += self.sets.nbytes
        return total

    def __repr__(self) -> str:
        return f"LoadedIndex({self.spec.label}, {len(self.paths)} files, {self.nbytes} bytes)"


def decode_blob(data: bytes) -> LoadedIndex:
    """Decode a blob once (the caller caches it) into the form :func:`prune` probes."""
    index, column_type_name = blob_spec(data)
    return LoadedIndex(index, column_type_name, blob_entries(data))
