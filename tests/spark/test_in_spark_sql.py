"""sparkext's SQL in plain ``spark.sql``: every routine, every place a table goes, the errors.

The oracle for each routine is the same call through ``sparkext.sql`` (Python routing, checked
against its own oracles elsewhere): same rows, same columns. Procedures that change a table are
run through ``spark.sql`` only, and their effect is checked on the table.
"""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

import sparkext
from sparkext import attach
from sparkext.demo import write_examples
from sparkext.procedures.registry import ROUTINES
from sparkext.spark.extension import detach, is_attached

AS_OF = "TIMESTAMP '2026-11-21 00:00:00'"
EXERCISED: set[str] = set()


def rows(frame) -> list[tuple]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def both(spark, statement: str, routine: str):
    """Run ``statement`` through spark.sql and sparkext.sql; they must agree."""
    EXERCISED.add(routine)
    ours, theirs = spark.sql(statement), sparkext.sql(statement)
    assert ours.schema == theirs.schema
    assert rows(ours) == rows(theirs)
    return ours


def declared(routine: str, frame) -> None:
    """A procedure called through spark.sql returns the columns it declares."""
    EXERCISED.add(routine)
    names = [c.name for c in ROUTINES[routine].output]
    assert frame.columns == names


@pytest.fixture(scope="module")
def orders(spark, tmp_path_factory) -> str:
    """The README's orders (sparkext-demo's sample Debezium files) ingested by spark.sql."""
    directory = tmp_path_factory.mktemp("in-spark")
    write_examples(directory)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.insql")
    for table in ("orders", "orders_py"):
        spark.sql(f"DROP TABLE IF EXISTS lake.insql.{table} PURGE")
    call = (
        "CALL sparkext.ingest_cdc(table => 'lake.insql.{t}', source => '{src}', "
        "checkpoint => '{ck}', primary_key => 'id', create => true, "
        "options => map('source-table', 'shop.orders'))"
    )
    source = directory / "shop.orders"
    declared("ingest_cdc", spark.sql(call.format(t="orders", src=source, ck=directory / "ck1")))
    sparkext.sql(call.format(t="orders_py", src=source, ck=directory / "ck2"))
    return "lake.insql.orders"


def test_the_session_is_attached(spark):
    assert is_attached(spark)


def test_help_lists_every_routine(spark):
    help_rows = both(spark, "CALL sparkext.help()", "help").collect()
    assert {r.name for r in help_rows} == set(ROUTINES)


def test_ingest_through_spark_sql_writes_what_sparkext_sql_writes(spark, orders):
    columns = "id, customer, status, amount, _cdc_op, _cdc_event_time"
    ours = spark.sql(f"SELECT {columns} FROM {orders}")
    oracle = spark.sql(f"SELECT {columns} FROM {orders}_py")
    assert rows(ours) == rows(oracle)
    assert ours.count() > 0


def test_read_only_routines_agree_with_sparkext_sql(spark, orders):
    both(spark, f"CALL sparkext.table_health(table => '{orders}')", "table_health")
    both(spark, f"SELECT * FROM sparkext.table_health('{orders}')", "table_health")
    both(spark, f"SELECT * FROM sparkext.changelog('{orders}')", "changelog")
    both(
        spark,
        f"SELECT * FROM sparkext.snapshot_as_of_event_time('{orders}', {AS_OF})",
        "snapshot_as_of_event_time",
    )
    both(
        spark,
        f"CALL sparkext.health_report(tables => '{orders}', record => false)",
        "health_report",
    )
    both(spark, f"SELECT * FROM sparkext.event_time_tags('{orders}')", "event_time_tags")
    spark.sql(
        "CREATE OR REPLACE TABLE lake.insql.shipments USING iceberg AS SELECT * FROM VALUES "
        "(1, TIMESTAMP '2026-11-20 09:30:00'), (2, TIMESTAMP '2026-11-21 12:00:00') "
        "AS t(order_id, ts)"
    )
    joined = both(
        spark,
        f"SELECT order_id, ts, customer FROM sparkext.dim_join_changelog("
        f"'lake.insql.shipments', '{orders}', 'f.order_id = d.id', 'ts', 'event')",
        "dim_join_changelog",
    )
    assert joined.count() == 2


def test_procedures_that_write_through_spark_sql(spark, orders):
    before = rows(spark.table(orders))
    target = "lake.insql.orders_daily"
    spark.sql(f"DROP TABLE IF EXISTS {target} PURGE")
    state = spark.sql(f"SELECT * FROM sparkext.snapshot_as_of_event_time('{orders}', {AS_OF})")
    declared(
        "snapshot_as_of_event_time",
        spark.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{orders}', as_of => {AS_OF}, "
            f"target => '{target}', partition_value => '2026-11-21')"
        ),
    )
    columns = [c for c in state.columns if c in spark.table(target).columns]
    assert rows(spark.table(target).select(*columns)) == rows(state.select(*columns))
    tagged = spark.sql(
        f"CALL sparkext.snapshot_as_of_event_time(table => '{orders}', as_of => {AS_OF}, "
        "tag => 'insql_day')"
    )
    declared("snapshot_as_of_event_time", tagged)
    assert tagged.first().action in ("tagged-base", "committed-changes", "rewrote-state")
    read = spark.sql(f"SELECT id, customer, status FROM {orders} VERSION AS OF 'insql_day'")
    assert rows(read) == rows(state.select("id", "customer", "status"))
    declared(
        "tag_event_time_days",
        spark.sql(f"CALL sparkext.tag_event_time_days(table => '{orders}')"),
    )
    declared("event_time_tags", spark.sql(f"CALL sparkext.event_time_tags(table => '{orders}')"))
    declared(
        "rewrite_equality_deletes",
        spark.sql(
            f"CALL sparkext.rewrite_equality_deletes(table => '{orders}', "
            "options => map('min-equality-delete-files', '1'))"
        ),
    )
    health = spark.sql(f"SELECT * FROM sparkext.table_health('{orders}')").first()
    assert health.equality_delete_files == 0
    declared("tiered_optimize", spark.sql(f"CALL sparkext.tiered_optimize(table => '{orders}')"))
    declared("maintain", spark.sql(f"CALL sparkext.maintain(table => '{orders}', dry_run => true)"))
    declared(
        "create_changelog_view",
        spark.sql(
            f"CALL sparkext.create_changelog_view(table => '{orders}', "
            "changelog_view => 'insql_changes')"
        ),
    )
    assert spark.table("insql_changes").count() > 0
    assert rows(spark.table(orders)) == before  # conversion and compaction keep the rows


def test_reconcile_through_spark_sql(spark, orders, postgres_server):
    """The orders copied into PostgreSQL (the lake's own rows, as JSON): equal through spark.sql,
    the same result as through sparkext.sql (its duration aside)."""
    pg_types = {"bigint": "bigint", "int": "integer", "string": "text", "double": "float8"}
    columns = [(n, t) for n, t in spark.table(orders).dtypes if not n.startswith("_cdc_")]
    ddl = ", ".join(f"{n} {pg_types.get(t, t.replace('decimal', 'numeric'))}" for n, t in columns)
    data = "[" + ",".join(spark.table(orders).select(*(n for n, _ in columns)).toJSON().collect())
    postgres_server.psql(
        f"DROP TABLE IF EXISTS insql_orders; CREATE TABLE insql_orders ({ddl}, PRIMARY KEY (id));"
        f"INSERT INTO insql_orders SELECT * FROM json_populate_recordset(NULL::insql_orders, "
        f"'{data}]');"
    )
    call = (
        f"CALL sparkext.reconcile(table => '{orders}', source => '{postgres_server.url}', "
        "options => map('user', 'sparkext', 'source-table', 'public.insql_orders', "
        "'segments', '2'))"
    )
    frame = spark.sql(call)
    declared("reconcile", frame)
    ours = frame.drop("duration_ms").collect()
    assert ours == sparkext.sql(call).drop("duration_ms").collect()
    assert ours[0].equal and ours[0].source_rows == spark.table(orders).count()


def test_cdc_lag_through_spark_sql(spark, orders):
    """As a table function and a procedure, at a fixed as_of: the same rows both ways."""
    at = "TIMESTAMP '2026-11-21 00:00:00'"
    frame = both(
        spark, f"SELECT * FROM sparkext.cdc_lag(table => '{orders}', as_of => {at})", "cdc_lag"
    )
    (row,) = frame.collect()
    assert row.position_family is not None and row.lag_ms is not None
    declared("cdc_lag", spark.sql(f"CALL sparkext.cdc_lag(table => '{orders}', as_of => {at})"))


def test_ingest_cdc_database_through_spark_sql(spark, orders, tmp_path):
    """The README's orders as the one topic of a landing root: through spark.sql, the table
    ingest_cdc_database makes holds what ingest_cdc made of the same files."""
    import shutil

    write_examples(tmp_path / "demo")
    shutil.copytree(tmp_path / "demo" / "shop.orders", tmp_path / "root" / "topics" / "shop.orders")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.insql_db")
    spark.sql("DROP TABLE IF EXISTS lake.insql_db.ods_orders PURGE")
    frame = spark.sql(
        f"CALL sparkext.ingest_cdc_database(namespace => 'lake.insql_db', "
        f"source => '{tmp_path / 'root'}', checkpoint => '{tmp_path / 'ck'}', "
        "options => map('table-prefix', 'ods_', 'primary-key', 'id'))"
    )
    declared("ingest_cdc_database", frame)
    (row,) = frame.collect()
    assert (row.topic, row.table, row.created) == ("shop.orders", "lake.insql_db.ods_orders", True)
    columns = "id, customer, status, amount, _cdc_op, _cdc_event_time"
    assert rows(spark.sql(f"SELECT {columns} FROM lake.insql_db.ods_orders")) == rows(
        spark.sql(f"SELECT {columns} FROM {orders}")
    )


def test_bootstrap_cdc_through_spark_sql(spark, orders, tmp_path):
    """A dump of the orders (Parquet) bootstrapped through spark.sql and through sparkext.sql:
    the same row (times and snapshot aside), the same table contents."""
    dump = tmp_path / "dump"
    spark.table(orders).drop("_cdc_op", "_cdc_event_time", "_cdc_position").write.parquet(str(dump))
    call = (
        "CALL sparkext.bootstrap_cdc(table => 'lake.insql.boot_{t}', source => 'parquet:"
        f"{dump}', options => map('position', 'mysql-bin.000003:154', 'primary-key', 'id'))"
    )
    frame = spark.sql(call.format(t="sql"))
    declared("bootstrap_cdc", frame)
    varying = ("snapshot_id", "seconds", "rows_per_second")
    ours = frame.drop(*varying).collect()
    assert ours == sparkext.sql(call.format(t="py")).drop(*varying).collect()
    assert ours[0].rows == spark.table(orders).count()
    assert ours[0].source_position == "m:0000000003:00000000000000000153:9999999999"
    copied = [spark.table(f"lake.insql.boot_{t}").drop("_cdc_event_time") for t in ("sql", "py")]
    assert rows(copied[0]) == rows(copied[1])


def test_skipping_indexes_through_spark_sql(spark, table_name):
    """The statements and the procedures of skipping indexes, through spark.sql; the table
    function agrees with sparkext.sql."""
    spark.sql(f"CREATE TABLE {table_name} (id bigint, k string) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    declared("create_index", spark.sql(f"CREATE INDEX kb ON {table_name} USING bitmap (k)"))
    declared(
        "create_index",
        spark.sql(
            f"CALL sparkext.create_index(table => '{table_name}', name => 'ib', "
            "type => 'bloom_filter', column => 'id', build => true)"
        ),
    )
    declared("build_indexes", spark.sql(f"CALL sparkext.build_indexes('{table_name}')"))
    declared("show_indexes", spark.sql(f"SHOW INDEXES FROM {table_name}"))
    declared("show_indexes", spark.sql(f"CALL sparkext.show_indexes('{table_name}')"))
    shown = both(spark, f"SELECT * FROM sparkext.show_indexes('{table_name}')", "show_indexes")
    assert {(r.name, r.coverage) for r in shown.collect()} == {("kb", 1.0), ("ib", 1.0)}
    declared("drop_index", spark.sql(f"DROP INDEX kb ON {table_name}"))
    declared("drop_index", spark.sql(f"CALL sparkext.drop_index('{table_name}', 'ib')"))
    assert spark.sql(f"SHOW INDEXES IN {table_name}").collect() == []


def test_every_routine_was_called_through_spark_sql():
    """Run last in this module: a new routine needs its spark.sql case above."""
    assert set(ROUTINES) == EXERCISED


def test_a_table_function_goes_wherever_a_table_does(spark, orders):
    health = f"sparkext.table_health('{orders}')"
    one = spark.sql(f"SELECT live_rows FROM {health}").first().live_rows
    queries = {
        "alias": f"SELECT h.live_rows FROM {health} AS h",
        "columns": f"SELECT p FROM {health} AS h(p, f, b, s, pf, pr, ef, er, d, dr, db, dre, "
        "lr, lc, hs, sc, ths, l0, l1, l2, os, cd, cst, csp, cct, ix, ib, ic) WHERE p IS NULL",
        "cte": f"WITH h AS (SELECT * FROM {health}) SELECT live_rows FROM h",
        "nested cte": f"WITH a AS (WITH h AS (SELECT * FROM {health}) SELECT * FROM h) "
        "SELECT live_rows FROM a",
        "subquery": f"SELECT live_rows FROM (SELECT * FROM {health}) x",
        "join": f"SELECT count(*) AS n FROM {orders} o JOIN {health} h ON h.live_rows > 0",
        "in": f"SELECT live_rows FROM {health} WHERE live_rows IN (SELECT live_rows FROM {health})",
        "exists": f"SELECT 1 AS one WHERE EXISTS (SELECT * FROM {health})",
        "union": f"SELECT live_rows FROM {health} UNION ALL SELECT live_rows FROM {health}",
        "quoted": f"SELECT live_rows FROM `sparkext`.`table_health`('{orders}')",
        "upper case": f"SELECT live_rows FROM SPARKEXT.TABLE_HEALTH('{orders}')",
        "comment": f"SELECT /* sparkext.x( */ live_rows FROM -- sparkext.y(\n {health}",
    }
    for what, query in queries.items():
        result = spark.sql(query).collect()
        assert result, what
    assert spark.sql(queries["cte"]).first().live_rows == one
    assert spark.sql(queries["join"]).first().n == spark.table(orders).count()


def test_views_over_a_table_function_read_it_again_each_time(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    select = f"SELECT live_rows FROM sparkext.table_health('{table_name}')"
    spark.sql(f"CREATE OR REPLACE TEMP VIEW insql_temp AS {select}")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS spark_catalog.insql")
    spark.sql(f"CREATE OR REPLACE VIEW spark_catalog.insql.health AS {select}")
    sparkext.sql(f"CREATE OR REPLACE VIEW spark_catalog.insql.health_py AS {select}")
    spark.sql(f"CACHE TABLE insql_cached AS {select}")
    views = ("insql_temp", "spark_catalog.insql.health", "spark_catalog.insql.health_py")
    for view in views:
        assert spark.table(view).first().live_rows == 1
    spark.sql(f"INSERT INTO {table_name} VALUES (2)")
    for view in views:  # a view is the function now, as a view over a table is the table now
        assert spark.table(view).first().live_rows == 2, view
    assert spark.table("insql_cached").first().live_rows == 1  # a cache keeps what it read
    sparkext.sql(f"CACHE TABLE insql_cached_py AS {select}")
    spark.sql(f"INSERT INTO {table_name} VALUES (3)")
    assert spark.table("insql_cached").first().live_rows == 1
    assert spark.table("insql_cached_py").first().live_rows == 2
    assert spark.table("insql_temp").first().live_rows == 3
    spark.sql("UNCACHE TABLE insql_cached_py")
    spark.catalog.dropTempView("insql_cached_py")
    assert (
        "sparkext.table_health"
        in spark.sql("SHOW CREATE TABLE spark_catalog.insql.health").first()[0]
    )
    spark.sql("UNCACHE TABLE insql_cached")
    spark.sql("DROP VIEW spark_catalog.insql.health")
    spark.sql("DROP VIEW spark_catalog.insql.health_py")
    spark.catalog.dropTempView("insql_temp")
    spark.catalog.dropTempView("insql_cached")
    for view in spark.sql("SHOW VIEWS").where("isTemporary").collect():
        if view.viewName.startswith("__sparkext_"):  # the functions' results the caches read
            spark.catalog.dropTempView(view.viewName)


@pytest.mark.parametrize(
    "statement",
    [
        "CALL sparkext.nope()",
        "CALL sparkext.table_health(tabel => 'lake.insql.orders')",
        "CALL sparkext.table_health()",
        "CALL sparkext.changelog('lake.insql.orders')",
        "SELECT * FROM sparkext.tabel_health('lake.insql.orders')",
        "SELECT *\nFROM sparkext.table_health(table => 'lake.insql.nope')",
        "SELECT * FROM sparkext.ingest_cdc('x')",
        "CALL sparkext.tiered_optimize(table => 'lake.insql.orders', levels => 7)",
    ],
)
def test_errors_are_sparkext_sql_sentences(spark, orders, statement):
    with pytest.raises(sparkext.SparkextError) as python:
        sparkext.sql(statement).collect()
    with pytest.raises(AnalysisException) as jvm:
        spark.sql(statement).collect()
    assert str(jvm.value) == str(python.value)
    assert "\tat " not in str(jvm.value) and "Traceback" not in str(jvm.value)


def test_without_the_python_driver_one_sentence(spark):
    detach(spark)
    try:
        with pytest.raises(AnalysisException) as caught:
            spark.sql("CALL sparkext.help()")
        assert str(caught.value) == (
            "sparkext's procedures and table functions run in its Python driver and none is "
            "attached to this JVM: start the server with `sparkext-sql serve` (not "
            "start-thriftserver.sh or spark-sql), or call sparkext.attach(spark) in PySpark."
        )
        assert not is_attached(spark)
        assert sparkext.sql("CALL sparkext.help()").count() == len(ROUTINES)  # Python routing
    finally:
        attach(spark)
    assert spark.sql("SELECT count(*) AS n FROM sparkext.help()").first().n == len(ROUTINES)


def test_other_sql_is_untouched(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, sparkext STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'sparkext.help()')")
    assert spark.sql(f"SELECT sparkext FROM {table_name}").first()[0] == "sparkext.help()"
    snapshots = spark.sql(f"CALL lake.system.rewrite_data_files(table => '{table_name}')")
    assert snapshots.columns[0] == "rewritten_data_files_count"
    with pytest.raises(AnalysisException, match="PARSE_SYNTAX_ERROR"):
        spark.sql("SELEC * FROM sparkext.help()")


@pytest.mark.parametrize(
    "statement",
    [
        "call sparkext.help()",
        "  /* a /* nested */ comment */ CALL `sparkext` . `help` ( )",
        "-- a comment\nCALL SPARKEXT.HELP();",
        "CALL sparkext.help('table_health')",
    ],
)
def test_call_spellings(spark, statement):
    assert rows(spark.sql(statement)) == rows(sparkext.sql(statement))


def test_substituted_variables_keep_each_call_its_arguments(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1), (2), (3)")
    spark.conf.set("insql.label", "a label longer than its reference")
    text = (
        "SELECT '${insql.label}' AS label, a.live_rows AS a, b.live_rows AS b "
        f"FROM sparkext.help('help') x, sparkext.table_health('{table_name}') a, "
        "sparkext.table_health('lake.insql.orders_py') b WHERE x.name = 'name'"
    )
    row = spark.sql(text).first()
    assert row.label == "a label longer than its reference"
    assert row.a == 3
    assert row.b == spark.table("lake.insql.orders_py").count()


def test_a_cte_used_twice_in_a_command_runs_the_routine_once(spark, table_name, monkeypatch):
    from sparkext.routing import in_spark

    calls = []
    real = in_spark.run_invocation

    def counted(*args, **kwargs):
        calls.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(in_spark, "run_invocation", counted)
    spark.sql(f"CREATE TABLE {table_name} (n BIGINT) USING iceberg")
    spark.sql(
        f"INSERT INTO {table_name} WITH h AS (SELECT name FROM sparkext.help()) "
        "SELECT count(*) FROM h a JOIN h b ON a.name = b.name"
    )
    assert calls == ["help"]
    assert spark.table(table_name).first().n == len(ROUTINES)
    spark.sql("SELECT count(*) FROM sparkext.help()").collect()
    assert calls == ["help", "help"]  # a new statement runs it again


def test_one_statement_per_spark_sql(spark):
    with pytest.raises(AnalysisException) as caught:
        spark.sql("CALL sparkext.help(); DROP TABLE lake.insql.orders")
    assert str(caught.value) == (
        "spark.sql runs one statement but this text holds 2; run them one by one, or all at "
        "once with sparkext.sql(...)."
    )
    assert spark.catalog.tableExists("lake.insql.orders")
