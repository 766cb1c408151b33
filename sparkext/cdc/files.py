"""Write Iceberg data and equality-delete Parquet files on executors (inside ``mapInArrow``).

No JVM here: pyarrow writes Parquet with Iceberg field ids (``PARQUET:field_id``) and each task
returns one small row per file (path, kind, rows, bytes). The driver turns those rows into
DataFile/DeleteFile entries and commits them (:mod:`sparkext.iceberg.commit`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from sparkext.cdc.partitioning import PartitionField, partitioner

DATA, EQUALITY_DELETES = 0, 2
KIND = "__kind"
FILE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("kind", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("partition", pa.string()),
    ]
)
FILE_SCHEMA_DDL = "path string, kind int, records bigint, bytes bigint, partition string"


@dataclass(frozen=True)
class WrittenFile:
    path: str
    kind: int  # DATA or EQUALITY_DELETES
    records: int
    bytes: int
    partition: tuple[str, ...] = ()  # Iceberg partition strings, one per partition field


def _with_field_ids(schema: pa.Schema, field_ids: Mapping[str, int]) -> pa.Schema:
    fields = []
    for field in schema:
        if field.name == KIND:
            continue
        metadata = {b"PARQUET:field_id": str(field_ids[field.name]).encode()}
        fields.append(field.with_metadata(metadata))
    return pa.schema(fields)


def file_writer(
    directory: str,
    field_ids: Mapping[str, int],
    prefix: str,
    partition_fields: Sequence[PartitionField] = (),
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function writing one data and one delete file per task and partition.

    Rows carry an ``__kind`` column (DATA or EQUALITY_DELETES) that picks the file they go to; the
    partition (from key columns only) is computed here, so a partitioned table needs no shuffle.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyarrow import fs

        partition_of = partitioner(partition_fields) if partition_fields else None
        sources = sorted({f.source for f in partition_fields})
        writers: dict[tuple[int, tuple[str, ...]], tuple[str, pq.ParquetWriter]] = {}
        counts: dict[tuple[int, tuple[str, ...]], int] = {}
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
                for partition, part in _split(rows, partition_of, sources):
                    slot = (kind, partition)
                    if slot not in writers:
                        label = "data" if kind == DATA else "eq-deletes"
                        path = f"{base.rstrip('/')}/{prefix}-{label}-{uuid.uuid4()}.parquet"
                        writer = pq.ParquetWriter(
                            filesystem.open_output_stream(path),
                            schema,
                            compression="zstd",
                            write_statistics=True,
                        )
                        writers[slot] = (path, writer)
                        counts[slot] = 0
                    table = pa.Table.from_batches([part]).drop_columns([KIND]).cast(schema)
                    writers[slot][1].write_table(table)
                    counts[slot] += part.num_rows
        out: dict[str, list] = {name: [] for name in FILE_SCHEMA.names}
        for (kind, partition), (path, writer) in writers.items():
            writer.close()
            out["path"].append(_uri(directory, path))
            out["kind"].append(kind)
            out["records"].append(counts[(kind, partition)])
            out["bytes"].append(filesystem.get_file_info(path).size)
            out["partition"].append(json.dumps(list(partition)) if partition_fields else None)
        if out["path"]:
            yield pa.RecordBatch.from_pydict(out, schema=FILE_SCHEMA)

    return write


def _split(rows: pa.RecordBatch, partition_of, sources: Sequence[str]):
    """(partition values, rows of that partition) pairs; one pair when unpartitioned."""
    if partition_of is None:
        yield (), rows
        return
    import pyarrow.compute as pc

    values = partition_of({s: rows.column(s).to_pylist() for s in sources})
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, value in enumerate(values):
        groups.setdefault(value, []).append(index)
    for value, indices in groups.items():
        yield value, pc.take(rows, pa.array(indices, pa.int64())) if len(groups) > 1 else rows


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
