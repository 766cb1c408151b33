"""SESSION table-valued function → ``GROUP BY …, session_window(ts, gap)``.

Spark computes sessions only while aggregating, so the enclosing SELECT must group by
``window_start, window_end`` (plus the PARTITION BY keys); those two become one
``session_window(ts, gap)`` and their uses its ``.start`` / ``.end``. One level up, a filter
keeps the sessions that end in (start, end] (Spark cannot filter session_window in HAVING);
the end it filters on is ``max(ts) + gap``, an aggregate, so the optimizer cannot push the
filter below the session merge (a filter on ``session_window(…).end`` is pushed down and drops
single rows' windows before they merge into their session).
A session can start long before the range: the source looks back the gap plus
``SET 'sparkext.session.max-duration'`` (default 1 day); longer sessions are cut there.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import Emission, RewriteContext, WindowRelation
from sparkext.streaming.job import error_at, interval
from sparkext.streaming.sqltools import bind_tvf, duration, scope_nodes, shift, window_tvf


def session_window_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for table in list(expression.find_all(exp.Table)):
        call = window_tvf(table)
        if call is None or call.name.upper() != "SESSION":
            continue
        args = bind_tvf(call, analysis.is_table_argument)
        data = args["DATA"]
        assert isinstance(data, exp.Table)  # bind_tvf checked it
        column = args["TIMECOL"].expressions[0].name
        analysis.source(context, data, descriptor=column)  # checks it against the table
        # the event time of a table read without a declaration, for the rules that bound it
        analysis = replace(analysis, descriptors=analysis.descriptors.set(data, column))
        gap = interval(args["GAP"])
        select = table.parent.parent if isinstance(table.parent, exp.From) else None
        group = select.args.get("group") if isinstance(select, exp.Select) else None
        names = {
            e.name.lower()
            for e in (group.expressions if group else [])
            if isinstance(e, exp.Column)
        }
        if not {"window_start", "window_end"} <= names:
            raise error_at(
                call,
                "a SESSION window must be aggregated directly: "
                "SELECT … FROM TABLE(SESSION(…)) GROUP BY window_start, window_end, <keys>.",
            )
        assert isinstance(select, exp.Select) and group is not None  # it groups by the window
        keys = {c.name.lower() for c in analysis.partition_keys(data)}
        if not keys <= names:
            raise error_at(
                call, f"GROUP BY must include the SESSION's PARTITION BY keys {sorted(keys)}."
            )
        session = exp.Anonymous(
            this="session_window", expressions=[exp.column(column), duration(gap)]
        )
        parts = ("window_start", "window_end", "window_time")

        def part(name: str, session: exp.Expr = session) -> exp.Expr:
            """``session_window(…).start`` / ``.end``, or the end minus 1 ms for window_time."""
            if name == "window_start":
                return exp.Dot(this=session.copy(), expression=exp.to_identifier("start"))
            end = exp.Dot(this=session.copy(), expression=exp.to_identifier("end"))
            if name == "window_end":
                return end
            return shift(end, -timedelta(milliseconds=1))

        for node in list(scope_nodes(select)):
            if (
                isinstance(node, exp.Column)
                and node.name.lower() in parts
                and node.parent is not group
            ):
                replacement = part(node.name.lower())
                if node.parent is select and node.arg_key == "expressions":
                    replacement = exp.alias_(replacement, node.name)
                node.replace(replacement)
        group.set(
            "expressions",
            [
                e
                for e in group.expressions
                if not (isinstance(e, exp.Column) and e.name.lower() in parts)
            ]
            + [session.copy()],
        )
        # Spark cannot filter on session_window in HAVING: filter its end one level up.
        outputs: list[str] = []
        for index, projection in enumerate(list(select.expressions)):
            if isinstance(projection, exp.Alias):
                outputs.append(projection.alias)
            elif isinstance(projection, exp.Column):
                outputs.append(projection.name)
            else:
                outputs.append(f"_c{index}")
                projection.replace(exp.alias_(projection.copy(), outputs[-1]))
        # The end from an aggregate (a session ends one gap after its last row), never from
        # session_window(…).end: Spark pushes a filter on a grouping expression below the
        # aggregate, where it would drop single rows' windows before the sessions merge.
        last = shift(exp.Max(this=exp.column(column)), gap)
        select.select(exp.alias_(last, "_sparkext_session_end"), copy=False)
        session_end = exp.column("_sparkext_session_end")
        keep: exp.Expr = exp.LTE(this=session_end, expression=context.literal(context.end))
        if context.start is not None:
            keep = exp.and_(
                exp.GT(this=session_end.copy(), expression=context.literal(context.start)), keep
            )
        ends: dict[
            str, timedelta
        ] = {}  # output column → distance from the session's end (its start is not fixed)
        for name, projection in zip(outputs, select.expressions, strict=False):
            inner = projection.unalias()
            if isinstance(inner, exp.Dot) and inner.name == "end":
                ends[name.lower()] = timedelta(0)
            elif isinstance(inner, exp.Sub) and isinstance(inner.this, exp.Dot):
                ends[name.lower()] = -timedelta(milliseconds=1)
        wrapper = exp.select(*[exp.column(n) for n in outputs])
        lookback = gap + context.job.session_lookback
        relation = WindowRelation("SESSION", ends, "_sparkext_session_end", lookback)
        analysis = replace(analysis, windows=analysis.windows.set(wrapper, relation))
        if select is expression:
            expression = wrapper
        else:
            select.replace(wrapper)
        wrapper.from_(select.subquery("_session", copy=False), copy=False).where(keep, copy=False)
        analysis = analysis.look_back(data, max(analysis.lookback(data), lookback))
        data.set("alias", exp.TableAlias(this=exp.to_identifier(table.alias or data.name)))
        table.replace(data)
        analysis = analysis.emit(Emission("window", "window_end", "SESSION", None, None))
    return Step(expression, analysis)
