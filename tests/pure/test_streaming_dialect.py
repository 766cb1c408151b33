"""The streaming dialect parses the constructs streaming jobs are written with."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlglot
from sqlglot import exp

from sparkext.streaming.dialect import Streaming
from sparkext.streaming.job import StreamingSqlError, parse_job
from sparkext.streaming.sqltools import bind_tvf, window_tvf


def parse(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read=Streaming)


def tvf_of(sql: str) -> dict[str, exp.Expr]:
    table = next(t for t in parse(sql).find_all(exp.Table) if window_tvf(t) is not None)
    return bind_tvf(window_tvf(table))


def test_create_table_with_watermark_proctime_key_and_options():
    job = parse_job(
        "CREATE TABLE lake.db.bids (bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING, "
        "proc AS PROCTIME(), cost AS price * 2, "
        "WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE, PRIMARY KEY (item) NOT ENFORCED) "
        "PARTITIONED BY (item) WITH ('connector'='iceberg');"
        "INSERT INTO s SELECT * FROM lake.db.bids"
    )
    decl = job.tables["lake.db.bids"]
    assert [c.name for c in decl.physical] == ["bidtime", "price", "item"]
    assert decl.proctime == {"proc"} and list(decl.computed) == ["cost"]
    assert decl.watermark == ("bidtime", timedelta(minutes=1))
    assert decl.primary_key == ["item"] and decl.options == {"connector": "iceberg"}


def test_watermark_without_delay_and_in_seconds():
    job = parse_job(
        "CREATE TABLE a (ts TIMESTAMP, WATERMARK FOR ts AS ts);"
        "CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS);"
        "SELECT 1"
    )
    assert job.tables["a"].watermark == ("ts", timedelta(0))
    assert job.tables["b"].watermark == ("ts", timedelta(seconds=5))


def test_options_hint_after_table_and_before_alias():
    tree = parse(
        "SELECT * FROM lake.db.orders /*+ OPTIONS('streaming'='true', 'monitor-interval'='1s', "
        "'start-snapshot-id'='42') */ AS o JOIN dim ON o.k = dim.k"
    )
    orders = next(tree.find_all(exp.Table))
    assert orders.alias == "o"
    assert orders.meta["options"] == {
        "streaming": "true",
        "monitor-interval": "1s",
        "start-snapshot-id": "42",
    }


def test_hint_that_is_not_options_is_an_error():
    with pytest.raises(sqlglot.errors.ParseError, match="a table hint must be OPTIONS"):
        parse("SELECT * FROM t /*+ BROADCAST(t) */")


@pytest.mark.parametrize(
    ("sql", "kind", "names"),
    [
        (
            "TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)",
            "TUMBLE",
            ["DATA", "TIMECOL", "SIZE"],
        ),
        (
            "TUMBLE(DATA => TABLE bids, TIMECOL => DESCRIPTOR(bidtime), SIZE => INTERVAL '10' MINUTES, "
            "`OFFSET` => INTERVAL '1' MINUTE)",
            "TUMBLE",
            ["DATA", "TIMECOL", "SIZE", "OFFSET"],
        ),
        (
            "HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
            "HOP",
            ["DATA", "TIMECOL", "SLIDE", "SIZE"],
        ),
        (
            "CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)",
            "CUMULATE",
            ["DATA", "TIMECOL", "STEP", "SIZE"],
        ),
        (
            "SESSION(TABLE bids PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
            "SESSION",
            ["DATA", "TIMECOL", "GAP"],
        ),
        (
            "SESSION(DATA => TABLE lake.db.bids PARTITION BY (item, supplier), "
            "TIMECOL => DESCRIPTOR(bidtime), GAP => INTERVAL '5' MINUTES)",
            "SESSION",
            ["DATA", "TIMECOL", "GAP"],
        ),
    ],
)
def test_window_tvfs_positional_and_named(sql, kind, names):
    args = tvf_of(f"SELECT * FROM TABLE({sql})")
    assert sorted(args) == sorted(names)
    assert isinstance(args["DATA"], exp.Table)
    assert args["TIMECOL"].expressions[0].name == "bidtime"
    if kind == "SESSION" and "supplier" in sql:
        assert [c.name for c in args["DATA"].meta["partition_by"]] == ["item", "supplier"]


def test_tvf_positions_for_errors():
    table = next(
        t
        for t in parse(
            "SELECT *\nFROM TABLE(\n  HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
        ).find_all(exp.Table)
        if window_tvf(t) is not None
    )
    assert (window_tvf(table).meta["line"], window_tvf(table).meta["col"]) == (3, 5)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT user, TUMBLE_START(ts, INTERVAL '1' DAY), SUM(amount) FROM Orders GROUP BY TUMBLE(ts, INTERVAL '1' DAY), user",
        "SELECT HOP_END(ts, INTERVAL '5' MINUTE, INTERVAL '1' HOUR) FROM t GROUP BY HOP(ts, INTERVAL '5' MINUTE, INTERVAL '1' HOUR)",
        "SELECT SESSION_START(ts, INTERVAL '5' MINUTE), COUNT(*) FROM t GROUP BY SESSION(ts, INTERVAL '5' MINUTE), k",
        "SELECT window_start, window_end, supplier_id, SUM(price) FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, ROLLUP (supplier_id)",
        "SELECT window_start, window_end, a, b, SUM(price) FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, CUBE (a, b)",
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))) WHERE rownum <= 3",
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY proc ASC) AS rn FROM clicks) WHERE rn = 1",
        "SELECT o.id FROM Orders o, Shipments s WHERE o.id = s.order_id AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time",
        "INSERT INTO sink SELECT o.id, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",
        "SELECT o.id FROM orders AS o JOIN dim FOR SYSTEM_TIME AS OF o.proc_time AS d ON o.k = d.k",
    ],
)
def test_constructs_parse(sql):
    assert parse(sql) is not None


def test_temporal_join_keeps_its_time_attribute():
    tree = parse("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts AS x ON o.k = x.k")
    version = next(t for t in tree.find_all(exp.Table) if t.name == "r").args["version"]
    assert version.expression.sql() == "o.ts"


def test_job_statements_and_errors():
    job = parse_job(
        "CREATE FUNCTION label AS 'tests.helpers.udfs.label';"
        "SET 'table.exec.state.ttl' = '1 h';"
        "INSERT INTO s SELECT label(x) FROM t"
    )
    assert job.functions == {"label": "tests.helpers.udfs.label"}
    assert job.state_ttl == timedelta(hours=1)
    with pytest.raises(StreamingSqlError, match="line 1, column"):
        parse_job("SELECT * FROM TABLE(TUMBLE(TABLE t DESCRIPTOR(ts)))")
    with pytest.raises(StreamingSqlError, match="connector 'kafka'"):
        parse_job("CREATE TABLE k (a INT) WITH ('connector'='kafka'); SELECT 1")
    with pytest.raises(StreamingSqlError, match="no INSERT INTO or SELECT"):
        parse_job("CREATE TABLE k (a INT)")
    with pytest.raises(StreamingSqlError, match="is not a duration"):
        _ = parse_job("SET 'table.exec.state.ttl' = 'forever'; SELECT 1").state_ttl


def test_string_literals_are_flinks():
    """Flink's strings are SQL's: '' is a quote and a backslash is itself, so a regex keeps its
    backslashes when the batch SQL is rendered for Spark (whose literals escape them)."""
    tree = sqlglot.parse_one(
        r"SELECT REGEXP_EXTRACT(s, '(\d+)-x', 1), 'it''s', 'a\b'", read=Streaming
    )
    literals = [n.name for n in tree.find_all(exp.Literal) if n.is_string]
    assert sorted(literals) == sorted([r"(\d+)-x", "it's", r"a\b"])
    assert r"'(\\d+)-x'" in tree.sql(dialect="spark")
