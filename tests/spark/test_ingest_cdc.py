"""ingest_cdc against a simulated source database (tests/helpers/cdc_source.py is the oracle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor, wait

import pytest

import sparkext
from sparkext.actions.cdc.model import Settings
from sparkext.errors import IngestError, SchemaChangeError
from tests.helpers.cdc_calls import events, ingest, land, table_rows
from tests.helpers.cdc_source import COLUMNS, Delivery, SourceTable, expected
from tests.helpers.crash_hooks import CHILD_PREAMBLE, CRASH_EXIT, child_path
from tests.helpers.fixtures import DEBEZIUM_SAMPLES


def snapshot_count(spark, table: str) -> int:
    return len(spark.table(f"{table}.snapshots").select("snapshot_id").collect())


SMALL_WORKLOAD = (4, 70)  # batches, source steps per batch: the default tier's workload


def _randomized(spark, tmp_path, table: str, batches: int, steps: int) -> dict:
    """A seeded source database delivered with duplicates and late events, one CALL per
    batch; the table's rows and the oracle's after every batch, and the CALLs' totals."""
    source = SourceTable(seed=20261122, key_space=40)
    delivery = Delivery(tmp_path / "landing", seed=7, duplicate_rate=0.08, late_rate=0.15)
    totals = {"late": 0, "duplicates": 0, "lookups": 0, "lookups_avoided": 0, "commits": 0}
    after_each = []
    for batch in range(batches):
        delivery.deliver(source.run(steps), final=batch == batches - 1)
        result = ingest(table, tmp_path / "landing", tmp_path / "checkpoint")
        for k in totals:
            totals[k] += result[k]
        after_each.append((table_rows(spark, table), expected(delivery.delivered)))
    return {"table": table, "source": source, "totals": totals, "after_each": after_each}


@pytest.fixture(scope="module")
def randomized_history(spark, tmp_path_factory) -> dict:
    """The default tier's randomized workload, ingested once for the tests that read it."""
    directory = tmp_path_factory.mktemp("randomized")
    return _randomized(spark, directory, "lake.test.ingest_cdc_randomized", *SMALL_WORKLOAD)


@pytest.mark.parametrize(
    "batches,steps",
    [
        pytest.param(*SMALL_WORKLOAD, id="small"),
        pytest.param(5, 70, id="full", marks=pytest.mark.stress),
    ],
)
def test_randomized_workload_equals_the_source_after_every_batch(
    spark, tmp_path, table_name, request, batches, steps
):
    """After every batch the table holds, per key, the newest delivered change (the oracle);
    after the last, the source database's rows."""
    if (batches, steps) == SMALL_WORKLOAD:
        run = request.getfixturevalue("randomized_history")
    else:
        run = _randomized(spark, tmp_path, table_name, batches, steps)
    table, totals = run["table"], run["totals"]
    assert len(run["after_each"]) == batches
    for batch, (rows, want) in enumerate(run["after_each"]):
        assert rows == want, f"batch {batch}"
    assert table_rows(spark, table) == run["source"].rows  # everything delivered: the source DB
    assert totals["commits"] == batches
    assert totals["late"] > 0  # the workload did exercise out-of-order delivery
    assert totals["lookups_avoided"] > totals["lookups"] > 0
    health = sparkext.sql(f"CALL sparkext.table_health('{table}')").first()
    assert health.equality_delete_files >= 1


def test_late_and_duplicate_events_never_overwrite_newer_state(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    opts = ", options => map('key-cache-batches', '1')"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("u", 1, 20, "b"), ("c", 2, 11, "x")))
    assert ingest(table_name, landing, checkpoint, opts)["updated"] == 1
    land(landing, "2.json", events(("u", 1, 15, "late"), ("u", 1, 20, "b"), ("d", 2, 30, None)))
    second = ingest(table_name, landing, checkpoint, opts)
    assert (second["late"], second["duplicates"], second["deleted"]) == (1, 1, 1)
    land(landing, "3.json", events(("c", 3, 40, "z")))
    ingest(table_name, landing, checkpoint, opts)  # pushes key 2's delete out of the key cache
    land(landing, "4.json", events(("u", 2, 25, "resurrected?")))
    fourth = ingest(table_name, landing, checkpoint, opts)
    assert fourth["late"] == 1 and fourth["lookups"] == 1  # found through the delete file
    assert table_rows(spark, table_name, ("id", "name")) == {
        1: {"id": 1, "name": "b"},
        3: {"id": 3, "name": "z"},
    }
    late = spark.read.parquet(str(checkpoint / "late"))
    assert sorted(r.status for r in late.collect()) == ["duplicate", "late", "late"]


def test_a_very_late_event_after_delete_conversion_stays_late(spark, tmp_path, table_name):
    """The delete left the key cache and its equality delete became a position delete."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    opts = ", options => map('key-cache-batches', '1')"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "x")))
    ingest(table_name, landing, checkpoint, opts)
    land(landing, "2.json", events(("d", 2, 30, None)))
    ingest(table_name, landing, checkpoint, opts)
    land(landing, "3.json", events(("c", 3, 40, "z")))
    ingest(table_name, landing, checkpoint, opts)
    converted = sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table_name}')")
    assert converted.first().equality_delete_files_remaining == 0
    land(landing, "4.json", events(("u", 2, 25, "resurrected?")))
    fourth = ingest(table_name, landing, checkpoint, opts)
    assert fourth["late"] == 1 and fourth["lookups"] == 1  # found through the event log
    assert sorted(table_rows(spark, table_name, ("id", "name"))) == [1, 3]


def test_a_late_delete_of_a_key_outside_the_key_cache_is_applied(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    opts = ", options => map('key-cache-batches', '1')"
    land(landing, "1.json", events(("c", 5, 10, "a"), ("c", 6, 20, "b")))
    ingest(table_name, landing, checkpoint, opts)
    land(landing, "2.json", events(("c", 7, 40, "c")))  # pushes key 5 out of the key cache
    ingest(table_name, landing, checkpoint, opts)
    land(landing, "3.json", events(("d", 5, 30, None)))  # late, and key 5 left the cache
    third = ingest(table_name, landing, checkpoint, opts)
    assert (third["lookups"], third["deleted"], third["duplicates"]) == (1, 1, 0)
    assert sorted(table_rows(spark, table_name, ("id", "name"))) == [6, 7]


def test_insert_then_delete_in_one_batch_leaves_nothing(spark, tmp_path, table_name):
    land(
        tmp_path / "in",
        "1.json",
        events(
            ("c", 1, 10, "a"),
            ("d", 1, 11, None),
            ("c", 2, 12, "b"),
            ("d", 2, 13, None),
            ("c", 2, 14, "again"),
        ),
    )
    ingest(table_name, tmp_path / "in", tmp_path / "ck")
    assert table_rows(spark, table_name, ("id", "name")) == {2: {"id": 2, "name": "again"}}


def test_bad_events_are_rejected_with_reasons_not_dropped(spark, tmp_path, table_name):
    good = events(("c", 1, 10, "a"))
    other = events(("c", 2, 11, "b"))
    other[0]["source"]["table"] = "elsewhere"
    no_key = events(("c", 3, 12, "c"))
    del no_key[0]["after"]["id"]
    land(tmp_path / "in", "1.json", good + other + no_key, ["{not json", '{"op": "x"}'])
    result = ingest(
        table_name, tmp_path / "in", tmp_path / "ck", ", options => map('source-table', 'shop.t')"
    )
    assert result["rejected"] == 4 and result["inserted"] == 1
    reasons = sorted(
        r.reject.split(":")[0] for r in spark.read.json(str(tmp_path / "ck" / "rejected")).collect()
    )
    assert reasons == [
        "event of another table",
        "malformed JSON",
        "missing key column(s) id",
        "not a Debezium change event",
    ]


def test_fail_on_reject_commits_nothing(spark, tmp_path, table_name):
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")), ["{oops"])
    with pytest.raises(IngestError, match=r"^1 event\(s\) were rejected and fail-on-reject is set"):
        ingest(
            table_name,
            tmp_path / "in",
            tmp_path / "ck",
            ", options => map('fail-on-reject', 'true')",
        )
    assert not spark.catalog.tableExists(table_name)  # nothing created, nothing committed


def test_truncate_and_redelivered_truncate(spark, tmp_path, table_name):
    landing = tmp_path / "in"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, landing, tmp_path / "ck")
    truncate = {
        "op": "t",
        "source": {
            "file": "mysql-bin.000001",
            "pos": 20,
            "row": 0,
            "ts_ms": 20000,
            "db": "shop",
            "table": "t",
        },
    }
    land(landing, "2.json", [truncate, *events(("c", 3, 21, "c"))])
    ingest(table_name, landing, tmp_path / "ck")
    assert set(table_rows(spark, table_name, ("id",))) == {3}
    land(landing, "3.json", [*events(("c", 4, 30, "d")), truncate, *events(("u", 2, 12, "x"))])
    third = ingest(table_name, landing, tmp_path / "ck")
    assert set(table_rows(spark, table_name, ("id",))) == {3, 4}
    assert third["late"] == 1 and third["duplicates"] == 1


def connect_event(op: str, key: int, pos: int, qty, qty_type: str, note: str | None = None):
    fields = [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "qty", "type": qty_type, "optional": True},
    ]
    row = {"id": key, "qty": qty}
    if note is not None:
        fields.append({"field": "note", "type": "string", "optional": True})
        row["note"] = note
    value_schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": fields, "optional": True, "field": "before"},
            {"type": "struct", "fields": fields, "optional": True, "field": "after"},
        ],
    }
    payload = {
        "op": op,
        "before": None,
        "after": row,
        "ts_ms": pos,
        "source": {
            "file": "mysql-bin.000001",
            "pos": pos,
            "row": 0,
            "ts_ms": pos,
            "db": "shop",
            "table": "t",
        },
    }
    return {"schema": value_schema, "payload": payload}


@pytest.fixture(scope="module")
def evolved(spark, tmp_path_factory) -> dict:
    """One table through three batches of Connect events: qty INT (1), a BIGINT qty and a new
    column note (2), an update of key 2 (3); its column types after each batch and its rows
    after the second."""
    table = "lake.test.ingest_cdc_evolved"
    root = tmp_path_factory.mktemp("evolved")
    landing, checkpoint = root / "in", root / "ck"
    batches = [
        connect_event("c", 1, 10, 5, "int32"),
        connect_event("c", 2, 20, 2**40, "int64", note="new"),
        connect_event("u", 2, 30, 7, "int64"),
    ]
    types, rows = [], []
    for number, event in enumerate(batches, 1):
        land(landing, f"{number}.json", [event])
        ingest(table, landing, checkpoint)
        types.append(dict(spark.table(table).dtypes))
        columns = [c for c in ("id", "qty", "note") if c in types[-1]]
        rows.append(table_rows(spark, table, columns))
    return {
        "table": table,
        "landing": landing,
        "checkpoint": checkpoint,
        "types": types,
        "rows": rows,
    }


def test_schema_evolution_add_widen_and_refuse(spark, evolved):
    """A new column is added, an INT widened to BIGINT; a change to STRING is refused in one
    sentence and commits nothing."""
    table, landing, checkpoint = evolved["table"], evolved["landing"], evolved["checkpoint"]
    first, second = evolved["types"][:2]
    assert (first["id"], first["qty"]) == ("int", "int")
    assert (second["qty"], second["note"]) == ("bigint", "string")
    assert evolved["rows"][1] == {
        1: {"id": 1, "qty": 5, "note": None},
        2: {"id": 2, "qty": 2**40, "note": "new"},
    }
    snapshots = snapshot_count(spark, table)
    land(landing, "4.json", [connect_event("c", 3, 40, "many", "string")])
    with pytest.raises(SchemaChangeError) as caught:
        ingest(table, landing, checkpoint)
    assert str(caught.value).startswith(
        "Column 'qty' changed from bigint to string in the source and Iceberg cannot convert it"
    )
    assert snapshot_count(spark, table) == snapshots


def _event_logs(spark, table: str) -> list[str]:
    from sparkext.planning.summary import EVENTS_LOCATION

    rows = spark.sql(
        f"SELECT summary['{EVENTS_LOCATION}'] AS log FROM {table}.snapshots ORDER BY committed_at"
    ).collect()
    return [r.log for r in rows if r.log]


def test_event_logs_of_evolved_schemas_read_together(spark, evolved):
    """Logs whose schemas merge are one Parquet relation; a type change falls back to one read
    per log; both conform every log to the current columns and types."""
    from sparkext.actions.history.as_of import read_logs

    table_name = evolved["table"]
    logs = _event_logs(spark, table_name)
    assert len(logs) == 3
    schema = spark.table(table_name).schema
    user = [(f.name, f.dataType) for f in schema.fields if not f.name.startswith("_cdc")]

    def read(paths):
        frame = read_logs(spark, paths, user, ["id"])
        rows = sorted((r.id, r.qty, r.note, r._cdc_op) for r in frame.collect())
        return frame, rows

    merged, rows = read(logs[1:])  # qty BIGINT in both: one relation, note NULL where absent
    assert rows == [(2, 7, None, "u"), (2, 2**40, "new", "c")]
    assert str(merged._jdf.queryExecution().analyzed()).count("Relation [") == 1
    apart, rows = read(logs)  # qty INT in the first log: read one by one, cast to BIGINT
    assert rows == [(1, 5, None, "c"), (2, 7, None, "u"), (2, 2**40, "new", "c")]
    assert str(apart._jdf.queryExecution().analyzed()).count("Relation [") == 3
    assert dict(apart.dtypes)["qty"] == "bigint"


def test_duckdb_reads_the_same_rows(spark, randomized_history):
    """DuckDB's iceberg extension reads the randomized workload's table (equality deletes of
    late, duplicate and deleted keys applied) as the source database's rows."""
    from tests.helpers.readers import duckdb_query

    table = randomized_history["table"]
    rows = duckdb_query(spark, table, "SELECT id, name, qty, price FROM {table}")
    want = randomized_history["source"].rows
    assert {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in rows} == want


CRASH_SCRIPT = CHILD_PREAMBLE + textwrap.dedent(
    """
    import sys, sparkext
    spark = sparkext.session(master="local[2]", warehouse=sys.argv[1])
    sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{sys.argv[2]}', source => '{sys.argv[3]}', "
        f"checkpoint => '{sys.argv[4]}', primary_key => 'id', create => true)"
    )
    """
)


CRASH_POINTS = ("after-write", "after-commit")


@pytest.mark.slow
def test_crash_and_restart_neither_loses_nor_doubles(spark, tmp_path, warehouse):
    """A real process killed after writing a batch's files but before its commit, and another
    killed after the commit but before the checkpoint: the restart applies each batch exactly
    once. The two crashing processes run side by side (one JVM start's wait, not two); their
    tables' first batches and their restarts run on two threads of the session."""
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)

    def crash(point: str) -> tuple:
        """The first batch committed here, the second by a process that crashes at ``point``."""
        table = f"lake.test.crash_{point.replace('-', '_')}"
        landing, checkpoint = tmp_path / point / "in", tmp_path / point / "ck"
        source = SourceTable(seed=99, key_space=30)
        delivery = Delivery(landing, seed=5, late_rate=0.0)
        delivery.deliver(source.run(60))
        ingest(table, landing, checkpoint)
        before = snapshot_count(spark, table)
        delivery.deliver(source.run(60), final=True)
        child = subprocess.Popen(
            [
                *(sys.executable, str(script), str(warehouse), table, str(landing)),
                *(str(checkpoint), point),  # the crash point: read by CHILD_PREAMBLE
            ],
            env={**os.environ, "PYTHONPATH": child_path()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return table, landing, checkpoint, source, before, child

    def restart(point: str, table, landing, checkpoint, source, before, child) -> None:
        _, err = child.communicate(timeout=600)
        assert child.returncode == CRASH_EXIT, (point, err[-2000:])
        spark.catalog.refreshTable(table)
        committed = snapshot_count(spark, table)
        assert committed == before + (1 if point == "after-commit" else 0), point
        result = ingest(table, landing, checkpoint)  # the restart
        assert result["batches_replayed"] == (1 if point == "after-commit" else 0), point
        assert snapshot_count(spark, table) == before + 1, point  # applied exactly once
        assert table_rows(spark, table) == source.rows, point

    with ThreadPoolExecutor(max_workers=2) as pool:
        started = {point: pool.submit(crash, point) for point in CRASH_POINTS}
        try:
            runs = {point: future.result() for point, future in started.items()}
            restarts = [pool.submit(restart, point, *run) for point, run in runs.items()]
            for future in restarts:
                future.result()
        finally:
            wait(started.values())
            for future in started.values():
                child = future.result()[-1] if future.exception() is None else None
                if child is not None and child.poll() is None:
                    child.kill()


def test_user_errors_are_one_sentence(spark, tmp_path, table_name):
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")))
    with pytest.raises(IngestError) as caught:
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{tmp_path / 'in'}', "
            f"checkpoint => '{tmp_path / 'ck'}')"
        )
    assert str(caught.value) == (
        f"Table '{table_name}' does not exist; pass create => true to create it from the "
        "first events."
    )
    with pytest.raises(IngestError) as caught:
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{tmp_path / 'in'}', "
            f"checkpoint => '{tmp_path / 'ck2'}', create => true)"
        )
    assert str(caught.value).startswith(
        "ingest_cdc needs the primary key to create the table: pass primary_key => 'id'"
    )
    with pytest.raises(IngestError, match=r"^Primary key column\(s\) uid are not in the events"):
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{tmp_path / 'in'}', "
            f"checkpoint => '{tmp_path / 'ck3'}', primary_key => 'uid', create => true)"
        )
    assert not spark.catalog.tableExists(table_name)


def test_continuous_form_runs_the_same_pipeline(spark, tmp_path, table_name):
    landing = tmp_path / "in"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    query = sparkext.ingest_cdc_stream(
        table_name,
        str(landing),
        str(tmp_path / "ck"),
        primary_key="id",
        create=True,
        interval="1 second",
    )
    try:
        query.processAllAvailable()
        land(landing, "2.json", events(("u", 1, 12, "a2"), ("d", 2, 13, None)))
        query.processAllAvailable()
    finally:
        query.stop()
    assert table_rows(spark, table_name, ("id", "name")) == {1: {"id": 1, "name": "a2"}}


def _sample_events(directory) -> list[dict]:
    """The change events among the shared Debezium samples, unwrapped for the oracle."""
    found = []
    for path in sorted(directory.glob("*.json")):
        document = json.loads(path.read_text())
        for item in document if isinstance(document, list) else [document]:
            value = item.get("value", item) if isinstance(item, dict) else item
            payload = value.get("payload", value) if isinstance(value, dict) else value
            if isinstance(payload, dict) and payload.get("op") in ("c", "r", "u", "d", "t"):
                found.append(payload)
    return found


def test_new_user_ingests_the_shared_debezium_samples(spark, tmp_path, table_name):
    """The samples are pretty-printed JSON documents, hence input-format json-files."""
    samples = DEBEZIUM_SAMPLES
    result = sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{samples}/*.json', "
        f"checkpoint => '{tmp_path / 'ck'}', primary_key => 'id', create => true, "
        "options => map('input-format', 'json-files'))"
    ).first()
    changes = _sample_events(samples)
    assert result.events == result.rejected + len(changes)
    assert result.rejected >= 3  # key-only, schema-change and flattened records, with reasons
    columns = ("id", "first_name", "last_name", "email")
    want = {k: {c: row.get(c) for c in columns} for k, row in expected(changes).items()}
    assert table_rows(spark, table_name, columns) == want


def test_unqualified_table_names_use_the_current_catalog(spark, tmp_path):
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")))
    ingest("test.cdc_unqualified", tmp_path / "in", tmp_path / "ck")  # default catalog: lake
    assert table_rows(spark, "lake.test.cdc_unqualified", ("id", "name")) == {
        1: {"id": 1, "name": "a"}
    }


@pytest.mark.parametrize(
    "replans",
    [
        pytest.param(2, id="two-plans"),  # the default tier: fewer plans, the same outcome
        pytest.param(None, id="shipped-plans", marks=pytest.mark.stress),  # REPLANS as shipped
    ],
)
def test_a_concurrent_writer_is_reported_and_a_rerun_applies_the_batch(
    spark, tmp_path, table_name, monkeypatch, replans
):
    """Another writer commits between plan and commit: nothing is lost, nothing papered over."""
    from sparkext.actions.cdc.ingest import pipeline
    from sparkext.errors import CommitConflictError
    from sparkext.iceberg.cdc_table import CdcCommit

    if replans is not None:
        monkeypatch.setattr(pipeline, "REPLANS", replans)
    plans = pipeline.REPLANS

    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a")))
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", events(("u", 1, 20, "b"), ("c", 2, 21, "c")))
    original = CdcCommit.commit

    def interfering(self, *args, **kwargs):
        spark.sql(
            f"INSERT INTO {table_name} SELECT 99, 'other writer', 'c', "
            "CAST(NULL AS TIMESTAMP), 'm:0000000000:00000000000000000000:0000000000'"
        )
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CdcCommit, "commit", interfering)
    with pytest.raises(CommitConflictError) as caught:
        ingest(table_name, landing, checkpoint)
    message = str(caught.value)
    assert f"({plans} plans)" in message
    # every plan met a new foreign commit (an INSERT, whose keys are unknown): decided again
    # REPLANS times, then one sentence
    assert message.startswith("Other writers kept changing keys of this batch")
    assert table_name.split(".")[-1] in message
    assert message.endswith("was committed: run ingest_cdc again.")
    assert "\n" not in message
    assert table_rows(spark, table_name, ("id", "name")) == {
        1: {"id": 1, "name": "a"},
        99: {"id": 99, "name": "other writer"},
    }
    monkeypatch.setattr(CdcCommit, "commit", original)
    ingest(table_name, landing, checkpoint)  # the batch was not checkpointed: it runs again
    assert table_rows(spark, table_name, ("id", "name")) == {
        1: {"id": 1, "name": "b"},
        2: {"id": 2, "name": "c"},
        99: {"id": 99, "name": "other writer"},
    }


def _direct_settings(table: str, checkpoint) -> Settings:
    """Settings of an ``Ingestor`` driven directly (``process`` called with a DataFrame)."""
    return Settings(
        table=table,
        checkpoint=str(checkpoint),
        primary_key=("id",),
        create=True,
        source_table=None,
        fail_on_reject=False,
        key_cache_batches=100,
        lookup_in_list_max=10_000,
    )


def test_kafka_records_run_through_the_same_pipeline(spark, tmp_path, table_name):
    """Kafka-shaped records (what Spark's Kafka source yields) through the micro-batch pipeline.

    The connector itself is not on this machine's classpath; everything after it is exercised.
    """
    from sparkext.actions.cdc.ingest import Ingestor
    from sparkext.actions.cdc.stream import kafka_lines

    source = SourceTable(seed=41, key_space=25)
    delivery = Delivery(tmp_path / "unused", seed=41, late_rate=0.2)
    settings = _direct_settings(table_name, tmp_path / "ck")
    ingestor = Ingestor(spark, settings, lambda message: None)
    offset = 0
    for batch in range(3):
        events = delivery.deliver(source.run(50), final=batch == 2)
        records = []
        for e in events:
            key = json.dumps({"id": (e["after"] or e["before"] or {}).get("id")})
            records.append(
                (key.encode(), json.dumps(e).encode(), "shop.orders", offset % 3, offset)
            )
            offset += 1
        records.append((b'{"id": 1}', None, "shop.orders", 0, offset))  # a tombstone
        offset += 1
        frame = spark.createDataFrame(
            records, "key binary, value binary, topic string, partition int, offset bigint"
        )
        ingestor.process(kafka_lines(frame), batch)
        assert table_rows(spark, table_name) == expected(delivery.delivered), batch
    assert table_rows(spark, table_name) == source.rows
    progress = spark.table(f"{table_name}.snapshots").orderBy("committed_at").collect()[-1]
    assert set(json.loads(progress.summary["sparkext.cdc.source-progress"])) == {"0", "1", "2"}


def test_kafka_source_without_connector_or_brokers_is_one_sentence(spark, tmp_path, table_name):
    with pytest.raises(IngestError, match=r"kafka\.bootstrap\.servers"):
        ingest(table_name, "kafka:shop.orders", tmp_path / "ck")
    with pytest.raises(IngestError, match="Kafka connector"):
        ingest(
            table_name,
            "kafka:shop.orders",
            tmp_path / "ck",
            ", options => map('kafka.bootstrap.servers', 'localhost:9092')",
        )
    assert not spark.catalog.tableExists(table_name)


@pytest.mark.parametrize(
    "batches,steps",
    [
        pytest.param(2, 50, id="small"),
        pytest.param(3, 70, id="full", marks=pytest.mark.stress),
    ],
)
def test_bucketed_table_equals_the_source_and_spark_agrees_on_partitions(
    spark, tmp_path, table_name, batches, steps
):
    source = SourceTable(seed=77, key_space=40)
    delivery = Delivery(tmp_path / "landing", seed=77, duplicate_rate=0.05, late_rate=0.15)
    opts = ", options => map('partition-by', 'bucket(4, id)')"
    for batch in range(batches):
        delivery.deliver(source.run(steps), final=batch == batches - 1)
        ingest(table_name, tmp_path / "landing", tmp_path / "checkpoint", opts)
        assert table_rows(spark, table_name) == expected(delivery.delivered), batch
    assert table_rows(spark, table_name) == source.rows
    ours = {
        r.id: r.p
        for r in spark.sql(f"SELECT id, _partition.id_bucket AS p FROM {table_name}").collect()
    }
    assert len({*ours.values()}) > 1
    # Spark's own bucket function on the same keys: same partition for every row
    spark.sql(
        f"CREATE TABLE {table_name}_ref (id bigint) USING iceberg PARTITIONED BY (bucket(4, id))"
    )
    spark.sql(f"INSERT INTO {table_name}_ref SELECT id FROM {table_name}")
    ref = {
        r.id: r.p
        for r in spark.sql(f"SELECT id, _partition.id_bucket AS p FROM {table_name}_ref").collect()
    }
    assert ours == ref
    for key in list(source.rows)[:5]:  # partition pruning on key equality finds every row
        assert (
            spark.sql(f"SELECT qty FROM {table_name} WHERE id = {key}").first().qty
            == (source.rows[key]["qty"])
        )
    files = spark.table(f"{table_name}.delete_files").where("content = 2").count()
    assert files > 1  # equality deletes written per partition


def test_identity_partitioned_string_key_with_awkward_values(spark, tmp_path, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (code string NOT NULL, qty bigint, _cdc_op string, "
        "_cdc_event_time timestamp, _cdc_position string) USING iceberg "
        "PARTITIONED BY (code) TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS code")
    awkward = ["a/b=c", "x y", "ünï", "%41"]

    def change(op, code, pos, qty):
        image = {"code": code, "qty": qty}
        return {
            "op": op,
            "before": None if op == "c" else image,
            "after": None if op == "d" else image,
            "source": {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": pos},
        }

    land(tmp_path / "in", "1.json", [change("c", c, i + 1, i) for i, c in enumerate(awkward)])
    ingest(table_name, tmp_path / "in", tmp_path / "ck", key="code")
    land(tmp_path / "in", "2.json", [change("u", "a/b=c", 10, 99), change("d", "x y", 11, 0)])
    ingest(table_name, tmp_path / "in", tmp_path / "ck", key="code")
    rows = {r.code: r.qty for r in spark.table(table_name).collect()}
    assert rows == {"a/b=c": 99, "ünï": 2, "%41": 3}
    assert spark.sql(f"SELECT qty FROM {table_name} WHERE code = 'a/b=c'").first().qty == 99


def test_a_table_partitioned_off_the_key_is_refused(spark, tmp_path, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint NOT NULL, name string) USING iceberg "
        "PARTITIONED BY (name) TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")))
    with pytest.raises(IngestError, match=r"partitioned by identity\(name\)"):
        ingest(table_name, tmp_path / "in", tmp_path / "ck")
    with pytest.raises(IngestError, match="not a primary-key column"):
        ingest(
            table_name + "x",
            tmp_path / "in",
            tmp_path / "ck2",
            ", options => map('partition-by', 'bucket(4, name)')",
        )
    assert spark.table(table_name).count() == 0
    assert not spark.catalog.tableExists(table_name + "x")


def test_batch_tuning_stays_in_the_streams_session(spark, tmp_path, table_name, monkeypatch):
    from sparkext.actions.cdc import ingest as ingest_module

    compressed, threshold = ingest_module.BATCH_SQL_CONF
    seen: list[dict[str, str]] = []
    original = ingest_module.Ingestor._process

    def spying(self, lines, batch_id):
        conf = lines.sparkSession.conf
        seen.append({name: conf.get(name) for name in ingest_module.BATCH_SQL_CONF})
        return original(self, lines, batch_id)

    monkeypatch.setattr(ingest_module.Ingestor, "_process", spying)
    spark.conf.set(threshold, "4096")  # the user's own choice: kept
    try:
        before = {name: spark.conf.get(name, None) for name in ingest_module.BATCH_SQL_CONF}
        land(tmp_path / "in", "1.json", events(("c", 1, 10, "a"), ("u", 1, 11, "b")))
        ingest(table_name, tmp_path / "in", tmp_path / "ck")
        after = {name: spark.conf.get(name, None) for name in ingest_module.BATCH_SQL_CONF}
    finally:
        spark.conf.unset(threshold)
    assert table_rows(spark, table_name, ("id", "name")) == {1: {"id": 1, "name": "b"}}
    assert seen and all(s == {compressed: "false", threshold: "4096"} for s in seen)
    assert after == before  # the user's session, untouched
    assert after[threshold] == "4096" and after[compressed] in (None, "true")


def test_a_batch_from_the_users_own_session_leaves_it_untuned(spark, tmp_path, table_name):
    """``Ingestor.process`` handed a DataFrame of the user's session (not a stream's): not tuned."""
    from sparkext.actions.cdc import ingest as ingest_module
    from sparkext.actions.cdc.stream import kafka_lines

    settings = _direct_settings(table_name, tmp_path / "ck")
    record = (b'{"id": 1}', json.dumps(events(("c", 1, 10, "a"))[0]).encode(), "t", 0, 0)
    frame = spark.createDataFrame(
        [record], "key binary, value binary, topic string, partition int, offset bigint"
    )
    before = {name: spark.conf.get(name, None) for name in ingest_module.BATCH_SQL_CONF}
    ingest_module.Ingestor(spark, settings, lambda message: None).process(kafka_lines(frame), 0)
    assert table_rows(spark, table_name, ("id", "name")) == {1: {"id": 1, "name": "a"}}
    assert {name: spark.conf.get(name, None) for name in ingest_module.BATCH_SQL_CONF} == before
