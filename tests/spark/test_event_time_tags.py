"""Event-time tags (snapshot_as_of_event_time's tag form) against the replay oracle.

The oracle (tests/helpers/cdc_source.state_as_of) replays every delivered change with event
time <= T0 in event-time order, ties by binlog position; it shares no code with sparkext. Each
tag is read back by stock Spark (``VERSION AS OF 'tag'``) and some by DuckDB's iceberg extension.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

import sparkext
from sparkext.actions.history.as_of import state_as_of as computed_state
from sparkext.errors import EventTimeError, ProcedureArgumentError
from sparkext.iceberg.catalog import refreshed_snapshot_id, resolve_table
from tests.helpers.cdc_calls import binlog_event, ingest, land
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


def build_history(spark, tmp, table: str, seed: int, batches: int, rewrite: int, compact: int):
    """A CDC table after ``batches`` batches of 70 steps: late, duplicate and same-millisecond
    events, truncates, an equality-delete conversion after batch ``rewrite`` and a compaction
    after batch ``compact``."""
    source = SourceTable(seed=seed, key_space=40, min_step_ms=0)
    delivery = Delivery(tmp / "landing", seed=24, duplicate_rate=0.08, late_rate=0.25)
    for batch in range(batches):
        delivery.deliver(source.run(70), final=batch == batches - 1)
        ingest(table, tmp / "landing", tmp / "checkpoint")
        if batch == rewrite:
            sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table}')")
        if batch == compact:
            sparkext.sql(
                f"CALL sparkext.tiered_optimize(table => '{table}', levels => 'l0,l2', "
                "cluster_by => 'qty')"
            )
    assert any(e["op"] == "t" for e in delivery.delivered)
    operations = {r.operation for r in spark.table(f"{table}.snapshots").collect()}
    assert "replace" in operations, operations  # the compaction committed
    return table, delivery.delivered


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """4 batches (a truncate in the second and the fourth), the conversion after the second,
    the compaction after the third: what every test of the module reads."""
    tmp = tmp_path_factory.mktemp("tags")
    return build_history(spark, tmp, "lake.test.tag_orders", 20261128, 4, rewrite=1, compact=2)


@pytest.fixture(scope="module")
def full_history(spark, tmp_path_factory):
    """The stress tier's 8 batches (truncates in the sixth and seventh), the conversion after
    the fourth, the compaction after the sixth."""
    tmp = tmp_path_factory.mktemp("tags_full")
    return build_history(spark, tmp, "lake.test.tag_orders_full", 20261124, 8, rewrite=3, compact=5)


def check_event_times(spark, table: str, delivered: list[dict], picks: set[int], prefix: str):
    """Each T0 of ``picks`` tagged, read back by stock Spark and compared with the replay
    oracle; main's snapshot, history and rows untouched."""
    before = main_state(spark, table)
    current = {r.id: r.asDict() for r in spark.table(table).select(*COLUMNS).collect()}
    actions = set()

    def made_and_read(i: int, ms: int) -> tuple[dict, dict[int, dict]]:
        out = make_tag(table, ms, f"{prefix}_{i}")
        return out, tagged_rows(spark, table, f"{prefix}_{i}")

    # two tags made (and read back) at a time, each committing beside the other (both cores
    # busy; the commit layer re-stages a tag whose commit lost the race); the assertions on
    # this thread
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {ms: pool.submit(made_and_read, i, ms) for i, ms in enumerate(sorted(picks))}
        for i, (ms, future) in enumerate(done.items()):
            out, rows = future.result()
            actions.add(out["action"])
            assert out["tag_snapshot_id"] is not None and out["tag"] == f"{prefix}_{i}"
            assert rows == state_as_of(delivered, ms), f"T0={ms}"
    assert {"committed-changes", "tagged-base", "rewrote-state"} <= actions, actions
    assert main_state(spark, table) == before  # main's snapshot and history unchanged
    assert {r.id: r.asDict() for r in spark.table(table).select(*COLUMNS).collect()} == current


def boundary_picks(spark, table: str, delivered: list[dict]) -> set[int]:
    """One T0 for every kind of boundary: before, on and after the first and last events; on
    and just before a truncate; on and just before an event delivered twice; on each commit's
    latest event and inside its event-time range (the conversion's and the compaction's
    neighbours among them)."""
    times = sorted({event_time(e) for e in delivered})
    truncate = next(event_time(e) for e in delivered if e["op"] == "t")
    seen, twice = set(), None
    for e in delivered:
        key = (e["source"]["pos"], e["op"])
        if key in seen and e["op"] != "t":
            twice = event_time(e)
            break
        seen.add(key)
    assert twice is not None  # the delivery duplicated an event
    picks = {times[0] - 1, times[0], times[-1], times[-1] + 1, truncate, truncate - 1}
    picks.update({twice, twice - 1})
    for r in spark.table(f"{table}.snapshots").select("summary").collect():
        summary = dict(r.summary or {})
        if "sparkext.event-time.max" in summary:
            low, high = (int(summary[f"sparkext.event-time.{m}"]) for m in ("min", "max"))
            picks.update({high, (low + high) // 2})
    return picks


def test_event_times_on_every_kind_of_boundary_equal_the_replay_oracle_and_main_is_untouched(
    spark, history
):
    """The default tier's stand-in for the thirty event times: the same oracle and checks, one
    T0 for each kind of boundary, on the smaller history."""
    table, delivered = history
    picks = boundary_picks(spark, table, delivered)
    assert len(picks) >= 12, sorted(picks)
    check_event_times(spark, table, delivered, picks, "tb")


@pytest.mark.stress
def test_thirty_event_times_equal_the_replay_oracle_and_main_is_untouched(spark, full_history):
    table, delivered = full_history
    times = sorted({event_time(e) for e in delivered})
    rng = random.Random(30)
    picks = {times[0] - 1, times[-1], times[-1] + 1}
    picks.update(rng.sample(times, 17))  # exactly on an event's time (ties included)
    picks.update(t - 1 for t in rng.sample(times, 10))  # just before one
    check_event_times(spark, table, delivered, picks, "t30")


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
    with pytest.raises(EventTimeError, match=r"already exists.*replace-tag"):
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
    with pytest.raises(ProcedureArgumentError, match="not both"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            "as_of => TIMESTAMP '2026-01-01 00:00:00', tag => 'x', target => 'lake.test.x')"
        )
    with pytest.raises(ProcedureArgumentError, match="Say where the state goes"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table}', "
            "as_of => TIMESTAMP '2026-01-01 00:00:00')"
        )


def test_the_listing_names_each_tag_with_its_event_time(spark, history):
    table, _ = history
    listed = {
        r.tag: r
        for r in sparkext.sql(f"SELECT * FROM sparkext.event_time_tags('{table}')").collect()
    }
    assert {"duck", "again", "for_function"} <= set(listed)
    row = listed["duck"]
    assert row.late_commits == 0 and row.as_recorded and row.how in ("changes", "rewrite")
    assert row.files_written > 0 and row.bytes_written > 0
    assert row.expires_at > row.created_at  # 35 days from the tagged snapshot's commit


# ---- daily tags, late events, stale tags ---------------------------------------------------
SHANGHAI = dt.timezone(dt.timedelta(hours=8))


def local_ms(day: int, hour: float) -> int:
    """Epoch ms of 2026-11-<day> <hour> in Shanghai."""
    moment = dt.datetime(2026, 11, day, tzinfo=SHANGHAI) + dt.timedelta(hours=hour)
    return int(moment.timestamp() * 1000)


def event(op: str, key: int, pos: int, ts: int, name: str = "n") -> dict:
    e = binlog_event(
        op, None if op == "c" else {"id": key, "name": "old"}, None if op == "d" else
        {"id": key, "name": f"{name}{pos}"}, pos
    )  # fmt: skip
    e["source"]["ts_ms"], e["ts_ms"] = ts, ts + 5
    return e


def oracle(delivered: list[dict], ms: int) -> dict[int, dict]:
    return {k: {"id": k, "name": v["name"]} for k, v in state_as_of(delivered, ms).items()}


def days_call(table: str, extra: str = "") -> dict[str, dict]:
    rows = sparkext.sql(f"CALL sparkext.tag_event_time_days(table => '{table}'{extra})").collect()
    return {r.day: r.asDict() for r in rows}


def two_columns(spark, table: str, tag: str) -> dict[int, dict]:
    frame = spark.sql(f"SELECT id, name FROM {table} VERSION AS OF '{tag}'")
    return {r.id: r.asDict() for r in frame.collect()}


def test_daily_tags_close_days_in_the_session_zone_and_late_events_make_them_stale(
    spark, tmp_path, table_name
):
    from tests.helpers.zones import session_zone

    landing, checkpoint = tmp_path / "landing", tmp_path / "ck"
    end_20 = local_ms(21, 0) - 1
    batches = [
        [  # 2026-11-20 (Shanghai), one event on its last millisecond, one on the next midnight
            event("c", 1, 10, local_ms(20, 1)),
            event("c", 2, 20, local_ms(20, 9)),
            event("u", 1, 30, end_20),
        ],
        [  # 2026-11-21 (from its first millisecond), and a late change of 11-20
            event("c", 3, 40, local_ms(21, 0)),
            event("u", 2, 50, local_ms(21, 2)),
            event("d", 3, 60, local_ms(21, 5)),
            event("c", 4, 45, local_ms(20, 22)),
            event("c", 5, 70, local_ms(21, 20)),
        ],
        [  # a change of 11-20 that arrives after its tag, and 11-22 02:00
            event("c", 6, 35, local_ms(20, 12)),
            event("u", 5, 80, local_ms(22, 2)),
        ],
    ]
    delivered: list[dict] = []

    def deliver(i: int) -> None:
        land(landing, f"b{i}.json", batches[i])
        delivered.extend(batches[i])
        ingest(table_name, landing, checkpoint, key="id")

    with session_zone(spark, "Asia/Shanghai"):
        deliver(0)
        assert days_call(table_name) == {}  # 11-20 not closed yet: nothing to do
        with pytest.raises(EventTimeError, match=r"Day 2026-11-20 .* may still receive late"):
            days_call(table_name, ", day => '2026-11-20'")
        deliver(1)
        first = days_call(table_name)
        assert list(first) == ["2026-11-20"]
        assert first["2026-11-20"]["tag"] == "et_2026-11-20"
        assert first["2026-11-20"]["action"] == "committed-changes"
        assert two_columns(spark, table_name, "et_2026-11-20") == oracle(delivered, end_20)
        assert days_call(table_name)["2026-11-20"]["action"] == "exists"
        with pytest.raises(EventTimeError, match=r"Day 2026-11-21 .* may still receive late"):
            days_call(table_name, ", day => '2026-11-21'")
        forced = days_call(table_name, ", day => '2026-11-21', force => true")
        assert forced["2026-11-21"]["action"] != "exists"
        end_21 = local_ms(22, 0) - 1
        assert two_columns(spark, table_name, "et_2026-11-21") == oracle(delivered, end_21)
        tagged_before_late = oracle(delivered, end_20)
        deliver(2)  # a late change of 11-20 after its tag
        again = days_call(table_name, ", options => map('backfill-days', '3')")
        assert again["2026-11-20"]["action"] == "stale"
        assert again["2026-11-20"]["late_commits"] == 1
        assert again["2026-11-21"]["action"] == "stale"  # 11-20's late event counts for it too
        assert two_columns(spark, table_name, "et_2026-11-20") == tagged_before_late  # kept
        listed = {
            r.tag: r.late_commits
            for r in sparkext.sql(f"CALL sparkext.event_time_tags('{table_name}')").collect()
        }
        assert listed == {"et_2026-11-20": 1, "et_2026-11-21": 1}
        # the table function does not read a stale tag: it computes the state with the event
        fresh = sparkext.sql(
            f"SELECT id, name FROM sparkext.snapshot_as_of_event_time('{table_name}', "
            "TIMESTAMP '2026-11-20 23:59:59.999')"
        ).collect()
        assert {r.id: r.asDict() for r in fresh} == oracle(delivered, end_20)
        moved = days_call(
            table_name, ", day => '2026-11-20', options => map('replace-stale', 'true')"
        )
        assert moved["2026-11-20"]["action"] == "replaced"
        assert two_columns(spark, table_name, "et_2026-11-20") == oracle(delivered, end_20)
        assert 6 in oracle(delivered, end_20)


def test_a_bad_day_is_one_sentence(spark, history):
    table, _ = history
    with pytest.raises(EventTimeError, match=r"is not a date; write day => '2026-11-21'"):
        days_call(table, ", day => 'yesterday'")


# ---- concurrency ---------------------------------------------------------------------------
WRITER_SCRIPT = textwrap.dedent(
    """
    import shutil, sys, time
    from pathlib import Path
    import sparkext
    spark = sparkext.session(master="local[1]", warehouse=sys.argv[1],
                             **{"spark.sql.shuffle.partitions": "2"})
    staged, landing = Path(sys.argv[3]), Path(sys.argv[4])
    print("READY", flush=True)
    for path in sorted(staged.iterdir()):
        shutil.copy(path, landing / path.name)
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{sys.argv[2]}', source => '{landing}', "
            f"checkpoint => '{sys.argv[5]}', primary_key => 'id', create => true)"
        ).collect()
        print("COMMITTED", path.name, flush=True)
    """
)


class ProcessWriter:
    """The other writer in another Spark process (WRITER_SCRIPT)."""

    def __init__(self, tmp_path, warehouse, table: str, staged, landing, checkpoint):
        script = tmp_path / "writer.py"
        script.write_text(WRITER_SCRIPT)
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(warehouse), table, str(staged), str(landing),
             str(checkpoint)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )  # fmt: skip

    def ready(self) -> bool:
        return self.process.stdout.readline().startswith("READY")

    def finish(self) -> str:
        """Waits for the writer; its output (one COMMITTED line per landed file)."""
        try:
            out, err = self.process.communicate(timeout=900)
        finally:
            self.process.kill()
        assert self.process.returncode == 0, err[-3000:]
        return out

    def abandon(self) -> None:
        self.process.kill()


class ThreadWriter:
    """The other writer in a thread of this process: WRITER_SCRIPT's loop, on this JVM."""

    def __init__(self, tmp_path, warehouse, table: str, staged, landing, checkpoint):
        import threading

        self.lines: list[str] = []
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.lines.append("READY")
                for path in sorted(staged.iterdir()):
                    shutil.copy(path, landing / path.name)
                    sparkext.sql(
                        f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
                        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
                    ).collect()
                    self.lines.append(f"COMMITTED {path.name}")
            except BaseException as error:  # reported by finish()
                self.error = error

        self.thread = threading.Thread(target=run, name="other-writer", daemon=True)
        self.thread.start()

    def ready(self) -> bool:
        return True

    def finish(self) -> str:
        self.thread.join(timeout=900)
        assert not self.thread.is_alive(), "the other writer did not finish"
        if self.error is not None:
            raise self.error
        return "\n".join(self.lines)

    def abandon(self) -> None:
        self.thread.join(timeout=900)


def tags_exact_while_another_writer_ingests(
    spark, tmp_path, table_name, warehouse, writer_kind, later_files: int, tags: int
):
    source = SourceTable(seed=77, key_space=30)
    delivery = Delivery(tmp_path / "landing", seed=7, late_rate=0.2)
    for batch in range(3):
        delivery.deliver(source.run(50), final=batch == 2)
        ingest(table_name, tmp_path / "landing", tmp_path / "ck")
    known = list(delivery.delivered)
    staged = tmp_path / "staged"
    staged.mkdir()
    for i in range(later_files):  # later changes of the same source, landed by the other writer
        lines = [json.dumps(e) for e in source.run(40)]
        (staged / f"later-{i:02d}.json").write_text("\n".join(lines) + "\n")
    writer = writer_kind(
        tmp_path, warehouse, table_name, staged, tmp_path / "landing", tmp_path / "ck"
    )
    times = sorted({event_time(e) for e in known})
    picks = [times[len(times) * i // (tags + 1)] for i in range(1, tags + 1)]
    try:
        assert writer.ready()
        made = [make_tag(table_name, ms, f"c{i}") for i, ms in enumerate(picks)]
    except BaseException:
        writer.abandon()
        raise
    out = writer.finish()
    assert out.count("COMMITTED") == later_files
    spark.sql(f"REFRESH TABLE {table_name}")  # the other writer's commits
    commits = spark.table(f"{table_name}.snapshots").where(
        "summary['sparkext.cdc.checkpoint-id'] IS NOT NULL"
    )
    assert commits.count() >= 3 + later_files  # main was never blocked
    for i, ms in enumerate(picks):
        assert tagged_rows(spark, table_name, f"c{i}") == state_as_of(known, ms), made[i]
    current = {r.id: r.asDict() for r in spark.table(table_name).select(*COLUMNS).collect()}
    assert current == source.rows


def test_tags_are_exact_while_another_writer_ingests_into_main(
    spark, tmp_path, table_name, warehouse
):
    """The default tier's stand-in for the other process: the other writer in a thread (the
    point is the concurrent commits to main, not the process boundary), fewer files and tags."""
    tags_exact_while_another_writer_ingests(
        spark, tmp_path, table_name, warehouse, ThreadWriter, later_files=3, tags=4
    )


@pytest.mark.slow
@pytest.mark.stress
def test_tags_are_exact_while_another_process_ingests_into_main(
    spark, tmp_path, table_name, warehouse
):
    tags_exact_while_another_writer_ingests(
        spark, tmp_path, table_name, warehouse, ProcessWriter, later_files=6, tags=7
    )


# ---- maintenance ---------------------------------------------------------------------------
def test_maintenance_keeps_every_tagged_state(spark, history):
    """Last of the tests on ``history``: expires every snapshot no tag or hold needs."""
    table, delivered = history
    times = sorted({event_time(e) for e in delivered})
    make_tag(table, times[len(times) // 5], "kept")
    records = {
        r.tag: r.as_of
        for r in sparkext.sql(f"SELECT * FROM sparkext.event_time_tags('{table}')").collect()
    }
    assert "kept" in records

    def every_tag() -> dict[str, dict[int, dict]]:  # read a few at a time (both cores busy)
        with ThreadPoolExecutor(max_workers=3) as pool:
            found = list(pool.map(lambda tag: tagged_rows(spark, table, tag), records))
        return dict(zip(records, found, strict=True))

    before = every_tag()
    assert before["kept"] == state_as_of(delivered, times[len(times) // 5])
    out = sparkext.sql(
        f"CALL sparkext.maintain(table => '{table}', options => map('snapshot-max-age', '1 ms', "
        "'min-snapshots', '1', 'event-time-retention', '1 ms'))"
    ).collect()
    expired = {r.action: r for r in out}["expire_snapshots"]
    assert expired.outcome == "ok" and expired.items > 0, expired
    after = every_tag()
    for tag, rows in before.items():
        assert after[tag] == rows, tag
    listed = sparkext.sql(f"SELECT tag FROM sparkext.event_time_tags('{table}')").collect()
    assert {r.tag for r in listed} == set(records)


def test_an_append_only_table_is_tagged_by_a_rewrite(spark, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint, ts timestamp, v string) USING iceberg "
        "PARTITIONED BY (v) TBLPROPERTIES ('format-version'='2', "
        "'sparkext.event-time-column'='ts')"
    )
    for day in (20, 21, 22):
        spark.sql(
            f"INSERT INTO {table_name} VALUES ({day}, TIMESTAMP '2026-11-{day} 08:00:00', 'a'), "
            f"({day + 100}, TIMESTAMP '2026-11-{day} 23:59:59.999', 'b')"
        )
    before = refreshed_snapshot_id(spark, table_name)
    out = sparkext.sql(
        f"CALL sparkext.snapshot_as_of_event_time(table => '{table_name}', "
        "as_of => TIMESTAMP '2026-11-21 23:59:59.999', tag => 'et_2026-11-21')"
    ).first()
    assert (out.action, out.mode, out.rows_written) == ("rewrote-state", "append", 4)
    tagged = spark.sql(f"SELECT id FROM {table_name} VERSION AS OF 'et_2026-11-21'").collect()
    assert sorted(r.id for r in tagged) == [20, 21, 120, 121]
    assert refreshed_snapshot_id(spark, table_name) == before
    assert spark.table(table_name).count() == 6


def test_an_append_only_table_partitioned_by_time_is_one_sentence(spark, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint, ts timestamp) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('sparkext.event-time-column'='ts')"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, TIMESTAMP '2026-11-20 08:00:00')")
    with pytest.raises(EventTimeError, match=r"partitioned by day\(ts\).*target =>"):
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{table_name}', "
            "as_of => TIMESTAMP '2026-11-21 00:00:00', tag => 'x')"
        )
    assert spark.table(table_name).count() == 1


# ---- races between the plan and the commit ---------------------------------------------------
def two_day_table(table: str, tmp_path) -> tuple[int, list[dict]]:
    """Day 20's rows in one commit, day 21's in the next: T0 = end of day 20 has a base and
    a change after it (an update of day 20 that arrived late, in the second batch)."""
    first = [event("c", 1, 10, local_ms(20, 1)), event("c", 2, 20, local_ms(20, 2))]
    second = [event("u", 1, 30, local_ms(20, 23)), event("c", 3, 40, local_ms(21, 5))]
    for i, batch in enumerate((first, second)):
        land(tmp_path / "landing", f"b{i}.json", batch)
        ingest(table, tmp_path / "landing", tmp_path / "ck", key="id")
    return local_ms(21, 0) - 1, first + second


@pytest.fixture(scope="module")
def two_days(spark, tmp_path_factory):
    """One two-day table for the race tests (each tags a name of its own and leaves main as it
    was); built once, the test that expires its base runs last."""
    table = "lake.test.tag_two_days"
    t0, delivered = two_day_table(table, tmp_path_factory.mktemp("two_days"))
    return table, t0, delivered


def data_files_on_disk(spark, table: str) -> set[str]:
    import glob

    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    root = location.first().data_type.removeprefix("file:")
    return set(glob.glob(root + "/data/**/*.parquet", recursive=True))


def test_a_tag_another_writer_creates_meanwhile_is_not_overwritten(spark, two_days, monkeypatch):
    from sparkext.iceberg import tags as iceberg_tags

    table_name, t0, delivered = two_days
    before = data_files_on_disk(spark, table_name)
    first = spark.table(f"{table_name}.snapshots").orderBy("committed_at").first().snapshot_id
    real = iceberg_tags.commit_tag

    def racing(*args, **kwargs):  # another writer tags the name between plan and commit
        spark.sql(f"ALTER TABLE {table_name} CREATE TAG `et_race` AS OF VERSION {first}")
        return real(*args, **kwargs)

    monkeypatch.setattr(iceberg_tags, "commit_tag", racing)
    with pytest.raises(EventTimeError, match=r"created by another writer.*nothing was committed"):
        make_tag(table_name, t0, "et_race")
    tagged = spark.sql(f"SELECT id FROM {table_name} VERSION AS OF 'et_race'").collect()
    assert sorted(r.id for r in tagged) == [1, 2]  # theirs, untouched
    assert data_files_on_disk(spark, table_name) == before  # our written files were removed
    assert oracle(delivered, t0)[1]["name"] == "n30"  # the call had a change to write


def test_a_table_without_snapshots_has_nothing_to_tag(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id bigint, ts timestamp) USING iceberg")
    with pytest.raises(EventTimeError, match="has no snapshot yet"):
        make_tag(table_name, 0, "x")


def test_the_table_function_ignores_a_tag_someone_moved(spark, two_days):
    table_name, t0, delivered = two_days
    make_tag(table_name, t0, "et_moved")
    first = spark.table(f"{table_name}.snapshots").orderBy("committed_at").first().snapshot_id
    spark.sql(f"ALTER TABLE {table_name} REPLACE TAG `et_moved` AS OF VERSION {first}")
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=t0)
    result = computed_state(spark, resolve_table(spark, table_name), moment)
    assert result.mode == "cdc"  # computed, not read from the moved tag
    rows = {r.id: r.asDict() for r in result.frame.select("id", "name").collect()}
    assert rows == oracle(delivered, t0)


def test_a_base_expired_while_the_tag_was_built_is_one_sentence(spark, two_days, monkeypatch):
    """Last of the tests on two_days: the base it expires is the day-20 snapshot, which the
    other tests' tags hold; they are dropped first (a snapshot a ref holds cannot expire)."""
    from sparkext.errors import SnapshotExpiredError
    from sparkext.iceberg import tags as iceberg_tags

    table_name, t0, _ = two_days
    for r in spark.table(f"{table_name}.refs").where("type = 'TAG'").collect():
        spark.sql(f"ALTER TABLE {table_name} DROP TAG `{r.name}`")
    real = iceberg_tags.commit_tag

    def expiring(*args, **kwargs):  # maintenance expires the base between plan and commit
        base = kwargs["start_snapshot_id"]
        spark.sql(
            f"CALL lake.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
            f"snapshot_ids => array({base}))"
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(iceberg_tags, "commit_tag", expiring)
    with pytest.raises(SnapshotExpiredError, match=r"expired while the tag was being built"):
        make_tag(table_name, t0, "et_gone")
    refs = spark.table(f"{table_name}.refs").collect()
    assert [r.name for r in refs] == ["main"]
