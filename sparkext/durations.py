"""Durations, written once: the one grammar every option, setting and job clause reads.

Floor: util (no Spark, no sparkext imports above ``errors``).

A duration is a number and a unit, with or without a space: ``'10 minutes'``, ``'1.5 h'``,
``'90s'``, ``'2 weeks'``. Units are Spark's interval words and their short forms, from
microseconds to weeks; case does not matter. Callers say what they accept on top (positive,
whole milliseconds) and word their own error.
"""

from __future__ import annotations

import re
from datetime import timedelta

UNITS_SECONDS: dict[str, float] = {
    "us": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "week": 604800, "weeks": 604800,
}  # fmt: skip
_DURATION = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse(text: str) -> timedelta:
    """A duration, signed as written.

    >>> parse("10 minutes"), parse("90s")
    (datetime.timedelta(seconds=600), datetime.timedelta(seconds=90))
    >>> parse("2 weeks").days
    14
    >>> parse("ten minutes")
    Traceback (most recent call last):
    ...
    ValueError: expected a duration such as '7 days', '12 h' or '30 minutes'
    """
    match = _DURATION.fullmatch(text or "")
    if match is None or match.group(2).lower() not in UNITS_SECONDS:
        raise ValueError("expected a duration such as '7 days', '12 h' or '30 minutes'")
    return timedelta(seconds=float(match.group(1)) * UNITS_SECONDS[match.group(2).lower()])


def parse_ms(text: str) -> int:
    """A positive duration in whole milliseconds.

    >>> parse_ms("7 days"), parse_ms("90s"), parse_ms("1.5 h"), parse_ms("2 weeks")
    (604800000, 90000, 5400000, 1209600000)
    >>> parse_ms("0 s")
    Traceback (most recent call last):
    ...
    ValueError: expected a positive duration such as '7 days'
    """
    value = round(parse(text) / timedelta(milliseconds=1))
    if value <= 0:
        raise ValueError("expected a positive duration such as '7 days'")
    return value
