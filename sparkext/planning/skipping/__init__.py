"""File-level skipping indexes for Iceberg tables: the pure core.

An index covers one top-level column of a table. For every data file it holds an *entry*: a
summary of the column's values in that file (:mod:`.entries`), built on executors from the
file's Arrow arrays. The entries of one index make one *blob* (:mod:`.blob`) of the Puffin
statistics file of a snapshot (blob type :data:`BLOB_TYPE`). To plan a query, the driver
decodes the blobs once (:func:`decode_blob`) and asks :func:`prune` which of the scan's files may
hold a row for which the query's filter (the predicate JSON, :mod:`.predicate`) is TRUE.

The seven types (:data:`INDEX_TYPES`) and what each answers are described in :mod:`.answers`;
how values are made comparable in :mod:`.values`; the hash and bloom filters in
:mod:`.hashing`; tokens, n-grams and patterns in :mod:`.text`.

>>> import pyarrow as pa
>>> ix = validate_spec("ix", "bloom_filter", ["id"], {}, {"id": "bigint"})
>>> blob = encode_blob(ix, "bigint", [("a.parquet", build_entry(ix, "bigint", pa.array([1, 2]))),
...                                   ("b.parquet", build_entry(ix, "bigint", pa.array([7, 8])))])
>>> pruned = prune([decode_blob(blob)], {"op": "eq", "col": "id", "type": "bigint", "value": 7},
...                ["a.parquet", "b.parquet", "c.parquet"])
>>> pruned.keep.tolist(), pruned.used
([False, True, True], ('bloom_filter, id',))

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from sparkext.planning.skipping.blob import (
    BLOB_TYPE,
    LoadedIndex,
    blob_entries,
    blob_spec,
    decode_blob,
    encode_blob,
)
from sparkext.planning.skipping.entries import build_entry
from sparkext.planning.skipping.prune import Pruned, prune
from sparkext.planning.skipping.spec import (
    INDEX_TYPES,
    TAKES,
    TYPE_DOCS,
    IndexSpec,
    options_doc,
    validate_spec,
)

__all__ = [
    "BLOB_TYPE",
    "INDEX_TYPES",
    "TAKES",
    "TYPE_DOCS",
    "IndexSpec",
    "LoadedIndex",
    "Pruned",
    "blob_entries",
    "blob_spec",
    "build_entry",
    "decode_blob",
    "encode_blob",
    "options_doc",
    "prune",
    "validate_spec",
]
