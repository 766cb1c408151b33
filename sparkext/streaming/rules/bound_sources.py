"""Every streaming source → a time-bounded subquery.

``(SELECT * FROM t WHERE ts >= start - lookback AND ts < end + lookahead)``.

This is where the watermark DDL becomes an event-time filter: the event-time column comes from
the job's ``WATERMARK FOR`` (or the table's ``sparkext.event-time-column`` property, or a TVF's
DESCRIPTOR); the lookback each reference needs was left on it by the rules before (window size,
session gap, interval-join bound, dedup TTL). Computed columns of a declared table are added
here too (``PROCTIME()``, declared or called in the query, is the time the backfill runs).
Dimensions are never bounded.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import UNBOUNDED, Emission, RewriteContext
from sparkext.streaming.job import error_at
from sparkext.streaming.rules.flink_functions import translate


def _sink(expression: exp.Expr) -> exp.Table | None:
    if isinstance(expression, exp.Insert):
        target = expression.this
        table = target.this if isinstance(target, exp.Schema) else target
        return table if isinstance(table, exp.Table) else None
    return None


def bound_sources_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for call in list(expression.find_all(exp.Anonymous)):
        if call.name.upper() == "PROCTIME" and not call.expressions:
            call.replace(exp.CurrentTimestamp())  # PROCTIME() in a query: when the batch runs
    sink = _sink(expression)
    for table in list(expression.find_all(exp.Table)):
        if table is sink or not isinstance(table.this, exp.Identifier):
            continue
        source = analysis.source(context, table)
        decl = source.decl
        streaming = source.streaming and table not in analysis.dimensions
        computed = dict(decl.computed) if decl is not None else {}
        proctime = sorted(decl.proctime) if decl is not None else []
        if not streaming and not computed and not proctime:
            continue
        plain = table.copy()
        plain.set("alias", None)
        plain.set("version", None)
        query = exp.select("*").from_(plain)
        for name, value in computed.items():  # Flink's functions in a computed column too
            query = query.select(exp.alias_(translate(value.copy(), context.job), name))
        for name in proctime:
            query = query.select(exp.alias_(exp.CurrentTimestamp(), name))
        if streaming:
            if source.event_time is None:
                raise error_at(
                    table,
                    f"the stream {source.name} has no event-time column: declare it in the job "
                    "(CREATE TABLE … WATERMARK FOR ts AS ts - INTERVAL …) or set the table "
                    "property 'sparkext.event-time-column'.",
                )
            ts = exp.column(source.event_time)
            lookahead = analysis.lookahead(table)
            query = query.where(
                exp.LT(this=ts, expression=context.literal(context.end + lookahead))
            )
            lookback = analysis.lookback(table)
            if context.start is not None and lookback != UNBOUNDED:
                low = context.literal(context.start - lookback)
                query = query.where(exp.GTE(this=ts.copy(), expression=low))
            analysis = analysis.emit(Emission("rows", source.event_time, alias=table.alias_or_name))
        elif table.args.get("version") is not None:
            plain.set("version", table.args["version"].copy())
        table.replace(query.subquery(table.alias_or_name))
    return Step(expression, analysis)
