"""Deduplication over a whole stream → a LAG-based first-row test bounded by the state TTL.

``ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) … WHERE rn = 1`` on a stream emits a key's
first row; with ``SET 'table.exec.state.ttl'`` the key is forgotten after that long. In batch the
ROW_NUMBER becomes ``CASE WHEN ts < start THEN 2 WHEN lag(ts) … >= ts - ttl THEN 2 ELSE 1 END``:
a row is first when no row of its key came within the TTL before it, which depends on the row
only, so adjacent ranges agree; rows before the range are read (lookback = TTL, or the whole
history without a TTL) but never emitted. Keeping the last row (ORDER BY … DESC) and Top-N over a
whole stream produce updates: an error, unless the sink has a primary key (then the query runs
over the whole history as it is); ordering by processing time depends on arrival: an error.
Window Top-N and window dedup (PARTITION BY window_start, window_end …) need no rewrite.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import UNBOUNDED, Emission, RewriteContext
from sparkext.streaming.job import error_at, updating_at
from sparkext.streaming.sqltools import conjuncts, template

FIRST_ROW = """
CASE WHEN :ts < :lo THEN 2
     WHEN lag(:ts) OVER (PARTITION BY :keys ORDER BY :ts) >= :ts - :ttl THEN 2
     ELSE 1 END
"""
FIRST_ROW_FOREVER = """
CASE WHEN :ts < :lo THEN 2
     WHEN lag(:ts) OVER (PARTITION BY :keys ORDER BY :ts) IS NOT NULL THEN 2
     ELSE 1 END
"""
_WINDOW_COLUMNS = {"window_start", "window_end"}


def _keeps_first_only(rank_alias: str, outer: exp.Select | None) -> bool:
    if outer is None:
        return False
    for condition in conjuncts(outer.args.get("where")):
        if (
            isinstance(condition, exp.EQ | exp.LTE | exp.LT)
            and isinstance(condition.this, exp.Column)
            and condition.this.name.lower() == rank_alias.lower()
            and condition.expression.is_int
        ):
            limit = int(condition.expression.name) - (1 if isinstance(condition, exp.LT) else 0)
            return limit == 1
    return False


def _first_rows(window: exp.Window, select: exp.Select) -> bool:
    """Whether the ranking keeps each key's first row only (rn = 1 in the enclosing SELECT),
    ordered ascending."""
    order = (window.args.get("order") or exp.Order()).expressions
    if len(order) != 1 or order[0].args.get("desc"):
        return False
    alias = window.parent
    outer = select.parent_select if select.parent_select is not select else None
    return isinstance(alias, exp.Alias) and _keeps_first_only(alias.alias, outer)


def _updating(window: exp.Window) -> Exception:
    order = (window.args.get("order") or exp.Order()).expressions
    if len(order) == 1 and order[0].args.get("desc"):
        what = "keeping the last row per key (ORDER BY … DESC) over a whole stream"
    else:
        what = "Top-N over a whole stream (a ranking other than each key's first row by time)"
    return updating_at(
        window,
        what,
        "keep the first row by event time (ORDER BY <event time> ASC … rn = 1) or rank per "
        "window (PARTITION BY window_start, window_end, …)",
    )


def dedup_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for window in list(expression.find_all(exp.Window)):
        if not isinstance(window.this, exp.RowNumber):
            continue
        partition = window.args.get("partition_by") or []
        if any(isinstance(p, exp.Column) and p.name.lower() in _WINDOW_COLUMNS for p in partition):
            continue  # window Top-N / window dedup: plain batch SQL already
        select = window.find_ancestor(exp.Select)
        assert select is not None  # a ROW_NUMBER is projected by a SELECT
        source_table = select.args["from_"].this if select.args.get("from_") else None
        if context.upsert and not _first_rows(window, select):
            continue  # evaluated over the whole history for a primary-key sink: exact as it is
        if isinstance(source_table, exp.Subquery) and any(
            analysis.source(context, t).streaming
            for t in source_table.find_all(exp.Table)
            if isinstance(t.this, exp.Identifier) and t not in analysis.dimensions
        ):
            if not _first_rows(window, select):
                raise _updating(window)
            raise error_at(
                window,
                "ROW_NUMBER over a subquery of a stream cannot be bounded by event time; "
                "rank the stream's table directly (FROM t) or per window.",
            )
        if not isinstance(source_table, exp.Table) or source_table in analysis.dimensions:
            continue
        source = analysis.source(context, source_table)
        if not source.streaming:
            continue
        if source.event_time is None:
            raise error_at(
                window,
                f"the stream {source.name} has no event-time column: declare it in the job "
                "(CREATE TABLE … WATERMARK FOR ts AS ts - INTERVAL …) or set the table property "
                "'sparkext.event-time-column'.",
            )
        order = (window.args.get("order") or exp.Order()).expressions
        column = (
            order[0].this if len(order) == 1 and isinstance(order[0].this, exp.Column) else None
        )
        if column is not None and source.decl is not None and column.name in source.decl.proctime:
            raise error_at(
                window,
                "deduplication on processing time keeps whichever row arrived first, "
                "which a backfill cannot know; "
                f"order by the event-time column {source.event_time}.",
            )
        on_time = column is not None and column.name.lower() == source.event_time.lower()
        if not on_time or not _first_rows(window, select):
            raise _updating(window)  # keep-last, or a ranking by value (Top-N)
        assert column is not None  # on time
        ttl = context.job.state_ttl
        start = context.literal(context.start) if context.start is not None else None
        values = {"ts": column.copy(), "lo": start or exp.null()}
        if ttl is None:
            replacement = template(FIRST_ROW_FOREVER, **values)
            analysis = analysis.look_back(source_table, UNBOUNDED)
        else:
            replacement = template(
                FIRST_ROW,
                ttl=exp.Interval(
                    this=exp.Literal.string(str(int(ttl.total_seconds()))), unit=exp.var("SECONDS")
                ),
                **values,
            )
            analysis = analysis.look_back(source_table, max(analysis.lookback(source_table), ttl))
        lag = replacement.find(exp.Window)
        assert lag is not None  # the templates hold one
        lag.set("partition_by", [p.copy() for p in partition])
        if start is None:  # no lower bound: nothing is before the range
            replacement.set("ifs", replacement.args["ifs"][1:])
        window.replace(replacement)
        analysis = replace(
            analysis,
            generated=analysis.generated.add(lag),  # not the user's OVER aggregation
            emitting=analysis.emitting.add(source_table),
        )
        analysis = analysis.emit(
            Emission("rows", source.event_time, alias=source_table.alias_or_name)
        )
    return Step(expression, analysis)
