"""sparkext.dim_join_changelog against a replay oracle (tests/helpers/dim_model.py).

A dimension is built by several ingest_cdc CALLs from a simulated MySQL table (updates,
deletes, keys re-used after a delete, late and duplicate delivery, one truncate, clocks that
tie or run behind the binlog); facts fall before, between, exactly on and after its event
times. Every answer is compared row for row with the model, which replays events in SOURCE
POSITION order up to each fact's time and shares no code with sparkext.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
from pyspark.sql import functions as F

import sparkext
from tests.helpers.cdc_calls import binlog_event, ingest, land
from tests.helpers.cdc_source import Delivery, SourceTable, event_time, position, state_as_of
from tests.helpers.dim_model import (
    Fact,
    expected_join,
    expected_lookup,
    key_of,
    rows_at,
    state_at,
)
from tests.helpers.zones import session_zone

SOURCE_SEED = 20261227  # 4 batches of 70 steps: exactly one truncate, in the third batch
DELIVERY_SEED = 31
DISTORT_SEED = 47
FACTS_SEED = 59
KEY_SPACE = 40
BATCHES = 4
STEPS = 70
FACTS = 280  # the stress tier's; the default tier's workload has FEW_FACTS
FEW_FACTS = 140
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
SHANGHAI = "Asia/Shanghai"
FACT_COLUMNS = ["fid", "cust", "ts", "note"]
DIM_COLUMNS = ["name", "qty", "price"]
AUDIT = ["_dim_version", "_dim_valid_from"]

# Three product bugs this oracle found (fixed in sparkext/actions/history/versions.py): a change at
# exactly the latest fact's millisecond was lost when only its own log held it; a change older in
# the binlog than a delete, or a truncate, before the earliest fact became valid.


# ---- the model on its own ------------------------------------------------------------------


def _image_event(op: str, key: int, pos: int, ts_ms: int, name: str | None = None) -> dict:
    before = None if op == "c" else {"id": key, "name": "before"}
    after = None if op == "d" else {"id": key, "name": name}
    event = binlog_event(op, before, after, pos)
    event["source"]["ts_ms"] = ts_ms
    return event


def _truncate(pos: int, ts_ms: int) -> dict:
    event = binlog_event("t", None, None, pos)
    event["source"]["ts_ms"] = ts_ms
    return event


def test_model_orders_by_position_where_the_source_clock_runs_behind():
    """Key 1's update is newer in the binlog (pos 20) but its clock reads earlier (5 s) than the
    insert it replaces (pos 10, 9 s): the position rule keeps the update once both count; a
    replay in event-time order would let the older insert win."""
    older = _image_event("c", 1, 10, 9_000, "insert")
    newer = _image_event("u", 1, 20, 5_000, "update")
    events = [older, newer]
    picked = {t: state_at(events, t).get(1) for t in (4_999, 5_000, 8_999, 9_000, 60_000)}
    assert {t: v and (v.row["name"], v.event_time_ms) for t, v in picked.items()} == {
        4_999: None,
        5_000: ("update", 5_000),
        8_999: ("update", 5_000),
        9_000: ("update", 5_000),  # both count: pos 20 > pos 10
        60_000: ("update", 5_000),
    }
    # the event-time replay of tests/helpers/cdc_source disagrees exactly there
    assert state_as_of(events, 9_000)[1]["name"] == "insert"
    assert state_as_of(events, 8_999)[1]["name"] == "update"


def test_model_ties_deletes_reuse_and_truncates():
    events = [
        _image_event("c", 1, 10, 1_000, "a"),
        _image_event("u", 1, 11, 1_000, "b"),  # same ms: the newer position decides
        _image_event("c", 2, 12, 2_000, "x"),
        _image_event("d", 2, 13, 3_000),
        _image_event("c", 2, 14, 4_000, "x again"),  # key re-used after its delete
        _truncate(20, 5_000),
        _image_event("c", 3, 21, 6_000, "after"),
        _image_event("u", 1, 19, 7_000, "late clock"),  # older than the truncate in position
        _image_event("c", 4, 22, 4_500, "early clock"),  # newer than the truncate, clock behind
    ]
    moments = (999, 1_000, 2_000, 3_000, 4_000, 4_500, 4_999, 5_000, 6_000, 7_000)
    names = {t: {k: v.row["name"] for k, v in state_at(events, t).items()} for t in moments}
    assert names == {
        999: {},
        1_000: {1: "b"},
        2_000: {1: "b", 2: "x"},
        3_000: {1: "b"},
        4_000: {1: "b", 2: "x again"},
        4_500: {1: "b", 2: "x again", 4: "early clock"},
        4_999: {1: "b", 2: "x again", 4: "early clock"},
        5_000: {4: "early clock"},  # the truncate (pos 20) ends keys 1 and 2, not key 4 (pos 22)
        6_000: {3: "after", 4: "early clock"},
        7_000: {3: "after", 4: "early clock"},  # key 1's pos 19 is older than the truncate
    }
    assert rows_at(events) == {3: {"id": 3, "name": "after"}, 4: {"id": 4, "name": "early clock"}}
    assert state_at(events, Fraction(4_499_999, 1000)).get(4) is None  # 1 µs before its change


# ---- the workload --------------------------------------------------------------------------


@dataclass
class Workload:
    dimension: str
    facts_table: str
    facts: list[Fact]
    notes: dict[int, str | None]
    delivered: list[dict]  # every event landed, duplicates and late ones included
    calls: list[tuple[int, list[dict]]]  # (snapshot id, events landed) after each CALL
    firsts: list[tuple[int, bool]]  # each CALL's earliest event time; first landed then?


def _distort(new: list[dict], earlier: list[dict], rng: random.Random, skews: int, ties: int):
    """Give some events a source clock behind (skew) or equal to (tie) the previous event of
    their key, which is older in position; the simulator's clock otherwise only rises."""
    latest: dict[int, dict] = {}
    for event in earlier:
        if event["op"] != "t":
            latest[key_of(event)] = event
    candidates = []
    for event in new:
        if event["op"] == "t":
            continue
        key = key_of(event)
        if key in latest:
            candidates.append((event, latest[key]))
        latest[key] = event
    picks = sorted(rng.sample(candidates, skews + ties), key=lambda pair: position(pair[0]))
    chosen = set(rng.sample(range(len(picks)), skews))
    for i, (event, previous) in enumerate(picks):
        behind = rng.randint(1, 3_000) if i in chosen else 0
        event["source"]["ts_ms"] = event_time(previous) - behind
    return [pair for i, pair in enumerate(picks) if i in chosen]


def _micros(ms: int) -> int:
    return ms * 1000


def _make_facts(
    rng: random.Random,
    delivered: list[dict],
    skewed,
    batch_mins: list[tuple[int, int, bool]],
    count: int = FACTS,
) -> list[Fact]:
    """Facts before, between, exactly on and after event times; unknown and NULL keys, NULL
    times; and by name: around the truncate, on skewed events, on each CALL's first event."""
    times = sorted({event_time(e) for e in delivered})
    truncate_ms = next(event_time(e) for e in delivered if e["op"] == "t")
    picked: list[tuple[int | None, int | None]] = []
    for key in rng.sample(range(KEY_SPACE), 8):
        picked += [(key, _micros(truncate_ms) + d) for d in (-1, 0, 1)]
    for event, previous in skewed:
        key = key_of(event)
        mid = (event_time(event) + event_time(previous)) // 2
        for ms in (event_time(event), event_time(previous), mid):
            picked += [(key, _micros(ms)), (key, _micros(ms) - 1)]
    picked += [(key, _micros(ms)) for key, ms, _ in batch_mins]
    picked += [(None, _micros(times[len(times) // 2])), (3, None), (None, None)]
    while len(picked) < count:
        roll = rng.random()
        if roll < 0.8:
            key = rng.randrange(KEY_SPACE)
        elif roll < 0.92:
            key = 1_000 + rng.randrange(20)  # never in the dimension
        else:
            key = None
        i = rng.randrange(len(times))
        roll = rng.random()
        if roll < 0.3:
            when = _micros(times[i])  # exactly on a change
        elif roll < 0.4:
            when = _micros(times[i]) - 1
        elif roll < 0.5:
            when = _micros(times[i]) + 1
        elif roll < 0.75 and i + 1 < len(times):
            when = rng.randrange(_micros(times[i]), _micros(times[i + 1]) + 1)  # between
        elif roll < 0.82:
            when = _micros(times[0]) - rng.randint(1, 10**9)  # before every change
        elif roll < 0.92:
            when = _micros(times[-1]) + rng.randint(1, 10**9)  # after every change
        else:
            when = None
        picked.append((key, when))
    return [Fact(i, key, when) for i, (key, when) in enumerate(picked, 1)]


def _current_snapshot(spark, table: str) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first()[0]


def _write_facts(spark, table: str, facts: list[Fact], notes: dict[int, str | None]) -> None:
    spark.sql(
        f"CREATE TABLE {table} (fid BIGINT, cust BIGINT, ts TIMESTAMP, note STRING) USING iceberg"
    )
    rows = [(f.id, f.key, f.time_us, notes[f.id]) for f in facts]
    frame = spark.createDataFrame(rows, "fid BIGINT, cust BIGINT, us BIGINT, note STRING")
    frame.select("fid", "cust", F.timestamp_micros("us").alias("ts"), "note").writeTo(
        table
    ).append()


@pytest.fixture(scope="module")
def dimension(spark, tmp_path_factory) -> dict:
    """The dimension, built once for both tiers' facts."""
    tmp = tmp_path_factory.mktemp("dim_oracle")
    dimension = "lake.test.dim_oracle_customers"
    source = SourceTable(seed=SOURCE_SEED, key_space=KEY_SPACE)
    delivery = Delivery(tmp / "landing", seed=DELIVERY_SEED, duplicate_rate=0.08, late_rate=0.15)
    rng = random.Random(DISTORT_SEED)
    calls, skewed, batch_mins = [], [], []
    held = 0
    for number in range(BATCHES):
        earlier = list(source.events)
        new = source.run(STEPS)
        skewed += _distort(new, earlier, rng, skews=3, ties=2)
        batch = delivery.deliver(new, final=number == BATCHES - 1)
        held += len({id(e) for e in new} - {id(e) for e in batch})  # land in a later CALL
        first = min(batch, key=event_time)
        fresh = position(first) not in {position(e) for e in delivery.delivered[: -len(batch)]}
        batch_mins.append((key_of(first), event_time(first), fresh))
        ingest(dimension, tmp / "landing", tmp / "checkpoint")
        calls.append((_current_snapshot(spark, dimension), list(delivery.delivered)))
    delivered = delivery.delivered
    distinct = {position(e): e for e in delivered}
    history = sorted(distinct.values(), key=position)
    ops = [e["op"] for e in history]
    assert ops.count("t") == 1 and ops.count("d") > 0 and ops.count("u") > 0
    assert held > 0 and len(delivered) > len(distinct)  # landed late, and twice
    assert len(distinct) <= 400
    per_key: dict[int, str] = {}
    for event in history:
        if event["op"] != "t":
            per_key[key_of(event)] = per_key.get(key_of(event), "") + event["op"]
    assert any("dc" in trail for trail in per_key.values())  # a key inserted again after a delete
    assert any(fresh for _, _, fresh in batch_mins)  # a CALL first landed its earliest event
    return {
        "dimension": dimension,
        "delivered": delivered,
        "skewed": skewed,
        "batch_mins": batch_mins,
        "calls": calls,
    }


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(FEW_FACTS, id=f"{FEW_FACTS}-facts"),
        pytest.param(FACTS, id=f"{FACTS}-facts", marks=pytest.mark.stress),
    ],
)
def workload(spark, dimension, request) -> Workload:
    """The facts (FEW_FACTS in the default tier, FACTS in the stress tier: the by-name facts
    in both, fewer random ones) over the one dimension."""
    count = request.param
    facts_table = f"lake.test.dim_oracle_facts_{count}"
    delivered, skewed, batch_mins = (dimension[k] for k in ("delivered", "skewed", "batch_mins"))
    calls = dimension["calls"]
    facts = _make_facts(random.Random(FACTS_SEED), delivered, skewed, batch_mins, count)
    notes = {f.id: random.Random(f.id).choice(["web", "app", None, "ü;x"]) for f in facts}
    skew_matters = [
        f
        for f in facts
        if f.key is not None
        and f.time_us is not None
        and rows_at(delivered, Fraction(f.time_us, 1000)).get(f.key)
        != state_as_of(delivered, f.time_us // 1000).get(f.key)
    ]
    assert skew_matters  # facts an event-time replay would answer otherwise
    _write_facts(spark, facts_table, facts, notes)
    return Workload(
        dimension["dimension"],
        facts_table,
        facts,
        notes,
        delivered,
        calls,
        [(ms, fresh) for _, ms, fresh in batch_mins],
    )


# ---- comparing ----------------------------------------------------------------------------


def _position_text(found: tuple[int, int, int]) -> str:
    """A MySQL position as the product documents it (sparkext/planning/positions.py): fixed-width
    file, pos and row, so that text order is binlog order."""
    file, pos, row = found
    return f"m:{file:010d}:{pos:020d}:{row:010d}"


def _collect(frame, dim_columns=DIM_COLUMNS) -> list[tuple]:
    """The rows, times as epoch microseconds (no OS or session zone involved), sorted."""
    assert frame.columns == FACT_COLUMNS + dim_columns + AUDIT
    rows = frame.select(
        "fid",
        "cust",
        F.unix_micros("ts"),
        "note",
        *dim_columns,
        "_dim_version",
        F.unix_micros("_dim_valid_from"),
    ).collect()
    return sorted((tuple(r) for r in rows), key=repr)


def _expected_event_rows(
    facts: list[Fact], notes: dict, events: list[dict], join: str, dim_columns=DIM_COLUMNS
) -> list:
    found = expected_join(facts, events, join)
    by_id = {f.id: f for f in facts}
    rows = []
    for fid, version in found.items():
        fact = by_id[fid]
        head = (fid, fact.key, fact.time_us, notes[fid])
        if version is None:
            rows.append((*head, *(None for _ in dim_columns), None, None))
        else:
            image = tuple(version.row[c] for c in dim_columns)
            label = _position_text(version.position)
            rows.append((*head, *image, label, _micros(version.event_time_ms)))
    return sorted(rows, key=repr)


def _expected_lookup_rows(
    work: Workload, events: list[dict], join: str, snapshot_id: int, committed_us: int
) -> list:
    found = expected_lookup(work.facts, events, join)
    by_id = {f.id: f for f in work.facts}
    rows = []
    for fid, row in found.items():
        fact = by_id[fid]
        head = (fid, fact.key, fact.time_us, work.notes[fid])
        if row is None:
            rows.append((*head, None, None, None, None, None))
        else:
            image = tuple(row[c] for c in DIM_COLUMNS)
            rows.append((*head, *image, str(snapshot_id), committed_us))
    return sorted(rows, key=repr)


def _event_join(facts: str, dimension: str, join: str):
    return sparkext.sql(
        f"SELECT * FROM sparkext.dim_join_changelog('{facts}', '{dimension}', 'f.cust = d.id', "
        f"'ts', 'event', map('join', '{join}', 'audit', 'true'))"
    )


def _first_difference(got: list, want: list) -> str:
    extra, missing = sorted(set(got) - set(want), key=repr), sorted(set(want) - set(got), key=repr)
    return f"{len(extra)} unexpected, e.g. {extra[:3]}; {len(missing)} missing, e.g. {missing[:3]}"


# ---- event mode ----------------------------------------------------------------------------


@pytest.mark.parametrize("join", ["left", "inner"])
def test_event_mode_equals_the_replay_for_every_fact(spark, workload, join):
    got = _collect(_event_join(workload.facts_table, workload.dimension, join))
    want = _expected_event_rows(workload.facts, workload.notes, workload.delivered, join)
    assert got == want, _first_difference(got, want)
    hits = [r for r in want if r[-1] is not None]
    assert 0 < len(hits) < len(workload.facts)  # both hits and misses were exercised


def _windows(work: Workload) -> dict[str, tuple[int, int | None]]:
    """Fact-time windows (µs) that make the base state matter: one starting just after the
    truncate; one ending exactly on the earliest event of a CALL that first landed it (a change
    at exactly the latest fact's time counts)."""
    truncate_ms = next(event_time(e) for e in work.delivered if e["op"] == "t")
    end = _micros(max(ms for ms, fresh in work.firsts if fresh))
    return {
        "after-truncate": (_micros(truncate_ms) + 1, None),
        "on-a-call": (end - 3_600 * 10**6, end),
    }


@pytest.mark.parametrize(
    "window",
    [
        "after-truncate",
        "on-a-call",
    ],
)
def test_event_mode_on_a_query_of_later_facts_starts_from_the_base_state(spark, workload, window):
    low, high = _windows(workload)[window]
    where = f"ts >= timestamp_micros({low})"
    if high is not None:
        where += f" AND ts <= timestamp_micros({high})"
    chosen = [
        f
        for f in workload.facts
        if f.time_us is not None and low <= f.time_us and (high is None or f.time_us <= high)
    ]
    got = _collect(
        _event_join(
            f"SELECT * FROM {workload.facts_table} WHERE {where}", workload.dimension, "left"
        )
    )
    want = _expected_event_rows(chosen, workload.notes, workload.delivered, "left")
    assert got == want, _first_difference(got, want)


# ---- processing mode -----------------------------------------------------------------------


def _processing(facts: str, dimension: str, join: str, as_of: str = ""):
    pin = f", 'as-of', '{as_of}'" if as_of else ""
    return sparkext.sql(
        f"SELECT * FROM sparkext.dim_join_changelog('{facts}', '{dimension}', 'f.cust = d.id', "
        f"NULL, 'processing', map('join', '{join}', 'audit', 'true'{pin}))"
    )


def _committed_us(spark, table: str, snapshot_id: int) -> int:
    return spark.sql(
        f"SELECT unix_micros(committed_at) FROM {table}.snapshots WHERE snapshot_id = {snapshot_id}"
    ).first()[0]


@pytest.mark.parametrize("join", ["left", "inner"])
def test_processing_mode_equals_the_full_replay(spark, workload, join):
    current, landed = workload.calls[-1]
    assert landed == workload.delivered
    got = _collect(_processing(workload.facts_table, workload.dimension, join))
    committed = _committed_us(spark, workload.dimension, current)
    want = _expected_lookup_rows(workload, landed, join, current, committed)
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("call", [1, 2])  # just before and just after the truncate's CALL
def test_processing_mode_as_of_an_earlier_snapshot(spark, workload, call):
    snapshot_id, landed = workload.calls[call]
    assert rows_at(landed) != rows_at(workload.delivered)  # the pin does change the answer
    got = _collect(_processing(workload.facts_table, workload.dimension, "left", str(snapshot_id)))
    committed = _committed_us(spark, workload.dimension, snapshot_id)
    want = _expected_lookup_rows(workload, landed, "left", snapshot_id, committed)
    assert got == want, _first_difference(got, want)


# ---- a session zone other than UTC ----------------------------------------------------------


def _shanghai_literal(micros: int | None) -> str:
    """A TIMESTAMP literal of ``micros`` as a wall clock in Asia/Shanghai (computed here with
    zoneinfo, not with sparkext's own time module)."""
    if micros is None:
        return "NULL"
    wall = (EPOCH + dt.timedelta(microseconds=micros)).astimezone(ZoneInfo(SHANGHAI))
    return f"TIMESTAMP '{wall.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def test_a_shanghai_session_moves_no_answer(spark, workload):
    """Facts written as TIMESTAMP literals in an Asia/Shanghai session, joined in that session:
    the same instants, so the same versions as in UTC; the UTC-written facts too."""
    table = f"lake.test.dim_oracle_facts_shanghai_{len(workload.facts)}"
    facts = workload.facts[::2]
    with session_zone(spark, SHANGHAI):
        spark.sql(
            f"CREATE TABLE {table} (fid BIGINT, cust BIGINT, ts TIMESTAMP, note STRING) "
            "USING iceberg"
        )
        values = ", ".join(
            f"({f.id}, {'NULL' if f.key is None else f.key}, {_shanghai_literal(f.time_us)}, "
            f"{'NULL' if workload.notes[f.id] is None else repr(workload.notes[f.id])})"
            for f in facts
        )
        spark.sql(f"INSERT INTO {table} VALUES {values}")
        written = _collect(_event_join(table, workload.dimension, "left"))
        utc_written = _collect(_event_join(workload.facts_table, workload.dimension, "inner"))
        first_id, first_landed = workload.calls[0]
        committed = _committed_us(spark, workload.dimension, first_id)
        wall = (EPOCH + dt.timedelta(microseconds=committed)).astimezone(ZoneInfo(SHANGHAI))
        pinned = _collect(
            _processing(
                workload.facts_table,
                workload.dimension,
                "left",
                wall.strftime("%Y-%m-%d %H:%M:%S.%f"),  # a Shanghai wall clock: the first commit
            )
        )
        assert spark.conf.get("spark.sql.session.timeZone") == SHANGHAI
    want = _expected_event_rows(facts, workload.notes, workload.delivered, "left")
    assert written == want, _first_difference(written, want)
    want = _expected_event_rows(workload.facts, workload.notes, workload.delivered, "inner")
    assert utc_written == want, _first_difference(utc_written, want)
    want = _expected_lookup_rows(workload, first_landed, "left", first_id, committed)
    assert pinned == want, _first_difference(pinned, want)


# ---- by name: a clock that runs behind the binlog, a change exactly at the latest fact -------

SECOND = 1_000  # ms
# customers(id, name) from two CALLs; times in seconds after the epoch, binlog positions:
# key 1: insert (pos 10, 10 s), delete (pos 30, 20 s), then an update older in the binlog
#        (pos 20) whose clock reads 30 s: older than the delete, it never decides;
# truncate (pos 40, 40 s); key 3: an insert older than the truncate (pos 35), clock 60 s;
# key 4: insert (pos 50, 45 s); second CALL: its update (pos 60, 70 s), that CALL's only event.
HAND_CALLS = (
    [
        _image_event("c", 1, 10, 10 * SECOND, "k1"),
        _image_event("d", 1, 30, 20 * SECOND),
        _image_event("u", 1, 20, 30 * SECOND, "k1 behind the delete"),
        _truncate(40, 40 * SECOND),
        _image_event("c", 3, 35, 60 * SECOND, "k3 behind the truncate"),
        _image_event("c", 4, 50, 45 * SECOND, "k4"),
    ],
    [_image_event("u", 4, 60, 70 * SECOND, "k4 v2")],
)
HAND_EVENTS = [e for call in HAND_CALLS for e in call]
HAND_FACTS = [
    Fact(1, 1, 25 * SECOND * 1000),
    Fact(2, 1, 35 * SECOND * 1000),
    Fact(3, 3, 39 * SECOND * 1000),
    Fact(4, 3, 55 * SECOND * 1000),
    Fact(5, 3, 65 * SECOND * 1000),
    Fact(6, 4, 46 * SECOND * 1000),
    Fact(7, 4, 70 * SECOND * 1000),
]


def test_model_on_the_hand_built_dimension():
    names = {
        fid: version and version.row["name"]
        for fid, version in expected_join(HAND_FACTS, HAND_EVENTS, "left").items()
    }
    assert names == {1: None, 2: None, 3: None, 4: None, 5: None, 6: "k4", 7: "k4 v2"}
    # an event-time replay would answer facts 2 and 5 otherwise: the clocks run behind there
    replay = {f.id: state_as_of(HAND_EVENTS, f.time_us // 1000).get(f.key) for f in HAND_FACTS}
    assert replay[2]["name"] == "k1 behind the delete"
    assert replay[5]["name"] == "k3 behind the truncate"


@pytest.fixture(scope="module")
def hand_built(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dim_hand")
    dimension, facts_table = "lake.test.dim_oracle_hand", "lake.test.dim_oracle_hand_facts"
    landing, checkpoint = tmp / "landing", tmp / "checkpoint"
    for number, events in enumerate(HAND_CALLS, 1):
        land(landing, f"{number}.json", events)
        ingest(dimension, landing, checkpoint)
    _write_facts(spark, facts_table, HAND_FACTS, {f.id: None for f in HAND_FACTS})
    return dimension, facts_table


def _hand_case(hand_built, key: int, since_s: int | None = None) -> tuple[list, list]:
    """The product's and the model's rows for the facts of ``key`` (from ``since_s``)."""
    dimension, facts_table = hand_built
    since_us = None if since_s is None else since_s * 10**6
    where = f"cust = {key}" + (
        "" if since_us is None else f" AND ts >= timestamp_micros({since_us})"
    )
    got = _collect(
        _event_join(f"SELECT * FROM {facts_table} WHERE {where}", dimension, "left"), ["name"]
    )
    chosen = [f for f in HAND_FACTS if f.key == key and (since_us is None or f.time_us >= since_us)]
    notes = {f.id: None for f in chosen}
    return got, _expected_event_rows(chosen, notes, HAND_EVENTS, "left", ["name"])


HAND_CASES = {  # (key, facts from this second on)
    "truncate-inside": (3, None),
    "behind-a-delete": (1, None),
    "behind-a-truncate": (3, 55),
    "at-the-latest-fact": (4, None),
}


@pytest.fixture(scope="module")
def hand_answers(spark, hand_built):
    """Each by-name case's (product rows, model rows), computed two queries at a time (both
    cores busy); each test below checks its own case (a failure is raised there)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_hand_case, hand_built, key, since)
            for name, (key, since) in HAND_CASES.items()
        }
        for future in futures.values():
            future.exception()  # every query done before the first test reads its own
    return futures


def test_hand_built_control_the_truncate_inside_the_facts_range(spark, hand_answers):
    """Key 3 from 39 s: the truncate lies inside the facts' range and ends the insert."""
    got, want = hand_answers["truncate-inside"].result()
    assert got == want


def test_a_change_behind_a_delete_before_the_first_fact_stays_deleted(spark, hand_answers):
    """Facts of key 1 at 25 s and 35 s: the update at 30 s is older in the binlog than the
    delete at 20 s, so at 35 s the delete still decides."""
    got, want = hand_answers["behind-a-delete"].result()
    assert got == want


def test_a_change_behind_a_truncate_before_the_first_fact_stays_truncated(spark, hand_answers):
    """Facts of key 3 at 55 s and 65 s: the truncate (40 s) is before the first fact; the insert
    at 60 s is older than it in the binlog, so at 65 s key 3 is still gone."""
    got, want = hand_answers["behind-a-truncate"].result()
    assert got == want


def test_a_change_exactly_at_the_latest_fact_counts(spark, hand_answers):
    """Facts of key 4 at 46 s and 70 s: the update at exactly 70 s (the only event of the second
    CALL) counts for the fact at 70 s."""
    got, want = hand_answers["at-the-latest-fact"].result()
    assert got == want
