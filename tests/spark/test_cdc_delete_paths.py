"""CdcTable.equality_delete_paths: the live equality-delete files of a snapshot, read through the
Java table, so a snapshot another process committed after Spark cached the table is found; and
CdcTable.refresh brings Spark's cached table along, so reads pinned to that snapshot work.

The oracle is Iceberg's own ``delete_files`` metadata table read by Spark at the same snapshot
(on a catalog whose cached table knows the snapshot).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sparkext
from sparkext.errors import BatchOutdatedError
from sparkext.iceberg.cdc_table import CdcTable
from tests.helpers.cdc_calls import events, ingest, land
from tests.spark.test_cdc_writers import WRITER_SCRIPT


def _metadata_answer(spark, table: str, snapshot_id: int, content: int = 2) -> list[str]:
    rows = (
        spark.read.option("snapshot-id", snapshot_id)
        .table(f"{table}.delete_files")
        .where(f"content = {content}")
        .select("file_path")
        .distinct()
        .collect()
    )
    return sorted(r.file_path for r in rows)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory) -> tuple[str, int]:
    """A table with several equality-delete commits, a rewrite that turns the older ones into
    position deletes, new equality deletes and a position delete of Spark's own; its name and
    the snapshot before the rewrite."""
    table_name = "lake.test.delete_paths_history"
    spark.sql(f"DROP TABLE IF EXISTS {table_name}")
    tmp_path = tmp_path_factory.mktemp("delete_paths")
    zone, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(zone, "1.json", events(*(("c", k, 10 + k, f"v{k}") for k in range(1, 9))))
    ingest(table_name, zone, checkpoint)
    land(zone, "2.json", events(("u", 1, 20, "u1"), ("u", 2, 21, "u2"), ("d", 3, 22, None)))
    ingest(table_name, zone, checkpoint)
    land(zone, "3.json", events(("u", 4, 30, "u4"), ("d", 5, 31, None)))
    ingest(table_name, zone, checkpoint)
    older = CdcTable(spark, table_name).current_snapshot_id()
    sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table_name}')")
    land(zone, "4.json", events(("u", 1, 40, "again"), ("d", 2, 41, None)))
    ingest(table_name, zone, checkpoint)
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 6")
    return table_name, older


def test_the_java_listing_equals_the_delete_files_metadata_table(spark, history):
    """Several equality-delete commits, a rewrite that turns the older ones into position
    deletes (removed entries are not live), new equality deletes, and a position delete of
    Spark's own: at an older and at the current snapshot, only live equality deletes count."""
    table_name, older = history
    table = CdcTable(spark, table_name)
    current = table.current_snapshot_id()

    at_older = table.equality_delete_paths(older)
    at_current = table.equality_delete_paths(current)

    assert at_older == _metadata_answer(spark, table_name, older)
    assert at_current == _metadata_answer(spark, table_name, current)
    assert len(at_older) >= 2  # two commits with equality deletes
    assert at_current and set(at_current).isdisjoint(at_older)  # the rewrite removed those
    assert _metadata_answer(spark, table_name, current, content=1)  # position deletes were there
    assert table.equality_delete_paths(None) == []


def test_an_unknown_snapshot_is_one_sentence(spark, history):
    table_name = history[0]  # a table with a history, none of it snapshot 12345
    with pytest.raises(BatchOutdatedError) as caught:
        CdcTable(spark, table_name).equality_delete_paths(12345)
    assert str(caught.value) == (
        f"Snapshot 12345 is not in the history of {table_name} (another writer may have expired "
        "it); nothing of this batch was committed: run ingest_cdc again."
    )


def _current_snapshot_on_disk(warehouse, table: str) -> int:
    """The table's current snapshot id from its newest metadata file (no Spark, no cache)."""
    metadata = warehouse.joinpath(*table.split(".")[1:], "metadata")
    version = (metadata / "version-hint.text").read_text().strip()
    current = json.loads((metadata / f"v{version}.metadata.json").read_text())
    return int(current["current-snapshot-id"])


def _in_another_process(spark, tmp_path, warehouse, table_name) -> None:
    """The other writer: a second Spark process (its own JVM, its own catalog cache)."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER_SCRIPT)
    # the script's writer commits once the other writer of its race has planned (a file it
    # waits for): there is none here, so that file is there from the start
    planned = tmp_path / "no-other-writer.planned"
    planned.touch()
    process = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(warehouse),
            table_name,
            str(tmp_path / "other"),
            str(tmp_path / "ck_other"),
            str(tmp_path / "writer.planned"),
            str(planned),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    while True:
        # keep Spark's cached table from expiring while the other process runs, so it is the
        # stale one of the race, whatever the machine's speed
        spark.table(table_name)
        try:
            process.wait(timeout=2)  # returns as soon as the process ends
            break
        except subprocess.TimeoutExpired:
            pass
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, err[-3000:]
    assert "COMMITS 1" in out, out + err[-2000:]


def _through_another_catalog(spark, tmp_path, warehouse, table_name) -> None:
    """The other writer in this process: the same ingest_cdc call through a second catalog of
    the same warehouse, whose cached table is not this session's ``lake`` one (what a second
    process has too), with the options of the other process's writer."""
    prefix = "spark.sql.catalog.lake"
    other = "cdc_other_writer"
    for key, value in spark.sparkContext.getConf().getAll():
        if key == prefix or key.startswith(prefix + "."):
            spark.conf.set(f"spark.sql.catalog.{other}{key[len(prefix) :]}", value)
    for key in ("", ".type", ".warehouse"):
        if spark.conf.get(prefix + key, None) is not None:
            spark.conf.set(f"spark.sql.catalog.{other}{key}", spark.conf.get(prefix + key))
    result = ingest(
        other + table_name[len("lake") :],
        tmp_path / "other",
        tmp_path / "ck_other",
        options="'max-files-per-batch', '1'",
    )
    assert result["commits"] == 1, result


@pytest.mark.parametrize(
    "other_writer",
    [
        pytest.param(_through_another_catalog, id="another-catalog"),
        pytest.param(
            _in_another_process, id="another-process", marks=[pytest.mark.slow, pytest.mark.stress]
        ),
    ],
)
def test_a_snapshot_another_process_committed_after_this_session_read_the_table(
    spark, tmp_path, warehouse, table_name, other_writer
):
    """This session reads the table; a second process commits equality deletes to it; the
    snapshot it made is unknown to Spark's cached table (the race that failed the two-process
    ingest now and then) but is listed through the Java table, and the refresh that found it
    brings Spark's cached table along, so reads pinned to it work too. The default tier's
    other writer is a second catalog in this process: its commit is as unknown to this
    session's cached table."""
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, tmp_path / "in", tmp_path / "ck")
    table = CdcTable(spark, table_name)
    ours = table.current_snapshot_id()
    assert table.equality_delete_paths(ours) == _metadata_answer(spark, table_name, ours)
    # Spark's catalog drops its cached table and loads another (as it does 30 s after its last
    # use, in a long batch): this session now holds two Java tables of it, as ingest_cdc can
    spark.catalog.refreshTable(table_name)
    assert spark.table(table_name).count() == 2
    land(tmp_path / "other", "1.json", events(("u", 1, 20, "theirs"), ("d", 2, 21, None)))
    other_writer(spark, tmp_path, warehouse, table_name)
    theirs = _current_snapshot_on_disk(warehouse, table_name)
    assert theirs != ours
    # the race as it was: Spark's cached table does not know the other process's snapshot
    with pytest.raises(Exception, match=f"Cannot find snapshot with ID {theirs}"):
        _metadata_answer(spark, table_name, theirs)
    with pytest.raises(Exception, match=f"Cannot find snapshot with ID {theirs}"):
        spark.read.option("snapshot-id", theirs).table(table_name).count()

    listed = table.equality_delete_paths(theirs)

    pinned = spark.read.option("snapshot-id", theirs).table(table_name)
    assert [(r.id, r.name) for r in pinned.collect()] == [(1, "theirs")]
    assert listed == _metadata_answer(spark, table_name, theirs)
    assert listed  # the other process's update and delete wrote equality deletes
