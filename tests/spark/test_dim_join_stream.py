"""Streaming temporal joins whose dimension state is kept in memory and brought forward by the
dimension's changes (sparkext.streaming.dim_state): same rows as backfill, one pinned snapshot
per micro-batch, deltas instead of re-reads, restart rebuilds the same state."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re

from sparkext.streaming.backfill import run_backfill
from sparkext.streaming.dim_state import DIMENSIONS_KEY
from sparkext.streaming.stream import run_stream
from tests.helpers.dim_events import ingest_batches, timed_event

DAY = "2026-11-21"
_ids = itertools.count(1)
ORDERS_DDL = "order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT"


def _e(op, key, qty, clock, position):
    return timed_event(op, key, qty, DAY, clock, position)


def _t(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"{DAY} {clock}")


def _append(spark, table, rows):
    spark.createDataFrame([(i, _t(c), k) for i, c, k in rows], ORDERS_DDL).writeTo(table).append()


def _rows(spark, table):
    return sorted(tuple(r) for r in spark.table(table).collect())


def _side_by_side(*calls) -> None:
    """Independent commits (to different tables) on two threads: both cores busy."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def _drain(run):
    run.query.processAllAvailable()
    assert not run.failures, run.failures


EVENT_JOB = """
CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT,
  WATERMARK FOR order_time AS order_time);
CREATE TABLE {sink} (order_id BIGINT, order_time TIMESTAMP, qty BIGINT);
INSERT INTO {sink} SELECT o.order_id, o.order_time, c.qty FROM {orders} AS o
LEFT JOIN {customers} FOR SYSTEM_TIME AS OF o.order_time AS c ON o.customer_id = c.id;
"""


def test_event_mode_stream_folds_dimension_changes_and_equals_backfill(spark, tmp_path):
    suffix = next(_ids)
    customers, orders = f"lake.test.sdc_{suffix}", f"lake.test.sdo_{suffix}"
    sink, batch_sink = f"lake.test.sds_{suffix}", f"lake.test.sdb_{suffix}"
    spark.sql(f"CREATE TABLE {orders} ({ORDERS_DDL}) USING iceberg")
    dim_dir = tmp_path / "dim"
    ingest_batches(
        dim_dir,
        customers,
        [[_e("c", 1, 10, "10:00:00", 100), _e("c", 2, 15, "10:00:00", 110),
          _e("c", 3, 7, "10:05:00", 120)]],
    )  # fmt: skip
    job = EVENT_JOB.format(orders=orders, sink=sink, customers=customers)
    logs = []
    run = run_stream(spark, job, str(tmp_path / "ck"), interval="1 second", progress=logs.append)
    try:
        _append(spark, orders, [(1, "10:10:00", 1), (2, "10:12:00", 2)])
        _drain(run)
        # the dimension changes while the stream runs: an update of key 1 at 10:20, a late
        # update (event time 10:15, committed after it) of key 2, a delete of key 3 at 10:30
        ingest_batches(
            dim_dir,
            customers,
            [[_e("u", 1, 20, "10:20:00", 200), _e("d", 3, 0, "10:30:00", 220)],
             [_e("u", 2, 25, "10:15:00", 230)]],
            start=2,
        )  # fmt: skip
        _append(spark, orders, [(3, "10:20:00", 1), (4, "10:16:00", 2), (5, "10:31:00", 3)])
        _drain(run)
        _append(spark, orders, [(6, "10:40:00", 3), (7, "10:45:00", 1)])
        _drain(run)
        # late changes of key 3, older in the binlog than its delete (220) which the state
        # already applied: one before the delete's time (valid 10:25-10:30 only), one after it
        # (never valid); neither brings key 3 back
        ingest_batches(
            dim_dir,
            customers,
            [[_e("u", 1, 30, "10:50:00", 300), _e("u", 3, 8, "10:25:00", 215),
              _e("u", 3, 9, "10:35:00", 216)]],
            start=4,
        )  # fmt: skip
        _append(spark, orders, [(8, "10:55:00", 1), (9, "11:00:00", 9), (12, "10:58:00", 3)])
        _drain(run)
    finally:
        run.stop()
    kinds = [(r.table, r.kind) for r in run.dimensions.records]
    assert kinds[0] == (customers, "reload")
    assert (customers, "delta") in kinds and kinds.count((customers, "reload")) == 1, kinds
    assert any("delta to snapshot" in line for line in logs), logs
    # one restart: the state is rebuilt by one reload and the stream continues
    _side_by_side(
        lambda: ingest_batches(dim_dir, customers, [[_e("d", 1, 0, "11:05:00", 400)]], start=5),
        lambda: _append(spark, orders, [(10, "11:10:00", 1), (11, "11:20:00", 2)]),
    )
    restarted = run_stream(spark, job, str(tmp_path / "ck"), available_now=True)
    restarted.wait(poll_seconds=0.02)  # polled often: the default polls twice a second
    assert [r.kind for r in restarted.dimensions.records][:1] == ["reload"]
    run_backfill(
        spark,
        EVENT_JOB.format(orders=orders, sink=batch_sink, customers=customers),
        f"{DAY} 00:00:00",
        f"{DAY} 11:20:00",
    )
    # hand-worked: key 1 = 10 from 10:00, 20 from 10:20, 30 from 10:50, gone at 11:05; key 2 =
    # 15 from 10:00, 25 from 10:15 (late); key 3 = 7 from 10:05, 8 from 10:25 (late), gone at
    # 10:30 (its late 10:35 change is older than the delete); no key 9.
    expected = [
        (1, _t("10:10:00"), 10), (2, _t("10:12:00"), 15), (3, _t("10:20:00"), 20),
        (4, _t("10:16:00"), 25), (5, _t("10:31:00"), None), (6, _t("10:40:00"), None),
        (7, _t("10:45:00"), 20), (8, _t("10:55:00"), 30), (9, _t("11:00:00"), None),
        (10, _t("11:10:00"), None), (12, _t("10:58:00"), None),
    ]  # fmt: skip
    assert _rows(spark, batch_sink) == expected
    assert _rows(spark, sink) == expected
    pinned = [
        json.loads(r.summary[DIMENSIONS_KEY])
        for r in spark.table(f"{sink}.snapshots").collect()
        if DIMENSIONS_KEY in (r.summary or {})
    ]
    snapshots = {r.snapshot_id for r in spark.table(f"{customers}.snapshots").collect()}
    assert pinned and all(p[customers] in snapshots for p in pinned)


LOOKUP_JOB = """
CREATE TABLE {orders} (order_id BIGINT, order_time TIMESTAMP, customer_id BIGINT,
  proc AS PROCTIME(), WATERMARK FOR order_time AS order_time);
CREATE TABLE {sink} (order_id BIGINT, qty BIGINT, region STRING);
INSERT INTO {sink} SELECT o.order_id, c.qty, r.region FROM {orders} AS o
LEFT JOIN {customers} FOR SYSTEM_TIME AS OF o.proc AS c ON o.customer_id = c.id
LEFT JOIN {regions} FOR SYSTEM_TIME AS OF o.proc AS r ON o.customer_id = r.id;
"""


def test_lookup_state_sees_each_dimension_commit_in_the_next_micro_batch(spark, tmp_path):
    """A CDC dimension (event-log deltas) and a plain one (changelog deltas), in one job."""
    suffix = next(_ids)
    customers, regions = f"lake.test.slc_{suffix}", f"lake.test.slr_{suffix}"
    orders, sink = f"lake.test.slo_{suffix}", f"lake.test.sls_{suffix}"
    dim_dir = tmp_path / "dim"

    def make_tables() -> None:
        spark.sql(f"CREATE TABLE {orders} ({ORDERS_DDL}) USING iceberg")
        spark.sql(f"CREATE TABLE {regions} (id BIGINT, region STRING) USING iceberg")
        spark.sql(f"INSERT INTO {regions} VALUES (1, 'north'), (2, 'south')")

    _side_by_side(
        make_tables,
        lambda: ingest_batches(
            dim_dir, customers, [[_e("c", 1, 10, "10:00:00", 100), _e("c", 2, 15, "10:00:00", 110)]]
        ),
    )
    job = LOOKUP_JOB.format(orders=orders, sink=sink, customers=customers, regions=regions)
    run = run_stream(spark, job, str(tmp_path / "ck"), interval="1 second")
    try:
        # rows are emitted once the watermark (the newest order time) has passed them: a later
        # order (customer 99, none) in each commit moves it past the commit's other rows
        _append(spark, orders, [(1, "10:10:00", 1), (2, "10:10:00", 2), (98, "10:15:00", 99)])
        _drain(run)

        def change_customers() -> None:
            ingest_batches(
                dim_dir,
                customers,
                [[_e("u", 1, 11, "10:20:00", 200), _e("d", 2, 0, "10:20:00", 210),
                  _e("c", 3, 33, "10:20:00", 220)]],
                start=2,
            )  # fmt: skip

        def change_regions() -> None:
            spark.sql(f"UPDATE {regions} SET region = 'east' WHERE id = 1")
            spark.sql(f"INSERT INTO {regions} VALUES (3, 'west')")

        _side_by_side(change_customers, change_regions)  # both before the next orders
        _append(
            spark,
            orders,
            [(3, "10:30:00", 1), (4, "10:30:00", 2), (5, "10:30:00", 3), (99, "10:35:00", 99)],
        )
        _drain(run)
        states = run.dimensions
        _assert_state_is_pinned_snapshot(spark, states, (customers, regions))
        # a late change of key 2 older in the binlog than its delete (210): ingest_cdc drops it,
        # and so does the fold (the key stays gone)
        ingest_batches(dim_dir, customers, [[_e("u", 2, 26, "10:19:00", 205)]], start=3)
        _append(spark, orders, [(6, "10:40:00", 2), (97, "10:45:00", 99)])
        _drain(run)
        _assert_state_is_pinned_snapshot(spark, states, (customers, regions))
        # the state is partitioned by its key: a join with facts shuffles the facts only
        held = states._held[("lookup", customers)].state
        facts = spark.range(100).withColumnRenamed("id", "customer_id")
        threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        try:
            joined = facts.join(held, facts.customer_id == held.id, "left")
            plan = joined._jdf.queryExecution().executedPlan().toString()
        finally:
            spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
        assert "SortMergeJoin" in plan and plan.count("Exchange hashpartitioning") == 1, plan
    finally:
        run.stop()
    kinds = {(r.table, r.kind) for r in run.dimensions.records}
    assert {(customers, "delta"), (regions, "delta")} <= kinds, kinds
    assert _rows(spark, sink) == [
        (1, 10, "north"), (2, 15, "south"), (3, 11, "east"), (4, None, "south"), (5, 33, "west"),
        (6, None, "south"), (98, None, None), (99, None, None),
    ]  # fmt: skip


def _assert_state_is_pinned_snapshot(spark, states, tables):
    """Each folded state is the dimension at the snapshot the micro-batch pinned."""
    for table in tables:
        pinned = states.pins[table]
        held = states._held[("lookup", table)].state
        truth = spark.read.option("snapshot-id", str(pinned)).table(table)
        assert sorted(map(tuple, held.collect())) == sorted(
            map(tuple, truth.select(*held.columns).collect())
        )


def test_versions_in_place_equal_the_windowed_versions_and_keep_the_state_partitioned(spark):
    """The stream's versions (changes exploded into the kept state) are the backfill's (a union
    and lead() over every version), and joining them shuffles the facts only."""
    import random

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sparkext.actions.history.versions import (
        VALID_FROM,
        VALID_TO,
        versions_from,
        versions_in_place,
    )
    from sparkext.streaming.dim_state import _checkpoint

    rng = random.Random(17)
    base_rows = [(k, rng.randint(0, 9), f"p{k * 10:04d}", _t("10:00:00")) for k in range(0, 40, 2)]
    change_rows = []
    for _ in range(60):  # updates, deletes, keys new to the state, duplicates, late positions
        k = rng.randint(0, 50)
        op = rng.choice(["u", "u", "c", "d"])
        change_rows.append(
            (
                k,
                rng.randint(0, 9),
                op,
                _t(f"10:{rng.randint(1, 59):02d}:00"),
                f"p{rng.randint(0, 999):04d}",
            )
        )
    change_rows.append(change_rows[3])
    base = spark.createDataFrame(
        base_rows, "id BIGINT, qty INT, _cdc_position STRING, _cdc_event_time TIMESTAMP"
    )
    base = _checkpoint(base.repartition("id"))
    changes = spark.createDataFrame(
        change_rows,
        "id BIGINT, qty INT, _cdc_op STRING, _cdc_event_time TIMESTAMP, _cdc_position STRING",
    )
    order = Window.partitionBy("id").orderBy(F.col(VALID_FROM).asc_nulls_first(), "_cdc_position")
    windowed = versions_from(base, changes, ["id", "qty"], ["id"]).withColumn(
        VALID_TO, F.lead(VALID_FROM).over(order)
    )
    for small in (True, False):
        in_place = versions_in_place(base, changes, ["id", "qty"], ["id"], small)
        assert sorted(map(repr, in_place.collect())) == sorted(
            map(repr, windowed.select(*in_place.columns).collect())
        )
    # no key new to the state: the versions keep the state's partitioning
    known = changes.where(F.col("id") % 2 == 0).where(F.col("id") < 40)
    in_place = versions_in_place(base, known, ["id", "qty"], ["id"], True)
    facts = spark.range(100).withColumnRenamed("id", "customer_id")
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        joined = facts.join(in_place, facts.customer_id == in_place.id, "left")
        plan = joined._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    # the join's state side is not exchanged (the small changes' own aggregates are)
    match = re.search(r"SortMergeJoin \[(\S+)\], \[(\S+)\], LeftOuter", plan)
    assert match is not None, plan
    fact_key, state_key = match.groups()
    assert f"Exchange hashpartitioning({fact_key}" in plan
    assert f"Exchange hashpartitioning({state_key}" not in plan, plan
