"""Flink built-in functions → Spark expressions with Flink's meaning (filled in by issue 14)."""

from __future__ import annotations

from sqlglot import exp

from sparkext.streaming.context import RewriteContext


def flink_functions_rule(expression: exp.Expr, context: RewriteContext) -> exp.Expr:
    return expression
