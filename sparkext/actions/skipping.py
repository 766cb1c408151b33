"""The skipping-index actions: declare, drop, show and build indexes, and answer the planner.

Floor: actions. The procedures (``create_index``, ``drop_index``, ``show_indexes``,
``build_indexes``), the statements ``CREATE INDEX`` / ``DROP INDEX`` / ``SHOW INDEXES``,
``tiered_optimize``'s last step, the optimisation service and ``table_health`` call these and
get typed values back; the JVM's planning hook calls :func:`prune_files`.

**Building** (:func:`build_indexes`): the driver lists the live data files of the current
snapshot (manifests only), keeps the entries the latest index object already has for files
that are still live (an index whose declaration or column type changed starts afresh), and
builds the missing entries on the executors — each task reads only the indexed columns of its
files, straight from Parquet (:mod:`sparkext.executors.skipping`), and returns one small entry
per file and index. The driver then writes ONE index object for the snapshot, with every
declared index (an index not asked for keeps its previous blob), and attaches it in one commit
(:mod:`sparkext.iceberg.skipping`). When every live file is already listed, nothing is written.

**Pruning** (:func:`prune_files`): the decoded indexes of the object the hook found (cached per
process), those whose declaration still matches, and :func:`sparkext.planning.skipping.prune`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkext.declarations import Context, Option, bind_declared, parse_boolean
from sparkext.errors import CommitConflictError, UsageError, did_you_mean
from sparkext.executors.skipping import Target, entry_builder
from sparkext.iceberg.commit import PropertyChange
from sparkext.iceberg.skipping import (
    PROPERTY_PREFIX,
    Column,
    DataFile,
    IndexObject,
    SkippingTable,
    columns,
    declarations,
    declared_specs,
    java_index_object,
    java_properties,
    load_indexes,
    property_key,
    same_spec,
    swap_declaration,
    warm,
)
from sparkext.planning import skipping as core
from sparkext.spark import cancellation
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef

_LOG = logging.getLogger(__name__)

ENABLED_CONF = "spark.sparkext.index.enabled"  # a session's switch: false = no pruning at all
REBUILD = "rebuild"
BUILD_OPTIONS = (
    Option(
        REBUILD,
        "false",
        "build every entry again instead of keeping those of still-live files",
        parse_boolean,
    ),
)
BATCH_FILES = 5000  # files per Spark job of a build (a progress line each)
TASK_BYTES = 256 * 1024 * 1024  # data-file bytes one build task reads, about
DECLARED_ONLY = "declared; built by tiered_optimize, the service or CALL sparkext.build_indexes"


def options_json(spec: core.IndexSpec) -> str:
    return json.dumps(dict(spec.options), sort_keys=True)


def describe(spec: core.IndexSpec) -> str:
    """``rid (bloom_filter on request_id)``."""
    return f"{spec.name} ({spec.type} on {spec.column})"


# ---- declare and drop ---------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """What ``create_index`` did; the fields are its output columns, in order."""

    name: str
    type: str
    column: str
    options: str  # JSON, every option with its value (defaults filled)
    result: str

    def row(self) -> tuple[Any, ...]:
        return (self.name, self.type, self.column, self.options, self.result)


def create_index(
    context: Context,
    ref: TableRef,
    name: str,
    index_type: str,
    column: str | Sequence[str],
    options: Mapping[str, str] | None = None,
    if_not_exists: bool = False,
    build: bool = False,
) -> Declared:
    """Declare an index (table property ``sparkext.index.<name>``, one compare-and-swap); with
    ``build``, build it at once. Raises :class:`UsageError` for a bad declaration and for a name
    already declared (unless ``if_not_exists``)."""
    names = [column] if isinstance(column, str) else list(column)
    types = {c.name: c.spark_type for c in columns(context.spark, ref.name).values()}
    spec = core.validate_spec(name, index_type, names, dict(options or {}), types)
    text = spec.to_property()
    existing: list[str | None] = []

    def decide(current: str | None) -> PropertyChange | None:
        existing[:] = [current]
        if current is None:
            return PropertyChange(text)
        if if_not_exists:
            return None
        raise UsageError(
            f"Index '{spec.name}' already exists on {ref.name} "
            f"({_declared_as(spec.name, current)}); drop it first with DROP INDEX {spec.name} "
            f"ON {ref.name}, or write CREATE INDEX IF NOT EXISTS."
        )

    swapped = swap_declaration(context.spark, ref.name, spec.name, decide, f"index '{spec.name}'")
    if not swapped.changed:
        kept = _spec_or(spec.name, existing[0] if existing else None, spec)
        return Declared(
            kept.name, kept.type, kept.column, options_json(kept),
            "already exists; left as it is (IF NOT EXISTS)",
        )  # fmt: skip
    result = DECLARED_ONLY
    if build:
        built = build_indexes(context, ref, [spec.name])
        result = "declared and built: " + built.summary()
    return Declared(spec.name, spec.type, spec.column, options_json(spec), result)


def _spec_or(name: str, text: str | None, fallback: core.IndexSpec) -> core.IndexSpec:
    if text is None:
        return fallback
    try:
        return core.IndexSpec.from_property(name, text)
    except Exception:
        return fallback


def _declared_as(name: str, text: str) -> str:
    try:
        spec = core.IndexSpec.from_property(name, text)
    except Exception:
        return "an unreadable declaration"
    return f"{spec.type} on {spec.column}"


@dataclass(frozen=True)
class Dropped:
    name: str
    result: str

    def row(self) -> tuple[Any, ...]:
        return (self.name, self.result)


def drop_index(context: Context, ref: TableRef, name: str, if_exists: bool = False) -> Dropped:
    """Remove declaration ``name`` (one compare-and-swap). Its entries stay in the index objects
    already written (unused from now on) and leave with the next build or their snapshots."""
    key = name.strip().lower()

    def decide(current: str | None) -> PropertyChange | None:
        if current is not None:
            return PropertyChange(None)
        if if_exists:
            return None
        declared = [d.name for d in declarations(dict(ref.properties))]
        listed = ", ".join(declared) if declared else "none"
        raise UsageError(
            f"Index '{name}' does not exist on {ref.name}{did_you_mean(key, declared)}; its "
            f"indexes: {listed} (write DROP INDEX IF EXISTS to ignore a missing one)."
        )

    swapped = swap_declaration(context.spark, ref.name, key, decide, f"index '{key}'")
    if not swapped.changed:
        return Dropped(key, "did not exist; nothing changed (IF EXISTS)")
    return Dropped(key, "dropped; no query uses it from now on")


# ---- show ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexState:
    """One declared index as SHOW INDEXES shows it; the fields are its columns, in order."""

    name: str
    type: str | None
    column: str | None
    options: str  # JSON (the property's text when it does not parse)
    indexed_files: int
    live_files: int
    coverage: float | None  # indexed / live; None without live files
    index_bytes: int | None  # the index's blob in the current object; None without one
    index_snapshot_id: int | None  # the snapshot the object used now belongs to

    def row(self) -> tuple[Any, ...]:
        return (
            self.name, self.type, self.column, self.options, self.indexed_files,
            self.live_files, self.coverage, self.index_bytes, self.index_snapshot_id,
        )  # fmt: skip


def show_indexes(context: Context, ref: TableRef) -> list[IndexState]:
    """Every declared index of ``ref`` with what the current snapshot's index object holds."""
    table = SkippingTable(context.spark, ref)
    table.refresh()
    declared = declarations(table.properties())
    if not declared:
        return []
    snapshot_id = table.current_snapshot_id()
    live = {f.path for f in table.live_data_files(snapshot_id)} if snapshot_id else set()
    found = table.index_object(snapshot_id)
    listed, sizes = _listed(table, found, {d.name: d.spec for d in declared if d.spec})
    out = []
    for d in declared:
        paths = listed.get(d.name)
        indexed = len(live & paths) if paths is not None else 0
        out.append(
            IndexState(
                d.name,
                d.spec.type if d.spec else None,
                d.spec.column if d.spec else None,
                options_json(d.spec) if d.spec else d.text,
                indexed,
                len(live),
                indexed / len(live) if live else None,
                sizes.get(d.name),
                found.snapshot_id if found is not None and paths is not None else None,
            )
        )
    return out


def _listed(
    table: SkippingTable, found: IndexObject | None, specs: Mapping[str, core.IndexSpec | None]
) -> tuple[dict[str, set[str]], dict[str, int]]:
    """(paths each still-valid index of ``found`` lists, its blob's bytes), by index name."""
    if found is None:
        return {}, {}
    sizes = {b.index_name: b.length for b in table.blobs(found) if b.index_name is not None}
    listed = {}
    for loaded in _decoded(table, found):
        spec = specs.get(loaded.spec.name)
        if spec is not None and same_spec(spec, loaded.spec):
            listed[spec.name] = set(loaded.paths)
    return listed, {n: s for n, s in sizes.items() if n in listed}


def _decoded(table: SkippingTable, found: IndexObject | None) -> list[core.LoadedIndex]:
    """The decoded indexes of ``found``; none when it cannot be decoded (written by another
    version of the format, damaged): then nothing counts as indexed, and a build starts afresh."""
    if found is None:
        return []
    try:
        return table.loaded(found)
    except Exception:
        _LOG.debug("index object %s not decoded", found.path, exc_info=True)
        return []


# ---- build --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexBuilt:
    """One index after a build; the fields are ``build_indexes``' output columns, in order."""

    name: str
    type: str
    column: str
    live_files: int
    files_indexed: int  # entries built now
    files_carried: int  # entries kept from the previous index object
    files_skipped: int  # live files the index does not list (not Parquet, no field ids)
    index_bytes: int
    snapshot_id: int | None  # the snapshot whose index object holds it (None: empty table)
    duration_ms: int

    def row(self) -> tuple[Any, ...]:
        return (
            self.name, self.type, self.column, self.live_files, self.files_indexed,
            self.files_carried, self.files_skipped, self.index_bytes, self.snapshot_id,
            self.duration_ms,
        )  # fmt: skip


@dataclass(frozen=True)
class BuildResult:
    """One build: its indexes, whether an index object was written, what was read."""

    indexes: tuple[IndexBuilt, ...]
    snapshot_id: int | None
    written: bool
    files_read: int
    bytes_read: int
    seconds: float

    @property
    def files_indexed(self) -> int:
        return sum(i.files_indexed for i in self.indexes)

    @property
    def index_bytes(self) -> int:
        return sum(i.index_bytes for i in self.indexes)

    def summary(self) -> str:
        """``12 files indexed, 30 carried over (rid bloom_filter on request_id)``."""
        names = ", ".join(f"{i.name} {i.type} on {i.column}" for i in self.indexes)
        if not self.written:
            return f"up to date, nothing to index ({names})"
        carried = max((i.files_carried for i in self.indexes), default=0)
        return (
            f"{_files(self.files_read)} indexed, {carried} carried over, "
            f"{self.index_bytes} index bytes ({names})"
        )


def _files(count: int) -> str:
    """``1 file``, ``2 files``.

    >>> _files(1), _files(0)
    ('1 file', '0 files')
    """
    return f"{count} file" if count == 1 else f"{count} files"


def build_indexes(
    context: Context,
    ref: TableRef,
    indexes: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
) -> BuildResult:
    """Build the missing entries of ``indexes`` (None: every declared index) for the live data
    files of the current snapshot and attach the index object to that snapshot (module
    docstring). Raises :class:`UsageError` when the table declares none, names an index it
    does not declare, or an index's column is gone.

    Two builds racing on one snapshot: the first to commit wins; the other's commit is refused
    (its file deleted) and it starts again from the winner's object, which lists the files it
    had built, so the second attempt has little or nothing left to do. After
    ``BUILD_ATTEMPTS`` refusals the conflict is raised."""
    started = time.monotonic()
    for attempt in range(1, BUILD_ATTEMPTS + 1):
        try:
            return _build_once(context, ref, indexes, options, started)
        except CommitConflictError:
            if attempt == BUILD_ATTEMPTS:
                raise
            context.progress(f"another build of {ref.name} committed first: building again")
    raise AssertionError("unreachable")


BUILD_ATTEMPTS = 3


def _build_once(
    context: Context,
    ref: TableRef,
    indexes: Sequence[str] | None,
    options: Mapping[str, str] | None,
    started: float,
) -> BuildResult:
    rebuild = bool(bind_declared("sparkext.build_indexes", BUILD_OPTIONS, options)[REBUILD])
    spark = context.spark
    table = SkippingTable(spark, ref)
    table.refresh()
    chosen, others = _selected_specs(ref.name, table.properties(), indexes)
    cols = columns(spark, ref.name)
    for spec in chosen:
        _column_of(ref.name, spec, cols)
    snapshot_id = table.current_snapshot_id()
    if snapshot_id is None:
        return BuildResult(
            tuple(_built(s, 0, 0, 0, 0, 0, None, started) for s in chosen), None, False, 0, 0,
            time.monotonic() - started,
        )  # fmt: skip
    context.progress(f"reading file metadata of {ref.name}")
    live = table.live_data_files(snapshot_id)
    live_paths = {f.path for f in live}
    previous = table.index_object(snapshot_id)
    # what the previous object lists, from its decoded indexes (cached: the planner's too), so
    # a build with nothing to do reads no blob
    loaded = {i.spec.name: i for i in _decoded(table, previous)}
    valid = {
        spec.name
        for spec in chosen
        if spec.name in loaded
        and same_spec(loaded[spec.name].spec, spec)
        and loaded[spec.name].column_type == _column_of(ref.name, spec, cols).spark_type
    }
    listed = {
        spec.name: set(loaded[spec.name].paths) & live_paths
        if spec.name in valid and not rebuild
        else set()
        for spec in chosen
    }
    need: dict[str, list[str]] = {}
    for spec in chosen:
        for f in live:
            if f.path not in listed[spec.name]:
                need.setdefault(f.path, []).append(spec.name)
    if not need and not rebuild and valid == {s.name for s in chosen}:
        assert previous is not None  # every chosen index has a valid blob in it
        return _up_to_date(chosen, previous, live, listed, table, started)
    previous_blobs = table.index_blobs(previous) if previous is not None else {}
    carried = {
        spec.name: [(p, e) for p, e in core.blob_entries(previous_blobs[spec.name])
                    if p in listed[spec.name]]
        if listed[spec.name] else []
        for spec in chosen
    }  # fmt: skip
    by_path = {f.path: f for f in live}
    todo = [(by_path[p], tuple(names)) for p, names in need.items()]
    targets = [
        Target(s.name, s.to_property(), c.field_id, c.spark_type)
        for s in chosen
        for c in [_column_of(ref.name, s, cols)]
    ]
    built, skipped = _run_builds(context, ref.name, todo, targets)
    blobs: list[tuple[str, int, bytes]] = []
    sizes: dict[str, int] = {}
    for spec in chosen:
        column = _column_of(ref.name, spec, cols)
        entries = sorted(carried[spec.name] + built.get(spec.name, []))
        data = core.encode_blob(spec, column.spark_type, entries)
        blobs.append((spec.name, column.field_id, data))
        sizes[spec.name] = len(data)
    for spec in others:  # declared, not asked for: keep their blob as it is
        blob = previous_blobs.get(spec.name)
        kept = cols.get(spec.column)
        if blob is not None and kept is not None and _blob_matches(blob, spec, kept):
            blobs.append((spec.name, kept.field_id, blob))
    context.progress(f"writing the index object of snapshot {snapshot_id}")
    base = table.statistics_file(snapshot_id)
    written = table.write(snapshot_id, blobs, base)
    warm(written, [data for _, _, data in blobs])  # the planner's next question, decoded ahead
    counts = {s.name: len(built.get(s.name, [])) for s in chosen}
    results = tuple(
        _built(
            spec, len(live), counts[spec.name], len(carried[spec.name]),
            len(live) - counts[spec.name] - len(carried[spec.name]), sizes[spec.name],
            snapshot_id, started,
        )
        for spec in chosen
    )  # fmt: skip
    read = [f for f, _ in todo if f.path not in skipped]
    return BuildResult(
        results, snapshot_id, True, len(read), sum(f.size for f in read),
        time.monotonic() - started,
    )  # fmt: skip


def _up_to_date(
    chosen: Sequence[core.IndexSpec],
    previous: IndexObject,
    live: Sequence[DataFile],
    listed: Mapping[str, set[str]],
    table: SkippingTable,
    started: float,
) -> BuildResult:
    sizes = {b.index_name: b.length for b in table.blobs(previous) if b.index_name is not None}
    results = tuple(
        _built(
            spec, len(live), 0, len(listed[spec.name]), len(live) - len(listed[spec.name]),
            sizes.get(spec.name, 0), previous.snapshot_id, started,
        )
        for spec in chosen
    )  # fmt: skip
    return BuildResult(results, previous.snapshot_id, False, 0, 0, time.monotonic() - started)


def _built(
    spec: core.IndexSpec,
    live: int,
    indexed: int,
    carried: int,
    skipped: int,
    size: int,
    snapshot_id: int | None,
    started: float,
) -> IndexBuilt:
    return IndexBuilt(
        spec.name, spec.type, spec.column, live, indexed, carried, skipped, size, snapshot_id,
        int((time.monotonic() - started) * 1000),
    )  # fmt: skip


def _blob_matches(blob: bytes, spec: core.IndexSpec, column: Column) -> bool:
    """Whether a previous blob still serves ``spec``: same declaration, same column type."""
    try:
        recorded, column_type = core.blob_spec(blob)
    except Exception:  # unreadable: built again
        return False
    return same_spec(recorded, spec) and column_type == column.spark_type


def _selected_specs(
    table_name: str, properties: Mapping[str, str], indexes: Sequence[str] | None
) -> tuple[list[core.IndexSpec], list[core.IndexSpec]]:
    """(the indexes to build, the other declared ones)."""
    declared = declarations(properties)
    if not declared:
        raise UsageError(
            f"{table_name} declares no skipping index; declare one first, e.g. CREATE INDEX "
            f"name ON {table_name} USING bloom_filter (column)."
        )
    names = [d.name for d in declared]
    wanted = names if not indexes else [n.strip().lower() for n in indexes]
    for name in wanted:
        if name not in names:
            raise UsageError(
                f"Index '{name}' is not declared on {table_name}{did_you_mean(name, names)}; "
                f"its indexes: {', '.join(names)}."
            )
    for d in declared:
        if d.name in wanted and d.spec is None:
            raise UsageError(
                f"Table property {property_key(d.name)} of {table_name} is not an index "
                f"declaration ({d.problem}); drop it with DROP INDEX {d.name} ON {table_name} "
                "and declare it again."
            )
    return (
        [d.spec for d in declared if d.name in wanted and d.spec is not None],
        [d.spec for d in declared if d.name not in wanted and d.spec is not None],
    )


def _column_of(table_name: str, spec: core.IndexSpec, cols: Mapping[str, Column]) -> Column:
    found = cols.get(spec.column)
    if found is None:
        raise UsageError(
            f"Index '{spec.name}' covers column '{spec.column}', which {table_name} no longer "
            f"has; drop it with DROP INDEX {spec.name} ON {table_name}."
        )
    return found


def _run_builds(
    context: Context,
    table_name: str,
    todo: Sequence[tuple[DataFile, tuple[str, ...]]],
    targets: Sequence[Target],
) -> tuple[dict[str, list[tuple[str, bytes]]], set[str]]:
    """Entries for ``todo`` built on the executors, a Spark job per :data:`BATCH_FILES` files:
    (entries by index name, paths skipped)."""
    built: dict[str, list[tuple[str, bytes]]] = {}
    skipped: set[str] = set()
    builder = entry_builder(targets)
    for first in range(0, len(todo), BATCH_FILES):
        cancellation.raise_if_cancelled()
        batch = todo[first : first + BATCH_FILES]
        context.progress(
            f"indexing {len(todo)} data files of {table_name}"
            if len(todo) <= BATCH_FILES
            else f"indexing data files {first + 1}-{first + len(batch)} of {len(todo)} of "
            f"{table_name}"
        )
        for path, index, entry, reason in _run_batch(context.spark, batch, builder):
            if index is None:
                skipped.add(path)
                _LOG.debug("not indexed: %s (%s)", path, reason)
            else:
                built.setdefault(index, []).append((path, entry))
    return built, skipped


def _run_batch(
    spark: SparkSession,
    batch: Sequence[tuple[DataFile, tuple[str, ...]]],
    builder: Callable[[Iterable[tuple[str, str, tuple[str, ...]]]], Any],
) -> list[tuple[Any, ...]]:
    """One Spark job: the files spread over tasks by bytes (biggest first, to the lightest)."""
    total = sum(f.size for f, _ in batch)
    tasks = max(1, min(len(batch), max(spark.sparkContext.defaultParallelism,
                                       math.ceil(total / TASK_BYTES))))  # fmt: skip
    buckets: list[list[tuple[str, str, tuple[str, ...]]]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for f, names in sorted(batch, key=lambda item: -item[0].size):
        i = loads.index(min(loads))
        buckets[i].append((f.path, f.format, names))
        loads[i] += max(f.size, 1)
    rdd = spark.sparkContext.parallelize(buckets, tasks).flatMap(_each).mapPartitions(builder)
    return rdd.collect()  # one small row per (file, index): the entries


def _each(bucket: list[Any]) -> list[Any]:
    return bucket


# ---- freshness and health -----------------------------------------------------------------


def index_due(spark: SparkSession, ref: TableRef) -> str | None:
    """Why the table's indexes need a build now (None: they do not, or none is declared):
    metadata only (the table's statistics files)."""
    specs = declared_specs(dict(ref.properties))
    if not specs or ref.current_snapshot_id is None:
        return None
    table = SkippingTable(spark, ref)
    found = table.index_object(ref.current_snapshot_id)
    if found is None:
        return "no index object yet"
    if found.snapshot_id != ref.current_snapshot_id:
        return f"new snapshot {ref.current_snapshot_id} since the index of {found.snapshot_id}"
    names = {b.index_name for b in table.blobs(found)}
    missing = sorted(set(specs) - names)
    if missing:
        return f"index {missing[0]} declared since the last build"
    return None


@dataclass(frozen=True)
class TableIndexes:
    """A table's declared indexes as health reports show them."""

    specs: tuple[core.IndexSpec, ...]
    index_bytes: int  # the current index object's blobs of declared indexes
    listed: Mapping[str, frozenset[str]]  # index name -> the paths it lists

    @property
    def names(self) -> str:
        """``rid (bloom_filter on request_id), st (bitmap on status)``."""
        return ", ".join(describe(s) for s in self.specs)

    def coverage(self, paths: Iterable[str]) -> float | None:
        """The share of ``paths`` that every declared index lists (None: no path)."""
        wanted = set(paths)
        if not wanted or not self.specs:
            return None
        listed = [len(wanted & self.listed.get(s.name, frozenset())) for s in self.specs]
        return min(listed) / len(wanted)


def table_indexes(spark: SparkSession, ref: TableRef) -> TableIndexes | None:
    """The table's indexes and what the current snapshot's index object lists (None: it
    declares none)."""
    declared = [d for d in declarations(dict(ref.properties)) if d.spec is not None]
    if not declared:
        return None
    table = SkippingTable(spark, ref)
    found = table.index_object(ref.current_snapshot_id)
    listed, sizes = _listed(table, found, {d.name: d.spec for d in declared})
    return TableIndexes(
        tuple(d.spec for d in declared if d.spec is not None),
        sum(sizes.values()),
        {name: frozenset(paths) for name, paths in listed.items()},
    )


# ---- the planner's question ---------------------------------------------------------------


def prune_files(
    spark: SparkSession,
    table: Any,
    snapshot_id: int,
    index_path: str,
    index_size: int,
    footer_size: int,
    predicate: str,
    candidates: str,
) -> str:
    """Which of ``candidates`` ('\\n'-joined data-file paths) may hold rows matching
    ``predicate``, by the index object at ``index_path``: ``""`` to keep every file (no usable
    index, or any failure), else JSON ``{"keep": "0110…", "used": [...]}``. Never raises: the
    JVM's planning hook calls it for every scan of an indexed table."""
    try:
        if str(spark.conf.get(ENABLED_CONF, "true")).strip().lower() == "false":
            return ""
        specs = declared_specs(java_properties(table))
        if not specs or not candidates:
            return ""
        found = java_index_object(index_path, int(index_size), int(footer_size))
        usable = [
            loaded
            for loaded in load_indexes(jvm_of(spark), table, found)
            if loaded.spec.name in specs and same_spec(loaded.spec, specs[loaded.spec.name])
        ]
        if not usable:
            return ""
        pruned = core.prune(usable, predicate, candidates.split("\n"))
        if bool(np.all(pruned.keep)):
            return ""  # nothing to skip: the scan stays Iceberg's own
        keep = (np.asarray(pruned.keep, dtype=np.uint8) + ord("0")).tobytes().decode("ascii")
        return json.dumps({"keep": keep, "used": list(pruned.used)})
    except Exception:
        _LOG.debug("skipping index not used for snapshot %s", snapshot_id, exc_info=True)
        return ""


__all__ = [
    "PROPERTY_PREFIX",
    "BuildResult",
    "Declared",
    "Dropped",
    "IndexBuilt",
    "IndexState",
    "TableIndexes",
    "build_indexes",
    "create_index",
    "drop_index",
    "index_due",
    "prune_files",
    "show_indexes",
    "table_indexes",
]
