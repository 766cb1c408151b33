"""Skipping indexes at Spark level, against an independent oracle (issue 56's correctness goal).

A table of a few dozen small files, each with its own neighbourhood of values, with all seven
index types over its columns (ints, bigints, decimals, dates, timestamps read in a non-UTC
session zone, timestamp_ntz, codes, texts with words, NULLs everywhere), indexed; then random
predicates (AND/OR/NOT, IN and NOT IN with and without NULL, <=>, IS NULL, casts, ranges and
flipped comparisons, LIKE with escapes, ILIKE, lower()/upper(), RLIKE, starts/ends/contains),
each run at one pinned snapshot with ``spark.sparkext.index.enabled`` true and false while another
thread commits CDC changes (a data file and an equality delete in one RowDelta) and the index is
rebuilt now and then. For every predicate:

* the rows are identical with the index on and off;
* every file holding a matching live row (Spark's own ``_file``, index off) is among the files
  the index kept;
* the kept set lies within the bounds of tests/helpers/skipping_oracle.py, computed from each
  data file's own rows (read with pyarrow) and the index object's list of files: exactly the
  oracle's set wherever the answer is exact (bitmap, token_bitmap, ngram_bitmap, NULL tests),
  a superset of the files with a matching value for the bloom types.

Default tier: ~200 predicates (20 per pinned snapshot); ``stress``: 10,000 (50 per snapshot).
Also: a build killed between writing its Puffin file and committing it, and expire_snapshots of
indexed snapshots.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import struct
import subprocess
import sys
import textwrap
import threading
import time
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import sparkext
from sparkext.planning.skipping import BLOB_TYPE, blob_entries
from tests.helpers.arrow_cdc import commit_changes
from tests.helpers.iceberg import java_table
from tests.helpers.skipping_oracle import FileFacts, Index, canonical, expected

ZONE = "Asia/Kolkata"  # +05:30: a day's boundary is not UTC's
KOLKATA = dt.timezone(dt.timedelta(hours=5, minutes=30))
SCHEMA = (
    "k int, i int, l bigint, d decimal(9,2), dt date, ts timestamp, tn timestamp_ntz, "
    "s string, w string, t string"
)
COLUMNS = ("i", "l", "d", "dt", "ts", "tn", "s", "w", "t")
INDEXES = (  # name, type, column
    ("i_bitmap", "bitmap", "i"),
    ("l_range", "bloom_range_filter", "l"),
    ("d_bitmap", "bitmap", "d"),
    ("dt_range", "bloom_range_filter", "dt"),
    ("ts_bitmap", "bitmap", "ts"),
    ("tn_bloom", "bloom_filter", "tn"),
    ("s_bloom", "bloom_filter", "s"),
    ("w_tokens", "token_bitmap", "w"),
    ("w_ngrams", "ngram_bitmap", "w"),
    ("t_tokens", "token_bloom_filter", "t"),
    ("t_ngrams", "ngram_bloom_filter", "t"),
)
GROUPS = 36  # base data files
WORDS = (
    "timeout", "time", "out", "utmost", "Tmo", "error", "ERROR", "warn", "retry", "cache",
    "miss", "hit", "café", "Upstream", "upstream", "peer", "reset", "db", "x", "ok", "50%",
    "a_b", "back\\slash", "GET", "api", "v2", "users", "id", "42", "timeouts", "outage",
)  # fmt: skip
SEPARATORS = (" ", " ", "-", ", ", "/", ": ", "_")
BASE_DATE = dt.date(2024, 1, 1)
BASE_TS = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
BASE_NTZ = dt.datetime(2024, 3, 1)


# ---------------------------------------------------------------------------------------------
# data


def _text(rng: random.Random, group: int) -> str:
    start = (group * 5) % len(WORDS)
    words = [WORDS[(start + j) % len(WORDS)] for j in range(9)]
    count = rng.randint(1, 5)
    out = rng.choice(words)
    for _ in range(count - 1):
        out += rng.choice(SEPARATORS) + rng.choice(words)
    return out


def make_row(rng: random.Random, key: int, group: int) -> dict:
    """One row of group ``group`` (each group has its own neighbourhood of values)."""

    def maybe(value):
        return None if rng.random() < 0.08 else value

    return {
        "k": key,
        "i": maybe(group * 2 + rng.randint(0, 6)),
        "l": maybe((group - GROUPS // 2) * 1_000_003 + rng.randint(0, 50_000)),
        "d": maybe((Decimal(group * 25 + rng.randint(0, 300)) / 100).quantize(Decimal("0.01"))),
        "dt": maybe(BASE_DATE + dt.timedelta(days=group * 3 + rng.randint(0, 5))),
        "ts": maybe(
            BASE_TS
            + dt.timedelta(hours=group * 5 + rng.randint(0, 12), minutes=rng.choice((0, 30)))
        ),
        "tn": maybe(BASE_NTZ + dt.timedelta(hours=group * 7 + rng.randint(0, 20))),
        "s": maybe(f"k{group:02d}{rng.randint(0, 4)}"),
        "w": maybe(_text(rng, group)),
        "t": maybe(_text(rng, group + 3)),
    }


@dataclasses.dataclass
class Model:
    """The live rows by key (what the writer thread knows) and the group of each key."""

    rows: dict[int, dict]
    groups: dict[int, int]
    next_key: int


def create_table(spark, name: str, seed: int, rows_per_group: int = 30) -> Model:
    rng = random.Random(seed)
    rows, groups = {}, {}
    for group in range(GROUPS):
        for _ in range(rows_per_group):
            key = len(rows)
            rows[key] = make_row(rng, key, group)
            groups[key] = group
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(
        f"CREATE TABLE {name} ({SCHEMA}) USING iceberg TBLPROPERTIES ('format-version' = '2')"
    )
    schema = spark.table(name).schema
    ordered = [tuple(rows[k][c] for c in ("k", *COLUMNS)) for k in sorted(rows)]
    rdd = spark.sparkContext.parallelize(ordered, GROUPS)  # slice g: group g's rows
    spark.createDataFrame(rdd, schema).writeTo(name).append()
    for index_name, kind, column in INDEXES:
        sparkext.sql(f"CREATE INDEX {index_name} ON {name} USING {kind} ({column})")
    build(name)
    return Model(rows, groups, len(rows))


def build(name: str) -> None:
    sparkext.sql(f"CALL sparkext.build_indexes(table => '{name}')").collect()


def optimize(name: str) -> int:
    """L0 converting the equality deletes (no file counts as small: the files stay, so the index
    keeps something to prune), the index brought up to date as its last step; returns how many
    equality-delete files it converted."""
    rows = sparkext.sql(
        f"CALL sparkext.tiered_optimize(table => '{name}', levels => 'l0', "
        "options => map('small-file-size-bytes', '1'))"
    ).collect()
    return sum(r.deletes_removed or 0 for r in rows if r.level == 0 and r.error is None)


def cdc_commit(spark, name: str, model: Model, rng: random.Random, lock: threading.Lock) -> int:
    """Update, delete and insert a few keys in one RowDelta; returns the new snapshot id."""
    with lock:
        keys = rng.sample(sorted(model.rows), k=min(6, len(model.rows)))
        updates, deletes = keys[:4], keys[4:]
        images = []
        for key in updates:
            group = (model.groups[key] + rng.choice((0, 0, 1, 7))) % GROUPS
            images.append(make_row(rng, key, group))
        for _ in range(2):
            key, group = model.next_key, rng.randrange(GROUPS)
            model.next_key += 1
            model.groups[key] = group
            images.append(make_row(rng, key, group))
        for key in deletes:
            del model.rows[key]
        for image in images:
            model.rows[image["k"]] = image
    return commit_changes(spark, name, images, [*updates, *deletes], "k")


# ---------------------------------------------------------------------------------------------
# predicates


def _sql_text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Predicates:
    """Random SQL predicates over the table's columns, values mostly drawn from the data."""

    def __init__(self, model: Model, rng: random.Random):
        self.rng = rng
        sample = list(model.rows.values())
        self.values = {c: [r[c] for r in sample if r[c] is not None] for c in COLUMNS}

    def value(self, column: str):
        return self.rng.choice(self.values[column])

    def predicate(self, depth: int = 0) -> str:
        rng = self.rng
        if depth < 3 and rng.random() < 0.45:
            op = rng.choice(("AND", "OR", "AND", "OR", "NOT"))
            if op == "NOT":
                return f"NOT ({self.predicate(depth + 1)})"
            parts = [self.predicate(depth + 1) for _ in range(rng.choice((2, 2, 3)))]
            return "(" + f" {op} ".join(parts) + ")"
        return getattr(self, "leaf_" + rng.choice(COLUMNS))()

    def _ints(self, column: str, literal=str) -> str:
        rng = self.rng
        v, v2 = self.value(column), self.value(column)
        a, b = sorted((v, v2))
        many = ", ".join(literal(self.value(column)) for _ in range(12))
        return rng.choice(
            (
                f"{column} = {literal(v)}",
                f"{column} <> {literal(v)}",
                f"{column} < {literal(v)}",
                f"{column} >= {literal(v)}",
                f"{literal(v)} < {column}",
                f"{column} BETWEEN {literal(a)} AND {literal(b)}",
                f"{column} IN ({literal(v)}, {literal(v2)}, {literal(v + 1)})",
                f"{column} IN ({literal(v)}, NULL)",
                f"{column} IN ({many})",
                f"{column} NOT IN ({literal(v)}, {literal(v2)})",
                f"{column} NOT IN ({literal(v)}, NULL)",
                f"{column} <=> {literal(v)}",
                f"{column} <=> NULL",
                f"{column} IS NULL",
                f"{column} IS NOT NULL",
                f"NOT ({column} <=> {literal(v)})",
                f"{column} = CAST({v} AS BIGINT)",
                f"{column} = 3000000000",
                f"{column} > {v}.5",
                f"CAST({column} AS STRING) = '{v}'",
                f"{column} + 0 = {literal(v)}",
                f"{column} = k",
                f"{column} = NULL",
            )
        )

    def leaf_i(self) -> str:
        return self._ints("i")

    def leaf_l(self) -> str:
        return self._ints("l", lambda v: f"{v}L")

    def leaf_d(self) -> str:
        rng = self.rng
        v, v2 = self.value("d"), self.value("d")
        a, b = sorted((v, v2))
        return rng.choice(
            (
                f"d = {v}",
                f"d = {v.normalize() if v == v.to_integral() else v}",
                f"d > {v}",
                f"d <= {v}",
                f"d BETWEEN {a} AND {b}",
                f"d IN ({v}, {v2}, 0.01)",
                f"d <> {v}",
                f"d = {v}5",  # three decimals: not the column's scale
                f"d < {int(v) + 1}",
                f"d = CAST('{v}' AS DECIMAL(9,2))",
                "d IS NULL",
            )
        )

    def leaf_dt(self) -> str:
        rng = self.rng
        v, v2 = self.value("dt"), self.value("dt")
        a, b = sorted((v, v2))
        return rng.choice(
            (
                f"dt = DATE '{v}'",
                f"dt BETWEEN DATE '{a}' AND DATE '{b}'",
                f"dt > '{v}'",
                f"dt <= DATE '{v}'",
                f"dt IN (DATE '{v}', DATE '{v2}')",
                f"dt < TIMESTAMP '{v} 12:00:00'",
                f"dt <> DATE '{v}'",
                "dt IS NOT NULL",
            )
        )

    def leaf_ts(self) -> str:
        rng = self.rng

        def local(value: dt.datetime) -> str:  # as the session zone reads it
            return value.astimezone(KOLKATA).strftime("%Y-%m-%d %H:%M:%S")

        v, v2 = self.value("ts"), self.value("ts")
        a, b = sorted((v, v2))
        return rng.choice(
            (
                f"ts = TIMESTAMP '{local(v)}'",
                f"ts >= TIMESTAMP '{local(v)}'",
                f"ts < '{local(v)}'",
                f"ts BETWEEN TIMESTAMP '{local(a)}' AND TIMESTAMP '{local(b)}'",
                f"ts IN (TIMESTAMP '{local(v)}', TIMESTAMP '{local(v2)}')",
                f"ts = TIMESTAMP '{v.strftime('%Y-%m-%d %H:%M:%S')}'",  # the UTC text: off by 5:30
                f"CAST(ts AS DATE) = DATE '{v.astimezone(KOLKATA).date()}'",
                f"ts > TIMESTAMP_NTZ '{local(v)}'",
                "ts IS NULL",
            )
        )

    def leaf_tn(self) -> str:
        rng = self.rng
        v, v2 = self.value("tn"), self.value("tn")
        a, b = sorted((v, v2))
        return rng.choice(
            (
                f"tn = TIMESTAMP_NTZ '{v}'",
                f"tn > TIMESTAMP_NTZ '{v}'",
                f"tn BETWEEN TIMESTAMP_NTZ '{a}' AND TIMESTAMP_NTZ '{b}'",
                f"tn IN (TIMESTAMP_NTZ '{v}', TIMESTAMP_NTZ '{v2}')",
                f"tn <=> TIMESTAMP_NTZ '{v}'",
                "tn IS NULL",
            )
        )

    def leaf_s(self) -> str:
        rng = self.rng
        v, v2 = self.value("s"), self.value("s")
        return rng.choice(
            (
                f"s = '{v}'",
                f"s IN ('{v}', '{v2}', 'absent')",
                f"s <=> '{v}'",
                "s IS NULL",
                f"s LIKE '{v[:3]}%'",
                f"s > '{v}'",
                "s = 'absent'",
                f"upper(s) = '{v.upper()}'",
            )
        )

    def _text(self, column: str) -> str:
        rng = self.rng
        full = self.value(column)
        word = rng.choice(WORDS)
        word2 = rng.choice(WORDS)
        frag = word[rng.randrange(len(word)) :][: rng.randint(1, 4)] or word
        lit = _like_literal(word)
        one_wild = word[:2] + "_" + word[3:] if word.isalnum() else lit
        return rng.choice(
            (
                f"{column} LIKE {_sql_text(f'%{lit}%')}",
                f"{column} LIKE {_sql_text(f'{lit} %')}",
                f"{column} LIKE {_sql_text(f'% {lit}')}",
                f"{column} LIKE {_sql_text(f'%{lit} {_like_literal(word2)}%')}",
                f"{column} LIKE {_sql_text(f'%{_like_literal(frag)}%')}",
                f"{column} LIKE {_sql_text(lit)}",
                f"{column} LIKE {_sql_text('%' + one_wild + '%')}",
                f"{column} LIKE {_sql_text('%' + word.replace('%', '#%') + '%')} ESCAPE '#'",
                f"{column} = {_sql_text(full)}",
                f"{column} IN ({_sql_text(full)}, {_sql_text(self.value(column))})",
                f"{column} ILIKE {_sql_text('%' + lit.upper() + '%')}",
                f"lower({column}) LIKE {_sql_text('%' + lit.lower() + '%')}",
                f"upper({column}) LIKE {_sql_text('%' + lit.upper() + '%')}",
                f"lower({column}) = {_sql_text(full.lower())}",
                f"{column} RLIKE {_sql_text(word.replace('%', ''))}",
                f"{column} RLIKE {_sql_text('^' + word.replace('%', '') + '.*')}",
                f"contains({column}, {_sql_text(frag)})",
                f"startswith({column}, {_sql_text(word)})",
                f"endswith({column}, {_sql_text(word)})",
                f"{column} NOT LIKE {_sql_text(f'%{lit}%')}",
                f"{column} > {_sql_text(word)}",
                f"{column} IS NULL",
            )
        )

    def leaf_w(self) -> str:
        return self._text("w")

    def leaf_t(self) -> str:
        return self._text("t")


# ---------------------------------------------------------------------------------------------
# what the planner asked and answered


@dataclasses.dataclass
class Call:
    snapshot_id: int
    index_path: str
    predicate: str
    candidates: list[str]
    answer: str


class Recorder:
    """The registered answers with every ``prune_files`` call recorded (this thread's)."""

    def __init__(self, spark):
        from sparkext.routing.in_spark import ANSWERS

        self.spark, self.answers = spark, ANSWERS
        self.calls: list[Call] = []

    def __enter__(self) -> Recorder:
        from sparkext.spark.extension import attach

        inner = self.answers.prune_files

        def recorded(spark, table, snapshot_id, path, size, footer, predicate, candidates):
            out = inner(spark, table, snapshot_id, path, size, footer, predicate, candidates)
            self.calls.append(
                Call(int(snapshot_id), str(path), predicate, candidates.split("\n"), out)
            )
            return out

        attach(self.spark, dataclasses.replace(self.answers, prune_files=recorded))
        return self

    def __exit__(self, *exc: object) -> None:
        from sparkext.spark.extension import attach

        attach(self.spark, self.answers)


def index_listing(path: str) -> dict[str, frozenset[str]]:
    """The data files each index of a Puffin index object lists (footer read by hand)."""
    data = Path(path.removeprefix("file:")).read_bytes()
    assert data[:4] == data[-4:] == b"PFA1", path
    (payload_size,) = struct.unpack("<i", data[-12:-8])
    assert data[-8] & 1 == 0, "a compressed footer"
    footer = json.loads(data[-12 - payload_size : -12])
    out = {}
    for blob in footer["blobs"]:
        if blob["type"] != BLOB_TYPE:
            continue
        assert blob.get("compression-codec") is None
        raw = data[blob["offset"] : blob["offset"] + blob["length"]]
        name = blob["properties"]["sparkext.index.name"]
        out[name] = frozenset(p for p, _ in blob_entries(raw))
    return out


class Facts:
    """Each data file's own rows, read with pyarrow (files never change: cached by path)."""

    def __init__(self):
        self.by_path: dict[str, FileFacts] = {}

    def of(self, path: str) -> FileFacts:
        if path not in self.by_path:
            table = pq.read_table(path.removeprefix("file:"))
            columns = {
                c: [canonical(v) for v in table.column(c).to_pylist()]
                for c in COLUMNS
                if c in table.column_names
            }
            self.by_path[path] = FileFacts(path, columns)
        return self.by_path[path]


# ---------------------------------------------------------------------------------------------
# the differential run


@dataclasses.dataclass
class Tally:
    predicates: int = 0
    pruned: int = 0  # predicates where the index dropped a file
    files_checked: int = 0
    files_exact: int = 0  # files whose expected answer was exact (asserted equal)
    no_call: int = 0  # predicates Spark planned without asking (no filter left, …)
    converted: int = 0  # equality-delete files tiered_optimize converted along the way


def truth_rows(spark, name: str, snapshot: int, wheres: list[str]) -> list[list[tuple]]:
    """Per predicate, the matching rows at ``snapshot`` with the index off, ``_file`` last: one
    scan computing every predicate as a column (TRUE exactly where its filter keeps the row)."""
    marks = ", ".join(f"({w}) AS __m{i}" for i, w in enumerate(wheres))
    spark.conf.set("spark.sparkext.index.enabled", "false")
    try:
        rows = spark.sql(f"SELECT *, _file, {marks} FROM {name} VERSION AS OF {snapshot}").collect()
    finally:
        spark.conf.unset("spark.sparkext.index.enabled")
    width = len(rows[0]) - len(wheres) if rows else 0
    return [[tuple(r)[:width] for r in rows if r[width + i] is True] for i in range(len(wheres))]


def answers_on(spark, name: str, snapshot: int, wheres: list[str]) -> list[list[tuple]]:
    """Per predicate, the matching rows at ``snapshot`` with the index on: one job, a UNION ALL
    of one branch per predicate, each a scan of its own that the index prunes. Each branch's
    filter carries its number as ``k <> -1 - i`` (a column no index answers: it changes no
    answer), so each recorded ``prune_files`` call can be told to which predicate it belongs."""
    branches = [
        f"SELECT {i} AS __q, * FROM {name} VERSION AS OF {snapshot} WHERE ({w}) AND k <> {-1 - i}"
        for i, w in enumerate(wheres)
    ]
    rows = spark.sql(" UNION ALL ".join(branches)).collect()
    out: list[list[tuple]] = [[] for _ in wheres]
    for row in rows:
        out[row[0]].append(tuple(row)[1:])
    return out


def _calls_of(calls: list[Call], number: int) -> list[Call]:
    """The calls made for predicate ``number`` (its marker literal is in the predicate)."""
    marker = -1 - number

    def literals(node) -> list:
        if isinstance(node, dict):
            return [v for value in node.values() for v in literals(value)]
        if isinstance(node, list):
            return [v for value in node for v in literals(value)]
        return [node]

    return [c for c in calls if str(marker) in map(str, literals(json.loads(c.predicate)))]


def check_batch(spark, name: str, wheres: list[str], recorder: Recorder, facts: Facts, tally):
    jt = java_table(spark, name)
    jt.refresh()
    snapshot = int(jt.currentSnapshot().snapshotId())
    recorder.calls.clear()
    truths = truth_rows(spark, name, snapshot, wheres)
    assert all(not c.answer for c in recorder.calls), "pruned with the index turned off"
    recorder.calls.clear()
    ons = answers_on(spark, name, snapshot, wheres)
    calls = list(recorder.calls)
    for number, (where, off_rows, on) in enumerate(zip(wheres, truths, ons, strict=True)):
        off = [r[:-1] for r in off_rows]
        assert sorted(on, key=repr) == sorted(off, key=repr), where
        tally.predicates += 1
        mine = _calls_of(calls, number)
        check_files(where, mine, {str(r[-1]) for r in off_rows}, facts, tally)


def check_files(where: str, calls: list[Call], truth: set[str], facts: Facts, tally) -> None:
    """The files the index kept against Spark's matching files and the oracle's bounds."""
    if not calls:
        tally.no_call += 1
        return
    assert len(calls) == 1, (where, calls)
    call = calls[0]
    keep = json.loads(call.answer)["keep"] if call.answer else "1" * len(call.candidates)
    assert len(keep) == len(call.candidates), where
    kept = {p for p, k in zip(call.candidates, keep, strict=True) if k == "1"}
    assert truth <= set(call.candidates), f"Iceberg's own files missing for {where}"
    assert truth <= kept, f"files with matching rows dropped for {where}: {truth - kept}"
    tally.pruned += len(kept) < len(call.candidates)
    listing = index_listing(call.index_path)
    indexes = [Index(kind, column, paths=listing.get(n)) for n, kind, column in INDEXES]
    listed = set().union(*listing.values())
    files = [facts.of(p) if p in listed else None for p in call.candidates]
    predicate = json.loads(call.predicate)
    for path, file, k, (lo, hi) in zip(
        call.candidates, files, keep, expected(predicate, files, indexes), strict=True
    ):
        if path in truth:
            assert lo, f"the oracle misses a matching file: {where} {predicate} {path}"
        assert lo <= (k == "1") <= hi, (
            f"{where}\npredicate {predicate}\nfile {path} kept={k} oracle lo={lo} hi={hi}\n"
            f"{file.columns if file else 'not listed'}"
        )
        tally.files_checked += 1
        tally.files_exact += lo == hi


def differential(
    spark, name: str, count: int, seed: int, commits_every: float, max_commits: int, builds: int,
    batch: int = 20,
):  # fmt: skip
    """``count`` predicates while a thread commits CDC changes every ``commits_every`` s (at
    most ``max_commits``: each equality delete applies to every older file, so every commit
    makes later scans slower); the index is brought up to date ``builds`` times along the way,
    by ``build_indexes`` and by ``tiered_optimize`` in turn. ``batch`` predicates share a pinned
    snapshot: one scan with the index off, one UNION ALL with it on."""
    model = create_table(spark, name, seed)
    rng = random.Random(seed)
    writer_rng = random.Random(seed + 1)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []
    commits = [0]

    def writer() -> None:
        try:
            while commits[0] < max_commits and not stop.wait(commits_every):
                cdc_commit(spark, name, model, writer_rng, lock)
                commits[0] += 1
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    facts, tally = Facts(), Tally()
    thread = threading.Thread(target=writer, daemon=True)
    with Recorder(spark) as recorder:
        thread.start()
        try:
            batches = range(0, count, batch)
            rebuild_at = [batches[len(batches) * (j + 1) // (builds + 1)] for j in range(builds)]
            for number in batches:
                if number and number in rebuild_at and rebuild_at.index(number) % 2:
                    tally.converted += optimize(name)
                elif number and number in rebuild_at:
                    build(name)
                with lock:
                    generator = Predicates(model, rng)
                wheres = [generator.predicate() for _ in range(min(batch, count - number))]
                check_batch(spark, name, wheres, recorder, facts, tally)
                assert not errors, errors
        finally:
            stop.set()
            thread.join(60)
    assert not errors, errors
    print(f"skipping differential: {tally} with {commits[0]} CDC commits")
    assert commits[0] >= 3
    assert tally.pruned >= 0.2 * tally.predicates, tally  # the index did prune
    assert tally.files_exact >= 0.5 * tally.files_checked, tally
    assert builds < 2 or tally.converted > 0, tally  # queries also ran on converted deletes
    return tally


def test_random_predicates_index_on_and_off(spark):
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        differential(
            spark, "lake.test.skipdiff", count=int(os.environ.get("SKIPDIFF_COUNT", "200")),
            seed=56, commits_every=1.0, max_commits=12, builds=2,
        )  # fmt: skip
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


@pytest.mark.stress
def test_ten_thousand_random_predicates_under_cdc(spark):
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        differential(
            spark, "lake.test.skipdiff_stress",
            count=int(os.environ.get("SKIPDIFF_STRESS_COUNT", "10000")), seed=5656,
            commits_every=45.0, max_commits=60, builds=40, batch=50,
        )  # fmt: skip
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


# ---------------------------------------------------------------------------------------------
# a crashed build, expired index objects


def _rows_equal(spark, name: str, where: str) -> int:
    """Rows with the index on and off, compared; returns how many."""
    query = f"SELECT * FROM {name} WHERE {where}"
    spark.conf.set("spark.sparkext.index.enabled", "true")
    on = sorted(map(tuple, spark.sql(query).collect()), key=repr)
    spark.conf.set("spark.sparkext.index.enabled", "false")
    off = sorted(map(tuple, spark.sql(query).collect()), key=repr)
    spark.conf.unset("spark.sparkext.index.enabled")
    assert on == off, where
    return len(on)


def _explained(spark, name: str, where: str) -> str:
    return spark.sql(f"EXPLAIN SELECT * FROM {name} WHERE {where}").first()[0]


def _statistics_paths(spark, name: str) -> dict[int, str]:
    jt = java_table(spark, name)
    jt.refresh()
    files = jt.statisticsFiles()
    return {int(files.get(i).snapshotId()): str(files.get(i).path()) for i in range(files.size())}


CRASH_CHILD = textwrap.dedent(
    """
    import os, sys
    import sparkext
    from sparkext.iceberg import skipping

    warehouse, name = sys.argv[1:3]
    spark = sparkext.session(master="local[1]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "1"})
    original = skipping.SkippingTable._write_puffin

    def write_then_die(self, *args, **kwargs):
        written = original(self, *args, **kwargs)
        print("PUFFIN WRITTEN", args[1], flush=True)
        os._exit(97)  # killed between the Puffin file and its commit

    skipping.SkippingTable._write_puffin = write_then_die
    sparkext.sql(f"CALL sparkext.build_indexes(table => '{name}')").collect()
    print("NOT KILLED", flush=True)
    """
)


def test_a_build_killed_before_its_commit_leaves_the_table_right(spark, warehouse, tmp_path):
    name = "lake.test.skipdiff_crash"
    model = create_table(spark, name, seed=9, rows_per_group=5)
    before = _statistics_paths(spark, name)
    writer_rng = random.Random(3)
    cdc_commit(spark, name, model, writer_rng, threading.Lock())  # a new snapshot to index
    script = tmp_path / "child.py"
    script.write_text(CRASH_CHILD)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script), str(warehouse), name],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(root), os.environ.get("PYTHONPATH")) if p)},
    )  # fmt: skip
    assert done.returncode == 97, done.stdout + done.stderr[-3000:]
    orphan = next(
        line.split(" ", 2)[2] for line in done.stdout.splitlines() if line.startswith("PUFFIN")
    )
    assert Path(orphan.removeprefix("file:")).exists()  # written, never committed
    spark.catalog.refreshTable(name)
    assert _statistics_paths(spark, name) == before  # nothing attached
    where = "i IN (3, 4) OR s = 'k051'"
    _rows_equal(spark, name, where)
    build(name)  # the next build works
    after = _statistics_paths(spark, name)
    current = int(java_table(spark, name).currentSnapshot().snapshotId())
    assert current in after and after[current] != orphan
    _rows_equal(spark, name, where)
    assert "sparkext index: kept" in _explained(spark, name, "w LIKE '%retry%'")
    _rows_equal(spark, name, "w LIKE '%retry%'")


def test_expired_index_objects_are_gone_and_queries_stay_right(spark):
    name = "lake.test.skipdiff_expiry"
    model = create_table(spark, name, seed=11, rows_per_group=5)
    lock, rng = threading.Lock(), random.Random(4)
    first = _statistics_paths(spark, name)
    assert len(first) == 1
    cdc_commit(spark, name, model, rng, lock)
    build(name)
    cdc_commit(spark, name, model, rng, lock)  # the current snapshot: no index object of its own
    indexed = _statistics_paths(spark, name)
    assert len(indexed) == 2
    where = "i IN (3, 40) OR w LIKE '%retry%'"
    _rows_equal(spark, name, where)
    newest = max(indexed, key=lambda s: java_table(spark, name).snapshot(s).sequenceNumber())
    table = name.split(".", 1)[1]
    now = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    time.sleep(1.1)
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table}', "
        f"older_than => TIMESTAMP '{now.strftime('%Y-%m-%d %H:%M:%S')}', retain_last => 2)"
    ).collect()
    spark.catalog.refreshTable(name)
    left = _statistics_paths(spark, name)
    assert set(left) == {newest}, left
    for snapshot, path in indexed.items():
        assert Path(path.removeprefix("file:")).exists() == (snapshot == newest), path
    assert "sparkext index: kept" in _explained(spark, name, "w LIKE '%retry%'")  # the parent's
    _rows_equal(spark, name, where)
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table}', "
        f"older_than => TIMESTAMP '{now.strftime('%Y-%m-%d %H:%M:%S')}', retain_last => 1)"
    ).collect()  # now the indexed snapshot itself
    spark.catalog.refreshTable(name)
    assert _statistics_paths(spark, name) == {}
    assert not Path(indexed[newest].removeprefix("file:")).exists()
    assert "sparkext index" not in _explained(spark, name, "w LIKE '%retry%'")  # none left
    _rows_equal(spark, name, where)
