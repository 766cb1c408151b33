"""Run the CDC pipeline as a Structured Streaming query over a file landing zone.

``ingest`` processes every file not yet ingested (available-now trigger) and returns totals;
``start`` runs the same pipeline continuously with a processing-time trigger.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc import heartbeats
from sparkext.actions.cdc.checkpoint import hold, missing
from sparkext.actions.cdc.ingest import GuessCache, Ingestor
from sparkext.actions.cdc.model import Metrics, Settings
from sparkext.errors import IngestError, SparkextError
from sparkext.executors.cdc.decode import INPUT_REJECT
from sparkext.fs import Location
from sparkext.iceberg.errors import spark_message
from sparkext.iceberg.files import glob_matches_nothing
from sparkext.spark import cancellation
from sparkext.spark.java import callback_connection, close_connections

KAFKA = "kafka:"
SCALA_VERSION = "2.12"  # the Scala build inside the pyspark wheels of Spark 3.5
SPARK_CHECKPOINT = "source"  # Spark's own checkpoint (offsets, commits, file lists) lives here
VANISHED = "file vanished before it was read"
LINES_DDL = f"value binary, source_file string, {INPUT_REJECT} string"
# The guesses every Ingestor of this process types its batches with: one CALL makes one Ingestor,
# and a table's next CALL is typed with what its last one found, so they outlive each Ingestor
GUESSES = GuessCache()

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def _lines(
    spark: SparkSession,
    settings: Settings,
    source: str,
    max_files: int | None,
    skip_missing: bool = True,
) -> DataFrame:
    """The stream of records as (value, source_file, input_reject): the bytes of a JSON line
    (or file), where it came from, and no reject (the driver sets one for a vanished file)."""
    from pyspark.sql import functions as F

    if source.startswith(KAFKA):
        return kafka_lines(_kafka_stream(spark, settings, source[len(KAFKA) :]))
    whole_files = settings.input_format == "json-files"
    # a planned file deleted before its batch read it: skipped by Spark, reported by _Batches
    reader = (
        spark.readStream.format("text")
        .option("wholetext", str(whole_files).lower())
        .option("ignoreMissingFiles", str(skip_missing).lower())
    )
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    has_glob = any(ch in source for ch in "*?[{")
    if not has_glob:
        reader = reader.option("recursiveFileLookup", "true")
    return reader.load(source).select(
        F.col("value").cast("binary").alias("value"),  # the decoder checks UTF-8 line by line
        F.col("_metadata.file_path").alias("source_file"),
        F.lit(None).cast("string").alias(INPUT_REJECT),
    )


def _kafka_stream(spark: SparkSession, settings: Settings, topics: str) -> DataFrame:

    options = dict(settings.kafka_options)
    if not topics or "kafka.bootstrap.servers" not in options:
        raise IngestError(
            "A Kafka source needs topics and brokers: write source => 'kafka:shop.orders' and "
            "options => map('kafka.bootstrap.servers', 'host:9092')."
        )
    reader = (
        spark.readStream.format("kafka")
        .options(**options)
        .option("subscribePattern" if settings.kafka_pattern else "subscribe", topics)
        .option("startingOffsets", settings.starting_offsets)
        .option("failOnDataLoss", "true")
    )
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    try:
        return reader.load()
    except Exception as error:
        message = spark_message(error) or ""
        if "kafka" in message.lower() and "data source" in message.lower():
            raise IngestError(kafka_connector_hint()) from None
        raise


def kafka_connector_package() -> str:
    """Maven coordinates of Spark's Kafka connector for the installed PySpark: its version
    must match Spark's exactly, so it is read at run time rather than written down."""
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{pyspark.__version__}"


def kafka_connector_hint() -> str:
    """The sentence for a Kafka source when the connector is not on the classpath."""
    package = kafka_connector_package()
    return (
        "Reading Kafka needs Spark's Kafka connector on the classpath: start Spark with "
        f"--packages {package} (spark-submit, pyspark), or add {package} to "
        "spark.jars.packages in conf/spark-defaults.conf; or land the topic with a Kafka "
        "Connect sink and pass its directory."
    )


def kafka_lines(records: DataFrame) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset) as the pipeline's JSON lines.

    A record with a key becomes ``{"key": <key>, "value": <value>}`` (the decoder takes the key
    from it); a null value is a tombstone. ``source_file`` names topic, partition and offset, so
    per-partition progress works as for landed files.
    """
    from pyspark.sql import functions as F

    value = F.coalesce(F.col("value").cast("string"), F.lit("null"))
    key = F.col("key").cast("string")
    line = F.when(key.isNull(), value).otherwise(
        F.concat(F.lit('{"key":'), key, F.lit(',"value":'), value, F.lit("}"))
    )
    where = F.concat(
        F.lit("kafka:"),
        F.col("topic"),
        F.lit("/partition="),
        F.col("partition").cast("string"),
        F.lit("/offset="),
        F.col("offset").cast("string"),
    )
    return records.select(
        line.cast("binary").alias("value"),
        where.alias("source_file"),
        F.lit(None).cast("string").alias(INPUT_REJECT),
    )


def planned_files(spark_checkpoint: str, batch_id: int) -> list[str]:
    """The files Spark's file source planned for micro-batch ``batch_id`` (its source log:
    ``sources/0/<id>``, or the ``<id>.compact`` file that also holds earlier batches)."""

    log = Location.of(spark_checkpoint).child("sources", "0")
    for name in (str(batch_id), f"{batch_id}.compact"):
        text = log.child(name).read_text()
        if text is not None:
            break
    else:
        return []
    entries = (json.loads(line) for line in text.splitlines()[1:] if line.strip())  # 1st: "v1"
    return [e["path"] for e in entries if e.get("batchId", batch_id) == batch_id]


def vanished(paths: list[str]) -> list[str]:
    """The ``paths`` (URIs as Spark writes them, percent-encoded) no longer there: one listing
    per directory, not one request per file."""
    from urllib.parse import unquote

    from pyarrow import fs

    by_directory: dict[str, list[str]] = {}
    for path in paths:
        directory, _, name = path.rpartition("/")
        by_directory.setdefault(directory, []).append(name)
    gone: list[str] = []
    for directory, names in by_directory.items():
        location = Location.of(unquote(directory))
        listing = location.filesystem.get_file_info(
            fs.FileSelector(location.path, allow_not_found=True)
        )
        present = {info.base_name for info in listing}
        gone += [f"{directory}/{n}" for n in names if unquote(n) not in present]
    return gone


class _FilesVanished(Exception):
    """A planned file is gone and this query cannot skip it: run it again, skipping them."""


def _vanished_while_reading(error: BaseException | None) -> bool:
    return isinstance(error, _FilesVanished) or "FileNotFoundException" in str(error or "")


class _Batches:
    """The ``foreachBatch`` function: says which planned files vanished, then runs the batch.

    Each planned file that is gone becomes a reject naming it, so nothing disappears without a
    word; Spark skips it (``ignoreMissingFiles``). Metadata only, on the driver: one listing per
    directory. A query that cannot skip (``skip_missing`` false) stops instead, so that a file
    deleted after this check, while the batch read, is not skipped silently either.
    """

    def __init__(
        self,
        spark: SparkSession,
        ingestor: Ingestor,
        file_source: bool,
        skip_missing: bool,
        after_batch: Callable[[], None] | None = None,
        connections: set[Any] | None = None,
    ):
        self.spark = spark
        self.after_batch = after_batch
        # the py4j connections the query's thread called this function on: closed once the
        # query ended (see sparkext.spark.java.callback_connection)
        self.connections = set() if connections is None else connections
        self.ingestor = ingestor
        self.file_source = file_source
        self.skip_missing = skip_missing
        self.spark_checkpoint = os.path.join(ingestor.settings.checkpoint, SPARK_CHECKPOINT)
        # The statement that starts the query (None for a background stream): its Ctrl-C
        # cancels the batches, which run on py4j threads, and their commits are told to it.
        self.statement = cancellation.current()

    def __call__(self, lines: DataFrame, batch_id: int) -> None:

        connection = callback_connection()
        if connection is not None:
            self.connections.add(connection)
        with cancellation.bound(self.statement):
            self._batch(lines, batch_id)

    def _batch(self, lines: DataFrame, batch_id: int) -> None:
        missing: list[str] = []
        if self.file_source:
            self.ingestor.progress(f"batch {batch_id}: checking its files")
            missing = vanished(planned_files(self.spark_checkpoint, batch_id))
        if missing and not self.skip_missing:
            self.ingestor.error = _FilesVanished(f"{len(missing)} planned file(s) vanished")
            raise self.ingestor.error
        if missing:
            rows = [(None, path, VANISHED) for path in missing]
            lines = lines.unionByName(self.spark.createDataFrame(rows, LINES_DDL))
        metrics = self.ingestor.metrics
        replayed = metrics.batches_replayed
        self.ingestor.process(lines, batch_id)
        if metrics.batches_replayed == replayed:  # a batch committed before is not counted again
            metrics.files_missing += len(missing)
        if self.after_batch is not None:
            self.after_batch()  # e.g. optimize-every: between batches, in the writer's process


def _query(
    spark: SparkSession,
    settings: Settings,
    source: str,
    ingestor: Ingestor,
    max_files: int | None,
    trigger: dict[str, Any],
    skip_missing: bool = True,
    after_batch: Callable[[], None] | None = None,
    connections: set[Any] | None = None,
) -> StreamingQuery:
    batches = _Batches(
        spark, ingestor, not source.startswith(KAFKA), skip_missing, after_batch, connections
    )
    writer = (
        _lines(spark, settings, source, max_files, skip_missing)
        .writeStream.foreachBatch(batches)
        .option("checkpointLocation", os.path.join(settings.checkpoint, SPARK_CHECKPOINT))
        .queryName(f"sparkext_ingest_cdc_{settings.table}".replace(".", "_"))
    )
    return writer.trigger(**trigger).start()


def check_source(source: str, spark: SparkSession | None = None) -> None:
    """A file source that does not exist is one sentence (Spark's own error names no remedy).

    >>> try:
    ...     check_source("/nonexistent/landing")
    ... except Exception as error:
    ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
    Source '/nonexistent/landing' does not exist: check the path (a relative one is from the
    current directory); sparkext-demo --data DIR writes example change files to
    DIR/shop.orders.
    """

    if source.startswith(KAFKA):
        return
    if any(ch in source for ch in "*?[{"):
        if spark is not None and glob_matches_nothing(spark, source):
            raise IngestError(
                f"Source '{source}' matches no file: check the pattern (Hadoop glob syntax: "
                "*, ?, [abc], {a,b}; a relative path is from the current directory); nothing "
                "was ingested and no table was created."
            )
        return
    if missing(source):
        raise IngestError(
            f"Source '{source}' does not exist: check the path (a relative one is from the "
            "current directory); sparkext-demo --data DIR writes example change files to "
            "DIR/shop.orders."
        )


def ingest(
    spark: SparkSession,
    settings: Settings,
    source: str,
    max_files: int | None = None,
    progress: Callable[[str], None] = lambda message: None,
    after_batch: Callable[[], None] | None = None,
    ingestor: Ingestor | None = None,
    what: str | None = None,
) -> Metrics:
    """Ingest every file of ``source`` not yet ingested under this checkpoint; return totals.

    The query first reads without skipping missing files; when a planned file is gone (before
    the batch or while it read), nothing of that batch was committed and the query runs again,
    skipping and rejecting the missing files.

    ``ingestor``: what processes the batches (default: an :class:`Ingestor` of
    ``settings.table``; a whole-database sync passes its router); ``what``: the lock's words.
    """

    check_source(source, spark)
    connections: set[Any] = set()  # each query's thread's py4j connection, closed once it ended
    query: StreamingQuery | None = None
    with hold(settings.checkpoint, what or f"ingest_cdc into {settings.table}"):
        beat = _newest_heartbeat(settings)  # read before the source is listed (heartbeats.py)
        ingestor = ingestor or Ingestor(spark, settings, progress, guesses=GUESSES)
        try:
            for skip_missing in (False, True):
                query = _query(
                    spark,
                    settings,
                    source,
                    ingestor,
                    max_files,
                    {"availableNow": True},
                    skip_missing,
                    after_batch,
                    connections,
                )
                try:
                    query.awaitTermination()
                except Exception as error:
                    cause = ingestor.error or error
                    if not skip_missing and _vanished_while_reading(cause):
                        ingestor.error = None
                        continue
                    if ingestor.error is not None:
                        raise ingestor.error from None
                    raise
                if ingestor.error is not None:
                    raise ingestor.error
                break
            _confirm(settings, beat, ingestor)
        finally:
            if query is None or not query.isActive:  # its thread ended: no more callbacks
                close_connections(connections)
    return ingestor.metrics


def _newest_heartbeat(settings: Settings) -> tuple[int, int] | None:
    """(heartbeat time, wall clock) of the newest landed heartbeat, when the table has a
    heartbeat source and one has landed."""
    import time

    if not settings.heartbeat_source:
        return None
    wall = int(time.time() * 1000)
    newest = heartbeats.newest(settings.heartbeat_source)
    return None if newest is None else (newest, wall)


def _confirm(settings: Settings, beat: tuple[int, int] | None, ingestor: Ingestor) -> None:
    """The source was drained after ``beat`` was read: the lake holds every change before it."""

    if beat is not None:
        for checkpoint, batch in ingestor.heartbeat_checkpoints():
            heartbeats.confirm(checkpoint, heartbeats.Confirmed(beat[0], beat[1], batch))


def _confirm_while_running(
    query: StreamingQuery, settings: Settings, ingestor: Ingestor
) -> Callable[[], None]:
    """For a continuous stream: a heartbeat read before a trigger that found no new input (the
    query waits for data: everything listed was consumed) is confirmed. Called every few
    seconds; returns the heartbeat pending confirmation."""
    pending: list[tuple[int, int] | None] = [None]

    def step() -> None:

        status = query.status
        last = query.lastProgress
        if pending[0] is not None and last is not None and not status.get("isTriggerActive"):
            import datetime as dt

            stamp = dt.datetime.fromisoformat(str(last["timestamp"]).replace("Z", "+00:00"))
            drained = not status.get("isDataAvailable") and last.get("numInputRows", 0) == 0
            if drained and stamp.timestamp() * 1000 > pending[0][1]:
                _confirm(settings, pending[0], ingestor)
                pending[0] = None
        if pending[0] is None:
            try:
                pending[0] = _newest_heartbeat(settings)
            except SparkextError:
                pending[0] = None  # the next step tries again; the query reports its own state

    return step


def start(
    spark: SparkSession,
    settings: Settings,
    source: str,
    interval: str = "10 seconds",
    max_files: int | None = None,
    after_batch: Callable[[], None] | None = None,
    ingestor: Ingestor | None = None,
    what: str | None = None,
) -> StreamingQuery:
    """Run the same pipeline continuously (every ``interval``); stop it with ``query.stop()``.
    The checkpoint is held (one writer at a time) until the query ends. ``ingestor``, ``what``:
    as for :func:`ingest`."""
    import threading
    import time

    check_source(source)
    lock = hold(settings.checkpoint, what or f"ingest_cdc_stream into {settings.table}")
    lock.__enter__()
    try:
        ingestor = ingestor or Ingestor(spark, settings, lambda message: None, guesses=GUESSES)
        trigger = {"processingTime": interval}
        query = _query(spark, settings, source, ingestor, max_files, trigger, True, after_batch)
    except BaseException:
        lock.__exit__(None, None, None)
        raise

    confirm = _confirm_while_running(query, settings, ingestor)

    def release_when_stopped() -> None:
        try:
            while query.isActive:
                time.sleep(2)
                if settings.heartbeat_source and query.isActive:
                    confirm()
        finally:
            lock.__exit__(None, None, None)

    threading.Thread(target=release_when_stopped, name="sparkext-checkpoint", daemon=True).start()
    return query
