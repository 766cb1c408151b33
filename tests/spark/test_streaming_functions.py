"""Flink built-in functions run by a backfill give Flink's results, worked out by hand.

Each expected value comes from Flink's documentation (docs/data/sql_functions.yml; its own
examples are reused where it has them) or, where the documentation is silent, from Flink's
runtime functions (named in the comment). Spark's function of the same name would give the
value in the comment after "Spark:".
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime
from decimal import Decimal

import pytest

from sparkext.streaming import run_backfill
from sparkext.streaming.job import StreamingSqlError

_ids = itertools.count(1)
RANGE = ("2024-01-01 00:00:00", "2024-04-01 00:00:00")
ROWS = """
(1, 'k=abc;x=1', TIMESTAMP '2024-01-31 10:00:00', TIMESTAMP '2024-02-29 10:00:00'),
(2, 'no match', TIMESTAMP '2024-02-01 12:00:00', TIMESTAMP '2024-01-01 10:00:00'),
(3, 'a,b,,c', TIMESTAMP '2024-01-01 10:00:00', TIMESTAMP '2024-01-02 09:59:59'),
(4, '', TIMESTAMP '2024-03-15 00:00:00', TIMESTAMP '2024-01-20 00:00:00'),
(5, NULL, TIMESTAMP '2024-03-01 00:00:00', TIMESTAMP '2024-03-01 00:00:00')
"""


def source(spark) -> str:
    name = f"lake.test.fn_src_{next(_ids)}"
    spark.sql(f"CREATE TABLE {name} (id INT, s STRING, ts TIMESTAMP, t2 TIMESTAMP) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES {ROWS}")
    return name


def job(src: str, select: str) -> str:
    return (
        f"CREATE TABLE {src} (id INT, s STRING, ts TIMESTAMP, t2 TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"SELECT id, {select} FROM {src};"
    )


def columns(spark, select: str) -> dict[int, tuple]:
    """{id: (values of ``select``…)} of a backfill of ``SELECT id, <select> FROM source``."""
    src = source(spark)
    _, results = run_backfill(spark, job(src, select), *RANGE)
    return {row[0]: tuple(row[1:]) for row in results[0].frame.collect()}


def one_row(spark, select: str) -> tuple:
    """The values of ``select`` (of constants) on one row."""
    return columns(spark, select)[1]


def test_regexp_extract_is_null_without_a_match_and_its_default_group_is_0(spark):
    got = columns(spark, "REGEXP_EXTRACT(s, 'k=([a-z]+)', 1), REGEXP_EXTRACT(s, '[a-z]=')")
    # Flink: the group of the first match, NULL when none (SqlFunctionUtils.regexpExtract);
    # two arguments extract group 0, the whole match. Spark: '' without a match, group 1.
    assert got == {
        1: ("abc", "k="),
        2: (None, None),
        3: (None, None),
        4: (None, None),
        5: (None, None),
    }


def test_split_index_is_0_based_and_null_out_of_range(spark):
    got = columns(spark, "SPLIT_INDEX(s, ',', 2), SPLIT_INDEX(s, ',', 9), SPLIT_INDEX(s, ',', -1)")
    # Flink: the index-th (0-based) field; NULL for a negative index, past the last field, or
    # any field of '' (which splits into no fields). Spark has no SPLIT_INDEX at all.
    assert got[3] == ("", None, None)  # 'a,b,,c' → a | b | '' | c
    assert got[1] == (None, None, None)  # one field only
    assert got[4] == (None, None, None)
    assert got[5] == (None, None, None)


def test_substring_edges(spark):
    got = columns(
        spark, "SUBSTRING(s, 2, 3), SUBSTRING(s, -20), SUBSTRING(s, 1, -1), SUBSTR(s, 0, 2)"
    )
    # Flink (BinaryStringDataUtil.substringSQL): 1-based, 0 acts as 1, a start before the
    # string gives '' (Spark: from the first character), a negative length gives NULL (Spark: '').
    assert got[1] == ("=ab", "", None, "k=")
    assert got[4] == ("", "", None, "")


def test_integer_division_truncates(spark):
    got = columns(spark, "id / 2, (0 - id) / 2, 7 / 2, CAST(s AS INT) / 2, id / 2e0")
    # Flink: INT / INT is an INT, truncated towards zero (Spark: a DOUBLE, 2.5); a DOUBLE
    # operand divides as DOUBLE in both.
    assert got[5] == (2, -2, 3, None, 2.5)
    assert got[3] == (1, -1, 3, None, 1.5)


def test_timestampdiff_counts_whole_units_flinks_way(spark):
    got = columns(
        spark,
        "TIMESTAMPDIFF(MONTH, ts, t2), TIMESTAMPDIFF(DAY, ts, t2), TIMESTAMPDIFF(HOUR, ts, t2), "
        "TIMESTAMPDIFF(YEAR, ts, t2)",
    )
    # 01-31 10:00 → 02-29 10:00: Flink counts months by adding them to the start date, the day
    # clamped to the month's end (DateTimeUtils.subtractMonths): Jan 31 + 1 month = Feb 29, so 1
    # month (Spark: 0). 29 days; 696 hours.
    assert got[1] == (1, 29, 696, 0)
    # 02-01 12:00 → 01-01 10:00: backwards, Jan 1 = Feb 1 - 1 month but 10:00 < 12:00, so
    # subtractMonths takes one more month off: -2 (Spark: -1). -31 days 2 h → -31 days, -746 h.
    assert got[2] == (-2, -31, -746, 0)
    # 01-01 10:00 → 01-02 09:59:59 is one second short of a day: 0 days, 23 hours.
    assert got[3] == (0, 0, 23, 0)
    # 03-15 → 01-20: back 1 month (Jan 20 + 2 months = Mar 20 is past Mar 15), -55 days.
    assert got[4] == (-1, -55, -1320, 0)
    assert got[5] == (0, 0, 0, 0)


def test_string_functions_on_flinks_own_examples(spark):
    got = one_row(
        spark,
        "LPAD('hi', 4, '??'), LPAD('hi', 1, '??'), RPAD('hi', 4, '??'), LPAD('hi', -1, '?'), "
        "CONCAT_WS('~', 'AA', CAST(NULL AS STRING), 'BB', '', 'CC'), "
        "OVERLAY('xxxxxtest' PLACING 'xxxx' FROM 6), "
        "OVERLAY('xxxxxtest' PLACING 'xxxx' FROM 6 FOR 2), "
        "OVERLAY('abc' PLACING 'X' FROM 5), REGEXP_REPLACE('foobar', 'oo|ar', ''), "
        "REGEXP_REPLACE('a1', '[0-9]', '$0'), INITCAP('hello-world foo'), "
        "STR_TO_MAP('a=1,b=2,'), STR_TO_MAP(''), STR_TO_MAP('k1:v1;k2', ';', ':'), "
        "LTRIM('xxaxx', 'x'), RTRIM('xxaxx', 'x'), SPLIT('a.b.', '.')",
    )
    assert got == (
        "??hi",  # doc example
        "h",  # doc example
        "hi??",  # doc example
        None,  # SqlFunctionUtils.lpad: negative length → NULL (Spark: '')
        "AA~BB~~CC",  # doc example: NULL arguments skipped
        "xxxxxxxxx",  # doc example
        "xxxxxxxxxst",  # doc example
        "abc",  # SqlFunctionUtils.overlay: a position past the end changes nothing (Spark: abcX)
        "fb",  # doc example
        "a$0",  # the replacement is literal text (Matcher.quoteReplacement); Spark: a1
        "Hello-World Foo",  # a word is [A-Za-z0-9]+ (Spark: Hello-world Foo)
        {"a": "1", "b": "2"},  # ',' and '=' by default; trailing empty pair dropped
        {},  # '' → empty map (Spark: {'': NULL})
        {"k1": "v1", "k2": None},
        "axx",  # LTRIM(str, chars) (Spark's ltrim(chars, str) would give '')
        "xxa",
        ["a", "b", ""],  # a literal delimiter, not a regex (Spark: '.' matches everything)
    )


def test_time_functions_on_flinks_own_examples(spark):
    got = one_row(
        spark,
        "FROM_UNIXTIME(44), CONVERT_TZ('1970-01-01 00:00:00', 'UTC', 'America/Los_Angeles'), "
        "UNIX_TIMESTAMP('1970-01-01 08:00:01.001', 'yyyy-MM-dd HH:mm:ss.SSS'), "
        "UNIX_TIMESTAMP('1970-01-01 08:00:01.001', 'yyyy-MM-dd HH:mm:ss.SSS X'), "
        "TO_TIMESTAMP('1999-9-10 05:20:10'), TO_TIMESTAMP('2024-01-01T10:00:00'), "
        "TO_TIMESTAMP('junk'), DATE_FORMAT(TIMESTAMP '2024-01-31 10:00:00', 'yyyy-MM-dd HH:mm'), "
        "EXTRACT(SECOND FROM TIMESTAMP '2024-01-01 10:00:05.123'), WEEK(DATE '1994-09-27'), "
        "FLOOR(TIMESTAMP '2024-01-31 10:44:31' TO HOUR), "
        "CEIL(TIMESTAMP '2024-01-31 10:44:31' TO HOUR), "
        "CEIL(TIMESTAMP '2024-01-31 10:00:00' TO HOUR), "
        "TIMESTAMPADD(MONTH, 1, TIMESTAMP '2024-01-31 10:00:00')",
    )
    assert got == (
        "1970-01-01 00:00:44",  # doc example (UTC session)
        "1969-12-31 16:00:00",  # doc example
        28801,  # doc example, in UTC instead of Europe/Berlin (25201)
        -9223372036854775808,  # doc example: unparseable → Long.MIN_VALUE (Spark: NULL)
        datetime(1999, 9, 10, 5, 20, 10),  # default form 'yyyy-[M]M-[d]d [H]H:…'
        None,  # not Flink's default form (Spark's CAST would accept the T)
        None,
        "2024-01-31 10:00",
        5,  # a BIGINT, no fraction (Spark: 5.123000)
        39,  # doc example
        datetime(2024, 1, 31, 10, 0),
        datetime(2024, 1, 31, 11, 0),
        datetime(2024, 1, 31, 10, 0),
        datetime(2024, 2, 29, 10, 0),
    )


def test_unix_timestamp_and_from_unixtime_in_another_session_zone(spark):
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")
    try:
        got = one_row(
            spark,
            "UNIX_TIMESTAMP('1970-01-01 08:00:01.001', 'yyyy-MM-dd HH:mm:ss.SSS'), "
            "FROM_UNIXTIME(44)",
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    # doc examples: 25201 in Europe/Berlin; FROM_UNIXTIME shows the session zone's wall clock
    assert got == (25201, "1970-01-01 01:00:44")


def test_json_functions_on_flinks_own_examples(spark):
    got = one_row(
        spark,
        """JSON_VALUE('{"a": true}', '$.a'), JSON_VALUE('{"a": true}', 'lax $.b'),
        JSON_VALUE('{"a": {"b": 1}}', '$.a'), JSON_VALUE('not json', '$.a'),
        JSON_QUERY('{ "a": { "b": 1 } }', '$.a'), JSON_QUERY('{"a": 1}', '$.a'),
        JSON_EXISTS('{"a": true}', '$.a'), JSON_EXISTS('{"a": true}', '$.b'),
        JSON_EXISTS('{"a": [{ "b": 1 }]}', '$.a[0].b')""",
    )
    value, missing, not_scalar, invalid, query, scalar, *exists = got
    # doc: "true" (as STRING); NULL ON EMPTY; non-scalars cannot be returned; NULL ON ERROR
    assert (value, missing, not_scalar, invalid) == ("true", None, None, None)
    # doc: '{ "b": 1 }' (compared as JSON); scalars must be wrapped → NULL
    assert json.loads(query) == {"b": 1} and scalar is None
    assert exists == [True, False, True]  # doc examples


def test_conditional_collection_and_hash_functions(spark):
    got = one_row(
        spark,
        "GREATEST(1, CAST(NULL AS INT)), LEAST(1, 2), IS_DIGIT('123'), IS_DIGIT(''), "
        "IS_DIGIT(CAST(NULL AS STRING)), IS_ALPHA('abc'), REGEXP('abc', ''), "
        "CARDINALITY(CAST(NULL AS ARRAY<INT>)), CARDINALITY(ARRAY[1, 2]), ARRAY[10, 20][1], "
        "ARRAY_CONTAINS(ARRAY[1, CAST(NULL AS INT)], 2), "
        "ARRAY_CONTAINS(ARRAY[1, CAST(NULL AS INT)], CAST(NULL AS INT)), "
        "ARRAY_SORT(ARRAY[2, CAST(NULL AS INT), 1]), ARRAY_REVERSE(ARRAY[1, 2]), "
        "MAP_UNION(MAP['a', 1, 'b', 2], MAP['b', 3]), ELEMENT(ARRAY[7]), "
        "SHA256('a'), TRUNCATE(42.324, 2), TRUNCATE(-42.329, 2)",
    )
    assert got == (
        None,  # NULL when any argument is NULL (Spark: 1)
        1,
        True,
        False,  # '' is not numeric
        False,  # NULL → FALSE
        True,
        False,  # an empty regex never matches (SqlFunctionUtils.regExp; Spark: TRUE)
        None,  # Spark: -1
        2,
        10,  # 1-based (Spark's [1]: 20)
        False,  # Spark: NULL
        True,  # a NULL element can be searched for (Spark: NULL)
        [None, 1, 2],  # ascending, NULLs first (Spark's array_sort: NULLs last)
        [2, 1],
        {"a": 1, "b": 3},  # the later map wins (Spark: duplicate key error)
        7,
        "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        Decimal("42.32"),  # doc example
        Decimal("-42.32"),
    )


def test_listagg_is_null_for_a_group_without_values(spark):
    src = source(spark)
    text = (
        f"CREATE TABLE {src} (id INT, s STRING, ts TIMESTAMP, t2 TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"SELECT id > 4 AS late, LISTAGG(s), LISTAGG(s, '|') FROM {src} WHERE id <> 2 "
        "GROUP BY id > 4;"
    )
    _, results = run_backfill(spark, text, *RANGE)
    got = {row[0]: tuple(row[1:]) for row in results[0].frame.collect()}
    # Flink: NULL when the group has no non-NULL value (Spark's array_join: '')
    assert got[True] == (None, None)
    # the values in arrival order (not deterministic in either engine): compare as a set
    assert sorted(got[False][1].split("|")) == ["", "a,b,,c", "k=abc;x=1"]
    assert len(got[False][0]) == len("k=abc;x=1,a,b,,c,")


def test_split_index_into_a_sink(spark):
    src, sink = source(spark), f"lake.test.fn_sink_{next(_ids)}"
    text = (
        f"CREATE TABLE {src} (id INT, s STRING, ts TIMESTAMP, t2 TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"CREATE TABLE {sink} (id INT, ts TIMESTAMP, second_field STRING);\n"
        f"INSERT INTO {sink} SELECT id, ts, SPLIT_INDEX(s, ',', 1) FROM {src};"
    )
    run_backfill(spark, text, *RANGE)
    got = {row.id: row.second_field for row in spark.table(sink).collect()}
    assert got == {1: None, 2: None, 3: "b", 4: None, 5: None}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "ARRAY_SLICE(ARRAY[1, 2], 0, 1)",
            "Flink's ARRAY_SLICE(…) has no Spark translation in sparkext",
        ),
        ("CURRENT_WATERMARK(ts)", "Flink's CURRENT_WATERMARK(…) has no Spark translation"),
        ("DATE_FORMAT(ts, 'uuuu')", "Spark's patterns have no letter u"),
    ],
)
def test_a_refused_function_fails_before_any_table_is_created(spark, call, message):
    suffix = next(_ids)
    src, sink = f"lake.test.fn_unmade_{suffix}", f"lake.test.fn_unmade_sink_{suffix}"
    text = (
        f"CREATE TABLE {src} (id INT, s STRING, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"CREATE TABLE {sink} (id INT, ts TIMESTAMP, v STRING);\n"
        f"INSERT INTO {sink} SELECT id, ts, CAST({call} AS STRING) FROM {src};"
    )
    with pytest.raises(StreamingSqlError, match=r"^line \d+, column \d+: .*" + re.escape(message)):
        run_backfill(spark, text, *RANGE)
    assert not spark.catalog.tableExists(src) and not spark.catalog.tableExists(sink)
