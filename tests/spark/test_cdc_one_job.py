"""The common micro-batch in ONE job (issue 22): the event log written by the tasks that write the
data and delete files, the batch decided before its facts are known, and decided and written
again when they say it was not common (a late event, a truncate, a TOASTed value, a wrong
guess). Compared with the same batches written the old way (event log by a job of its own, the
batch decided from its facts first) and with the source database's rows; every file a discarded
write left is gone; the event log reads back the same in Spark, pyarrow and DuckDB, ancient
dates included (Spark refuses those in Parquet it cannot date to a Spark 3 writer)."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from sparkext.actions.cdc import ingest as pipeline
from sparkext.actions.cdc import stream
from sparkext.errors import IngestError
from tests.helpers.cdc_calls import events, ingest, land

DECIMAL = "org.apache.kafka.connect.data.Decimal"
FIELDS = [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {
        "field": "money",
        "type": "bytes",
        "optional": True,
        "name": DECIMAL,
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    },
    {"field": "d", "type": "int32", "optional": True, "name": "io.debezium.time.Date"},
    {"field": "dt6", "type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp"},
]
EPOCH = datetime(1970, 1, 1)
ANCIENT = date(1000, 3, 1)  # before 1582-10-15: read as written only from a Spark 3 file


def _cents(value: int) -> str:
    size = max(1, (value.bit_length() + 8) // 8)
    return base64.b64encode(value.to_bytes(size, "big", signed=True)).decode()


def _row(key: int, name: str, when: date) -> dict:
    moment = datetime(when.year, when.month, when.day, 12, 30, 15, 250_000)
    return {
        "id": key,
        "name": name,
        "money": _cents(key * 100 + len(name)),
        "d": (when - EPOCH.date()).days,
        "dt6": (moment - EPOCH) // timedelta(microseconds=1),
    }


def _event(op: str, pos: int, before: dict | None, after: dict | None) -> dict:
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": FIELDS, "optional": True, "field": "before"},
            {"type": "struct", "fields": FIELDS, "optional": True, "field": "after"},
        ],
    }
    source = {
        "connector": "mysql",
        "file": "mysql-bin.000001",
        "pos": pos,
        "row": 0,
        "ts_ms": 1_700_000_000_000 + pos,
        "db": "shop",
        "table": "t",
    }
    payload = {"op": op, "before": before, "after": after, "ts_ms": pos, "source": source}
    return {"schema": schema, "payload": payload}


def _workload(short: bool = False) -> tuple[list[tuple[str, list[dict]]], dict[int, dict]]:
    """Files of one binlog, one batch each, with the cases that are not common; and the source
    table's rows after all of them (the oracle), as the database holds them. ``short``: six
    batches, not seven (the same events)."""
    state: dict[int, dict] = {}
    pos = 100

    def change(op: str, key: int, name: str = "", when: date = date(2026, 11, 28), new_key=None):
        nonlocal pos
        pos += 1
        before = state.get(key)
        after = None if op == "d" else _row(new_key or key, name, when)
        state.pop(key, None)
        if after is not None:
            state[after["id"]] = after
        return _event(op, pos, before, after)

    def truncate() -> dict:
        nonlocal pos
        pos += 1
        state.clear()
        event = _event("t", pos, None, None)
        event["payload"]["before"] = event["payload"]["after"] = None
        return event

    first = [change("c", k, f"n{k}") for k in range(1, 9)]
    common = [change("u", 1, "one"), change("d", 2), change("c", 9, "old", ANCIENT)]
    moved = [change("u", 3, "moved", new_key=30), change("u", 4, "four", date(1900, 1, 1))]
    late = _event("u", 50, None, _row(5, "late", ANCIENT))  # below the table's high-water mark
    with_late = [change("u", 6, "six"), late, change("c", 10, "ten")]
    after_late = [change("u", 6, "six again"), change("c", 13, "thirteen")]
    wiped = [change("u", 7, "gone"), truncate(), change("c", 11, "after", ANCIENT)]
    after = [change("u", 11, "again"), change("c", 12, "twelve")]
    if short:  # the default tier: the two common batches as one
        return [
            ("0001.json", first),
            ("0002.json", common + moved),
            ("0004.json", with_late),
            ("0005.json", after_late),
            ("0006.json", wiped),
            ("0007.json", after),
        ], state
    batches = [
        ("0001.json", first),
        ("0002.json", common),
        ("0003.json", moved),
        ("0004.json", with_late),
        ("0005.json", after_late),
        ("0006.json", wiped),
        ("0007.json", after),
    ]
    return batches, state


def _expected(state: dict[int, dict]) -> dict[int, tuple]:
    def day(days: int) -> date:
        return EPOCH.date() + timedelta(days=days)

    return {
        k: (r["name"], day(r["d"]), EPOCH + timedelta(microseconds=r["dt6"]))
        for k, r in state.items()
    }


def _listen(monkeypatch) -> dict[str, list[str]]:
    """Progress lines of every Ingestor built from now on, by its checkpoint's directory's name
    ("one", "two"); the batches of "two" are never common: written the old way, in two jobs."""
    progress: dict[str, list[str]] = {"one": [], "two": []}
    original, common = pipeline.Ingestor.__init__, pipeline.Ingestor._common

    def run_of(settings) -> str:
        return Path(settings.checkpoint.removeprefix("file:")).parent.name

    def listening(self, spark, settings, report, **kwargs):
        lines = progress[run_of(settings)]
        original(self, spark, settings, lambda line: (lines.append(line), report(line)), **kwargs)

    monkeypatch.setattr(stream, "GUESSES", pipeline.GuessCache())
    monkeypatch.setattr(pipeline.Ingestor, "__init__", listening)
    monkeypatch.setattr(
        pipeline.Ingestor,
        "_common",
        lambda self, *a: run_of(self.settings) == "one" and common(self, *a),
    )
    return progress


def _run(spark, tmp_path: Path, table: str, progress: list[str], short=False) -> dict:
    """Every batch of the workload, one CALL each (the checkpoint in ``tmp_path``, named "one"
    or "two" for :func:`_listen`); what each batch produced."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    results, again = [], []
    batches, state = _workload(short)
    for name, items in batches:
        land(landing, name, items)
        before = len(progress)
        results.append(ingest(table, landing, checkpoint))
        again.append(any("deciding again" in line for line in progress[before:]))
    rows = {
        r.id: (r.name, r.d, r.dt6)
        for r in spark.table(table).select("id", "name", "d", "dt6").collect()
    }
    log = spark.read.option("mergeSchema", "true").parquet(str(checkpoint / "events"))
    summaries = [
        {
            k: v
            for k, v in r.summary.items()
            if k.startswith("sparkext.cdc.") and not k.endswith(("location", "checkpoint-id"))
        }
        for r in spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at").collect()
    ]
    return {
        "results": [{k: v for k, v in r.items() if k != "snapshot_ids"} for r in results],
        "rows": rows,
        "state": state,
        "schema": log.schema.simpleString(),
        "log": sorted((tuple(r) for r in log.collect()), key=repr),
        "summaries": summaries,
        "again": again,
        # Spark's writer leaves _SUCCESS: the event logs not written by the file writers
        "by_spark": [
            (checkpoint / "events" / f"batch={i}" / "_SUCCESS").exists()
            for i in range(len(batches))
        ],
        "checkpoint": checkpoint,
        "money": sorted(r.money for r in spark.table(table).collect()),
    }


def _table_files(spark, table: str) -> set[str]:
    files = spark.sql(f"SELECT file_path FROM {table}.all_files").collect()
    return {Path(r.file_path.removeprefix("file:")).name for r in files}


def _data_directory(spark, table: str) -> Path:
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    return Path(location.first().data_type.removeprefix("file:")) / "data"


@pytest.mark.parametrize(
    "short",
    [
        pytest.param(True, id="six-batches"),
        pytest.param(False, id="seven-batches", marks=pytest.mark.stress),
    ],
)
def test_one_job_batches_equal_two_job_batches_and_the_source(
    spark, tmp_path, table_name, monkeypatch, short
):
    """The same batches into two tables, one job per common batch against two jobs per batch
    (on two threads of the session: the tables, checkpoints and guesses are the runs' own), and
    both against the source database's rows."""
    progress = _listen(monkeypatch)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {
            run: pool.submit(_run, spark, tmp_path / run, table, progress[run], short)
            for run, table in (("one", table_name), ("two", f"{table_name}_two"))
        }
        one, two = runs["one"].result(), runs["two"].result()
    one_files = _table_files(spark, table_name)
    on_disk = {p.name for p in _data_directory(spark, table_name).rglob("*.parquet")}
    late = 2 if short else 3  # the batch with the late event
    count = late + 4
    # the batches that were not common were decided and written again; the others were not
    assert one["again"] == [i in (late, late + 2) for i in range(count)]
    assert two["again"] == [False] * count
    # one job but for the batch after the late one: typed with a guess, its lowest position
    # unknown, it is written the old way when the last batch was not all newer than the table
    assert one["by_spark"] == [i == late + 1 for i in range(count)]
    assert two["by_spark"] == [True] * count
    for part in ("results", "rows", "schema", "log", "summaries", "money"):
        assert one[part] == two[part], part
    assert one["rows"] == _expected(one["state"])
    assert one["results"][late]["late"] == 1
    assert sorted(one["rows"]) == [11, 12]  # the truncate wiped every row before it
    # a discarded write leaves no file: what is on disk is what the table references
    assert on_disk == one_files
    events = one["checkpoint"] / "events"
    assert not [p for p in events.rglob("*") if p.name.startswith("_tmp")]


def test_the_event_log_of_one_job_reads_the_same_in_spark_pyarrow_and_duckdb(
    spark, tmp_path, table_name, monkeypatch
):
    monkeypatch.setattr(stream, "GUESSES", pipeline.GuessCache())
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    old = _row(1, "ancient", ANCIENT)
    land(landing, "1.json", [_event("c", 10, None, _row(2, "modern", date(2026, 1, 2)))])
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [_event("c", 11, None, old)])
    ingest(table_name, landing, checkpoint)  # typed with the guess: one job
    files = list((checkpoint / "events" / "batch=1").glob("*.parquet"))
    assert files and all(pq.read_metadata(f).metadata[b"org.apache.spark.version"] for f in files)
    log = spark.read.parquet(str(checkpoint / "events" / "batch=1"))
    (row,) = log.collect()
    assert (row.id, row.name, row.d, str(row.money)) == (1, "ancient", ANCIENT, "1.07")
    assert row.dt6 == datetime(1000, 3, 1, 12, 30, 15, 250_000)
    table = pq.read_table(files[0])
    assert table.column("d").to_pylist() == [ANCIENT]
    found = duckdb.connect().execute(f"SELECT id, name, d FROM read_parquet('{files[0]}')")
    assert found.fetchall() == [(1, "ancient", ANCIENT)]
    assert log.schema == spark.read.parquet(str(checkpoint / "events" / "batch=0")).schema
    when = datetime(1000, 3, 1, 12, 30, 15, 250_000, tzinfo=timezone.utc).replace(tzinfo=None)
    assert spark.table(table_name).where("id = 1").first().dt6 == when


def test_a_one_job_batch_refused_after_its_write_leaves_no_file(
    spark, tmp_path, table_name, monkeypatch
):
    """fail-on-reject stops a batch whose rejects (a missing key) are known only after its one
    job wrote the data, delete and key-cache files: none of them stays."""
    monkeypatch.setattr(stream, "GUESSES", pipeline.GuessCache())
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, landing, checkpoint)
    referenced = _table_files(spark, table_name)
    no_key = events(("c", 4, 13, "d"))
    del no_key[0]["after"]["id"]
    land(landing, "2.json", [*events(("c", 3, 12, "c"), ("u", 1, 14, "x")), *no_key])
    with pytest.raises(IngestError, match="rejected and fail-on-reject is set"):
        ingest(table_name, landing, checkpoint, options="'fail-on-reject', 'true'")
    on_disk = {p.name for p in _data_directory(spark, table_name).rglob("*.parquet")}
    assert on_disk == referenced
    assert not list((checkpoint / "keys").glob("batch=1/*.parquet"))
    spark.catalog.refreshTable(table_name)
    assert sorted(r.id for r in spark.table(table_name).collect()) == [1, 2]
