"""Aggregates without a window over a stream → an error, unless the sink takes upserts.

``SELECT auction, COUNT(*) FROM bid GROUP BY auction`` (no window), a global aggregate
(``SELECT COUNT(*) FROM bid``) or ``SELECT DISTINCT`` over a stream change an already emitted
row with every new input row: Flink emits updates, which an append-only sink cannot hold (a
backfill split in two would write two partial rows per key). This rule runs after the window
rules (whose marks tell a window's end under another name) and before the joins and dedups;
with a primary-key sink (``context.upsert``) the whole query is evaluated over the history
instead and nothing here applies.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from datetime import timedelta

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import RewriteContext
from sparkext.streaming.job import updating_at
from sparkext.streaming.sqltools import scope_nodes, window_time, window_tvf

_WINDOW_KEYS = {"window_start", "window_end"}
_GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")


def _reads_stream(select: exp.Select, context: RewriteContext, analysis: Analysis) -> bool:
    relations: list[exp.Expr] = []
    if select.args.get("from_"):
        relations.append(select.args["from_"].this)
    relations += [j.this for j in select.args.get("joins") or []]
    for relation in relations:
        for table in relation.find_all(exp.Table):
            call = window_tvf(table)
            if call is not None:
                return True
            if not isinstance(table.this, exp.Identifier) or table.args.get("version"):
                continue  # a dimension read FOR SYSTEM_TIME AS OF
            if analysis.source(context, table).streaming:
                return True
    return False


def _windowed(select: exp.Select, group: exp.Group, analysis: Analysis) -> bool:
    """Whether the grouping is per window: by window_start and window_end, by a session, or by
    a window's end under another name (``CountBids.endtime`` of a windowed derived table, as
    in Nexmark q5's cascaded window aggregation)."""
    names = {e.name.lower() for e in group.expressions if isinstance(e, exp.Column)}
    calls = {e.name.upper() for e in group.expressions if isinstance(e, exp.Anonymous)}
    if names >= _WINDOW_KEYS or calls & {*_GROUP_WINDOWS, "SESSION_WINDOW"}:
        return True
    relations: list[exp.Expr] = []
    if select.args.get("from_"):
        relations.append(select.args["from_"].this)
    relations += [j.this for j in select.args.get("joins") or []]
    for column in (e for e in group.expressions if isinstance(e, exp.Column)):
        for relation in relations:
            if column.table and relation.alias_or_name.lower() != column.table.lower():
                continue
            located = window_time(relation, column.name.lower(), analysis.window)
            if located is not None and located[1] == timedelta(0):
                return True
    return False


def updating_aggregate_rule(
    expression: exp.Expr, context: RewriteContext, analysis: Analysis
) -> Step:
    if context.upsert:
        return Step(expression, analysis)
    for select in expression.find_all(exp.Select):
        group = select.args.get("group")
        if group is not None and _windowed(select, group, analysis):
            continue
        aggregates = [
            n
            for n in scope_nodes(select)
            if isinstance(n, exp.AggFunc) and n.find_ancestor(exp.Window, exp.Select) is select
        ]
        if group is None and not aggregates and not select.args.get("distinct"):
            continue
        if not _reads_stream(select, context, analysis):
            continue
        if group is not None:
            keys = ", ".join(e.sql(dialect="spark") for e in group.expressions)
            what, node = f"GROUP BY {keys} without a window", group
        elif select.args.get("distinct"):
            what, node = "SELECT DISTINCT over a stream", select
        else:
            what, node = f"{aggregates[0].sql(dialect='spark')} over a whole stream", aggregates[0]
        raise updating_at(
            node,
            what,
            "aggregate per window (FROM TABLE(TUMBLE(…)) … GROUP BY window_start, window_end, …)",
        )
    return Step(expression, analysis)
