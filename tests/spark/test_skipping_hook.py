"""The JVM hook of sparkext's skipping indexes: Iceberg scans pruned to the files an index keeps.

The index reader here is a stand-in (``Pruner``): it answers the extension's callback from the
values each data file held when the test "built" the index, evaluating the predicate JSON the
hook sends conservatively (anything but ``eq``/``in`` on the indexed column may match). The index
object itself is a real Puffin statistics file with one blob of sparkext's type attached with
Iceberg's API, so the hook finds it as it finds a built one. The oracle for every pruned query is
the same query with ``spark.sparkext.index.enabled=false`` (Iceberg's own scan).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from sparkext.jvm import EXTENSION, jar_path
from sparkext.routing.in_spark import ANSWERS
from sparkext.spark.extension import attach
from tests.helpers.iceberg import add_equality_deletes, java_table

BLOB_TYPE = "sparkext-skipping-index-v1"
ENABLED = "spark.sparkext.index.enabled"
T = "lake.test.skip_hook"
USED = "(bloom_filter, request_id)"


def rows(frame) -> list[tuple]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def attach_index(spark, name: str, column: str, snapshot_id: int | None = None) -> str:
    """A Puffin statistics file with one (opaque) blob of sparkext's index type on ``column``,
    set for ``snapshot_id`` (default: the current snapshot) with Iceberg's API; its path."""
    jvm = spark._jvm
    table = java_table(spark, name)
    snapshot = table.currentSnapshot() if snapshot_id is None else table.snapshot(snapshot_id)
    path = f"{table.location()}/metadata/sparkext-index-{snapshot.snapshotId()}-test.stats"
    writer = jvm.org.apache.iceberg.puffin.Puffin.write(table.io().newOutputFile(path))
    writer = writer.createdBy("sparkext tests").build()
    fields = jvm.java.util.ArrayList()
    fields.add(table.schema().findField(column).fieldId())
    properties = jvm.java.util.HashMap()
    properties.put("sparkext.index.name", column)
    payload = jvm.java.nio.ByteBuffer.wrap(bytearray(b"opaque to the hook"))
    writer.add(
        jvm.org.apache.iceberg.puffin.Blob(
            BLOB_TYPE,
            fields,
            snapshot.snapshotId(),
            snapshot.sequenceNumber(),
            payload,
            None,
            properties,
        )
    )
    writer.finish()
    blobs = jvm.java.util.ArrayList()
    for blob in writer.writtenBlobsMetadata():
        blobs.add(getattr(jvm.org.apache.iceberg.GenericBlobMetadata, "from")(blob))
    statistics = jvm.org.apache.iceberg.GenericStatisticsFile(
        snapshot.snapshotId(), path, writer.fileSize(), writer.footerSize(), blobs
    )
    writer.close()
    table.updateStatistics().setStatistics(statistics).commit()
    spark.sql(f"REFRESH TABLE {name}")
    return path


def may_match(node: dict, values: set[str]) -> bool:
    """Whether a file whose request_id values are ``values`` may hold a row matching ``node``."""
    op = node["op"]
    if op == "and":
        return all(may_match(arg, values) for arg in node["args"])
    if op == "or":
        return any(may_match(arg, values) for arg in node["args"])
    if node.get("col") != "request_id" or "fold" in node:
        return True
    if op == "eq":
        return node["value"] in values
    if op == "in":
        return bool(set(node["values"]) & values)
    return True


@dataclasses.dataclass
class Call:
    snapshot_id: int
    index_path: str
    index_size: int
    footer_size: int
    predicate: dict
    candidates: list[str]


@dataclasses.dataclass
class Pruner:
    """``Answers.prune_files`` for these tests: an index of the values each file held."""

    indexed: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    calls: list[Call] = dataclasses.field(default_factory=list)
    mode: str = "index"  # "index", "raise", "garbage", "none" (keeps no file), "record"

    def __call__(self, spark, table, snapshot_id, index_path, size, footer, predicate, candidates):
        paths = candidates.split("\n")
        self.calls.append(Call(snapshot_id, index_path, size, footer, json.loads(predicate), paths))
        if self.mode == "raise":
            raise RuntimeError("the index reader failed")
        if self.mode == "garbage":
            return '{"keep": "1"}'
        if self.mode == "record":
            return ""
        node = json.loads(predicate)
        keep = "".join(
            "1"
            if self.mode == "index" and (p not in self.indexed or may_match(node, self.indexed[p]))
            else "0"
            for p in paths
        )
        return json.dumps({"keep": keep, "used": ["bloom_filter, request_id"]})


@dataclasses.dataclass(frozen=True)
class History:
    """The indexed table: six files indexed at ``snapshots[5]``, then a seventh file, a position
    delete (id 11, in k1's file) and an equality delete (request_id 'k3')."""

    snapshots: list[int]  # after each commit, oldest first
    index_path: str
    files: dict[str, str]  # the file holding each k<i>


@pytest.fixture(scope="module")
def pruner(spark) -> Iterator[Pruner]:
    found = Pruner()
    attach(spark, dataclasses.replace(ANSWERS, prune_files=found))
    yield found
    attach(spark, ANSWERS)


@pytest.fixture
def calls(pruner) -> Iterator[list[Call]]:
    pruner.calls.clear()
    pruner.mode = "index"
    yield pruner.calls
    pruner.mode = "index"


@pytest.fixture(scope="module")
def history(spark, pruner) -> History:
    spark.sql(f"DROP TABLE IF EXISTS {T} PURGE")
    spark.sql(
        f"CREATE TABLE {T} (id bigint, request_id string, status string) USING iceberg "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
        "'write.update.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read', "
        "'sparkext.index.request_id' = "
        '\'{"type": "bloom_filter", "column": "request_id", "options": {}}\')'
    )
    snapshots = []

    def commit(sql: str) -> None:
        spark.sql(sql)
        snapshots.append(java_table(spark, T).currentSnapshot().snapshotId())

    # one file per commit; every file holds 'aa' and 'zz': Iceberg's min/max bounds cannot rule
    # any k<i> out
    for i in range(1, 7):
        commit(one_file(i))
    files = {
        r.request_id: r["_file"]
        for r in spark.sql(f"SELECT request_id, _file FROM {T}").collect()
        if r.request_id.startswith("k")
    }
    assert len(set(files.values())) == 6
    pruner.indexed = {
        path: {
            r.request_id
            for r in spark.sql(f"SELECT request_id FROM {T} WHERE _file = '{path}'").collect()
        }
        for path in files.values()
    }
    index_path = attach_index(spark, T, "request_id")
    commit(one_file(7))
    commit(f"DELETE FROM {T} WHERE id = 11")
    add_equality_deletes(spark, T, ["request_id"], [["k3"]])
    snapshots.append(java_table(spark, T).currentSnapshot().snapshotId())
    spark.sql(f"REFRESH TABLE {T}")
    spark.sql(f"ALTER TABLE {T} CREATE TAG indexed AS OF VERSION {snapshots[5]}")
    spark.sql(f"ALTER TABLE {T} CREATE TAG before AS OF VERSION {snapshots[4]}")
    spark.sql(f"ALTER TABLE {T} CREATE BRANCH side AS OF VERSION {snapshots[5]}")
    spark.sql(f"INSERT INTO {T}.branch_side VALUES (80, 'k8', 's')")
    files["k7"] = spark.sql(f"SELECT _file FROM {T} WHERE request_id = 'k7'").first()[0]
    return History(snapshots, index_path, files)


def one_file(i: int, name: str = T) -> str:
    return (
        f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ * FROM VALUES ({10 * i}, 'aa', 's'), "
        f"({10 * i + 1}, 'k{i}', 's'), ({10 * i + 2}, 'zz', 's') AS v(id, request_id, status)"
    )


def pruned_and_not(spark, sql: str) -> tuple[list[tuple], list[tuple]]:
    """The rows of ``sql`` with the indexes, then without them."""
    on = rows(spark.sql(sql))
    spark.conf.set(ENABLED, "false")
    try:
        off = rows(spark.sql(sql))
    finally:
        spark.conf.unset(ENABLED)
    return on, off


def explain(spark, sql: str, mode: str = "") -> str:
    return "\n".join(r[0] for r in spark.sql(f"EXPLAIN {mode} {sql}").collect())


def test_a_pruned_scan_reads_the_kept_files_and_applies_their_deletes(spark, history, calls):
    sql = f"SELECT * FROM {T} WHERE request_id IN ('k1', 'k2', 'k3', 'k7')"
    on, off = pruned_and_not(spark, sql)
    # k1 was deleted by position, k3 by equality: the kept files' deletes still apply
    assert on == off == [(21, "k2", "s"), (71, "k7", "s")]
    (call,) = calls
    assert call.snapshot_id == history.snapshots[-1]  # the index is the ancestor's
    assert call.index_path == history.index_path
    assert call.index_size > call.footer_size > 0
    assert call.predicate == {
        "op": "in",
        "col": "request_id",
        "type": "string",
        "values": ["k1", "k2", "k3", "k7"],
    }
    assert sorted(call.candidates) == sorted(set(history.files.values()))
    # kept: the three indexed files that held k1, k2, k3, and the file the index does not list
    for mode in ("", "EXTENDED", "FORMATTED"):
        assert f"sparkext index: kept 4 of 7 files {USED}" in explain(spark, sql, mode)


def test_the_scan_reads_only_the_kept_files(spark, history, calls, pruner):
    """A wrong index loses rows: the pruned scan really skips what it was told to."""
    sql = f"SELECT id FROM {T} WHERE request_id = 'aa' OR request_id = 'k2'"
    pruner.mode = "none"
    assert rows(spark.sql(sql)) == []
    assert f"kept 0 of 7 files {USED}" in explain(spark, sql)
    pruner.mode = "index"
    on, off = pruned_and_not(spark, sql)
    assert on == off and len(on) == 8  # 'aa' is in every file: nothing to skip
    assert "sparkext index" not in explain(spark, sql)


@pytest.mark.parametrize("mode", ["raise", "garbage", "record"])
def test_a_failing_or_empty_answer_reads_every_file(spark, history, calls, pruner, mode):
    pruner.mode = mode
    sql = f"SELECT * FROM {T} WHERE request_id = 'k2'"
    assert rows(spark.sql(sql)) == [(21, "k2", "s")]
    assert "sparkext index" not in explain(spark, sql)
    assert calls  # it was asked


def test_the_session_switch_turns_pruning_off(spark, history, calls):
    sql = f"SELECT * FROM {T} WHERE request_id = 'k2'"
    spark.conf.set(ENABLED, "false")
    try:
        assert "sparkext index" not in explain(spark, sql)
        assert rows(spark.sql(sql)) == [(21, "k2", "s")]
    finally:
        spark.conf.unset(ENABLED)
    assert calls == []
    assert f"kept 2 of 7 files {USED}" in explain(spark, sql)  # k2's, and k7's (not indexed)


def test_every_session_prunes(spark, history, calls):
    """Each session of the application gets the rule (the Thrift server opens one per client),
    and gets it back when its extra optimizations are replaced."""
    sql = f"SELECT * FROM {T} WHERE request_id = 'k2'"
    other = spark.newSession()
    assert f"kept 2 of 7 files {USED}" in explain(other, sql)
    jother = other._jsparkSession
    jvm = spark._jvm
    nothing = jvm.org.apache.spark.api.python.PythonUtils.toSeq(jvm.java.util.ArrayList())
    getattr(jother.experimental(), "extraOptimizations_$eq")(nothing)
    assert rows(other.sql(sql)) == [(21, "k2", "s")]
    assert f"kept 2 of 7 files {USED}" in explain(other, sql)
    rules = jother.experimental().extraOptimizations()
    assert [rules.apply(i).ruleName() for i in range(rules.size())] == [
        "io.sparkext.spark.SkippingRule"
    ]


@pytest.mark.parametrize(
    ("version", "pruned"),
    [
        ("before", None),  # a tag on the snapshot before the index: no index in its ancestry
        ("indexed", "kept 1 of 6 files"),  # the tag of the indexed snapshot
        ("side", "kept 2 of 7 files"),  # a branch from it, with a file the index does not list
    ],
)
def test_time_travel_uses_that_snapshots_ancestry(spark, history, calls, version, pruned):
    sql = f"SELECT * FROM {T} VERSION AS OF '{version}' WHERE request_id IN ('k2', 'k8')"
    on, off = pruned_and_not(spark, sql)
    assert on == off
    text = explain(spark, sql)
    if pruned is None:
        assert "sparkext index" not in text and calls == []
    else:
        assert pruned in text
        assert {c.index_path for c in calls} == {history.index_path}


def test_time_travel_by_id_and_by_time_before_and_after_the_index(spark, history, calls):
    before, indexed, after = history.snapshots[4], history.snapshots[5], history.snapshots[7]
    for snapshot, pruned in ((before, False), (indexed, True), (after, True)):
        committed = spark.sql(
            f"SELECT CAST(committed_at AS STRING) FROM {T}.snapshots WHERE snapshot_id = {snapshot}"
        ).first()[0]
        for version in (f"VERSION AS OF {snapshot}", f"TIMESTAMP AS OF '{committed}'"):
            sql = f"SELECT * FROM {T} {version} WHERE request_id = 'k2'"
            on, off = pruned_and_not(spark, sql)
            assert on == off == [(21, "k2", "s")]
            assert ("sparkext index" in explain(spark, sql)) is pruned, version
    assert {c.snapshot_id for c in calls} == {indexed, after}


def test_joins_and_subqueries_prune_each_scan(spark, history, calls):
    join = (
        f"SELECT a.id, b.id FROM {T} a JOIN {T} b ON a.status = b.status "
        "WHERE a.request_id = 'k2' AND b.request_id IN ('k4', 'k5')"
    )
    subqueries = (
        f"SELECT id, (SELECT max(id) FROM {T} WHERE request_id = 'k5') AS m FROM {T} "
        f"WHERE request_id = 'k4' AND id IN (SELECT id + 0 FROM {T} WHERE request_id = 'k4')"
    )
    for sql, expected, kept in (
        # each keeps the files of its values and k7's, which the index does not list
        (join, [(21, 41), (21, 51)], ["kept 2 of 7", "kept 3 of 7"]),
        (subqueries, [(41, 51)], ["kept 2 of 7", "kept 2 of 7", "kept 2 of 7"]),
    ):
        on, off = pruned_and_not(spark, sql)
        assert on == off == expected
        text = explain(spark, sql)
        assert sorted(kept) == sorted(
            line.split("sparkext index: ")[1][:11]
            for line in text.splitlines()
            if "sparkext index: " in line
        ), text


def test_each_scan_is_asked_once(spark, history, calls):
    """The optimizer runs its last batch again after one scan was pruned: the scan the index
    kept whole is not asked twice."""
    sql = (
        f"SELECT a.id, b.id FROM {T} a JOIN {T} b ON a.status = b.status "
        "WHERE a.request_id = 'k2' AND b.request_id = 'aa'"  # 'aa' is in every file
    )
    assert len(rows(spark.sql(sql))) == 7
    assert len(calls) == 2


def scanned_rows(frame, table: str) -> int:
    """Rows the scan of ``table`` returned in ``frame``'s last run (a plan without AQE)."""
    leaves = frame._jdf.queryExecution().executedPlan().collectLeaves()
    counts = [
        leaves.apply(i).metrics().apply("numOutputRows").value()
        for i in range(leaves.size())
        if table in leaves.apply(i).simpleString(100)
    ]
    assert len(counts) == 1, counts
    return counts[0]


def test_a_pruned_scan_keeps_dynamic_partition_pruning(spark, pruner, calls):
    """A join's runtime filter (Spark's dynamic partition pruning) still narrows a pruned scan of
    a partitioned table: Iceberg's partition evaluation over the kept files."""
    fact, dim = "lake.test.skip_hook_fact", "lake.test.skip_hook_dim"
    for name in (fact, dim):
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(
        f"CREATE TABLE {fact} (p int, request_id string, v bigint) USING iceberg "
        "PARTITIONED BY (p) TBLPROPERTIES ("
        '\'sparkext.index.r\' = \'{"type": "bitmap", "column": "request_id"}\')'
    )
    spark.sql(f"CREATE TABLE {dim} (p int, name string) USING iceberg")
    spark.sql(  # one file per partition p, 50 rows: k0-<p>, k1-<p>, k2-<p> (overlapping bounds)
        f"INSERT INTO {fact} SELECT /*+ REPARTITION(1) */ id % 4, "
        "concat('k', id % 3, '-', id % 4), id FROM range(200)"
    )
    spark.sql(f"INSERT INTO {dim} VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (3, 'three')")
    attach_index(spark, fact, "request_id")
    for (path,) in spark.sql(f"SELECT file_path FROM {fact}.files").collect():
        pruner.indexed[path] = {
            r[0]
            for r in spark.sql(f"SELECT request_id FROM {fact} WHERE _file = '{path}'").collect()
        }
    sql = (  # the index keeps p = 1, 2, 3; the join's runtime filter p = 2, 3
        f"SELECT f.p, count(*) FROM {fact} f JOIN {dim} d ON f.p = d.p "
        "WHERE d.name IN ('two', 'three') AND f.request_id IN ('k0-1', 'k0-2', 'k1-3') "
        "GROUP BY f.p"
    )
    settings = {  # runtime filters even on these tiny tables; one plan to read metrics from
        "spark.sql.optimizer.dynamicPartitionPruning.useStats": "false",
        "spark.sql.optimizer.dynamicPartitionPruning.fallbackFilterRatio": "100",
        "spark.sql.adaptive.enabled": "false",
    }
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        on, off = pruned_and_not(spark, sql)
        text = explain(spark, sql)
        frame = spark.sql(sql)
        frame.collect()
        read = scanned_rows(frame, fact)
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    assert on == off == [(2, 17), (3, 17)]
    (scan,) = [line for line in text.splitlines() if "sparkext index" in line]
    assert "kept 3 of 4 files (bloom_filter, request_id)" in scan
    assert "RuntimeFilters: [dynamicpruningexpression(p#" in scan
    assert read == 100  # the files of p = 2 and 3: the runtime filter removed p = 1's


def test_row_level_writes_on_an_indexed_table_are_left_to_iceberg(spark, pruner, calls):
    """MERGE, UPDATE and DELETE read the files they rewrite: an index answering "none" (wrong on
    purpose) would make them miss rows if the hook touched their plans."""
    name = "lake.test.skip_hook_writes"
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(
        f"CREATE TABLE {name} (id bigint, request_id string, status string) USING iceberg "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
        "'write.update.mode' = 'copy-on-write', 'write.merge.mode' = 'merge-on-read', "
        '\'sparkext.index.r\' = \'{"type": "bitmap", "column": "request_id"}\')'
    )
    for i in range(1, 5):
        spark.sql(one_file(i, name))
    attach_index(spark, name, "request_id")
    pruner.mode = "none"
    spark.sql(f"DELETE FROM {name} WHERE request_id = 'k1'")
    spark.sql(f"UPDATE {name} SET status = 'u' WHERE request_id = 'k2'")
    spark.sql(
        f"MERGE INTO {name} t USING (SELECT 'k3' AS r) s ON t.request_id = s.r "
        "WHEN MATCHED THEN UPDATE SET status = 'm'"
    )
    assert calls == []
    pruner.mode = "index"
    on, off = pruned_and_not(spark, f"SELECT id, status FROM {name} WHERE request_id LIKE 'k%'")
    assert on == off == [(21, "u"), (31, "m"), (41, "s")]


# The predicate JSON of representative filters, as Spark's optimizer leaves them above the scan
# (it adds the IS NOT NULL of each compared column, simplifies LIKE patterns, rewrites ILIKE as a
# LIKE of lower(), unwraps widening casts it can itself). Session time zone: America/New_York.
NN = {"op": "is_not_null"}


def _and(column: str, leaf: dict) -> dict:
    return {"op": "and", "args": [{**NN, "col": column}, leaf]}


def _leaf(op: str, column: str, type_: str, **rest) -> dict:
    return {"op": op, "col": column, "type": type_, **rest}


PREDICATES = [
    ("d = DATE '2024-01-02'", _and("d", _leaf("eq", "d", "date", value=19724))),
    ("d < DATE '1969-12-31'", _and("d", _leaf("lt", "d", "date", value=-1))),
    ("amount = 1.5", _and("amount", _leaf("eq", "amount", "decimal(10,2)", value="1.50"))),
    (
        "amount IN (1.5, 20.25)",
        _leaf("in", "amount", "decimal(10,2)", values=["1.50", "20.25"]),
    ),
    (  # 00:00 in New York is 05:00 UTC
        "ts = TIMESTAMP '2024-01-01 00:00:00'",
        _and("ts", _leaf("eq", "ts", "timestamp", value=1704085200000000)),
    ),
    (
        "ntz >= TIMESTAMP_NTZ '2024-01-01 00:00:00'",
        _and("ntz", _leaf("ge", "ntz", "timestamp_ntz", value=1704067200000000)),
    ),
    ("i IN (1, 2, 3)", _leaf("in", "i", "int", values=[1, 2, 3])),
    (  # more than ten values: an InSet, its values in order
        "i IN (12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)",
        _leaf("in", "i", "int", values=list(range(1, 13))),
    ),
    ("s IN ('a', NULL)", _leaf("in", "s", "string", values=["a", None])),
    (
        "s LIKE 'a!_c%' ESCAPE '!'",
        _and("s", _leaf("like", "s", "string", pattern="a!_c%", escape="!")),
    ),
    ("s LIKE 'a_c%'", _and("s", _leaf("like", "s", "string", pattern="a_c%", escape="\\"))),
    ("s LIKE 'abc%'", _and("s", _leaf("starts_with", "s", "string", value="abc"))),
    ("s LIKE '%abc'", _and("s", _leaf("ends_with", "s", "string", value="abc"))),
    ("s LIKE '%abc%'", _and("s", _leaf("contains", "s", "string", value="abc"))),
    (
        "s ILIKE 'A_C'",
        _and("s", _leaf("like", "s", "string", fold="lower", pattern="a_c", escape="\\")),
    ),
    ("s ILIKE 'AbC%'", _and("s", _leaf("starts_with", "s", "string", fold="lower", value="abc"))),
    ("upper(s) = 'ABC'", _and("s", _leaf("eq", "s", "string", fold="upper", value="ABC"))),
    ("s RLIKE '^a.c$'", _and("s", _leaf("rlike", "s", "string", pattern="^a.c$"))),
    ("si <= 7", _and("si", _leaf("le", "si", "int", value=7))),  # cast(si AS int) <= 7
    ("CAST(i AS STRING) = '5'", _and("i", {"op": "unknown"})),  # not a widening cast
    ("5 < l", _and("l", _leaf("gt", "l", "bigint", value=5))),  # the column goes left
    ("l <=> 4", _leaf("eq_null_safe", "l", "bigint", value=4)),
    ("i <=> NULL", {"op": "is_null", "col": "i"}),
    ("NOT (s = 'x')", _and("s", {"op": "not", "arg": _leaf("eq", "s", "string", value="x")})),
    (
        "i = 1 OR s = 'b'",
        {
            "op": "or",
            "args": [_leaf("eq", "i", "int", value=1), _leaf("eq", "s", "string", value="b")],
        },
    ),
    ("b = X'0102'", _and("b", _leaf("eq", "b", "binary", value="AQI="))),
    ("flag", _and("flag", _leaf("eq", "flag", "boolean", value=True))),
    ("f = CAST('NaN' AS FLOAT)", _and("f", _leaf("eq", "f", "float", value="NaN"))),
    (
        "db > CAST('-Infinity' AS DOUBLE)",
        _and("db", _leaf("gt", "db", "double", value="-Infinity")),
    ),
    ("db = 0.1", _and("db", _leaf("eq", "db", "double", value=0.1))),
    ("ti = -1", _and("ti", _leaf("eq", "ti", "int", value=-1))),  # cast(ti AS int) = -1
    ("length(s) = 3", _and("s", {"op": "unknown"})),  # a file of nulls only could still go
    # nothing an index can answer: the driver is not asked
    ("coalesce(s, 'x') = 'y'", None),
    ("i = 1 OR length(s) = 3", None),
]


@pytest.fixture(scope="module")
def typed(spark, pruner) -> str:
    name = "lake.test.skip_hook_types"
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(
        f"CREATE TABLE {name} (ti tinyint, si smallint, i int, l bigint, f float, db double, "
        "amount decimal(10,2), s string, b binary, flag boolean, d date, ts timestamp, "
        "ntz timestamp_ntz) USING iceberg TBLPROPERTIES ("
        # no column bounds: Iceberg plans the file for every filter, so the driver is asked
        "'write.metadata.metrics.default' = 'none', "
        '\'sparkext.index.s\' = \'{"type": "bloom_filter", "column": "s"}\')'
    )
    spark.sql(
        f"INSERT INTO {name} VALUES (1, 2, 3, 4, 1.5, 2.5, 1.50, 'abc', X'0102', true, "
        "DATE '2024-01-02', TIMESTAMP '2024-01-01 05:00:00', TIMESTAMP_NTZ '2024-01-01 00:00:00')"
    )
    attach_index(spark, name, "s")
    return name


def test_the_predicate_json_of_representative_filters(spark, typed, pruner, calls):
    pruner.mode = "record"
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for condition, expected in PREDICATES:
            calls.clear()
            spark.sql(f"SELECT * FROM {typed} WHERE {condition}").collect()
            got = [c.predicate for c in calls]
            assert got == ([] if expected is None else [expected]), condition
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


class Statements:
    """``Answers.call`` stub: records the statements the parser hands to the Python driver."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, spark, sql):
        self.seen.append(sql)
        return spark.createDataFrame([("routed",)], "result string")


def test_the_parser_routes_index_statements_to_the_driver(spark, history, pruner):
    stub = Statements()
    attach(spark, dataclasses.replace(ANSWERS, call=stub, prune_files=pruner))
    spark.sql(
        "CREATE TABLE IF NOT EXISTS spark_catalog.default.skip_hook_plain (c int) USING parquet"
    )
    try:
        ours = [
            f"CREATE INDEX r ON {T} USING bloom_filter (request_id) OPTIONS ('fpp' = '0.01')",
            f"/* c */ create index if not exists r on table {T} using `NGRAM_BITMAP` (status)",
            f"DROP INDEX r ON {T}",
            f"DROP INDEX IF EXISTS r ON TABLE {T}",
            f"SHOW INDEXES FROM {T}",
            f"  show index in {T}",
        ]
        for sql in ours:
            assert spark.sql(sql).collect()[0][0] == "routed", sql
        assert stub.seen == ours
        stub.seen.clear()
        # Spark's own index statements, for tables that support indexes (JDBC ones)
        spark_s = [
            f"CREATE INDEX r ON {T} USING btree (request_id)",
            f"CREATE INDEX `using` ON {T} (request_id) OPTIONS ('k' = 'bloom_filter')",
            "DROP INDEX r ON spark_catalog.default.skip_hook_plain",
            "DROP INDEX r ON lake.test.no_such_table",
        ]
        for sql in spark_s:
            with pytest.raises(AnalysisException):
                spark.sql(sql).collect()
        assert stub.seen == []
    finally:
        attach(spark, dataclasses.replace(ANSWERS, prune_files=pruner))
        spark.sql("DROP TABLE IF EXISTS spark_catalog.default.skip_hook_plain")


NO_ICEBERG = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    jar, extension = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", jar)
        .config("spark.driver.extraClassPath", jar)
        .config("spark.sql.extensions", extension)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.range(10).createOrReplaceTempView("v")
    print(spark.sql("SELECT count(*) FROM v WHERE id > 3").collect()[0][0])
    spark.range(5).write.mode("overwrite").parquet(sys.argv[3])
    print(spark.read.parquet(sys.argv[3]).where("id = 2").count())
    parser = spark._jsparkSession.sessionState().sqlParser()
    print(spark._jvm.io.sparkext.spark.Bridge.isSparkextParser(parser))
    print(spark._jsparkSession.experimental().extraOptimizations().size())
    """
)


@pytest.mark.slow
def test_the_extension_works_without_iceberg(tmp_path):
    """An application with sparkext's extension and no Iceberg jar: plain SQL runs, and no
    skipping rule is installed (its classes would need Iceberg's)."""
    script = tmp_path / "no_iceberg.py"
    script.write_text(NO_ICEBERG, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(jar_path()), EXTENSION, str(tmp_path / "p")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["6", "1", "True", "0"]
