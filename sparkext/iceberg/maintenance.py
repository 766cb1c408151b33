"""Maintenance actions through Iceberg's own Spark actions (py4j): expire snapshots, remove
orphan files, rewrite manifests, remove dangling deletes. The planning is
:mod:`sparkext.planning.maintenance`'s; this module reads the metadata it needs and runs what
was decided.

* Expiry runs ``ExpireSnapshotsSparkAction`` with the planned snapshot ids only: its age
  threshold is set before every snapshot, so Iceberg's defaults never expire a held one. The
  action commits the metadata first and deletes files only after the commit succeeded, from the
  difference of reachable files before and after (a concurrent commit's files are reachable).
* Orphans are found by ``DeleteOrphanFilesSparkAction`` (a distributed listing against every
  file any retained snapshot reaches, hidden ``_``/``.`` paths skipped) with a delete function
  that only records: sizes are read and the files deleted here, so the row has bytes and
  ``dry_run`` deletes nothing.

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.errors import CommitConflictError, SparkextError
from sparkext.iceberg.catalog import metadata_name, release_checkpoint
from sparkext.planning.maintenance import ManifestStats, Ref, Snapshot
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST_TARGET = "commit.manifest.target-size-bytes"
MANIFEST_TARGET_DEFAULT = 8 * 1024 * 1024


def _java_table(spark: SparkSession, name: str):  # -> JavaObject, kept inside this package
    table = jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )
    table.refresh()
    return table


def _actions(spark: SparkSession):
    return jvm_of(spark).org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)


@dataclass(frozen=True)
class TableState:
    snapshots: dict[int, Snapshot]
    refs: tuple[Ref, ...]
    head: int | None
    location: str


def state(spark: SparkSession, name: str) -> TableState:
    """Snapshots (ids, parents, times, summaries) and refs, freshly read (metadata rows only);
    read again when a commit landed between the reads."""

    for attempt in range(4):
        try:
            return _state(spark, name)
        except CommitConflictError:
            if attempt == 3:
                raise
    raise AssertionError("unreachable")


def _state(spark: SparkSession, name: str) -> TableState:

    table = _java_table(spark, name)  # refreshed: the metadata tables below read this state
    current = table.currentSnapshot()
    rows = (
        spark.table(metadata_name(spark, name, "snapshots"))
        .selectExpr("snapshot_id", "parent_id", "CAST(committed_at AS TIMESTAMP) AS t", "summary")
        .selectExpr("snapshot_id", "parent_id", "unix_millis(t) AS ms", "summary")
        .collect()  # metadata: one row per retained snapshot
    )
    snapshots = {
        int(r.snapshot_id): Snapshot(
            int(r.snapshot_id),
            None if r.parent_id is None else int(r.parent_id),
            int(r.ms),
            dict(r.summary or {}),
        )
        for r in rows
    }
    refs = tuple(
        Ref(str(r.name), str(r.type), int(r.snapshot_id))
        for r in spark.table(metadata_name(spark, name, "refs"))
        .select("name", "type", "snapshot_id")
        .collect()
    )
    heads = [r.snapshot_id for r in refs if r.kind.upper() == "BRANCH"]
    if current is not None:
        heads.append(int(current.snapshotId()))
    if any(h not in snapshots for h in heads):  # a commit between the reads: never plan on it
        raise CommitConflictError(
            f"{name} changed while its snapshots were read; run maintain again."
        )
    return TableState(
        snapshots,
        refs,
        int(current.snapshotId()) if current is not None else None,
        str(table.location()),
    )


@dataclass(frozen=True)
class Removed:
    files: int
    bytes: int
    detail: str = ""


def _reachable(spark: SparkSession, name: str):
    """Every file a retained snapshot reaches, with its size, materialised now (the frame must
    describe the state before a change, not be re-planned after it)."""

    files = spark.table(metadata_name(spark, name, "all_files")).selectExpr(
        "file_path AS path", "file_size_in_bytes AS size"
    )
    manifests = spark.table(metadata_name(spark, name, "all_manifests")).selectExpr(
        "path", "length AS size"
    )
    return files.unionByName(manifests).distinct().localCheckpoint()


def expire_snapshots(spark: SparkSession, name: str, snapshot_ids: list[int]) -> Removed:
    """Expire exactly ``snapshot_ids`` and delete the files only they reached."""
    from pyspark.sql import functions as F

    _check_exactly(spark, name, snapshot_ids)
    lists_bytes = sizes(spark, name, _manifest_lists(spark, name, snapshot_ids))
    before = _reachable(spark, name)
    try:
        action = _actions(spark).expireSnapshots(_java_table(spark, name)).expireOlderThan(0)
        for snapshot_id in snapshot_ids:
            action = action.expireSnapshotId(snapshot_id)
        result = action.execute()
        after = _reachable(spark, name)
        try:
            row = (
                before.join(after, "path", "left_anti")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b"))
                .first()
            )
        finally:
            release_checkpoint(after)
    finally:
        release_checkpoint(before)
    lists = int(result.deletedManifestListsCount())
    deletes = int(result.deletedPositionDeleteFilesCount()) + int(
        result.deletedEqualityDeleteFilesCount()
    )
    counted = (
        int(result.deletedDataFilesCount())
        + int(result.deletedPositionDeleteFilesCount())
        + int(result.deletedEqualityDeleteFilesCount())
        + int(result.deletedManifestsCount())
        + lists
    )
    return Removed(
        counted,
        int(row.b or 0) + (lists_bytes if lists else 0),
        f"{int(result.deletedDataFilesCount())} data files, "
        f"{deletes} delete files, {int(result.deletedManifestsCount())} manifests, "
        f"{lists} manifest lists",
    )


def _check_exactly(spark: SparkSession, name: str, snapshot_ids: list[int]) -> None:
    """Refuse when Iceberg would expire more than the plan: a branch with its own snapshot
    retention (``... WITH SNAPSHOT RETENTION``) applies it whatever the expiry is told, and
    could take a snapshot a hold keeps. Asked with ``apply()``, which commits nothing."""

    update = _java_table(spark, name).expireSnapshots().expireOlderThan(0)
    for snapshot_id in snapshot_ids:
        update = update.expireSnapshotId(snapshot_id)
    would = {int(s.snapshotId()) for s in update.apply()}
    extra = sorted(would - set(snapshot_ids))
    if extra:
        raise SparkextError(
            f"Iceberg would also expire snapshot(s) {', '.join(map(str, extra[:5]))} of {name}, "
            "which the policy keeps, because a branch sets its own snapshot retention; remove "
            "that retention (ALTER TABLE ... REPLACE BRANCH ... without WITH SNAPSHOT RETENTION) "
            "or expire with Iceberg's own procedure."
        )


def _manifest_lists(spark: SparkSession, name: str, snapshot_ids: list[int]) -> list[str]:
    table = _java_table(spark, name)
    out = []
    for snapshot_id in snapshot_ids:
        snapshot = table.snapshot(snapshot_id)
        if snapshot is not None and snapshot.manifestListLocation() is not None:
            out.append(str(snapshot.manifestListLocation()))
    return out


class _Collect:
    """A ``java.util.function.Consumer<String>`` in Python (py4j callback): records the paths
    Iceberg would delete, deletes nothing."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def accept(self, path: str) -> None:
        self.paths.append(str(path))

    class Java:
        implements = ("java.util.function.Consumer",)


def orphan_files(spark: SparkSession, name: str, older_than_ms: int) -> list[str]:
    """The table location's files that no retained snapshot or metadata file references and that
    were last modified before ``older_than_ms``."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    collect = _Collect()
    (
        _actions(spark)
        .deleteOrphanFiles(_java_table(spark, name))
        .olderThan(older_than_ms)
        .deleteWith(collect)
        .execute()
    )
    return sorted(set(collect.paths))


def sizes(spark: SparkSession, name: str, paths: list[str]) -> int:
    """Total bytes of ``paths`` (files already gone count 0)."""
    io = _java_table(spark, name).io()
    total = 0
    for path in paths:
        with contextlib.suppress(Exception):  # removed meanwhile
            total += int(io.newInputFile(path).getLength())
    return total


def delete_files(spark: SparkSession, name: str, paths: list[str]) -> None:
    """Delete ``paths`` through the table's FileIO (in bulk where it can)."""
    jvm = jvm_of(spark)
    io = _java_table(spark, name).io()
    if jvm.org.apache.iceberg.io.SupportsBulkOperations._java_lang_class.isInstance(io):
        batch = jvm.java.util.ArrayList()
        for path in paths:
            batch.add(path)
        io.deleteFiles(batch)
        return
    for path in paths:
        io.deleteFile(path)


def manifest_stats(spark: SparkSession, name: str) -> ManifestStats:
    """The current snapshot's data manifests (sizes) and its number of live partitions."""

    table = _java_table(spark, name)
    target = int(
        str(table.properties().getOrDefault(MANIFEST_TARGET, str(MANIFEST_TARGET_DEFAULT)))
    )
    if table.currentSnapshot() is None:
        return ManifestStats((), 0, target)
    lengths = tuple(
        int(r.length)
        for r in spark.table(metadata_name(spark, name, "manifests"))
        .where("content = 0")
        .select("length")
        .collect()  # one metadata row per manifest
    )
    if table.spec().isPartitioned():
        partitions = spark.table(metadata_name(spark, name, "partitions")).count()
    else:
        partitions = 1
    return ManifestStats(lengths, int(partitions), target)


def rewrite_manifests(spark: SparkSession, name: str) -> tuple[int, int, int, int | None]:
    """Rewrite the current data manifests, clustered by partition: (manifests rewritten,
    manifests written, bytes written, the new snapshot)."""
    table = _java_table(spark, name)
    result = _actions(spark).rewriteManifests(table).option("use-caching", "false").execute()
    rewritten = list(result.rewrittenManifests())
    added = list(result.addedManifests())
    table.refresh()
    current = table.currentSnapshot()
    return (
        len(rewritten),
        len(added),
        sum(int(m.length()) for m in added),
        int(current.snapshotId()) if current is not None and added else None,
    )


def remove_dangling_deletes(spark: SparkSession, name: str) -> tuple[int, int, int | None]:
    """Remove delete files no live data file can match: (files, bytes, the new snapshot)."""
    table = _java_table(spark, name)
    if int(table.operations().current().formatVersion()) < 2 or table.currentSnapshot() is None:
        return 0, 0, None
    result = _actions(spark).removeDanglingDeleteFiles(table).execute()
    removed = list(result.removedDeleteFiles())
    table.refresh()
    current = table.currentSnapshot()
    return (
        len(removed),
        sum(int(f.fileSizeInBytes()) for f in removed),
        int(current.snapshotId()) if removed and current is not None else None,
    )
