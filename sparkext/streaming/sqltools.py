"""Small SQL builders shared by the rewrite rules (sqlglot expressions, never string pasting).

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import cache
from typing import TypeVar

import sqlglot
from sqlglot import exp

from sparkext.streaming.context import WindowRelation
from sparkext.streaming.job import error_at, spark_duration

T = TypeVar("T")


@cache
def _template(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


def template(sql: str, **values: exp.Expr) -> exp.Expr:
    """Parse ``sql`` once (Spark dialect) and fill its ``:name`` placeholders with expressions."""
    return exp.replace_placeholders(_template(sql).copy(), **values)


def select_template(sql: str, **values: exp.Expr) -> exp.Select:
    """:func:`template` of a SELECT, typed as one."""
    query = template(sql, **values)
    assert isinstance(query, exp.Select), sql
    return query


def duration(delta: timedelta) -> exp.Literal:
    """A duration string literal for window(): ``'10 minutes'``."""
    return exp.Literal.string(spark_duration(delta))


def interval_literal(delta: timedelta) -> exp.Interval:
    """``INTERVAL '10' MINUTES`` in Spark's syntax."""
    number, unit = spark_duration(delta).split(" ")
    return exp.Interval(this=exp.Literal.string(number), unit=exp.var(unit.upper()))


def shift(expression: exp.Expr, delta: timedelta) -> exp.Expr:
    """``expression ± INTERVAL …`` (nothing added for a zero shift)."""
    if not delta:
        return expression
    if delta < timedelta(0):
        return exp.Sub(this=expression, expression=interval_literal(-delta))
    return exp.Add(this=expression, expression=interval_literal(delta))


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if isinstance(condition, exp.Where):
        condition = condition.this
    if condition is None:
        return []
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def scope_nodes(select: exp.Select) -> Iterator[exp.Expr]:
    """Nodes of ``select`` outside its subqueries (the names it resolves itself)."""
    return select.walk(prune=lambda node: node is not select and isinstance(node, exp.Query))


def window_tvf(table: exp.Expr) -> exp.Anonymous | None:
    """The TUMBLE/HOP/… call of ``FROM TABLE(TUMBLE(…))``, else None."""
    if isinstance(table, exp.Table) and isinstance(table.this, exp.Anonymous):
        wrapper = table.this
        if wrapper.name.upper() == "TABLE" and len(wrapper.expressions) == 1:
            inner = wrapper.expressions[0]
            if isinstance(inner, exp.Anonymous):
                return inner
    return None


_TVF_ARGS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
}


def parsed_table_argument(table: exp.Expr) -> bool:
    """Whether the parser read ``table`` as ``TABLE t`` (a window TVF's argument)."""
    return bool(table.meta.get("table_argument"))


def bind_tvf(
    call: exp.Anonymous, table_argument: Callable[[exp.Expr], bool] = parsed_table_argument
) -> dict[str, exp.Expr]:
    """Positional and named (``SIZE => …``) arguments of a window TVF, by upper-case name.

    ``table_argument`` tells a ``TABLE t`` argument (the rules pass
    :meth:`~sparkext.streaming.analysis.Analysis.is_table_argument`, which also knows the ones
    a rule built)."""
    kind = call.name.upper()
    names = _TVF_ARGS.get(kind)
    if names is None:
        raise error_at(
            call, f"{kind} is not a window table-valued function (TUMBLE, HOP, CUMULATE, SESSION)."
        )
    bound: dict[str, exp.Expr] = {}
    for index, argument in enumerate(call.expressions):
        if isinstance(argument, exp.Kwarg):
            name, value = argument.this.name.upper(), argument.expression
        elif bound and any(isinstance(a, exp.Kwarg) for a in call.expressions[:index]):
            raise error_at(argument, f"{kind}: a positional argument follows a named one.")
        elif index < len(names):
            name, value = names[index], argument
        else:
            raise error_at(argument, f"{kind} takes at most {len(names)} arguments.")
        if name not in names:
            raise error_at(argument, f"{kind} has no argument {name}; it takes {', '.join(names)}.")
        bound[name] = value
    required = [n for n in names if n != "OFFSET"]
    missing = [n for n in required if n not in bound]
    if missing:
        raise error_at(call, f"{kind} is missing {', '.join(missing)}.")
    data = bound["DATA"]
    if not (isinstance(data, exp.Table) and table_argument(data)):
        raise error_at(call, f"{kind}'s first argument must be TABLE <name>.")
    timecol = bound["TIMECOL"]
    if not (
        isinstance(timecol, exp.Anonymous)
        and timecol.name.upper() == "DESCRIPTOR"
        and len(timecol.expressions) == 1
    ):
        raise error_at(call, f"{kind}'s time column must be DESCRIPTOR(<column>).")
    return bound


def trace_column(
    query: exp.Expr, name: str, at: Callable[[exp.Expr, str], tuple[bool, T | None]]
) -> T | None:
    """Follow output column ``name`` of ``query`` down through derived tables' projections
    (``window_end AS dateTime``, ``SELECT *``, ``P.ts``) until ``at(node, column)`` says it
    stopped: ``(True, answer)``; ``(False, _)`` goes on. None when the column is computed or
    cannot be followed."""
    while isinstance(query, exp.Subquery):
        query = query.this
    stopped, answer = at(query, name)
    if stopped:
        return answer
    if not isinstance(query, exp.Select) or not query.args.get("from_"):
        return None
    target, qualifier = None, None
    for projection in query.expressions:
        if isinstance(projection, exp.Star):
            target = target or name
        elif projection.alias_or_name.lower() == name:
            inner = projection.unalias()
            if not isinstance(inner, exp.Column):
                return None
            target, qualifier = inner.name.lower(), inner.table.lower() or None
            break
    if target is None:
        return None
    relations = [query.args["from_"].this, *[j.this for j in query.args.get("joins") or []]]
    for relation in relations:
        if qualifier and relation.alias_or_name.lower() != qualifier:
            continue
        found = trace_column(relation, target, at)
        if found is not None:
            return found
    return None


def window_time(
    query: exp.Expr, name: str, windows: Callable[[exp.Expr], WindowRelation | None]
) -> tuple[exp.Select, timedelta] | None:
    """The window-keeping SELECT under ``query`` that its output column ``name`` comes from,
    with the column's distance from the window's end; None when it is not a window time.
    ``windows`` tells the SELECTs a window rule made (``Analysis.window``), through any
    aliases."""

    def at(node: exp.Expr, column: str) -> tuple[bool, tuple[exp.Select, timedelta] | None]:
        info = windows(node)
        if info is None:
            return isinstance(node, exp.Table), None
        assert isinstance(node, exp.Select)  # only SELECTs keep windows (Analysis.windows)
        distance = info.columns.get(column)
        return True, (node, distance) if distance is not None else None

    return trace_column(query, name, at)
