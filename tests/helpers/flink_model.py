"""A small, independent model of Flink SQL's streaming semantics over lists of dict rows.

It shares no code with sparkext: an oracle for the acceptance tests, written from Flink's
documentation and runtime (``TimeWindow.getWindowStartWithOffset``, ``TimeWindow.intersects``,
the window TVF docs' Bid table). Times are naive datetimes (wall clocks aligned to the epoch, as
Flink aligns a ``TIMESTAMP`` column); durations are ``timedelta``.

* window TVFs: :func:`tumble`, :func:`hop`, :func:`cumulate`, :func:`session` add
  ``window_start``, ``window_end`` (exclusive) and ``window_time`` (``window_end`` − 1 ms);
* :func:`aggregate`: ``GROUP BY keys`` with ``count``/``sum``/``max``/``min`` (windowed when the
  keys include the window columns; unwindowed, it is also the final contents of a primary-key
  sink fed by the updating aggregate);
* :func:`interval_join`, :func:`nexmark_q7`, :func:`keep_last` (keep-last dedup into a
  primary-key sink).

>>> from datetime import datetime, timedelta
>>> rows = [{"ts": datetime(2020, 4, 15, 8, 5)}, {"ts": datetime(2020, 4, 15, 8, 10)}]
>>> windows = tumble(rows, "ts", timedelta(minutes=10))
>>> [(r["window_start"].minute, r["window_end"].minute) for r in windows]
[(0, 10), (10, 20)]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

Row = dict[str, Any]

EPOCH = datetime(1970, 1, 1)
ZERO = timedelta(0)
MILLISECOND = timedelta(milliseconds=1)


def window_start(ts: datetime, size: timedelta, offset: timedelta = ZERO) -> datetime:
    """Flink's ``TimeWindow.getWindowStartWithOffset``: the aligned start at or before ``ts``.

    >>> window_start(datetime(2020, 4, 15, 8, 9, 59), timedelta(minutes=10))
    datetime.datetime(2020, 4, 15, 8, 0)
    >>> window_start(datetime(2020, 4, 15, 8, 9), timedelta(minutes=10), timedelta(minutes=2))
    datetime.datetime(2020, 4, 15, 8, 2)
    """
    # Python's % is never negative for a positive divisor: both of Flink's branches in one.
    return ts - (ts - EPOCH - offset) % size


def _with_window(row: Row, start: datetime, end: datetime) -> Row:
    return {**row, "window_start": start, "window_end": end, "window_time": end - MILLISECOND}


def tumble(rows: Iterable[Row], time: str, size: timedelta, offset: timedelta = ZERO) -> list[Row]:
    """``TUMBLE(TABLE rows, DESCRIPTOR(time), size[, offset])``: one window per row."""
    out = []
    for row in rows:
        start = window_start(row[time], size, offset)
        out.append(_with_window(row, start, start + size))
    return out


def hop(
    rows: Iterable[Row], time: str, slide: timedelta, size: timedelta, offset: timedelta = ZERO
) -> list[Row]:
    """``HOP(TABLE rows, DESCRIPTOR(time), slide, size[, offset])``: every window of ``size``
    starting on the ``slide`` grid that holds the row (Flink's SlidingEventTimeWindows loop)."""
    out = []
    for row in rows:
        start = window_start(row[time], slide, offset)
        while start > row[time] - size:
            out.append(_with_window(row, start, start + size))
            start -= slide
    return out


def cumulate(
    rows: Iterable[Row], time: str, step: timedelta, size: timedelta, offset: timedelta = ZERO
) -> list[Row]:
    """``CUMULATE(TABLE rows, DESCRIPTOR(time), step, size[, offset])``: windows share the start
    of the ``size`` grid and end every ``step``; a row is in each one whose end is after it."""
    out = []
    for row in rows:
        start = window_start(row[time], size, offset)
        end = window_start(row[time], step, offset) + step
        while end <= start + size:
            out.append(_with_window(row, start, end))
            end += step
    return out


def session(
    rows: Iterable[Row], time: str, gap: timedelta, partition_by: Sequence[str] = ()
) -> list[Row]:
    """``SESSION(TABLE rows PARTITION BY keys, DESCRIPTOR(time), gap)`` (and the legacy
    ``GROUP BY SESSION(time, gap), keys``): each row opens [t, t + gap); windows of one key merge
    when they intersect, and Flink's ``TimeWindow.intersects`` is inclusive
    (``start <= other.end``), so rows exactly ``gap`` apart share a session."""
    by_key: dict[tuple, list[Row]] = {}
    for row in rows:
        by_key.setdefault(tuple(row[k] for k in partition_by), []).append(row)
    out = []
    for members in by_key.values():
        members = sorted(members, key=lambda r: r[time])
        current: list[Row] = []
        end = None
        for row in members:
            if end is not None and row[time] > end:
                out.extend(_with_window(r, current[0][time], end) for r in current)
                current = []
            current.append(row)
            end = row[time] + gap
        if current:
            out.extend(_with_window(r, current[0][time], end) for r in current)
    return out


AGGREGATES: dict[str, Callable[[list], Any]] = {
    "count": len,
    "sum": lambda values: sum(v for v in values if v is not None),
    "max": lambda values: max((v for v in values if v is not None), default=None),
    "min": lambda values: min((v for v in values if v is not None), default=None),
}


def aggregate(
    rows: Iterable[Row], keys: Sequence[str], **aggs: tuple[str, str | None]
) -> list[Row]:
    """``SELECT keys, f(col) AS name … GROUP BY keys``; ``aggs`` maps an output name to
    ``(function, column)``, ``("count", None)`` being ``COUNT(*)``. Rows sorted by the keys.

    >>> aggregate([{"k": 1, "v": 2}, {"k": 1, "v": 5}], ["k"], n=("count", None), top=("max", "v"))
    [{'k': 1, 'n': 2, 'top': 5}]
    """
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for key in sorted(groups):
        members = groups[key]
        result = dict(zip(keys, key, strict=True))
        for name, (function, column) in aggs.items():
            values = members if column is None else [r[column] for r in members]
            result[name] = AGGREGATES[function](values)
        out.append(result)
    return out


def interval_join(
    left: Iterable[Row],
    right: Iterable[Row],
    on: Callable[[Row, Row], bool],
    left_time: str,
    right_time: str,
    lower: timedelta,
    upper: timedelta,
    select: Callable[[Row, Row], Row],
) -> list[Row]:
    """Inner interval join: ``on(l, r) AND l.left_time BETWEEN r.right_time + lower AND
    r.right_time + upper`` (both bounds inclusive, as BETWEEN / >= / <= are)."""
    right = list(right)
    return [
        select(lrow, rrow)
        for lrow in left
        for rrow in right
        if on(lrow, rrow)
        and rrow[right_time] + lower <= lrow[left_time] <= rrow[right_time] + upper
    ]


def nexmark_q7(bids: Sequence[Row], size: timedelta = timedelta(seconds=10)) -> list[Row]:
    """Nexmark q7 (nexmark/nexmark ``queries/q7.sql``): the highest price of each TUMBLE window,
    joined back to every bid of that price with ``B.dateTime BETWEEN window_end - size AND
    window_end`` (inclusive at both ends: a bid exactly on ``window_end`` also matches the window
    before its own). A regular join: a bid matching two windows is emitted twice."""
    windows = aggregate(
        tumble(bids, "dateTime", size), ["window_start", "window_end"], maxprice=("max", "price")
    )
    return [
        {k: b[k] for k in ("auction", "bidder", "price", "dateTime", "extra")}
        for w in windows
        for b in bids
        if b["price"] == w["maxprice"]
        and w["window_end"] - size <= b["dateTime"] <= w["window_end"]
    ]


def keep_last(rows: Iterable[Row], key: Sequence[str], order: str) -> list[Row]:
    """``ROW_NUMBER() OVER (PARTITION BY key ORDER BY order DESC) = 1`` into a primary-key sink:
    its final contents, the row with the latest ``order`` per key (ties are ambiguous in Flink,
    which keeps the later arrival: the caller avoids them)."""
    last: dict[tuple, Row] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        if k not in last or row[order] >= last[k][order]:
            last[k] = row
    return [last[k] for k in sorted(last)]


def project(rows: Iterable[Row], columns: Sequence[str]) -> list[tuple]:
    """Rows as sorted tuples of ``columns`` (duplicates kept), to compare with a sink's rows."""
    return sorted((tuple(r[c] for c in columns) for r in rows), key=row_key)


def row_key(row: tuple) -> tuple:
    """A sort key for rows holding NULLs (None first), where plain tuple order would fail."""
    return tuple((v is not None, v) for v in row)


# A handful of Flink built-in scalar functions, as Flink's docs (docs/dev/table/functions/
# systemFunctions.md) and its runtime (SqlFunctionUtils) define them. NULL in, NULL out.


def split_index(text: str | None, separator: str, index: int) -> str | None:
    """``SPLIT_INDEX(text, separator, index)``: the zero-based ``index``-th piece, empty pieces
    kept (``splitByWholeSeparatorPreserveAllTokens``); NULL when ``index`` is negative or past
    the last piece.

    >>> url = "https://h/a"
    >>> split_index(url, "/", 2), split_index(url, "/", 1), split_index(url, "/", 4)
    ('h', '', None)
    """
    if text is None or index < 0:
        return None
    pieces = text.split(separator)
    return pieces[index] if index < len(pieces) else None


def substring(text: str | None, start: int, length: int) -> str | None:
    """``SUBSTRING(text FROM start FOR length)``, ``start`` counted from 1.

    >>> substring("nexmark", 2, 3)
    'exm'
    """
    return None if text is None else text[start - 1 : start - 1 + length]


def regexp_extract(text: str | None, pattern: str, group: int) -> str | None:
    """``REGEXP_EXTRACT(text, pattern, group)``: the group of the first match, NULL if none.

    >>> regexp_extract("a?id=42&x", "id=([0-9]+)", 1), regexp_extract("a", "id=([0-9]+)", 1)
    ('42', None)
    """
    if text is None:
        return None
    match = re.search(pattern, text)
    return None if match is None else match.group(group)


def floor_to_minute(ts: datetime | None) -> datetime | None:
    """``FLOOR(ts TO MINUTE)``."""
    return None if ts is None else ts.replace(second=0, microsecond=0)
