"""The Flink model (tests/helpers/flink_model.py) against rows Flink's documentation prints.

The window TVF docs (docs/dev/table/sql/queries/window-agg.md, Flink 1.19+) run TUMBLE, HOP,
CUMULATE and SESSION aggregations over one Bid table; each result below is copied from there.
The q7, interval-join and primary-key cases are worked by hand from the query text.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.helpers import flink_model as flink

MIN = timedelta(minutes=1)
ZERO_MIN = timedelta(0)


def t(hhmm: str, day: str = "2020-04-15") -> datetime:
    return datetime.fromisoformat(f"{day} {hhmm}")


BID = [  # the docs' Bid table: bidtime, price, item, supplier_id
    {"bidtime": t("08:05"), "price": 4.0, "item": "C", "supplier_id": "supplier1"},
    {"bidtime": t("08:07"), "price": 2.0, "item": "A", "supplier_id": "supplier1"},
    {"bidtime": t("08:09"), "price": 5.0, "item": "D", "supplier_id": "supplier2"},
    {"bidtime": t("08:11"), "price": 3.0, "item": "B", "supplier_id": "supplier2"},
    {"bidtime": t("08:13"), "price": 1.0, "item": "E", "supplier_id": "supplier1"},
    {"bidtime": t("08:17"), "price": 6.0, "item": "F", "supplier_id": "supplier2"},
]
WINDOW = ["window_start", "window_end"]


def totals(windowed, keys=WINDOW):
    rows = flink.aggregate(windowed, keys, total=("sum", "price"))
    return [tuple(r[k] for k in [*keys, "total"]) for r in rows]


def test_tumble_rows_carry_window_time_one_millisecond_before_the_end():
    rows = flink.tumble(BID, "bidtime", 10 * MIN)
    assert (rows[0]["window_start"], rows[0]["window_end"], rows[0]["window_time"]) == (
        t("08:00"),
        t("08:10"),
        t("08:09:59.999"),
    )
    assert totals(rows) == [(t("08:00"), t("08:10"), 11.0), (t("08:10"), t("08:20"), 10.0)]


def test_tumble_offset_and_edges():
    at_edge = [{"ts": t("08:10")}, {"ts": t("08:09:59.999")}, {"ts": t("08:02")}]
    starts = [r["window_start"] for r in flink.tumble(at_edge, "ts", 10 * MIN)]
    assert starts == [t("08:10"), t("08:00"), t("08:00")]
    # an offset shifts the grid: 08:02 starts a window, 08:01:59 is in the one before
    shifted = flink.tumble([{"ts": t("08:02")}, {"ts": t("08:01:59")}], "ts", 10 * MIN, 2 * MIN)
    assert [r["window_start"] for r in shifted] == [t("08:02"), t("07:52")]
    # before the epoch the grid still holds (Flink's negative-remainder branch)
    old = flink.tumble([{"ts": datetime(1969, 12, 31, 23, 55)}], "ts", 10 * MIN)
    assert old[0]["window_start"] == datetime(1969, 12, 31, 23, 50)


def test_hop_matches_the_docs():
    rows = flink.hop(BID, "bidtime", 5 * MIN, 10 * MIN)
    assert totals(rows) == [
        (t("08:00"), t("08:10"), 11.0),
        (t("08:05"), t("08:15"), 15.0),
        (t("08:10"), t("08:20"), 10.0),
        (t("08:15"), t("08:25"), 6.0),
    ]
    # a row on a slide boundary opens a window there and is not in the one ending there
    edge = flink.hop([{"ts": t("08:05")}], "ts", 5 * MIN, 10 * MIN)
    assert sorted((r["window_start"], r["window_end"]) for r in edge) == [
        (t("08:00"), t("08:10")),
        (t("08:05"), t("08:15")),
    ]


def test_cumulate_matches_the_docs():
    rows = flink.cumulate(BID, "bidtime", 2 * MIN, 10 * MIN)
    assert totals(rows) == [
        (t("08:00"), t("08:06"), 4.0),
        (t("08:00"), t("08:08"), 6.0),
        (t("08:00"), t("08:10"), 11.0),
        (t("08:10"), t("08:12"), 3.0),
        (t("08:10"), t("08:14"), 4.0),
        (t("08:10"), t("08:16"), 4.0),
        (t("08:10"), t("08:18"), 10.0),
        (t("08:10"), t("08:20"), 10.0),
    ]
    # a row on a step boundary is not in the step window ending there
    edge = flink.cumulate([{"ts": t("08:04")}], "ts", 2 * MIN, 10 * MIN)
    assert [r["window_end"] for r in edge] == [t("08:06"), t("08:08"), t("08:10")]


def test_session_with_partition_keys_matches_the_docs():
    # gap 2 min: 08:05 and 08:07 are exactly a gap apart and share a session (Flink's
    # TimeWindow.intersects is inclusive), which ends 2 min after its last row
    rows = flink.session(BID, "bidtime", 2 * MIN, ["supplier_id"])
    assert totals(rows, [*WINDOW, "supplier_id"]) == [
        (t("08:05"), t("08:09"), "supplier1", 6.0),
        (t("08:09"), t("08:13"), "supplier2", 8.0),
        (t("08:13"), t("08:15"), "supplier1", 1.0),
        (t("08:17"), t("08:19"), "supplier2", 6.0),
    ]


def test_session_without_partition_keys_matches_the_docs():
    rows = flink.session(BID, "bidtime", 2 * MIN)
    assert totals(rows) == [(t("08:05"), t("08:15"), 15.0), (t("08:17"), t("08:19"), 6.0)]


def test_session_a_millisecond_over_the_gap_splits():
    rows = [{"k": 1, "ts": t("08:00")}, {"k": 1, "ts": t("08:10:00.001")}]
    out = flink.aggregate(flink.session(rows, "ts", 10 * MIN, ["k"]), WINDOW, n=("count", None))
    assert [(r["window_start"], r["window_end"], r["n"]) for r in out] == [
        (t("08:00"), t("08:10"), 1),
        (t("08:10:00.001"), t("08:20:00.001"), 1),
    ]


def test_session_of_the_issue_repro():
    # bidder 7 bids at 20:00 and 20:06, gap 10 min: one session 20:00-20:16 holding both
    rows = [{"bidder": 7, "dateTime": t("20:00")}, {"bidder": 7, "dateTime": t("20:06")}]
    out = flink.aggregate(
        flink.session(rows, "dateTime", 10 * MIN, ["bidder"]),
        ["bidder", *WINDOW],
        bids=("count", None),
    )
    assert out == [{"bidder": 7, "window_start": t("20:00"), "window_end": t("20:16"), "bids": 2}]


def test_aggregate_count_sum_max_min_ignore_nulls_but_count_star_does_not():
    rows = [{"k": "a", "v": 3}, {"k": "a", "v": None}, {"k": "b", "v": 1}]
    out = flink.aggregate(
        rows, ["k"], n=("count", None), s=("sum", "v"), hi=("max", "v"), lo=("min", "v")
    )
    assert out == [
        {"k": "a", "n": 2, "s": 3, "hi": 3, "lo": 3},
        {"k": "b", "n": 1, "s": 1, "hi": 1, "lo": 1},
    ]


def test_interval_join_bounds_are_inclusive():
    orders = [{"id": 1, "ot": t("10:00")}, {"id": 2, "ot": t("10:30")}, {"id": 3, "ot": t("11:00")}]
    ships = [
        {"oid": 1, "st": t("12:00")},
        {"oid": 2, "st": t("14:30:00.001")},
        {"oid": 3, "st": t("11:00")},
    ]
    out = flink.interval_join(
        orders,
        ships,
        lambda o, s: o["id"] == s["oid"],
        "ot",
        "st",
        -4 * 60 * MIN,
        ZERO_MIN,
        lambda o, s: (o["id"], s["st"]),
    )
    # order 2 ships 4 h and 1 ms later: out; order 3 ships at its own time: in
    assert sorted(out) == [(1, t("12:00")), (3, t("11:00"))]


def bid(auction, price, at, bidder=1):
    return {"auction": auction, "bidder": bidder, "price": price, "dateTime": t(at), "extra": ""}


def test_q7_joins_the_highest_bid_back_including_the_window_end_and_ties():
    bids = [
        bid(1, 10, "10:00:01"),
        bid(2, 30, "10:00:05"),
        bid(3, 30, "10:00:09.999"),  # a tie for the max of [10:00:00, 10:00:10)
        bid(4, 30, "10:00:10"),  # next window's only bid; on the first window's end
        bid(5, 7, "10:00:25"),
    ]
    out = flink.project(flink.nexmark_q7(bids), ["auction", "price", "dateTime"])
    assert out == [
        (2, 30, t("10:00:05")),
        (3, 30, t("10:00:09.999")),
        (4, 30, t("10:00:10")),  # the max of [10:00:00, 10:00:10) and within its BETWEEN
        (4, 30, t("10:00:10")),  # ... and the max of its own window [10:00:10, 10:00:20)
        (5, 7, t("10:00:25")),
    ]


def test_unwindowed_aggregate_is_the_final_upsert_sink_contents():
    bids = [bid(1, 10, "10:00"), bid(1, 5, "10:30"), bid(2, 7, "10:10")]
    out = flink.aggregate(
        bids, ["auction"], bids=("count", None), volume=("sum", "price"), last=("max", "dateTime")
    )
    assert [tuple(r.values()) for r in out] == [(1, 2, 15, t("10:30")), (2, 1, 7, t("10:10"))]


def test_keep_last_per_key():
    bids = [bid(1, 10, "10:00", bidder=7), bid(2, 5, "10:30", bidder=7), bid(3, 7, "10:10", 8)]
    out = flink.keep_last(bids, ["bidder"], "dateTime")
    assert [(r["bidder"], r["auction"]) for r in out] == [(7, 2), (8, 3)]
