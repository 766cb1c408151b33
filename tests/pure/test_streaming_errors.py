"""Every sentence the streaming rewrite says about a bad job (the ones the fixtures do not show)."""

from __future__ import annotations

import re

import pytest

from sparkext.streaming.context import StaticCatalog
from sparkext.streaming.job import StreamingSqlError
from sparkext.streaming.rewrite import plan_batch
from sparkext.streaming.udf import UdfError, resolve

HEAD = (
    "CREATE TABLE bids (bidtime TIMESTAMP, price DOUBLE, item STRING, "
    "WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE);\n"
)
CATALOG = StaticCatalog({"lake.db.plain": {"properties": {}, "columns": ["id", "ts"]}})
TVF = "SELECT * FROM TABLE({})"

CASES = [
    (HEAD + "SELECT * FROM bids MATCH_RECOGNIZE (PARTITION BY item ORDER BY bidtime MEASURES "
            "A.price AS p ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price > 1) AS T",
     "line 2, column 34: MATCH_RECOGNIZE (row pattern matching) has no Spark equivalent"),
    (HEAD + "BEGIN STATEMENT SET; INSERT INTO s SELECT * FROM bids; END;",
     "line 2, column 15: a STATEMENT SET is not needed: write its INSERT INTO statements"),
    (HEAD + "EXECUTE STATEMENT SET BEGIN INSERT INTO s SELECT * FROM bids; END;",
     "a STATEMENT SET is not needed"),
    (HEAD + "CREATE TEMPORARY VIEW v AS SELECT * FROM bids; SELECT * FROM v",
     "line 2, column 21: CREATE VIEW is not supported in a job; write the view's query"),
    (HEAD + "SELECT b.item, t.w FROM bids b, LATERAL TABLE(split_words(b.item)) AS t(w)",
     "LATERAL TABLE(…) calls a table function, and sparkext registers scalar functions only"),
    ("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts + INTERVAL '1' MINUTE); SELECT 1",
     "WATERMARK FOR ts AS ts + INTERVAL '1' MINUTE is not supported"),
    ("CREATE TABLE t (a INT, CHECK (a > 0)); SELECT 1", "is not supported in CREATE TABLE"),
    ("CREATE FUNCTION f AS 'nodot'; SELECT 1", "CREATE FUNCTION needs AS 'module.function'"),
    ("DROP TABLE bids; SELECT 1", "DROP is not a job statement"),
    (HEAD + TVF.format("TUMBLE(TABLE bids, DESCRIPTOR(bidtime), 10)"),
     "is not an interval such as INTERVAL '10' MINUTES"),
    (HEAD + TVF.format("TUMBLE(DATA => TABLE bids, DESCRIPTOR(bidtime), INTERVAL '1' HOUR)"),
     "TUMBLE: a positional argument follows a named one"),
    (HEAD + TVF.format("TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '1' HOUR, "
                       "INTERVAL '1' MINUTE, INTERVAL '1' MINUTE)"),
     "TUMBLE takes at most 4 arguments"),
    (HEAD + TVF.format("TUMBLE(TABLE bids, DESCRIPTOR(bidtime))"), "TUMBLE is missing SIZE"),
    (HEAD + TVF.format("TUMBLE(bids, DESCRIPTOR(bidtime), INTERVAL '1' HOUR)"),
     "TUMBLE's first argument must be TABLE <name>"),
    (HEAD + TVF.format("TUMBLE(TABLE bids, bidtime, INTERVAL '1' HOUR)"),
     "TUMBLE's time column must be DESCRIPTOR(<column>)"),
    (HEAD + TVF.format("CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '3' MINUTES, "
                       "INTERVAL '10' MINUTES)"),
     "CUMULATE's size must be a whole multiple of its step"),
    (HEAD + "SELECT COUNT(*) FROM bids GROUP BY TUMBLE(bidtime, INTERVAL '1' HOUR), "
            "HOP(bidtime, INTERVAL '1' HOUR, INTERVAL '2' HOUR)",
     "GROUP BY may hold one group window function"),
    (HEAD + "SELECT COUNT(*) FROM bids GROUP BY TUMBLE(bidtime)",
     "GROUP BY TUMBLE needs (time column, interval …)"),
    (HEAD + "SELECT TUMBLE(bidtime, INTERVAL '1' HOUR) FROM bids",
     "TUMBLE(…) in this place cannot be rewritten to batch SQL"),
    (HEAD + "SELECT * FROM bids AS b JOIN lake.db.plain FOR SYSTEM_TIME AS OF bidtime AS p "
            "ON b.item = p.id",
     "FOR SYSTEM_TIME AS OF bidtime must name a time column of a table joined before it"),
    (HEAD + "CREATE TABLE r (k STRING, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
            "SELECT * FROM bids AS b JOIN r FOR SYSTEM_TIME AS OF b.bidtime AS x ON x.v > b.price",
     "the temporal join with r needs key equalities in ON"),
    (HEAD + "CREATE TABLE c (ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
            "CREATE TABLE d (ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
            "SELECT * FROM bids AS b, c, d WHERE b.bidtime = c.ts AND c.ts = d.ts",
     "an interval join joins two streams"),
    (HEAD + "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY item ORDER BY price) AS rn "
            "FROM bids) WHERE rn = 1",
     "Top-N over a whole stream (a ranking other than each key's first row by time) produces "
     "updates"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn FROM "
     "lake.db.plain /*+ OPTIONS('streaming'='true') */) WHERE rn = 1",
     "the stream lake.db.plain has no event-time column"),
    ("INSERT INTO lake.db.sink SELECT * FROM lake.db.plain",
     "INSERT INTO lake.db.sink reads no stream, so no time range bounds it"),
]  # fmt: skip


@pytest.mark.parametrize(("job", "message"), CASES, ids=[m for _, m in CASES])
def test_bad_job_is_one_sentence(job, message):
    with pytest.raises(StreamingSqlError, match=re.escape(message)):
        plan_batch(job, "2020-04-15 00:00:00", "2020-04-16 00:00:00", CATALOG)


def test_bad_lookup_as_of_is_one_sentence():
    job = (
        "CREATE TABLE o (k STRING, ts TIMESTAMP, proc AS PROCTIME(), WATERMARK FOR ts AS ts);\n"
        "SELECT * FROM o JOIN lake.db.plain FOR SYSTEM_TIME AS OF o.proc AS p ON o.k = p.id"
    )
    catalog = StaticCatalog(
        {"lake.db.plain": {"properties": {}, "snapshots": [["2020-01-01 00:00:00", 1]]}}
    )
    with pytest.raises(StreamingSqlError, match="lookup-as-of 'yesterday' is not 'end', 'latest'"):
        plan_batch(job, None, "2020-04-16", catalog, lookup_as_of="yesterday")


def test_udf_names_that_are_not_udfs():
    with pytest.raises(UdfError, match="cannot import it"):
        resolve("no_such_module_here.f")
    with pytest.raises(UdfError, match="is not a sparkext UDF; decorate it"):
        resolve("os.path.join")
    assert resolve("tests.helpers.udfs.label").return_type == "string"


def test_flink_words_inside_strings_are_not_constructs():
    plan_batch(
        HEAD + "CREATE TABLE view (n BIGINT);\n"
        "SELECT 'MATCH_RECOGNIZE or a VIEW' AS note, item AS view FROM bids",
        "2020-04-15 00:00:00",
        "2020-04-16 00:00:00",
        CATALOG,
    )
