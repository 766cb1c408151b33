"""``CALL sparkext.reconcile`` against a real PostgreSQL whose table the real Debezium connector
streams into the lake through ``ingest_cdc``.

The oracle is the database and the faults injected: rows the lake lost, kept, duplicated or
holds stale (made in the lake directly, as lost or doubled change events would leave it). First
with the source idle: every fault found, and each reported unconfirmed (nothing shows the lake
has reached the source's position). Then while the source keeps changing other rows and
ingest_cdc keeps applying them (the stress tier): the same faults found and confirmed, and no
false report for any row that changed during the check.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

import sparkext
from tests.helpers import debezium
from tests.helpers.live import Repeating

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_databases = iter(range(1, 1000))


@pytest.fixture
def source(postgres_server):
    """A database of its own per test (``recon<n>``), one table ``accounts`` of 3,000 rows."""
    reason = debezium.unavailable()
    if reason is not None:
        pytest.skip(reason)
    name = f"recon{next(_databases)}"
    postgres_server.psql(f"CREATE DATABASE {name}")
    postgres_server.database = name
    postgres_server.psql(
        """
        CREATE TYPE tier AS ENUM ('free', 'pro');
        CREATE TABLE accounts (
          id integer PRIMARY KEY, name varchar(40), balance numeric(12,2), ratio numeric,
          score double precision, opened date, seen timestamptz, local timestamp, active boolean,
          tags text[], avatar bytea, plan tier, doc jsonb, hits bigint);
        INSERT INTO accounts SELECT g, 'user ' || g, g * 1.25, round(g / 7.0, 6), g / 3.0,
          date '2020-01-01' + g, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute',
          timestamp '2026-01-01 00:00:00.5' + g * interval '1 second', g % 2 = 0,
          ARRAY['t' || (g % 5)], decode(md5(g::text), 'hex'),
          (ARRAY['free', 'pro'])[g % 2 + 1]::tier, jsonb_build_object('g', g), g * 1000
          FROM generate_series(1, 3000) g;
        """,
        name,
    )
    return postgres_server


def _ingest(table, landing, checkpoint, options: str = "") -> dict:
    return (
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true"
            f"{', options => map(' + options + ')' if options else ''})"
        )
        .first()
        .asDict()
    )


def _reconcile(table, server, **options) -> dict:
    given = {"source-table": "public.accounts", "segments": "8", "leaf-rows": "200", **options}
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in given.items())
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/{server.database}"
    row = sparkext.sql(
        f"CALL sparkext.reconcile(table => '{table}', source => '{url}', "
        f"options => map('user', 'sparkext', {pairs}))"
    ).first()
    return row.asDict(recursive=True)


def _found(result: dict) -> dict[int, tuple[str, str, bool]]:
    return {
        json.loads(d["key"])["id"]: (
            d["kind"],
            d["columns"],
            d["confirmed"],
        )
        for d in result["differences"]
    }


def _faulty_lake(spark, source, tmp_path, table, **extra: str):
    """The source streamed into ``table``, checked equal, then the faults made in the lake: a
    lost insert, a lost delete, a stale update, a duplicated row. The connector, still running."""
    connector = debezium.Connector(
        debezium.postgres_config(
            source, source.database, source.database, r"public\.accounts", **extra
        ),
        tmp_path / "landing",
    ).start()
    landing = connector.topic("pg.public.accounts")
    connector.wait_for(3000)
    connector.settle()
    assert _ingest(table, landing, tmp_path / "ck")["rejected"] == 0
    _make_faults(spark, source, table)
    return connector, landing


def _bootstrapped_faulty_lake(spark, source, table: str) -> None:
    """The same lake and faults, copied by bootstrap_cdc (no connector: the default tier)."""
    url = f"jdbc:postgresql://127.0.0.1:{source.port}/{source.database}"
    slot = f"recon_{source.database}"
    sparkext.sql(
        f"CALL sparkext.bootstrap_cdc(table => '{table}', source => '{url}', options => "
        f"map('source-table', 'public.accounts', 'user', 'sparkext', 'slot', '{slot}', "
        f"'publication', 'pub_{source.database}', 'segments', '4'))"
    ).collect()
    source.psql(f"SELECT pg_drop_replication_slot('{slot}')")  # nothing streams from it
    _make_faults(spark, source, table)


def _make_faults(spark, source, table: str) -> None:
    """Checked equal, then the faults made in the lake: a lost insert, a lost delete, a stale
    update, a duplicated row."""
    clean = _reconcile(table, source)
    assert clean["equal"], clean
    assert (clean["source_rows"], clean["lake_rows"], clean["not_compared"]) == (3000, 3000, "")
    assert clean["compared_columns"].split(",") == [
        "name", "balance", "ratio", "score", "opened", "seen", "local", "active", "tags",
        "avatar", "plan", "doc", "hits",
    ]  # fmt: skip
    spark.sql(f"DELETE FROM {table} WHERE id = 17")
    spark.sql(f"UPDATE {table} SET balance = balance + 0.01 WHERE id = 250")
    spark.sql(
        f"INSERT INTO {table} SELECT 5000 AS id, name, balance, ratio, score, opened, seen, "
        f"local, active, tags, avatar, plan, doc, hits, _cdc_op, _cdc_event_time, "
        f"_cdc_position FROM {table} WHERE id = 3"
    )
    spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE id = 400")


FAULTS = {
    17: ("missing", ""),
    250: ("stale", "balance"),
    5000: ("extra", ""),
    400: ("duplicate", ""),
}


def test_reconcile_finds_every_fault_of_an_idle_source(spark, source):
    """A copy at a slot's point (bootstrap_cdc), then the faults: every one found, and each
    unconfirmed (nothing shows the lake has reached the source's position since)."""
    table = "lake.test.reconciled_idle"
    _bootstrapped_faulty_lake(spark, source, table)
    idle = _reconcile(table, source, **{"catch-up-timeout": "2 seconds", "rounds": "1"})
    _assert_idle(idle)


@pytest.mark.stress
def test_reconcile_finds_every_fault_of_a_streamed_idle_source(spark, source, tmp_path):
    """The same, the lake streamed by the real connector through ingest_cdc."""
    table = "lake.test.reconciled_idle_streamed"
    connector, _ = _faulty_lake(spark, source, tmp_path, table)
    try:
        idle = _reconcile(table, source, **{"catch-up-timeout": "2 seconds", "rounds": "1"})
    finally:
        connector.stop()
    _assert_idle(idle)


def _assert_idle(idle: dict) -> None:
    assert not idle["equal"]
    assert _found(idle) == {k: (*v, False) for k, v in FAULTS.items()}, idle
    assert (idle["missing"], idle["extra"], idle["stale"], idle["duplicate"]) == (1, 1, 1, 1)
    assert idle["unconfirmed"] == 4  # nothing shows the lake reached the source's position


@pytest.mark.stress
def test_heartbeats_confirm_every_fault_of_an_idle_source(spark, source, tmp_path):
    """The connector's heartbeats, confirmed by ingest_cdc runs that find no change, show that
    the idle lake holds every change the source committed before the recheck: the faults are
    confirmed, and cdc_lag says how fresh the lake is."""
    table = "lake.test.reconciled_beats"
    connector, landing = _faulty_lake(
        spark,
        source,
        tmp_path,
        table,
        **{"heartbeat.interval.ms": "300", "status.update.interval.ms": "300"},
    )
    try:
        beats = f"'heartbeat-source', '{connector.topic('__debezium-heartbeat.pg')}'"
        stop = threading.Event()

        def catch_up() -> None:
            while not stop.is_set():
                _ingest(table, landing, tmp_path / "ck", beats)
                time.sleep(0.5)

        runner = threading.Thread(target=catch_up)
        runner.start()
        try:
            again = _reconcile(table, source, **{"catch-up-timeout": "60 seconds", "rounds": "1"})
        finally:
            stop.set()
            runner.join()
    finally:
        connector.stop()
    assert _found(again) == {k: (*v, True) for k, v in FAULTS.items()}, again
    assert again["unconfirmed"] == 0
    (lag,) = sparkext.sql(f"SELECT * FROM sparkext.cdc_lag(table => '{table}')").collect()
    assert lag["heartbeat_time"] is not None and lag["heartbeat_time"] > lag["source_time"]
    assert lag["complete_through"] == lag["heartbeat_time"] and 0 <= lag["lag_ms"] < 60_000
    lsn = lag["source_position"].split()[1]  # 'LSN 0/1A2B3C4 (commit 0/1A2B3A0)'
    (behind,) = source.psql(f"SELECT pg_current_wal_lsn() >= '{lsn}'::pg_lsn").split()
    assert behind == "t"


@pytest.mark.stress
def test_reconcile_confirms_every_fault_and_no_false_alarm_under_live_writes(
    spark, source, tmp_path
):
    table = "lake.test.reconciled_live"
    connector, landing = _faulty_lake(spark, source, tmp_path, table)
    try:

        def write(step: int) -> None:
            low = 1000 + (step * 37) % 1900
            source.psql(
                f"UPDATE accounts SET hits = hits + 1, seen = now() WHERE id BETWEEN {low} "
                f"AND {low + 20}; INSERT INTO accounts (id, name) VALUES ({10000 + step}, "
                f"'new'); DELETE FROM accounts WHERE id = {10000 + step - 3};",
                source.database,
            )

        def ingest(step: int) -> None:
            _ingest(table, landing, tmp_path / "ck")

        # live: other rows change all along, and ingest_cdc keeps applying them
        with Repeating((write, 0.2), (ingest, 0.5)) as running:
            time.sleep(3)
            live = _reconcile(table, source, **{"catch-up-timeout": "90 seconds"})
        assert not running.errors, running.errors
        assert _found(live) == {k: (*v, True) for k, v in FAULTS.items()}, live
        assert live["unconfirmed"] == 0
    finally:
        connector.stop()


def test_bad_input_is_one_sentence_and_changes_nothing(spark, postgres_server, table_name):
    from sparkext.errors import ProcedureArgumentError, SourceDatabaseError

    spark.sql(f"CREATE TABLE {table_name} (id bigint NOT NULL, v string) USING iceberg")
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    snapshots = spark.table(f"{table_name}.snapshots").count()
    url = f"jdbc:postgresql://127.0.0.1:{postgres_server.port}/iceberg"

    def call(source: str, options: str) -> str:
        with pytest.raises(
            (ProcedureArgumentError, SourceDatabaseError, sparkext.errors.IngestError)
        ) as caught:
            sparkext.sql(
                f"CALL sparkext.reconcile(table => '{table_name}', source => '{source}', "
                f"options => map({options}))"
            )
        return str(caught.value)

    assert call(url, "'user', 'sparkext'") == (
        "reconcile needs the source table: add options => map('source-table', 'schema.table') "
        "(PostgreSQL) or 'database.table' (MySQL)."
    )
    assert call("jdbc:oracle:thin:@db:1521/x", "'source-table', 'a.b'").startswith(
        "source => 'jdbc:oracle:thin:@db:1521/x' is not a PostgreSQL, MySQL or MariaDB JDBC URL"
    )
    assert call("warehouse", "'source-table', 'a.b'").startswith(
        "source => 'warehouse' is neither a JDBC URL nor a named connection"
    )
    assert call(url, "'user', 'sparkext', 'source-table', 'public.nowhere'").startswith(
        "The source has no table public.nowhere"
    )
    closed = "jdbc:postgresql://127.0.0.1:1/x?password=secret"
    message = call(closed, "'source-table', 'public.t'")
    assert message.startswith("Could not connect to jdbc:postgresql://127.0.0.1:1/x?password=***")
    assert "secret" not in message
    assert spark.table(f"{table_name}.snapshots").count() == snapshots


CANONICAL_CASES = [  # family, PostgreSQL literal, Spark SQL literal of the lake value, its type
    ("float", "(1/7.0)::float8", "1/7D", "double"),
    ("float", "(10000000/7.0)::float8", "10000000/7D", "double"),
    ("float", "3.3333333333333334e-08::float8", "3.3333333333333334e-08D", "double"),
    ("float", "-2.5e-05::float8", "-2.5e-05D", "double"),
    ("float", "(1e20/3)::float8", "1e20D/3", "double"),
    ("float", "1.1::real", "CAST(1.1 AS FLOAT)", "float"),
    ("float", "3::float8", "3D", "double"),
    ("decimal", "0.0000000333::numeric", "CAST('0.0000000333' AS DECIMAL(38,10))",
     "decimal(38,10)"),
    ("decimal", "-12.50::numeric(10,2)", "CAST('-12.50' AS DECIMAL(10,2))", "decimal(10,2)"),
    ("decimal", "0::numeric", "CAST(0 AS DECIMAL(38,10))", "decimal(38,10)"),
    ("decimal", "3.5::money", "CAST(3.5 AS DECIMAL(38,2))", "decimal(38,2)"),
    ("ntz", "timestamp '1969-12-31 23:59:59.999999'",
     "TIMESTAMP_NTZ'1969-12-31 23:59:59.999999'", "timestamp_ntz"),
    ("instant", "timestamptz '1969-12-31 23:59:59.5+00'",
     "TIMESTAMP'1969-12-31 23:59:59.5+00:00'", "timestamp"),
    ("days", "date '1900-03-01'", "DATE'1900-03-01'", "date"),
    ("micros", "time '23:59:59.999999'", "86399999999L", "bigint"),
    # Debezium's MicroDuration counts a month as 365.25 / 12 days
    ("micros", "interval '1 month 2 days 03:04:05.5'", "2813645500000L", "bigint"),
    ("list", "ARRAY['a', 'b\"c']::text[]", "array('a', 'b\"c')", "array<string>"),
    ("hex", "'\\x00ff'::bytea", "X'00FF'", "binary"),
]  # fmt: skip


def test_canonical_texts_agree_between_postgres_and_spark(spark, postgres_server):
    """The texts reconcile hashes, for values at the edges of each family: equal on both sides
    (a disagreement would be a false 'stale' for every such row)."""
    from pyspark.sql import functions as F

    from sparkext.actions.cdc.canonical import SourceColumn, lake_column, source_sql

    kinds = {"interval": "interval", "time": "time without time zone", "real": "real"}
    for family, pg, lake, lake_type in CANONICAL_CASES:
        source_type = next((t for k, t in kinds.items() if k in pg), "text")
        sql = source_sql("postgres", family, pg, SourceColumn("x", source_type))
        ours = postgres_server.psql(f"SELECT {sql}").strip()
        theirs = (
            spark.range(1)
            .select(lake_column(family, F.expr(lake), lake_type).alias("x"))
            .first()["x"]
        )
        assert ours == theirs, (family, pg, ours, theirs)


def test_a_range_the_lake_lost_whole_is_found_key_by_key_or_counted(
    spark, postgres_server, table_name
):
    """The lake lost keys 1..1,500 of 2,000: too few lake keys there to cut the range at, so it
    is cut at the source's own key range; every lost key is listed. With max-keys below that,
    the ranges are counted instead and the result is not 'equal'."""
    postgres_server.psql(
        "DROP TABLE IF EXISTS lost; CREATE TABLE lost (id bigint PRIMARY KEY, v text);"
        "INSERT INTO lost SELECT g, 'v' || g FROM generate_series(1, 2000) g;"
    )
    spark.sql(f"CREATE TABLE {table_name} (id bigint NOT NULL, v string) USING iceberg")
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    spark.sql(f"INSERT INTO {table_name} SELECT id, concat('v', id) FROM range(1501, 2001)")

    def check(**options) -> dict:
        given = {"user": "sparkext", "source-table": "public.lost", "segments": "4",
                 "leaf-rows": "100", "catch-up-timeout": "1 second", "rounds": "1",
                 "max-report": "5000", **options}  # fmt: skip
        pairs = ", ".join(f"'{k}', '{v}'" for k, v in given.items())
        return (
            sparkext.sql(
                f"CALL sparkext.reconcile(table => '{table_name}', source => "
                f"'{postgres_server.url}', options => map({pairs}))"
            )
            .first()
            .asDict(recursive=True)
        )

    full = check()
    assert (full["missing"], full["extra"], full["stale"], full["ranges_not_listed"]) == (
        1500, 0, 0, 0,
    )  # fmt: skip
    assert sorted(json.loads(d["key"])["id"] for d in full["differences"]) == list(range(1, 1501))
    capped = check(**{"max-keys": "100"})
    assert not capped["equal"] and capped["ranges_not_listed"] > 0
    assert capped["missing"] <= 100
