"""Backfill: run a streaming job's text as bounded batch SQL over [start, end).

Planner → runner → committer: :func:`~sparkext.streaming.rewrite.plan_batch` (pure) gives one
``INSERT INTO sink REPLACE WHERE <range> SELECT …`` per query; Spark runs each as one Iceberg
overwrite commit (validated by Iceberg against the snapshot it read), so a rerun of the same
range leaves the sink as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.job import parse_job
from sparkext.streaming.rewrite import BatchPlan, plan_batch, table_ddl
from sparkext.streaming.udf import register_job_functions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class BackfillResult:
    sink: str | None
    snapshot_id: int | None
    rows_added: int | None
    rows_deleted: int | None
    seconds: float
    frame: DataFrame | None = None  # the result of a query without sink


def _last_commit(spark: SparkSession, sink: str) -> tuple[int | None, int | None, int | None]:
    from sparkext.iceberg.catalog import current_snapshot_summary

    snapshot_id, summary = current_snapshot_summary(spark, sink)
    if snapshot_id is None:
        return None, None, None
    return (
        snapshot_id,
        int(summary.get("added-records", 0)),
        int(summary.get("deleted-records", 0)),
    )


def create_missing_tables(spark: SparkSession, job) -> None:
    """``CREATE TABLE IF NOT EXISTS`` for the job's declared tables that do not exist yet."""
    for decl, statement in zip(job.tables.values(), table_ddl(job), strict=True):
        if not spark.catalog.tableExists(decl.name):
            spark.sql(statement.sql(dialect="spark"))


def register_views(spark: SparkSession, views) -> None:
    """Fill the temp views a batch statement reads (versions of ingest_cdc dimensions)."""
    from sparkext.history.versions import cdc_versions

    for view in views:
        cdc_versions(spark, view.table, view.low, view.high).createOrReplaceTempView(view.name)


def run_backfill(
    spark: SparkSession,
    text: str,
    start: datetime | str | None,
    end: datetime | str,
    dry_run: bool = False,
    lookup_as_of: str = "end",
    progress: Callable[[str], None] = lambda message: None,
) -> tuple[BatchPlan, list[BackfillResult]]:
    """Plan (and unless ``dry_run``, run) the backfill.

    Returns the plan and one result per query.
    """
    job = parse_job(text)
    if dry_run:
        return plan_batch(job, start, end, SparkCatalog(spark), lookup_as_of), []
    register_job_functions(spark, job)
    create_missing_tables(spark, job)
    plan = plan_batch(job, start, end, SparkCatalog(spark), lookup_as_of)
    results = []
    for index, query in enumerate(plan.queries, 1):
        progress(f"backfill {index}/{len(plan.queries)}: {query.sink or 'query'}")
        began = time.perf_counter()
        register_views(spark, query.views)
        frame = spark.sql(query.sql(pretty=False))
        if query.sink is None:
            results.append(
                BackfillResult(None, None, None, None, time.perf_counter() - began, frame)
            )
            continue
        snapshot_id, added, deleted = _last_commit(spark, query.sink)
        results.append(
            BackfillResult(query.sink, snapshot_id, added, deleted, time.perf_counter() - began)
        )
    return plan, results
