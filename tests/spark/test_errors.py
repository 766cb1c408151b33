"""Every user-facing error: one sentence, the exact text, no Java stack trace, nothing changed."""

from __future__ import annotations

import pytest

import sparkext
from sparkext.errors import (
    IngestError,
    OptionError,
    ProcedureArgumentError,
    SqlParseError,
    TableNotFoundError,
    UnknownRoutineError,
)


@pytest.fixture
def table(spark, table_name):
    sparkext.sql(
        f"CREATE TABLE {table_name} (id BIGINT, d STRING) USING iceberg PARTITIONED BY (d);"
        f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')"
    )
    return table_name


def state(spark, name):
    snapshots = spark.table(f"{name}.snapshots").count()
    rows = sorted(tuple(r) for r in spark.table(name).collect())
    return snapshots, rows


CASES = [
    (
        "CALL sparkext.tabel_health(table => '{t}')",
        UnknownRoutineError,
        "Unknown procedure 'sparkext.tabel_health' at line 1, column 6 (did you mean "
        "'table_health'?); CALL sparkext.help() lists them.",
    ),
    (
        "SELECT * FROM sparkext.tabel_health('{t}')",
        UnknownRoutineError,
        "Unknown table function 'sparkext.tabel_health' at line 1, column 15 (did you mean "
        "'table_health'?); CALL sparkext.help() lists them.",
    ),
    (
        "CALL sparkext.table_health(tabel => '{t}')",
        ProcedureArgumentError,
        "sparkext.table_health has no parameter 'tabel' (did you mean 'table'?); "
        "parameters: table, options.",
    ),
    (
        "CALL sparkext.table_health()",
        ProcedureArgumentError,
        "Missing required parameter(s) 'table' for sparkext.table_health; "
        "see CALL sparkext.help('table_health').",
    ),
    (
        "CALL sparkext.table_health(table => '{t}', table => '{t}')",
        ProcedureArgumentError,
        "Parameter 'table' is given more than once in sparkext.table_health(...); keep one.",
    ),
    (
        "CALL sparkext.table_health('{t}', options => map())",
        ProcedureArgumentError,
        "Named and positional arguments cannot be mixed in sparkext.table_health(...); "
        "write every argument as name => value, or none.",
    ),
    (
        "CALL sparkext.table_health(table => 42)",
        ProcedureArgumentError,
        "Parameter 'table' of sparkext.table_health expects a table, got 42 (bigint) "
        "(write the table name as a string, e.g. 'lake.db.t').",
    ),
    (
        "CALL sparkext.table_health(table => '{t}', options => array('a'))",
        ProcedureArgumentError,
        "Parameter 'options' of sparkext.table_health expects a map<string,string>, got "
        "array('a') (array) (write map('key', 'value', ...)).",
    ),
    (
        "CALL sparkext.table_health(table => 'lake.test.no_such_table')",
        TableNotFoundError,
        "Table 'lake.test.no_such_table' does not exist in catalog lake (warehouse {w}); "
        "check the name with SHOW TABLES IN lake.test.",
    ),
    (
        "CALL sparkext.table_health(table => '{t}', options => map('small-files', '1'))",
        OptionError,
        "Unknown option 'small-files' for sparkext.table_health; "
        "valid options: small-file-threshold-bytes.",
    ),
    (
        "CALL sparkext.table_health(table => '{t}', "
        "options => map('small-file-threshold-bytes', '-5'))",
        OptionError,
        "Option 'small-file-threshold-bytes' of sparkext.table_health expects a positive whole "
        "number of bytes such as 134217728 or 128MB, got '-5'.",
    ),
    (
        "CALL sparkext.table_health(table => '{t}', options => map('a'))",
        SqlParseError,
        "Cannot parse the arguments of sparkext.table_health at line 1, column 15; check each "
        "function's arguments, e.g. map('key', 'value').",
    ),
    (
        "CALL sparkext.help(name => 1 +)",
        SqlParseError,
        "Cannot parse the arguments at line 1, column 31: unexpected ')'; write arguments as "
        "name => value or as values in parameter order.",
    ),
    (
        "SELECT 1;\nINSERT INTO {t} VALUES (3, 'c');\nSELEC 2",
        SqlParseError,
        "Cannot parse the SQL at line 3, column 1: [PARSE_SYNTAX_ERROR] Syntax error at or "
        "near 'SELEC'.",
    ),
    (
        "SELECT * FROM lake.test.no_such_table",
        TableNotFoundError,
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`test`.`no_such_table` cannot be "
        "found (line 1, column 15); it was looked up in catalog lake (warehouse {w}): check the "
        "name with SHOW TABLES IN lake.test.",
    ),
    (
        "CALL sparkext.help(name => 'nope')",
        UnknownRoutineError,
        "Unknown procedure or function 'nope'; CALL sparkext.help() lists them.",
    ),
    (
        "CALL sparkext.ingest_cdc(table => '{t}', source => '/nonexistent/sparkext-landing', "
        "checkpoint => '/tmp/sparkext-test-missing-source-ck')",
        IngestError,
        "Source '/nonexistent/sparkext-landing' does not exist: check the path (a relative one "
        "is from the current directory); sparkext-demo --data DIR writes example change files "
        "to DIR/shop.orders.",
    ),
    (
        "SELECT * FROM sparkext.table_health(table => '{t}', extra => 1)",
        ProcedureArgumentError,
        "sparkext.table_health has no parameter 'extra'; parameters: table, options.",
    ),
]


@pytest.mark.parametrize(("template", "kind", "message"), CASES)
def test_bad_input_gets_one_sentence_and_changes_nothing(
    spark, warehouse, table, template, kind, message
):
    before = state(spark, table)
    with pytest.raises(kind) as caught:
        sparkext.sql(template.format(t=table))
    text = str(caught.value)
    assert text == message.replace("{w}", str(warehouse))
    assert "\n" not in text and "\tat " not in text and "java." not in text
    if "INSERT" not in template:
        assert state(spark, table) == before


def test_statements_before_an_error_have_run(spark, table):
    # spark-sql semantics: statements run in order; the failing one stops the rest
    with pytest.raises(SqlParseError):
        sparkext.sql(
            f"INSERT INTO {table} VALUES (3, 'c'); SELEC 1; INSERT INTO {table} VALUES (4, 'd')"
        )
    assert sorted(r.id for r in spark.table(table).collect()) == [1, 2, 3]


def test_a_non_iceberg_table_is_named(spark):
    spark.range(3).createOrReplaceTempView("plain_view")
    with pytest.raises(sparkext.SparkextError) as caught:
        sparkext.sql("CALL sparkext.table_health(table => 'plain_view')")
    assert str(caught.value) == (
        "Table 'plain_view' is not an Iceberg table; sparkext works on tables of an Iceberg "
        "catalog such as 'lake'."
    )


def _failing_udfs() -> dict:
    """Python functions that fail inside a task (defined here so they pickle by value)."""

    def value_error(x):
        raise ValueError(f"bad value {x}")

    def sparkext_error(x):
        from sparkext.errors import IngestError

        raise IngestError(f"Row {x} cannot be ingested; fix the source.")

    return {"value_error": value_error, "sparkext_error": sparkext_error}


@pytest.mark.parametrize(
    ("udf", "kind", "message"),
    [
        ("value_error", sparkext.SparkextError, "ValueError: bad value 0"),
        ("sparkext_error", IngestError, "Row 0 cannot be ingested; fix the source."),
    ],
)
def test_an_error_raised_by_python_on_an_executor_is_its_own_sentence(
    spark, table_name, udf, kind, message
):
    """Not Spark's "An exception was thrown from the Python worker" and a stack trace: the
    worker's own exception; a sparkext error keeps its class and sentence."""
    spark.udf.register(f"sparkext_test_{udf}", _failing_udfs()[udf], "string")
    with pytest.raises(kind) as caught:
        sparkext.sql(
            f"CREATE TABLE {table_name} USING iceberg AS "
            f"SELECT sparkext_test_{udf}(id) AS v FROM range(1)"
        )
    assert str(caught.value) == message
    assert not spark.catalog.tableExists(table_name)


def test_a_python_traceback_inside_a_streaming_failure_gives_the_innermost_exception():
    """A foreachBatch function's failure: Spark's text nests the worker's traceback in the
    driver's; the last traceback's exception is the one that happened."""
    from sparkext.iceberg.errors import python_error

    text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was raised by "
        "the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "py4j/clientserver.py", line 644, in _call_proxy\n'
        "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        "pyspark.errors.exceptions.captured.PythonException: \n"
        "  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "decode.py", line 10, in boom\n'
        "    raise SchemaChangeError(...)\n"
        "sparkext.errors.SchemaChangeError: Column 'qty' changed from bigint to string.\n\n"
    )
    assert python_error(text) == (
        "sparkext.errors",
        "SchemaChangeError",
        "Column 'qty' changed from bigint to string.",
    )
