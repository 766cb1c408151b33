"""Names that need quoting, end to end: a dotted, a backticked and a reserved column name, a
namespace and a table name with a space and a dash, through every procedure."""

from __future__ import annotations

import datetime as dt

import sparkext
from tests.helpers import cdc_calls
from tests.helpers.cdc_calls import binlog_event, land

NAMESPACE = "lake.`odd ns`"
TABLE = f"{NAMESPACE}.`my-table`"
TARGET = f"{NAMESPACE}.`daily-t`"
KEY, DOTTED, TICKED, RESERVED = "k.id", "a.b", "we`ird", "select"
UTC = dt.timezone.utc


def change(op: str, key: int, pos: int, value: str | None) -> dict:
    def row(v):
        return {KEY: key, DOTTED: v, TICKED: pos, RESERVED: f"s{key}"}

    return binlog_event(
        op, None if op == "c" else row("old"), None if op == "d" else row(value), pos
    )


def ingest(landing, checkpoint) -> dict:
    return cdc_calls.ingest(TABLE, landing, checkpoint, options="'key-cache-batches', '1'", key=KEY)


def rows(frame) -> dict[int, tuple]:
    return {r[KEY]: (r[DOTTED], r[TICKED], r[RESERVED]) for r in frame.collect()}


def at(pos: int) -> str:
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=pos)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def test_odd_column_and_table_names_through_every_procedure(spark, tmp_path):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    spark.sql(f"DROP TABLE IF EXISTS {TARGET}")
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", [change("c", k, 10 + k, f"v{k}") for k in range(1, 6)])
    ingest(landing, checkpoint)
    land(landing, "2.json", [change("u", 1, 20, "new"), change("d", 2, 21, None)])
    ingest(landing, checkpoint)
    land(landing, "3.json", [change("c", 9, 30, "z")])
    ingest(landing, checkpoint)  # pushes batch 2 out of the key cache
    # late: older than the table's newest position, so looked up in the table and event logs
    land(landing, "4.json", [change("u", 3, 5, "late"), change("u", 2, 19, "deleted later")])
    fourth = ingest(landing, checkpoint)
    assert (fourth["late"], fourth["lookups"]) == (2, 2)
    current = {
        1: ("new", 20, "s1"),
        3: ("v3", 13, "s3"),
        4: ("v4", 14, "s4"),
        5: ("v5", 15, "s5"),
        9: ("z", 30, "s9"),
    }
    assert rows(spark.table(TABLE)) == current

    health = sparkext.sql(f"CALL sparkext.table_health(table => '{TABLE}')").first()
    assert health.equality_delete_files >= 1
    function = sparkext.sql(f"SELECT * FROM sparkext.table_health('{TABLE}')").first()
    assert function.equality_delete_files == health.equality_delete_files

    converted = sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{TABLE}')")
    assert converted.first().equality_delete_files_remaining == 0
    assert rows(spark.table(TABLE)) == current

    as_of = sparkext.sql(
        f"SELECT * FROM sparkext.snapshot_as_of_event_time('{TABLE}', TIMESTAMP '{at(15)}')"
    )
    assert rows(as_of) == {k: (f"v{k}", 10 + k, f"s{k}") for k in range(1, 6)}
    written = sparkext.sql(
        f"CALL sparkext.snapshot_as_of_event_time(table => '{TABLE}', "
        f"as_of => TIMESTAMP '{at(20)}', target => '{TARGET}')"
    ).first()
    assert written.rows_written == 5
    assert rows(spark.table(TARGET).drop("dt")) == {
        1: ("new", 20, "s1"),
        2: ("deleted later", 19, "s2"),  # the late update, before the delete in event time
        **{k: (f"v{k}", 10 + k, f"s{k}") for k in range(3, 6)},
    }


def test_append_only_event_time_column_with_odd_names(spark):
    table = f"{NAMESPACE}.`append-only`"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id bigint, `e``t` timestamp, `a.b` string) USING iceberg")
    base = dt.datetime(2026, 11, 20, tzinfo=UTC)
    data = [(i, base + dt.timedelta(hours=i * 5), f"v{i}") for i in range(12)]
    spark.createDataFrame(data, "id bigint, `e``t` timestamp, `a.b` string").writeTo(table).append()
    found = sparkext.sql(
        f"SELECT id, `a.b` FROM sparkext.snapshot_as_of_event_time('{table}', "
        "TIMESTAMP '2026-11-21 06:00:00', 'e`t')"
    )
    t0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    assert sorted(r.id for r in found.collect()) == sorted(i for i, ts, _ in data if ts <= t0)
