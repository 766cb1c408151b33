"""Time-bounded joins of streams → batch joins with every side read around the range.

Two streams: ``a.t BETWEEN b.t - INTERVAL x AND b.t + INTERVAL y`` (or the same with >=, <=,
>, <) ties the two event times: b.t lies in [a.t - y, a.t + x]. A joined row belongs to the
range of its probe side ``a`` (the first relation of FROM), so ``a`` is read over [start, end)
and ``b`` over [start - y, end + x); a stream must wait x past the watermark before a range is
complete.

A stream and a windowed result (Nexmark q7: the bids joined back to their window's maximum,
``B.t BETWEEN B1.window_end - INTERVAL '10' SECOND AND B1.window_end``): the window's time
columns are a fixed distance from its end (the window rules hand over a
:class:`~sparkext.streaming.context.WindowRelation` for the SELECT that keeps a range's windows,
in ``Analysis.windows``), so the same bounds relate the stream's event time to the window's end.
The probe side still owns the row: a stream first reads [start, end) and keeps the windows whose
end can meet it, a window first keeps its windows and reads the stream around them. The bounds
propagate to the window's own source, and a lookback the probe already has (a deduplication over
the join, whose rule runs before this one) is added on the other side.

Two streams (or a stream and a window) joined with no such bound would keep unbounded state
(Flink's regular join): an error that says what to add, unless the sink has a primary key (then
the whole query is evaluated over the history and this rule does nothing).

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import UNBOUNDED, Emission, RewriteContext
from sparkext.streaming.job import error_at, interval, updating_at
from sparkext.streaming.sqltools import conjuncts, trace_column, window_time

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
_MICRO = timedelta(microseconds=1)


def _at_column(column: str) -> Callable[[str], timedelta | None]:
    """A stream's time: its event-time column, at distance 0."""

    def time(name: str) -> timedelta | None:
        return timedelta(0) if name == column else None

    return time


@dataclass(frozen=True)
class _Side:
    """One relation of a join that has a time: a stream table or a windowed result."""

    alias: str
    node: exp.Expr
    name: str  # how errors name it
    time: Callable[[str], timedelta | None]  # column → its distance from the side's time
    window: exp.Select | None = None  # the SELECT keeping the windows, for a windowed side
    event_time: str | None = None  # a stream's event-time column


def _windowed(relation: exp.Subquery, analysis: Analysis) -> exp.Select | None:
    """The window-keeping SELECT inside a derived table, when there is exactly one."""
    found = [n for n in relation.walk() if isinstance(n, exp.Select) and n in analysis.windows]
    return found[0] if len(found) == 1 else None


def _sides(select: exp.Select, context: RewriteContext, analysis: Analysis) -> list[_Side]:
    sides = []
    relations = [select.args["from_"].this, *[j.this for j in select.args.get("joins") or []]]
    for relation in relations:
        alias = relation.alias_or_name.lower()
        if isinstance(relation, exp.Table) and relation not in analysis.dimensions:
            source = analysis.source(context, relation)
            if source.streaming and source.event_time:
                column = source.event_time.lower()
                sides.append(
                    _Side(
                        alias,
                        relation,
                        source.name,
                        _at_column(column),
                        event_time=source.event_time,
                    )
                )
        elif isinstance(relation, exp.Subquery) and relation not in analysis.dimensions:
            window = _windowed(relation, analysis)
            if window is not None:

                def time(
                    name: str, relation: exp.Subquery = relation, window: exp.Select = window
                ) -> timedelta | None:
                    found = window_time(relation, name, analysis.window)
                    return found[1] if found is not None and found[0] is window else None

                sources = [t for t in window.find_all(exp.Table) if analysis.lookbacks.get(t)]
                what = sources[0].name if sources else alias
                sides.append(_Side(alias, relation, f"the windows of {what}", time, window))
                continue
            derived = _derived_stream(relation, context, analysis)
            if derived is not None:
                sides.append(derived)
    return sides


def _origin(query: exp.Expr, name: str) -> tuple[exp.Table, str] | None:
    """The table and column that output column ``name`` of ``query`` is."""
    return trace_column(
        query,
        name,
        lambda node, column: (
            isinstance(node, exp.Table),
            (node, column) if isinstance(node, exp.Table) else None,
        ),
    )


def _derived_stream(
    relation: exp.Subquery, context: RewriteContext, analysis: Analysis
) -> _Side | None:
    """A derived table over one stream (a filter or projection of it): its event time, under
    whatever name the derived table gives it, bounds the join like the stream's own."""
    streams = [
        t
        for t in relation.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
        and t not in analysis.dimensions
        and not t.args.get("version")
        and analysis.source(context, t).streaming
    ]
    if len(streams) != 1:
        return None
    table = streams[0]
    source = analysis.source(context, table)
    event_time = source.event_time
    if not event_time:
        return None

    def time(name: str) -> timedelta | None:
        found = _origin(relation, name)
        if found is None or found[0] is not table:
            return None
        return timedelta(0) if found[1] == event_time.lower() else None

    inner = relation.unnest()
    exposed = source.event_time
    for projection in inner.expressions if isinstance(inner, exp.Select) else []:
        value = projection.unalias()
        if isinstance(value, exp.Column) and value.name.lower() == event_time.lower():
            exposed = projection.alias_or_name
    alias = relation.alias_or_name.lower()
    return _Side(alias, table, source.name, time, event_time=exposed)


def _time_offset(node: exp.Expr, sides: dict[str, _Side]) -> tuple[str, timedelta] | None:
    """``b.t + INTERVAL 1 HOUR`` → ('b', +1h) when b.t is (a fixed distance from) b's time."""
    offset = timedelta(0)
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
        offset = interval(node.expression) * (1 if isinstance(node, exp.Add) else -1)
        node = node.this
    if isinstance(node, exp.Column) and node.table:
        side = sides.get(node.table.lower())
        distance = side.time(node.name.lower()) if side is not None else None
        if side is not None and distance is not None:
            return side.alias, offset + distance
    return None


def _bounds(condition: exp.Expr, sides: dict[str, _Side]) -> list[tuple[str, str, str, timedelta]]:
    """(left, op, right, offset) facts 'time(left) op time(right) + offset'."""
    if isinstance(condition, exp.Between):
        return _bounds(
            exp.GTE(this=condition.this, expression=condition.args["low"]), sides
        ) + _bounds(exp.LTE(this=condition.this, expression=condition.args["high"]), sides)
    if type(condition) not in _FLIP:
        return []
    left, right = _time_offset(condition.this, sides), _time_offset(condition.expression, sides)
    if left is None or right is None or left[0] == right[0]:
        return []
    op = "ge" if isinstance(condition, exp.GT | exp.GTE) else "le"
    return [(left[0], op, right[0], right[1] - left[1])]


def _widen(
    table: exp.Expr, lookback: timedelta, lookahead: timedelta, analysis: Analysis
) -> Analysis:
    """Read ``table`` ``lookback`` further back (UNBOUNDED: its whole history) and at least
    ``lookahead`` past the range's end."""
    old = analysis.lookback(table)
    if lookback == UNBOUNDED or old == UNBOUNDED:
        analysis = analysis.look_back(table, UNBOUNDED)
    elif lookback > timedelta(0):
        analysis = analysis.look_back(table, old + lookback)
    ahead = max(analysis.lookahead(table), lookahead)
    return replace(analysis, lookaheads=analysis.lookaheads.set(table, ahead))


def _keep_windows(
    side: _Side,
    low: timedelta | None,
    high: timedelta,
    context: RewriteContext,
    analysis: Analysis,
) -> Analysis:
    """Keep the windows whose end lies in [start + low, end + high) (``low`` None: every
    window before), and read their source far enough around that."""
    assert side.window is not None  # a windowed side
    info = analysis.window(side.window)
    assert info is not None  # _windowed found it there
    ends = exp.column(info.end_column)
    keep: exp.Expr = exp.LT(this=ends, expression=context.literal(context.end + high))
    if context.start is not None and low is not None:
        keep = exp.and_(
            exp.GTE(this=ends.copy(), expression=context.literal(context.start + low)), keep
        )
    side.window.set("where", exp.Where(this=keep))
    back = UNBOUNDED if low is None else max(-low, timedelta(0))
    for table in side.window.find_all(exp.Table):
        if table in analysis.lookbacks:  # the window's source (its rule looked it back)
            analysis = _widen(table, back, max(high, timedelta(0)), analysis)
    return analysis


def interval_join_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    if context.upsert:  # every source is read up to the end: the join is exact as it is
        return Step(expression, analysis)
    for select in list(expression.find_all(exp.Select)):
        if not select.args.get("from_") or not select.args.get("joins"):
            continue
        found = _sides(select, context, analysis)
        if len(found) < 2 or all(s.window is not None for s in found):
            continue  # window joins (on window_start/window_end) are plain batch SQL
        if len(found) > 2:
            raise error_at(
                select,
                "an interval join joins two streams; join further streams in another step.",
            )
        sides = {s.alias: s for s in found}
        probe, other = found
        conditions = conjuncts(select.args.get("where"))
        for join in select.args.get("joins") or []:
            conditions += conjuncts(join.args.get("on"))
        lower = upper = None  # time(other) in [time(probe) + lower, time(probe) + upper]
        for condition in conditions:
            for left, op, _right, offset in _bounds(condition, sides):
                if left == other.alias:  # other op probe + offset
                    bound_op, shift = op, offset
                else:  # probe op other + offset  ⇔  other (flipped) probe - offset
                    bound_op, shift = ("le" if op == "ge" else "ge"), -offset
                if bound_op == "ge":
                    lower = shift if lower is None else max(lower, shift)
                else:
                    upper = shift if upper is None else min(upper, shift)
        if lower is None or upper is None:
            example = (
                "a.t BETWEEN b.t - INTERVAL '1' HOUR AND b.t"
                if probe.window is None and other.window is None
                else "B.t BETWEEN W.window_start AND W.window_end"
            )
            raise updating_at(
                select,
                f"joining {probe.name} and {other.name} without a time bound on both sides "
                "keeps every row waiting for matches forever (unbounded state) and",
                f"bound the join in time, e.g. {example} (an interval join)",
            )
        for join in select.args.get("joins") or []:
            side = (join.args.get("side") or "").upper()
            if side in ("RIGHT", "FULL"):
                raise updating_at(
                    join,
                    f"a {side} OUTER interval join keeps rows of {other.name} that no probe row "
                    "owns (no range could replace them), and",
                    "write it as a LEFT join from that stream",
                )
        if probe.window is None:  # a stream owns the rows: [start, end) of its event time
            # the probe may look back itself (a dedup over the join ran before this rule):
            # the other side must meet those earlier probe rows too
            behind = analysis.lookback(probe.node)
            if other.window is None:
                back = UNBOUNDED if behind == UNBOUNDED else behind - lower
                analysis = _widen(other.node, back, upper, analysis)
            else:
                low = None if behind == UNBOUNDED else lower - behind
                analysis = _keep_windows(other, low, upper, context, analysis)
            assert probe.event_time is not None  # a stream side has one
            analysis = replace(
                analysis,
                emitting=analysis.emitting.add(probe.node),
                completion_delay=max(analysis.completion_delay, upper),
                # the probe's rows decide the range, over what a window rule found
                emission=Emission("rows", probe.event_time, alias=probe.alias),
            )
        else:  # the windows own the rows: their ends in (start, end]
            analysis = _widen(other.node, -lower, upper + _MICRO, analysis)
            delay = max(analysis.completion_delay, upper + _MICRO)
            analysis = replace(analysis, completion_delay=delay)
    return Step(expression, analysis)
