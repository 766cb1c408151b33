"""The one explicit map from SQL name to routine. A new procedure is a module plus a line here.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from sparkext.declarations import Routine
from sparkext.procedures import (
    bootstrap_cdc,
    build_indexes,
    cdc_lag,
    changelog,
    create_changelog_view,
    create_index,
    dim_join_changelog,
    drop_index,
    event_time_tags,
    health_report,
    help,
    ingest_cdc,
    ingest_cdc_database,
    maintain,
    reconcile,
    rewrite_equality_deletes,
    show_indexes,
    snapshot_as_of_event_time,
    table_health,
    tag_event_time_days,
    tiered_optimize,
)

ROUTINES: dict[str, Routine] = {}
ROUTINES.update(
    (r.name, r)
    for r in (
        cdc_lag.ROUTINE,
        bootstrap_cdc.ROUTINE,
        build_indexes.ROUTINE,
        changelog.ROUTINE,
        create_changelog_view.ROUTINE,
        create_index.ROUTINE,
        dim_join_changelog.ROUTINE,
        drop_index.ROUTINE,
        event_time_tags.ROUTINE,
        health_report.ROUTINE,
        help.listing(ROUTINES),
        ingest_cdc.ROUTINE,
        ingest_cdc_database.ROUTINE,
        maintain.ROUTINE,
        reconcile.ROUTINE,
        rewrite_equality_deletes.ROUTINE,
        show_indexes.ROUTINE,
        snapshot_as_of_event_time.ROUTINE,
        table_health.ROUTINE,
        tag_event_time_days.ROUTINE,
        tiered_optimize.ROUTINE,
    )
)
