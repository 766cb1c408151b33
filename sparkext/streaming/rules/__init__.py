"""The stream→batch rules, applied in this order (each one module, one fixture file)."""

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

RULES = (
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

__all__ = ["RULES"]
