"""TUMBLE / HOP / CUMULATE table-valued functions → a subquery with Spark's window().

The subquery keeps every column of the source and adds ``window_start``, ``window_end`` and
``window_time`` (``window_end`` − 1 ms, as in Flink). HOP gives a row one line per window
(Spark's sliding ``window()``); CUMULATE expands the row over the ends step, 2·step, … of its
size-aligned window (``explode(sequence(…))``). Only windows whose end lies in (start, end] are
kept, so every window is emitted by exactly one of two adjacent ranges; the source needs a
lookback of one window size so the oldest kept window is complete.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import Emission, RewriteContext, WindowRelation
from sparkext.streaming.job import error_at, interval, parse_duration
from sparkext.streaming.sqltools import (
    bind_tvf,
    duration,
    interval_literal,
    select_template,
    window_tvf,
)

SLIDING = """
SELECT *, window(:ts, :size, :slide).start AS window_start,
       window(:ts, :size, :slide).end AS window_end
FROM :data
"""
CUMULATIVE_START = "SELECT *, window(:ts, :size).start AS window_start FROM :data"
CUMULATIVE_ENDS = """
SELECT *, explode(sequence(
    timestamp_micros(unix_micros(window_start)
        + :step_us * (div(unix_micros(:ts) - unix_micros(window_start), :step_us) + 1)),
    window_start + :size_interval, :step_interval)) AS window_end
FROM :sub
"""
KEEP = """
SELECT *, window_end - INTERVAL '1' MILLISECOND AS window_time FROM :sub
WHERE window_end <= :hi
"""


def _micros(delta: timedelta) -> exp.Expr:
    return exp.Literal.number(round(delta.total_seconds() * 1_000_000))


def _offset(query: exp.Expr, offset: timedelta) -> None:
    """Add Spark's startTime argument (Flink's window offset) to every window() call; Spark
    wants it below the slide, which the same windows allow (offset modulo the slide)."""
    if offset:
        for call in query.find_all(exp.Anonymous):
            if call.name.lower() == "window":
                size = call.expressions[1]
                slide = call.expressions[2] if len(call.expressions) > 2 else size
                step = parse_duration(slide.name)
                shifted = duration(offset % step)
                call.set("expressions", [call.expressions[0], size, slide.copy(), shifted])


def window_tvf_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for table in list(expression.find_all(exp.Table)):
        call = window_tvf(table)
        if call is None or call.name.upper() == "SESSION":
            continue
        kind = call.name.upper()
        args = bind_tvf(call, analysis.is_table_argument)
        data = args["DATA"]
        assert isinstance(data, exp.Table)  # bind_tvf checked it
        column = args["TIMECOL"].expressions[0].name
        analysis.source(context, data, descriptor=column)  # checks it against the table
        size = interval(args["SIZE"])
        offset = interval(args["OFFSET"]) if "OFFSET" in args else timedelta(0)
        if size <= timedelta(0):
            raise error_at(call, f"{kind}'s size must be a positive interval.")
        ts = exp.column(column)
        if kind == "CUMULATE":
            step = interval(args["STEP"])
            if not step or size % step:
                raise error_at(call, "CUMULATE's size must be a whole multiple of its step.")
            start = select_template(CUMULATIVE_START, ts=ts, size=duration(size), data=data)
            _offset(start, offset)
            inner = select_template(
                CUMULATIVE_ENDS,
                ts=ts.copy(),
                step_us=_micros(step),
                size_interval=interval_literal(size),
                step_interval=interval_literal(step),
                sub=start.subquery("_c"),
            )
            slide = step
        else:
            slide = interval(args["SLIDE"]) if kind == "HOP" else size
            if slide <= timedelta(0) or (kind == "HOP" and size % slide):
                raise error_at(call, "HOP's size must be a whole multiple of its slide.")
            inner = select_template(
                SLIDING,
                ts=ts,
                size=duration(size),
                slide=duration(slide),
                data=data,
            )
            if kind == "TUMBLE" and not offset:
                for call_ in inner.find_all(exp.Anonymous):
                    call_.set("expressions", call_.expressions[:2])
            _offset(inner, offset)
        keep = select_template(KEEP, sub=inner.subquery("_s"), hi=context.literal(context.end))
        if context.start is not None:
            keep = keep.where(
                exp.GT(this=exp.column("window_end"), expression=context.literal(context.start))
            )
        columns = {"window_end": timedelta(0), "window_time": -timedelta(milliseconds=1)}
        if kind != "CUMULATE":  # a cumulating window's start is not a fixed distance away
            columns["window_start"] = -size
        alias = table.alias or data.name
        subquery = keep.subquery(alias)
        # sqlglot's builders copied the SELECT and its source: the facts are about the nodes
        # in the result (the source is its one named table)
        keep = subquery.this
        (read,) = (t for t in keep.find_all(exp.Table) if isinstance(t.this, exp.Identifier))
        analysis = replace(
            analysis,
            # the event time of a table read without a declaration, for the rules that bound it
            descriptors=analysis.descriptors.set(read, column),
            # the source is read one window further back so the oldest kept window is whole
            lookbacks=analysis.lookbacks.set(read, max(analysis.lookback(read), size)),
            windows=analysis.windows.set(keep, WindowRelation(kind, columns, "window_end", size)),
            # joins on the output's time attributes find the source through it
            window_sources=analysis.window_sources.set(subquery, read),
        )
        table.replace(subquery)
        analysis = analysis.emit(Emission("window", "window_end", kind, size, slide, offset))
    return Step(expression, analysis)
