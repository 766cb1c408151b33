"""The Iceberg side of event-time tags: read a table's refs, commit a tag in ONE table commit.

A tag on new content is staged in one transaction: create a working branch at the base
snapshot, commit a RowDelta onto it (equality deletes + data files, or every base file replaced),
put the tag on the branch's new snapshot with its ``max-ref-age``, drop the branch, and record
what the tag is in ``sparkext.event-time-tags``. The transaction is swapped in by the commit
layer (:mod:`sparkext.iceberg.commit`), so either all of it lands or none: the working branch is
never visible, main is never touched and a commit on main in between only re-stages it.

Sequence numbers: the RowDelta's snapshot gets the table's next sequence number, above every
data file of the base, so its equality deletes remove the base rows of the changed keys and not
the rows it adds (same sequence number).

Floor: iceberg (the Iceberg Java API).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sparkext.errors import EventTimeError, SnapshotExpiredError
from sparkext.iceberg.commit import CommitRequest, commit, delete_files
from sparkext.iceberg.data_files import add_written_files, remove_live_files
from sparkext.planning.event_time_tags import TAGS_PROPERTY, TagRecord, load_records, with_record
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import string_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.executors.cdc.files import WrittenFile
    from sparkext.iceberg.cdc_table import CdcTable


@dataclass(frozen=True)
class Ref:
    name: str
    kind: str  # "tag" or "branch"
    snapshot_id: int
    max_ref_age_ms: int | None


def refs(table: CdcTable) -> dict[str, Ref]:
    """The table's tags and branches by name."""
    out = {}
    for entry in _iterate(table._table.refs().entrySet()):
        name, ref = entry.getKey(), entry.getValue()
        age = ref.maxRefAgeMs()
        out[str(name)] = Ref(
            str(name),
            "tag" if ref.isTag() else "branch",
            int(ref.snapshotId()),
            int(age) if age is not None else None,
        )
    return out


def records(table: CdcTable) -> dict[str, TagRecord]:
    """The event-time tag records of the table (those whose tag still exists)."""
    live = refs(table)
    return {
        t: r
        for t, r in load_records(table.property(TAGS_PROPERTY)).items()
        if t in live and live[t].kind == "tag"
    }


def snapshot_time_ms(table: CdcTable, snapshot_id: int) -> int | None:
    """When ``snapshot_id`` was committed (a ref's max-ref-age counts from it)."""
    snapshot = table._table.snapshot(snapshot_id)
    return int(snapshot.timestampMillis()) if snapshot is not None else None


def field_ids(table: CdcTable) -> dict[str, int]:
    """Field ids of the current schema by name (nested fields by path)."""
    schema = table._table.schema()
    return {name: int(field_id) for field_id, name in string_map(schema.idToName()).items()}


def commit_tag(
    spark: SparkSession,
    table: CdcTable,
    *,
    tag: str,
    start_snapshot_id: int,
    planned_from: int | None,
    files: Sequence[WrittenFile],
    replace_start: bool,
    replace_tag: bool,
    max_ref_age_ms: int,
    record: TagRecord,
    summary: Mapping[str, str],
) -> int:
    """Tag ``start_snapshot_id`` itself (no files), or a commit on it adding ``files`` (and
    removing every file of the start snapshot when ``replace_start``); return the tagged id.

    ``planned_from`` is main's snapshot the plan read: a rollback of main past it fails the
    commit (the plan may have read data that is gone); other commits on main only re-stage it.
    """

    key = table.key()

    def build(attempt) -> None:
        txn = attempt.txn
        metadata = txn.currentMetadata()
        existing = metadata.ref(tag)
        if existing is not None and (existing.isBranch() or not replace_tag):
            raise EventTimeError(
                f"Tag '{tag}' was created by another writer while this one was being built; "
                "nothing was committed: read it, or pass options => map('replace-tag', 'true')."
            )
        if metadata.snapshot(start_snapshot_id) is None:
            raise SnapshotExpiredError(
                f"Snapshot {start_snapshot_id} that the tag starts from expired while the tag "
                "was being built; nothing was committed: run the procedure again."
            )
        target = start_snapshot_id
        if files or replace_start:
            work = f"sparkext-tag-{uuid.uuid4().hex[:12]}"  # never visible: dropped below
            txn.manageSnapshots().createBranch(work, start_snapshot_id).commit()
            delta = txn.newRowDelta().toBranch(work)
            if replace_start:
                delta = remove_live_files(table._table, delta, start_snapshot_id)
            delta = add_written_files(spark, attempt.table, delta, files, key)
            attempt.stamp(delta).commit()
            target = int(txn.currentMetadata().ref(work).snapshotId())
        manage = txn.manageSnapshots()
        if existing is not None:
            manage = manage.replaceTag(tag, target)
        else:
            manage = manage.createTag(tag, target)
        manage = manage.setMaxRefAgeMs(tag, max_ref_age_ms)
        if files or replace_start:
            manage = manage.removeBranch(work)
        manage.commit()
        current = txn.currentMetadata()
        live = [str(name) for name in _iterate(current.refs().keySet())]
        value = current.properties().get(TAGS_PROPERTY)
        value = with_record(
            str(value) if value is not None else None, replace(record, snapshot_id=target), live
        )
        txn.updateProperties().set(TAGS_PROPERTY, value).commit()

    request = CommitRequest(
        table_name=table.name,
        planned_snapshot_id=planned_from,
        build=build,
        what=f"the tag '{tag}'",
        rerun_hint="run the procedure again",
        summary=summary,
        ref=tag,
    )
    return commit(spark, table._table, request).snapshot_id


def discard(table: CdcTable, files: Sequence[WrittenFile]) -> None:
    """Delete files written for a tag that was definitely not committed (best effort)."""

    delete_files(table._table, [f.path for f in files])
