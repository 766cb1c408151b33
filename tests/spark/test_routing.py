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
