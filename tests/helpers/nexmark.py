"""A seeded Nexmark-style workload: a few hundred bids, auctions and persons over one hour.

Column names and types follow Nexmark's Flink DDL (nexmark/nexmark ``queries/ddl_gen.sql``):
``bid(auction, bidder, price, channel, url, dateTime, extra)``, ``auction(id, itemName,
description, initialBid, reserve, dateTime, expires, seller, category, extra)``, ``person(id,
name, emailAddress, creditCard, city, state, dateTime, extra)``. Random rows are mixed with rows
placed on purpose at the edges the acceptance tests split ranges on:

* bids exactly on the 10-minute grid and one millisecond before it, several bids at one instant;
* tied highest prices inside one 10-second window and a bid on that window's end (Nexmark q7),
  also exactly on both split points;
* bidders whose bids are exactly one session gap (10 min) apart, a millisecond more than a gap
  apart, and sessions spanning :data:`BOUNDARY_SPLIT` and :data:`MID_SESSION_SPLIT`
  (the issue's repro shape: bids at +0 and +6 min, a range split at +12 min);
* bids on an auction's open time and exactly 10 minutes after it (interval-join bounds).

(bidder, dateTime) is unique, so keep-last dedup per bidder has no ambiguous ties.

>>> data = generate()
>>> len(data.bids) > 300, data == generate(), all(START <= b["dateTime"] < END for b in data.bids)
(True, True, True)
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

Row = dict[str, Any]

START = datetime(2024, 3, 1, 10, 0)
END = START + timedelta(hours=1)
BOUNDARY_SPLIT = datetime(2024, 3, 1, 10, 30)  # on the 10 s, 5, 10 and 20 min grids
MID_SESSION_SPLIT = datetime(2024, 3, 1, 10, 47, 30)  # inside sessions of bidders 902 and 903
SENTINEL_TIME = datetime(2024, 3, 2, 12, 0)  # far later: moves every watermark past the input
SEED = 14

BID_COLUMNS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")
AUCTION_COLUMNS = ("id", "itemName", "description", "initialBid", "reserve", "dateTime",
                   "expires", "seller", "category", "extra")  # fmt: skip
PERSON_COLUMNS = ("id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra")
BID_DDL = ("auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
           "dateTime TIMESTAMP, extra STRING")  # fmt: skip
AUCTION_DDL = ("id BIGINT, itemName STRING, description STRING, initialBid BIGINT, "
               "reserve BIGINT, dateTime TIMESTAMP, expires TIMESTAMP, seller BIGINT, "
               "category BIGINT, extra STRING")  # fmt: skip
PERSON_DDL = ("id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, "
              "state STRING, dateTime TIMESTAMP, extra STRING")  # fmt: skip

CHANNELS = ("Google", "Facebook", "Baidu", "Apple", "channel-4211")
WORDS = ("alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "tango")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond")
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
FIRST = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter")
LAST = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")


@dataclass(frozen=True)
class Nexmark:
    persons: list[Row]
    auctions: list[Row]
    bids: list[Row]

    def sentinels(self) -> Nexmark:
        """One far-later row per table, matching nothing else (no shared ids or keys)."""
        person = _person(999_999, SENTINEL_TIME, random.Random(0))
        auction = _auction(999_998, SENTINEL_TIME, 999_997, random.Random(0))
        bid = _bid(999_996, 999_995, 1, SENTINEL_TIME, random.Random(0))
        return Nexmark([person], [auction], [bid])


def at(text: str) -> datetime:
    """``'10:15:00'`` or ``'10:15:00.250'`` on the workload's day."""
    return datetime.fromisoformat(f"{START.date()} {text}")


def _person(pid: int, when: datetime, rng: random.Random) -> Row:
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    return {
        "id": pid,
        "name": name,
        "emailAddress": f"{name.split()[0].lower()}@{rng.choice(WORDS)}.com",
        "creditCard": " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4)),
        "city": rng.choice(CITIES),
        "state": rng.choice(STATES),
        "dateTime": when,
        "extra": "",
    }


def _auction(aid: int, when: datetime, seller: int, rng: random.Random) -> Row:
    initial = rng.randrange(1, 200)
    return {
        "id": aid,
        "itemName": f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
        "description": f"{rng.choice(WORDS)} item",
        "initialBid": initial,
        "reserve": initial + rng.randrange(0, 300),
        "dateTime": when,
        "expires": when + timedelta(minutes=rng.randrange(5, 60)),
        "seller": seller,
        "category": rng.randrange(10, 15),
        "extra": "",
    }


def _bid(auction: int, bidder: int, price: int, when: datetime, rng: random.Random) -> Row:
    channel = rng.choice(CHANNELS)
    depth = rng.randrange(0, 4)  # 0 path segments: SPLIT_INDEX beyond the end is NULL
    path = "".join(f"/{rng.choice(WORDS)}" for _ in range(depth))
    return {
        "auction": auction,
        "bidder": bidder,
        "price": price,
        "channel": channel,
        "url": f"https://www.nexmark.com{path}/item.htm?query=1&channel_id={rng.randrange(100)}",
        "dateTime": when,
        "extra": "",
    }


def _random_time(rng: random.Random, start: datetime = START, end: datetime = END) -> datetime:
    span_ms = int((end - start).total_seconds() * 1000)
    if rng.random() < 0.8:  # most on whole seconds, some with milliseconds
        return start + timedelta(seconds=rng.randrange(span_ms // 1000))
    return start + timedelta(milliseconds=rng.randrange(span_ms))


def generate(seed: int = SEED, n_bids: int = 300, n_auctions: int = 40, n_persons: int = 30):
    """The workload: random rows plus the named edge rows (see the module docstring)."""
    rng = random.Random(seed)
    persons = [_person(1000 + i, _random_time(rng), rng) for i in range(n_persons)]
    auctions = []
    for i in range(n_auctions):
        when = _random_time(rng, START, END - timedelta(minutes=10))
        seller = rng.choice(persons)["id"] if rng.random() < 0.8 else 5000 + i  # some unknown
        auctions.append(_auction(2000 + i, when, seller, rng))

    bids: list[Row] = []
    seen: set[tuple] = set()

    def add(auction: int, bidder: int, price: int, when: datetime) -> None:
        if (bidder, when) in seen:  # keep-last per bidder must not tie
            return
        seen.add((bidder, when))
        bids.append(_bid(auction, bidder, price, when, rng))

    for _ in range(n_bids):
        auction = rng.choice(auctions)
        # most bids come during an auction's first 20 minutes, some at any time
        if rng.random() < 0.6:
            when = auction["dateTime"] + timedelta(seconds=rng.randrange(20 * 60))
            when = min(when, END - timedelta(seconds=1))
        else:
            when = _random_time(rng)
        add(auction["id"], rng.randrange(1, 41), rng.randrange(1, 1000), when)

    a, b = auctions[0]["id"], auctions[1]["id"]
    # the 10-minute grid: on it, a millisecond before it, three bids at one instant
    for minute in (10, 20, 30, 40, 50):
        add(a, 41, rng.randrange(1, 1000), START + timedelta(minutes=minute))
        add(b, 41, rng.randrange(1, 1000), START + timedelta(minutes=minute, milliseconds=-1))
    for bidder in (42, 43, 44):
        add(b, bidder, 500, at("10:15:00"))
    # q7: a tie for the highest price of [10:05:00, 10:05:10) and a bid of that price on its end
    # (10:05:10, the only bid of its own window, so it is that window's highest too)
    for bidder, when in ((45, "10:05:01"), (46, "10:05:04.500"), (47, "10:05:10")):
        add(a, bidder, 2000, at(when))
    add(b, 48, 1999, at("10:05:09.999"))
    # q7 across both split points (each on the 10 s grid): the highest bid of the window ending
    # at the split has the price of a bid exactly on the split, which joins that window too
    add(a, 49, 2500, at("10:29:55"))
    add(b, 50, 2500, at("10:30:00"))
    add(a, 51, 2400, at("10:47:25"))
    add(b, 52, 2400, at("10:47:30"))
    # sessions (gap 10 min): exactly a gap apart merges, a millisecond more splits
    for when in ("10:00:00", "10:10:00", "10:20:00.001"):
        add(a, 901, 10, at(when))
    # sessions across MID_SESSION_SPLIT (10:47:30): the shape and a longer one
    for when in ("10:44:00", "10:46:00"):
        add(b, 902, 20, at(when))
    for when in ("10:41:00", "10:45:00", "10:50:00"):
        add(b, 903, 30, at(when))
    # a session across BOUNDARY_SPLIT (10:30), one that ends on it, one that starts on it
    for when in ("10:25:00", "10:29:00"):
        add(a, 904, 40, at(when))
    add(a, 905, 50, at("10:20:00"))  # session [10:20, 10:30)
    add(a, 906, 60, at("10:30:00"))  # session [10:30, 10:40)
    # interval join (bid within 10 min of its auction's open): on both bounds and just outside
    opened = auctions[2]["dateTime"]
    for bidder, delta in ((907, timedelta(0)), (908, timedelta(minutes=10)),
                          (909, timedelta(minutes=10, milliseconds=1)),
                          (910, timedelta(milliseconds=-1))):  # fmt: skip
        add(auctions[2]["id"], bidder, 70, opened + delta)
    return Nexmark(persons, auctions, bids)


def split(rows: list[Row], time: str, *cuts: datetime) -> list[list[Row]]:
    """``rows`` in consecutive event-time chunks [.., cut1), [cut1, cut2), … (commits that arrive
    in time order, so a stream drops none of them as late)."""
    bounds = [datetime.min, *cuts, datetime.max]
    return [[r for r in rows if lo <= r[time] < hi] for lo, hi in itertools.pairwise(bounds)]
