"""Equality runs: consecutive snapshots whose only deletes are equality deletes (Flink upserts,
ingest_cdc batches) are read with each reached data file ONCE, and still replay exactly.

For snapshot ranges S1 < S2 of each history (each single commit and the whole history in the
default tier, every pair in the stress tier: tests/helpers/ranges.py): replaying changelog(S1, S2)
onto the table read at S1 gives the table read at S2 (stock Iceberg time travel), and the net
changes are the multiset differences of the two states. The histories put REPLACE snapshots
(compaction, rewrite_equality_deletes) inside runs, break runs with position deletes, update one
key in every commit of a run, and scope equality deletes to partitions.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import sparkext
from sparkext.actions.history.changelog import changelog
from sparkext.iceberg.catalog import resolve_table
from sparkext.iceberg.changelog import ChangelogTable
from sparkext.planning.changelog import RangeRequest, Role, needs, plan_reads, resolve_range
from tests.helpers.cdc_calls import events, ingest, land
from tests.helpers.changelog_area_union import collect_each
from tests.helpers.iceberg import flink_commit
from tests.helpers.ranges import EVERY_PAIR, ranges

MOR = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def _create(spark, name: str, columns: str, partitioned_by: str = "") -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in MOR.items())
    spark.sql(
        f"CREATE TABLE {name} ({columns}) USING iceberg {partitioned_by} TBLPROPERTIES ({props})"
    )


def _ids(spark, name: str) -> list[int]:
    return [
        r.snapshot_id
        for r in spark.sql(
            f"SELECT snapshot_id FROM {name}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at"
        ).collect()
    ]


def _states(spark, name: str, sids: list[int], columns: list[str]) -> dict[int, Counter]:
    """Each snapshot's rows by stock time travel, in that snapshot's schema (columns taken by
    position: a renamed column keeps its place), all read in one Spark job."""
    frames = {}
    for sid in sids:
        frame = spark.sql(f"SELECT * FROM {name} VERSION AS OF {sid}")
        assert len(frame.columns) == len(columns)
        frames[sid] = frame.toDF(*(f"_c{i}" for i in range(len(columns))))
    return {sid: Counter(rows) for sid, rows in collect_each(frames).items()}


def _changes(spark, name: str, start: int | None, end: int, net: bool, columns: list[str]) -> list:
    args = f"table => '{name}', end => '{end}'" + (f", start => '{start}'" if start else "")
    if net:
        args += ", options => map('net-changes', 'true')"
    found = sparkext.sql(f"SELECT * FROM sparkext.changelog({args})", spark)
    quoted = [f"`{c}`" for c in columns]
    return [tuple(r) for r in found.select(*quoted, "_change_type").collect()]


def _ranges_replay(spark, name: str, columns: list[str], every_pair: bool) -> int:
    """Checks the ranges of the tier; returns the number of snapshots of the history."""
    ids = [None, *_ids(spark, name)]
    pairs = ranges(ids, every_pair)
    # a few reads at a time (the states by stock time travel, then the changelogs): Spark runs a
    # query's stages one after another, concurrent queries keep both cores busy (the assertions
    # run on this thread)
    calls = [(*pair, net) for pair in pairs for net in (False, True)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        read = pool.submit(_states, spark, name, ids[1:], columns)  # one job for every state
        results = list(pool.map(lambda c: _changes(spark, name, *c, columns), calls))
        states = {None: Counter(), **read.result()}
    found = dict(zip(calls, results, strict=True))
    for start, end in pairs:
        every = found[start, end, False]
        replayed = Counter(states[start])
        for *row, change in every:
            replayed[tuple(row)] += 1 if change == "INSERT" else -1
        assert +replayed == states[end] and -replayed == Counter(), (start, end, every)
        net = found[start, end, True]
        inserted = Counter(tuple(r) for *r, c in net if c == "INSERT")
        deleted = Counter(tuple(r) for *r, c in net if c == "DELETE")
        assert inserted == states[end] - states[start], (start, end)
        assert deleted == states[start] - states[end], (start, end)
    return len(ids) - 1


def _plan(spark, name: str):
    source = ChangelogTable(spark, resolve_table(spark, name))
    found = resolve_range(source.history(), None, None)
    files = {c.ordinal: source.snapshot_files(c, needs(c)) for c in found.changes}
    parents = {c.ordinal: needs(c).parent_deletes for c in found.changes}
    return plan_reads(found.changes, files, parents)


@pytest.fixture
def name():
    return f"lake.test.eqrun_{uuid.uuid4().hex[:8]}"


@EVERY_PAIR
def test_flink_runs_with_a_compaction_inside_and_a_position_delete_between(every_pair, spark, name):
    _create(spark, name, "id INT, v STRING")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")

    def upsert(*rows, gone=()):
        flink_commit(
            spark,
            name,
            ["id"],
            [{"id": i, "v": v} for i, v in rows],
            [{"id": i} for i, _ in rows] + [{"id": i} for i in gone],
        )

    upsert((1, "a1"), (6, "f"))  # run 1
    upsert((1, "a2"), (2, "b1"), gone=[3])
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{name.removeprefix('lake.')}', "
        "options => map('min-input-files', '1', 'delete-file-threshold', '1'))"
    )  # REPLACE inside the run: later deletes reach the compacted file instead
    upsert((1, "a3"), gone=[6, 42])  # 42 was never there
    spark.sql(f"DELETE FROM {name} WHERE id = 4")  # position deletes: the run ends
    upsert((1, "a4"), (4, "d-again"))  # run 2
    upsert((2, "b2"), gone=[5])
    plan = _plan(spark, name)
    roles = Counter(r.role for r in plan.reads)
    assert roles[Role.CANDIDATE] >= 2 and len(plan.key_deletes) == 5
    # each file is a candidate at most once per run
    candidates = [(r.path, r.ordinal) for r in plan.reads if r.role == Role.CANDIDATE]
    runs = {1: (1, 2, 3), 2: (5, 6)}
    for ordinals in runs.values():
        paths = [p for p, o in candidates if o in ordinals]
        assert len(paths) == len(set(paths))
    assert _ranges_replay(spark, name, ["id", "v"], every_pair) == 8


@EVERY_PAIR
def test_ingest_cdc_batches_updating_the_same_keys(every_pair, spark, tmp_path, name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    batches = [
        [("c", 1, 10, "a"), ("c", 2, 11, "b"), ("c", 3, 12, "c")],
        [("u", 1, 20, "a2"), ("d", 2, 21, None), ("c", 4, 22, "d")],
        [("u", 1, 30, "a3"), ("u", 4, 31, "d2"), ("c", 2, 32, "b-again")],
        [("u", 1, 40, "a4"), ("d", 3, 41, None), ("u", 1, 42, "a5")],
    ]
    for number, batch in enumerate(batches):
        land(landing, f"{number}.json", events(*batch))
        ingest(name, landing, checkpoint)
        if number == 1:  # a REPLACE between two batches of the run
            sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{name}')").collect()
    plan = _plan(spark, name)
    # one run from the first batch: every file is read once, as written, and matched by key
    assert {r.role for r in plan.reads} == {Role.ADDED}
    assert len({r.path for r in plan.reads}) == len(plan.reads)
    assert any(r.reach for r in plan.reads)
    columns = [c for c in spark.table(name).columns]
    assert _ranges_replay(spark, name, columns, every_pair) == 5
    # the last batch changed key 1 twice: its DELETE is the row batch 3 wrote
    last = _ids(spark, name)[-2]
    found = changelog(spark, resolve_table(spark, name), RangeRequest(start=str(last)))
    deleted = [r.name for r in found.where("id = 1 AND _change_type = 'DELETE'").collect()]
    assert deleted == ["a3"]


@EVERY_PAIR
def test_partition_scoped_equality_deletes_match_only_their_partition(every_pair, spark, name):
    _create(spark, name, "id INT, p STRING, v STRING", "PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'x', 'old-x'), (1, 'y', 'old-y'), (2, 'y', 'b')")
    flink_commit(spark, name, ["id"], [{"id": 1, "p": "x", "v": "new-x"}], [{"id": 1, "p": "x"}])
    flink_commit(spark, name, ["id"], [], [{"id": 2, "p": "x"}])  # no id 2 in partition x
    flink_commit(spark, name, ["id"], [], [{"id": 2, "p": "y"}])
    plan = _plan(spark, name)
    assert len(plan.key_deletes) == 3
    first = _ids(spark, name)[0]
    found = changelog(spark, resolve_table(spark, name), RangeRequest(start=str(first)))
    assert sorted((r.id, r.p, r.v, r._change_type) for r in found.collect()) == [
        (1, "x", "new-x", "INSERT"),
        (1, "x", "old-x", "DELETE"),
        (2, "y", "b", "DELETE"),
    ]
    assert _ranges_replay(spark, name, ["id", "p", "v"], every_pair) == 4


@EVERY_PAIR
def test_a_renamed_equality_column_takes_the_general_reads(every_pair, spark, name):
    _create(spark, name, "id INT, v STRING")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    flink_commit(spark, name, ["id"], [{"id": 1, "v": "a1"}], [{"id": 1}])
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN id TO key")
    flink_commit(spark, name, ["key"], [{"key": 2, "v": "b1"}], [{"key": 2}])
    plan = _plan(spark, name)
    assert plan.key_deletes == () and not any(r.role == Role.CANDIDATE for r in plan.reads)
    assert _ranges_replay(spark, name, ["key", "v"], every_pair) == 3


def _sorted_changes(name: str, start: int) -> list[tuple]:
    found = sparkext.sql(f"SELECT * FROM sparkext.changelog(table => '{name}', start => '{start}')")
    return sorted(tuple(r) for r in found.drop("_commit_timestamp").collect())


def test_a_rename_after_a_range_was_read_is_seen_by_the_next_read(spark, name):
    """What the process learnt about a snapshot (its delete files) is cached; the names of their
    equality columns are not (they are the current schema's)."""
    _create(spark, name, "id INT, v INT")
    spark.sql(f"INSERT INTO {name} VALUES (1, 10), (2, NULL)")
    first = _ids(spark, name)[0]
    flink_commit(spark, name, ["id"], [{"id": 1, "v": 11}], [{"id": 1}])
    flink_commit(spark, name, ["id"], [{"id": 3, "v": 30}], [{"id": 7}])
    before = _sorted_changes(name, first)
    assert [r[:3] for r in before] == [(1, 10, "DELETE"), (1, 11, "INSERT"), (3, 30, "INSERT")]
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN id TO key")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN v TO id")  # the old name, now another field
    assert _sorted_changes(name, first) == before


@EVERY_PAIR
def test_a_global_equality_delete_after_a_partition_field_is_dropped(every_pair, spark, name):
    _create(spark, name, "id INT, p STRING, `a.b` STRING", "PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'x', 'a'), (2, 'y', 'b')")
    spark.sql(f"ALTER TABLE {name} DROP PARTITION FIELD p")
    flink_commit(spark, name, ["id"], [{"id": 2, "p": "y", "a.b": "b1"}], [{"id": 2}])
    first = _ids(spark, name)[0]
    found = [r[:4] for r in _sorted_changes(name, first)]
    assert found == [(2, "y", "b", "DELETE"), (2, "y", "b1", "INSERT")]
    assert _ranges_replay(spark, name, ["id", "p", "a.b"], every_pair) == 2


@pytest.mark.parametrize(
    "batches, seed, every_pair",
    [
        pytest.param(3, 20261134, False, id="each-commit"),
        pytest.param(6, 20261123, True, id="every-pair", marks=pytest.mark.stress),
    ],
)
def test_randomized_ingest_cdc_history_with_late_and_duplicate_events(
    batches, seed, every_pair, spark, tmp_path, name
):
    """Seeded: ingest_cdc batches (three in the default tier, six in the stress tier; each seed
    gives both late and twice-delivered events, and the default seed's DELETE finds a live row)
    of creates, updates and deletes on a few keys, with events delivered twice and events
    arriving a batch late, a rewrite_equality_deletes between two batches and a Spark
    merge-on-read DELETE (position deletes) between two others."""
    rng = random.Random(seed)
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    delivered: list[tuple] = []
    held: list[tuple] = []  # events whose delivery waits a batch (late)
    late = twice = 0
    position = 100
    convert, delete = batches // 2 - 1, batches // 2  # after 2 and 3 of six, 1 and 2 of three
    deleted_live = False
    for number in range(batches):
        batch = list(held)
        late += len(held)
        held = []
        for _ in range(rng.randint(3, 6)):
            position += 10
            event = (rng.choice("cud"), rng.randrange(6), position, f"v{position}")
            (held if rng.random() < 0.2 else batch).append(event)
        if delivered and rng.random() < 0.6:
            batch.append(rng.choice(delivered))  # delivered twice
            twice += 1
        land(landing, f"{number}.json", events(*batch))
        ingest(name, landing, checkpoint)
        delivered += batch
        if number == convert:
            sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{name}')").collect()
        if number == delete:
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
            key = rng.randrange(6)
            deleted_live = spark.sql(f"SELECT * FROM {name} WHERE id = {key}").count() > 0
            spark.sql(f"DELETE FROM {name} WHERE id = {key}")
    assert late and twice  # the seed gave both
    assert deleted_live or every_pair  # the default seed's DELETE writes position deletes
    columns = list(spark.table(name).columns)
    assert _ranges_replay(spark, name, columns, every_pair) == batches + 2
