"""Errors are one true sentence (issue 15, item 3): what a user meets, through sparkext.sql.

The pure half (the parsers and Spark's texts) is tests/pure/test_error_sentences.py.
"""

from __future__ import annotations

import re

import pytest

import sparkext
from sparkext.errors import (
    OptionError,
    ProcedureArgumentError,
    SparkError,
    SparkextError,
    UnknownRoutineError,
)


def one_sentence(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "\tat " not in text and "java." not in text
    assert not re.search(r"\w#\d+", text), text  # no Catalyst attribute ids (day#63)
    return text


def snapshots(spark, name: str) -> int:
    return spark.table(f"{name}.snapshots").count()


@pytest.fixture
def partitioned(spark, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (id string NOT NULL, day date, v string) USING iceberg "
        "PARTITIONED BY (day) TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES ('1', DATE '2026-11-21', 'a')")
    return table_name


@pytest.fixture
def unpartitioned(spark, table_name):
    """An unpartitioned merge-on-read table with identifier fields, as ingest_cdc makes."""
    spark.sql(
        f"CREATE TABLE {table_name} (id string NOT NULL, day date, v string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )
    spark.sql(f"ALTER TABLE {table_name} SET IDENTIFIER FIELDS id")
    spark.sql(
        f"INSERT INTO {table_name} VALUES ('1', DATE '2026-11-21', 'a'), "
        "('2', DATE '2026-11-22', 'b')"
    )
    spark.sql(f"DELETE FROM {table_name} WHERE id = '1'")
    return table_name


# -- item 1 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("as_of", "sentence"),
    [
        (
            "TIMESTAMP '2026-13-45 00:00:00'",
            "TIMESTAMP '2026-13-45 00:00:00' is not a valid timestamp; write it as "
            "TIMESTAMP 'yyyy-MM-dd HH:mm:ss'.",
        ),
        (
            "CAST('2026-11-21 25:00:00' AS TIMESTAMP)",
            "TIMESTAMP '2026-11-21 25:00:00' is not a valid timestamp; write it as "
            "TIMESTAMP 'yyyy-MM-dd HH:mm:ss'.",
        ),
        (
            "TIMESTAMP '2026-11-21 00:00:00' + (DATE '2026-02-30' - DATE '2026-02-01')",
            "DATE '2026-02-30' is not a valid date; write it as DATE 'yyyy-MM-dd'.",
        ),
    ],
)
def test_a_malformed_timestamp_argument_is_named_as_spark_would(
    spark, partitioned, as_of, sentence
):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.snapshot_as_of_event_time(table => '{partitioned}', as_of => {as_of}, "
            f"target => '{partitioned}_daily')"
        )
    assert one_sentence(caught.value) == (
        f"Parameter 'as_of' of sparkext.snapshot_as_of_event_time: {sentence}"
    )
    assert not spark.catalog.tableExists(f"{partitioned}_daily")


def test_a_malformed_timestamp_in_a_table_function(spark, partitioned):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"SELECT * FROM sparkext.snapshot_as_of_event_time('{partitioned}', "
            "TIMESTAMP '2026-11-21 24:61:00')"
        )
    assert one_sentence(caught.value) == (
        "Parameter 'as_of' of sparkext.snapshot_as_of_event_time: TIMESTAMP '2026-11-21 "
        "24:61:00' is not a valid timestamp; write it as TIMESTAMP 'yyyy-MM-dd HH:mm:ss'."
    )


# -- item 2 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["'day = DATE ''2026-11-21'''", "\"day = DATE '2026-11-21'\"", "'id = ''1'''"],
)
def test_where_on_an_unpartitioned_table_says_it_is_unpartitioned(spark, unpartitioned, where):
    """Spark SQL joins adjacent strings: 'day = DATE ''2026-11-21''' is `day = DATE 2026-11-21`,
    which used to get a parse error suggesting the very predicate the user meant."""
    before = snapshots(spark, unpartitioned)
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.rewrite_equality_deletes(table => '{unpartitioned}', where => {where})"
        )
    text = one_sentence(caught.value)
    assert text.startswith(f"{unpartitioned} is unpartitioned, so where => ")
    assert text.endswith(
        " has no partition to select; leave where out to convert all of its equality deletes."
    )
    assert snapshots(spark, unpartitioned) == before


def test_where_on_an_unpartitioned_table_quotes_the_value_once(spark, unpartitioned):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.rewrite_equality_deletes(table => '{unpartitioned}', "
            "where => \"day = DATE '2026-11-21'\")"
        )
    assert one_sentence(caught.value) == (
        f"{unpartitioned} is unpartitioned, so where => \"day = DATE '2026-11-21'\" has no "
        "partition to select; leave where out to convert all of its equality deletes."
    )


@pytest.mark.parametrize(
    ("where", "part"),
    [
        ("\"v = 'a'\"", "uses column 'v', but only partition source columns of"),
        ("\"upper(v) = 'A'\"", "Cannot convert Spark filter: (v IS NOT NULL) AND (UPPER(v) = 'A')"),
        ("'nope = 1'", "A column or function parameter with name `nope` cannot be resolved"),
    ],
)
def test_where_errors_on_a_partitioned_table_show_no_spark_internals(
    spark, partitioned, where, part
):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.rewrite_equality_deletes(table => '{partitioned}', where => {where})"
        )
    text = one_sentence(caught.value)
    assert part in text
    # the predicate is quoted once, as the user can type it again (no 'v = 'a'')
    assert where.startswith("'") or f"where => {where}" in text or "Cannot convert" in text


# -- item 3 ------------------------------------------------------------------------------------


def test_rewrite_equality_deletes_size_option(spark, unpartitioned):
    call = f"CALL sparkext.rewrite_equality_deletes(table => '{unpartitioned}', options => map("
    with pytest.raises(OptionError) as caught:
        sparkext.sql(call + "'target-file-size-bytes', 'four'))")
    assert one_sentence(caught.value) == (
        "Option 'target-file-size-bytes' of sparkext.rewrite_equality_deletes expects a positive "
        "whole number of bytes such as 134217728 or 128MB, got 'four'."
    )
    with pytest.raises(OptionError, match=r"expects a positive whole number, got '0'\.$"):
        sparkext.sql(call + "'max-files-per-commit', '0'))")
    row = sparkext.sql(call + "'target-file-size-bytes', '64MB'), dry_run => true)").first()
    assert row.dry_run is True


def test_table_health_size_option(spark, partitioned):
    call = f"CALL sparkext.table_health(table => '{partitioned}', options => map("
    with pytest.raises(OptionError) as caught:
        sparkext.sql(call + "'small-file-threshold-bytes', '1.5GB'))")
    assert one_sentence(caught.value) == (
        "Option 'small-file-threshold-bytes' of sparkext.table_health expects a positive whole "
        "number of bytes such as 134217728 or 128MB, got '1.5GB'."
    )
    # the one data file is a few hundred bytes: small below 1 MiB, not below 1 byte
    assert sparkext.sql(call + "'small-file-threshold-bytes', '1 MiB'))").first().small_files == 1
    assert sparkext.sql(call + "'small-file-threshold-bytes', '1b'))").first().small_files == 0


# -- item 4 ------------------------------------------------------------------------------------


def test_an_insert_with_too_many_columns_keeps_the_detail(spark, partitioned):
    with pytest.raises(SparkError) as caught:
        sparkext.sql(f"INSERT INTO {partitioned} VALUES ('2', DATE '2026-11-21', 'b', 4)")
    name = "`" + "`.`".join(partitioned.split(".")) + "`"
    assert one_sentence(caught.value) == (
        f"[INSERT_COLUMN_ARITY_MISMATCH.TOO_MANY_DATA_COLUMNS] Cannot write to {name}, the reason "
        "is too many data columns: Table columns: `id`, `day`, `v`. Data columns: `col1`, `col2`, "
        "`col3`, `col4`."
    )


def test_an_analysis_error_keeps_its_hint_and_position_but_not_the_plan(spark, partitioned):
    with pytest.raises(SparkError) as caught:
        sparkext.sql(f"SELECT 1;\nSELECT id,\n  count(*) FROM {partitioned} GROUP BY day")
    assert one_sentence(caught.value) == (
        '[MISSING_AGGREGATION] The non-aggregating expression "id" is based on columns which '
        "are not participating in the GROUP BY clause. Add the columns or the expression to the "
        'GROUP BY, aggregate the expression, or use "any_value(id)" if you do not care which of '
        "the values within a group is returned."
    )
    with pytest.raises(SparkError) as caught:
        sparkext.sql(f"SELECT 1;\nSELECT idd FROM {partitioned}")
    assert one_sentence(caught.value).startswith(
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name `idd` "
        "cannot be resolved (line 2, column 8). Did you mean one of the following? ["
    )


def test_table_exists_keeps_what_to_do(spark, partitioned):
    with pytest.raises(SparkError) as caught:
        sparkext.sql(f"CREATE TABLE {partitioned} (x int) USING iceberg")
    text = one_sentence(caught.value)
    assert text.startswith("[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view ")
    assert text.endswith(
        "because it already exists. Choose a different name, drop or replace the existing "
        "object, or add the IF NOT EXISTS clause to tolerate pre-existing objects."
    )


# -- item 5 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "sentence"),
    [
        (
            "SELECT sparkext.table_health('{t}')",
            "sparkext.table_health is a table function: use it in FROM (SELECT * FROM "
            "sparkext.table_health(...)) or as CALL sparkext.table_health(...).",
        ),
        (
            "SELECT id FROM {t} WHERE sparkext.snapshot_as_of_event_time('{t}', now()) IS NULL",
            "sparkext.snapshot_as_of_event_time is a table function: use it in FROM (SELECT * "
            "FROM sparkext.snapshot_as_of_event_time(...)) or as "
            "CALL sparkext.snapshot_as_of_event_time(...).",
        ),
        (
            "SELECT sparkext.ingest_cdc('{t}')",
            "sparkext.ingest_cdc is a procedure, not a function: run it as "
            "CALL sparkext.ingest_cdc(...).",
        ),
        (
            "SELECT 1;\nSELECT 1 + sparkext.tabel_health('{t}')",
            "Unknown function 'sparkext.tabel_health' at line 2, column 12 (did you mean "
            "'table_health'?); CALL sparkext.help() lists them.",
        ),
    ],
)
def test_a_sparkext_routine_where_a_value_goes(spark, partitioned, sql, sentence):
    with pytest.raises(UnknownRoutineError) as caught:
        sparkext.sql(sql.format(t=partitioned))
    assert one_sentence(caught.value) == sentence


def test_other_unknown_functions_stay_sparks(spark):
    with pytest.raises(SparkextError, match=r"^\[UNRESOLVED_ROUTINE\] Cannot resolve function"):
        sparkext.sql("SELECT no_such_function(1)")
