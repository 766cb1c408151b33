"""The temp views an event-time temporal join on an ingest_cdc dimension reads are dropped when
the statement is done: after a backfill, a failed backfill, and every stream batch."""

from __future__ import annotations

import json

import pytest

import sparkext
from sparkext.streaming import backfill, run_backfill, run_stream
from tests.spark.test_streaming import (
    DAY,
    SENTINEL,
    _cdc_event,
    _ids,
    append,
    finish,
    sorted_rows,
    t,
)

ORDERS_DDL = "order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT"
JOB = """
CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT,
  WATERMARK FOR order_time AS order_time);
CREATE TABLE {sink} (order_id BIGINT, order_time TIMESTAMP, qty BIGINT);
INSERT INTO {sink} SELECT o.order_id, o.order_time, c.qty FROM {orders} AS o
LEFT JOIN {customers} FOR SYSTEM_TIME AS OF o.order_time AS c ON o.customer_id = c.id;
"""


def version_views(spark) -> list[str]:
    views = spark.sql("SHOW VIEWS IN lake.test").where("isTemporary").collect()
    return [v.viewName for v in views if v.viewName.startswith("_sparkext_versions")]


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """The dimension and the facts, built once: the tests only read them."""
    tmp_path = tmp_path_factory.mktemp("version_views")
    table_name = f"lake.test.views_{next(_ids)}"
    customers, orders = f"{table_name}_customers", f"{table_name}_orders"
    landing = tmp_path / "landing"
    landing.mkdir()
    changes = [_cdc_event("c", 1, 10, "10:00:00", 1), _cdc_event("u", 1, 30, "10:30:00", 2)]
    (landing / "1.json").write_text("\n".join(json.dumps(e) for e in changes) + "\n")
    sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{customers}', source => '{landing}', "
        f"checkpoint => '{tmp_path / 'cdc'}', primary_key => 'id', create => true)"
    ).collect()
    spark.sql(f"CREATE TABLE {orders} ({ORDERS_DDL}) USING iceberg")
    rows = [(1, f"{DAY} 10:10:00", 1), (2, f"{DAY} 10:40:00", 1), (999, SENTINEL, 7)]
    append(spark, orders, ORDERS_DDL, rows)
    return customers, orders


def test_backfill_and_stream_drop_their_version_views(spark, tmp_path, tables):
    customers, orders = tables
    assert version_views(spark) == []
    sink = f"{orders}_sink"
    job = JOB.format(orders=orders, customers=customers, sink=sink)
    run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert version_views(spark) == []
    assert sorted_rows(spark, sink) == [(1, t("10:10"), 1), (2, t("10:40"), 2)]

    select = job.split(f"INSERT INTO {sink} ")[0] + (
        f"SELECT o.order_id, c.qty FROM {orders} AS o LEFT JOIN {customers} "
        "FOR SYSTEM_TIME AS OF o.order_time AS c ON o.customer_id = c.id;"
    )
    _, results = run_backfill(spark, select, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert version_views(spark) == []
    assert sorted(results[0].frame.collect()) == [(1, 1), (2, 2)]  # analysed while they existed

    streamed = f"{orders}_streamed"
    job = JOB.format(orders=orders, customers=customers, sink=streamed)
    finish(run_stream(spark, job, str(tmp_path / "stream"), available_now=True))
    assert version_views(spark) == []
    assert sorted_rows(spark, streamed) == [(1, t("10:10"), 1), (2, t("10:40"), 2)]


def test_a_failed_backfill_drops_its_version_views(spark, tables, monkeypatch):
    customers, orders = tables
    job = JOB.format(orders=orders, customers=customers, sink=f"{orders}_failed")

    def fail(*args, **kwargs):
        raise RuntimeError("the sink is gone")

    monkeypatch.setattr(backfill, "_write", fail)
    with pytest.raises(RuntimeError, match="the sink is gone"):
        run_backfill(spark, job, f"{DAY} 00:00:00", f"{DAY} 23:00:00")
    assert version_views(spark) == []
