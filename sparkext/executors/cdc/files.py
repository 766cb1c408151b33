"""Write Iceberg data and equality-delete Parquet files on executors (inside ``mapInArrow``).

No JVM here: pyarrow writes Parquet with Iceberg field ids (``PARQUET:field_id``) and each task
returns one small row per file (path, kind, rows, bytes). The driver turns those rows into
DataFile/DeleteFile entries and commits them (:mod:`sparkext.iceberg.commit`).

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkext.executors.cdc.partitioning import PartitionField, partitioner
from sparkext.fs import Location
from sparkext.fs import filesystem as pyarrow_filesystem

DATA, EQUALITY_DELETES = 0, 2
KEY_LOG = -1  # a written-file row that is not a table file: a KeyLog's file
EVENT_LOG = -2  # rows (and written-file rows) of an EventLog, not of the table
# Spark reads dates and timestamps of a Parquet file without this key as possibly written in
# the hybrid Julian calendar (and refuses ancient ones); pyarrow writes the proleptic Gregorian
# calendar, as Spark 3 does
SPARK_VERSION_KEY = b"org.apache.spark.version"
KIND = "__kind"
FILE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("kind", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("partition", pa.string()),
        pa.field("metrics", pa.string()),
    ]
)
FILE_SCHEMA_DDL = (
    "path string, kind int, records bigint, bytes bigint, partition string, metrics string"
)


@dataclass(frozen=True)
class WrittenFile:
    path: str
    kind: int  # DATA or EQUALITY_DELETES
    records: int
    bytes: int
    partition: tuple[str, ...] = ()  # Iceberg partition strings, one per partition field
    metrics: str | None = None  # JSON from parquet_metrics(), computed where the file was written


@dataclass(frozen=True)
class KeyLog:
    """Where a writer also records the keys it wrote equality deletes for, with their source
    positions (ingest_cdc's key cache): one Parquet file per task under ``directory``. Rows
    whose ``op`` column is ``t`` (a truncate's wiped rows) are not a key's change: left out."""

    directory: str
    key: tuple[str, ...]
    position: str  # column of the rows; "position" in the file
    op: str


@dataclass(frozen=True)
class EventLog:
    """Where a writer puts the rows whose ``__kind`` is EVENT_LOG: plain Parquet (no field ids,
    one file per task) under ``directory``, read back by Spark (``spark.read.parquet``), DuckDB
    or pyarrow. Each file is written under a hidden name and moved into place whole, named by
    the write's ``token`` and the task's partition: another attempt of the task (a retry, a
    speculative or a lost executor's) replaces it with the same rows, never adds a copy."""

    directory: str
    spark_version: str  # written into the footer: see SPARK_VERSION_KEY
    token: str = ""  # unique to one write of the directory


def _with_field_ids(schema: pa.Schema, field_ids: Mapping[str, int]) -> pa.Schema:
    """Iceberg field ids on every field, nested ones too (``tags.element``, ``m.key``, ...)."""
    return pa.schema(
        [_field_with_id(field, field.name, field_ids) for field in schema if field.name != KIND]
    )


def _field_with_id(field: pa.Field, path: str, field_ids: Mapping[str, int]) -> pa.Field:
    kind = field.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = _field_with_id(
            pa.field("element", kind.value_type, kind.value_field.nullable),
            f"{path}.element",
            field_ids,
        )
        kind = pa.list_(element)
    elif pa.types.is_map(kind):
        key = _field_with_id(pa.field("key", kind.key_type, False), f"{path}.key", field_ids)
        value = _field_with_id(
            pa.field("value", kind.item_type, kind.item_field.nullable), f"{path}.value", field_ids
        )
        kind = pa.map_(key, value)
    elif pa.types.is_struct(kind):
        kind = pa.struct(
            [
                _field_with_id(kind.field(i), f"{path}.{kind.field(i).name}", field_ids)
                for i in range(kind.num_fields)
            ]
        )
    metadata = {b"PARQUET:field_id": str(field_ids[path]).encode()}
    return pa.field(field.name, kind, field.nullable, metadata=metadata)


def parquet_metrics(
    schema: pa.Schema, metadata, table_properties: Mapping[str, str] | None = None
) -> str | None:
    """Iceberg file metrics of a Parquet file from its footer, as JSON (bounds base64-encoded).

    Computed where the file was written (pyiceberg's statistics code: Iceberg's metrics modes,
    ``truncate(16)`` by default, honour ``write.metadata.metrics.*``), so the driver commits
    without reading footers. ``None`` when pyiceberg cannot map a type: the driver then reads
    the footer itself.
    """
    import base64

    try:
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
            pyarrow_to_schema,
        )

        iceberg_schema = pyarrow_to_schema(schema)
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata,
            stats_columns=compute_statistics_plan(iceberg_schema, dict(table_properties or {})),
            parquet_column_mapping=parquet_path_to_id_mapping(iceberg_schema),
        ).to_serialized_dict()
    except Exception:  # an unusual type: the driver reads the footer instead
        return None
    encoded = {
        name: statistics[name]
        for name in (
            "record_count",
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "nan_value_counts",
        )
    }
    for name in ("lower_bounds", "upper_bounds"):
        encoded[name] = {
            str(k): base64.b64encode(v).decode("ascii") for k, v in statistics[name].items()
        }
    return json.dumps(encoded)


def file_writer(
    directory: str,
    field_ids: Mapping[str, int],
    prefix: str,
    partition_fields: Sequence[PartitionField] = (),
    metrics_properties: Mapping[str, str] | None = None,
    key_log: KeyLog | None = None,
    event_log: EventLog | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function writing one data and one delete file per task and partition.

    Rows carry an ``__kind`` column (DATA or EQUALITY_DELETES) that picks the file they go to; the
    partition (from key columns only) is computed here, so a partitioned table needs no shuffle.
    Each file's Iceberg metrics are computed here too (``metrics_properties``: the table's
    ``write.metadata.metrics.*``). With ``key_log``, the task also writes the keys of its
    delete rows (see :class:`KeyLog`; not reported as a table file); with ``event_log``, the
    rows whose ``__kind`` is EVENT_LOG go to an :class:`EventLog` file. A task that fails deletes
    the files it wrote.
    """
    properties = dict(metrics_properties or {})

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        filesystem, base = pyarrow_filesystem(directory)
        writers: dict[tuple[int, tuple[str, ...]], tuple[str, pq.ParquetWriter]] = {}
        keys: list[pa.Table] = []
        events = _EventLogFile(event_log) if event_log is not None else None
        try:
            yield from _write_files(batches, filesystem, base, writers, keys, events)
            if key_log is not None and keys:
                path = _write_key_log(key_log, pa.concat_tables(keys))
                yield _side_file(path, KEY_LOG)
            if events is not None and events.rows:
                yield _side_file(events.finish(), EVENT_LOG, events.rows)
        except Exception:  # not GeneratorExit: a closed consumer already has the files
            if events is not None:
                events.abort()
            for path, writer in writers.values():  # leave nothing of a failed task behind
                try:
                    writer.close()
                    filesystem.delete_file(path)
                except Exception:  # best effort; the task's own error is what matters
                    pass
            raise

    def _write_files(batches, filesystem, base, writers, keys, events) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        partition_of = partitioner(partition_fields) if partition_fields else None
        sources = sorted({f.source for f in partition_fields})
        counts: dict[tuple[int, tuple[str, ...]], int] = {}
        schemas: dict[tuple[int, tuple[str, ...]], pa.Schema] = {}
        created = False
        for batch in batches:
            if events is not None:
                logged = batch.filter(pc.equal(batch.column(KIND), EVENT_LOG))
                if logged.num_rows:
                    events.write(logged)
                    if logged.num_rows == batch.num_rows:
                        continue
            schema = _with_field_ids(batch.schema, field_ids)
            for kind in (DATA, EQUALITY_DELETES):
                rows = batch.filter(pc.equal(batch.column(KIND), kind))
                if rows.num_rows == 0:
                    continue
                if kind == EQUALITY_DELETES and key_log is not None:
                    changed = rows.filter(pc.not_equal(rows.column(key_log.op), "t"))
                    keys.append(
                        pa.Table.from_batches([changed]).select([*key_log.key, key_log.position])
                    )
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
                        schemas[slot] = schema
                    table = pa.Table.from_batches([part]).drop_columns([KIND]).cast(schema)
                    writers[slot][1].write_table(table)
                    counts[slot] += part.num_rows
        out: dict[str, list] = {name: [] for name in FILE_SCHEMA.names}
        for (kind, partition), (path, writer) in writers.items():
            writer.close()
            out["metrics"].append(
                parquet_metrics(schemas[(kind, partition)], writer.writer.metadata, properties)
            )
            out["path"].append(file_uri(directory, path))
            out["kind"].append(kind)
            out["records"].append(counts[(kind, partition)])
            out["bytes"].append(filesystem.get_file_info(path).size)
            out["partition"].append(json.dumps(list(partition)) if partition_fields else None)
        if out["path"]:
            yield pa.RecordBatch.from_pydict(out, schema=FILE_SCHEMA)

    return write


def _side_file(path: str, kind: int, records: int | None = None) -> pa.RecordBatch:
    """The written-file row of a file that is not the table's (a key log's, an event log's)."""
    row = {**{n: [None] for n in FILE_SCHEMA.names}, "path": [path], "kind": [kind]}
    return pa.RecordBatch.from_pydict({**row, "records": [records]}, schema=FILE_SCHEMA)


class _EventLogFile:
    """A task's event-log file, streamed batch by batch (a big batch is never held in memory)
    under a hidden name and moved into place whole by :meth:`finish`."""

    def __init__(self, event_log: EventLog):

        self.location = Location.of(event_log.directory)
        self.version = event_log.spark_version.encode()
        self.name = f"part-{_partition_id()}-{event_log.token}.parquet"
        # the hidden name is the attempt's own: two attempts never write one file
        self.hidden = f"{self.location.path.rstrip('/')}/_tmp-{uuid.uuid4()}-{self.name}"
        self.writer: Any = None  # a pyarrow ParquetWriter from the first batch (pyarrow is untyped)
        self.rows = 0

    def write(self, rows: pa.RecordBatch) -> None:
        import pyarrow.parquet as pq

        rows = rows.drop_columns([KIND])
        if self.writer is None:
            metadata = {**(rows.schema.metadata or {}), SPARK_VERSION_KEY: self.version}
            self.location.filesystem.create_dir(self.location.path, recursive=True)
            self.writer = pq.ParquetWriter(
                self.location.filesystem.open_output_stream(self.hidden),
                rows.schema.with_metadata(metadata),
                compression="zstd",
            )
        self.writer.write_batch(rows)
        self.rows += rows.num_rows

    def finish(self) -> str:
        """Close the file and move it into place; its URI."""
        self.writer.close()
        self.location.filesystem.move(self.hidden, f"{self.location.path.rstrip('/')}/{self.name}")
        return self.location.child(self.name).uri

    def abort(self) -> None:
        """Delete what was written (best effort: a hidden file is never read)."""
        if self.writer is None:
            return
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(Exception):
            self.location.filesystem.delete_file(self.hidden)


def _partition_id() -> str:
    """The Spark task's partition, or a unique name outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"{context.partitionId():05d}" if context is not None else uuid.uuid4().hex


def _write_key_log(key_log: KeyLog, keys: pa.Table) -> str:
    """One Parquet file of (key..., position) under ``key_log.directory``; returns its URI."""
    return _write_whole(key_log.directory, keys.rename_columns([*key_log.key, "position"]))


def _write_whole(directory: str, table: pa.Table) -> str:
    """``table`` as one Parquet file under ``directory`` (created if need be); returns its URI.

    Written under a hidden name (Spark's listing skips ``_…``) and moved into place whole, so a
    killed task leaves no half-written file a reader would trip on; the driver keeps only the
    files the job's successful tasks reported (see ``keep_only``)."""
    import pyarrow.parquet as pq

    location = Location.of(directory)
    filesystem, base = location.filesystem, location.path
    filesystem.create_dir(base, recursive=True)
    name = f"part-{uuid.uuid4()}.parquet"
    hidden = f"{base.rstrip('/')}/_tmp-{name}"
    try:
        with filesystem.open_output_stream(hidden) as stream:
            pq.write_table(table, stream, compression="zstd")
        filesystem.move(hidden, f"{base.rstrip('/')}/{name}")
    except BaseException:
        with contextlib.suppress(Exception):  # best effort: a hidden file is never read
            filesystem.delete_file(hidden)
        raise
    return location.child(name).uri


def keep_only(directory: str, kept: Sequence[str]) -> int:
    """Delete the files under ``directory`` that are not among ``kept`` (URIs or paths as a
    writer reported them): what failed or superseded task attempts left. Returns how many."""
    from pyarrow import fs

    location = Location.of(directory)
    names = {k.rstrip("/").rsplit("/", 1)[-1] for k in kept}
    try:
        infos = location.filesystem.get_file_info(
            fs.FileSelector(location.path, allow_not_found=True)
        )
    except FileNotFoundError:
        return 0
    removed = 0
    for info in infos:
        if info.type == fs.FileType.File and info.base_name not in names:
            location.filesystem.delete_file(info.path)
            removed += 1
    return removed


def remove_written(directory: str, prefix: str) -> int:
    """Delete the files directly under ``directory`` whose names start with ``prefix``.

    For a write job that failed: its successful tasks' files were never reported to the driver.
    Every sparkext writer names its files ``<prefix>-…`` with a prefix unique to the attempt, so
    nothing else matches. Returns how many files were removed (best effort).
    """
    from pyarrow import fs

    try:
        filesystem, base = pyarrow_filesystem(directory)
        infos = filesystem.get_file_info(fs.FileSelector(base, allow_not_found=True))
    except Exception:  # the job's own error is what the user needs; orphans are harmless
        return 0
    removed = 0
    for info in infos:
        if info.type == fs.FileType.File and info.base_name.startswith(prefix):
            try:
                filesystem.delete_file(info.path)
                removed += 1
            except Exception:  # best effort
                pass
    return removed


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


def file_uri(directory: str, path: str) -> str:
    """Put back the scheme (and authority) pyarrow strips from a path under ``directory``.

    >>> file_uri("s3://bucket/wh/data", "bucket/wh/data/f.parquet")
    's3://bucket/wh/data/f.parquet'
    >>> file_uri("hdfs://nn:8020/wh/data", "/wh/data/f.parquet")
    'hdfs://nn:8020/wh/data/f.parquet'
    >>> file_uri("/tmp/wh/data", "/tmp/wh/data/f.parquet")
    '/tmp/wh/data/f.parquet'
    """
    from urllib.parse import urlparse

    parsed = urlparse(directory)
    if not parsed.scheme or parsed.scheme == "file" or len(parsed.scheme) == 1:
        return path
    if parsed.netloc and path.startswith(parsed.netloc):
        return f"{parsed.scheme}://{path}"
    return f"{parsed.scheme}://{parsed.netloc}{path}"
