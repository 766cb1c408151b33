"""sparkext.dim_join_changelog in batch: hand-worked rows, both modes, both dimension kinds."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

import sparkext
from sparkext.errors import ProcedureArgumentError
from tests.helpers.dim_events import ingest_batches, timed_event

DAY = "2026-11-21"
_ids = itertools.count(1)


def _event(op, key, qty, clock, position):
    return timed_event(op, key, qty, DAY, clock, position)


def _ingest(tmp_path, table, batches):
    ingest_batches(tmp_path, table, batches)


def _t(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"{DAY} {clock}")


@pytest.fixture(scope="module")
def cdc_tables(spark, tmp_path_factory):
    """customers (ingest_cdc) and orders, as in the streaming temporal-join test."""
    suffix = next(_ids)
    customers, orders = f"lake.test.dimc_{suffix}", f"lake.test.dimo_{suffix}"
    _ingest(
        tmp_path_factory.mktemp("dim"),
        customers,
        [
            [_event("c", 1, 10, "10:00:00", 100), _event("c", 2, 15, "10:00:00", 500),
             _event("u", 1, 30, "10:30:00", 200)],
            # a late update of key 1 (position 150, 10:20) and a delete of key 2 at 10:40
            [_event("u", 1, 20, "10:20:00", 150), _event("d", 2, 40, "10:40:00", 600)],
        ],
    )  # fmt: skip
    spark.sql(
        f"CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT) "
        "USING iceberg"
    )
    spark.sql(
        f"INSERT INTO {orders} VALUES (1, TIMESTAMP '{DAY} 10:10:00', 1), "
        f"(2, TIMESTAMP '{DAY} 10:25:00', 1), (3, TIMESTAMP '{DAY} 10:35:00', 1), "
        f"(4, TIMESTAMP '{DAY} 10:35:00', 2), (5, TIMESTAMP '{DAY} 10:45:00', 2), "
        f"(6, TIMESTAMP '{DAY} 09:00:00', 1), (7, TIMESTAMP '{DAY} 10:20:00', 1), "
        f"(8, NULL, 1), (9, TIMESTAMP '{DAY} 10:50:00', 3)"
    )
    return customers, orders


def _rows(frame, *columns):
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def test_event_mode_gives_each_fact_the_version_at_its_time(spark, cdc_tables):
    customers, orders = cdc_tables
    frame = sparkext.sql(
        f"SELECT * FROM sparkext.dim_join_changelog('{orders}', '{customers}', "
        "'f.customer_id = d.id', 'order_time', 'event', map('audit', 'true'))"
    )
    assert frame.columns == [
        "order_id", "order_time", "customer_id", "qty", "name", "_dim_version", "_dim_valid_from"
    ]  # fmt: skip
    # key 1: qty 10 from 10:00, 20 from 10:20 (late update; a fact at exactly 10:20 sees it),
    # 30 from 10:30; key 2: 15 from 10:00, deleted at 10:40; key 3 never existed.
    assert _rows(frame, "order_id", "qty", "_dim_valid_from") == [
        (1, 10, _t("10:00:00")), (2, 20, _t("10:20:00")), (3, 30, _t("10:30:00")),
        (4, 15, _t("10:00:00")), (5, None, None), (6, None, None), (7, 20, _t("10:20:00")),
        (8, None, None), (9, None, None),
    ]  # fmt: skip
    inner = sparkext.sql(
        f"SELECT order_id, qty FROM sparkext.dim_join_changelog('{orders}', '{customers}', "
        "'customer_id = id', 'order_time', 'event', map('join', 'inner', 'columns', 'qty'))"
    )
    assert _rows(inner, "order_id", "qty") == [(1, 10), (2, 20), (3, 30), (4, 15), (7, 20)]


def test_processing_mode_joins_one_snapshot(spark, cdc_tables):
    customers, orders = cdc_tables
    first = spark.sql(f"SELECT snapshot_id FROM {customers}.snapshots ORDER BY committed_at")
    first_id = first.first().snapshot_id
    now = sparkext.sql(
        f"SELECT * FROM sparkext.dim_join_changelog(facts => '{orders}', "
        f"dimension => '{customers}', on => 'f.customer_id = d.id', mode => 'processing', "
        "options => map('audit', 'true', 'column-prefix', 'c_'))"
    )
    current = spark.sql(
        f"SELECT snapshot_id FROM {customers}.snapshots ORDER BY committed_at DESC"
    ).first()
    assert {r.order_id: (r.c_qty, r._dim_version) for r in now.collect()} == {
        **{i: (30, str(current.snapshot_id)) for i in (1, 2, 3, 6, 7, 8)},
        **{i: (None, None) for i in (4, 5, 9)},
    }
    then = sparkext.sql(
        f"SELECT order_id, qty FROM sparkext.dim_join_changelog('{orders}', '{customers}', "
        f"'f.customer_id = d.id', NULL, 'processing', map('as-of', '{first_id}', "
        "'join', 'inner'))"
    )
    assert _rows(then, "order_id", "qty") == sorted(
        [(i, 30) for i in (1, 2, 3, 6, 7, 8)] + [(4, 15), (5, 15)]
    )


def test_a_plain_table_has_versions_by_commit_time(spark):
    suffix = next(_ids)
    dim, facts = f"lake.test.dimp_{suffix}", f"lake.test.factp_{suffix}"
    spark.sql(f"CREATE TABLE {dim} (id BIGINT, label STRING) USING iceberg")
    spark.sql(f"INSERT INTO {dim} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"UPDATE {dim} SET label = 'a2' WHERE id = 1")
    spark.sql(f"DELETE FROM {dim} WHERE id = 2")
    commits = [
        r.committed_at
        for r in spark.sql(
            f"SELECT committed_at FROM {dim}.snapshots ORDER BY committed_at"
        ).collect()
    ]
    spark.sql(f"CREATE TABLE {facts} (n INT, id BIGINT, ts TIMESTAMP) USING iceberg")
    second = dt.timedelta(microseconds=1)
    rows = [
        (1, 1, commits[0] - second), (2, 1, commits[0]), (3, 2, commits[0]),
        (4, 1, commits[1]), (5, 2, commits[1]), (6, 2, commits[2]), (7, 1, commits[2]),
    ]  # fmt: skip
    spark.createDataFrame(rows, "n INT, id BIGINT, ts TIMESTAMP").writeTo(facts).append()
    frame = sparkext.sql(
        f"SELECT * FROM sparkext.dim_join_changelog('{facts}', '{dim}', 'id', 'ts')"
    )
    assert _rows(frame, "n", "label") == [
        (1, None), (2, "a"), (3, "b"), (4, "a2"), (5, "b"), (6, None), (7, "a2")
    ]  # fmt: skip


def test_facts_as_a_query_and_argument_errors(spark, cdc_tables):
    customers, orders = cdc_tables
    frame = sparkext.sql(
        f"SELECT order_id, qty FROM sparkext.dim_join_changelog('SELECT * FROM {orders} "
        f"WHERE order_id < 3', '{customers}', 'customer_id = id', 'order_time')"
    )
    assert _rows(frame, "order_id", "qty") == [(1, 10), (2, 20)]
    bad = [
        ("'nope = id', 'order_time'", "'nope' is not a column of the facts"),
        ("'customer_id = id', 'when'", "fact_time 'when' is not a column"),
        ("'customer_id = name', 'order_time'", "joins .* on its primary key \\(id\\)"),
        ("'customer_id = id', 'order_time', 'sometimes'", "mode 'sometimes' is not one of"),
        ("'customer_id = id'", None),  # processing mode: fine
        (
            "'customer_id = id', 'order_time', 'event', map('columns', 'order_id')",
            "'order_id' is not a column of the dimension",
        ),
    ]
    for arguments, message in bad:
        call = f"SELECT * FROM sparkext.dim_join_changelog('{orders}', '{customers}', {arguments})"
        if message is None:
            sparkext.sql(call).collect()
            continue
        with pytest.raises(ProcedureArgumentError, match=message):
            sparkext.sql(call).collect()
    with pytest.raises(ProcedureArgumentError, match="clash with the facts' column 'name'"):
        sparkext.sql(
            f"SELECT * FROM sparkext.dim_join_changelog('SELECT *, 1 AS name FROM {orders}', "
            f"'{customers}', 'customer_id = id', 'order_time')"
        ).collect()
