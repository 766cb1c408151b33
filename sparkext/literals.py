"""Many Python values as ONE Spark filter: ``col IN (v1, v2, …)`` built with sqlglot.

``F.col(c).isin(values)`` makes a py4j round trip per value (10,000 keys cost 6-7 s on the
driver); the expression built here crosses py4j once as SQL text (0.3-0.6 s). Unlike a
semi-join, a literal IN list is pushed down to Iceberg, which skips files by their column
bounds, but only for lists of up to ``IN_LIST_PRUNES_MAX`` values: above that Iceberg keeps
every file, and a broadcast semi-join against a DataFrame of the values is as fast or faster.

:func:`sql_string` writes a string as a literal a user can copy, for error messages that quote
what was written (``where => "day = DATE '2026-11-21'"``, quotes not nested).

Floor: util.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql import Column

IN_LIST_PRUNES_MAX = 200  # Iceberg's IN_PREDICATE_LIMIT: longer IN lists skip no file


def literal(value: Any) -> exp.Expr | None:
    """The sqlglot literal of ``value``, or ``None`` for a type without a zone-free literal.

    Timestamps are left out on purpose: PySpark hands them back as naive local times, and a
    literal would be read in the session time zone.

    >>> literal("it's").sql("spark"), literal(Decimal("1.50")).sql("spark")
    ("'it\\\\'s'", '1.50')
    >>> literal(float("nan")).sql("spark"), literal(dt.datetime(2026, 1, 1)) is None
    ("CAST('NaN' AS DOUBLE)", True)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return exp.cast(exp.Literal.string(str(value).replace("nan", "NaN")), "double")
    if isinstance(value, (bool, int, float, Decimal, str, bytes)) or (
        isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    ):
        return exp.convert(value)
    return None


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal a user can copy: in single quotes, or in double
    quotes when it holds single quotes (Spark reads both), else with ``\\'`` escapes.

    A backslash is Spark's escape character, so it is doubled (``'\\'`` alone would leave the
    literal open).

    >>> print(sql_string("a"), sql_string("it's"), sql_string('it\\'s "x"'), sql_string("a\\\\b"))
    'a' "it's" 'it\\'s "x"' 'a\\\\b'
    """
    if "\\" not in text:
        if "'" not in text:
            return f"'{text}'"
        if '"' not in text:
            return f'"{text}"'
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def in_list_sql(column: str, values: Iterable[Any]) -> str | None:
    """Spark SQL for ``column`` (a top-level name, quoted here) being one of ``values``.

    ``None`` among the values matches NULL (null-safe, as Iceberg equality deletes are). Returns
    ``None`` when a value has no literal (see :func:`literal`), and the caller filters another way.

    >>> in_list_sql("a.b", [1, None, 2])
    '`a.b` IN (1, 2) OR `a.b` IS NULL'
    """
    target = exp.column(exp.to_identifier(column, quoted=True))
    items: list[exp.Expr] = []
    has_null = False
    for value in dict.fromkeys(values):  # distinct, first-seen order
        if value is None:
            has_null = True
            continue
        item = literal(value)
        if item is None:
            return None
        items.append(item)
    checks: list[exp.Expression] = []
    if items:
        checks.append(target.copy().isin(*items))
    if has_null:
        checks.append(exp.Is(this=target.copy(), expression=exp.Null()))
    condition = exp.or_(*checks) if checks else exp.false()
    return condition.sql("spark")


def in_list(column: str, values: Iterable[Any]) -> Column | None:
    """:func:`in_list_sql` as a Column (one py4j call), or ``None`` when it has no SQL."""
    from pyspark.sql import functions as F

    text = in_list_sql(column, values)
    return None if text is None else F.expr(text)
