"""Aggregates without a window over a stream → an error, unless the sink takes upserts.

``SELECT auction, COUNT(*) FROM bid GROUP BY auction`` (no window), a global aggregate
(``SELECT COUNT(*) FROM bid``) or ``SELECT DISTINCT`` over a stream change an already emitted
row with every new input row: Flink emits updates, which an append-only sink cannot hold (a
backfill split in two would write two partial rows per key). This rule finds them before any
other rule rewrites the query; with a primary-key sink (``context.upsert``) the whole query is
evaluated over the history instead and nothing here applies.
"""

from __future__ import annotations

from sqlglot import exp

from sparkext.streaming.context import RewriteContext
from sparkext.streaming.job import updating_at
from sparkext.streaming.sqltools import scope_nodes, window_tvf

_WINDOW_KEYS = {"window_start", "window_end"}
_GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")


def _reads_stream(select: exp.Select, context: RewriteContext) -> bool:
    relations = []
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
            if context.source(table).streaming:
                return True
    return False


def _windowed(group: exp.Group) -> bool:
    names = {e.name.lower() for e in group.expressions if isinstance(e, exp.Column)}
    calls = {e.name.upper() for e in group.expressions if isinstance(e, exp.Anonymous)}
    return names >= _WINDOW_KEYS or bool(calls & set(_GROUP_WINDOWS))


def updating_aggregate_rule(expression: exp.Expr, context: RewriteContext) -> exp.Expr:
    if context.upsert:
        return expression
    for select in expression.find_all(exp.Select):
        group = select.args.get("group")
        if group is not None and _windowed(group):
            continue
        aggregates = [
            n
            for n in scope_nodes(select)
            if isinstance(n, exp.AggFunc) and n.find_ancestor(exp.Window, exp.Select) is select
        ]
        if group is None and not aggregates and not select.args.get("distinct"):
            continue
        if not _reads_stream(select, context):
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
    return expression
