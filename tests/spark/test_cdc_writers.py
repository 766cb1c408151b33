"""ingest_cdc with several writers and real-world positions (issue 13 items 3, 4, 5, 8).

The oracle is tests/helpers/cdc_source.py: per key, the after-image of the delivered event with
the highest binlog position. Nothing here shares code with sparkext.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

import sparkext
from tests.helpers.cdc_calls import events, ingest, land, table_rows
from tests.helpers.cdc_source import SourceTable, expected


def _names(spark, table: str) -> dict[int, str]:
    return {r.id: r.name for r in spark.table(table).select("id", "name").collect()}


def _rejected(checkpoint) -> list[dict]:
    found = []
    for path in sorted((checkpoint / "rejected").rglob("*.json")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


def test_a_newer_change_from_another_checkpoint_beats_this_checkpoints_key_cache(
    spark, tmp_path, table_name
):
    """Two landing zones feed one table: B's key cache knows only B's writes; A's newer
    update and A's delete (even after rewrite_equality_deletes) must win over B's older ones."""
    zone_a, zone_b = tmp_path / "a", tmp_path / "b"
    ck_a, ck_b = tmp_path / "ck_a", tmp_path / "ck_b"
    land(zone_b, "1.json", events(("c", 1, 5, "b-first"), ("c", 2, 6, "two")))
    ingest(table_name, zone_b, ck_b)
    land(zone_a, "1.json", events(("u", 1, 30, "a-newest"), ("d", 2, 40, None)))
    ingest(table_name, zone_a, ck_a)
    sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table_name}')")
    land(zone_b, "2.json", events(("u", 1, 20, "b-older"), ("u", 2, 35, "resurrected?")))
    second = ingest(table_name, zone_b, ck_b)
    assert second["late"] == 2
    assert _names(spark, table_name) == {1: "a-newest"}


def test_an_update_that_changes_the_key_removes_the_old_row(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    moved = events(("u", 5, 20, "moved"))
    moved[0]["before"] = {"id": 1, "name": "one"}
    land(landing, "1.json", events(("c", 1, 10, "one"), ("c", 2, 11, "two")))
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", moved)
    ingest(table_name, landing, checkpoint)
    assert _names(spark, table_name) == {2: "two", 5: "moved"}


def _timed(op: str, key: int, ts_ms: int, name: str | None) -> dict:
    """An event whose source gives only its commit time (no file/pos, lsn, scn, ...)."""
    event = events((op, key, 1, name))[0]
    event["source"] = {"ts_ms": ts_ms, "db": "shop", "table": "t"}
    return event


def test_commit_time_positions_break_ties_by_arrival(spark, tmp_path, table_name):
    """Two changes of a key in the same millisecond, in two batches: the second is newer (not a
    duplicate); an older commit time arriving later is late."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", [_timed("c", 1, 1000, "first")])
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [_timed("u", 1, 1000, "same ms, later")])
    second = ingest(table_name, landing, checkpoint)
    assert (second["updated"], second["duplicates"]) == (1, 0)
    land(landing, "3.json", [_timed("u", 1, 999, "older")])
    assert ingest(table_name, landing, checkpoint)["late"] == 1
    assert _names(spark, table_name) == {1: "same ms, later"}


def test_an_event_without_a_comparable_position_is_rejected_not_poisoning(
    spark, tmp_path, table_name
):
    """A MySQL table gets an event without file/pos: it cannot be ordered against binlog
    positions, so it is rejected with that reason, and the key's later real update applies."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a")))
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [_timed("u", 1, 99_999_999_000, "no position")])
    second = ingest(table_name, landing, checkpoint)
    assert second["rejected"] == 1
    (reject,) = _rejected(checkpoint)
    assert reject["reject"].startswith("source position of another kind: commit times only")
    assert "MySQL binlog positions" in reject["reject"]
    land(landing, "3.json", events(("u", 1, 20, "a day later")))
    assert ingest(table_name, landing, checkpoint)["updated"] == 1
    assert _names(spark, table_name) == {1: "a day later"}


def test_postgres_orders_by_commit_not_by_change_lsn(spark, tmp_path, table_name):
    """Two interleaved transactions: b's change has the higher LSN but a commits last; Debezium's
    ``sequence`` [last commit LSN, LSN] puts a's change last (Materialize issue 5668)."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"

    def pg(op: str, name: str, lsn: int, last_commit: int) -> dict:
        event = events((op, 1, 1, name))[0]
        event["source"] = {
            "connector": "postgresql",
            "lsn": lsn,
            "sequence": json.dumps([str(last_commit), str(lsn)]),
            "txId": 1,
            "ts_ms": 1000,
            "db": "shop",
            "table": "t",
        }
        return event

    # b commits first (commit LSN 9), then a (commit LSN 11); a's change has LSN 3 < b's 4
    land(landing, "1.json", [pg("c", "created", 1, 0), pg("u", "b", 4, 2)])
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [pg("u", "a", 3, 9)])
    assert ingest(table_name, landing, checkpoint)["updated"] == 1
    assert _names(spark, table_name) == {1: "a"}


def _other_writer(spark, table: str, zone, checkpoint) -> None:
    """One micro-batch of a second ingest_cdc writer (its own checkpoint), in this session."""
    from pyspark.sql import functions as F

    from sparkext.actions.cdc.ingest import Ingestor
    from sparkext.actions.cdc.model import Settings

    settings = Settings(table, str(checkpoint), ("id",), True, None, False, 100, 10_000)
    lines = spark.read.text(str(zone)).select(
        "value", F.col("_metadata.file_path").alias("source_file")
    )
    writer = Ingestor(spark, settings, lambda message: None)
    writer.process(
        lines, len(list(checkpoint.glob("events/batch=*"))) if checkpoint.exists() else 0
    )


def test_a_disjoint_concurrent_commit_does_not_stop_the_batch(
    spark, tmp_path, table_name, monkeypatch
):
    """Another checkpoint commits other keys between this batch's plan and its commit: the
    batch commits on the new base without being decided again; overlapping keys are decided
    again and the newer change wins."""
    from sparkext.iceberg.cdc_table import CdcCommit

    zone, other = tmp_path / "in", tmp_path / "other"
    land(zone, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, zone, tmp_path / "ck")
    original = CdcCommit.commit
    interfere = {"zone": None}

    def interfering(self, *args, **kwargs):
        if interfere["zone"] is not None:
            zone_, interfere["zone"] = interfere["zone"], None
            monkeypatch.setattr(CdcCommit, "commit", original)
            _other_writer(spark, table_name, zone_, tmp_path / "ck_other")
            monkeypatch.setattr(CdcCommit, "commit", interfering)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CdcCommit, "commit", interfering)
    land(other, "1.json", events(("c", 7, 30, "other key")))
    interfere["zone"] = other
    land(zone, "2.json", events(("u", 1, 20, "mine")))
    assert ingest(table_name, zone, tmp_path / "ck")["updated"] == 1
    assert _names(spark, table_name) == {1: "mine", 2: "b", 7: "other key"}
    # overlapping: the other writer's newer change of key 2 lands while this batch is planned
    land(other, "2.json", events(("u", 2, 50, "newer, other writer")))
    interfere["zone"] = other
    land(zone, "3.json", events(("u", 2, 40, "older, mine")))
    third = ingest(table_name, zone, tmp_path / "ck")
    assert (third["updated"], third["late"]) == (0, 1)
    assert _names(spark, table_name)[2] == "newer, other writer"


def test_a_commit_never_lowers_the_high_water_mark(spark, tmp_path, table_name, monkeypatch):
    """Another writer commits key 7 at position 500 while this batch (key 8 at 200) commits;
    the table's high-water mark stays 500, so this writer's later change of key 7 at 300 is
    looked up and found late, not applied over the newer row."""
    from sparkext.iceberg.cdc_table import CdcCommit

    zone, other = tmp_path / "in", tmp_path / "other"
    land(zone, "1.json", events(("c", 1, 100, "a"), ("c", 7, 101, "seven")))
    ingest(table_name, zone, tmp_path / "ck")
    original = CdcCommit.commit
    land(other, "1.json", events(("u", 7, 500, "newest, other writer")))

    def interfering(self, *args, **kwargs):
        monkeypatch.setattr(CdcCommit, "commit", original)
        _other_writer(spark, table_name, other, tmp_path / "ck_other")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CdcCommit, "commit", interfering)
    land(zone, "2.json", events(("c", 8, 200, "eight")))
    ingest(table_name, zone, tmp_path / "ck")
    summary = spark.sql(
        f"SELECT summary FROM {table_name}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    assert summary["sparkext.cdc.max-position"].endswith(f"{500:020d}:0000000000")
    land(zone, "3.json", events(("u", 7, 300, "older, mine")))
    assert ingest(table_name, zone, tmp_path / "ck")["late"] == 1
    assert _names(spark, table_name)[7] == "newest, other writer"


def test_key_cache_entries_older_than_another_writers_change_are_not_trusted(
    spark, tmp_path, table_name
):
    """A's cache has key 7 at 250 (batch 0); B then writes 7 at 500; A's batch 1 touches only
    key 8; A's batch 2 brings 7 at 300: the cache entry predates B's change, so the table
    decides (late)."""
    zone_a, zone_b = tmp_path / "a", tmp_path / "b"
    land(zone_a, "0.json", events(("c", 7, 250, "a")))
    ingest(table_name, zone_a, tmp_path / "ck_a")
    land(zone_b, "0.json", events(("u", 7, 500, "b, newest")))
    ingest(table_name, zone_b, tmp_path / "ck_b")
    land(zone_a, "1.json", events(("c", 8, 600, "eight")))
    ingest(table_name, zone_a, tmp_path / "ck_a")
    land(zone_a, "2.json", events(("u", 7, 300, "a, older")))
    assert ingest(table_name, zone_a, tmp_path / "ck_a")["late"] == 1
    assert _names(spark, table_name) == {7: "b, newest", 8: "eight"}


def test_another_writers_uncommitted_delete_is_not_a_tombstone(spark, tmp_path, table_name):
    """B's event log of a batch it never committed (crashed after writing) holds a delete of key
    1 at 400: A's update of key 1 at 300 is not late because of it."""
    from pyspark.sql import functions as F

    zone_a, zone_b = tmp_path / "a", tmp_path / "b"
    land(zone_a, "0.json", events(("c", 1, 100, "one")))
    ingest(table_name, zone_a, tmp_path / "ck_a")
    land(zone_b, "0.json", events(("c", 2, 500, "two")))
    ingest(table_name, zone_b, tmp_path / "ck_b")
    logged = spark.read.parquet(str(tmp_path / "ck_b" / "events" / "batch=0"))
    phantom = (
        logged.withColumn("id", F.lit(1).cast(logged.schema["id"].dataType))
        .withColumn("_cdc_op", F.lit("d"))
        .withColumn("_cdc_position", F.lit("m:0000000001:00000000000000000400:0000000000"))
    )
    phantom.write.parquet(str(tmp_path / "ck_b" / "events" / "batch=1"))
    land(zone_a, "1.json", events(("u", 1, 300, "updated")))
    result = ingest(table_name, zone_a, tmp_path / "ck_a")
    assert (result["updated"], result["late"]) == (1, 0)
    assert _names(spark, table_name) == {1: "updated", 2: "two"}


def test_a_schema_change_by_another_writer_decides_the_batch_again(
    spark, tmp_path, table_name, monkeypatch
):
    """A column is added while this batch commits: its files were written for the old schema,
    so it is decided again on the new one and commits, instead of failing the stream."""
    from sparkext.iceberg.cdc_table import CdcCommit

    zone = tmp_path / "in"
    land(zone, "1.json", events(("c", 1, 10, "a")))
    ingest(table_name, zone, tmp_path / "ck")
    original = CdcCommit.commit
    commits = []

    def altering(self, *args, **kwargs):
        commits.append(1)
        if len(commits) == 1:
            spark.sql(f"ALTER TABLE {table_name} ADD COLUMN note STRING")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CdcCommit, "commit", altering)
    land(zone, "2.json", events(("u", 1, 20, "b")))
    assert ingest(table_name, zone, tmp_path / "ck")["updated"] == 1
    assert len(commits) == 2  # the first plan met the new schema, the second committed
    assert [(r.id, r.name, r.note) for r in spark.table(table_name).collect()] == [(1, "b", None)]


def test_a_table_created_meanwhile_with_another_key_is_one_sentence(spark, table_name):
    """Two writers create the table at once: the loser uses the winner's table when the keys
    agree (in any order), and says so in one sentence when they do not."""
    from sparkext.errors import IngestError
    from sparkext.iceberg.cdc_table import create_table

    columns = [("id", "int"), ("name", "string")]
    create_table(spark, table_name, columns, ["id", "name"], {"format-version": "2"})
    again = create_table(spark, table_name, columns, ["name", "id"], {"format-version": "2"})
    assert sorted(again.key()) == ["id", "name"]
    with pytest.raises(IngestError) as caught:
        create_table(spark, table_name, columns, ["name"], {"format-version": "2"})
    message = str(caught.value)
    assert message.startswith(f"Table '{table_name}' was created by another writer")
    assert message.endswith("pass the same primary_key to every ingest_cdc writing it.")
    assert "\n" not in message


WRITER_SCRIPT = textwrap.dedent(
    """
    import os, sys, time, sparkext
    from sparkext.iceberg.cdc_table import CdcCommit
    from sparkext.routing.router import execute
    from sparkext.routing.tokens import split_statements

    warehouse, table, source, checkpoint, mine, theirs = sys.argv[1:7]
    original, calls = CdcCommit.commit, []

    def meeting(self, *args, **kwargs):
        # the first commit waits until the other writer has planned its first batch too
        calls.append(1)
        if len(calls) == 1:
            open(mine, "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(theirs) and time.monotonic() < deadline:
                time.sleep(0.02)
        return original(self, *args, **kwargs)

    CdcCommit.commit = meeting
    spark = sparkext.session(master="local[1]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "2"})
    sql = (
        f"CALL sparkext.ingest_cdc(table => '{table}', source => '{source}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true, "
        "options => map('max-files-per-batch', '1'))"
    )
    report = lambda line: print("PROGRESS", line, flush=True)
    row = execute(spark, split_statements(sql)[0], report).first()
    print("COMMITS", row.commits)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "steps,keys,files",
    [
        pytest.param(40, 10, 1, id="small"),  # the default tier: one batch per writer
        pytest.param(180, 25, 3, id="full", marks=pytest.mark.stress),
    ],
)
def test_two_processes_on_overlapping_keys_equal_the_source(
    spark, tmp_path, warehouse, steps, keys, files
):
    """Two real processes ingest two landing zones that split one source's events at random
    (overlapping keys, each zone out of order relative to the other), starting at once on a
    table neither has created: both progress, and the table equals the oracle. Each writer's
    first commit waits until the other has planned its first batch, so their commits conflict:
    one lands first, and the other's batch meets keys it changed and is decided again."""
    table = f"lake.test.two_writers_{files}"
    source = SourceTable(seed=1313, key_space=keys)
    changes = [e for e in source.run(steps) if e["op"] != "t"]
    pick = random.Random(7)
    zones = {"a": tmp_path / "a", "b": tmp_path / "b"}
    split: dict[str, list[dict]] = {"a": [], "b": []}
    for event in changes:
        split[pick.choice("ab")].append(event)

    def keys_of(zone: str) -> set[int]:
        return {(e["after"] or e["before"])["id"] for e in split[zone]}

    assert keys_of("a") & keys_of("b")  # the writers change some of the same keys
    for name, zone in zones.items():
        mine = split[name]
        for index in range(files):  # one batch per file and writer
            land(zone, f"{index}.json", mine[index::files])
    script = tmp_path / "writer.py"
    script.write_text(WRITER_SCRIPT)
    meet = {n: str(tmp_path / f"{n}.planned") for n in zones}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(warehouse),
                table,
                str(zone),
                str(tmp_path / n),
                meet[n],
                meet["b" if n == "a" else "a"],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for n, zone in zones.items()
    ]
    outputs = [p.communicate(timeout=900) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
        # every batch of both writers committed
        assert f"COMMITS {files}" in out, out + err[-2000:]
    # the commits conflicted: a batch was decided again on the other writer's commit
    assert any("deciding again" in out for out, _ in outputs), [out for out, _ in outputs]
    spark.catalog.refreshTable(table)
    truth = expected(changes)
    assert table_rows(spark, table) == truth


def test_the_key_cache_holds_each_batchs_applied_keys_at_their_last_position(
    spark, tmp_path, table_name
):
    """The file-writing tasks also write the key cache (<checkpoint>/keys/batch=N): per batch,
    every key the batch changed with the position of its last event — the same as the max
    position per key of the batch's event log (written by Spark, separately); the cache Spark
    wrote in earlier versions (<checkpoint>/key-cache) is removed."""
    from pyspark.sql import functions as F

    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b"), ("u", 1, 12, "a2")))
    ingest(table_name, landing, checkpoint)
    legacy = checkpoint / "key-cache" / "batch=0"
    legacy.mkdir(parents=True)
    (legacy / "part-0.parquet").write_bytes(b"old")
    land(landing, "2.json", events(("d", 2, 13, None), ("c", 3, 14, "c"), ("u", 3, 15, "c2")))
    ingest(table_name, landing, checkpoint)

    def by_batch(frame, position):
        grouped = frame.groupBy("batch", "id").agg(F.max(position).alias("p")).collect()
        return {(r.batch, r.id): r.p for r in grouped}

    cache = spark.read.parquet(str(checkpoint / "keys"))
    log = spark.read.parquet(str(checkpoint / "events")).where("_cdc_op != 't'")
    assert by_batch(cache, "position") == by_batch(log, "_cdc_position")
    assert {(b, k) for b, k in by_batch(cache, "position")} == {(0, 1), (0, 2), (1, 2), (1, 3)}
    assert not (checkpoint / "key-cache").exists()
