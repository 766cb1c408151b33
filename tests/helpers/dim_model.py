"""An oracle for ``sparkext.dim_join_changelog`` over an ``ingest_cdc`` dimension.

Pure Python, sharing no code with sparkext. The dimension's state at a time t replays, in
SOURCE POSITION order (binlog file, pos, row), every delivered change event whose source event
time (``source.ts_ms``) is <= t (a change at exactly t counts):

* per key, the event with the newest position among those counted decides: 'c', 'u' or 'r'
  gives its after-image, 'd' leaves the key absent;
* a counted truncate ('t') removes every key whose deciding event is older in position.

Unlike :func:`tests.helpers.cdc_source.state_as_of` (event-time order), an event that happened
earlier on the source clock but later in the log still beats the older one once both count:

>>> from tests.helpers.cdc_calls import binlog_event
>>> older = binlog_event("c", None, {"id": 1, "name": "old"}, pos=10)  # ts_ms 10_000
>>> newer = binlog_event("u", None, {"id": 1, "name": "new"}, pos=20)
>>> newer["source"]["ts_ms"] = 5_000  # a skewed clock: earlier, yet newer in the binlog
>>> [state_at([older, newer], t)[1].row["name"] for t in (5_000, 10_000)]
['new', 'new']
>>> state_at([older, newer], 4_999)
{}

A fact joins the state at its time; a fact without a time or a key joins nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tests.helpers.cdc_source import event_time, position

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Version:
    """The deciding event of a key: its after-image, event time (ms) and source position."""

    row: dict[str, Any]
    event_time_ms: int
    position: tuple[int, int, int]


@dataclass(frozen=True)
class Fact:
    id: int
    key: Any  # None: never matches
    time_us: int | None  # epoch microseconds; None: never matches in event mode


def key_of(event: Event, key: str = "id") -> Any:
    return (event["after"] or event["before"])[key]


def state_at(events: Iterable[Event], t_ms: float | Fraction, key: str = "id") -> dict:
    """The dimension at ``t_ms`` (epoch ms; a Fraction for sub-millisecond times, ``math.inf``
    for everything): key -> :class:`Version`."""
    counted = [e for e in events if event_time(e) <= t_ms]
    deciding: dict[Any, Event] = {}
    for event in counted:
        if event["op"] == "t":
            continue
        k = key_of(event, key)
        if k not in deciding or position(event) > position(deciding[k]):
            deciding[k] = event
    floor = max((position(e) for e in counted if e["op"] == "t"), default=None)
    return {
        k: Version(dict(e["after"]), event_time(e), position(e))
        for k, e in deciding.items()
        if e["op"] != "d" and (floor is None or position(e) > floor)
    }


def rows_at(events: Iterable[Event], t_ms: float | Fraction = math.inf, key: str = "id") -> dict:
    """key -> after-image at ``t_ms`` (default: after every event, the table's contents)."""
    return {k: v.row for k, v in state_at(events, t_ms, key).items()}


def expected_join(
    facts: Sequence[Fact], events: Sequence[Event], join: str, key: str = "id"
) -> dict[int, Version | None]:
    """Event mode: fact id -> the version it joins (None: a miss, kept by 'left' only)."""
    assert join in ("left", "inner"), join
    found: dict[int, Version | None] = {}
    for fact in facts:
        version = None
        if fact.key is not None and fact.time_us is not None:
            version = state_at(events, Fraction(fact.time_us, 1000), key).get(fact.key)
        if version is not None or join == "left":
            found[fact.id] = version
    return found


def expected_lookup(
    facts: Sequence[Fact], events: Sequence[Event], join: str, key: str = "id"
) -> dict[int, dict[str, Any] | None]:
    """Processing mode: fact id -> the row of its key after every event (None: a miss)."""
    assert join in ("left", "inner"), join
    rows = rows_at(events, math.inf, key)
    found: dict[int, dict[str, Any] | None] = {}
    for fact in facts:
        row = rows.get(fact.key) if fact.key is not None else None
        if row is not None or join == "left":
            found[fact.id] = row
    return found
