"""Updating queries (Flink's regular aggregates, keep-last dedup, Top-N, regular joins) into
primary-key sinks, against rows worked out by hand from Flink's upsert-sink semantics: the sink
ends with the query's final row per key. Each job runs as one backfill, as two adjacent
backfills (the split must equal the whole), twice (a replay changes nothing) and as a stream.
"""

from __future__ import annotations

import itertools

import pytest

from sparkext.errors import CommitConflictError, StreamingWriteError
from sparkext.streaming import run_backfill
from sparkext.streaming.job import StreamingSqlError
from tests.spark.test_streaming import SENTINEL_COMMIT, append, both_modes, shaped, sorted_rows, t

_ids = itertools.count(1)
BID_DDL = "auction BIGINT, price BIGINT, dateTime TIMESTAMP"
BIDS = [
    ("1", "10", "2020-04-15 20:00:00"),
    ("2", "5", "2020-04-15 20:03:00"),
    ("1", "20", "2020-04-15 20:07:00"),
    ("2", "7", "2020-04-15 20:12:00"),
    ("3", "9", "2020-04-15 20:15:00"),
    ("1", "5", "2020-04-15 20:20:00"),
]
AUCTION_DDL = "id BIGINT, seller STRING, dateTime TIMESTAMP"
AUCTIONS = [
    ("1", "alice", "2020-04-15 19:59:00"),
    ("2", "bob", "2020-04-15 20:11:00"),
    ("3", "carol", "2020-04-15 20:14:00"),
]
HEAD = """
CREATE TABLE {bid} (auction BIGINT, price BIGINT, dateTime TIMESTAMP,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND);
"""
SPLIT, END = "2020-04-15 20:10:00", "2020-04-15 21:00:00"

AGGREGATE = (
    HEAD
    + """
CREATE TABLE {sink} (auction BIGINT, bids BIGINT, volume BIGINT, last_bid TIMESTAMP,
  PRIMARY KEY (auction) NOT ENFORCED);
INSERT INTO {sink}
SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(dateTime) AS last_bid
FROM {bid} GROUP BY auction;
"""
)
AGGREGATE_ROWS = [  # Flink: one row per auction, updated by every bid
    (1, 3, 35, t("2020-04-15 20:20:00")),
    (2, 2, 12, t("2020-04-15 20:12:00")),
    (3, 1, 9, t("2020-04-15 20:15:00")),
]
KEEP_LAST = (
    HEAD
    + """
CREATE TABLE {sink} (auction BIGINT, price BIGINT, dateTime TIMESTAMP,
  PRIMARY KEY (auction) NOT ENFORCED);
INSERT INTO {sink} SELECT auction, price, dateTime FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY dateTime DESC) AS rn FROM {bid})
WHERE rn = 1;
"""
)
KEEP_LAST_ROWS = [  # the newest bid per auction
    (1, 5, t("2020-04-15 20:20:00")),
    (2, 7, t("2020-04-15 20:12:00")),
    (3, 9, t("2020-04-15 20:15:00")),
]
TOP_2 = (
    HEAD
    + """
CREATE TABLE {sink} (auction BIGINT, best BIGINT, PRIMARY KEY (auction) NOT ENFORCED);
INSERT INTO {sink} SELECT auction, best FROM (
  SELECT auction, best, ROW_NUMBER() OVER (ORDER BY best DESC) AS rn
  FROM (SELECT auction, MAX(price) AS best FROM {bid} GROUP BY auction))
WHERE rn <= 2;
"""
)
# before 20:10 the top two are auctions 1 (20) and 2 (5); auction 3's 9 pushes 2 out: a delete
TOP_2_ROWS = [(1, 20), (3, 9)]
REGULAR_JOIN = (
    HEAD
    + """
CREATE TABLE {auction} (id BIGINT, seller STRING, dateTime TIMESTAMP,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND);
CREATE TABLE {sink} (auction BIGINT, price BIGINT, seller STRING,
  PRIMARY KEY (auction, price) NOT ENFORCED);
INSERT INTO {sink} SELECT b.auction, b.price, a.seller
FROM {bid} b JOIN {auction} a ON b.auction = a.id;
"""
)
REGULAR_JOIN_ROWS = [  # every bid meets its auction whichever came first
    (1, 5, "alice"),
    (1, 10, "alice"),
    (1, 20, "alice"),
    (2, 5, "bob"),
    (2, 7, "bob"),
    (3, 9, "carol"),
]
JOBS = {
    "aggregate": (AGGREGATE, AGGREGATE_ROWS),
    "keep_last": (KEEP_LAST, KEEP_LAST_ROWS),
    "top_2": (TOP_2, TOP_2_ROWS),
    "regular_join": (REGULAR_JOIN, REGULAR_JOIN_ROWS),
}


def _sources(spark) -> dict[str, str]:
    names = {"bid": f"lake.upsert.bid_{next(_ids)}", "auction": f"lake.upsert.auction_{next(_ids)}"}
    spark.sql(f"CREATE TABLE {names['bid']} ({BID_DDL}) USING iceberg")
    spark.sql(f"CREATE TABLE {names['auction']} ({AUCTION_DDL}) USING iceberg")
    append(spark, names["bid"], BID_DDL, BIDS)
    append(spark, names["auction"], AUCTION_DDL, AUCTIONS)
    return names


@pytest.fixture(scope="module")
def sources(spark) -> dict[str, str]:
    """BIDS and AUCTIONS, built once: the tests that only read them share them (a test that
    writes to a source builds its own with _sources)."""
    return _sources(spark)


@pytest.mark.parametrize("name", list(JOBS))
def test_an_updating_query_into_a_primary_key_sink_holds_the_final_rows(spark, sources, name):
    job, expected = JOBS[name]
    whole, halves = (f"lake.upsert.out_{next(_ids)}" for _ in range(2))
    run_backfill(spark, job.format(sink=whole, **sources), None, END)
    assert sorted_rows(spark, whole) == expected
    text = job.format(sink=halves, **sources)
    run_backfill(spark, text, None, SPLIT)
    _, results = run_backfill(spark, text, SPLIT, END)
    assert sorted_rows(spark, halves) == expected
    assert results[0].snapshot_id is not None
    _, again = run_backfill(spark, text, SPLIT, END)  # a replay: the same rows, no new commit
    assert sorted_rows(spark, halves) == expected
    assert again[0].snapshot_id is None
    assert spark.sql(f"SELECT * FROM {halves}.snapshots").count() == 2


def test_top_n_deletes_a_key_that_drops_out(spark, sources):
    sink = f"lake.upsert.out_{next(_ids)}"
    text = TOP_2.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    assert sorted_rows(spark, sink) == [(1, 20), (2, 5)]
    _, results = run_backfill(spark, text, SPLIT, END)
    assert (results[0].rows_added, results[0].rows_deleted) == (1, 1)
    assert sorted_rows(spark, sink) == TOP_2_ROWS


def test_the_primary_key_sink_gets_identifier_fields(spark, sources):
    sink = f"lake.upsert.out_{next(_ids)}"
    run_backfill(spark, AGGREGATE.format(sink=sink, **sources), None, END)
    from sparkext.iceberg.catalog import identifier_columns

    assert identifier_columns(spark, sink) == ["auction"]


@SENTINEL_COMMIT
@pytest.mark.parametrize("name", ["aggregate", "top_2"])
def test_an_updating_query_in_stream_mode(spark, tmp_path, name, sentinels_alone):
    job, expected = JOBS[name]
    sentinel = [("99", "0", "2020-04-16 12:00:00")]
    commits = shaped([{"bid": BIDS[:3]}, {"bid": BIDS[3:]}, {"bid": sentinel}], sentinels_alone)
    stream, batch = both_modes(spark, tmp_path, job, {"bid": BID_DDL}, commits, None, END)
    assert batch == expected
    # Flink updates an upsert sink with every row, the far-later one too (the backfill ends before)
    if name == "aggregate":
        expected = sorted([*expected, (99, 1, 0, t("2020-04-16 12:00:00"))])
    assert stream == expected


def test_an_updating_query_into_a_sink_without_a_key_is_refused_before_anything_exists(
    spark, sources
):
    sink = f"lake.upsert.out_{next(_ids)}"
    job = AGGREGATE.replace(",\n  PRIMARY KEY (auction) NOT ENFORCED", "")
    text = job.format(sink=sink, **sources)
    with pytest.raises(StreamingSqlError) as error:
        run_backfill(spark, text, None, END)
    # where GROUP BY auction ends: column 40 when the source's name has a two-digit number
    column = text.splitlines()[7].index("GROUP BY auction") + len("GROUP BY auction")
    assert str(error.value).startswith(f"line 8, column {column}: ")
    assert "GROUP BY auction without a window produces updates, which an append-only sink " in str(
        error.value
    )
    assert "PRIMARY KEY (…) NOT ENFORCED" in str(error.value)
    assert not spark.catalog.tableExists(sink)


def test_a_backfill_from_the_beginning_repairs_the_sink(spark, sources):
    # the sink holds the state as of the split; a rebuild from the beginning must also delete
    # the key that has dropped out of the Top-2 since
    sink = f"lake.upsert.out_{next(_ids)}"
    text = TOP_2.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    run_backfill(spark, text, None, END)
    assert sorted_rows(spark, sink) == TOP_2_ROWS


def test_an_earlier_range_after_a_later_one_is_refused(spark, sources):
    sink = f"lake.upsert.out_{next(_ids)}"
    text = AGGREGATE.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    run_backfill(spark, text, SPLIT, END)
    with pytest.raises(StreamingWriteError, match="already holds the query's rows as of"):
        run_backfill(spark, text, None, SPLIT)  # would set auctions 1 and 2 back to 20:10
    assert sorted_rows(spark, sink) == AGGREGATE_ROWS
    run_backfill(spark, text, "2020-04-15 20:05:00", END)  # overlapping, up to the end: fine
    assert sorted_rows(spark, sink) == AGGREGATE_ROWS


def test_a_gap_after_the_sinks_point_in_time_is_filled(spark, sources):
    # the sink is at 20:10; a backfill of [20:30, 21:00) also brings the keys that changed in
    # [20:10, 20:30) (auction 2 at 20:12, auction 3 at 20:15)
    sink = f"lake.upsert.out_{next(_ids)}"
    text = AGGREGATE.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    run_backfill(spark, text, "2020-04-15 20:30:00", END)
    assert sorted_rows(spark, sink) == AGGREGATE_ROWS


TOP_N_BY_PRICE = (
    HEAD
    + """
CREATE TABLE {sink} (auction BIGINT, price BIGINT, rn BIGINT,
  PRIMARY KEY (auction, rn) NOT ENFORCED);
INSERT INTO {sink} SELECT auction, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM {bid})
WHERE rn <= 2;
"""
)


def test_flinks_top_n_by_value_into_a_primary_key_sink(spark, sources):
    sink = f"lake.upsert.out_{next(_ids)}"
    text = TOP_N_BY_PRICE.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    run_backfill(spark, text, SPLIT, END)
    # the two highest bids per auction
    assert sorted_rows(spark, sink) == [(1, 10, 2), (1, 20, 1), (2, 5, 2), (2, 7, 1), (3, 9, 1)]


def test_a_sink_partitioned_off_its_key_is_refused_before_anything_exists(spark, sources):
    sink = f"lake.upsert.out_{next(_ids)}"
    job = AGGREGATE.replace(
        "PRIMARY KEY (auction) NOT ENFORCED);",
        "PRIMARY KEY (auction) NOT ENFORCED)\n  PARTITIONED BY (days(last_bid));",
    )
    with pytest.raises(StreamingSqlError, match=r"partitioned by days\(last_bid\), which is not"):
        run_backfill(spark, job.format(sink=sink, **sources), None, END)
    assert not spark.catalog.tableExists(sink)


def test_a_null_key_is_one_sentence_and_writes_nothing(spark):
    # Flink's NOT NULL enforcer fails the job on a NULL primary key; so does the upsert
    sources = _sources(spark)
    append(spark, sources["bid"], BID_DDL, [(None, "3", "2020-04-15 20:30:00")])
    sink = f"lake.upsert.out_{next(_ids)}"
    with pytest.raises(StreamingWriteError, match=r"1 row\(s\) for .* have a NULL in the primary"):
        run_backfill(spark, AGGREGATE.format(sink=sink, **sources), None, END)
    assert spark.sql(f"SELECT * FROM {sink}.snapshots").count() == 0


def test_another_writers_commit_during_an_upsert_fails_it_and_writes_nothing(
    spark, sources, monkeypatch
):
    import sparkext.streaming.upsert as module

    sink = f"lake.upsert.out_{next(_ids)}"
    text = AGGREGATE.format(sink=sink, **sources)
    run_backfill(spark, text, None, SPLIT)
    before = sorted_rows(spark, sink)
    original = module.changes

    def racing(*args, **kwargs):  # another writer commits after the upsert read the sink
        spark.sql(f"INSERT INTO {sink} VALUES (42, 1, 1, TIMESTAMP '2020-04-15 20:40:00')")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "changes", racing)
    with pytest.raises(CommitConflictError, match=f"Another writer committed to {sink}"):
        run_backfill(spark, text, SPLIT, END)
    assert sorted_rows(spark, sink) == sorted([*before, (42, 1, 1, t("2020-04-15 20:40:00"))])
