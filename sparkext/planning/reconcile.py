"""Pure planning for reconcile: key ranges from a sample, their SQL on the source, the diff of
two key lists, and positions compared. No Spark, no database: unit-tested alone.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot.expressions as exp

MISSING, EXTRA, STALE, DUPLICATE = "missing", "extra", "stale", "duplicate"
DUPLICATED = -(1 << 70)  # a lake "hash" no row has: the key is on more than one row


@dataclass(frozen=True)
class Segment:
    """Keys ``lo <= k < hi`` of the first key column (None: unbounded)."""

    lo: Any = None
    hi: Any = None

    def source_predicate(self, column_sql: str, dialect: str, numeric: bool) -> str:
        """The range in the source's SQL; text compares byte-wise (PostgreSQL ``COLLATE "C"``,
        MySQL ``BINARY``), which is Spark's order of strings.

        >>> Segment(10, 20).source_predicate('"id"', "postgres", True)
        '"id" >= 10 AND "id" < 20'
        >>> Segment(None, "m").source_predicate("`k`", "mysql", False)
        "BINARY `k` < 'm'"
        """
        left = column_sql
        if not numeric:
            left = f'{column_sql} COLLATE "C"' if dialect == "postgres" else f"BINARY {column_sql}"
        parts = []
        if self.lo is not None:
            parts.append(f"{left} >= {literal(self.lo, dialect, numeric)}")
        if self.hi is not None:
            parts.append(f"{left} < {literal(self.hi, dialect, numeric)}")
        return " AND ".join(parts) or "1 = 1"


def literal(value: Any, dialect: str, numeric: bool) -> str:
    """A literal of the source's SQL (sqlglot quotes strings).

    >>> literal("it's", "postgres", False), literal(5, "mysql", True)
    ("'it''s'", '5')
    """
    if numeric:
        return str(int(value))
    return exp.Literal.string(str(value)).sql(dialect=dialect)


def identifier(name: str, dialect: str) -> str:
    """A quoted identifier of the source's SQL.

    >>> identifier("order", "postgres"), identifier("order", "mysql")
    ('"order"', '`order`')
    """
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


def table_sql(name: str, dialect: str) -> str:
    """``schema.table`` quoted part by part.

    >>> table_sql("public.Items", "postgres")
    '"public"."Items"'
    """
    return ".".join(identifier(part, dialect) for part in name.split("."))


def boundaries(sample: Sequence[Any], segments: int) -> list[Any]:
    """Up to ``segments - 1`` distinct boundaries at the quantiles of a sorted key sample.

    >>> boundaries(list(range(100)), 4)
    [25, 50, 75]
    >>> boundaries([1, 1, 1, 2], 4)
    [2]
    """
    if segments <= 1 or not sample:
        return []
    picked: list[Any] = []
    for i in range(1, segments):
        value = sample[min(len(sample) - 1, (i * len(sample)) // segments)]
        if value != sample[0] and (not picked or value != picked[-1]):
            picked.append(value)
    return picked


def split(segment: Segment, inner: Sequence[Any]) -> list[Segment]:
    """``segment`` cut at ``inner`` boundaries (sorted, inside it).

    >>> split(Segment(None, 30), [10, 20])
    [Segment(lo=None, hi=10), Segment(lo=10, hi=20), Segment(lo=20, hi=30)]
    """
    edges = [segment.lo, *inner, segment.hi]
    return [Segment(a, b) for a, b in itertools.pairwise(edges)]


def diff(
    source: Mapping[tuple[str, ...], int], lake: Mapping[tuple[str, ...], int]
) -> list[tuple[tuple[str, ...], str]]:
    """Keys that differ and how: in the source only (``missing`` from the lake), in the lake
    only (``extra``), in both with another row hash (``stale``), or on several lake rows
    (``duplicate``: its hash is :data:`DUPLICATED`).

    >>> diff({("1",): 5, ("2",): 6, ("4",): 1}, {("2",): 7, ("3",): 1, ("4",): DUPLICATED})
    [(('1',), 'missing'), (('2',), 'stale'), (('3',), 'extra'), (('4',), 'duplicate')]
    """
    found = []
    for key in sorted(set(source) | set(lake)):
        if lake.get(key) == DUPLICATED:
            found.append((key, DUPLICATE))
        elif key not in lake:
            found.append((key, MISSING))
        elif key not in source:
            found.append((key, EXTRA))
        elif source[key] != lake[key]:
            found.append((key, STALE))
    return found


def lake_change_lsn(position: str | None) -> int | None:
    """The change LSN of a PostgreSQL position ingest_cdc recorded (``p:`` / ``pl:``).

    >>> lake_change_lsn("p:00000000000024023119:00000000000024023128")
    24023128
    >>> lake_change_lsn("m:0000000003:00000000000000000484:0000000000") is None
    True
    """
    if not position:
        return None
    family, _, rest = position.partition(":")
    if family == "p":
        return int(rest.split(":")[1])
    if family == "pl":
        return int(rest)
    return None


def lake_binlog(position: str | None) -> tuple[int, int] | None:
    """(file number, position) of a MySQL position ingest_cdc recorded (``m:``).

    >>> lake_binlog("m:0000000003:00000000000000000484:0000000000")
    (3, 484)
    """
    if not position or not position.startswith("m:"):
        return None
    parts = position.split(":")
    return int(parts[1]), int(parts[2])


def caught_up(dialect: str, lake_position: str | None, source_position: Any) -> bool:
    """Whether the lake has applied a change at or after the source's position.

    >>> caught_up("postgres", "p:00000000000000000005:00000000000000000100", 90)
    True
    >>> caught_up("mysql", "m:0000000003:00000000000000000484:0000000000", (3, 500))
    False
    """
    if dialect == "postgres":
        lsn = lake_change_lsn(lake_position)
        return lsn is not None and lsn >= int(source_position)
    binlog = lake_binlog(lake_position)
    return binlog is not None and binlog >= tuple(source_position)
