"""Interval joins of two streams → a batch join with both sides bounded around the range.

``a.t BETWEEN b.t - INTERVAL x AND b.t + INTERVAL y`` (or the same with >=, <=, >, <) ties
the two event times: b.t lies in [a.t - y, a.t + x]. A joined row belongs to the range of its
probe side ``a`` (the first table of FROM), so ``a`` is read over [start, end) and ``b`` over
[start - y, end + x); a stream must wait x past the watermark before a range is complete.
Two streams joined with no such bound would keep unbounded state: that is an error.
"""

from __future__ import annotations

from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.context import Emission, RewriteContext
from sparkext.streaming.job import error_at, interval
from sparkext.streaming.sqltools import conjuncts

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def _time_offset(node: exp.Expr, times: dict[str, str]) -> tuple[str, timedelta] | None:
    """``b.t + INTERVAL 1 HOUR`` → ('b', +1h) when b.t is b's event time."""
    offset = timedelta(0)
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
        offset = interval(node.expression) * (1 if isinstance(node, exp.Add) else -1)
        node = node.this
    if isinstance(node, exp.Column) and node.table:
        alias = node.table.lower()
        if times.get(alias, "").lower() == node.name.lower():
            return alias, offset
    return None


def _bounds(condition: exp.Expr, times: dict[str, str]) -> list[tuple[str, str, str, timedelta]]:
    """(left, op, right, offset) facts 'left.t op right.t + offset'."""
    if isinstance(condition, exp.Between):
        return _bounds(
            exp.GTE(this=condition.this, expression=condition.args["low"]), times
        ) + _bounds(exp.LTE(this=condition.this, expression=condition.args["high"]), times)
    if type(condition) not in _FLIP:
        return []
    left, right = _time_offset(condition.this, times), _time_offset(condition.expression, times)
    if left is None or right is None or left[0] == right[0]:
        return []
    op = "ge" if isinstance(condition, exp.GT | exp.GTE) else "le"
    return [(left[0], op, right[0], right[1] - left[1])]


def interval_join_rule(expression: exp.Expr, context: RewriteContext) -> exp.Expr:
    for select in list(expression.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        tables = (
            [select.args["from_"].this, *[j.this for j in joins]]
            if select.args.get("from_")
            else []
        )
        streams = {}
        for table in tables:
            if isinstance(table, exp.Table) and not table.meta.get("dimension"):
                source = context.source(table)
                if source.streaming and source.event_time:
                    streams[table.alias_or_name.lower()] = (table, source)
        if len(streams) < 2:
            continue
        if len(streams) > 2:
            raise error_at(
                select, "an interval join joins two streams; join further streams in another step."
            )
        times = {alias: source.event_time for alias, (_, source) in streams.items()}
        conditions = conjuncts(select.args.get("where"))
        for join in joins:
            conditions += conjuncts(join.args.get("on"))
        probe_alias = next(iter(streams))  # FROM comes first
        other = next(a for a in streams if a != probe_alias)
        lower = upper = None  # other.t in [probe.t + lower, probe.t + upper]
        for condition in conditions:
            for left, op, _right, offset in _bounds(condition, times):
                if left == other:  # other.t op probe.t + offset
                    bound_op, shift = op, offset
                else:  # probe.t op other.t + offset  ⇔  other.t (flipped) probe.t - offset
                    bound_op, shift = ("le" if op == "ge" else "ge"), -offset
                if bound_op == "ge":
                    lower = shift if lower is None else max(lower, shift)
                else:
                    upper = shift if upper is None else min(upper, shift)
        if lower is None or upper is None:
            raise error_at(
                select,
                f"{streams[probe_alias][1].name} and {streams[other][1].name} "
                "are joined without a time bound on both sides, which needs unbounded state; "
                "add e.g. a.t BETWEEN b.t - INTERVAL '1' HOUR AND b.t.",
            )
        for join in joins:
            side = (join.args.get("side") or "").upper()
            if side in ("RIGHT", "FULL"):
                raise error_at(
                    join,
                    f"a {side} OUTER interval join keeps rows of {streams[other][1].name} that "
                    "no probe row owns, so no range could replace them; write it as a LEFT join "
                    "from that stream instead.",
                )
        probe_table, probe_source = streams[probe_alias]
        other_table, _ = streams[other]
        other_table.meta["lookback"] = max(other_table.meta.get("lookback", timedelta(0)), -lower)
        other_table.meta["lookahead"] = max(other_table.meta.get("lookahead", timedelta(0)), upper)
        probe_table.meta["emits"] = True
        context.completion_delay = max(context.completion_delay, upper)
        context.emit(Emission("rows", probe_source.event_time, alias=probe_alias))
    return expression
