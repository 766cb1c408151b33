"""The changelog against stock Iceberg time travel, on a randomized merge-on-read history.

One table, a fixed seed, ~15 commits of every kind: Spark MOR DELETE/UPDATE/MERGE (position
deletes), copy-on-write DELETEs, Flink-style key-only equality deletes (Java API), a row
inserted and deleted in one commit, rewrite_data_files (REPLACE), a truncate, a column added
and a bucket partition field added midway. For pairs of snapshots S1 < S2 (each single commit and
the whole history in the default tier, all 120 pairs in the stress tier: tests/helpers/ranges.py;
the history is built once for both): replaying changelog(S1, S2) onto the table
read at S1 (``VERSION AS OF``) gives the table read at S2, as multisets of rows; and the net changes
are exactly the multiset differences of the two states.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import sparkext
from tests.helpers.iceberg import flink_commit, transient_commit
from tests.helpers.ranges import EVERY_PAIR, ranges

SEED = 20261123
COMMITS = 15
KEYS = 8
MODES = ("write.delete.mode", "write.update.mode", "write.merge.mode")


class History:
    """Makes random commits of every kind; knows nothing of what the rows should be."""

    def __init__(self, spark, name: str, seed: int):
        self.spark, self.name = spark, name
        self.random = random.Random(seed)
        self.has_w = False
        self.partitioned = False
        self.kinds: list[str] = []
        props = {"format-version": "2", **dict.fromkeys(MODES, "merge-on-read")}
        tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        spark.sql(
            f"CREATE TABLE {name} (id INT, v STRING) USING iceberg TBLPROPERTIES ({tblprops})"
        )

    def sql(self, text: str) -> None:
        self.spark.sql(text)

    def value(self) -> str:
        return self.random.choice("abcde")

    def row(self) -> dict:
        row = {"id": self.random.randrange(KEYS), "v": self.value()}
        if self.has_w:
            row["w"] = self.random.choice(["x", None])
        return row

    def literal(self, row: dict) -> str:
        w = f", {'NULL' if row.get('w') is None else repr(row['w'])}" if self.has_w else ""
        return f"({row['id']}, '{row['v']}'{w})"

    def commit(self, kind: str) -> None:
        self.kinds.append(kind)
        getattr(self, f"_{kind}")()

    def _insert(self) -> None:
        rows = [self.row() for _ in range(self.random.randint(2, 4))]
        self.sql(f"INSERT INTO {self.name} VALUES {', '.join(self.literal(r) for r in rows)}")

    def _delete(self) -> None:
        keys = self.random.sample(range(KEYS), 2)
        self.sql(f"DELETE FROM {self.name} WHERE id IN ({keys[0]}, {keys[1]})")

    def _update(self) -> None:
        key = self.random.randrange(KEYS)
        self.sql(f"UPDATE {self.name} SET v = '{self.value()}' WHERE id <= {key}")

    def _merge(self) -> None:
        rows = [self.row() for _ in range(3)]
        rows = list({r["id"]: r for r in rows}.values())  # one source row per key
        columns = "id, v, w" if self.has_w else "id, v"
        self.sql(
            f"MERGE INTO {self.name} t USING (SELECT * FROM VALUES "
            f"{', '.join(self.literal(r) for r in rows)} AS s({columns})) s ON t.id = s.id "
            "WHEN MATCHED AND s.v = 'a' THEN DELETE WHEN MATCHED THEN UPDATE SET * "
            "WHEN NOT MATCHED THEN INSERT *"
        )

    def _copy_on_write_delete(self) -> None:
        self.sql(f"ALTER TABLE {self.name} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write')")
        self.sql(f"DELETE FROM {self.name} WHERE id = {self.random.randrange(KEYS)}")
        self.sql(f"ALTER TABLE {self.name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")

    def _flink_upsert(self) -> None:
        rows = [self.row() for _ in range(2)]
        rows = list({r["id"]: r for r in rows}.values())
        gone = {"id": self.random.randrange(KEYS)}
        flink_commit(self.spark, self.name, ["id"], rows, [{"id": r["id"]} for r in rows] + [gone])

    def _transient(self) -> None:
        """A data file and a position delete of one of its rows, in one commit."""
        transient_commit(self.spark, self.name, [self.row(), self.row()], [1])

    def _compact(self) -> None:
        self.sql(
            f"CALL lake.system.rewrite_data_files(table => '{self.name.removeprefix('lake.')}', "
            "options => map('min-input-files', '1', 'delete-file-threshold', '1'))"
        )

    def _truncate(self) -> None:
        self.sql(f"DELETE FROM {self.name}")

    def evolve(self) -> None:
        """A new column and a bucket partition field (metadata only, no snapshot)."""
        self.sql(f"ALTER TABLE {self.name} ADD COLUMN w STRING")
        self.sql(f"ALTER TABLE {self.name} ADD PARTITION FIELD bucket(2, id)")
        self.has_w = self.partitioned = True


# every kind once per phase, in a seeded order; the bucket field and the column come between
PHASE_ONE = ["insert", "delete", "transient", "update", "flink_upsert", "merge"]
PHASE_TWO = ["copy_on_write_delete", "flink_upsert", "compact", "merge"]
ENDING = ["truncate", "insert", "flink_upsert", "compact"]


def build(spark, name: str) -> list[str]:
    history = History(spark, name, SEED)
    history.commit("insert")
    for phase in (PHASE_ONE, PHASE_TWO):
        for kind in history.random.sample(phase, len(phase)):
            history.commit(kind)
        if not history.has_w:
            history.evolve()
    for kind in ENDING:
        history.commit(kind)
    return history.kinds


def rows(frame, columns=("id", "v", "w")) -> list[tuple]:
    present = [c for c in columns if c in frame.columns]
    return [
        tuple(r[c] if c in present else None for c in columns)
        for r in frame.select(*present).collect()
    ]


@pytest.fixture(scope="module")
def history(spark):
    name = f"lake.test.changelog_oracle_{uuid.uuid4().hex[:6]}"
    kinds = build(spark, name)
    ids = [
        r.snapshot_id
        for r in spark.sql(
            f"SELECT snapshot_id FROM {name}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at"
        ).collect()
    ]
    assert len(ids) == len(kinds) == COMMITS
    with ThreadPoolExecutor(max_workers=4) as pool:  # a few reads at a time: both cores busy
        read = pool.map(
            lambda sid: Counter(rows(spark.sql(f"SELECT * FROM {name} VERSION AS OF {sid}"))), ids
        )
        states = {None: Counter(), **dict(zip(ids, read, strict=True))}
    yield name, [None, *ids], states, kinds
    spark.sql(f"DROP TABLE {name} PURGE")


def test_the_history_has_every_kind_of_commit(spark, history):
    name, _, _, kinds = history
    assert {"transient", "flink_upsert", "merge", "update", "compact", "truncate"} <= set(kinds)
    operations = {r[0] for r in spark.sql(f"SELECT operation FROM {name}.snapshots").collect()}
    assert operations == {"append", "overwrite", "delete", "replace"}
    content = {r[0] for r in spark.sql(f"SELECT content FROM {name}.all_delete_files").collect()}
    assert content == {1, 2}  # position and equality deletes


def pair_changes(spark, name: str, start: int | None, end: int, net: bool) -> list[tuple]:
    """Rows and change types of changelog(start, end), or of its net changes."""
    args = f"table => '{name}', end => '{end}'" + (f", start => '{start}'" if start else "")
    if net:
        args += ", options => map('net-changes', 'true')"
    found = sparkext.sql(f"SELECT * FROM sparkext.changelog({args})", spark)
    return rows(found, ("id", "v", "w", "_change_type"))


@EVERY_PAIR
def test_pairs_replay_and_net_to_the_state_difference(every_pair, spark, history):
    name, ids, states, _ = history
    started = time.monotonic()
    pairs = ranges(ids, every_pair)
    assert len(pairs) == (120 if every_pair else COMMITS + 1) and len(set(pairs)) == len(pairs)
    # a few pairs at a time: Spark runs a query's stages one after another; concurrent queries
    # keep both cores busy (the assertions below run on the main thread)
    calls = [(*pair, net) for pair in pairs for net in (False, True)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda call: pair_changes(spark, name, *call), calls))
    found = dict(zip(calls, results, strict=True))
    for start, end in pairs:
        every, net = found[start, end, False], found[start, end, True]
        replayed = Counter(states[start])
        for *row, change in every:
            replayed[tuple(row)] += 1 if change == "INSERT" else -1
        assert {change for *_, change in every} <= {"INSERT", "DELETE"}
        assert +replayed == states[end] and -replayed == Counter(), (start, end)
        inserted = Counter(tuple(r) for *r, c in net if c == "INSERT")
        deleted = Counter(tuple(r) for *r, c in net if c == "DELETE")
        assert inserted == states[end] - states[start], (start, end)
        assert deleted == states[start] - states[end], (start, end)
    print(f"{len(pairs)} pairs in {time.monotonic() - started:.1f} s")
