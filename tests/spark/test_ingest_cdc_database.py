"""ingest_cdc_database: every topic of a landing root into its own table, one stream, one
checkpoint. The oracle of the synthetic tests is each topic's events replayed by hand (per key,
the newest change by binlog position); the real-connector test holds the lake against
PostgreSQL's own rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sparkext
from sparkext.errors import IngestError, OptionError
from tests.helpers import debezium, real_rows
from tests.helpers.crash_hooks import CHILD_PREAMBLE, CRASH_EXIT

ROOT = str(Path(__file__).resolve().parents[2])  # this checkout's sparkext, in the child too


class Topic:
    """One source table's Debezium topic in a Kafka Connect landing root: events with their
    Kafka key (``{"key": ..., "value": ...}`` lines), one file per :meth:`land`, and the rows
    a correct ingester holds afterwards."""

    def __init__(self, root: Path, topic: str):
        self.root, self.topic = root, topic
        self.db, self.table = topic.split(".")[-2:]
        self.rows: dict[int, dict] = {}
        self.pending: list[str] = []
        self.offset = 0

    def change(self, op: str, key: int, pos: int, **values) -> Topic:
        before = self.rows.get(key)
        after = None if op == "d" else {"id": key, **values}
        value = {
            "op": op,
            "before": before,
            "after": after,
            "source": {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": pos * 1000,
                       "db": self.db, "table": self.table},
            "ts_ms": pos * 1000 + 5,
        }  # fmt: skip
        self.pending.append(json.dumps({"key": {"id": key}, "value": value}))
        if after is None:
            self.rows.pop(key, None)
        else:
            self.rows[key] = after
        return self

    def land(self) -> Topic:
        folder = self.root / "topics" / self.topic / "partition=0"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{self.topic}+0+{self.offset:010d}.json"
        (folder / name).write_text("\n".join(self.pending) + "\n")
        self.offset += len(self.pending)
        self.pending = []
        return self


def sync(root, checkpoint, namespace: str = "lake.sync", **options: str) -> dict[str, dict]:
    """One CALL; its rows by topic."""
    given = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    text = (
        f"CALL sparkext.ingest_cdc_database(namespace => '{namespace}', source => '{root}', "
        f"checkpoint => '{checkpoint}'" + (f", options => map({given}))" if given else ")")
    )
    return {r.topic: r.asDict() for r in sparkext.sql(text).collect()}


def rows_of(spark, table: str) -> dict[int, dict]:
    frame = spark.table(table)
    columns = [c for c in frame.columns if not c.startswith("_")]
    return {r.id: {k: v for k, v in r.asDict().items() if v is not None}
            for r in frame.select(*columns).collect()}  # fmt: skip


def snapshots(spark, table: str) -> int:
    return spark.table(f"{table}.snapshots").count()


@pytest.fixture
def namespace(spark):
    """A fresh namespace per test: its tables are the sync's output and nothing else."""
    name = f"lake.sync_{os.urandom(3).hex()}"
    spark.sql(f"CREATE NAMESPACE {name}")
    return name


def three_topics(root: Path) -> dict[str, Topic]:
    topics = {
        "orders": Topic(root, "pg.public.orders")
        .change("c", 1, 10, name="a", qty=1)
        .change("c", 2, 11, name="b", qty=2)
        .change("u", 1, 12, name="a2", qty=3)
        .land(),
        "customers": Topic(root, "pg.public.customers")
        .change("c", 7, 20, name="ann")
        .change("c", 8, 21, name="bob")
        .change("d", 7, 22)
        .land(),
        "stock": Topic(root, "pg.inventory.stock").change("c", 3, 30, name="bolt", qty=9).land(),
    }
    # Debezium's topics without rows: a heartbeat, the schema-change topic, transaction metadata
    for other in ("__debezium-heartbeat.pg", "pg", "pg.transaction"):
        folder = root / "topics" / other / "partition=0"
        folder.mkdir(parents=True)
        (folder / f"{other}+0+0000000000.json").write_text('{"ts_ms": 1}\n')
    return topics


def test_one_call_syncs_every_topic_and_later_ones(spark, tmp_path, namespace):
    """One call creates a table per topic with the right rows and reports the ignored topics;
    a topic that appears later is created by the next call, and a column added in one topic
    evolves that table only."""
    root, ck = tmp_path / "landing", tmp_path / "ck"
    topics = three_topics(root)
    first = sync(root, ck, namespace)
    assert {t: (r["table"], r["created"], r["status"]) for t, r in first.items()} == {
        "pg.public.orders": (f"{namespace}.orders", True, "ok"),
        "pg.public.customers": (f"{namespace}.customers", True, "ok"),
        "pg.inventory.stock": (f"{namespace}.stock", True, "ok"),
        "__debezium-heartbeat.pg": (None, False, "ignored: Debezium heartbeat topic"),
        "pg": (None, False, "ignored: Debezium schema-change topic (the topic prefix alone)"),
        "pg.transaction": (None, False, "ignored: Debezium transaction-metadata topic"),
    }
    assert first["pg.public.orders"]["events"] == 3 and first["pg.public.orders"]["commits"] == 1
    assert first["pg.public.customers"]["deleted"] == 1
    for name, topic in topics.items():
        assert rows_of(spark, f"{namespace}.{name}") == topic.rows, name
    # the root's one heartbeat topic is the connector's progress, for every table (cdc_lag)
    lag = sparkext.sql(f"SELECT * FROM sparkext.cdc_lag(table => '{namespace}.stock')").first()
    assert lag["heartbeat_time"] is not None and lag["heartbeat_time"] < lag["source_time"]
    assert lag["complete_through"] == lag["source_time"]  # the newer of the two

    topics["orders"].change("c", 4, 13, name="d", qty=4, note="new column").land()
    later = Topic(root, "pg.public.payments").change("c", 1, 40, amount=5).land()
    second = sync(root, ck, namespace)
    assert second["pg.public.payments"]["created"] is True, second
    assert second["pg.public.orders"]["created"] is False
    assert second["pg.public.orders"]["events"] == 1
    assert second["pg.public.customers"]["status"] == "no new events"
    assert rows_of(spark, f"{namespace}.payments") == later.rows
    assert rows_of(spark, f"{namespace}.orders") == topics["orders"].rows
    assert "note" in spark.table(f"{namespace}.orders").columns
    assert "note" not in spark.table(f"{namespace}.stock").columns
    assert "note" not in spark.table(f"{namespace}.customers").columns
    assert {r.tableName for r in spark.sql(f"SHOW TABLES IN {namespace}").collect()} == {
        "orders", "customers", "stock", "payments"
    }  # fmt: skip


def test_names_from_a_template_and_chosen_tables(spark, tmp_path, namespace):
    root = tmp_path / "landing"
    three_topics(root)
    Topic(root, "pg.public.tmp_scratch").change("c", 1, 50, x=1).land()
    out = sync(
        root,
        tmp_path / "ck",
        namespace,
        **{
            "table-name": "{db}_{table}",
            "table-prefix": "ods_",
            "table-suffix": "_v1",
            "including-tables": "public[.].*|stock",
            "excluding-tables": "tmp_.*",
        },
    )
    assert {t: (r["table"], r["status"]) for t, r in out.items() if r["table"] or "ex" in
            r["status"]} == {
        "pg.public.orders": (f"{namespace}.ods_public_orders_v1", "ok"),
        "pg.public.customers": (f"{namespace}.ods_public_customers_v1", "ok"),
        "pg.inventory.stock": (f"{namespace}.ods_inventory_stock_v1", "ok"),
        "pg.public.tmp_scratch": (None, "excluded: matched by excluding-tables"),
    }  # fmt: skip
    assert spark.catalog.tableExists(f"{namespace}.ods_inventory_stock_v1")
    assert not spark.catalog.tableExists(f"{namespace}.ods_public_tmp_scratch_v1")


def test_bad_input_is_one_sentence_and_writes_nothing(spark, tmp_path, namespace):
    root = tmp_path / "landing"
    Topic(root, "pg.public.orders").change("c", 1, 10, name="a").land()
    Topic(root, "pg.sales.orders").change("c", 1, 10, name="b").land()
    with pytest.raises(IngestError) as caught:
        sync(root, tmp_path / "ck1", namespace)
    assert str(caught.value) == (
        f"Topics 'pg.public.orders' and 'pg.sales.orders' would both land in {namespace}.orders: "
        "give option table-name a template that tells them apart, such as '{db}_{table}', or "
        "exclude one with excluding-tables; nothing was ingested."
    )
    with pytest.raises(IngestError) as caught:
        sync(root, tmp_path / "ck2", namespace, **{"table-name": "{db}.{table}"})
    assert str(caught.value) == (
        "Topic 'pg.public.orders' would land in table 'public.orders', which is not a plain "
        "table name (letters, digits and _ only): change option table-name, table-prefix or "
        "table-suffix, or exclude the table with excluding-tables; nothing was ingested."
    )
    with pytest.raises(OptionError, match=r"^Option 'table-name' of sparkext.ingest_cdc_datab"):
        sync(root, tmp_path / "ck3", namespace, **{"table-name": "{tabel}"})
    with pytest.raises(IngestError) as caught:
        sync(root, tmp_path / "ck4", "lake.no_such_namespace")
    assert str(caught.value) == (
        "Namespace 'lake.no_such_namespace' does not exist: create it (CREATE NAMESPACE "
        "lake.no_such_namespace) or name an existing one, such as 'lake.db'; nothing was "
        "ingested."
    )
    (tmp_path / "empty" / "topics").mkdir(parents=True)
    with pytest.raises(IngestError) as caught:
        sync(tmp_path / "empty", tmp_path / "ck5", namespace)
    assert str(caught.value) == (
        f"Source '{tmp_path / 'empty'}' holds no topic directory: point it at a Kafka Connect "
        "sink's directory (<root>/topics/<topic>/... or <root>/<topic>/...); nothing was "
        "ingested."
    )
    keyless = tmp_path / "keyless" / "topics" / "pg.public.notes" / "partition=0"
    keyless.mkdir(parents=True)
    line = json.loads(Topic(root, "pg.public.notes").change("c", 1, 10, x=1).pending[0])["value"]
    (keyless / "pg.public.notes+0+0000000000.json").write_text(json.dumps(line) + "\n")
    with pytest.raises(IngestError) as caught:
        sync(tmp_path / "keyless", tmp_path / "ck6", namespace)
    assert str(caught.value) == (
        f"Topic 'pg.public.notes' carries no Debezium key, so {namespace}.notes cannot be "
        "created: pass options => map('primary-key', 'id') for every table, or "
        "'primary-key.notes' for this one (comma-separated for several columns); nothing of "
        "batch 0 was written to it."
    )
    assert spark.sql(f"SHOW TABLES IN {namespace}").count() == 0
    assert sync(tmp_path / "keyless", tmp_path / "ck7", namespace, **{"primary-key.notes": "id"})[
        "pg.public.notes"
    ]["created"]


CRASH_SCRIPT = CHILD_PREAMBLE + textwrap.dedent(
    """
    import sys, sparkext
    spark = sparkext.session(master="local[1]", warehouse=sys.argv[1])
    sparkext.sql(
        f"CALL sparkext.ingest_cdc_database(namespace => '{sys.argv[2]}', "
        f"source => '{sys.argv[3]}', checkpoint => '{sys.argv[4]}')"
    )
    """
)


@pytest.mark.stress
def test_crash_between_two_tables_commits_neither_loses_nor_doubles(
    spark, tmp_path, warehouse, namespace
):
    """A real process killed right after the first table's commit of a batch (before the other
    tables' and before Spark committed the batch): the rerun replays the batch, the committed
    table skips it, the others apply it."""
    root, ck = tmp_path / "landing", tmp_path / "ck"
    topics = three_topics(root)
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    child = subprocess.run(
        [
            sys.executable,
            str(script),
            str(warehouse),
            namespace,
            str(root),
            str(ck),
            "after-commit",
        ],
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == CRASH_EXIT, child.stderr[-2000:]
    committed = {}
    for name in topics:  # a table is created with its first commit
        exists = spark.catalog.tableExists(f"{namespace}.{name}")
        if exists:
            spark.catalog.refreshTable(f"{namespace}.{name}")
        committed[name] = snapshots(spark, f"{namespace}.{name}") if exists else 0
    assert sorted(committed.values()) == [0, 0, 1], committed  # one table, then the crash
    out = sync(root, ck, namespace)
    for name, topic in topics.items():
        row = out[topic.topic]
        assert row["batches_replayed"] == committed[name], (name, row)
        assert row["commits"] == 1 - committed[name], (name, row)
        assert snapshots(spark, f"{namespace}.{name}") == 1, name  # the batch, once
        assert rows_of(spark, f"{namespace}.{name}") == topic.rows, name


def test_python_stream_processes_two_batches(spark, tmp_path, namespace):
    root = tmp_path / "landing"
    orders = Topic(root, "pg.public.orders").change("c", 1, 10, name="a").land()
    query = sparkext.ingest_cdc_database_stream(
        namespace, str(root), str(tmp_path / "ck"), interval="1 second"
    )
    try:
        query.processAllAvailable()
        orders.change("u", 1, 11, name="a2").land()
        users = Topic(root, "pg.public.users").change("c", 5, 12, name="u").land()
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows_of(spark, f"{namespace}.orders") == orders.rows
    assert rows_of(spark, f"{namespace}.users") == users.rows
    assert snapshots(spark, f"{namespace}.orders") == 2


# name, PostgreSQL type, kind: the real-connector test's columns (the key is id)
REAL_TABLES = {
    "customers": [("name", "text", "text"), ("vip", "boolean", "bool")],
    "orders": [("customer_id", "integer", "text"), ("amount", "numeric(10,2)", "dec")],
    "payments": [("paid", "numeric(12,3)", "dec"), ("note", "text", "text")],
}


def _same(kind: str, pg, lake) -> bool:
    from decimal import Decimal

    if pg is None or lake is None:
        return pg is None and lake is None
    if kind == "dec":
        return Decimal(str(pg)) == Decimal(str(lake))
    if kind == "bool":
        return str(pg).lower()[0] == str(lake).lower()[0]
    return str(pg) == str(lake)


def _pg_rows(server, database: str, table: str) -> dict:
    columns = REAL_TABLES[table]
    pairs = ", ".join(["'id', id"] + [f"'{n}', {n}::text" for n, _, _ in columns])
    out = server.psql(f"SELECT json_agg(json_build_object({pairs})) FROM {table}", database)
    return {(str(r["id"]),): r for r in json.loads(out) or []}


@pytest.mark.stress
def test_real_connector_database_lands_table_by_table(spark, postgres_server, tmp_path, namespace):
    """The real Debezium PostgreSQL connector (heartbeats and transaction metadata on) over a
    whole schema, one landing root: the tables of the snapshot, then one created while the
    connector runs, each held against PostgreSQL's own rows."""
    reason = debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    db = "dbsync"
    postgres_server.psql(f"CREATE DATABASE {db}")
    postgres_server.psql(
        """
        CREATE TABLE customers (id integer PRIMARY KEY, name text, vip boolean);
        CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount numeric(10,2));
        INSERT INTO customers SELECT g, 'c' || g, g % 3 = 0 FROM generate_series(1, 20) g;
        INSERT INTO orders SELECT g, g % 20 + 1, g * 1.25 FROM generate_series(1, 50) g;
        """,
        db,
    )
    config = debezium.postgres_config(
        postgres_server, db, "dbsync", r"public\..*",
        **{"publication.autocreate.mode": "all_tables", "heartbeat.interval.ms": "300",
           "provide.transaction.metadata": "true", "sparkext.land-keys": "true"},
    )  # fmt: skip
    root, ck = tmp_path / "landing", tmp_path / "ck"
    connector = debezium.Connector(config, root).start()
    try:
        connector.wait_for_topic("pg.public.orders", 50)  # the snapshot
        postgres_server.psql(
            """
            UPDATE orders SET amount = amount + 1 WHERE id <= 10;
            DELETE FROM orders WHERE id > 45;
            UPDATE customers SET vip = NOT vip WHERE id % 4 = 0;
            CREATE TABLE payments (id integer PRIMARY KEY, paid numeric(12,3), note text);
            INSERT INTO payments SELECT g, g / 8.0, 'p' || g FROM generate_series(1, 15) g;
            UPDATE payments SET note = NULL WHERE id = 3;
            """,
            db,
        )
        connector.wait_for_topic("pg.public.payments", 16)
        connector.settle(quiet=1.5)
    finally:
        connector.stop()
    second = sync(root, ck, namespace)
    assert all(second[f"pg.public.{t}"]["created"] for t in REAL_TABLES), second
    assert second["pg.transaction"]["status"] == "ignored: Debezium transaction-metadata topic"
    assert second["__debezium-heartbeat.pg"]["status"] == "ignored: Debezium heartbeat topic"
    assert all(r["rejected"] == 0 for r in second.values()), second
    problems = []
    for table, columns in REAL_TABLES.items():
        spec = [(n, t, "", k) for n, t, k in columns]
        lake = real_rows.lake_rows(
            spark, f"{namespace}.{table}", "id", spec, lambda n, k: f"cast(`{n}` AS string)"
        )
        problems += real_rows.mismatches(
            _pg_rows(postgres_server, db, table), lake, spec, _same, "PostgreSQL"
        )
    assert not problems, "\n".join(problems[:40])

    # the root's heartbeat topic counts as the connector's progress for every table, the quiet
    # ones too: each is complete through a heartbeat newer than its own last change
    for table in REAL_TABLES:
        (lag,) = sparkext.sql(
            f"SELECT * FROM sparkext.cdc_lag(table => '{namespace}.{table}')"
        ).collect()
        assert lag["heartbeat_time"] is not None and lag["heartbeat_time"] > lag["source_time"]
        assert lag["complete_through"] == lag["heartbeat_time"], (table, lag)
