"""Stream mode for jobs reading a changelog: ``FROM t /*+ OPTIONS('changelog'='true') */``.

The hinted table is read as its changes: each micro-batch of
:class:`~sparkext.actions.history.changelog_stream.ChangelogStream` (the changelog of the snapshots
committed since the last batch) stands in for the table, with the table's columns plus
``_change_type`` (INSERT, DELETE, UPDATE_BEFORE, UPDATE_AFTER: Flink's +I, -D, -U, +U),
``_change_ordinal``, ``_commit_snapshot_id`` and ``_commit_timestamp``, as ordinary columns (as
Paimon's ``audit_log`` system table shows a changelog). Each INSERT of the job appends its rows
for the batch to its sink in one commit whose snapshot summary carries the checkpoint, the query
and the batch id; a batch delivered again after a crash finds its mark in the sink and appends
nothing twice.

Limits, on purpose: such a job's queries are stateless over the changes (projection, filter,
functions, lookups of other tables); an aggregate, window, DISTINCT or a second stream keeps
state across batches, which this runner does not. The sink is append-only (a primary-key sink
would need the changes applied as upserts). Spark Structured Streaming is not involved: the
micro-batch loop runs on the driver (no Iceberg streaming source reads deletes).

Floor: streaming.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from sqlglot import exp

from sparkext.actions.history.changelog_stream import ChangelogStream
from sparkext.fs import Location
from sparkext.iceberg.catalog import metadata_name
from sparkext.iceberg.commit import RUN_ID, new_run_id
from sparkext.streaming.backfill import (
    commit_counts,
    commit_of_run,
    create_missing_tables,
    sink_frame,
)
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.job import (
    Job,
    StreamingSqlError,
    error_at,
    position,
    table_key,
    table_name,
)
from sparkext.streaming.rewrite import sink_key, sink_of
from sparkext.streaming.rules.flink_functions import translate
from sparkext.streaming.udf import register_job_functions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.actions.history.changelog_stream import ChangelogStream
    from sparkext.streaming.stream import StreamRun

CHANGELOG_HINT = "changelog"
CHECKPOINT_KEY = "sparkext.changelog.checkpoint"
QUERY_KEY = "sparkext.changelog.query"
BATCH_KEY = "sparkext.changelog.batch-id"
SUBDIRECTORY = "changelog"
# hint options passed on to the changelog stream (the others are the streaming dialect's)
STREAM_OPTIONS = (
    "starting",
    "start-snapshot-id",
    "branch",
    "max-snapshots-per-batch",
    "consumer-name",
    "consumer-ttl",
    "compute-updates",
    "identifier-columns",
    "net-changes",
)
DEFAULT_INTERVAL = "10 seconds"


def _hinted(table: exp.Table) -> bool:
    options: dict[str, str] = table.meta.get("options", {})  # the dialect's OPTIONS hint
    return options.get(CHANGELOG_HINT, "").lower() == "true"


def changelog_tables(job: Job) -> list[exp.Table]:
    """The table references of the job's queries hinted ``'changelog'='true'``."""
    return [t for q in job.queries for t in q.find_all(exp.Table) if _hinted(t)]


def refuse_in_batch(job: Job) -> None:
    """A backfill (a range of event times) cannot read a changelog source: say so."""
    tables = changelog_tables(job)
    if tables:
        raise error_at(
            tables[0],
            f"'changelog'='true' reads the changes of {table_name(tables[0])} as they are "
            "committed, which only stream mode does; run the job with 'sparkext-sql stream', "
            f"or read a range's changes with sparkext.changelog('{table_name(tables[0])}', "
            "start, end).",
        )


def _stateful(select: exp.Expr) -> tuple[exp.Expr, str] | None:
    """The construct of the query that keeps state across batches, and its name (an aggregate
    before its GROUP BY, so the sentence names what the user wrote first)."""
    aggregate = select.find(exp.AggFunc)
    if aggregate is not None:
        return aggregate, f"the aggregate {aggregate.sql(dialect='spark')}"
    for kind, what in ((exp.Group, "GROUP BY"), (exp.Window, "an OVER window")):
        node = select.find(kind)
        if node is not None:
            return node, what
    distinct = select.find(exp.Distinct)
    if distinct is not None:
        return distinct, "DISTINCT"
    for node in select.find_all(exp.Anonymous):
        if node.name.upper() in ("TUMBLE", "HOP", "CUMULATE", "SESSION"):
            return node, f"the window {node.name.upper()}"
    return None


def plan_changelog_job(job: Job) -> tuple[str, dict[str, str], list[exp.Insert]]:
    """The changelog source (its name as written), its stream options and the job's INSERTs,
    checked: one changelog source, stateless queries, every query an INSERT."""
    tables = changelog_tables(job)
    names = {table_key(t) for t in tables}
    if len(names) > 1:
        raise error_at(
            tables[-1],
            f"a job reads one changelog source, and this one hints {', '.join(sorted(names))}; "
            "run one job per changelog source.",
        )
    options: dict[str, str] = {}
    for table in tables:
        options.update(table.meta.get("options", {}))
    unknown = sorted(
        k for k in options if k not in (*STREAM_OPTIONS, CHANGELOG_HINT, "monitor-interval")
    )
    if unknown:
        raise error_at(
            tables[0],
            f"'{unknown[0]}' is not an option of a changelog source; valid ones: "
            f"{', '.join((CHANGELOG_HINT, 'monitor-interval', *STREAM_OPTIONS))}.",
        )
    inserts: list[exp.Insert] = []
    for query in job.queries:
        if not isinstance(query, exp.Insert):
            raise error_at(
                query, "stream mode needs INSERT INTO a sink; a bare SELECT has nowhere to go."
            )
        found = _stateful(query.expression)
        if found is not None:
            node, what = found
            raise error_at(
                node if position(node)[0] is not None else query,  # DISTINCT has no place
                f"{what} keeps state across the batches of a changelog source, which sparkext "
                "does not run; read the table without 'changelog'='true' in an updating query "
                "into a primary-key sink (it converges to the same rows), or keep the changes "
                "in a table first and aggregate that.",
            )
        inserts.append(query)
    return table_name(tables[0]), options, inserts


def _replace_source(query: exp.Insert, view: str) -> exp.Insert:
    """The INSERT with every hinted table read from ``view`` (its alias kept)."""
    copy = query.copy()
    for table in list(copy.find_all(exp.Table)):
        if _hinted(table):
            alias = table.alias or table.name
            table.replace(exp.table_(view, alias=exp.to_identifier(alias)))
    return copy


class _Query:
    """What :class:`~sparkext.streaming.stream.StreamRun` asks of a running query."""

    def __init__(self, stream: ChangelogStream, failures: list[BaseException]):
        self._stream = stream
        self._failures = failures  # StreamRun's: it reports the last one as a sentence

    @property
    def isActive(self) -> bool:
        return self._stream.is_active

    def exception(self) -> BaseException | None:
        error = self._stream.exception
        if error is not None and error not in self._failures:
            self._failures.append(error)
        return error

    def stop(self) -> None:
        self._stream.stop()


def _written_batches(spark: SparkSession, sink: str, checkpoint: str, query_id: str) -> int:
    """The largest batch id this job's query appended to ``sink`` (-1: none), from the
    summaries of the sink's retained snapshots."""
    from pyspark.sql import functions as F

    summary = F.col("summary")
    row = (
        spark.table(metadata_name(spark, sink, "snapshots"))
        .where((summary[CHECKPOINT_KEY] == F.lit(checkpoint)) & (summary[QUERY_KEY] == query_id))
        .agg(F.max(summary[BATCH_KEY].cast("bigint")).alias("batch"))
        .first()  # one row
    )
    return -1 if row is None or row.batch is None else int(row.batch)


def run_changelog_job(
    spark: SparkSession,
    job: Job,
    checkpoint: str,
    available_now: bool = False,
    interval: str | None = None,
    progress: Callable[[str], None] = lambda message: None,
    start_from: datetime | str | None = None,
) -> StreamRun:
    """Start a job whose source is hinted ``'changelog'='true'`` (see the module text); what
    :func:`~sparkext.streaming.stream.run_stream` does for such a job."""
    # here, not at the top: stream mode starts this runner, which is a stream of its own
    from sparkext.streaming.stream import StreamRun

    if start_from is not None:
        raise StreamingSqlError(
            "--from does not apply to a changelog source; say where it starts in its hint: "
            "'starting'='latest' or 'start-snapshot-id'='<snapshot id>'."
        )
    source, hint, inserts = plan_changelog_job(job)
    catalog = SparkCatalog(spark, job.names)
    for insert in inserts:
        sink = sink_of(insert)
        assert sink is not None
        if sink_key(sink, job, catalog):
            raise error_at(
                insert,
                f"{sink} has a primary key, and a changelog source's rows are appended as they "
                "are (a primary-key sink would need them applied as upserts, which sparkext "
                "does not do yet); write into a table without a primary key.",
            )
    location = Location.of(checkpoint)
    checkpoint = location.uri
    location.make_dirs()
    register_job_functions(spark, job)
    create_missing_tables(spark, job)
    view = "sparkext_changelog_" + hashlib.sha1(checkpoint.encode()).hexdigest()[:8]
    queries: list[tuple[str, str, exp.Insert]] = []  # (query id, sink, the INSERT reading the view)
    for number, insert in enumerate(inserts, 1):
        statement = translate(_replace_source(insert, view), job)
        sink = sink_of(insert)
        assert sink is not None and isinstance(statement, exp.Insert)  # as checked above
        queries.append((str(number), sink, statement))
    written = {qid: _written_batches(spark, sink, checkpoint, qid) for qid, sink, _ in queries}
    options = {k: v for k, v in hint.items() if k in STREAM_OPTIONS}
    stream = ChangelogStream(
        spark, source, location.child(SUBDIRECTORY).uri, options, progress=progress
    )

    def on_batch(frame: DataFrame, batch_id: int) -> None:
        frame.createOrReplaceTempView(view)
        try:
            for query_id, sink, statement in queries:
                if batch_id <= written[query_id]:  # delivered again: its rows are in the sink
                    progress(f"batch {batch_id}: {sink} already holds it (appended before)")
                    continue
                run_id = new_run_id()
                marks = {
                    RUN_ID: run_id,
                    CHECKPOINT_KEY: checkpoint,
                    QUERY_KEY: query_id,
                    BATCH_KEY: str(batch_id),
                }
                writer = sink_frame(spark, statement, sink).writeTo(sink)
                for key, value in marks.items():
                    writer = writer.option(f"snapshot-property.{key}", value)
                writer.append()
                written[query_id] = batch_id
                done = commit_counts(*commit_of_run(spark, sink, run_id), "append")
                progress(f"batch {batch_id}: {sink}, {done}")
        finally:
            spark.catalog.dropTempView(view)

    every = interval or hint.get("monitor-interval") or DEFAULT_INTERVAL
    stream.foreach_batch(on_batch).start(every, available_now=available_now)
    failures: list[BaseException] = []
    sinks = [sink for _, sink, _ in queries]
    return StreamRun(_Query(stream, failures), checkpoint, failures, sinks)
