"""Backfill: run a streaming job's text as bounded batch SQL over [start, end).

Planner → runner → committer: :func:`~sparkext.streaming.rewrite.plan_batch` (pure) gives one
``INSERT INTO sink REPLACE WHERE <range> SELECT …`` per query (what ``--dry-run`` prints); it runs
as one Iceberg overwrite-by-filter commit with serializable isolation, validated from the
snapshot the statement read, so a rerun of the same range leaves the sink as it was and a
concurrent commit is reported, never overwritten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlglot import exp

from sparkext.identifiers import col
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.job import parse_job
from sparkext.streaming.rewrite import BatchPlan, BatchQuery, plan_batch, table_ddl
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


def _commit_of_run(
    spark: SparkSession, sink: str, run_id: str
) -> tuple[int | None, int | None, int | None]:
    """The snapshot this run's write made (found by its run id; None when it committed
    nothing), with its added and deleted row counts."""
    from sparkext.iceberg.commit import snapshot_facts, snapshot_with_run_id

    snapshot_id = snapshot_with_run_id(spark, sink, run_id)
    if snapshot_id is None:
        return None, 0, 0
    summary = snapshot_facts(spark, sink, snapshot_id).summary
    return (
        snapshot_id,
        int(summary.get("added-records", 0)),
        int(summary.get("deleted-records", 0)),
    )


def create_missing_tables(spark: SparkSession, job) -> bool:
    """``CREATE TABLE IF NOT EXISTS`` for the job's declared tables that do not exist yet;
    True when it created one."""
    from sparkext.iceberg.catalog import set_identifier_columns

    created = False
    for decl, statement in zip(job.tables.values(), table_ddl(job), strict=True):
        name = job.spelled(decl.name)
        if not spark.catalog.tableExists(name):
            spark.sql(statement.sql(dialect="spark"))
            if decl.primary_key:
                set_identifier_columns(spark, name, decl.primary_key)
            created = True
    return created


@contextmanager
def registered_views(spark: SparkSession, views) -> Iterator[None]:
    """The temp views a batch statement reads (versions of ingest_cdc dimensions), dropped when
    the block ends, failed or not. Spark resolves them when it analyses the statement, so a
    DataFrame made inside the block still reads them after it."""
    from sparkext.history.versions import cdc_versions

    try:
        for view in views:
            frame = cdc_versions(spark, view.table, view.low, view.high)
            frame.createOrReplaceTempView(view.name)
        yield
    finally:
        for view in views:
            spark.catalog.dropTempView(view.name)


def sink_frame(spark: SparkSession, insert: exp.Insert, sink: str) -> DataFrame:
    """The rows of ``insert``'s query as the sink's columns, in its order and types: its own
    column list (``INSERT INTO t (a, b)``) or the sink's columns by position, the rest NULL."""
    from pyspark.sql import functions as F

    schema = spark.table(sink).schema
    target = insert.this
    listed = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
    listed = listed or [f.name for f in schema.fields]
    frame = spark.sql(insert.expression.sql(dialect="spark")).toDF(*listed)
    return frame.select(
        *[
            (col(f.name) if f.name in listed else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )


def _write(spark: SparkSession, query: BatchQuery, run_id: str) -> None:
    """Run one ``INSERT … REPLACE WHERE`` as Iceberg's overwrite-by-filter, validated: a commit
    another writer made to the sink after this statement read it fails the overwrite (reported
    in one sentence, nothing written) instead of being deleted unseen. The snapshot carries
    ``run_id`` so the result names this write's snapshot, not whoever committed last."""
    from pyspark.sql import functions as F

    from sparkext.iceberg.catalog import current_snapshot_summary
    from sparkext.iceberg.commit import RUN_ID
    from sparkext.iceberg.errors import spark_write

    insert = query.statement
    read_snapshot, _ = current_snapshot_summary(spark, query.sink)
    frame = sink_frame(spark, insert, query.sink)
    writer = (
        frame.writeTo(query.sink)
        .option("isolation-level", "serializable")
        .option(f"snapshot-property.{RUN_ID}", run_id)
    )
    if read_snapshot is not None:
        writer = writer.option("validate-from-snapshot-id", str(read_snapshot))
    condition = insert.args["where"]
    with spark_write(query.sink, "the backfill", "run the backfill again"):
        writer.overwrite(F.expr(condition.sql(dialect="spark")))


def _upsert(spark: SparkSession, query: BatchQuery, run_id: str) -> tuple[int | None, int, int]:
    """An updating query into a primary-key sink: the rows of every key that differs between
    the query over the history before the end and before the start, upserted in one commit."""
    from sparkext import times
    from sparkext.errors import StreamingWriteError
    from sparkext.streaming.upsert import UNTIL, upsert, upserted_until

    zone = times.session_zone(spark)
    end = times.instant(query.end, zone)
    held = upserted_until(spark, query.sink)
    if held is not None and end < held:
        at = times.wall_clock_text(held, zone)
        raise StreamingWriteError(
            f"{query.sink} already holds the query's rows as of {at} (a later backfill or the "
            f"stream); a backfill ending at {query.end} would set keys back to older values; "
            f"end it at {at} or later (--to '{at}')."
        )
    # A sink an upsert wrote (or a backfill from the beginning) is compared with its own rows:
    # keys that changed since its last point in time, or vanished, are written too. A fresh
    # sink gets the keys that changed in the range (the query before its start vs its end).
    old = None
    against_sink = held is not None or query.previous is None
    if not against_sink:
        with registered_views(spark, query.previous.views):  # resolved when analysed
            old = sink_frame(spark, query.previous.statement, query.sink)
    with registered_views(spark, query.views):
        new = sink_frame(spark, query.statement, query.sink)
    result = upsert(
        spark,
        query.sink,
        query.key,
        new,
        old,
        {UNTIL: times.instant_text(end)},
        run_id,
        "run the backfill again",
        against_sink=against_sink,
    )
    return result.snapshot_id, result.upserted, result.deleted


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

    Returns the plan and one result per query. The job is planned (and so checked) before any
    table is created or function registered.
    """
    job = parse_job(text)
    plan = plan_batch(job, start, end, SparkCatalog(spark, job.names), lookup_as_of)
    if dry_run:
        return plan, []
    register_job_functions(spark, job)
    if create_missing_tables(spark, job):  # partitioning and snapshots are known now
        plan = plan_batch(job, start, end, SparkCatalog(spark, job.names), lookup_as_of)
    results = []
    for index, query in enumerate(plan.queries, 1):
        progress(f"backfill {index}/{len(plan.queries)}: {query.sink or 'query'}")
        began = time.perf_counter()
        if query.sink is None:
            with registered_views(spark, query.views):
                frame = spark.sql(query.sql(pretty=False))
            results.append(
                BackfillResult(None, None, None, None, time.perf_counter() - began, frame)
            )
            continue
        from sparkext.iceberg.commit import new_run_id

        run_id = new_run_id()
        if query.updating:
            snapshot_id, added, deleted = _upsert(spark, query, run_id)
        else:
            with registered_views(spark, query.views):
                _write(spark, query, run_id)
            snapshot_id, added, deleted = _commit_of_run(spark, query.sink, run_id)
        results.append(
            BackfillResult(query.sink, snapshot_id, added, deleted, time.perf_counter() - began)
        )
    return plan, results
