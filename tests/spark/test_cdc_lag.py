"""``sparkext.cdc_lag``, table_health's lag columns and the service's lag alert.

The oracle is the workload itself: the source commit times and positions the events carry, and a
simulated clock (heartbeat times and ``as_of``) through an idle hour. The real connector's
heartbeats are in tests/spark/test_cdc_real_postgres.py.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

import sparkext
from sparkext.errors import IngestError, SparkextError
from tests.helpers.cdc_calls import binlog_event, ingest, land

pytestmark = pytest.mark.spark

T0 = 1_780_000_000_000  # epoch ms of the workload's first source commit (2026-05-28)
HOUR = 3_600_000


def _event(op: str, key: int, pos: int, at_ms: int) -> dict:
    event = binlog_event(
        op,
        None if op == "c" else {"id": key, "name": "old"},
        None if op == "d" else {"id": key, "name": f"v{pos}"},
        pos,
    )
    event["source"]["ts_ms"] = at_ms
    event["ts_ms"] = at_ms + 40
    return event


def _heartbeats(directory, first_offset: int, times_ms: list[int]) -> None:
    """Heartbeat records as the JSON converter with schemas writes them, as a sink lands them."""
    folder = directory / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    schema = {
        "type": "struct",
        "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
        "optional": False,
        "name": "io.debezium.connector.common.Heartbeat",
        "version": 1,
    }
    lines = [json.dumps({"schema": schema, "payload": {"ts_ms": t}}) for t in times_ms]
    name = f"__debezium-heartbeat.shop+0+{first_offset:010d}.json"
    (folder / name).write_text("\n".join(lines) + "\n")


def _at(ms: int) -> str:
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return f"TIMESTAMP '{stamp.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}+00:00'"


def _lag(table: str, as_of_ms: int, history: bool = False) -> list[dict]:
    options = ", options => map('history', 'true')" if history else ""
    return [
        r.asDict()
        for r in sparkext.sql(
            f"SELECT * FROM sparkext.cdc_lag(table => '{table}', as_of => {_at(as_of_ms)}{options})"
        ).collect()
    ]


def _ms(value: dt.datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:  # collect() gives naive datetimes in the OS zone
        value = value.astimezone()
    return int(value.timestamp() * 1000)


def test_lag_follows_commits_and_stays_right_through_an_idle_hour(spark, tmp_path):
    table = "lake.test.lag_idle"
    landing, beats, checkpoint = tmp_path / "landing", tmp_path / "beats", tmp_path / "ck"
    land(landing, "b1.json", [_event("c", 1, 100, T0), _event("c", 2, 200, T0 + 1_000)])
    options = f"'heartbeat-source', '{beats}'"
    beats.mkdir()
    ingest(table, landing, checkpoint, options=options)  # no heartbeat landed yet

    (now,) = _lag(table, T0 + 5_000)
    assert _ms(now["source_time"]) == T0 + 1_000
    assert now["heartbeat_time"] is None
    assert now["lag_ms"] == 4_000  # without heartbeats: from the newest change applied
    assert now["source_position"] == "binlog file 1, position 200, row 0"
    assert now["position_family"] == "m" and now["batch_id"] == 0
    assert now["checkpoint"] == str(checkpoint)
    assert now["commit_delay_ms"] == _ms(now["committed_at"]) - (T0 + 1_000)

    # an idle hour: the connector writes a heartbeat every 10 s; ingest_cdc runs every 20 min
    # and finds no change; the lag it reports is the truth (now - the newest heartbeat it
    # confirmed) every 5 minutes, within 1 s
    offset, worst = 0, 0
    confirmed: int | None = None
    for minute in range(1, 61):
        now_ms = T0 + 1_000 + minute * 60_000
        times = [now_ms - 60_000 + s * 1_000 for s in range(10, 61, 10)]
        _heartbeats(beats, offset, times)
        offset += len(times)
        if minute % 20 == 0:
            assert ingest(table, landing, checkpoint, options=options)["commits"] == 0
            confirmed = times[-1]
        if minute % 5:
            continue
        (row,) = _lag(table, now_ms)
        truth = now_ms - (confirmed if confirmed is not None else T0 + 1_000)
        worst = max(worst, abs(row["lag_ms"] - truth))
        assert _ms(row["complete_through"]) == now_ms - truth
    assert worst <= 1_000
    assert _ms(row["heartbeat_time"]) == confirmed

    # a change after the hour: its source time is newer than the last heartbeat
    land(landing, "b2.json", [_event("u", 1, 300, T0 + HOUR + 70_000)])
    ingest(table, landing, checkpoint, options=options)
    (now,) = _lag(table, T0 + HOUR + 75_000)
    assert _ms(now["complete_through"]) == T0 + HOUR + 70_000 and now["lag_ms"] == 5_000
    history = _lag(table, T0 + HOUR + 75_000, history=True)
    assert [h["batch_id"] for h in history] == [now["batch_id"], 0]
    assert [_ms(h["source_time"]) for h in history] == [T0 + HOUR + 70_000, T0 + 1_000]


def test_a_failed_run_confirms_no_heartbeat(spark, tmp_path):
    table = "lake.test.lag_failed"
    landing, beats, checkpoint = tmp_path / "landing", tmp_path / "beats", tmp_path / "ck"
    land(landing, "b1.json", [_event("c", 1, 100, T0)])
    _heartbeats(beats, 0, [T0 + 10_000])
    options = f"'heartbeat-source', '{beats}', 'fail-on-reject', 'true'"
    ingest(table, landing, checkpoint, options=options)
    assert _ms(_lag(table, T0 + 20_000)[0]["heartbeat_time"]) == T0 + 10_000

    land(landing, "b2.json", [], raw_lines=['{"op": "x"}'])  # a batch that fails
    _heartbeats(beats, 1, [T0 + 50_000])
    with pytest.raises(SparkextError):
        ingest(table, landing, checkpoint, options=options)
    (row,) = _lag(table, T0 + 60_000)
    assert _ms(row["heartbeat_time"]) == T0 + 10_000 and row["lag_ms"] == 50_000


def test_table_health_and_the_service_show_a_lagging_table(spark, tmp_path):
    table = "lake.lagsvc.orders"
    land(tmp_path / "landing", "b1.json", [_event("c", 1, 100, T0), _event("c", 2, 200, T0)])
    ingest(table, tmp_path / "landing", tmp_path / "ck")
    health = sparkext.sql(f"CALL sparkext.table_health(table => '{table}')").first()
    assert _ms(health["cdc_complete_through"]) == _ms(health["cdc_source_time"]) == T0
    assert health["cdc_source_position"] == "binlog file 1, position 200, row 0"
    spark.sql("CREATE TABLE IF NOT EXISTS lake.lagsvc.plain (id int) USING iceberg")
    spark.sql("INSERT INTO lake.lagsvc.plain VALUES (1)")
    plain = sparkext.sql("CALL sparkext.table_health(table => 'lake.lagsvc.plain')").first()
    assert plain["cdc_complete_through"] is None and plain["cdc_source_position"] is None

    lines: list[str] = []
    service = sparkext.optimize_service(
        "lake.lagsvc.*", once=True, maintenance=False, lag_alert="15 minutes", log=lines.append
    )
    service.run()
    alerts = [line for line in lines if " alert " in line]
    assert len(alerts) == 1 and "lake.lagsvc.orders lag: CDC lag" in alerts[0], lines
    assert "threshold 15 min 0 s" in alerts[0]
    assert set(service.lagging) == {table}
    assert "lagging: lake.lagsvc.orders" in service._status_text()

    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('sparkext.cdc.lag-alert' = '100000 days')")
    calm: list[str] = []
    sparkext.optimize_service(
        "lake.lagsvc.*", once=True, maintenance=False, lag_alert="15 minutes", log=calm.append
    ).run()
    assert not [line for line in calm if " alert " in line], calm


def test_lag_bad_input_is_one_sentence(spark, tmp_path):
    table = "lake.test.lag_bad"
    land(tmp_path / "landing", "b1.json", [_event("c", 1, 100, T0)])
    with pytest.raises(IngestError) as missing:
        ingest(table, tmp_path / "landing", tmp_path / "ck",
               options=f"'heartbeat-source', '{tmp_path / 'nowhere'}'")  # fmt: skip
    assert "does not exist" in str(missing.value) and "heartbeat.interval.ms" in str(missing.value)
    assert not spark.catalog.tableExists(table)  # refused before anything was written

    with pytest.raises(IngestError) as data_topic:
        ingest(table, tmp_path / "landing", tmp_path / "ck",
               options=f"'heartbeat-source', '{tmp_path / 'landing'}'")  # fmt: skip
    assert "not Debezium heartbeats" in str(data_topic.value)
    assert "\n" not in str(data_topic.value)

    ingest(table, tmp_path / "landing", tmp_path / "ck")
    with pytest.raises(SparkextError) as as_of:
        sparkext.sql(f"SELECT * FROM sparkext.cdc_lag(table => '{table}', as_of => 'soon')")
    assert "timestamp" in str(as_of.value).lower()
    spark.sql("CREATE TABLE IF NOT EXISTS lake.test.lag_plain (id int) USING iceberg")
    assert (
        sparkext.sql("SELECT * FROM sparkext.cdc_lag(table => 'lake.test.lag_plain')").count() == 0
    )


def test_a_continuous_ingest_confirms_heartbeats_once_it_has_drained(spark, tmp_path):
    """ingest_cdc_stream's path: a heartbeat read before a trigger that found no new input
    counts, with no commit to carry it (the source is idle)."""
    import time

    table = "lake.test.lag_stream"
    landing, beats, checkpoint = tmp_path / "landing", tmp_path / "beats", tmp_path / "ck"
    land(landing, "b1.json", [_event("c", 1, 100, T0), _event("c", 2, 200, T0 + 1_000)])
    beats.mkdir()
    # an idle stream reports a trigger that found nothing every noDataProgressEventInterval
    # (Spark's default 10 s): 1 s here, so each confirmation below waits seconds, not tens
    idle_report = "spark.sql.streaming.noDataProgressEventInterval"
    previous = spark.conf.get(idle_report, None)
    spark.conf.set(idle_report, "1s")
    query = sparkext.ingest_cdc_stream(
        table, str(landing), str(checkpoint), primary_key="id", create=True,
        options={"heartbeat-source": str(beats)}, interval="1 second",
    )  # fmt: skip

    def heartbeat_seen(expected: int) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            (row,) = _lag(table, T0 + HOUR)
            if _ms(row["heartbeat_time"]) == expected:
                return True
            time.sleep(0.5)
        return False

    try:
        query.processAllAvailable()
        (row,) = _lag(table, T0 + 5_000)
        assert row["heartbeat_time"] is None and _ms(row["source_time"]) == T0 + 1_000
        _heartbeats(beats, 0, [T0 + 30_000, T0 + 60_000])
        assert heartbeat_seen(T0 + 60_000), _lag(table, T0 + HOUR)
        _heartbeats(beats, 2, [T0 + 90_000])  # the source still idle: the next one counts too
        assert heartbeat_seen(T0 + 90_000), _lag(table, T0 + HOUR)
        assert spark.table(table).count() == 2
    finally:
        query.stop()
        if previous is None:
            spark.conf.unset(idle_report)
        else:
            spark.conf.set(idle_report, previous)
    (row,) = _lag(table, T0 + 100_000)
    assert row["lag_ms"] == 10_000 and row["batch_id"] == 0  # no commit carried them
