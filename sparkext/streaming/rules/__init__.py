"""The stream→batch rules, applied in this order (each one module, one fixture file).

Floor: streaming rules (pure; no pyspark).

Every rule is ``rule(expression, context, analysis) -> Step(expression, analysis)``
(:data:`~sparkext.streaming.analysis.Rule`): :func:`run_rules` analyses the query up front and
threads each rule's analysis to the next, so what one rule finds reaches the later ones as a
value, never through ``node.meta`` or a mutable context.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from sparkext.streaming.analysis import Rule, Step, analyze
from sparkext.streaming.context import RewriteContext
from sparkext.streaming.rules.bound_sources import bound_sources_rule
from sparkext.streaming.rules.dedup import dedup_rule
from sparkext.streaming.rules.flink_functions import flink_functions_rule
from sparkext.streaming.rules.insert_overwrite import insert_overwrite_rule
from sparkext.streaming.rules.interval_join import interval_join_rule
from sparkext.streaming.rules.legacy_group_windows import legacy_group_windows
from sparkext.streaming.rules.over_aggregate import over_aggregate_rule
from sparkext.streaming.rules.session_window import session_window_rule
from sparkext.streaming.rules.temporal_join import temporal_join_rule
from sparkext.streaming.rules.updating_aggregate import updating_aggregate_rule
from sparkext.streaming.rules.window_tvf import window_tvf_rule

RULES: tuple[Rule, ...] = (
    flink_functions_rule,
    legacy_group_windows,
    window_tvf_rule,
    session_window_rule,
    updating_aggregate_rule,
    temporal_join_rule,
    dedup_rule,
    over_aggregate_rule,
    interval_join_rule,
    bound_sources_rule,
    insert_overwrite_rule,
)


def run_rules(expression: exp.Expr, context: RewriteContext, rules: Sequence[Rule] = RULES) -> Step:
    """``rules`` in order over ``expression`` (rewritten in place where sqlglot allows; pass a
    copy), each given the analysis the rules before it returned."""
    step = Step(expression, analyze(expression, context))
    for rule in rules:
        step = rule(step.expression, context, step.analysis)
    return step


__all__ = ["RULES", "run_rules"]
