"""Executor body of a skipping-index build: read the indexed columns of data files, build entries.

Each task gets some data files (path, format, the indexes that need an entry for it) and reads,
straight from Parquet with pyarrow, only the columns those indexes cover, found by Iceberg field
id: a file written before a column was added has no such column, and its entry says the column
is all NULL there. It returns one small row per (file, index): the entry's bytes, built by
:func:`sparkext.planning.skipping.build_entry` — the driver never sees a data row.

A file that cannot be read this way (not Parquet; Parquet without field ids, as files added by
``add_files`` from Hive tables may be) gets no entry and is reported as skipped: a file the
index does not list is always read, so skipping it costs pruning, never a wrong answer.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from sparkext.fs import filesystem
from sparkext.planning import skipping as core

FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class Target:
    """What a build asks of one index: its spec (as the property JSON, so the task rebuilds the
    same object), its column's field id and Spark type."""

    name: str
    spec_json: str
    field_id: int
    column_type: str


@dataclass(frozen=True)
class Built:
    """One (file, index) result: the entry, or why the file has none."""

    path: str
    index: str | None  # None: the file was skipped for every index (``skipped`` says why)
    entry: bytes | None
    skipped: str | None = None


def entry_builder(
    targets: Sequence[Target],
) -> Callable[[Iterable[tuple[str, str, tuple[str, ...]]]], Iterator[tuple]]:
    """The ``mapPartitions`` function of a build: (path, format, index names) in, :class:`Built`
    rows (as plain tuples) out."""

    by_name = {t.name: t for t in targets}

    def build(files: Iterable[tuple[str, str, tuple[str, ...]]]) -> Iterator[tuple]:
        specs = {t.name: core.IndexSpec.from_property(t.name, t.spec_json) for t in targets}
        for path, file_format, names in files:
            wanted = [by_name[n] for n in names]
            for built in entries(path, file_format, wanted, specs):
                yield (built.path, built.index, built.entry, built.skipped)

    return build


def entries(
    path: str,
    file_format: str,
    targets: Sequence[Target],
    specs: Mapping[str, core.IndexSpec],
) -> Iterator[Built]:
    """The entries of one data file for ``targets``."""
    if file_format.upper() != "PARQUET":
        yield Built(path, None, None, f"{file_format.lower()} file")
        return
    values = read_columns(path, sorted({t.field_id for t in targets}))
    if values is None:
        yield Built(path, None, None, "Parquet file without field ids")
        return
    for target in targets:
        entry = core.build_entry(
            specs[target.name], target.column_type, values.get(target.field_id)
        )
        yield Built(path, target.name, entry)


def read_columns(path: str, field_ids: Sequence[int]) -> dict[int, object] | None:
    """The columns of ``field_ids`` in the Parquet file at ``path`` (absent ones left out);
    None when the file carries no field ids at all."""
    import pyarrow.parquet as pq

    found, local = filesystem(path)
    with found.open_input_file(local) as handle:
        parquet = pq.ParquetFile(handle)
        names: dict[int, str] = {}
        for field in parquet.schema_arrow:
            meta = field.metadata or {}
            if FIELD_ID in meta:
                names[int(meta[FIELD_ID])] = field.name
        if not names:
            return None
        wanted = {i: names[i] for i in field_ids if i in names}
        if not wanted:
            return {}
        table = parquet.read(columns=sorted(set(wanted.values())), use_threads=False)
        return {i: table.column(name) for i, name in wanted.items()}
