"""Which queries produce updates (Flink's changelog), and what the rewrite does with them."""

from __future__ import annotations

import pytest

from sparkext.streaming.context import StaticCatalog
from sparkext.streaming.job import StreamingSqlError, UpdatingQueryError
from sparkext.streaming.rewrite import plan_batch

BID = (
    "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP, "
    "WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECONDS);\n"
)
RANGE = ("2024-01-01 10:00:00", "2024-01-01 12:00:00")
Q5 = """
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.endtime FROM (
  SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end) AS AuctionBids
JOIN (
  SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime FROM (
    SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
AND AuctionBids.num >= MaxBids.maxn
"""


def _plan(sql: str):
    return plan_batch(BID + sql, *RANGE, StaticCatalog()).queries[-1]


def test_nexmark_q5s_cascaded_window_aggregation_is_append_only():
    query = _plan(Q5)
    assert not query.updating
    assert "REPLACE" not in query.sql()


@pytest.mark.parametrize(
    "body",
    [
        "SELECT auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction "
        "ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 2",
        "SELECT auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction "
        "ORDER BY dateTime DESC) AS rn FROM (SELECT auction, price, dateTime FROM bid)) "
        "WHERE rn = 1",
        "SELECT a.auction, a.price, b.price FROM bid a FULL JOIN bid b ON a.auction = b.auction "
        "AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '1' MINUTE",
    ],
    ids=["top-n by value", "keep-last over a subquery", "full outer interval join"],
)
def test_updating_forms_go_to_a_primary_key_sink(body):
    sink = (
        "CREATE TABLE s (auction BIGINT, price BIGINT, rn BIGINT, "
        "PRIMARY KEY (auction, rn) NOT ENFORCED);\nINSERT INTO s "
    )
    query = _plan(sink + body)
    assert query.updating and query.key == ["auction", "rn"]
    with pytest.raises(UpdatingQueryError, match="produces updates"):
        _plan("INSERT INTO lake.db.plain " + body)


def test_an_updating_query_without_a_sink_is_its_final_rows():
    query = _plan("SELECT auction, COUNT(*) FROM bid GROUP BY auction")
    assert query.updating and query.previous is None
    assert "dateTime < CAST('2024-01-01 12:00:00' AS TIMESTAMP)" in query.sql(pretty=False)
    assert "dateTime >=" not in query.sql(pretty=False)


def test_a_primary_key_that_is_not_a_column_is_one_sentence():
    catalog = StaticCatalog({"lake.db.s": {"columns": ["auction", "n"], "key": ["id"]}})
    with pytest.raises(StreamingSqlError, match=r"primary key of lake\.db\.s names id"):
        plan_batch(
            BID + "INSERT INTO lake.db.s SELECT auction, COUNT(*) FROM bid GROUP BY auction",
            *RANGE,
            catalog,
        )
