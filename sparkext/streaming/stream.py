"""Stream mode: the same job text, run continuously on Spark Structured Streaming.

How it executes (watermark-driven bounded micro-batches that reuse the batch rewrite):

* One Structured Streaming query reads every streaming source incrementally
  (``readStream.format("iceberg")``, append snapshots; its offsets live in ``<checkpoint>``)
  and keeps only (source, event time) of the new rows.
* Each micro-batch advances the watermark: per source, the largest event time seen minus the
  source's watermark delay (the job's ``WATERMARK FOR … AS ts - INTERVAL …``); the job's
  watermark is the smallest of them (a source that has sent nothing holds it back), as in Flink.
* An updating query into a primary-key sink does not wait for the watermark (Flink updates
  such a sink with every row): each micro-batch upserts the query's rows over every row seen.
* For every other INSERT of the job, the range (emitted-until, watermark − completion delay] is
  now final: the batch rewrite of that range runs and its rows are appended to the sink in one
  Iceberg commit whose summary records ``sparkext.stream.emitted-until`` and the checkpoint.
  A restart reads that summary, so a micro-batch replayed after a crash appends nothing twice.
  Rows that arrive behind the watermark are late and dropped, as Flink drops them.

So for the same bounded input, once the watermark has passed a range's end, the sink holds
exactly what ``backfill`` writes for that range.

Times: event times are collected as epoch microseconds and the watermark is an instant, so
neither the OS zone nor the session zone moves it; the batch rewrite gets its range as wall
clocks in the session zone (:mod:`sparkext.times`). The checkpoint is any location pyarrow
reaches (:mod:`sparkext.fs`); Spark gets it as written.

Floor: streaming.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Protocol

from sqlglot import exp

from sparkext import times
from sparkext.errors import SparkextError
from sparkext.fs import Location
from sparkext.iceberg.catalog import resolve_table, snapshot_commit_times
from sparkext.iceberg.commit import RUN_ID, new_run_id
from sparkext.iceberg.errors import spark_message
from sparkext.identifiers import col
from sparkext.spark.observe import release_proxies
from sparkext.streaming.backfill import (
    commit_counts,
    commit_of_run,
    create_missing_tables,
    registered_views,
    sink_frame,
)
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.changelog_source import changelog_tables, run_changelog_job
from sparkext.streaming.context import Catalog, RewriteContext
from sparkext.streaming.dim_state import DimensionStates
from sparkext.streaming.holds import SourceHolds
from sparkext.streaming.job import Job, StreamingSqlError, parse_duration, parse_job, table_name
from sparkext.streaming.rewrite import parse_time, rewrite_query
from sparkext.streaming.rules import RULES
from sparkext.streaming.rules.insert_overwrite import insert_overwrite_rule
from sparkext.streaming.rules.temporal_join import STATE
from sparkext.streaming.sqltools import bind_tvf
from sparkext.streaming.udf import register_job_functions
from sparkext.streaming.upsert import UNTIL, upsert, upserted_until

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EMITTED_KEY = "sparkext.stream.emitted-until"
CHECKPOINT_KEY = "sparkext.stream.checkpoint"
QUERY_KEY = "sparkext.stream.query"  # which INSERT of the job (1, 2, …)
STATE_FILE = "sparkext-state.json"
APPEND_RULES = tuple(r for r in RULES if r is not insert_overwrite_rule)
DEFAULT_INTERVAL = "10 seconds"


@dataclass(frozen=True)
class StreamSource:
    name: str
    event_time: str
    delay: timedelta
    options: dict[str, str]


@dataclass
class StreamState:
    """What a stream remembers between micro-batches (also in <checkpoint>/sparkext-state.json).

    Times are instants as text with their offset (``times.instant_text``); text without one,
    from older checkpoints, is read as a wall clock in the session zone.
    """

    maxima: dict[str, str] = field(default_factory=dict)  # source → largest event time seen
    emitted: dict[str, str] = field(default_factory=dict)  # query id → end of its last range

    @classmethod
    def load(cls, location: Location) -> StreamState:
        text = location.read_text()
        return cls(**json.loads(text)) if text is not None else cls()

    def save(self, location: Location) -> None:
        location.write_text(json.dumps({"maxima": self.maxima, "emitted": self.emitted}))


def streaming_sources(job: Job, catalog: Catalog) -> list[StreamSource]:
    """Every table the job's queries read as a stream, with its event time and delay."""
    context = RewriteContext(job, catalog, None, datetime.max)
    found: dict[str, StreamSource] = {}
    for query in job.queries:
        sink = (
            query.this.this
            if isinstance(query, exp.Insert) and isinstance(query.this, exp.Schema)
            else (query.this if isinstance(query, exp.Insert) else None)
        )
        for table in query.find_all(exp.Table):
            if (
                table is sink
                or table.args.get("version") is not None
                or not isinstance(table.this, exp.Identifier)
            ):
                continue
            source = context.source(table)
            if not source.streaming:
                continue
            call = table.find_ancestor(exp.Anonymous)
            if table.meta.get("table_argument") and call is not None:  # TABLE t of a window TVF
                descriptor = bind_tvf(call)["TIMECOL"].expressions[0].name
                source = context.source(table, descriptor)
            if source.event_time is None:
                raise StreamingSqlError(
                    f"the stream {source.name} has no event-time column: declare a WATERMARK in "
                    "the job or set the property 'sparkext.event-time-column'."
                )
            options = dict(table.meta.get("options", {}))
            previous = found.get(source.name)
            if previous is not None:
                options = {**previous.options, **options}
            found[source.name] = StreamSource(
                job.spelled(source.name), source.event_time, source.delay, options
            )
    if not found:
        raise StreamingSqlError(
            "the job reads no stream: mark a source with /*+ OPTIONS('streaming'='true') */, "
            "declare its WATERMARK, or read it through a window TVF."
        )
    return list(found.values())


def _emitted_until(
    spark: SparkSession, sink: str, checkpoint: str, query_id: str, zone: tzinfo
) -> datetime | None:
    """The end of the last range this stream's query appended to ``sink`` (snapshot summaries
    of the retained snapshots), as an instant."""
    from pyspark.sql import functions as F

    table = resolve_table(spark, sink)
    if table.current_snapshot_id is None:
        return None
    summary = F.col("summary")
    rows = (
        spark.table(table.metadata_table("snapshots"))
        .where((summary[CHECKPOINT_KEY] == F.lit(checkpoint)) & (summary[QUERY_KEY] == query_id))
        .select(summary[EMITTED_KEY].alias("until"))
        .collect()  # metadata rows of this stream's commits
    )
    values = [times.parse_instant(r.until, zone) for r in rows if r.until]
    return max(values) if values else None


def _reader(spark: SparkSession, source: StreamSource) -> DataFrame:
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("iceberg")
        .option("streaming-skip-overwrite-snapshots", "true")
        .option("streaming-skip-delete-snapshots", "true")
    )
    for key, value in source.options.items():  # Iceberg's own streaming read options
        if key.startswith("streaming-") or key == "stream-from-timestamp":
            reader = reader.option(key, value)
    start_snapshot = source.options.get("start-snapshot-id")
    if start_snapshot:
        times = dict((sid, ms) for ms, sid in snapshot_commit_times(spark, source.name))
        if int(start_snapshot) not in times:
            raise StreamingSqlError(
                f"'start-snapshot-id'='{start_snapshot}' is not a snapshot of {source.name}; "
                f"see SELECT snapshot_id FROM {source.name}.snapshots."
            )
        reader = reader.option("stream-from-timestamp", str(times[int(start_snapshot)]))
    return reader.load(source.name).select(
        F.lit(source.name).alias("source"), col(source.event_time).cast("timestamp").alias("t")
    )


class _RunningQuery(Protocol):
    """What :class:`StreamRun` asks of its query: Spark's ``StreamingQuery``, or a changelog
    job's stand-in (:mod:`sparkext.streaming.changelog_source`)."""

    @property
    def isActive(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def stop(self) -> None: ...


@dataclass
class StreamRun:
    """A started stream job (what :func:`run_stream` returns).

    ``query``: Spark's ``StreamingQuery`` (``status``, ``lastProgress``, ``id``);
    ``checkpoint``: the checkpoint as Spark got it; ``failures``: exceptions raised inside
    micro-batches; ``sinks``: the sink of each query of the job, in order; ``state``:
    'running', 'stopped' or 'failed'. ``wait()`` blocks until it ends, ``stop()`` stops it (the
    checkpoint stays: the next run resumes). Its ``repr`` is one line.

    >>> class Query:
    ...     isActive = True
    >>> StreamRun(Query(), "file:/ck/clicks", sinks=["lake.db.clicks"])
    StreamRun(checkpoint='file:/ck/clicks', state='running', queries=1, sinks=['lake.db.clicks'])
    """

    query: _RunningQuery
    checkpoint: str
    failures: list[BaseException] = field(default_factory=list)  # raised inside a micro-batch
    sinks: list[str] = field(default_factory=list)
    dimensions: DimensionStates | None = None  # the dimension state it keeps, if any

    def __repr__(self) -> str:
        failed = f", failures={len(self.failures)}" if self.failures else ""
        return (
            f"StreamRun(checkpoint={self.checkpoint!r}, state={self.state!r}, "
            f"queries={len(self.sinks)}, sinks={self.sinks!r}{failed})"
        )

    @property
    def state(self) -> str:
        """'running', 'stopped', or 'failed' (it ended with an error: ``wait()`` raises it)."""
        try:
            if self.query.isActive:
                return "running"
            return "failed" if self.failures or self.query.exception() is not None else "stopped"
        except Exception:  # the session is gone: so is the stream
            return "stopped"

    def stop(self) -> None:
        self.query.stop()
        self._release()

    def _release(self) -> None:
        if self.dimensions is not None:
            self.dimensions.close()

    def wait(self, poll_seconds: float = 0.5) -> None:
        """Block until the stream ends; Ctrl-C raises KeyboardInterrupt here, between polls
        (never inside a py4j call, which an interrupt would break).

        A failure inside a micro-batch is raised as its own one sentence (Spark reports it as
        "An exception was raised by the Python Proxy", with the cause deep in its text).
        """

        while self.query.isActive:
            time.sleep(poll_seconds)
        self._release()
        error = self.query.exception()
        if error is None:
            return
        if self.failures:
            cause = self.failures[-1]
            sentence = spark_message(cause) or f"{type(cause).__name__}: {cause}"
        else:
            # Spark's StreamingQueryException (a changelog job's error is in failures)
            sentence = spark_message(error) or str(error.desc).splitlines()[0]  # type: ignore[attr-defined]
        raise SparkextError(f"the stream stopped: {sentence}") from None


def run_stream(
    spark: SparkSession,
    text: str,
    checkpoint: str,
    available_now: bool = False,
    interval: str | None = None,
    lookup_as_of: str = "latest",
    progress: Callable[[str], None] = lambda message: None,
    start_from: datetime | str | None = None,
    dimension_state: bool = True,
) -> StreamRun:
    """Start a streaming job on Spark Structured Streaming (``sparkext-sql stream``); it keeps
    running after this returns.

    Each micro-batch reads the sources' new Iceberg snapshots, advances the watermark, and
    appends to each sink, in one commit, the rows the batch rewrite gives for the range the
    watermark has made final (an updating query into a primary-key sink is upserted at every
    batch). Once the watermark has passed a range's end, a sink holds what
    :func:`~sparkext.streaming.backfill.run_backfill` writes for that range; a restart from the
    checkpoint writes nothing twice.

    Args:
        spark: the session (``sparkext.session()``); the job's tables are resolved in it.
        text: the job's SQL (Flink-style streaming SQL: the text, not a file name).
        checkpoint: where the stream keeps its progress: a local path or any URI pyarrow
            reaches (``s3://…``); Spark gets it as written. Reuse it to resume.
        available_now: process what the sources hold now (in micro-batches), then stop.
        interval: the trigger interval, a duration such as ``'30 seconds'`` or ``'1 min'``;
            default: the smallest ``'monitor-interval'`` option of the sources, else 10 seconds.
            Ignored with ``available_now``.
        lookup_as_of: which state of a dimension a processing-time lookup join reads:
            ``'latest'`` (default, as Flink's lookup joins do), ``'end'`` (as of each emitted
            range's end), or a time ``'YYYY-MM-DD HH:MM:SS'``.
        progress: called with one line per sink a micro-batch commits to: the batch id, the
            sink, how far it is final, rows appended (upsert sinks: rows upserted and keys
            deleted) and the snapshot — from the commit's snapshot summary or the upsert's
            own tally, never a recount. It runs on Spark's callback thread; ``print`` will do.
        start_from: emit only results after this time (where a backfill ended): a
            ``datetime`` (naive: a wall clock in the session time zone; aware: converted) or
            text ``'YYYY-MM-DD[ HH:MM:SS]'``. Without it a new checkpoint emits from the
            sources' beginning and refuses a sink that already holds rows.
        dimension_state: keep the dimensions of temporal joins (an ingest_cdc dimension on
            the event-time attribute; a ``'latest'`` lookup) in executor memory and bring them
            forward by their changes at each micro-batch (:mod:`sparkext.streaming.dim_state`);
            False reads them again from the table for every micro-batch.

    Returns:
        A :class:`StreamRun`, started: ``run.wait()`` blocks until it ends (with
        ``available_now``, once it has caught up) and raises a micro-batch's failure as one
        sentence; ``run.stop()`` stops it.

    Raises:
        StreamingSqlError: the job or ``start_from``/``interval`` is invalid, it reads no
            stream, a query is a bare SELECT, or a sink already holds rows this checkpoint
            did not write (start after them with ``start_from``).
        UdfError: a ``CREATE FUNCTION`` target cannot be imported or is not a ``@udf``.
        SparkextError: Spark could not start the stream (a bad source option, a missing
            table). Failures while it runs are raised by ``StreamRun.wait()``.

    UDFs: a module the job names (``CREATE FUNCTION f AS 'mypkg.udfs.f'``) must be importable
    on the driver, which registers the function, and on the executors, whose Python workers
    import it again to run it: install it in the executors' Python, or ship it with
    ``spark.submit.pyFiles`` / ``spark-submit --py-files`` (a ``.py``, ``.zip`` or ``.egg``)
    or ``spark.sparkContext.addPyFile``. See :mod:`sparkext.streaming.udf`.

    Example::

        run = run_stream(spark, Path("job.sql").read_text(), "/checkpoints/clicks",
                         available_now=True, progress=print)
        run.wait()
    """
    job = parse_job(text)

    if changelog_tables(job):  # FROM t /*+ OPTIONS('changelog'='true') */: its own runner
        return run_changelog_job(
            spark, job, checkpoint, available_now, interval, progress, start_from
        )
    location = Location.of(checkpoint)
    checkpoint = location.uri
    catalog = SparkCatalog(spark, job.names)
    states = DimensionStates(spark, progress) if dimension_state else None
    if states is not None and lookup_as_of.lower() == "latest":
        lookup_as_of = STATE  # the latest snapshot, pinned per micro-batch, served from memory
    sources = streaming_sources(job, catalog)
    queries = []  # (query, sink, completion delay, query id); checked before anything is created
    for number, query in enumerate(job.queries, 1):
        if not isinstance(query, exp.Insert):
            raise StreamingSqlError(
                "stream mode needs INSERT INTO a sink; a bare SELECT has nowhere to go."
            )
        probe = rewrite_query(
            query, job, catalog, None, datetime(2000, 1, 1), lookup_as_of, APPEND_RULES
        )
        sink = table_name(query.this.this if isinstance(query.this, exp.Schema) else query.this)
        queries.append((query, sink, probe.completion_delay, str(number), probe.updating))
    every = None
    if not available_now:
        hinted = [s.options["monitor-interval"] for s in sources if "monitor-interval" in s.options]
        every = parse_duration(
            interval or (min(hinted, key=parse_duration) if hinted else DEFAULT_INTERVAL)
        )
    zone = times.zone(catalog.time_zone)
    start = parse_time(start_from, "--from", catalog.time_zone)
    start = None if start is None else times.instant(start, zone)
    location.make_dirs()
    register_job_functions(spark, job)
    create_missing_tables(spark, job)
    state_file = location.child(STATE_FILE)
    state = StreamState.load(state_file)
    delays = {s.name: s.delay for s in sources}
    for _, sink, _, query_id, updating in queries:
        if updating:
            continue  # upserts converge on the query's rows whatever the sink holds
        fresh = (
            query_id not in state.emitted
            and _emitted_until(spark, sink, checkpoint, query_id, zone) is None
        )
        if fresh and start is None and not spark.table(sink).isEmpty():
            raise StreamingSqlError(
                f"{sink} already holds rows and this checkpoint has emitted nothing into it, so "
                "the stream would write them again; start it after them with --from <time> "
                "(e.g. the end of the backfill), or use a new sink."
            )

    def emitted_until(sink: str, query_id: str, zone: tzinfo) -> datetime | None:
        found = [_emitted_until(spark, sink, checkpoint, query_id, zone)]
        if query_id in state.emitted:  # survives the expiry of the sink's snapshots
            found.append(times.parse_instant(state.emitted[query_id], zone))
        known = [f for f in found if f is not None]
        return max(known) if known else start

    def on_batch(batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        catalog = SparkCatalog(spark, job.names)
        zone = times.zone(catalog.time_zone)
        if states is not None:
            states.begin_batch(batch_id)
        # Epoch microseconds, not collected TIMESTAMPs: those come back in the OS zone.
        maxima = batch.groupBy("source").agg(F.unix_micros(F.max("t")).alias("t"))
        for row in maxima.collect():  # one row per source
            if row.t is None:
                continue
            seen = state.maxima.get(row.source)
            latest = times.from_micros(row.t)
            if seen is None or latest > times.parse_instant(seen, zone):
                state.maxima[row.source] = times.instant_text(latest)
        if any(name not in state.maxima for name in delays):
            state.save(state_file)
            return
        watermark = min(times.parse_instant(state.maxima[n], zone) - delays[n] for n in delays)
        newest = max(times.parse_instant(v, zone) for v in state.maxima.values())
        for query, sink, completion_delay, query_id, updating in queries:
            if updating:
                # Flink updates an upsert sink with every row, without waiting for the
                # watermark: every row seen so far counts, late ones included (and never less
                # than a backfill already brought the sink to)

                held = upserted_until(spark, sink)
                until, emitted = newest + timedelta(microseconds=1), None
                until = max(until, held) if held is not None else until
            else:
                until = watermark - completion_delay
                emitted = emitted_until(sink, query_id, zone)
                if emitted is not None and until <= emitted:
                    continue
            batch_plan = rewrite_query(  # the rewrite's range is in session-zone wall clocks
                query,
                job,
                catalog,
                None if emitted is None else times.wall_clock(emitted, zone),
                times.wall_clock(until, zone),
                lookup_as_of,
                APPEND_RULES,
            )
            insert = batch_plan.statement
            assert isinstance(insert, exp.Insert)  # the query has a sink
            with registered_views(spark, batch_plan.views, states):  # resolved when analysed
                frame = sink_frame(spark, insert, sink)
            marks = {
                EMITTED_KEY: times.instant_text(until),
                CHECKPOINT_KEY: checkpoint,
                QUERY_KEY: query_id,
                **(states.summary() if states is not None and batch_plan.views else {}),
            }
            run_id = new_run_id()
            if batch_plan.updating:  # the sink converges on the query's rows, late ones too
                marks[UNTIL] = times.instant_text(until)

                result = upsert(
                    spark,
                    sink,
                    batch_plan.key,
                    frame,
                    None,
                    marks,
                    run_id,
                    "restart the stream",
                    against_sink=True,
                )
                counts: tuple[int | None, int | None, int | None] = (
                    result.snapshot_id,
                    result.upserted,
                    result.deleted,
                )
            else:
                writer = frame.writeTo(sink).option(f"snapshot-property.{RUN_ID}", run_id)
                for mark, value in marks.items():
                    writer = writer.option(f"snapshot-property.{mark}", value)
                writer.append()
                counts = commit_of_run(spark, sink, run_id)  # its snapshot's summary
            state.emitted[query_id] = times.instant_text(until)
            done = commit_counts(*counts, "upsert" if batch_plan.updating else "append")
            progress(f"batch {batch_id}: {sink} up to {times.wall_clock_text(until, zone)}, {done}")
        state.save(state_file)

    failures: list[BaseException] = []

    holds = SourceHolds(
        spark,
        [s.name for s in sources],
        checkpoint,
        location.child("offsets", "offsets"),
        progress,
    )

    def guarded(batch: DataFrame, batch_id: int) -> None:
        try:
            holds.before_batch(batch_id)  # maintenance keeps what a restart resumes from
            on_batch(batch, batch_id)
        except Exception as error:  # kept for StreamRun.wait: Spark's report hides it
            failures.append(error)
            raise
        finally:
            release_proxies()  # the batch's Java objects, not at Python's next full GC

    frames = [_reader(spark, s) for s in sources]
    stream = frames[0]
    for frame in frames[1:]:
        stream = stream.unionByName(frame)
    writer = (
        stream.writeStream.foreachBatch(guarded)
        .option("checkpointLocation", location.child("offsets").uri)
        .queryName("sparkext_" + hashlib.sha1(checkpoint.encode()).hexdigest()[:8])
    )
    if every is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{every.total_seconds()} seconds")
    try:
        return StreamRun(writer.start(), checkpoint, failures, [q[1] for q in queries], states)
    except Exception as error:  # a start failure is the user's (bad option, missing table)
        raise SparkextError(f"the stream could not start: {str(error).splitlines()[0]}") from None
