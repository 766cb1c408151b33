"""snapshot_as_of_event_time against a replay oracle (tests/helpers/cdc_source.state_as_of).

The oracle replays, in event-time order (ties by binlog position), every delivered change whose
event time is <= T0. It shares no code with sparkext.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

import sparkext
from sparkext.actions.history.as_of import state_as_of as computed_state
from sparkext.errors import EventTimeError, SnapshotExpiredError
from sparkext.iceberg.catalog import resolve_table
from tests.helpers.cdc_calls import ingest
from tests.helpers.cdc_source import COLUMNS, Delivery, SourceTable, event_time, state_as_of
from tests.helpers.zones import host_zone, session_zone

UTC = dt.timezone.utc


def at(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


def literal(ms: int) -> str:
    return at(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def rows_of(frame) -> dict[int, dict]:
    return {r.id: r.asDict() for r in frame.select(*COLUMNS).collect()}


def state(spark, table: str, ms: int, **kwargs) -> dict[int, dict]:
    return rows_of(computed_state(spark, resolve_table(spark, table), at(ms), **kwargs).frame)


def build_history(spark, tmp, table: str, batches: int, convert_after: int):
    """A CDC table after ``batches`` batches with late, duplicate and tied events, and a
    conversion (rewrite_equality_deletes) after batch ``convert_after``."""
    source = SourceTable(seed=20261123, key_space=35, min_step_ms=0)
    delivery = Delivery(tmp / "landing", seed=11, duplicate_rate=0.08, late_rate=0.2)
    late = 0
    for batch in range(batches):
        delivery.deliver(source.run(60), final=batch == batches - 1)
        late += ingest(table, tmp / "landing", tmp / "checkpoint")["late"]
        if batch == convert_after:  # a non-CDC commit in the middle: no logical content change
            sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table}')")
    assert late > 0
    return table, delivery.delivered, tmp


def states(spark, table: str, picks) -> list[dict[int, dict]]:
    """:func:`state` at each T0 of ``picks``, a few at a time (read-only: concurrent queries keep
    both cores busy); the callers assert on their own thread."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda ms: state(spark, table, ms), picks))


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """4 batches, the conversion after the second: what the default tier's tests read."""
    return build_history(
        spark, tmp_path_factory.mktemp("asof"), "lake.test.asof_orders", 4, convert_after=1
    )


@pytest.fixture(scope="module")
def full_history(spark, tmp_path_factory):
    """The stress tier's 6 batches, the conversion after the fourth."""
    return build_history(
        spark, tmp_path_factory.mktemp("asof_full"), "lake.test.asof_orders_full", 6, 3
    )


def commit_ranges(spark, table: str) -> list[tuple[int, int]]:
    """Each CDC commit's event-time range (min, max), in commit order."""
    ranges = []
    for r in spark.table(f"{table}.snapshots").orderBy("committed_at").collect():
        s = json.loads(json.dumps(r.summary))
        if "sparkext.event-time.min" in s:
            ranges.append((int(s["sparkext.event-time.min"]), int(s["sparkext.event-time.max"])))
    return ranges


@pytest.mark.parametrize(
    "every_commit",
    [
        pytest.param(False, id="each-kind"),
        pytest.param(True, id="many", marks=pytest.mark.stress),
    ],
)
def test_many_event_times_equal_the_replay_oracle(spark, request, every_commit):
    """The stress tier: 14 random T0s and one inside every commit's range of the 6-batch
    history; the default tier: one of each kind (edges, on an event, just before one, inside
    the ranges of the first commit, the last, and the two around the conversion) on the 4-batch
    history, the same oracle."""
    table, delivered, _ = request.getfixturevalue("full_history" if every_commit else "history")
    times = sorted({event_time(e) for e in delivered})
    rng = random.Random(5)
    picks = {times[0] - 1, times[0], times[-1], times[-1] + 1}
    picks.update(rng.sample(times, 10 if every_commit else 2))  # on an event's time (ties too)
    picks.update(t - 1 for t in rng.sample(times, 4 if every_commit else 1))  # just before one
    ranges = commit_ranges(spark, table)
    assert len(ranges) == (6 if every_commit else 4)
    inside = ranges  # every commit; in the default tier: first, the two around the conversion, last
    for low, high in inside:  # inside one commit's event-time range
        picks.add((low + high) // 2)
    ordered = sorted(picks)
    for ms, got in zip(ordered, states(spark, table, ordered), strict=True):
        assert got == state_as_of(delivered, ms), f"T0={ms}"


def test_edges_before_the_first_and_after_the_last_event(spark, history):
    table, delivered, _ = history
    first = min(event_time(e) for e in delivered)
    last = max(event_time(e) for e in delivered)
    assert state(spark, table, first - 1) == {}
    current = rows_of(spark.table(table))
    assert state(spark, table, last) == current
    assert state(spark, table, last + 86_400_000) == current


def test_table_function_in_sql_and_a_join(spark, history):
    table, delivered, _ = history
    times = sorted({event_time(e) for e in delivered})
    t0 = times[len(times) // 2]
    expected = state_as_of(delivered, t0)
    count = sparkext.sql(
        f"SELECT count(*) AS n FROM sparkext.snapshot_as_of_event_time('{table}', "
        f"TIMESTAMP '{literal(t0)}')"
    ).first()
    assert count.n == len(expected)
    joined = sparkext.sql(
        f"SELECT s.id, c.qty FROM sparkext.snapshot_as_of_event_time('{table}', "
        f"TIMESTAMP '{literal(t0)}') AS s JOIN {table} AS c ON s.id = c.id"
    ).collect()
    current = rows_of(spark.table(table))
    assert sorted(r.id for r in joined) == sorted(set(expected) & set(current))


def test_procedure_writes_the_daily_partition_and_a_rerun_changes_nothing(spark, history):
    table, delivered, _ = history
    target = "lake.test.asof_daily"
    times = sorted({event_time(e) for e in delivered})
    t1, t2 = times[len(times) // 3], times[2 * len(times) // 3]

    def call(ms: int, day: str):
        return sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            f"as_of => TIMESTAMP '{literal(ms)}', target => '{target}', partition_value => '{day}')"
        ).first()

    first = call(t1, "2026-11-20")
    second = call(t2, "2026-11-21")
    assert first.rows_written == len(state_as_of(delivered, t1))
    assert second.mode == "cdc" and second.files_read > 0 and second.bytes_read > 0
    day1 = rows_of(spark.table(target).where("dt = '2026-11-20'"))
    assert day1 == state_as_of(delivered, t1)
    rerun = call(t1, "2026-11-20")  # same T0 again: the partition is replaced, not doubled
    assert rerun.rows_written == first.rows_written
    assert rows_of(spark.table(target).where("dt = '2026-11-20'")) == day1
    assert rows_of(spark.table(target).where("dt = '2026-11-21'")) == state_as_of(delivered, t2)
    assert spark.table(target).count() == len(day1) + len(state_as_of(delivered, t2))


def test_a_late_event_for_a_key_deleted_before_the_base_stays_deleted(spark, tmp_path, table_name):
    def event(op, key, pos, ts, qty=1):
        image = {"id": key, "name": "n", "qty": qty, "price": 1.0}
        return {
            "before": None if op == "c" else image,
            "after": None if op == "d" else image,
            "source": {
                "file": "mysql-bin.000001",
                "pos": pos,
                "row": 0,
                "ts_ms": ts,
                "db": "shop",
                "table": "orders",
                "connector": "mysql",
            },
            "op": op,
            "ts_ms": ts,
        }

    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    landing.mkdir()
    batch1 = [event("c", 1, 10, 100_000), event("c", 2, 15, 150_000), event("d", 1, 30, 300_000)]
    batch2 = [event("u", 1, 20, 200_000, qty=7), event("u", 2, 40, 1_000_000, qty=9)]
    (landing / "1.json").write_text("\n".join(json.dumps(e) for e in batch1) + "\n")
    ingest(table_name, landing, checkpoint)
    (landing / "2.json").write_text("\n".join(json.dumps(e) for e in batch2) + "\n")
    result = ingest(table_name, landing, checkpoint)
    assert result["late"] == 1
    picks = (250_000, 350_000, 999_999, 1_000_000)
    found = states(spark, table_name, picks)
    for ms, got in zip(picks, found, strict=True):
        assert got == state_as_of(batch1 + batch2, ms), ms
    # T0 = 250 s: key 1 was updated (late event) and not yet deleted
    assert found[0][1]["qty"] == 7


def test_expired_base_is_explained_and_full_replay_only_when_allowed(spark, tmp_path, table_name):
    source = SourceTable(seed=8, key_space=20)
    delivery = Delivery(tmp_path / "in", seed=8, late_rate=0.2)
    for batch in range(2):  # the oldest snapshot expires: the second batch's is retained
        delivery.deliver(source.run(40), final=batch == 1)
        ingest(table_name, tmp_path / "in", tmp_path / "ck")
    current = spark.table(f"{table_name}.snapshots").orderBy("committed_at").collect()[-1]
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
        f"older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    times = sorted({event_time(e) for e in delivery.delivered})
    early = times[len(times) // 4]
    with pytest.raises(SnapshotExpiredError, match="allow-full-replay"):
        state(spark, table_name, early)
    with pytest.raises(SnapshotExpiredError):  # the same sentence through SQL
        sparkext.sql(
            f"SELECT * FROM sparkext.snapshot_as_of_event_time('{table_name}', "
            f"TIMESTAMP '{literal(early)}')"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = sparkext.sql(
            f"SELECT * FROM sparkext.snapshot_as_of_event_time('{table_name}', "
            f"TIMESTAMP '{literal(early)}', NULL, map('allow-full-replay', 'true'))"
        )
        assert rows_of(rows) == state_as_of(delivery.delivered, early)
    assert any("expired" in str(w.message) for w in caught)
    # the current state needs no base before the retained snapshot
    assert current.snapshot_id is not None
    assert state(spark, table_name, times[-1]) == rows_of(spark.table(table_name))


def test_append_only_tables_by_property_or_argument(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id bigint, ts timestamp, v string) USING iceberg")
    base = dt.datetime(2026, 11, 20, tzinfo=UTC)
    rows = [(i, base + dt.timedelta(hours=i * 5), f"v{i}") for i in range(12)]
    spark.createDataFrame(rows, "id bigint, ts timestamp, v string").writeTo(table_name).append()
    t0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    with pytest.raises(EventTimeError, match=r"sparkext\.event-time-column"):
        sparkext.sql(
            f"SELECT * FROM sparkext.snapshot_as_of_event_time('{table_name}', "
            "TIMESTAMP '2026-11-21 06:00:00')"
        )
    by_argument = sparkext.sql(
        f"SELECT id FROM sparkext.snapshot_as_of_event_time('{table_name}', "
        "TIMESTAMP '2026-11-21 06:00:00', 'ts')"
    )
    expected = sorted(i for i, ts, _ in rows if ts <= t0)
    assert sorted(r.id for r in by_argument.collect()) == expected
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('sparkext.event-time-column' = 'ts')")
    by_property = computed_state(spark, resolve_table(spark, table_name), t0)
    assert by_property.mode == "append"
    assert sorted(r.id for r in by_property.frame.collect()) == expected
    with pytest.raises(EventTimeError, match="'nope' is not a column"):
        computed_state(spark, resolve_table(spark, table_name), t0, event_time_column="nope")


def test_bad_arguments_are_one_sentence(spark, history):
    table, _, _ = history
    with pytest.raises(EventTimeError, match="omit the event-time column"):
        sparkext.sql(
            f"SELECT * FROM sparkext.snapshot_as_of_event_time('{table}', "
            "TIMESTAMP '2026-11-21 00:00:00', 'qty')"
        )
    with pytest.raises(sparkext.errors.ProcedureArgumentError):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            "as_of => TIMESTAMP '2026-11-21 00:00:00')"
        )
    with pytest.raises(sparkext.errors.TableNotFoundError):
        sparkext.sql(
            "SELECT * FROM sparkext.snapshot_as_of_event_time('lake.test.nope', "
            "TIMESTAMP '2026-11-21 00:00:00')"
        )


@pytest.mark.parametrize(
    "batches, samples",
    [
        pytest.param(2, 3, id="2-batches"),
        pytest.param(4, 8, id="4-batches", marks=pytest.mark.stress),
    ],
)
def test_rows_loaded_without_an_event_log_are_compared_through_the_base(
    spark, tmp_path, table_name, batches, samples
):
    """A bulk load (no event log, no positions) before CDC: late changes need the base scan."""
    initial = {k: {"id": k, "name": "bulk", "qty": k, "price": 1.0} for k in range(0, 30, 2)}
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint NOT NULL, name string, qty bigint, price double, "
        "_cdc_op string, _cdc_event_time timestamp, _cdc_position string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'sparkext.event-time-column'='_cdc_event_time')"
    )
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    spark.createDataFrame(
        [(r["id"], r["name"], r["qty"], r["price"]) for r in initial.values()],
        "id bigint, name string, qty bigint, price double",
    ).selectExpr(
        "*",
        "'r' AS _cdc_op",
        "CAST(NULL AS timestamp) AS _cdc_event_time",
        "CAST(NULL AS string) AS _cdc_position",
    ).writeTo(table_name).append()
    source = SourceTable(seed=12, key_space=30, rows={k: dict(v) for k, v in initial.items()})
    delivery = Delivery(tmp_path / "in", seed=12, late_rate=0.25)
    for batch in range(batches):
        delivery.deliver(source.run(40), final=batch == batches - 1)
        ingest(table_name, tmp_path / "in", tmp_path / "ck")
    times = sorted({event_time(e) for e in delivery.delivered})
    picks = [times[0] - 1, *random.Random(2).sample(times, samples), times[-1]]
    for ms, got in zip(picks, states(spark, table_name, picks), strict=True):
        assert got == state_as_of(delivery.delivered, ms, initial), ms


def test_tables_it_cannot_place_in_event_time_are_one_sentence(spark, table_name):
    """A CDC-looking commit without event log; CDC commits without a key; a column clash."""
    spark.sql(f"CREATE TABLE {table_name} (id bigint NOT NULL, v string) USING iceberg")

    def commit(rows, low, high):
        spark.createDataFrame(rows, "id bigint, v string").writeTo(table_name).option(
            "snapshot-property.sparkext.event-time.min", str(low)
        ).option("snapshot-property.sparkext.event-time.max", str(high)).append()

    commit([(1, "a")], 1_000, 2_000)
    with pytest.raises(EventTimeError, match="no identifier fields"):
        state(spark, table_name, 5_000)
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    with pytest.raises(EventTimeError, match="has no event log"):
        state(spark, table_name, 1_500)  # the commit must be replayed: it has no log
    spark.sql(f"CREATE TABLE {table_name}_src (ts timestamp, dt string) USING iceberg")
    spark.sql(f"INSERT INTO {table_name}_src VALUES (TIMESTAMP '2026-11-20 00:00:00', 'x')")
    spark.sql(
        f"ALTER TABLE {table_name}_src SET TBLPROPERTIES ('sparkext.event-time-column' = 'ts')"
    )
    with pytest.raises(EventTimeError, match="partition-column"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table_name}_src', "
            f"as_of => TIMESTAMP '2026-11-21 00:00:00', target => '{table_name}_out')"
        )
    assert not spark.catalog.tableExists(f"{table_name}_out")


def test_as_of_is_a_session_zone_wall_clock_whatever_the_host_zone(spark, table_name):
    """TIMESTAMP '…' and a naive datetime given to the Python API both mean a wall clock in the
    session zone; a host set to Asia/Shanghai moves neither the rows nor T0's date."""
    spark.sql(f"CREATE TABLE {table_name} (id bigint, ts timestamp) USING iceberg")
    base = dt.datetime(2026, 11, 20, tzinfo=UTC)
    rows = [(i, base + dt.timedelta(hours=i * 5)) for i in range(12)]
    spark.createDataFrame(rows, "id bigint, ts timestamp").writeTo(table_name).append()
    t0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)  # 2026-11-20 22:00 in Los Angeles
    expected = sorted(i for i, ts in rows if ts <= t0)
    target = f"{table_name}_daily"
    with host_zone("Asia/Shanghai"), session_zone(spark, "America/Los_Angeles"):
        by_sql = sparkext.sql(
            f"SELECT id FROM sparkext.snapshot_as_of_event_time('{table_name}', "
            "TIMESTAMP '2026-11-20 22:00:00', 'ts')"
        ).collect()
        naive = dt.datetime(2026, 11, 20, 22, 0)
        by_api = computed_state(spark, resolve_table(spark, table_name), naive, "ts").frame
        by_api_ids = sorted(r.id for r in by_api.collect())
        written = sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table_name}', "
            f"as_of => TIMESTAMP '2026-11-20 22:00:00', target => '{target}', "
            "event_time_column => 'ts')"
        ).first()
    assert sorted(r.id for r in by_sql) == expected
    assert by_api_ids == expected
    assert written.partition_value == "2026-11-20" and written.rows_written == len(expected)
