"""``bootstrap_cdc`` against the real thing: a real PostgreSQL server, a writer changing rows while
the copy runs, then the real Debezium connector streaming from the slot the bootstrap made
(``snapshot.mode=no_data``), ingest_cdc applying what landed, and the lake table held against
**PostgreSQL's own rows** (the per-type comparison of tests/spark/test_cdc_real_postgres.py).

The dump test: a connector streams from before the dump; the dump (Parquet) and the position
it was taken at; every event at or before it is skipped and counted, every later one applied.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from tests.helpers import debezium, real_rows
from tests.spark.test_cdc_real_postgres import lake_canonical, pg_canonical, same

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# name, PostgreSQL type, value of row g (SQL), kind (how both sides are compared)
COLUMNS = [
    ("qty", "integer", "g", "int"),
    ("big", "bigint", "g * 10000000000", "int"),
    ("price", "numeric(10,2)", "g * 1.25", "dec"),
    ("ratio", "numeric", "round(g / 7.0, 8)", "dec"),
    ("dbl", "double precision", "g / 3.0", "float"),
    ("flag", "boolean", "g % 2 = 0", "bool"),
    ("name", "varchar(40)", "'name-' || g", "text"),
    ("code", "char(6)", "'c' || g % 10000", "text"),
    ("uid", "uuid", "md5(g::text)::uuid", "text"),
    ("doc", "jsonb", "jsonb_build_object('g', g)", "json"),
    ("blob", "bytea", "decode(md5(g::text), 'hex')", "hex"),
    ("tags", "text[]", "ARRAY['t' || g, 'u']", "list"),
    ("nums", "integer[]", "ARRAY[g, g + 1]", "list"),
    ("ts", "timestamp", "timestamp '2026-01-01 10:00:00.123456' + g * interval '1 hour'", "ntz"),
    ("tstz", "timestamptz", "timestamptz '2026-03-29 00:30:00+00' + g * interval '61 min'",
     "instant"),
    ("day", "date", "date '1999-12-31' + g", "days"),
    ("tod", "time", "time '10:00:01.5' + g * interval '1 minute'", "micros"),
    ("span", "interval", "g * interval '1 day 2 hours 3.5 seconds'", "micros"),
]  # fmt: skip
LAKE_TYPES = {
    "id": "int", "qty": "int", "big": "bigint", "price": "decimal(10,2)",
    "ratio": "decimal(38,10)", "dbl": "double", "flag": "boolean", "name": "string",
    "code": "string", "uid": "string", "doc": "string", "blob": "binary",
    "tags": "array<string>", "nums": "array<int>", "ts": "timestamp_ntz", "tstz": "timestamp",
    "day": "date", "tod": "bigint", "span": "bigint",
}  # fmt: skip
VALUES = ", ".join(v for _, _, v, _ in COLUMNS)


@pytest.fixture(scope="module")
def db(postgres_server):
    reason = debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    postgres_server.psql("CREATE DATABASE boot")
    return postgres_server


def _create(server, table: str, rows: int) -> None:
    ddl = ", ".join(f"{n} {t}" for n, t, _, _ in COLUMNS)
    server.psql(
        f"CREATE TABLE {table} (id integer PRIMARY KEY, {ddl});"
        f"INSERT INTO {table} SELECT g, {VALUES} FROM generate_series(1, {rows}) g;",
        "boot",
    )


def _change(server, table: str, rng: random.Random, top: int) -> int:
    """One transaction of a few updates, an insert and a delete; the new highest id."""
    a, b, c = rng.randint(1, top), rng.randint(1, top), rng.randint(1, top)
    top += 1
    server.psql(
        f"BEGIN; UPDATE {table} SET qty = qty + 1, name = 'w' || qty, doc = doc || '{{\"w\": 1}}',"
        f" tags = tags || 'w'::text WHERE id IN ({a}, {b});"
        f"INSERT INTO {table} SELECT g, {VALUES} FROM generate_series({top}, {top}) g;"
        f"DELETE FROM {table} WHERE id = {c}; COMMIT;",
        "boot",
    )
    return top


class Writer(threading.Thread):
    """Changes rows, one small transaction after another, until stopped."""

    def __init__(self, server, table: str, top: int, most: int):
        super().__init__(daemon=True)
        self.server, self.table, self.top, self.most = server, table, top, most
        self.done, self.transactions, self.error = threading.Event(), 0, None

    def run(self) -> None:
        rng = random.Random(52)
        try:
            while not self.done.is_set() and self.transactions < self.most:
                self.top = _change(self.server, self.table, rng, self.top)
                self.transactions += 1
        except Exception as error:  # read by the test
            self.error = error

    def stop(self) -> None:
        self.done.set()
        self.join(60)
        assert self.error is None, self.error


def _pg_rows(server, table: str) -> dict:
    import json

    exprs = ", ".join(["'id', id"] + [f"'{n}', {pg_canonical(n, k)}" for n, _, _, k in COLUMNS])
    out = server.psql(
        f"SELECT json_agg(json_build_object({exprs}) ORDER BY id) FROM {table}", "boot"
    )
    return {(str(r["id"]),): r for r in json.loads(out) or []}


def _differences(spark, server, source: str, lake: str) -> list[str]:
    return real_rows.mismatches(
        _pg_rows(server, source),
        real_rows.lake_rows(spark, lake, "id", COLUMNS, lake_canonical),
        COLUMNS,
        same,
        "PostgreSQL",
    )


def _ingest(table: str, source, checkpoint) -> dict:
    import sparkext

    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{source}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id')"
        )
        .first()
        .asDict()
    )


def _connector(server, slot: str, table: str, out, **extra) -> debezium.Connector:
    config = debezium.postgres_config(server, "boot", slot, rf"public\.{table}", **extra)
    return debezium.Connector(config, out)


def _bootstrap(spark, server, table: str, lake: str, slot: str, on_point=None, segments=4):
    from sparkext.actions.cdc.bootstrap import Settings, bootstrap_postgres
    from sparkext.iceberg.jdbc import Pool

    url = server.url.replace("/iceberg", "/boot")
    properties = {"user": "sparkext"}
    pool = Pool(spark, url, properties, 2)
    try:
        return bootstrap_postgres(
            spark,
            Settings(lake, f"public.{table}", segments, slot, f"pub_{slot}"),
            url,
            properties,
            pool,
            on_point=on_point,
        )
    finally:
        pool.close()


def test_bootstrap_while_writing_then_the_slot_streams(spark, db, tmp_path):
    """The copy is the exported snapshot (a change committed right after the slot was made is
    not in it), rows change all through the copy, the connector streams from the slot
    afterwards: the lake equals PostgreSQL, column by column, with ingest_cdc's types."""
    _while_writing(spark, db, tmp_path, "items", 2000, segments=4, transactions=200)


@pytest.mark.stress
def test_bootstrap_while_writing_at_size(spark, db, tmp_path):
    """The same at 100k rows, 16 ranges, up to 3000 writer transactions during the copy."""
    _while_writing(spark, db, tmp_path, "items_big", 100_000, segments=16, transactions=3000)


def _while_writing(spark, db, tmp_path, table: str, rows: int, segments: int, transactions: int):
    lake, slot = f"lake.test.boot_{table}", f"slot_{table}"
    _create(db, table, rows)
    writer = Writer(db, table, rows, transactions)

    def at_point() -> None:  # committed after the point: must come by the slot, not the copy
        db.psql(f"UPDATE {table} SET qty = qty + 1000000 WHERE id <= 50", "boot")
        writer.start()

    result = _bootstrap(spark, db, table, lake, slot, at_point, segments)
    copied = spark.table(lake)
    assert copied.where("id <= 50 AND qty >= 1000000").count() == 0  # the snapshot, not now
    assert result.rows == copied.count() and result.segments == segments
    time.sleep(1.0)
    writer.stop()
    assert writer.transactions > 0

    connector = _connector(
        db, slot, table, tmp_path / "landing",
        **{"snapshot.mode": "no_data", "publication.autocreate.mode": "disabled"},
    ).start()  # fmt: skip
    try:
        # the update at the point (50 rows) and every writer transaction (an insert at least)
        connector.wait_for(50 + writer.transactions, timeout=90 + writer.transactions / 20)
        connector.settle(quiet=1.5)
    finally:
        connector.stop()
    applied = _ingest(lake, connector.topic(f"pg.public.{table}"), tmp_path / "ck")
    assert applied["rejected"] == 0, applied
    assert {c: t for c, t in spark.table(lake).dtypes if c in LAKE_TYPES} == LAKE_TYPES
    problems = _differences(spark, db, table, lake)
    assert not problems, "\n".join(problems[:30])


def test_dump_then_the_events_after_its_position(spark, db, tmp_path):
    """A connector streams from before the dump; the dump is taken at a known LSN: the events
    at or before it are counted late (or duplicate), those after are applied."""
    _create(db, "dumped", 200)
    connector = _connector(db, "early", "dumped", tmp_path / "landing").start()
    try:
        connector.wait_for(200)  # its own snapshot of the 200 rows: all before the dump
        rng = random.Random(7)
        top = 200
        for _ in range(5):
            top = _change(db, "dumped", rng, top)
        before = connector.settle(quiet=1.5)
        # the dump, taken while nothing writes, and the position it was taken at
        lsn = db.psql("SELECT pg_current_wal_lsn()", "boot").strip()
        dump = tmp_path / "dump.parquet"
        _dump(spark, db, "dumped", str(dump))
        for _ in range(5):
            top = _change(db, "dumped", rng, top)
        after = connector.settle(quiet=1.5) - before
        assert after >= 5
    finally:
        connector.stop()
    import sparkext

    row = sparkext.sql(
        f"CALL sparkext.bootstrap_cdc(table => 'lake.test.boot_dumped', source => "
        f"'parquet:{dump}', options => map('position', '{lsn}', 'primary-key', 'id'))"
    ).first()
    assert row.consistent_point == lsn and row.rows == spark.read.parquet(str(dump)).count()
    applied = _ingest("lake.test.boot_dumped", connector.topic("pg.public.dumped"), tmp_path / "c")
    assert applied["rejected"] == 0, applied
    # every event before the dump skipped and counted; at most the later ones applied
    assert applied["late"] + applied["duplicates"] >= 200, applied
    assert applied["inserted"] + applied["updated"] + applied["deleted"] <= after, applied
    problems = _differences(spark, db, "dumped", "lake.test.boot_dumped")
    assert not problems, "\n".join(problems[:30])


def _count(server, table: str) -> int:
    return int(server.psql(f"SELECT count(*) FROM {table}", "boot"))


def _dump(spark, server, table: str, path: str) -> None:
    """The table as a dump tool would write it: Spark's JDBC reader, typed as the lake is."""
    from sparkext.actions.cdc.bootstrap import _converted
    from sparkext.planning.bootstrap import column_plan, select_sql

    columns = [column_plan("id", "integer")] + [column_plan(n, t) for n, t, _, _ in COLUMNS]
    frame = spark.read.jdbc(
        server.url.replace("/iceberg", "/boot"),
        select_sql(f"public.{table}", columns),
        properties={"user": "sparkext", "driver": "org.postgresql.Driver"},
    )
    _converted(frame, columns).write.parquet(path)


@pytest.mark.parametrize(
    "case",
    [
        "not empty",
        "no key",
        "slot exists",
        "publication elsewhere",
        "bad position",
        "dump without key",
        "mysql",
    ],
)
def test_bad_input_is_one_sentence(spark, db, case, tmp_path):
    import sparkext
    from sparkext.errors import SparkextError

    url = db.url.replace("/iceberg", "/boot")
    table, options = f"lake.test.boot_bad_{case.replace(' ', '_')}", "'user', 'sparkext'"
    source = url
    db.psql(
        "CREATE TABLE IF NOT EXISTS bad (id integer PRIMARY KEY, v text);"
        "CREATE TABLE IF NOT EXISTS keyless (v text);",
        "boot",
    )
    expected = {
        "not empty": "already holds rows",
        "no key": "has no primary key",
        "slot exists": "already exists",
        "publication elsewhere": "does not publish public.bad",
        "bad position": "is not a source position",
        "dump without key": "needs the primary key",
        "mysql": "map\\('source-table', 'database.table'\\)",  # checked before connecting
    }[case]
    if case == "not empty":
        spark.sql(f"CREATE TABLE {table} (id int) USING iceberg")
        spark.sql(f"INSERT INTO {table} VALUES (1)")
        options += ", 'source-table', 'public.bad'"
    elif case == "no key":
        options += ", 'source-table', 'public.keyless'"
    elif case == "slot exists":
        db.psql("SELECT pg_create_logical_replication_slot('taken', 'pgoutput')", "boot")
        options += ", 'source-table', 'public.bad', 'slot', 'taken'"
    elif case == "publication elsewhere":
        db.psql("CREATE PUBLICATION elsewhere FOR TABLE keyless", "boot")
        options += ", 'source-table', 'public.bad', 'publication', 'elsewhere', 'slot', 'unused'"
    elif case in ("bad position", "dump without key"):
        spark.range(3).write.parquet(str(tmp_path / "d"))
        source = f"parquet:{tmp_path / 'd'}"
        options = "'position', 'yesterday'" if case == "bad position" else "'position', '0/16'"
    else:
        source = "jdbc:mysql://127.0.0.1:1/x"
    call = f"CALL sparkext.bootstrap_cdc(table => '{table}', source => '{source}', "
    with pytest.raises(SparkextError, match=expected) as raised:
        sparkext.sql(call + f"options => map({options}))").collect()
    message = str(raised.value)
    assert message.count(". ") == 0 and message.endswith("."), message
    if case == "slot exists":
        db.psql("SELECT pg_drop_replication_slot('taken')", "boot")
    if case == "not empty":
        assert spark.table(table).count() == 1  # untouched
    else:
        assert not spark.catalog.tableExists(table)
    slots = db.psql("SELECT slot_name FROM pg_replication_slots ORDER BY 1", "boot").split()
    assert "unused" not in slots and "taken" not in slots


def test_wal_level_not_logical_is_refused(spark, tmp_path):
    import sparkext
    from sparkext.errors import SparkextError
    from tests.helpers import postgres

    if postgres.unavailable():
        pytest.skip(postgres.unavailable())
    server = postgres.start(logical=False)
    try:
        server.psql("CREATE TABLE t (id integer PRIMARY KEY)")
        with pytest.raises(SparkextError, match="wal_level is 'replica', not 'logical'"):
            sparkext.sql(
                f"CALL sparkext.bootstrap_cdc(table => 'lake.test.boot_wal', source => "
                f"'{server.url}', options => map('user', 'sparkext', 'source-table', 't'))"
            ).collect()
    finally:
        server.stop()
    assert not spark.catalog.tableExists("lake.test.boot_wal")


def test_a_failed_copy_drops_its_slot_and_commits_nothing(spark, db):
    """The slot would hold WAL back for a copy that never landed: it goes again."""
    db.psql("CREATE TABLE failing (id integer PRIMARY KEY, v text)", "boot")

    def fail() -> None:
        raise RuntimeError("the copy broke")

    with pytest.raises(RuntimeError, match="the copy broke"):
        _bootstrap(spark, db, "failing", "lake.test.boot_failing", "doomed", fail)
    slots = db.psql("SELECT slot_name FROM pg_replication_slots", "boot").split()
    assert "doomed" not in slots
    assert not spark.catalog.tableExists("lake.test.boot_failing")
