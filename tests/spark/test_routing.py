from __future__ import annotations

import datetime as dt

import pytest
from sqlglot import exp

import sparkext
from sparkext.routing.constants import evaluate


class RecordingSpark:
    """Delegates to the real session and records the text every spark.sql call receives."""

    def __init__(self, spark):
        self._spark = spark
        self.texts: list[str] = []

    def sql(self, text, *args, **kwargs):
        self.texts.append(text)
        return self._spark.sql(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._spark, name)


def test_statements_that_are_not_ours_reach_spark_byte_for_byte(spark):
    recorder = RecordingSpark(spark)
    text = (
        "SELECT /*+ REPARTITION(1) */ 1 AS `a;b`, 'x;y' AS s  -- keep me;\n"
        ";\n"
        "SELECT `a;b` + 1 AS n FROM (SELECT 41 AS `a;b`)"
    )
    result = sparkext.sql(text, spark=recorder)
    assert recorder.texts == [
        "SELECT /*+ REPARTITION(1) */ 1 AS `a;b`, 'x;y' AS s  -- keep me;",
        "SELECT `a;b` + 1 AS n FROM (SELECT 41 AS `a;b`)",
    ]
    assert result.collect()[0].n == 42


def test_sql_uses_the_active_session_and_returns_the_last_result(spark, table_name):
    result = sparkext.sql(
        f"CREATE TABLE {table_name} (id BIGINT, name STRING) USING iceberg;"
        f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b');"
        f"SELECT count(*) AS n FROM {table_name}"
    )
    assert result.collect()[0].n == 2


def test_joins_and_icebergs_own_procedures_go_through_the_same_entry_point(spark, table_name):
    sparkext.sql(
        f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING iceberg;"
        f"INSERT INTO {table_name} VALUES (1, 'a');"
        f"INSERT INTO {table_name} VALUES (2, 'b');"
        f"INSERT OVERWRITE {table_name} SELECT * FROM {table_name}",
        spark,
    )
    joined = sparkext.sql(
        f"SELECT a.id, b.v FROM {table_name} a JOIN {table_name} b ON a.id = b.id ORDER BY a.id"
    )
    assert [tuple(r) for r in joined.collect()] == [(1, "a"), (2, "b")]
    before = spark.table(f"{table_name}.snapshots").count()
    expired = sparkext.sql(
        f"CALL lake.system.expire_snapshots(table => '{table_name}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    assert "deleted_data_files_count" in expired.columns
    assert before == 3
    assert spark.table(f"{table_name}.snapshots").count() == 1


def test_table_functions_work_in_from_join_cte_and_subquery(spark):
    result = sparkext.sql(
        """
        WITH routines AS (SELECT name FROM sparkext.help())
        SELECT r.name, d.section
        FROM routines r
        JOIN sparkext.help('table_health') d ON d.name = 'table'
        WHERE r.name IN (SELECT name FROM sparkext.help() WHERE name = 'table_health')
        """
    )
    assert [tuple(r) for r in result.collect()] == [("table_health", "parameter")]
    spark.range(1).createOrReplaceTempView("__sparkext_probe")  # the check below can see views
    views = [r.viewName for r in spark.sql("SHOW VIEWS IN lake.test").collect()]
    spark.catalog.dropTempView("__sparkext_probe")
    assert [v for v in views if v.startswith("__sparkext")] == ["__sparkext_probe"]


def test_arguments_may_be_constant_expressions_evaluated_by_spark(spark):
    rows = sparkext.sql("CALL sparkext.help(name => concat('table', '_health'))").collect()
    assert rows[0].name == "table_health"


def test_constant_evaluation_types(spark):
    parse = lambda sql: exp.maybe_parse(sql, dialect="spark")  # noqa: E731
    values = evaluate(
        spark,
        [
            parse("TIMESTAMP '2026-11-21 00:00:00'"),
            parse("INTERVAL '10' MINUTES"),
            parse("map('a', 'b')"),
            parse("array(1, 2)"),
            parse("'s'"),
            parse("-3"),
            parse("2.5"),
            parse("true"),
            parse("NULL"),
            parse("1 + 1"),
        ],
    )
    assert values == [
        dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc),
        dt.timedelta(minutes=10),
        {"a": "b"},
        [1, 2],
        "s",
        -3,
        2.5,
        True,
        None,
        2,
    ]


def test_help_lists_every_routine_and_describes_one(spark):
    listed = {r.name: r.section for r in sparkext.sql("CALL sparkext.help()").collect()}
    assert listed["table_health"] == "procedure, table function"
    rows = sparkext.sql("CALL sparkext.help('table_health')").collect()
    params = [(r.name, r.type, r.required) for r in rows if r.section == "parameter"]
    assert params == [("table", "table", True), ("options", "map<string,string>", False)]
    outputs = [r.name for r in rows if r.section == "output"]
    health = sparkext.sql("CALL sparkext.help('table_health')")  # declared == produced
    assert "health_score" in outputs and len(health.columns) == 6


@pytest.mark.parametrize("text", ["", "  -- nothing\n"])
def test_empty_text_is_an_error(spark, text):
    with pytest.raises(sparkext.SparkextError, match="holds no statement"):
        sparkext.sql(text)


def test_a_null_inside_an_array_argument_stays_null_through_spark(spark):
    from sparkext.declarations import Param, ParamType, Routine
    from sparkext.routing.binding import bind, evaluator
    from sparkext.routing.invocations import parse_call
    from sparkext.routing.tokens import split_statements

    routine = Routine(
        name="lists",
        doc="an array<string> parameter",
        params=(Param("names", ParamType.STRING_ARRAY, "names"),),
        output=(),
        run=lambda context, args: [],
    )
    text = "CALL sparkext.lists(array('a', NULL, concat('b', 'c')))"
    call = parse_call(split_statements(text)[0])
    bound = bind(routine, call.args, evaluator(spark, routine), lambda name: name)
    assert bound["names"] == ["a", None, "bc"]


def kept_views(spark) -> list[str]:
    views = spark.sql("SHOW VIEWS IN lake.test").where("isTemporary").collect()
    return sorted(v.viewName for v in views if v.viewName.startswith("__sparkext_"))


@pytest.fixture
def detached(spark):
    """A session without sparkext's JVM extension answering: sparkext.sql expands views itself."""
    from sparkext import attach
    from sparkext.spark.extension import detach

    detach(spark)
    yield spark
    attach(spark)


def test_a_temp_view_over_a_table_function_outlives_the_statement(detached):
    spark = detached
    create = (
        "CREATE OR REPLACE TEMP VIEW health_params AS SELECT name FROM "
        "sparkext.help('table_health') WHERE section = 'parameter'"
    )
    sparkext.sql(create)
    for _ in range(2):  # the view is analysed again at every use
        names = [r.name for r in sparkext.sql("SELECT * FROM health_params").collect()]
        assert names == ["table", "options"]
    sparkext.sql(create)  # the same call replaces its view: no pile-up
    assert len(kept_views(spark)) == 1
    spark.catalog.dropTempView("health_params")
    for name in kept_views(spark):
        spark.catalog.dropTempView(name)


def test_cache_table_over_a_table_function(spark):
    sparkext.sql("CACHE TABLE cached_help AS SELECT name, section FROM sparkext.help()")
    for _ in range(2):
        rows = sparkext.sql("SELECT section FROM cached_help WHERE name = 'table_health'")
        assert [r.section for r in rows.collect()] == ["procedure, table function"]
    spark.sql("UNCACHE TABLE cached_help")
    spark.catalog.dropTempView("cached_help")
    for name in kept_views(spark):
        spark.catalog.dropTempView(name)


def test_a_persistent_view_over_a_table_function_is_one_sentence(detached):
    spark = detached
    with pytest.raises(sparkext.SparkextError) as caught:
        sparkext.sql("CREATE VIEW lake.test.routines AS\nSELECT * FROM sparkext.help()")
    assert str(caught.value) == (
        "A persistent view cannot read sparkext.help(...) (line 2, column 15): its result "
        "exists only in this Spark session; create a TEMP VIEW, or store the rows with "
        "CREATE TABLE ... AS SELECT."
    )
    assert kept_views(spark) == []
