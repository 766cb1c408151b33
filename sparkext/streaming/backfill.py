"""Backfill: run a streaming job's text as bounded batch SQL over [start, end).

Planner → runner → committer: :func:`~sparkext.streaming.rewrite.plan_batch` (pure) gives one
``INSERT INTO sink REPLACE WHERE <range> SELECT …`` per query (what ``--dry-run`` prints); it runs
as one Iceberg overwrite-by-filter commit with serializable isolation, validated from the
snapshot the statement read, so a rerun of the same range leaves the sink as it was and a
concurrent commit is reported, never overwritten.

Floor: streaming.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sqlglot import exp

from sparkext import times
from sparkext.actions.history.versions import cdc_versions
from sparkext.errors import StreamingWriteError
from sparkext.iceberg import catalog as iceberg_catalog
from sparkext.iceberg.catalog import set_identifier_columns
from sparkext.iceberg.commit import RUN_ID, new_run_id, snapshot_facts, snapshot_with_run_id
from sparkext.iceberg.errors import spark_write
from sparkext.identifiers import col
from sparkext.spark import cancellation
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.job import parse_job
from sparkext.streaming.rewrite import BatchPlan, BatchQuery, parse_time, plan_batch, table_ddl
from sparkext.streaming.udf import register_job_functions
from sparkext.streaming.upsert import UNTIL, upsert, upserted_until

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.streaming.context import ViewSpec
    from sparkext.streaming.dim_state import DimensionStates
    from sparkext.streaming.job import Job


@dataclass(repr=False)
class BackfillPlan(BatchPlan):
    """What a backfill ran (or, with ``dry_run``, would run): the job's batch plan —
    ``queries`` (one :class:`~sparkext.streaming.rewrite.BatchQuery` per query, with its
    ``sink``, batch ``statement`` and ``notes``), ``ddl`` and ``script()`` — and its range.
    Its ``repr`` is a one-line summary (the statements are sqlglot trees: print ``script()``).
    """

    start: datetime | None = None  # the range [start, end): session-zone wall clocks
    end: datetime | None = None  # (start None: from the sources' beginning)

    def __repr__(self) -> str:
        sinks = [q.sink for q in self.queries if q.sink is not None]
        start = "beginning" if self.start is None else str(self.start)
        return (
            f"BackfillPlan(queries={len(self.queries)}, sinks={sinks!r}, "
            f"range=[{start}, {self.end}))"
        )


@dataclass(frozen=True)
class BackfillResult:
    """What one query of a backfill did.

    ``sink``: the table it wrote (None for a bare SELECT, whose rows are ``frame``);
    ``snapshot_id``: the Iceberg snapshot its commit made (None: it committed nothing — the
    range already held these rows, or nothing changed); ``rows_added`` / ``rows_deleted``: that
    snapshot's counts (for an upsert sink, keys written with a new row / keys deleted);
    ``seconds``: wall time of the query and its commit.

    >>> BackfillResult("lake.db.x", 42, 120, 0, 1.5)
    BackfillResult(sink='lake.db.x', snapshot_id=42, rows_added=120, rows_deleted=0, seconds=1.5)
    """

    sink: str | None
    snapshot_id: int | None
    rows_added: int | None
    rows_deleted: int | None
    seconds: float
    frame: DataFrame | None = field(default=None, repr=False)  # the rows of a bare SELECT


def commit_of_run(
    spark: SparkSession, sink: str, run_id: str
) -> tuple[int | None, int | None, int | None]:
    """The snapshot this run's write made (found by its run id; None when it committed
    nothing), with its added and deleted row counts."""

    snapshot_id = snapshot_with_run_id(spark, sink, run_id)
    if snapshot_id is None:
        return None, 0, 0
    summary = snapshot_facts(spark, sink, snapshot_id).summary
    return (
        snapshot_id,
        int(summary.get("added-records", 0)),
        int(summary.get("deleted-records", 0)),
    )


def create_missing_tables(spark: SparkSession, job: Job) -> bool:
    """``CREATE TABLE IF NOT EXISTS`` for the job's declared tables that do not exist yet;
    True when it created one."""

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
def registered_views(
    spark: SparkSession, views: Sequence[ViewSpec], states: DimensionStates | None = None
) -> Iterator[None]:
    """The temp views a batch statement reads (versions of ingest_cdc dimensions, a stream's
    lookup dimensions), dropped when the block ends, failed or not. Spark resolves them when it
    analyses the statement, so a DataFrame made inside the block still reads them after it.

    ``states``: a stream's :class:`~sparkext.streaming.dim_state.DimensionStates`, which serves
    the views from the dimension state it keeps; without it each view is read from the table."""

    try:
        for view in views:
            if states is not None:
                frame = states.frame(view)
            elif view.kind == "lookup":
                frame = spark.table(view.table)
            else:
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

    insert = query.statement
    assert isinstance(insert, exp.Insert) and query.sink is not None  # a sink's query is an INSERT
    # through the module: a test stands in for it there to make another writer win the race
    read_snapshot, _ = iceberg_catalog.current_snapshot_summary(spark, query.sink)
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

    assert query.sink is not None and query.end is not None  # an upsert has a sink and a range
    assert isinstance(query.statement, exp.Insert)  # a sink's query is an INSERT
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
        assert query.previous is not None  # else against_sink
        assert isinstance(query.previous.statement, exp.Insert)  # the same INSERT before start
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
) -> tuple[BackfillPlan, list[BackfillResult]]:
    """Run a streaming job's text as bounded batch SQL over [start, end) (``sparkext-sql
    backfill``): one validated Iceberg commit per query; a rerun leaves the sinks as they were.

    The whole job is planned (and so checked) before any table is created or function
    registered; then the job's tables that do not exist yet are created, its functions
    registered, and its queries run in order.

    Args:
        spark: the session (``sparkext.session()``); the job's tables are resolved in it.
        text: the job's SQL (Flink-style streaming SQL: the text, not a file name).
        start: the range's start (inclusive); None: from the sources' beginning.
        end: the range's end (exclusive). A time is a ``datetime`` (naive: a wall clock in the
            session time zone; aware: converted) or text ``'YYYY-MM-DD[ HH:MM:SS]'``.
        dry_run: plan only: nothing is created, registered or written; ``plan.script()`` is
            the batch SQL that would run.
        lookup_as_of: which state of a dimension a processing-time lookup join
            (``FOR SYSTEM_TIME AS OF proctime``) reads: ``'end'`` (as of the range's end, so a
            rerun gives the same rows), ``'latest'``, or a time ``'YYYY-MM-DD HH:MM:SS'``.
        progress: called with a line as each query starts and as it commits (its sink, rows
            added and deleted, snapshot id); ``print`` shows them.

    Returns:
        ``(plan, results)``: the :class:`BackfillPlan` (``plan.script()`` is the SQL it ran)
        and one :class:`BackfillResult` per query in the job's order (none with ``dry_run``).

    Raises:
        StreamingSqlError: the job, a time or the range is invalid, or a construct has no
            batch form (a ``ValueError``; the message names the line and column).
        UdfError: a ``CREATE FUNCTION`` target cannot be imported or is not a ``@udf``.
        StreamingWriteError: an upsert sink cannot take the rows (a NULL key, partitions off
            its key, or a later backfill or the stream already brought it further).
        CommitConflictError: another writer committed to a sink while its query ran; that
            query wrote nothing (the commits of the queries before it stand).
        CommitStateUnknownError: the catalog could not say whether a commit landed.
        SparkError: Spark failed running a query (one sentence; the cause is chained).

    UDFs: a module the job names (``CREATE FUNCTION f AS 'mypkg.udfs.f'``) must be importable
    on the driver, which registers the function, and on the executors, whose Python workers
    import it again to run it: install it in the executors' Python, or ship it with
    ``spark.submit.pyFiles`` / ``spark-submit --py-files`` (a ``.py``, ``.zip`` or ``.egg``)
    or ``spark.sparkContext.addPyFile``. See :mod:`sparkext.streaming.udf`.

    Example::

        plan, results = run_backfill(
            spark, Path("job.sql").read_text(), "2026-11-20", "2026-11-21", progress=print
        )
        plan  # BackfillPlan(queries=1, sinks=['lake.db.x'], range=[…))
        results[0].rows_added
    """
    job = parse_job(text)

    def planned() -> BackfillPlan:
        catalog = SparkCatalog(spark, job.names)
        plan = plan_batch(job, start, end, catalog, lookup_as_of)
        zone = catalog.time_zone
        begin, finish = parse_time(start, "start", zone), parse_time(end, "end", zone)
        return BackfillPlan(plan.job, plan.ddl, plan.queries, begin, finish)

    plan = planned()
    if dry_run:
        return plan, []
    register_job_functions(spark, job)
    if create_missing_tables(spark, job):  # partitioning and snapshots are known now
        plan = planned()
    results = []
    for index, query in enumerate(plan.queries, 1):
        step = f"backfill {index}/{len(plan.queries)}: {query.sink or 'query'}"
        progress(step)
        cancellation.raise_if_cancelled()  # Ctrl-C: the queries before this one stand
        began = time.perf_counter()
        if query.sink is None:
            with registered_views(spark, query.views):
                frame = spark.sql(query.sql(pretty=False))
            results.append(
                BackfillResult(None, None, None, None, time.perf_counter() - began, frame)
            )
            continue

        run_id = new_run_id()
        snapshot_id: int | None
        added: int | None
        deleted: int | None
        if query.updating:
            snapshot_id, added, deleted = _upsert(spark, query, run_id)
        else:
            with registered_views(spark, query.views):
                _write(spark, query, run_id)
            snapshot_id, added, deleted = commit_of_run(spark, query.sink, run_id)
            if snapshot_id is not None:  # Spark's own commit: told to a cancel like ours
                cancellation.record_commit(query.sink, snapshot_id, f"backfill {index}")
        results.append(
            BackfillResult(query.sink, snapshot_id, added, deleted, time.perf_counter() - began)
        )
        kind = "upsert" if query.updating else "overwrite"
        progress(f"{step}: {commit_counts(snapshot_id, added, deleted, kind)}")
    return plan, results


def commit_counts(
    snapshot_id: int | None, added: int | None, deleted: int | None, kind: str = "overwrite"
) -> str:
    """What one commit did, for a progress line: counts from its snapshot's summary or the
    upsert's own tally (nothing is counted again). ``kind``: 'overwrite' (a backfill's
    REPLACE WHERE), 'append' (a stream's emission) or 'upsert'.

    >>> commit_counts(7, 120, 3, "overwrite")
    '120 rows added, 3 deleted (snapshot 7)'
    >>> commit_counts(7, 1, 0, "append")
    '1 row appended (snapshot 7)'
    >>> commit_counts(8, 5, 1, "upsert")
    '5 rows upserted, 1 key deleted (snapshot 8)'
    >>> commit_counts(None, 0, 0, "upsert")
    'no commit: nothing changed'
    """
    if snapshot_id is None:
        return "no commit: nothing changed"
    rows = f"{added} row" + ("" if added == 1 else "s")
    if kind == "append":
        return f"{rows} appended (snapshot {snapshot_id})"
    if kind == "upsert":
        keys = "key" if deleted == 1 else "keys"
        return f"{rows} upserted, {deleted} {keys} deleted (snapshot {snapshot_id})"
    return f"{rows} added, {deleted} deleted (snapshot {snapshot_id})"
