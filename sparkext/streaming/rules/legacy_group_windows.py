"""GROUP BY TUMBLE(ts, size) / HOP(ts, slide, size) / SESSION(ts, gap) → the window TVF form.

``TUMBLE_START(…)``, ``TUMBLE_END(…)`` and ``TUMBLE_ROWTIME(…)`` (and the HOP_/SESSION_ ones)
become ``window_start``, ``window_end`` and ``window_time``; later rules rewrite the TVF.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import RewriteContext
from sparkext.streaming.job import error_at
from sparkext.streaming.sqltools import scope_nodes

GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")
AUXILIARY = {"START": "window_start", "END": "window_end", "ROWTIME": "window_time"}


def legacy_group_windows(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for select in list(expression.find_all(exp.Select)):
        group = select.args.get("group")
        calls = [
            e
            for e in (group.expressions if group else [])
            if isinstance(e, exp.Anonymous) and e.name.upper() in GROUP_WINDOWS
        ]
        if not calls:
            continue
        assert group is not None  # the calls are its keys
        if len(calls) > 1:
            raise error_at(calls[1], "GROUP BY may hold one group window function.")
        call = calls[0]
        kind = call.name.upper()
        source = select.args["from_"].this
        if (
            select.args.get("joins")
            or not isinstance(source, exp.Table)
            or analysis.is_table_argument(source)
        ):
            raise error_at(call, f"GROUP BY {kind}(…) needs a single table in FROM.")
        time_column, *sizes = call.expressions
        if not isinstance(time_column, exp.Column) or not sizes:
            raise error_at(call, f"GROUP BY {kind} needs (time column, interval …).")
        data = source.copy()
        data.set("alias", None)
        # the window rules take data for ``TABLE t`` (the parser's mark for a written one)
        analysis = replace(analysis, table_arguments=analysis.table_arguments.add(data))
        others = [e for e in group.expressions if e is not call]
        if kind == "SESSION":
            keys = tuple(e.copy() for e in others if isinstance(e, exp.Column))
            analysis = replace(analysis, partition_by=analysis.partition_by.set(data, keys))
        descriptor = exp.Anonymous(this="DESCRIPTOR", expressions=[exp.column(time_column.name)])
        # the call itself becomes the TVF, so an error about it keeps the parser's position
        tvf = call
        tvf.set("this", kind)
        tvf.set("expressions", [data, descriptor, *[s.copy() for s in sizes]])
        wrapper = exp.Table(this=exp.Anonymous(this="TABLE", expressions=[tvf]))
        if source.alias:
            wrapper.set("alias", exp.TableAlias(this=exp.to_identifier(source.alias)))
        source.replace(wrapper)
        group.set("expressions", [exp.column("window_start"), exp.column("window_end"), *others])
        for node in list(scope_nodes(select)):
            if isinstance(node, exp.Anonymous) and "_" in node.name:
                prefix, _, part = node.name.upper().rpartition("_")
                if prefix in GROUP_WINDOWS:
                    if prefix != kind or part not in AUXILIARY:
                        raise error_at(node, f"{node.name} does not match GROUP BY {kind}(…).")
                    node.replace(exp.column(AUXILIARY[part]))
    return Step(expression, analysis)
