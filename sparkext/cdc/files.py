"""Write Iceberg data and equality-delete Parquet files on executors (inside ``mapInArrow``).

No JVM here: pyarrow writes Parquet with Iceberg field ids (``PARQUET:field_id``) and each task
returns one small row per file (path, kind, rows, bytes). The driver turns those rows into
DataFile/DeleteFile entries and commits them (:mod:`sparkext.iceberg.commit`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

DATA, EQUALITY_DELETES = 0, 2
KIND = "__kind"
FILE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("kind", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("bytes", pa.int64()),
    ]
)
FILE_SCHEMA_DDL = "path string, kind int, records bigint, bytes bigint"


@dataclass(frozen=True)
class WrittenFile:
    path: str
    kind: int  # DATA or EQUALITY_DELETES
    records: int
    bytes: int


def _with_field_ids(schema: pa.Schema, field_ids: Mapping[str, int]) -> pa.Schema:
    fields = []
    for field in schema:
        if field.name == KIND:
            continue
        metadata = {b"PARQUET:field_id": str(field_ids[field.name]).encode()}
        fields.append(field.with_metadata(metadata))
    return pa.schema(fields)


def file_writer(
    directory: str, field_ids: Mapping[str, int], prefix: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function writing one data and one delete file per task.

    Rows carry an ``__kind`` column (DATA or EQUALITY_DELETES) that picks the file they go to.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyarrow import fs

        writers: dict[int, tuple[str, pq.ParquetWriter]] = {}
        counts: dict[int, int] = {}
        filesystem, base = fs.FileSystem.from_uri(directory)
        created = False
        for batch in batches:
            schema = _with_field_ids(batch.schema, field_ids)
            for kind in (DATA, EQUALITY_DELETES):
                rows = batch.filter(pc.equal(batch.column(KIND), kind))
                if rows.num_rows == 0:
                    continue
                if not created:
                    filesystem.create_dir(base, recursive=True)
                    created = True
                if kind not in writers:
                    name = f"{prefix}-{'data' if kind == DATA else 'eq-deletes'}-{uuid.uuid4()}"
                    path = f"{base.rstrip('/')}/{name}.parquet"
                    writer = pq.ParquetWriter(
                        filesystem.open_output_stream(path),
                        schema,
                        compression="zstd",
                        write_statistics=True,
                    )
                    writers[kind] = (path, writer)
                    counts[kind] = 0
                table = pa.Table.from_batches([rows]).drop_columns([KIND]).cast(schema)
                writers[kind][1].write_table(table)
                counts[kind] += rows.num_rows
        out = {"path": [], "kind": [], "records": [], "bytes": []}
        for kind, (path, writer) in writers.items():
            writer.close()
            out["path"].append(_uri(directory, path))
            out["kind"].append(kind)
            out["records"].append(counts[kind])
            out["bytes"].append(filesystem.get_file_info(path).size)
        if out["path"]:
            yield pa.RecordBatch.from_pydict(out, schema=FILE_SCHEMA)

    return write


def _uri(directory: str, path: str) -> str:
    """Put back the scheme (and authority) pyarrow strips from a path under ``directory``.

    >>> _uri("s3://bucket/wh/data", "bucket/wh/data/f.parquet")
    's3://bucket/wh/data/f.parquet'
    >>> _uri("hdfs://nn:8020/wh/data", "/wh/data/f.parquet")
    'hdfs://nn:8020/wh/data/f.parquet'
    >>> _uri("/tmp/wh/data", "/tmp/wh/data/f.parquet")
    '/tmp/wh/data/f.parquet'
    """
    from urllib.parse import urlparse

    parsed = urlparse(directory)
    if not parsed.scheme or parsed.scheme == "file" or len(parsed.scheme) == 1:
        return path
    if parsed.netloc and path.startswith(parsed.netloc):
        return f"{parsed.scheme}://{path}"
    return f"{parsed.scheme}://{parsed.netloc}{path}"
