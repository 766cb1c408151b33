"""The newcomer's first week (issue 50): what a new user types, answered as they mean it.

Each test failed before its fix: a nullable key column of an existing table, a glob matching
nothing, unqualified names after USE, a plain SHOW TABLES before any USE, snapshot ids pasted
bare, and a routine run on a thread the JVM has never seen (the shell's statement thread).
"""

from __future__ import annotations

import contextlib
import threading

import pytest

import sparkext
from sparkext.errors import IngestError, SparkextError
from tests.helpers.cdc_calls import events, land


@contextlib.contextmanager
def current_namespace(spark, *namespace: str):
    """``USE lake.<namespace>`` (none: the catalog alone) for the block, then exactly the
    session's catalog and namespace before it (``USE lake`` would keep the namespace)."""
    manager = spark._jsparkSession.sessionState().catalogManager()
    gateway = spark.sparkContext._gateway
    saved = (str(manager.currentCatalog().name()), list(manager.currentNamespace()))

    def array(parts):
        out = gateway.new_array(gateway.jvm.String, len(parts))
        for i, part in enumerate(parts):
            out[i] = part
        return out

    def use(catalog: str, parts) -> None:
        manager.setCurrentCatalog("spark_catalog" if catalog != "spark_catalog" else "lake")
        manager.setCurrentCatalog(catalog)  # a catalog newly set starts in its default namespace
        if parts:
            manager.setCurrentNamespace(array(parts))

    if namespace:
        spark.sql(f"USE lake.{'.'.join(namespace)}")  # as a user writes it
    else:  # USE lake would keep a namespace in use: none is what a new shell starts in
        use("lake", ())
    try:
        yield
    finally:
        use(*saved)


def _ingest(table: str, landing, checkpoint, key: str = "id", create: bool = False):
    return sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => '{key}', create => {str(create).lower()})"
    ).first()


def test_ingest_into_an_existing_table_makes_primary_key_its_identifier(
    spark, tmp_path, table_name
):
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint, name string, _cdc_op string, "
        "_cdc_event_time timestamp, _cdc_position string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    land(tmp_path / "in", "2.json", events(("u", 1, 12, "a2"), ("d", 2, 13, "")))
    result = _ingest(table_name, tmp_path / "in", tmp_path / "ck")
    assert result.events == 4
    java = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table_name
    )
    schema = java.schema()
    assert list(schema.identifierFieldNames()) == ["id"]
    assert schema.findField("id").isRequired()
    # Iceberg's own reading of the table: the source database's final rows
    assert [tuple(r) for r in spark.sql(f"SELECT id, name FROM {table_name}").collect()] == [
        (1, "a2")
    ]


def test_a_nullable_key_holding_nulls_or_a_missing_column_is_one_sentence(
    spark, tmp_path, table_name
):
    spark.sql(f"CREATE TABLE {table_name} (id bigint, name string) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (NULL, 'orphan')")
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")))
    with pytest.raises(IngestError) as caught:
        _ingest(table_name, tmp_path / "in", tmp_path / "ck")
    assert str(caught.value) == (
        f"Table '{table_name}' has 1 row(s) with a NULL in id, and Iceberg's identifier fields "
        f"cannot be NULL: delete or fix them (DELETE FROM {table_name} WHERE `id` IS NULL), "
        "then run ingest_cdc again."
    )
    with pytest.raises(IngestError, match=r"names column\(s\) code that table .* does not have"):
        _ingest(table_name, tmp_path / "in", tmp_path / "ck2", key="code")
    assert spark.table(table_name).count() == 1  # untouched
    schema = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table_name
    ).schema()
    assert list(schema.identifierFieldNames()) == []


def test_a_glob_that_matches_nothing_is_one_sentence_and_creates_nothing(spark, tmp_path):
    (tmp_path / "in").mkdir()
    pattern = f"{tmp_path}/in/*.jsonl"
    with pytest.raises(IngestError) as caught:
        _ingest("lake.test.glob_nothing", pattern, tmp_path / "ck", create=True)
    assert str(caught.value).startswith(f"Source '{pattern}' matches no file: check the pattern")
    assert not spark.catalog.tableExists("lake.test.glob_nothing")


def test_unqualified_names_resolve_in_the_current_namespace(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1), (2)")
    first = spark.sql(f"SELECT snapshot_id FROM {table_name}.snapshots").first()[0]
    short = table_name.split(".")[-1]
    with current_namespace(spark, "test"):
        health = sparkext.sql(f"CALL sparkext.table_health(table => '{short}')").first()
        bare = sparkext.sql(f"CALL sparkext.table_health(table => {short})").first()
        changes = sparkext.sql(f"SELECT * FROM sparkext.changelog('{short}', {first})").count()
        in_spark = spark.sql(f"SELECT count(*) FROM sparkext.changelog('test.{short}')").first()
    assert health.data_files == bare.data_files == 2  # one file per INSERT
    assert changes == 0  # nothing after the first (only) snapshot
    assert in_spark[0] == 2  # Iceberg's count of the rows ever inserted


def test_a_snapshot_id_pasted_bare_a_digit_string_a_tag_and_a_time_all_work(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    spark.sql(f"INSERT INTO {table_name} VALUES (2)")
    snapshots = spark.sql(
        f"SELECT snapshot_id, CAST(committed_at AS STRING) FROM {table_name}.snapshots "
        "ORDER BY committed_at"
    ).collect()
    first, second = (r[0] for r in snapshots)
    spark.sql(f"ALTER TABLE {table_name} CREATE TAG v1 AS OF VERSION {first}")
    # the oracle: Iceberg's own time travel, the rows added after the first snapshot
    added = {r.id for r in spark.sql(f"SELECT id FROM {table_name}").collect()} - {
        r.id for r in spark.sql(f"SELECT id FROM {table_name} VERSION AS OF {first}").collect()
    }
    for start in (str(first), f"'{first}'", "'v1'", f"TIMESTAMP '{snapshots[0][1]}'"):
        for route in (sparkext.sql, spark.sql):
            rows = route(
                f"SELECT id, _change_type FROM sparkext.changelog('{table_name}', {start}, "
                f"{second})"
            ).collect()
            assert {(r.id, r._change_type) for r in rows} == {(i, "INSERT") for i in added}, start
    with pytest.raises(Exception, match="expects a snapshot, got true"):
        sparkext.sql(f"SELECT * FROM sparkext.changelog('{table_name}', true)")


def test_a_routine_on_a_thread_new_to_the_jvm_reads_staged_files(spark, table_name):
    """tiered_optimize's staged reads need the JVM thread's active session (the shell's
    statement thread had none: every group failed with 'default_cache_iceberg not found')."""
    spark.sql(
        f"CREATE TABLE {table_name} (id bigint, k string) USING iceberg "
        "TBLPROPERTIES ('sparkext.optimize.l0.min-files' = '2')"
    )
    for i in range(3):
        spark.sql(f"INSERT INTO {table_name} VALUES ({i}, 'k{i}')")
    out: dict = {}

    def work() -> None:
        try:
            out["rows"] = sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{table_name}')")
            out["rows"] = out["rows"].collect()
        except SparkextError as error:  # pragma: no cover - reported below
            out["error"] = error

    spark._jvm.org.apache.spark.sql.SparkSession.clearActiveSession()  # as a new thread has
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    assert "error" not in out
    assert [r.error for r in out["rows"]] == [None]
    assert spark.sql(f"SELECT count(*) FROM {table_name}.files").first()[0] == 1
    assert sorted(r.id for r in spark.table(table_name).collect()) == [0, 1, 2]


def test_a_busy_checkpoint_says_who_holds_it_and_ingests_nothing(spark, tmp_path, table_name):
    from sparkext.actions.cdc.checkpoint import hold

    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")))
    holding = hold(str(tmp_path / "ck"), "ingest_cdc into another shell's table")
    with holding, pytest.raises(IngestError) as caught:
        _ingest(table_name, tmp_path / "in", tmp_path / "ck", create=True)
    assert str(caught.value).startswith(
        f"Checkpoint '{tmp_path / 'ck'}' is in use by ingest_cdc into another shell's table on host"
    )
    assert not spark.catalog.tableExists(table_name)
    assert _ingest(table_name, tmp_path / "in", tmp_path / "ck", create=True).inserted == 1


def test_the_shell_says_which_catalog_and_warehouse_a_missing_table_was_looked_up_in(
    spark, warehouse
):
    """On the shell's statement thread too (no JVM session there before the fix: Spark's raw
    ~330-character TABLE_OR_VIEW_NOT_FOUND text), and a plain SHOW TABLES before any USE."""
    from click.testing import CliRunner

    from sparkext.cli.shell import cli
    from tests.helpers.shell_lines import said

    result = CliRunner().invoke(cli, ["-e", "SELECT * FROM lake.test.no_such_table"])
    assert result.exit_code == 1
    assert said(result.stderr) == (
        "Error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`test`.`no_such_table` cannot "
        f"be found (line 1, column 15); it was looked up in catalog lake (warehouse {warehouse}):"
        " check the name with SHOW TABLES IN lake.test."
    )
    with current_namespace(spark):  # the catalog alone: no namespace, as a new shell starts
        shown = CliRunner().invoke(cli, ["-e", "SHOW TABLES"])
    assert shown.exit_code == 1, (shown.stdout, shown.stderr)
    assert said(shown.stderr).startswith(
        "Error: No namespace is in use in catalog lake, whose tables all live in one: name it "
        "(SHOW TABLES IN lake.db, CREATE TABLE lake.db.t ...)"
    )


def test_sparkext_sql_from_a_new_thread_leaves_the_sessions_settings_alone(spark, warehouse):
    """A thread the JVM has not seen has no active session there: ``sparkext.sql`` once built
    the session again, and PySpark's getOrCreate applied the whole default conf to the running
    one (its lake warehouse became ~/.sparkext/warehouse for every later statement)."""
    keys = ("spark.sql.catalog.lake.warehouse", "spark.sql.shuffle.partitions")
    before = {k: spark.conf.get(k) for k in keys}
    out: dict = {}
    spark._jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
    try:
        thread = threading.Thread(target=lambda: out.update(n=sparkext.sql("SELECT 7").first()[0]))
        thread.start()
        thread.join()
    finally:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    assert out == {"n": 7}
    assert {k: spark.conf.get(k) for k in keys} == before
    assert before["spark.sql.catalog.lake.warehouse"] == str(warehouse)
