"""Executor bodies of rewrite_equality_deletes (inside ``mapInArrow``): no JVM, no driver rows.

``equality_key_reader`` reads the equality columns of equality-delete files by Iceberg field id;
``position_delete_writer`` writes sorted (file_path, pos) rows as Parquet position-delete files,
one or more per partition; ``deletion_vector_writer`` writes one DV per data file into Puffin files.
Each writer yields one small row per written file or blob for the driver to commit.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from sparkext.executors.cdc.files import file_uri, parquet_metrics
from sparkext.executors.deletes.dv import PuffinWriter
from sparkext.fs import filesystem

FILE_PATH_FIELD_ID = 2147483546  # Iceberg's MetadataColumns.DELETE_FILE_PATH
POS_FIELD_ID = 2147483545  # Iceberg's MetadataColumns.DELETE_FILE_POS
WRITTEN_DDL = (
    "path string, pkey string, records bigint, file_size bigint, "
    "referenced_data_file string, content_offset bigint, content_size bigint, metrics string"
)
_WRITTEN = pa.schema(
    [
        ("path", pa.string()),
        ("pkey", pa.string()),
        ("records", pa.int64()),
        ("file_size", pa.int64()),
        ("referenced_data_file", pa.string()),
        ("content_offset", pa.int64()),
        ("content_size", pa.int64()),
        ("metrics", pa.string()),  # JSON Iceberg metrics (partition-scoped position files)
    ]
)
# Iceberg's MetricsConfig.forPositionDelete: full bounds for both columns (no truncation)
_POSITION_METRICS = {
    "write.metadata.metrics.column.file_path": "full",
    "write.metadata.metrics.column.pos": "full",
}
_POSITION_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False).with_metadata(
            {b"PARQUET:field_id": str(FILE_PATH_FIELD_ID).encode()}
        ),
        pa.field("pos", pa.int64(), nullable=False).with_metadata(
            {b"PARQUET:field_id": str(POS_FIELD_ID).encode()}
        ),
    ]
)


def _filesystem(uri: str):
    """pyarrow's filesystem and path for an Iceberg location (``s3a://``, ``file:/x`` forms
    included: :func:`sparkext.fs.filesystem`)."""

    return filesystem(uri)


DIRECT_READ_UNSUPPORTED = "sparkext-direct-read-unsupported"


class DirectReadUnsupported(ValueError):
    """An executor cannot read a file's key columns straight from Parquet (no field ids, a
    filesystem pyarrow does not know, a column missing from an old file): the driver redoes the
    round with Iceberg's reader. The marker in the message is how the driver recognises it."""

    def __init__(self, reason: str):
        super().__init__(f"{DIRECT_READ_UNSUPPORTED}: {reason}")


def _open_parquet(path: str):
    """pyarrow's file handle for ``path``, or DirectReadUnsupported for an unknown filesystem."""
    try:
        filesystem, local = _filesystem(path)
        return filesystem.open_input_file(local)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
        raise DirectReadUnsupported(f"cannot open {path} with pyarrow ({error})") from error


_KEY_CACHE: dict[tuple, pa.Array] = {}  # per Python worker: (path, field id, type) -> keys
_KEY_CACHE_MAX_ROWS = 20_000_000


def _field_names(parquet) -> dict[int, str]:
    out = {}
    for field in parquet.schema_arrow:
        meta = field.metadata or {}
        if b"PARQUET:field_id" in meta:
            out[int(meta[b"PARQUET:field_id"])] = field.name
    return out


def _first_keys(path: str, field_id: int, arrow_type: pa.DataType) -> pa.Array:
    """The distinct values of one equality column of a delete file, cached per worker."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cached = _KEY_CACHE.get((path, field_id, str(arrow_type)))
    if cached is None:
        with _open_parquet(path) as handle:
            parquet = pq.ParquetFile(handle)
            name = _field_names(parquet).get(field_id)
            if name is None:
                raise DirectReadUnsupported(f"equality-delete file {path} has no field {field_id}")
            column = parquet.read(columns=[name]).column(name)
        cached = pc.unique(column.combine_chunks().cast(arrow_type))
        if sum(len(v) for v in _KEY_CACHE.values()) + len(cached) > _KEY_CACHE_MAX_ROWS:
            _KEY_CACHE.clear()
        _KEY_CACHE[(path, field_id, str(arrow_type))] = cached
    return cached


class _KeySet:
    """The key values of a set of delete files, ready for repeated membership tests.

    Integer keys: a sorted numpy array and binary search (no hash table rebuilt per call);
    other types: Arrow's ``is_in``. Nulls match nulls (equality deletes are null-safe).
    """

    def __init__(self, values: pa.Array):
        import pyarrow.compute as pc

        self.has_null = values.null_count > 0
        self.integer = pa.types.is_integer(values.type)
        if self.integer:
            self.sorted = np.sort(values.drop_null().to_numpy().astype(np.int64))
        else:
            self.values = pc.unique(values)

    def contains(self, column: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        if not self.integer:
            return pc.is_in(column, value_set=self.values, skip_nulls=False)
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        data = column.fill_null(0).to_numpy().astype(np.int64)
        where = np.searchsorted(self.sorted, data)
        found = np.zeros(len(data), dtype=bool)
        if len(self.sorted):
            found = self.sorted[np.minimum(where, len(self.sorted) - 1)] == data
        mask = (found & ~nulls) | (nulls & self.has_null)
        return pa.array(mask)


_LOOKUPS: dict[tuple, _KeySet] = {}  # per Python worker: (delete paths, field id, type) -> set


def _lookup(paths: tuple[str, ...], field_id: int, arrow_type: pa.DataType) -> _KeySet:
    found = _LOOKUPS.get((paths, field_id, str(arrow_type)))
    if found is None:
        if len(_LOOKUPS) > 64:
            _LOOKUPS.clear()
        arrays = [_first_keys(p, field_id, arrow_type) for p in paths]
        found = _KeySet(pa.chunked_array(arrays, type=arrow_type).combine_chunks())
        _LOOKUPS[(paths, field_id, str(arrow_type))] = found
    return found


def _matching_rows(
    path: str,
    data_seq: int,
    pkey: str,
    field_ids: Sequence[int],
    deletes: Sequence[tuple[str, int, str | None]],
    first_type: pa.DataType,
) -> Iterator[tuple[pa.RecordBatch, pa.Array, int, list[str]]]:
    """Yield (key chunk, matching row indexes, chunk offset, column names) for one data file.

    A row matches when its first key value occurs in a delete file that applies to the data
    file (newer, same partition or table-wide); nulls match nulls.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    applicable = [d for d in deletes if d[1] > data_seq and (d[2] is None or d[2] == pkey)]
    if not applicable:
        return
    lookup = _lookup(tuple(sorted(d[0] for d in applicable)), field_ids[0], first_type)
    with _open_parquet(path) as handle:
        parquet = pq.ParquetFile(handle)
        by_id = _field_names(parquet)
        found = [by_id.get(i) for i in field_ids]
        names = [name for name in found if name is not None]
        if len(names) < len(found):  # no field ids (add_files), or a column added after it
            raise DirectReadUnsupported(f"data file {path} has no field id for a key column")
        offset = 0
        for chunk in parquet.iter_batches(columns=names, batch_size=262144):
            first = chunk.column(names[0]).cast(first_type)
            index = pc.indices_nonzero(lookup.contains(first))
            if len(index):
                yield chunk, index, offset, names
            offset += chunk.num_rows


def _descriptors(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str, int, str]]:
    for batch in batches:
        yield from zip(
            batch.column("file_path").to_pylist(),
            batch.column("data_seq").to_pylist(),
            batch.column("pkey").to_pylist(),
            strict=True,
        )


def data_key_reader(
    field_ids: Sequence[int],
    deletes: Sequence[tuple[str, int, str | None]],
    output: pa.Schema,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function: data files in, candidate rows out.

    Input rows are (file_path, data_seq, pkey) of Parquet data files; ``deletes`` lists the
    equality-delete files being converted as (path, sequence number, partition key or None for a
    table-wide delete). Only key columns are read, and only rows whose first key value occurs in
    an applicable delete file leave the task: ``file_path, pos, data_seq, pkey, d0..dn``. With
    one key column that IS the exact match; with several, a Spark join on all of them follows.
    """
    first_type = output.field(4).type

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        for path, data_seq, pkey in _descriptors(batches):
            for chunk, index, offset, names in _matching_rows(
                path, data_seq, pkey, field_ids, deletes, first_type
            ):
                n = len(index)
                columns = [
                    pa.array([path] * n, type=pa.string()),
                    pc.add(index.cast(pa.int64()), offset),
                    pa.array(np.full(n, data_seq, dtype=np.int64)),
                    pa.array([pkey] * n, type=pa.string()),
                ]
                for i, name in enumerate(names):
                    column = chunk.column(name).take(index)
                    columns.append(column.cast(output.field(4 + i).type))
                yield pa.RecordBatch.from_arrays(columns, schema=output)

    return read


def direct_delete_writer(
    field_id: int,
    first_type: pa.DataType,
    deletes: Sequence[tuple[str, int, str | None]],
    directory: str,
    prefix: str,
    deletion_vectors: bool,
    target_file_size: int,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function that matches AND writes, with no shuffle.

    For a single key column with nothing to merge: each data file's matching positions come
    out sorted, so the task writes that file's position-delete file (v2, one per data file) or
    its DV (v3, into the task's Puffin file) straight away.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        filesystem, base = _filesystem(directory)
        created = False
        out: list[tuple] = []
        puffin: dict = {}

        def close_puffin() -> None:
            if puffin:
                size = puffin["writer"].close()
                puffin["stream"].close()
                uri = file_uri(directory, puffin["path"])
                for e, pkey in puffin["blobs"]:
                    out.append(
                        (uri, pkey, e.cardinality, size, e.referenced_data_file, e.offset, e.length)
                    )
                puffin.clear()

        for path, data_seq, pkey in _descriptors(batches):
            parts = [
                pc.add(index.cast(pa.int64()), offset).to_numpy()
                for _, index, offset, _ in _matching_rows(
                    path, data_seq, pkey, [field_id], deletes, first_type
                )
            ]
            if not parts:
                continue
            positions = np.concatenate(parts)
            if not created:
                filesystem.create_dir(base, recursive=True)
                created = True
            if deletion_vectors:
                if not puffin:
                    name = f"{base.rstrip('/')}/{prefix}-{uuid.uuid4()}-deletes.puffin"
                    stream = filesystem.open_output_stream(name)
                    puffin.update(writer=PuffinWriter(stream), stream=stream, path=name, blobs=[])
                puffin["blobs"].append((puffin["writer"].add(path, positions), pkey))
                if puffin["writer"].size >= target_file_size:
                    close_puffin()
                continue
            name = f"{base.rstrip('/')}/{prefix}-{uuid.uuid4()}-deletes.parquet"
            with filesystem.open_output_stream(name) as stream:
                table = pa.Table.from_arrays(
                    [pa.array([path] * len(positions), type=pa.string()), pa.array(positions)],
                    schema=_POSITION_SCHEMA,
                )
                pq.write_table(
                    table,
                    stream,
                    compression="zstd",
                    use_dictionary=["file_path"],
                    column_encoding={"pos": "DELTA_BINARY_PACKED"},
                )
            size = filesystem.get_file_info(name).size
            out.append((file_uri(directory, name), pkey, len(positions), size, path, None, None))
        close_puffin()
        if out:
            yield _written(out)

    return write


def equality_key_reader(
    field_ids: Sequence[int], output: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function: (path, del_seq, del_pkey) rows in, key rows out.

    ``output`` is ``del_seq, del_pkey, k0, k1, ...`` with the key columns' Arrow types.
    """

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        for batch in batches:
            for path, seq, pkey in zip(
                batch.column("path").to_pylist(),
                batch.column("del_seq").to_pylist(),
                batch.column("del_pkey").to_pylist(),
                strict=True,
            ):
                filesystem, local = _filesystem(path)
                with filesystem.open_input_file(local) as handle:
                    parquet = pq.ParquetFile(handle)
                    by_id = {}
                    for field in parquet.schema_arrow:
                        meta = field.metadata or {}
                        if b"PARQUET:field_id" in meta:
                            by_id[int(meta[b"PARQUET:field_id"])] = field.name
                    missing = [i for i in field_ids if i not in by_id]
                    if missing:
                        raise ValueError(
                            f"equality-delete file {path} has no column with field id {missing[0]}"
                        )
                    names = [by_id[i] for i in field_ids]
                    for chunk in parquet.iter_batches(columns=names, batch_size=65536):
                        n = chunk.num_rows
                        columns = [
                            pa.array(np.full(n, seq, dtype=np.int64)),
                            pa.array([pkey] * n, type=pa.string()),
                        ]
                        for i, name in enumerate(names):
                            columns.append(chunk.column(name).cast(output.field(2 + i).type))
                        yield pa.RecordBatch.from_arrays(columns, schema=output)

    return read


def position_delete_writer(
    directory: str, prefix: str, target_file_size: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function writing sorted (group, pkey, file_path, pos) rows.

    One Parquet position-delete file per ``group`` (a data file, or a partition), rolled over
    at ``target_file_size`` bytes. Paths are dictionary-encoded and the sorted positions
    delta-encoded, so a position costs a few bits.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        filesystem, base = _filesystem(directory)
        filesystem.create_dir(base, recursive=True)
        done: list[tuple] = []
        state: dict = {"group": None, "writer": None}

        def close() -> None:
            if state["writer"] is not None:
                state["writer"].close()
                state["stream"].close()
                size = filesystem.get_file_info(state["path"]).size
                uri = file_uri(directory, state["path"])
                single = state["paths"][0] if len(state["paths"]) == 1 else None
                metrics = None
                if single is None:  # readers need its file_path bounds: computed here
                    metrics = parquet_metrics(
                        _POSITION_SCHEMA, state["writer"].writer.metadata, _POSITION_METRICS
                    )
                done.append((uri, state["pkey"], state["rows"], size, single, None, None, metrics))
                state["writer"] = None

        def open_(group: str, pkey: str) -> None:
            path = f"{base.rstrip('/')}/{prefix}-{uuid.uuid4()}-deletes.parquet"
            stream = filesystem.open_output_stream(path)
            writer = pq.ParquetWriter(
                stream,
                _POSITION_SCHEMA,
                compression="zstd",
                write_statistics=True,
                use_dictionary=["file_path"],
                column_encoding={"pos": "DELTA_BINARY_PACKED"},
            )
            state.update(
                group=group, pkey=pkey, path=path, stream=stream, rows=0, writer=writer, paths=[]
            )

        for batch in batches:
            groups = batch.column("group").to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
            ends = np.r_[starts[1:], len(groups)]
            for start, end in zip(starts, ends, strict=True):
                rows = batch.slice(start, end - start)
                if state["writer"] is None or state["group"] != groups[start]:
                    close()
                    open_(groups[start], rows.column("pkey")[0].as_py())
                table = pa.Table.from_arrays(
                    [rows.column("file_path"), rows.column("pos")], schema=_POSITION_SCHEMA
                )
                state["writer"].write_table(table)
                state["rows"] += rows.num_rows
                for data_file in pc.unique(rows.column("file_path")).to_pylist():
                    if len(state["paths"]) < 2 and data_file not in state["paths"]:
                        state["paths"].append(data_file)
                if state["stream"].tell() >= target_file_size:
                    close()
        close()
        if done:
            yield _written(done)

    return write


def deletion_vector_writer(
    directory: str, prefix: str, target_file_size: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a ``mapInArrow`` function writing one DV per data file into Puffin files.

    Rows arrive sorted by file_path; each file's positions become one blob.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem, base = _filesystem(directory)
        filesystem.create_dir(base, recursive=True)
        rows: list[tuple] = []
        state: dict = {"puffin": None, "file": None, "pkey": None, "parts": []}

        def flush_file() -> None:
            if state["file"] is None:
                return
            if state["puffin"] is None:
                path = f"{base.rstrip('/')}/{prefix}-{uuid.uuid4()}-deletes.puffin"
                stream = filesystem.open_output_stream(path)
                state.update(puffin=PuffinWriter(stream), stream=stream, path=path, blobs=[])
            entry = state["puffin"].add(state["file"], np.concatenate(state["parts"]))
            state["blobs"].append((entry, state["pkey"]))
            state.update(file=None, parts=[])
            if state["puffin"].size >= target_file_size:
                close_puffin()

        def close_puffin() -> None:
            if state["puffin"] is None:
                return
            size = state["puffin"].close()
            state["stream"].close()
            uri = file_uri(directory, state["path"])
            for entry, pkey in state["blobs"]:
                rows.append(
                    (
                        uri,
                        pkey,
                        entry.cardinality,
                        size,
                        entry.referenced_data_file,
                        entry.offset,
                        entry.length,
                    )
                )
            state["puffin"] = None

        for batch in batches:
            files = batch.column("file_path").to_numpy(zero_copy_only=False)
            positions = batch.column("pos").to_numpy()
            pkeys = batch.column("pkey").to_pylist()
            starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
            ends = np.r_[starts[1:], len(files)]
            for start, end in zip(starts, ends, strict=True):
                if files[start] != state["file"]:
                    flush_file()
                    state.update(file=str(files[start]), pkey=pkeys[start])
                state["parts"].append(positions[start:end])
        flush_file()
        close_puffin()
        if rows:
            yield _written(rows)

    return write


def _written(rows: list[tuple]) -> pa.RecordBatch:
    width = len(_WRITTEN)
    columns = list(zip(*(row + (None,) * (width - len(row)) for row in rows), strict=True))
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, _WRITTEN, strict=True)],
        schema=_WRITTEN,
    )
