"""maintain: the oracle is the table before the run, read by stock Iceberg-Spark (and DuckDB).

After every run the table reads what it read before; every snapshot still retained reads as it
did; no file a retained snapshot reaches is missing from storage; what the policy keeps for a
dependent (a changelog consumer, an ingest_cdc checkpoint, snapshot_as_of_event_time's window,
a tag) is still there; an orphan younger than the safety age survives.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import sparkext
from sparkext.errors import OptionError
from sparkext.iceberg import changelog_consumers
from sparkext.planning.changelog_stream import Registration, consumer_key
from sparkext.planning.summary import (
    EVENT_LOGS,
    EVENT_TIME_MAX,
    EVENT_TIME_MAX_SO_FAR,
    EVENT_TIME_MIN,
)
from tests.helpers.cdc_calls import events, ingest, land
from tests.helpers.changelog_area_union import java_append, snapshot_rows
from tests.helpers.readers import duckdb_query

DAY = 86_400_000
AGE_ALL = "map('snapshot-max-age', '1 ms', 'min-snapshots', '1')"


def create(spark, name: str) -> None:
    spark.sql(
        f"CREATE TABLE {name} (k int, p string) USING iceberg PARTITIONED BY (p) TBLPROPERTIES "
        "('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )


def append(spark, name: str, k: int, **summary: str) -> int:
    """One append snapshot of the row (k, 'a' or 'b'), committed through the Java API (no Spark
    job: the snapshots are what maintenance works on, not how they were written)."""
    java_append(spark, name, [{"k": k, "p": "ab"[k % 2]}], **summary)
    return current(spark, name)


def current(spark, name: str) -> int:
    from sparkext.iceberg.catalog import refreshed_snapshot_id

    return refreshed_snapshot_id(spark, name)


def maintain(name: str, options: str = AGE_ALL, dry_run: bool = False) -> dict[str, dict]:
    rows = sparkext.sql(
        f"CALL sparkext.maintain(table => '{name}', options => {options}"
        + (", dry_run => true" if dry_run else "")
        + ")"
    ).collect()
    return {r.action: r.asDict() for r in rows}


def rows(spark, name: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return sorted(tuple(r) for r in reader.load(name).collect())


def snapshots(spark, name: str) -> list[int]:
    changelog_consumers.refresh(spark, name)
    return [
        r.snapshot_id
        for r in spark.sql(
            f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at"
        ).collect()
    ]


def assert_reachable_files_exist(spark, name: str) -> None:
    changelog_consumers.refresh(spark, name)
    paths = [r.file_path for r in spark.sql(f"SELECT file_path FROM {name}.all_files").collect()]
    paths += [r.path for r in spark.sql(f"SELECT path FROM {name}.all_manifests").collect()]
    missing = [p for p in paths if not os.path.exists(p.removeprefix("file:"))]
    assert not missing, missing


def location(spark, name: str) -> Path:
    from tests.helpers.readers import metadata_location

    return Path(metadata_location(spark, name).removeprefix("file:")).parent.parent


def test_expire_keeps_the_newest_and_reads_do_not_change(spark, table_name):
    create(spark, table_name)
    for k in range(8):
        append(spark, table_name, k)
    before = snapshots(spark, table_name)
    states = snapshot_rows(spark, table_name, before[-3:])  # one job
    planned = maintain(table_name, "map('snapshot-max-age', '1 ms', 'min-snapshots', '3')", True)
    assert planned["expire_snapshots"]["outcome"] == "planned"
    assert planned["expire_snapshots"]["items"] == 5
    assert snapshots(spark, table_name) == before  # a dry run changes nothing
    done = maintain(table_name, "map('snapshot-max-age', '1 ms', 'min-snapshots', '3')")
    expire = done["expire_snapshots"]
    assert (expire["outcome"], expire["items"], expire["error"]) == ("ok", 5, None)
    assert expire["files_deleted"] >= 5 and expire["bytes_deleted"] > 0  # manifest lists
    after = snapshots(spark, table_name)
    assert after[:3] == before[-3:]
    read = snapshot_rows(spark, table_name, [*states, None])  # one job
    for snapshot, state in states.items():
        assert read[snapshot] == state
    assert read[None] == [(k, "ab"[k % 2]) for k in range(8)]
    assert duckdb_query(spark, table_name, "SELECT count(*) FROM {table}") == [(8,)]
    assert_reachable_files_exist(spark, table_name)


def test_young_snapshots_are_not_expired(spark, table_name):
    create(spark, table_name)
    for k in range(4):
        append(spark, table_name, k)
    result = maintain(table_name, "map('min-snapshots', '1')")  # default age: 5 days
    assert result["expire_snapshots"]["outcome"] == "skipped"
    assert len(snapshots(spark, table_name)) == 4


def test_a_live_changelog_consumer_keeps_its_snapshot_and_everything_after(spark, table_name):
    create(spark, table_name)
    ids = [append(spark, table_name, k) for k in range(6)]
    now = int(time.time() * 1000)
    live = Registration("to-es", ids[2], heartbeat_ms=now, checkpoint="/ck/es")
    changelog_consumers.set_property(spark, table_name, live.key, live.to_text())
    result = maintain(table_name)["expire_snapshots"]
    assert result["items"] == 2
    assert "changelog consumer 'to-es'" in result["reason"]
    assert snapshots(spark, table_name) == ids[2:]
    assert_reachable_files_exist(spark, table_name)
    # a stale registration (heartbeat older than its TTL) protects nothing
    stale = Registration("to-es", ids[2], heartbeat_ms=now - 2 * DAY, ttl_ms=DAY)
    changelog_consumers.set_property(spark, table_name, consumer_key("to-es"), stale.to_text())
    assert maintain(table_name)["expire_snapshots"]["items"] == 3
    assert snapshots(spark, table_name) == ids[5:]


def test_an_ingest_cdc_checkpoint_keeps_its_newest_commit(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "landing", tmp_path / "checkpoint"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, landing, checkpoint)
    cdc_snapshot = current(spark, table_name)
    for k in range(3):
        other = (
            spark.table(table_name)
            .where("id = 1")
            .selectExpr(  # another writer
                f"{100 + k} AS id", *[c for c in spark.table(table_name).columns if c != "id"]
            )
        )
        other.select(*spark.table(table_name).columns).writeTo(table_name).append()
    result = maintain(table_name)["expire_snapshots"]
    assert "ingest_cdc checkpoint" in result["reason"]
    assert cdc_snapshot in snapshots(spark, table_name)
    # the same batch delivered again is still recognised as committed (replay safety)
    again = ingest(table_name, landing, checkpoint)
    assert sorted(r.id for r in spark.table(table_name).collect()) == [1, 2, 100, 101, 102]
    assert again is not None
    # a checkpoint idle for longer than its TTL holds nothing
    result = maintain(
        table_name,
        "map('snapshot-max-age', '1 ms', 'min-snapshots', '1', 'cdc-checkpoint-ttl', '1 ms')",
    )["expire_snapshots"]
    assert "ingest_cdc" not in result["reason"]
    assert snapshots(spark, table_name) == [current(spark, table_name)]


def test_the_event_time_window_keeps_the_base_of_its_oldest_t0(spark, table_name):
    from sparkext.iceberg.catalog import resolve_table
    from sparkext.iceberg.snapshots import ancestry
    from sparkext.planning.event_time import plan_as_of

    create(spark, table_name)
    now = int(time.time() * 1000)
    ids = []
    for k, age in enumerate((10, 9, 8, 6, 1)):  # days ago: one CDC-like commit each
        t = str(now - age * DAY)
        ids.append(append(spark, table_name, k, **{
            EVENT_TIME_MIN: t, EVENT_TIME_MAX: t, EVENT_TIME_MAX_SO_FAR: t}))  # fmt: skip
    result = maintain(table_name)["expire_snapshots"]
    assert "snapshot_as_of_event_time" in result["reason"]
    assert snapshots(spark, table_name) == ids[2:]  # 8 days ago is the base of T0 = 7 days ago
    chain = ancestry(spark, resolve_table(spark, table_name))
    for days in (7, 6.5, 3, 0):
        assert plan_as_of(chain, now - int(days * DAY)).base_snapshot_id is not None


def test_a_tag_keeps_its_snapshot(spark, table_name):
    create(spark, table_name)
    ids = [append(spark, table_name, k) for k in range(4)]
    spark.sql(f"ALTER TABLE {table_name} CREATE TAG keep AS OF VERSION {ids[1]}")
    maintain(table_name)
    left = snapshots(spark, table_name)
    assert ids[1] in left and ids[0] not in left
    tagged = spark.sql(f"SELECT * FROM {table_name} VERSION AS OF 'keep'").collect()
    assert sorted(tuple(r) for r in tagged) == [(0, "a"), (1, "b")]


def test_orphans_older_than_the_safety_age_go_and_younger_ones_stay(spark, table_name):
    create(spark, table_name)
    for k in range(3):
        append(spark, table_name, k)
    data = location(spark, table_name) / "data" / "p=a"
    old, young = data / "old-orphan.parquet", data / "young-orphan.parquet"
    old.write_bytes(b"x" * 1234)
    young.write_bytes(b"y" * 10)
    past = time.time() - 4 * 86_400
    os.utime(old, (past, past))
    planned = maintain(table_name, "map('actions', 'remove_orphan_files')", dry_run=True)
    orphan = planned["remove_orphan_files"]
    assert (orphan["outcome"], orphan["items"], orphan["bytes_deleted"]) == ("planned", 1, 1234)
    assert old.exists()
    done = maintain(table_name, "map('actions', 'remove_orphan_files')")["remove_orphan_files"]
    assert (done["outcome"], done["files_deleted"], done["bytes_deleted"]) == ("ok", 1, 1234)
    assert not old.exists() and young.exists()
    assert rows(spark, table_name) == [(0, "a"), (1, "b"), (2, "a")]
    assert_reachable_files_exist(spark, table_name)


def test_orphan_removal_refuses_when_an_event_log_lies_inside_the_table(spark, table_name):
    create(spark, table_name)
    append(spark, table_name, 1)
    inside = f"{location(spark, table_name)}/cdc/events"
    changelog_consumers.set_property(spark, table_name, EVENT_LOGS, f'{{"ck": "{inside}"}}')
    result = maintain(table_name, "map('actions', 'remove_orphan_files')")["remove_orphan_files"]
    assert result["outcome"] == "skipped"
    assert "inside the table location" in result["reason"]


def test_small_manifests_are_rewritten_and_reads_do_not_change(spark, table_name):
    create(spark, table_name)
    for k in range(5):
        append(spark, table_name, k)
    before = rows(spark, table_name)
    options = "map('actions', 'rewrite_manifests', 'manifest-min-count', '10')"
    assert maintain(table_name, options)["rewrite_manifests"]["outcome"] == "skipped"
    options = "map('actions', 'rewrite_manifests', 'manifest-min-count', '4')"
    done = maintain(table_name, options)["rewrite_manifests"]
    assert (done["outcome"], done["items"], done["files_written"]) == ("ok", 5, 1)
    assert "5 small manifests" in done["reason"]
    changelog_consumers.refresh(spark, table_name)
    assert spark.sql(f"SELECT count(*) FROM {table_name}.manifests").first()[0] == 1
    assert rows(spark, table_name) == before


def test_dangling_deletes_are_removed(spark, table_name):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'a'), (3, 'a')")
    spark.sql(f"DELETE FROM {table_name} WHERE k = 2")
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{table_name.removeprefix('lake.')}', "
        "options => map('rewrite-all', 'true', 'use-starting-sequence-number', 'false'))"
    )
    changelog_consumers.refresh(spark, table_name)
    assert spark.sql(f"SELECT count(*) FROM {table_name}.delete_files").first()[0] == 1
    done = maintain(table_name, "map('actions', 'remove_dangling_deletes')")
    assert done["remove_dangling_deletes"]["items"] == 1
    changelog_consumers.refresh(spark, table_name)
    assert spark.sql(f"SELECT count(*) FROM {table_name}.delete_files").first()[0] == 0
    assert rows(spark, table_name) == [(1, "a"), (3, "a")]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("map('orphan-min-age', '10 minutes')", "at least '1 hour'"),
        ("map('actions', 'vacuum')", "remove_orphan_files"),
        ("map('snapshot-max-age', 'soon')", "duration"),
        ("map('retention', '1 day')", "retention"),
    ],
)
def test_bad_options_are_one_sentence_and_change_nothing(spark, table_name, options, words):
    create(spark, table_name)
    append(spark, table_name, 1)
    append(spark, table_name, 2)
    before = snapshots(spark, table_name)
    with pytest.raises(OptionError) as error:
        maintain(table_name, options)
    assert words in str(error.value) and "\n" not in str(error.value)
    assert snapshots(spark, table_name) == before


def test_a_bad_policy_property_names_the_property(spark, table_name):
    create(spark, table_name)
    append(spark, table_name, 1)
    spark.sql(
        f"ALTER TABLE {table_name} SET TBLPROPERTIES "
        "('sparkext.maintenance.min-snapshots' = 'many')"
    )
    with pytest.raises(OptionError, match=r"sparkext\.maintenance\.min-snapshots"):
        maintain(table_name, "map()")


def test_a_stream_jobs_progress_on_its_iceberg_source_is_kept(spark, tmp_path, table_name):
    """A stream job registers on its source what a restart resumes from; maintenance keeps it,
    and the job resumes after maintenance without a lost snapshot."""
    from sparkext.streaming import run_stream
    from sparkext.streaming.holds import consumer_name
    from tests.spark.test_streaming import BIDS_1, BIDS_2, BIDS_DDL, BIDS_SENTINEL, append

    sink = f"{table_name}_out"
    spark.sql(f"CREATE TABLE {table_name} ({BIDS_DDL}) USING iceberg")
    job = (
        f"CREATE TABLE {table_name} (bidtime TIMESTAMP, price DOUBLE, item STRING, "
        "supplier_id STRING, WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE);\n"
        f"CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);\n"
        f"INSERT INTO {sink} SELECT window_start, window_end, SUM(price) AS total FROM "
        f"TABLE(TUMBLE(TABLE {table_name}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) "
        "GROUP BY window_start, window_end;"
    )
    checkpoint = str(tmp_path / "ck")

    def stream() -> None:
        run_stream(spark, job, checkpoint, available_now=True).wait()

    append(spark, table_name, BIDS_DDL, BIDS_1)
    stream()
    first = current(spark, table_name)
    append(spark, table_name, BIDS_DDL, BIDS_2)
    stream()  # its batch registers the snapshot it resumed from
    for row in BIDS_SENTINEL * 3:
        append(spark, table_name, BIDS_DDL, [row])
    name = consumer_name(checkpoint)
    registered = changelog_consumers.properties(spark, table_name)[consumer_key(name)]
    assert f'"snapshot-id": {first}' in registered
    result = maintain(table_name)["expire_snapshots"]
    assert first in snapshots(spark, table_name)
    assert result["items"] == 0 and f"changelog consumer '{name}'" in result["reason"]
    stream()  # resumes from the kept snapshot
    spark.catalog.refreshTable(sink)
    totals = sorted(tuple(r) for r in spark.table(sink).collect())
    assert [t for *_, t in totals] == [11.0, 10.0]


def test_a_branch_with_its_own_retention_refuses_expiry_beyond_the_plan(spark, table_name):
    """Iceberg applies a branch's own snapshot retention whatever the expiry is told; when that
    would take a snapshot the policy keeps, expiry refuses in one sentence and expires nothing."""
    create(spark, table_name)
    ids = [append(spark, table_name, k) for k in range(5)]
    now = int(time.time() * 1000)
    live = Registration("keep", ids[1], heartbeat_ms=now)
    changelog_consumers.set_property(spark, table_name, live.key, live.to_text())
    from tests.helpers.iceberg import java_table

    java_table(spark, table_name).manageSnapshots().setMaxSnapshotAgeMs(
        "main", 1
    ).setMinSnapshotsToKeep("main", 1).commit()
    result = maintain(table_name)["expire_snapshots"]
    assert result["outcome"] == "failed" and "own snapshot retention" in result["error"]
    assert "\n" not in result["error"]
    assert snapshots(spark, table_name) == ids
