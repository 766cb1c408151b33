"""Event-time tags (snapshot_as_of_event_time's tag form) against the replay oracle.

The oracle (tests/helpers/cdc_source.state_as_of) replays every delivered change with event
time <= T0 in event-time order, ties by binlog position; it shares no code with sparkext. Each
tag is read back by stock Spark (``VERSION AS OF 'tag'``) and some by DuckDB's iceberg extension.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

import sparkext
from sparkext.errors import EventTimeError
from sparkext.history.as_of import state_as_of as computed_state
from sparkext.iceberg.catalog import refreshed_snapshot_id, resolve_table
from tests.helpers.cdc_calls import ingest
from tests.helpers.cdc_source import COLUMNS, Delivery, SourceTable, event_time, state_as_of
from tests.helpers.readers import duckdb_query

UTC = dt.timezone.utc


def literal(ms: int) -> str:
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def make_tag(table: str, ms: int, tag: str, options: str = "") -> dict:
    extra = f", options => map({options})" if options else ""
    return (
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            f"as_of => TIMESTAMP '{literal(ms)}', tag => '{tag}'{extra})"
        )
        .first()
        .asDict()
    )


def tagged_rows(spark, table: str, tag: str) -> dict[int, dict]:
    frame = spark.sql(f"SELECT {', '.join(COLUMNS)} FROM {table} VERSION AS OF '{tag}'")
    rows = [r.asDict() for r in frame.collect()]
    keyed = {r["id"]: r for r in rows}
    assert len(keyed) == len(rows), f"duplicate keys in tag {tag}"
    return keyed


def main_state(spark, table: str) -> tuple[int, list]:
    ids = [r.snapshot_id for r in spark.table(f"{table}.history").collect()]
    return refreshed_snapshot_id(spark, table), ids


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """A CDC table after 8 batches: late, duplicate and same-millisecond events, truncates, an
    equality-delete conversion and a compaction in the middle."""
    tmp = tmp_path_factory.mktemp("tags")
    table = "lake.test.tag_orders"
    source = SourceTable(seed=20261124, key_space=40, min_step_ms=0)
    delivery = Delivery(tmp / "landing", seed=24, duplicate_rate=0.08, late_rate=0.25)
    for batch in range(8):
        delivery.deliver(source.run(70), final=batch == 7)
        ingest(table, tmp / "landing", tmp / "checkpoint")
        if batch == 3:
            sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table}')")
        if batch == 5:
            sparkext.sql(
                f"CALL sparkext.tiered_optimize(table => '{table}', levels => 'l0,l2', "
                "cluster_by => 'qty')"
            )
    assert any(e["op"] == "t" for e in delivery.delivered)
    operations = {r.operation for r in spark.table(f"{table}.snapshots").collect()}
    assert "replace" in operations, operations  # the compaction committed
    return table, delivery.delivered


def test_thirty_event_times_equal_the_replay_oracle_and_main_is_untouched(spark, history):
    table, delivered = history
    before = main_state(spark, table)
    current = {r.id: r.asDict() for r in spark.table(table).select(*COLUMNS).collect()}
    times = sorted({event_time(e) for e in delivered})
    rng = random.Random(30)
    picks = {times[0] - 1, times[-1], times[-1] + 1}
    picks.update(rng.sample(times, 17))  # exactly on an event's time (ties included)
    picks.update(t - 1 for t in rng.sample(times, 10))  # just before one
    actions = set()
    for i, ms in enumerate(sorted(picks)):
        out = make_tag(table, ms, f"t30_{i}")
        actions.add(out["action"])
        assert tagged_rows(spark, table, f"t30_{i}") == state_as_of(delivered, ms), f"T0={ms}"
        assert out["tag_snapshot_id"] is not None and out["tag"] == f"t30_{i}"
    assert {"committed-changes", "tagged-base"} <= actions, actions
    assert main_state(spark, table) == before  # main's snapshot and history unchanged
    assert {r.id: r.asDict() for r in spark.table(table).select(*COLUMNS).collect()} == current


def test_duckdb_reads_the_tagged_snapshot(spark, history):
    table, delivered = history
    times = sorted({event_time(e) for e in delivered})
    ms = times[len(times) // 2]
    out = make_tag(table, ms, "duck")
    assert out["action"] in ("committed-changes", "rewrote-state")
    sql = "SELECT id, name, qty, price FROM {table}"
    rows = duckdb_query(spark, table, sql, snapshot_id=out["tag_snapshot_id"])
    assert {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in rows} == state_as_of(delivered, ms)


def test_a_rerun_is_idempotent_and_moving_a_tag_is_explicit(spark, history):
    table, delivered = history
    times = sorted({event_time(e) for e in delivered})
    t1, t2 = times[len(times) // 3], times[2 * len(times) // 3]
    first = make_tag(table, t1, "again")
    again = make_tag(table, t1, "again")
    assert again["action"] == "exists" and again["tag_snapshot_id"] == first["tag_snapshot_id"]
    assert again["files_written"] == 0
    with pytest.raises(EventTimeError, match="already exists.*replace-tag"):
        make_tag(table, t2, "again")
    assert tagged_rows(spark, table, "again") == state_as_of(delivered, t1)  # untouched
    moved = make_tag(table, t2, "again", "'replace-tag', 'true'")
    assert moved["action"] != "exists"
    assert tagged_rows(spark, table, "again") == state_as_of(delivered, t2)


def test_the_table_function_reads_an_exact_tag(spark, history):
    table, delivered = history
    times = sorted({event_time(e) for e in delivered})
    ms = times[len(times) // 4]
    make_tag(table, ms, "for_function")
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)
    result = computed_state(spark, resolve_table(spark, table), moment)
    assert result.mode == "tag"
    assert {r.id: r.asDict() for r in result.frame.select(*COLUMNS).collect()} == state_as_of(
        delivered, ms
    )


def test_bad_tag_calls_are_one_sentence(spark, history):
    table, _ = history
    with pytest.raises(EventTimeError, match="main branch"):
        make_tag(table, 0, "main")
    with pytest.raises(EventTimeError, match="not a usable tag name"):
        make_tag(table, 0, "a b")
    with pytest.raises(EventTimeError, match="not both"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            "as_of => TIMESTAMP '2026-01-01 00:00:00', tag => 'x', target => 'lake.test.x')"
        )
    with pytest.raises(EventTimeError, match="Say where the state goes"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            "as_of => TIMESTAMP '2026-01-01 00:00:00')"
        )
