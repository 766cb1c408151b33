"""OVER aggregations over a stream → the same window functions over a looked-back read.

``SUM(price) OVER (PARTITION BY item ORDER BY ts RANGE BETWEEN INTERVAL '1' HOUR PRECEDING
AND CURRENT ROW)`` gives every row an aggregate over its key's earlier rows; Flink emits one
row per input row (append-only) and requires ordering by the time attribute. A range owns the
rows whose event time lies in [start, end), but their aggregates need rows before the start:
the source is read back by the frame (a RANGE interval; ROWS n PRECEDING or UNBOUNDED
PRECEDING — the default frame — read the whole history), and the rows before the start are
filtered out one level up, after the window functions ran (a filter in the same SELECT would
run before them).

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import UNBOUNDED, Emission, RewriteContext
from sparkext.streaming.job import error_at, interval

_RANKING = (exp.RowNumber, exp.Anonymous)  # ROW_NUMBER is the dedup rule's; RANK etc. parse
ROW_TIME = "_sparkext_row_time"


def _lookback(window: exp.Window) -> timedelta:
    spec = window.args.get("spec")
    if spec is None:  # ORDER BY without a frame: RANGE UNBOUNDED PRECEDING
        return UNBOUNDED
    start = spec.args.get("start")
    if spec.args.get("kind", "").upper() == "RANGE" and isinstance(start, exp.Interval):
        return interval(start)
    if isinstance(start, str) and start.upper() == "CURRENT ROW":
        return timedelta(0)
    return UNBOUNDED  # ROWS n PRECEDING, UNBOUNDED PRECEDING


def over_aggregate_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    done: set[int] = set()
    for window in list(expression.find_all(exp.Window)):
        if (
            not isinstance(window.this, exp.AggFunc)
            or isinstance(window.this, _RANKING)
            or window in analysis.generated
        ):
            continue
        select = window.find_ancestor(exp.Select)
        table = select.args["from_"].this if select and select.args.get("from_") else None
        if (
            select is None
            or not isinstance(table, exp.Table)
            or table in analysis.dimensions
            or select.args.get("joins")
        ):
            continue
        source = analysis.source(context, table)
        if not source.streaming or source.event_time is None:
            continue
        order = (window.args.get("order") or exp.Order()).expressions
        by = order[0].this if len(order) == 1 else None
        if (
            not isinstance(by, exp.Column)
            or by.name.lower() != source.event_time.lower()
            or order[0].args.get("desc")
        ):
            raise error_at(
                window,
                f"an OVER aggregation over the stream {source.name} must be ordered by its "
                f"event time ({source.event_time} ASC), as in Flink.",
            )
        back = _lookback(window)
        old = analysis.lookback(table)
        analysis = analysis.look_back(
            table, UNBOUNDED if UNBOUNDED in (back, old) else max(old, back)
        )
        analysis = replace(analysis, emitting=analysis.emitting.add(table))
        analysis = analysis.emit(Emission("rows", source.event_time, alias=table.alias_or_name))
        if context.start is None or id(select) in done:
            continue
        done.add(id(select))
        # the rows before the range were read for their neighbours' aggregates only
        names = []
        for index, projection in enumerate(list(select.expressions)):
            if isinstance(projection, exp.Star):
                raise error_at(
                    window, "an OVER aggregation over a stream needs its columns listed, not *."
                )
            if isinstance(projection, exp.Alias | exp.Column):
                names.append(projection.alias_or_name)
            else:
                names.append(f"_c{index}")
                projection.replace(exp.alias_(projection.copy(), names[-1]))
        time = exp.column(source.event_time, table=table.alias_or_name)
        select.select(exp.alias_(time, ROW_TIME), copy=False)
        keep = exp.GTE(this=exp.column(ROW_TIME), expression=context.literal(context.start))
        wrapper = exp.select(*[exp.column(n) for n in names])
        if select is expression:
            expression = wrapper
        else:
            select.replace(wrapper)
        wrapper.from_(select.subquery("_over", copy=False), copy=False).where(keep, copy=False)
    return Step(expression, analysis)
