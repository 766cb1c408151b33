"""Skipping indexes end to end: declared from every route, built on executors into Puffin index
objects Iceberg reads, kept incrementally, expired with their snapshots, shown in health, and
used by every query's planning with the same rows as without them.

Oracles: Iceberg's own view of the table (``statisticsFiles()``, its Puffin reader, its expiry
and orphan listing), a Puffin footer read here by hand, the live files of the ``data_files``
metadata table, and the rows of the same query with ``spark.sparkext.index.enabled=false``.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import sparkext
from sparkext.actions.skipping import prune_files
from sparkext.iceberg.catalog import load_java_table
from sparkext.iceberg.maintenance import orphan_files
from sparkext.planning.skipping import BLOB_TYPE
from tests.spark.test_every_route import via_jdbc, via_python, via_shell_e, via_spark

pytestmark = pytest.mark.slow
ROUTED = "lake.test.skipping_routes"
THETA = "apache-datasketches-theta-v1"


def rows(spark, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in sparkext.sql(sql).collect())


def one(spark, sql: str) -> dict:
    (row,) = sparkext.sql(sql).collect()
    return row.asDict()


def by_name(spark, sql: str) -> dict[str, dict]:
    return {r["name"]: r.asDict() for r in sparkext.sql(sql).collect()}


def events(spark, name: str, commits: int, start: int = 0) -> None:
    """``commits`` commits of one data file each, two rows per file: a needle row (id i,
    request id ``a<i>``, status E every third commit, else OK) and a filler row (request id
    ``z<i>``, status A) that widens the file's min/max to every value: Iceberg's own statistics
    can then skip no file, and what is skipped is the index's doing."""
    if not spark.catalog.tableExists(name):
        spark.sql(
            f"CREATE TABLE {name} (id bigint, request_id string, status string, message string) "
            "USING iceberg TBLPROPERTIES ('format-version' = '2')"
        )
    for i in range(start, start + commits):
        status = "E" if i % 3 == 0 else "OK"
        text = "disk timeout after 30 s" if i % 4 == 0 else "request served"
        frame = spark.createDataFrame(
            [(i, f"a{i:04d}", status, text), (1000 + i, f"z{i:04d}", "A", "filler")],
            "id bigint, request_id string, status string, message string",
        )
        frame.coalesce(1).writeTo(name).append()


def statistics(spark, name: str) -> dict[int, tuple[str, list[str]]]:
    """Iceberg's view: snapshot -> (statistics file path, its blob types)."""
    table = load_java_table(spark, name)
    table.refresh()
    return {
        int(f.snapshotId()): (str(f.path()), [str(b.type()) for b in f.blobMetadata()])
        for f in table.statisticsFiles()
    }


def current_snapshot(spark, name: str) -> int:
    table = load_java_table(spark, name)
    table.refresh()
    return int(table.currentSnapshot().snapshotId())


def puffin_footer(path: str) -> dict:
    """The footer of a Puffin file, read by hand from the spec (magic, payload, size, flags)."""
    with open(path.removeprefix("file:"), "rb") as handle:
        data = handle.read()
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    size = int.from_bytes(data[-12:-8], "little")
    assert data[-8:-4] == b"\0\0\0\0"  # not compressed
    return json.loads(data[-12 - size : -12])


# ---- every route ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(spark, warehouse, tmp_path_factory):
    from tests.helpers.serve import launch, ready, stop

    served = launch(tmp_path_factory.mktemp("skipping-serve"), warehouse)
    spark.sql(f"DROP TABLE IF EXISTS {ROUTED}")
    events(spark, ROUTED, 3)
    ready(served)
    yield served.port
    stop(served)


T = ROUTED
STATEMENTS = (
    f"CREATE INDEX rid ON {T} USING bloom_filter (request_id) OPTIONS (fpp = 0.05)",
    f"CREATE INDEX IF NOT EXISTS rid ON TABLE {T} USING bitmap (status)",
    f"SHOW INDEXES FROM {T}",
    f"SELECT name, type, live_files FROM sparkext.show_indexes('{T}')",
    f"CALL sparkext.show_indexes(table => '{T}')",
    f"DROP INDEX rid ON {T}",
    f"DROP INDEX IF EXISTS rid ON {T}",
    f"CALL sparkext.create_index(table => '{T}', name => 'st', type => 'bitmap', "
    "column => 'status', options => map('max_distinct', '16'))",
    f"SHOW INDEX IN {T}",
    f"CALL sparkext.drop_index('{T}', 'st')",
    # bad input: one sentence, whichever route
    f"CREATE INDEX rid ON {T} USING bloom_filter (nope)",
    f"CREATE INDEX rid ON {T} USING bitmap (status) OPTIONS ('fpp' = '0.1')",
    f"CREATE INDEX rid ON {T} USING bitmap (status) OPTIONS (max_distinct = 0)",
    f"CREATE INDEX rid ON {T} USING token_bitmap (id)",
    f"CREATE INDEX rid ON {T} USING bloom_filter (request_id, status)",
    f"CALL sparkext.create_index(table => '{T}', name => 'x', type => 'bloom', "
    "column => 'request_id')",
    f"CALL sparkext.create_index(table => '{T}', name => '9x', type => 'bitmap', "
    "column => 'status')",
    f"DROP INDEX rid ON {T}",
    f"SHOW INDEXES {T}",
    "CREATE INDEX rid ON lake.test.no_such_table USING bloom_filter (c)",
    f"CALL sparkext.build_indexes('{T}')",
)


def _run_all(run) -> list[tuple]:
    return [run(sql) for sql in STATEMENTS]


def test_every_route_declares_shows_and_drops_with_the_same_rows_and_sentences(
    spark, server, warehouse
):
    outcomes = {
        "sparkext.sql": _run_all(lambda sql: via_python(spark, sql)),
        "spark.sql": _run_all(lambda sql: via_spark(spark, sql)),
        "shell -e": _run_all(lambda sql: via_shell_e(spark, sql)),
        "serve (JDBC)": _run_all(lambda sql: via_jdbc(server, sql)),
    }
    expected = outcomes["sparkext.sql"]
    for route, got in outcomes.items():
        for sql, mine, theirs in zip(STATEMENTS, expected, got, strict=True):
            assert theirs == mine, f"{route}: {sql}\n{theirs}\n!= sparkext.sql's\n{mine}"
    said = dict(zip(STATEMENTS, expected, strict=True))
    created = said[STATEMENTS[0]]
    assert created[0] == "rows" and created[2][0][:2] == ["rid", "bloom_filter"], created
    assert said[STATEMENTS[1]][2][0][4] == "already exists; left as it is (IF NOT EXISTS)"
    shown = said[STATEMENTS[2]]
    assert shown[1][:4] == ["name", "type", "column", "options"]
    assert shown[2] == [
        ["rid", "bloom_filter", "request_id", '{"fpp": "0.05", "max_bytes": "1048576"}',
         "0", "3", "0", None, None]
    ]  # fmt: skip
    assert said[STATEMENTS[6]][2] == [["rid", "did not exist; nothing changed (IF EXISTS)"]]
    errors = [o[1] for o in expected if o[0] == "error"]
    assert errors == [
        "Column 'nope' is not a top-level column of the table: use one of id, request_id, "
        "status, message.",
        "Option 'fpp' is unknown for a bitmap index: use max_distinct.",
        "Option max_distinct = '0' is out of range for a bitmap index: use a whole number from "
        "1 to 65536.",
        "A token_bitmap index cannot cover column 'id' of type bigint: it takes string columns.",
        "An index covers one column, not 2 (request_id, status): create one index per column.",
        "Index type 'bloom' is unknown: use one of bloom_filter, bitmap, bloom_range_filter, "
        "token_bloom_filter, token_bitmap, ngram_bloom_filter, ngram_bitmap.",
        "Index name '9x' is not a plain identifier: use letters, digits and underscores, not "
        "starting with a digit.",
        f"Index 'rid' does not exist on {T}; its indexes: none (write DROP INDEX IF EXISTS to "
        "ignore a missing one).",
        "Cannot parse the SHOW INDEXES statement at line 1, column 14: expected FROM, IN or ON "
        "and the table; write SHOW INDEXES FROM table.",
        f"Table 'lake.test.no_such_table' does not exist in catalog lake (warehouse "
        f"{warehouse}); check the name with SHOW TABLES IN lake.test.",
        f"{T} declares no skipping index; declare one first, e.g. CREATE INDEX name ON {T} "
        "USING bloom_filter (column).",
    ]


def test_a_query_through_the_thrift_server_plans_through_the_index(spark, server):
    """The Thrift server's own session (another process) declares, builds and prunes: EXPLAIN
    over JDBC names what the index kept, and the rows equal those with the index off."""
    jdbc = lambda sql: via_jdbc(server, sql)  # noqa: E731
    created = jdbc(f"CREATE INDEX IF NOT EXISTS rq ON {T} USING bloom_filter (request_id)")
    assert created[0] == "rows", created
    assert jdbc(f"CALL sparkext.build_indexes('{T}')")[0] == "rows"
    query = f"SELECT id, status FROM {T} WHERE request_id = 'a0001'"
    plan = str(jdbc(f"EXPLAIN {query}"))
    kept = re.search(r"sparkext index: kept 1 of [23] files \(bloom_filter, request_id\)", plan)
    assert kept, plan  # min/max may rule a file out before the index is asked
    on = jdbc(query)
    assert on[2] == [["1", "OK"]], on  # events(): row 1 is request a0001, status OK
    from pyhive import hive

    cursor = hive.connect(host="localhost", port=server, auth="NONE", username="t").cursor()
    try:  # one JDBC session: SET lasts for its later statements
        cursor.execute("SET spark.sparkext.index.enabled = false")
        cursor.execute(f"EXPLAIN {query}")
        assert "sparkext index" not in cursor.fetchall()[0][0]
        cursor.execute(query)
        assert [list(r) for r in cursor.fetchall()] == [[1, "OK"]]
    finally:
        cursor.close()
    jdbc(f"DROP INDEX rq ON {T}")


def test_an_existing_name_and_a_table_that_is_not_iceberg_are_one_sentence(spark, table_name):
    events(spark, table_name, 1)
    sparkext.sql(f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id)").collect()
    with pytest.raises(sparkext.SparkextError) as twice:
        sparkext.sql(f"CREATE INDEX rid ON {table_name} USING bitmap (status)")
    assert str(twice.value) == (
        f"Index 'rid' already exists on {table_name} (bloom_filter on request_id); drop it first "
        f"with DROP INDEX rid ON {table_name}, or write CREATE INDEX IF NOT EXISTS."
    )
    spark.sql(
        "CREATE TABLE IF NOT EXISTS spark_catalog.default.skipping_plain (id int) USING parquet"
    )
    with pytest.raises(sparkext.SparkextError) as plain:
        sparkext.sql(
            "CREATE INDEX p ON spark_catalog.default.skipping_plain USING bloom_filter (id)"
        )
    assert str(plain.value) == (
        "Table 'spark_catalog.default.skipping_plain' is not an Iceberg table; sparkext works on "
        "tables of an Iceberg catalog such as 'lake'."
    )
    # Spark's own CREATE INDEX (another type) and DROP INDEX (no Iceberg table) stay Spark's
    with pytest.raises(sparkext.SparkextError) as spark_own:
        sparkext.sql(f"CREATE INDEX b ON {table_name} USING btree (id)")
    assert str(spark_own.value) == f"CreateIndex is not supported in this table {table_name}."
    with pytest.raises(sparkext.SparkextError) as missing:
        sparkext.sql("DROP INDEX b ON spark_catalog.default.skipping_none")
    assert str(missing.value).startswith("[TABLE_OR_VIEW_NOT_FOUND] The table or view ")


# ---- build, storage, health ----------------------------------------------------------------


def test_build_indexes_new_files_carries_the_rest_and_keeps_other_blobs(spark, table_name):
    events(spark, table_name, 6)
    sparkext.sql(
        f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id);"
        f"CREATE INDEX st ON {table_name} USING bitmap (status);"
    ).collect()
    health = one(spark, f"SELECT indexes, index_bytes, index_coverage "
                        f"FROM sparkext.table_health('{table_name}')")  # fmt: skip
    assert health == {
        "indexes": "rid (bloom_filter on request_id), st (bitmap on status)",
        "index_bytes": 0,
        "index_coverage": 0.0,
    }
    # Iceberg's own statistics of the snapshot: their blobs must survive ours
    spark.sql(f"CALL lake.system.compute_table_stats(table => '{table_name.split('.', 1)[1]}')")
    first = current_snapshot(spark, table_name)
    theta_path, theta_types = statistics(spark, table_name)[first]
    assert theta_types and set(theta_types) == {THETA}  # one sketch per column

    built = by_name(spark, f"CALL sparkext.build_indexes(table => '{table_name}')")
    assert {n: (b["live_files"], b["files_indexed"], b["files_carried"], b["files_skipped"],
                b["snapshot_id"]) for n, b in built.items()} == {
        "rid": (6, 6, 0, 0, first), "st": (6, 6, 0, 0, first)}  # fmt: skip
    path, types = statistics(spark, table_name)[first]
    assert sorted(types) == sorted([*theta_types, BLOB_TYPE, BLOB_TYPE]) and path != theta_path
    assert os.path.exists(theta_path.removeprefix("file:"))  # Iceberg's file: not ours to delete
    footer = puffin_footer(path)
    ours = [b for b in footer["blobs"] if b["type"] == BLOB_TYPE]
    assert sorted(b["properties"]["sparkext.index.name"] for b in ours) == ["rid", "st"]
    schema = load_java_table(spark, table_name).schema()
    assert {b["properties"]["sparkext.index.name"]: b["fields"] for b in ours} == {
        "rid": [schema.findField("request_id").fieldId()],
        "st": [schema.findField("status").fieldId()],
    }
    theta = [b for b in footer["blobs"] if b["type"] == THETA]
    assert theta and all(b["snapshot-id"] == first for b in footer["blobs"])
    assert all("ndv" in b["properties"] for b in theta)  # Spark's estimates read this property

    # incremental: two new files indexed, six carried over; up to date afterwards
    events(spark, table_name, 2, start=6)
    assert one(spark, f"SELECT min(index_coverage) AS c FROM "
                      f"sparkext.table_health('{table_name}')")["c"] == 0.75  # fmt: skip
    second = current_snapshot(spark, table_name)
    built = by_name(spark, f"CALL sparkext.build_indexes('{table_name}')")
    assert {n: (b["files_indexed"], b["files_carried"], b["snapshot_id"])
            for n, b in built.items()} == {"rid": (2, 6, second), "st": (2, 6, second)}  # fmt: skip
    again = by_name(spark, f"CALL sparkext.build_indexes('{table_name}')")
    assert {n: (b["files_indexed"], b["files_carried"], b["snapshot_id"])
            for n, b in again.items()} == {"rid": (0, 8, second), "st": (0, 8, second)}  # fmt: skip
    shown = by_name(spark, f"SHOW INDEXES FROM {table_name}")
    assert {n: (s["indexed_files"], s["live_files"], s["coverage"], s["index_snapshot_id"])
            for n, s in shown.items()} == {"rid": (8, 8, 1.0, second),
                                           "st": (8, 8, 1.0, second)}  # fmt: skip
    assert shown["rid"]["index_bytes"] == built["rid"]["index_bytes"] > 0

    # a column added later: the files before it have no such column, and are indexed all the same
    spark.sql(f"ALTER TABLE {table_name} ADD COLUMN region string")
    spark.sql(f"INSERT INTO {table_name} VALUES (100, 'a0100', 'OK', 'x', 'eu')")
    sparkext.sql(f"CREATE INDEX rg ON {table_name} USING bitmap (region)").collect()
    only = by_name(spark, f"CALL sparkext.build_indexes('{table_name}', array('rg'))")
    assert (only["rg"]["files_indexed"], only["rg"]["files_skipped"]) == (9, 0)
    shown = by_name(spark, f"SHOW INDEXES FROM {table_name}")
    assert (shown["rid"]["indexed_files"], shown["rid"]["live_files"]) == (8, 9)  # not asked for
    assert shown["rg"]["coverage"] == 1.0
    rebuilt = by_name(spark, f"CALL sparkext.build_indexes('{table_name}', NULL, "
                             "map('rebuild', 'true'))")  # fmt: skip
    assert {n: b["files_indexed"] for n, b in rebuilt.items()} == {"rid": 9, "st": 9, "rg": 9}
    # the object replaced within the same snapshot is gone; every statistics file is readable
    stats = statistics(spark, table_name)
    for path, _ in stats.values():
        assert os.path.exists(path.removeprefix("file:")), path
        puffin_footer(path)


def test_tiered_optimize_builds_the_indexes_last_unless_told_not_to(spark, table_name):
    events(spark, table_name, 4)
    sparkext.sql(f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id)").collect()
    result = sparkext.sql(
        f"CALL sparkext.tiered_optimize(table => '{table_name}', levels => 'l0', "
        "options => map('l0.min-files', '2'))"
    ).collect()
    merge, index = result
    assert (merge.level, merge.input_files, merge.output_files, merge.error) == (0, 4, 1, None)
    assert (index.partition, index.level, index.error) == (None, None, None)
    assert index.reason.startswith("skipping indexes: 1 file indexed, 0 carried over, ")
    assert index.snapshot_id == merge.snapshot_id == current_snapshot(spark, table_name)
    assert one(spark, f"SELECT coverage FROM sparkext.show_indexes('{table_name}')") == {
        "coverage": 1.0
    }
    events(spark, table_name, 1, start=10)
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES "
              "('sparkext.optimize.build-indexes' = 'false')")  # fmt: skip
    assert sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{table_name}')").collect() == []
    assert one(spark, f"SELECT coverage FROM sparkext.show_indexes('{table_name}')") == {
        "coverage": 0.5
    }


def test_the_service_builds_a_stale_tables_indexes(spark):
    namespace = "lake.svc_skipping"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    name = f"{namespace}.events"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    events(spark, name, 3)
    sparkext.sql(f"CREATE INDEX st ON {name} USING bitmap (status)").collect()
    service = sparkext.optimize_service(
        f"{namespace}.*", once=True, log_table=f"{namespace}.log", maintenance=False,
        log=lambda line: None,
    )  # fmt: skip
    assert service.run().jobs_failed == 0
    assert [j.kind for j in service.ran] == ["index"]
    spark.catalog.refreshTable(f"{namespace}.log")
    (entry,) = spark.sql(f"SELECT * FROM {namespace}.log WHERE job = 'index'").collect()
    assert (entry.outcome, entry.input_files, entry.output_files) == ("ok", 3, 1)
    assert one(spark, f"SELECT coverage FROM sparkext.show_indexes('{name}')") == {"coverage": 1.0}


# ---- expiry and orphans --------------------------------------------------------------------


def test_expired_snapshots_take_their_index_objects_and_orphans_spare_live_ones(spark, table_name):
    events(spark, table_name, 2)
    sparkext.sql(f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id)").collect()
    objects = []
    for start in (2, 4, 6):
        sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
        objects.append(statistics(spark, table_name)[current_snapshot(spark, table_name)][0])
        events(spark, table_name, 2, start=start)
    sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
    live = statistics(spark, table_name)[current_snapshot(spark, table_name)][0]
    # nothing the table references is an orphan, however old (a cutoff in the future)
    future = int(time.time() * 1000) + 3_600_000
    orphans = set(orphan_files(spark, table_name, future))
    assert not {live, *objects} & orphans, orphans
    # sparkext's maintain expires all but the newest snapshot: Iceberg deletes their objects
    result = sparkext.sql(
        f"CALL sparkext.maintain(table => '{table_name}', options => map('snapshot-max-age', "
        "'1 ms', 'min-snapshots', '1', 'actions', 'expire_snapshots'))"
    ).collect()
    assert result[0].outcome == "ok", result
    assert list(statistics(spark, table_name).values()) == [(live, [BLOB_TYPE])]
    assert os.path.exists(live.removeprefix("file:"))
    assert not any(os.path.exists(p.removeprefix("file:")) for p in objects)
    assert one(spark, f"SELECT coverage FROM sparkext.show_indexes('{table_name}')") == {
        "coverage": 1.0
    }


def test_iceberg_expire_snapshots_removes_index_objects_too(spark, table_name):
    events(spark, table_name, 2)
    sparkext.sql(f"CREATE INDEX st ON {table_name} USING bitmap (status)").collect()
    sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
    old = statistics(spark, table_name)[current_snapshot(spark, table_name)][0]
    events(spark, table_name, 1, start=5)
    sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table_name.split('.', 1)[1]}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    ).collect()
    assert len(statistics(spark, table_name)) == 1
    assert not os.path.exists(old.removeprefix("file:"))


# ---- the planner's question ----------------------------------------------------------------


def test_prune_files_answers_for_the_declared_indexes_and_never_raises(spark, table_name):
    events(spark, table_name, 4)
    sparkext.sql(f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id)").collect()
    sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
    table = load_java_table(spark, table_name)
    table.refresh()
    (stats,) = list(table.statisticsFiles())
    paths = [r.file_path for r in spark.sql(f"SELECT file_path FROM {table_name}.data_files "
                                            "ORDER BY file_path").collect()]  # fmt: skip
    wanted = spark.sql(f"SELECT _file FROM {table_name} WHERE request_id = 'a0002'").first()[0]
    predicate = json.dumps({"op": "eq", "col": "request_id", "type": "string", "value": "a0002"})
    args = (table, int(stats.snapshotId()), str(stats.path()), int(stats.fileSizeInBytes()),
            int(stats.fileFooterSizeInBytes()))  # fmt: skip
    answer = json.loads(prune_files(spark, *args, predicate, "\n".join(paths)))
    assert answer["used"] == ["bloom_filter, request_id"]
    assert answer["keep"][paths.index(wanted)] == "1"
    assert answer["keep"].count("1") <= 2  # the file, maybe one false positive
    # no usable index, a broken path, a broken predicate: keep everything, never raise
    assert prune_files(spark, *args[:2], "/no/such.stats", 10, 5, predicate, "\n".join(paths)) == ""
    assert prune_files(spark, *args, "{not json", "\n".join(paths)) == ""
    sparkext.sql(f"DROP INDEX rid ON {table_name}").collect()
    table.refresh()
    assert prune_files(spark, *args, predicate, "\n".join(paths)) == ""  # dropped: unused


def test_a_query_plans_through_the_index_with_the_same_rows(spark, table_name):
    """Every route of a query reaches the optimizer rule: EXPLAIN says what it kept, and rows
    equal those of the same query without the index."""
    events(spark, table_name, 8)
    sparkext.sql(
        f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id);"
        f"CREATE INDEX st ON {table_name} USING bitmap (status);"
        f"CALL sparkext.build_indexes('{table_name}');"
    ).collect()
    queries = (
        f"SELECT * FROM {table_name} WHERE request_id = 'a0007'",
        f"SELECT * FROM {table_name} WHERE request_id IN ('a0001', 'a0006', 'none')",
        f"SELECT id FROM {table_name} WHERE status = 'E'",
        f"SELECT id FROM {table_name} WHERE status <> 'OK' OR request_id = 'a0004'",
        f"SELECT count(*) FROM {table_name} WHERE status IS NULL",
    )
    for query in queries:
        on = rows(spark, query)
        spark.conf.set("spark.sparkext.index.enabled", "false")
        try:
            off = rows(spark, query)
            plain = spark.sql(f"EXPLAIN {query}").first()[0]
        finally:
            spark.conf.unset("spark.sparkext.index.enabled")
        assert on == off, query
        assert "sparkext index" not in plain
    plan = spark.sql(f"EXPLAIN {queries[0]}").first()[0]
    assert "sparkext index: kept 1 of 8 files (bloom_filter, request_id)" in plan, plan
    plan = spark.sql(f"EXPLAIN {queries[2]}").first()[0]
    assert "sparkext index: kept 3 of 8 files (bitmap, status)" in plan, plan
    with ThreadPoolExecutor(4) as pool:  # planned from several threads at once, same answers
        answers = list(pool.map(lambda q: rows(spark, q), queries * 2))
    assert answers[: len(queries)] == answers[len(queries) :]


def test_a_failed_commit_deletes_the_new_object_and_an_unknown_one_keeps_it(
    spark, table_name, monkeypatch
):
    from sparkext.errors import CommitConflictError, CommitStateUnknownError
    from sparkext.iceberg import skipping as storage

    events(spark, table_name, 2)
    sparkext.sql(f"CREATE INDEX st ON {table_name} USING bitmap (status)").collect()
    metadata = os.path.dirname(
        str(load_java_table(spark, table_name).operations().current().metadataFileLocation())
    ).removeprefix("file:")

    def objects() -> set[str]:
        return {f for f in os.listdir(metadata) if f.startswith(storage.FILE_PREFIX)}

    for error, kept in ((CommitConflictError("lost"), 0), (CommitStateUnknownError("?"), 1)):

        def fail(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(storage, "commit", fail)
        with pytest.raises(type(error)):
            sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
        assert len(objects()) == kept, error
        assert statistics(spark, table_name) == {}  # nothing attached either way


def test_a_build_that_loses_a_race_builds_again_from_the_winners_object(
    spark, table_name, monkeypatch
):
    """Another build attaches its object to the same snapshot between this build's planning
    and its commit: this one's commit is refused, its file deleted, and it starts again from
    the winner's object (which lists every file: nothing left to build)."""
    from sparkext.iceberg import skipping as storage

    events(spark, table_name, 3)
    sparkext.sql(f"CREATE INDEX st ON {table_name} USING bitmap (status)").collect()
    original = storage.SkippingTable.write
    writes: list[str] = []

    def racing(self, snapshot_id, blobs, base):
        if not writes:  # the rival commits first, with the same base
            writes.append(original(self, snapshot_id, blobs, base).path)
        written = original(self, snapshot_id, blobs, base)
        writes.append(written.path)
        return written

    monkeypatch.setattr(storage.SkippingTable, "write", racing)
    (row,) = sparkext.sql(f"CALL sparkext.build_indexes('{table_name}')").collect()
    assert len(writes) == 1, writes  # the retry found nothing to build: no second write
    assert (row.files_indexed, row.files_carried) == (0, 3), row
    ((path, _),) = statistics(spark, table_name).values()
    assert path == writes[0]
    metadata = os.path.dirname(path.removeprefix("file:"))
    objects = [f for f in os.listdir(metadata) if f.startswith(storage.FILE_PREFIX)]
    assert objects == [os.path.basename(path)]  # the loser's file is gone


# ---- other readers and other ways in -------------------------------------------------------


def _recording_prunes(spark):
    """A context manager recording every ``prune_files`` answer (kept, of candidates)."""
    import contextlib
    import dataclasses

    from sparkext.routing.in_spark import ANSWERS
    from sparkext.spark.extension import attach

    answers: list[tuple[int, int]] = []

    def recorded(*args):
        out = ANSWERS.prune_files(*args)
        candidates = len(args[-1].split("\n"))
        kept = json.loads(out)["keep"].count("1") if out else candidates
        answers.append((kept, candidates))
        return out

    @contextlib.contextmanager
    def recording():
        attach(spark, dataclasses.replace(ANSWERS, prune_files=recorded))
        try:
            yield answers
        finally:
            attach(spark, ANSWERS)

    return recording()


def test_a_streaming_backfill_is_pruned_by_the_index_with_the_same_rows(spark, table_name):
    """A job's batch SQL (``run_backfill``) plans through the same rule: its scan of the source
    is pruned, and the sink gets the rows the same filter gives with the index off."""
    from sparkext.streaming import run_backfill

    source, sink = f"{table_name}_src", f"{table_name}_sink"
    for name in (source, sink):
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(
        f"CREATE TABLE {source} (id bigint, request_id string, status string, ts timestamp) "
        "USING iceberg TBLPROPERTIES ('format-version' = '2')"
    )
    for i in range(6):  # one file per commit, each spanning the whole day and every status
        spark.sql(
            f"SELECT {i} AS id, 'a{i}' AS request_id, '{'E' if i % 3 == 0 else 'OK'}' AS status, "
            f"TIMESTAMP '2026-11-20 0{i}:00:00' AS ts UNION ALL SELECT {100 + i}, 'z{i}', 'A', "
            "TIMESTAMP '2026-11-20 23:00:00'"
        ).coalesce(1).writeTo(source).append()
    sparkext.sql(
        f"CREATE INDEX st ON {source} USING bitmap (status);CALL sparkext.build_indexes('{source}')"
    ).collect()
    job = f"""
        CREATE TABLE {source} (id BIGINT, request_id STRING, status STRING, ts TIMESTAMP,
                               WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS);
        CREATE TABLE {sink} (id BIGINT, ts TIMESTAMP);
        INSERT INTO {sink} SELECT id, ts FROM {source} WHERE status = 'E';
    """
    with _recording_prunes(spark) as answers:
        _, results = run_backfill(spark, job, "2026-11-20", "2026-11-21")
    assert results[0].rows_added == 2
    assert sorted(spark.table(sink).collect()) == sorted(
        spark.sql(f"SELECT id, ts FROM {source} WHERE status = 'E'").collect()
    )
    assert (2, 6) in answers, answers  # the source scan planned 2 of its 6 files


def test_duckdb_and_iceberg_read_an_indexed_table_unchanged(spark, table_name):
    """The index object is a statistics file other engines ignore: DuckDB's iceberg_scan and
    Iceberg's own metadata tables see the same rows and files with it attached."""
    from tests.helpers.readers import duckdb_query

    events(spark, table_name, 4)
    sparkext.sql(
        f"CREATE INDEX rid ON {table_name} USING bloom_filter (request_id);"
        f"CREATE INDEX msg ON {table_name} USING ngram_bloom_filter (message);"
        f"CALL sparkext.build_indexes('{table_name}');"
    ).collect()
    assert statistics(spark, table_name)  # attached
    spark.conf.set("spark.sparkext.index.enabled", "false")
    try:
        expected = sorted(tuple(r) for r in spark.table(table_name).collect())
    finally:
        spark.conf.unset("spark.sparkext.index.enabled")
    assert sorted(duckdb_query(spark, table_name, "SELECT * FROM {table}")) == expected
    needle = "SELECT id FROM {table} WHERE request_id = 'a0002'"
    assert duckdb_query(spark, table_name, needle) == [(2,)]
    files = spark.sql(f"SELECT count(*) FROM {table_name}.files").first()[0]
    assert files == 4
