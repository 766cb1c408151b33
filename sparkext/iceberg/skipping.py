"""Where skipping indexes live: declarations in table properties, entries in Puffin files.

* A **declaration** is table property ``sparkext.index.<name>`` holding the index's JSON
  (:meth:`IndexSpec.to_property`); it is set and removed with one compare-and-swap of that
  property (:func:`sparkext.iceberg.commit.swap_property`).
* An **index object** is one Puffin statistics file per indexed snapshot, written with
  Iceberg's own Puffin writer under the table's metadata location
  (``sparkext-index-<snapshot>-<uuid>.stats``) and attached to the snapshot with
  ``UpdateStatistics.setStatistics`` in one commit of the commit layer. It holds one blob per
  index (type ``sparkext-skipping-index-v1``, ``fields`` the column's field id, property
  ``sparkext.index.name``) and keeps every other blob the snapshot's statistics file had
  (Iceberg's theta sketches from ``compute_table_stats``), so nothing is lost.
* A query at snapshot S uses the object of the nearest ancestor-or-self of S that has one: a
  data file never changes, so an entry about it stays true for every snapshot that holds it,
  and a file the object does not list is read.

Reading takes the footer from Iceberg's Puffin reader and the blobs' bytes straight from the
file with pyarrow (Iceberg's reader when a blob is compressed or pyarrow cannot open the file).
Decoded indexes are kept in one process-wide LRU cache keyed by the Puffin path (a path is
never rewritten), bounded by the bytes the decoded indexes hold; a build decodes the object it
wrote into it ahead of the first query.

Floor: iceberg (the Iceberg Java API, through py4j). No JavaObject leaves this module.
"""

from __future__ import annotations

import collections
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext.errors import CommitConflictError
from sparkext.fs import filesystem
from sparkext.iceberg.catalog import load_java_table
from sparkext.iceberg.commit import (
    CommitRequest,
    PropertySwap,
    commit,
    delete_files,
    discard_unless_unknown,
    swap_property,
)
from sparkext.planning import skipping as core
from sparkext.spark.java import iterate, string_map
from sparkext.spark.java import jvm as jvm_of
from sparkext.version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

PROPERTY_PREFIX = "sparkext.index."
NAME_PROPERTY = "sparkext.index.name"  # a blob's property: the index it holds
FILE_PREFIX = "sparkext-index-"
CACHE_BYTES = 256 * 1024 * 1024


# ---- declarations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """One ``sparkext.index.<name>`` property: its spec, or why it cannot be read."""

    name: str
    spec: core.IndexSpec | None
    text: str
    problem: str | None = None


def declarations(properties: Mapping[str, str]) -> list[Declared]:
    """The table's declared indexes, by name (a property that does not parse is kept, with the
    reason, so SHOW INDEXES shows it and a build names it)."""
    out = []
    for key in sorted(properties):
        if not key.startswith(PROPERTY_PREFIX) or key == NAME_PROPERTY:
            continue
        name = key[len(PROPERTY_PREFIX) :]
        text = properties[key]
        try:
            out.append(Declared(name, core.IndexSpec.from_property(name, text), text))
        except Exception as error:  # a property someone set by hand
            out.append(Declared(name, None, text, str(error) or type(error).__name__))
    return out


def declared_specs(properties: Mapping[str, str]) -> dict[str, core.IndexSpec]:
    """The declarations that parse, by name."""
    return {d.name: d.spec for d in declarations(properties) if d.spec is not None}


def same_spec(a: core.IndexSpec, b: core.IndexSpec) -> bool:
    """Whether two specs declare the same index (name, type, column and options)."""
    return _key(a) == _key(b)


def _key(spec: core.IndexSpec) -> tuple[str, str, str, dict[str, str]]:
    return (spec.name, spec.type, spec.column, dict(spec.options))


def property_key(name: str) -> str:
    return PROPERTY_PREFIX + name


def swap_declaration(
    spark: SparkSession,
    table_name: str,
    name: str,
    decide: Any,
    what: str,
) -> PropertySwap:
    """Set or remove declaration ``name`` with one compare-and-swap (``decide(current text)``
    returns the :class:`PropertyChange`, or None to leave it)."""
    return swap_property(
        spark,
        load_java_table(spark, table_name),
        table_name,
        property_key(name),
        decide,
        what,
        "run the statement again",
    )


# ---- columns ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A top-level column: its field id and its Spark SQL type name (``simpleString``)."""

    name: str
    field_id: int
    spark_type: str


def columns(spark: SparkSession, table_name: str) -> dict[str, Column]:
    """The table's top-level columns, in schema order."""
    table = load_java_table(spark, table_name)
    convert = jvm_of(spark).org.apache.iceberg.spark.SparkSchemaUtil.convert
    out = {}
    for field in iterate(table.schema().columns()):
        try:
            spark_type = str(convert(field.type()).simpleString())
        except Exception:  # a type Spark has no name for (Iceberg's time): not indexable
            spark_type = str(field.type())
        out[str(field.name())] = Column(str(field.name()), int(field.fieldId()), spark_type)
    return out


# ---- index objects ------------------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """One blob of a Puffin file, as its footer describes it."""

    type: str
    fields: tuple[int, ...]
    offset: int
    length: int
    properties: Mapping[str, str]
    codec: str | None = None  # how its bytes are compressed in the file (None: not at all)
    snapshot_id: int = -1
    sequence_number: int = -1

    @property
    def index_name(self) -> str | None:
        return self.properties.get(NAME_PROPERTY) if self.type == core.BLOB_TYPE else None


@dataclass(frozen=True)
class IndexObject:
    """The statistics file of one snapshot that holds skipping-index blobs."""

    snapshot_id: int
    path: str
    size: int
    footer_size: int

    @property
    def ours(self) -> bool:
        return self.path.rsplit("/", 1)[-1].startswith(FILE_PREFIX)


def _statistics_files(table: Any) -> dict[int, Any]:
    return {int(f.snapshotId()): f for f in iterate(table.statisticsFiles())}


def _has_index_blob(statistics_file: Any) -> bool:
    return any(str(b.type()) == core.BLOB_TYPE for b in iterate(statistics_file.blobMetadata()))


def _object(statistics_file: Any) -> IndexObject:
    return IndexObject(
        int(statistics_file.snapshotId()),
        str(statistics_file.path()),
        int(statistics_file.fileSizeInBytes()),
        int(statistics_file.fileFooterSizeInBytes()),
    )


class SkippingTable:
    """An Iceberg table's skipping indexes. Java objects never leave it."""

    def __init__(self, spark: SparkSession, ref: TableRef):
        self._spark = spark
        self.ref = ref
        self._jvm = jvm_of(spark)
        self._table = load_java_table(spark, ref.name)

    def refresh(self) -> None:
        self._table.refresh()

    def properties(self) -> dict[str, str]:
        return string_map(self._table.properties())

    def current_snapshot_id(self) -> int | None:
        snapshot = self._table.currentSnapshot()
        return int(snapshot.snapshotId()) if snapshot is not None else None

    def index_object(self, snapshot_id: int | None) -> IndexObject | None:
        """The index object a query at ``snapshot_id`` uses (nearest ancestor-or-self)."""
        return index_object_of(self._jvm, self._table, snapshot_id)

    def statistics_file(self, snapshot_id: int) -> IndexObject | None:
        """Whatever statistics file the snapshot has (ours or Iceberg's), if any."""
        found = _statistics_files(self._table).get(snapshot_id)
        return _object(found) if found is not None else None

    def blobs(self, found: IndexObject) -> list[Blob]:
        """The blobs the object's footer lists."""
        reader = _reader(self._jvm, self._table, found)
        try:
            return [_blob(m) for m in iterate(reader.fileMetadata().blobs())]
        finally:
            reader.close()

    def index_blobs(self, found: IndexObject) -> dict[str, bytes]:
        """The bytes of each skipping-index blob of ``found``, by index name."""
        return {
            name: data
            for meta, data in _read(self._jvm, self._table, found, core.BLOB_TYPE)
            if (name := meta.index_name) is not None
        }

    def loaded(self, found: IndexObject) -> list[core.LoadedIndex]:
        """The object's indexes, decoded (cached)."""
        return load_indexes(self._jvm, self._table, found)

    def live_data_files(self, snapshot_id: int) -> list[DataFile]:
        """Every live data file of ``snapshot_id`` (the ``data_files`` metadata table: one
        small row per file, manifests only)."""
        rows = (
            self._spark.read.format("iceberg")
            .option("snapshot-id", str(snapshot_id))
            .load(self.ref.metadata_table("data_files"))
            .select("file_path", "file_format", "record_count", "file_size_in_bytes")
            .collect()  # metadata: one small row per live data file
        )
        return [
            DataFile(str(r.file_path), str(r.file_format), int(r.record_count),
                     int(r.file_size_in_bytes))
            for r in rows
        ]  # fmt: skip

    def write(
        self,
        snapshot_id: int,
        blobs: Sequence[tuple[str, int, bytes]],
        base: IndexObject | None,
    ) -> IndexObject:
        """Write the index object of ``snapshot_id`` (``blobs``: index name, field id, blob
        bytes) and attach it in one commit. ``base`` is the statistics file the snapshot had
        when the build was planned (its other blobs are copied over); when another writer
        replaced it meanwhile, nothing is committed (:class:`CommitConflictError`). A failed
        commit deletes the new file, an unknown commit state keeps it."""
        snapshot = self._table.snapshot(snapshot_id)
        if snapshot is None:
            raise CommitConflictError(
                f"Snapshot {snapshot_id} of {self.ref.name} expired while its skipping indexes "
                "were being built; nothing was committed: run the build again."
            )
        io = self._table.io()
        location = str(
            self._table.operations().metadataFileLocation(
                f"{FILE_PREFIX}{snapshot_id}-{uuid.uuid4().hex}.stats"
            )
        )
        written = self._write_puffin(io, location, snapshot, blobs, base)
        statistics = self._jvm.org.apache.iceberg.GenericStatisticsFile(
            snapshot_id, location, written.size, written.footer_size, written.metadata
        )
        what = f"the skipping indexes of snapshot {snapshot_id}"

        def build(attempt: Any) -> None:
            now = _statistics_files(attempt.table).get(snapshot_id)
            now_path = str(now.path()) if now is not None else None
            if now_path != (base.path if base is not None else None):
                raise CommitConflictError(
                    f"Another build attached statistics to snapshot {snapshot_id} of "
                    f"{self.ref.name} meanwhile; nothing was committed: run the build again."
                )
            attempt.txn.updateStatistics().setStatistics(statistics).commit()

        request = CommitRequest(
            table_name=self.ref.name,
            planned_snapshot_id=snapshot_id,
            build=build,
            what=what,
            rerun_hint="run CALL sparkext.build_indexes again",
        )
        with discard_unless_unknown(
            lambda: delete_files(self._table, [location]), self.ref.name, what
        ):
            commit(self._spark, self._table, request)
        if base is not None and base.ours and base.path != location:
            delete_files(self._table, [base.path])  # replaced: no snapshot refers to it now
        return IndexObject(snapshot_id, location, written.size, written.footer_size)

    def _write_puffin(
        self,
        io: Any,
        location: str,
        snapshot: Any,
        blobs: Sequence[tuple[str, int, bytes]],
        base: IndexObject | None,
    ) -> _Written:
        puffin = self._jvm.org.apache.iceberg.puffin
        snapshot_id = int(snapshot.snapshotId())
        sequence = int(snapshot.sequenceNumber())
        writer = (
            puffin.Puffin.write(io.newOutputFile(location))
            .createdBy(f"sparkext {__version__}")
            .build()
        )
        try:
            if base is not None:  # keep every other blob of the snapshot's statistics file
                for meta, data in _read(self._jvm, self._table, base, None):
                    if meta.type == core.BLOB_TYPE:
                        continue
                    codec = meta.codec
                    writer.add(
                        puffin.Blob(
                            meta.type,
                            _int_list(self._jvm, meta.fields),
                            meta.snapshot_id,
                            meta.sequence_number,
                            self._jvm.java.nio.ByteBuffer.wrap(data),
                            puffin.PuffinCompressionCodec.forName(codec) if codec else None,
                            _string_map(self._jvm, meta.properties),
                        )
                    )
            for name, field_id, data in blobs:
                writer.add(
                    puffin.Blob(
                        core.BLOB_TYPE,
                        _int_list(self._jvm, [field_id]),
                        snapshot_id,
                        sequence,
                        self._jvm.java.nio.ByteBuffer.wrap(data),
                        None,
                        _string_map(self._jvm, {NAME_PROPERTY: name}),
                    )
                )
            writer.finish()
            written = _Written(
                int(writer.fileSize()),
                int(writer.footerSize()),
                _blob_metadata(self._jvm, writer.writtenBlobsMetadata()),
            )
        except BaseException:
            try:
                writer.close()
            finally:
                delete_files(self._table, [location])
            raise
        writer.close()
        return written


@dataclass(frozen=True)
class DataFile:
    path: str
    format: str  # PARQUET, ORC, AVRO
    records: int
    size: int


@dataclass(frozen=True)
class _Written:
    size: int
    footer_size: int
    metadata: Any  # java.util.List<org.apache.iceberg.BlobMetadata>


def _blob_metadata(jvm: Any, written: Any) -> Any:
    """Iceberg's table-level blob metadata for the blobs a Puffin writer wrote."""
    out = jvm.java.util.ArrayList()
    convert = getattr(jvm.org.apache.iceberg.GenericBlobMetadata, "from")
    for meta in iterate(written):
        out.add(convert(meta))
    return out


def _int_list(jvm: Any, values: Iterable[int]) -> Any:
    out = jvm.java.util.ArrayList()
    for value in values:
        out.add(jvm.java.lang.Integer.valueOf(int(value)))
    return out


def _string_map(jvm: Any, values: Mapping[str, str]) -> Any:
    out = jvm.java.util.HashMap()
    for key, value in values.items():
        out.put(key, value)
    return out


def _blob(meta: Any) -> Blob:
    codec = meta.compressionCodec()
    return Blob(
        str(meta.type()),
        tuple(int(i) for i in iterate(meta.inputFields())),
        int(meta.offset()),
        int(meta.length()),
        string_map(meta.properties()),
        str(codec) if codec else None,
        int(meta.snapshotId()),
        int(meta.sequenceNumber()),
    )


def _reader(jvm: Any, table: Any, found: IndexObject) -> Any:
    input_file = table.io().newInputFile(found.path, found.size)
    return (
        jvm.org.apache.iceberg.puffin.Puffin.read(input_file)
        .withFileSize(found.size)
        .withFooterSize(found.footer_size)
        .build()
    )


def _read(
    jvm: Any, table: Any, found: IndexObject, blob_type: str | None
) -> list[tuple[Blob, bytes]]:
    """The blobs of ``found`` (of ``blob_type`` only, unless None) with their bytes,
    decompressed. The footer comes from Iceberg's Puffin reader; the bytes of uncompressed blobs
    are read straight from the file with pyarrow (:func:`sparkext.fs.filesystem`: megabytes
    through py4j take seconds), others — and any file pyarrow cannot open — by Iceberg's
    reader."""
    reader = _reader(jvm, table, found)
    try:
        metas = [
            meta
            for meta in iterate(reader.fileMetadata().blobs())
            if blob_type is None or str(meta.type()) == blob_type
        ]
        blobs = [_blob(meta) for meta in metas]
        if not blobs:
            return []
        direct = _read_directly(found.path, blobs)
        if direct is not None:
            return list(zip(blobs, direct, strict=True))
        wanted = jvm.java.util.ArrayList()
        for meta in metas:
            wanted.add(meta)
        to_bytes = jvm.org.apache.iceberg.util.ByteBuffers.toByteArray
        data = {
            int(pair.first().offset()): bytes(to_bytes(pair.second()))
            for pair in iterate(reader.readAll(wanted))
        }
        return [(blob, data[blob.offset]) for blob in blobs]
    finally:
        reader.close()


def _read_directly(path: str, blobs: Sequence[Blob]) -> list[bytes] | None:
    """The bytes of uncompressed ``blobs`` of the Puffin file at ``path``, read with pyarrow
    (None: a blob is compressed, or pyarrow cannot read the file where Iceberg's FileIO can)."""
    if any(blob.codec for blob in blobs):
        return None
    try:
        found, local = filesystem(path)
        with found.open_input_file(local) as handle:
            return [bytes(handle.read_at(blob.length, blob.offset)) for blob in blobs]
    except Exception:
        return None


def index_object_of(jvm: Any, table: Any, snapshot_id: int | None) -> IndexObject | None:
    """The index object of the nearest ancestor-or-self of ``snapshot_id`` (None: none)."""
    if snapshot_id is None:
        return None
    ours = {s: f for s, f in _statistics_files(table).items() if _has_index_blob(f)}
    if not ours:
        return None
    if snapshot_id in ours:
        return _object(ours[snapshot_id])
    util = jvm.org.apache.iceberg.util.SnapshotUtil
    candidates = []
    for candidate in ours:
        snapshot = table.snapshot(candidate)
        if snapshot is not None:
            candidates.append((int(snapshot.sequenceNumber()), candidate))
    for _, candidate in sorted(candidates, reverse=True):
        if util.isAncestorOf(table, snapshot_id, candidate):
            return _object(ours[candidate])
    return None


# ---- decoded indexes, cached --------------------------------------------------------------


class _Cache:
    """Decoded indexes by Puffin path, least recently used first out, bounded by bytes."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, tuple[int, list[core.LoadedIndex]]] = (
            collections.OrderedDict()
        )
        self._bytes = 0

    def get(self, path: str) -> list[core.LoadedIndex] | None:
        with self._lock:
            found = self._entries.get(path)
            if found is None:
                return None
            self._entries.move_to_end(path)
            return found[1]

    def put(self, path: str, indexes: list[core.LoadedIndex]) -> None:
        size = sum(int(i.nbytes) for i in indexes)
        with self._lock:
            previous = self._entries.pop(path, None)
            if previous is not None:
                self._bytes -= previous[0]
            if size > self.limit:
                return
            self._entries[path] = (size, indexes)
            self._bytes += size
            while self._bytes > self.limit and self._entries:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


CACHE = _Cache(CACHE_BYTES)


def warm(found: IndexObject, blobs: Sequence[bytes]) -> None:
    """Decode a just-written object's blobs into :data:`CACHE` on a thread of its own, so the
    first query after a build (in this driver) does not pay the decoding; a query that comes
    first decodes for itself."""

    def decode() -> None:
        try:
            CACHE.put(found.path, [core.decode_blob(data) for data in blobs])
        except Exception:  # the query decodes it then, and says why if it cannot
            return

    threading.Thread(target=decode, name="sparkext-index-warm", daemon=True).start()


def load_indexes(jvm: Any, table: Any, found: IndexObject) -> list[core.LoadedIndex]:
    """Every skipping index of ``found``, decoded once per process (:data:`CACHE`)."""
    cached = CACHE.get(found.path)
    if cached is not None:
        return cached
    indexes = [core.decode_blob(data) for _, data in _read(jvm, table, found, core.BLOB_TYPE)]
    CACHE.put(found.path, indexes)
    return indexes


def java_index_object(path: str, size: int, footer_size: int) -> IndexObject:
    """The object the JVM's planning hook names (its snapshot is not needed to read it)."""
    return IndexObject(-1, path, size, footer_size)


def java_properties(table: Any) -> dict[str, str]:
    """A Java table's properties (the planning hook hands the table itself)."""
    return string_map(table.properties())
