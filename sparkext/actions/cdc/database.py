"""Whole-database sync: every Debezium topic of a landing root (or a Kafka topic pattern) into
an Iceberg table of its own, with ONE Spark stream and ONE checkpoint.

The stream's ``foreachBatch`` splits each micro-batch by topic (from the file's path, or the
Kafka record's topic) and hands each topic's lines to that table's :class:`Ingestor`, whose own
state (checkpoint id, rejects, key cache, event log) lives under
``<checkpoint>/tables/<table>``. Tables are processed one after another, each with its own
commit. A crash after some tables committed batch N replays batch N on restart (Spark had not
committed it); each table whose snapshot summary already holds batch N for its checkpoint id
skips it (``batches_replayed``), the others apply it: nothing lost, nothing twice.

``<checkpoint>/tables.json`` remembers which topic feeds which table, so that a topic seen later
can never land in a table another topic feeds.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import quote, urlparse

from sparkext.actions.cdc import stream
from sparkext.actions.cdc.checkpoint import missing
from sparkext.actions.cdc.ingest import Ingestor
from sparkext.actions.cdc.model import Keys, Metrics, Settings
from sparkext.actions.cdc.stream import KAFKA, VANISHED, check_source, ingest, start
from sparkext.actions.cdc.topics import NO_TOPIC, Naming, Route, check_routes
from sparkext.errors import IngestError
from sparkext.executors.cdc.decode import INPUT_REJECT
from sparkext.fs import Location

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

TABLES = "tables"  # <checkpoint>/tables/<table>: each table's own ingest_cdc checkpoint
ROUTES = "tables.json"  # <checkpoint>/tables.json: topic -> table, for every topic ever routed
TOPIC = "_sparkext_topic"
NO_KEYS = Keys()  # every table's key from its events


@dataclass
class TableRun:
    """One topic's table in this call: its ingestor and what the call did to it."""

    route: Route
    name: str  # namespace.table
    ingestor: Ingestor | None = None
    existed: bool = False
    files_missing: int = 0
    after_batch: Callable[[], None] | None = None


@dataclass(frozen=True)
class TopicResult:
    """One output row: a table's topic and its totals, or an ignored topic and why."""

    topic: str
    table: str | None
    created: bool
    metrics: Metrics
    status: str


def landing_base(root: str) -> str:
    """The directory whose sub-directories are topics: ``<root>/topics`` when there is one
    (Kafka Connect's S3 and file sinks' ``topics.dir``), else ``<root>`` itself."""

    if root.startswith(KAFKA):
        return root
    topics = Location.of(root).child("topics").uri
    return root if missing(topics) else f"{root.rstrip('/')}/topics"


def listed_topics(base: str) -> list[str]:
    """The topic directories under ``base`` (hidden ones too: heartbeats start with ``__``),
    and ``""`` when files lie directly in it."""
    from pyarrow import fs

    location = Location.of(base)
    entries = location.filesystem.get_file_info(
        fs.FileSelector(location.path, allow_not_found=True)
    )
    topics = {e.base_name for e in entries if e.type == fs.FileType.Directory}
    topics = {t for t in topics if not t.startswith(".")}
    loose = any(
        e.type == fs.FileType.File and not e.base_name.startswith((".", "_")) for e in entries
    )
    return sorted(topics | ({""} if loose else set()))


def topic_column(base: str) -> Column:
    """The topic of each line, from its ``source_file``: the directory under ``base``, or the
    topic Kafka's records name (``kafka:<topic>/partition=<p>/offset=<o>``)."""
    from pyspark.sql import functions as F

    if base.startswith(KAFKA):
        pattern = r"^kafka:(.*)/partition=[0-9]+/offset=[0-9]+$"
    else:
        path = quote(urlparse(base).path.rstrip("/") if "://" in base else base.rstrip("/"))
        pattern = r"\Q" + path + r"\E/([^/]+)/"
    return F.regexp_extract(F.col("source_file"), pattern, 1)


class DatabaseIngestor:
    """The router a whole-database stream's ``foreachBatch`` runs (in the place of one table's
    :class:`Ingestor`, so :mod:`sparkext.actions.cdc.stream` runs both alike)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        namespace: str,
        naming: Naming,
        keys: Keys,
        base: str,
        progress: Callable[[str], None],
        after_table: Callable[[str], Callable[[], None] | None] = lambda table: None,
    ):
        self.spark = spark
        self.settings = settings  # the checkpoint root; every table's options
        self.namespace = namespace
        self.naming = naming
        self.keys = keys
        self.base = base
        self.progress = progress
        self.after_table = after_table
        self.metrics = Metrics()  # the stream's counters; the tables keep their own
        self.error: BaseException | None = None
        self.runs: dict[str, TableRun] = {}  # topic -> its table's run
        self.skipped: dict[str, tuple[str, int]] = {}  # topic -> (status, records seen)
        self.known = read_routes(settings.checkpoint)

    # ---- routing -------------------------------------------------------------------------
    def route(self, topics: list[str], done: str = "nothing was ingested") -> None:
        """Route ``topics`` not seen before; a clash (two topics, one table) or a bad name is
        an :class:`IngestError` before any of their lines is written."""
        new = [self.naming.route(t) for t in topics if t not in self.runs and t not in self.skipped]
        check_routes(
            [*new, *(r.route for r in self.runs.values())], self.known, self.namespace, done
        )
        added = False
        for route in new:
            if route.table is None:
                self.skipped[route.topic] = (route.status or NO_TOPIC, 0)
                continue
            self.runs[route.topic] = TableRun(route, f"{self.namespace}.{route.table}")
            if self.known.get(route.topic) != route.table:
                self.known[route.topic] = route.table
                added = True
        if added:
            write_routes(self.settings.checkpoint, self.known)

    def _ingestor(self, run: TableRun) -> Ingestor:
        if run.ingestor is None:
            table = run.route.table or ""
            settings = replace(
                self.settings,
                table=run.name,
                checkpoint=self._table_checkpoint(run),
                primary_key=self.keys.of(table),
                create=True,
                source_table=None,
            )
            run.existed = self.spark.catalog.tableExists(run.name)
            run.ingestor = Ingestor(
                self.spark,
                settings,
                lambda message: self.progress(f"{run.name}: {message}"),
                guesses=stream.GUESSES,  # the process's, read now (a test may swap them)
            )
            run.after_batch = self.after_table(run.name)
        return run.ingestor

    # ---- entry point for foreachBatch ------------------------------------------------------
    def process(self, lines: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        try:
            lines = lines.withColumn(TOPIC, topic_column(self.base)).persist()
            try:
                counts = (
                    lines.groupBy(TOPIC)
                    .agg(
                        F.count(F.lit(1)).alias("n"),
                        F.count(F.when(F.col(INPUT_REJECT) == VANISHED, 1)).alias("gone"),
                    )
                    .collect()
                )
                found = {r[TOPIC]: (r.n, r.gone) for r in counts}
                self.route(sorted(found), f"nothing of batch {batch_id} was ingested")
                for topic in sorted(found):
                    if topic in self.skipped:
                        status, seen = self.skipped[topic]
                        self.skipped[topic] = (status, seen + found[topic][0])
                        continue
                    self._table_batch(topic, lines, batch_id, found[topic][1])
            finally:
                lines.unpersist()
        except BaseException as error:  # kept so the stream raises it, not Spark's wrapper
            self.error = error
            raise

    def _table_batch(self, topic: str, lines: DataFrame, batch_id: int, gone: int) -> None:
        from pyspark.sql import functions as F

        run = self.runs[topic]
        ingestor = self._ingestor(run)
        replayed = ingestor.metrics.batches_replayed
        mine = lines.where(F.col(TOPIC) == F.lit(topic)).drop(TOPIC)
        self.progress(f"batch {batch_id}: {topic} -> {run.name}")
        try:
            ingestor.process(mine, batch_id)
        except IngestError as error:
            if not str(error).startswith("ingest_cdc needs the primary key"):
                raise
            raise IngestError(
                f"Topic '{topic}' carries no Debezium key, so {run.name} cannot be created: "
                "pass options => map('primary-key', 'id') for every table, or "
                f"'primary-key.{run.route.table}' for this one (comma-separated for several "
                f"columns); nothing of batch {batch_id} was written to it."
            ) from None
        if ingestor.metrics.batches_replayed == replayed:
            run.files_missing += gone
            if run.after_batch is not None:
                run.after_batch()

    def heartbeat_checkpoints(self) -> list[tuple[str, int | None]]:
        """Every routed table's own checkpoint: a heartbeat confirmed for the root holds for
        each of them (one connector wrote every topic), quiet tables included."""
        return [
            (
                self._table_checkpoint(run),
                run.ingestor.last_committed_batch if run.ingestor else None,
            )
            for run in self.runs.values()
            if run.ingestor is not None or self.spark.catalog.tableExists(run.name)
        ]

    def _table_checkpoint(self, run: TableRun) -> str:
        return f"{self.settings.checkpoint.rstrip('/')}/{TABLES}/{run.route.table or ''}"

    # ---- the result ------------------------------------------------------------------------
    def results(self) -> list[TopicResult]:
        rows = []
        for topic in sorted(self.runs):
            run = self.runs[topic]
            metrics = run.ingestor.metrics if run.ingestor else Metrics()
            metrics.files_missing = run.files_missing
            exists = self.spark.catalog.tableExists(run.name)
            created = exists and run.ingestor is not None and not run.existed
            rows.append(TopicResult(topic, run.name, created, metrics, self._status(run, exists)))
        for topic in sorted(self.skipped):
            status, seen = self.skipped[topic]
            rows.append(TopicResult(topic, None, False, Metrics(events=seen), status))
        return rows

    def _status(self, run: TableRun, exists: bool) -> str:
        metrics = run.ingestor.metrics if run.ingestor else Metrics()
        rejected = f"{self.settings.checkpoint.rstrip('/')}/{TABLES}/{run.route.table}/rejected"
        if not exists:
            if metrics.rejected:
                return f"not created: every event was rejected, see {rejected}"
            return "not created: no change event yet"
        if metrics.rejected:
            return f"{metrics.rejected} rejected, see {rejected}"
        if metrics.commits == 0 and metrics.batches_replayed == 0:
            return "no new events"
        return "ok"


def read_routes(checkpoint: str) -> dict[str, str]:

    text = Location.of(checkpoint).child(ROUTES).read_text()
    return dict(json.loads(text)) if text else {}


def write_routes(checkpoint: str, routes: Mapping[str, str]) -> None:

    location = Location.of(checkpoint)
    location.make_dirs()
    location.child(ROUTES).write_text(json.dumps(dict(sorted(routes.items())), indent=1))


def _check(spark: SparkSession, namespace: str, source: str) -> str:
    """The stream's base (see :func:`landing_base`), after the checks that need no stream."""

    if not spark.catalog.databaseExists(namespace):
        raise IngestError(
            f"Namespace '{namespace}' does not exist: create it (CREATE NAMESPACE {namespace}) "
            "or name an existing one, such as 'lake.db'; nothing was ingested."
        )
    check_source(source, spark)
    base = landing_base(source)
    if not base.startswith(KAFKA) and not listed_topics(base):
        raise IngestError(
            f"Source '{source}' holds no topic directory: point it at a Kafka Connect sink's "
            "directory (<root>/topics/<topic>/... or <root>/<topic>/...); nothing was ingested."
        )
    return base


def _router(
    spark: SparkSession,
    settings: Settings,
    namespace: str,
    naming: Naming,
    keys: Keys,
    source: str,
    progress: Callable[[str], None],
    after_table: Callable[[str], Callable[[], None] | None],
) -> DatabaseIngestor:
    base = _check(spark, namespace, source)
    router = DatabaseIngestor(spark, settings, namespace, naming, keys, base, progress, after_table)
    if not base.startswith(KAFKA):
        router.route(listed_topics(base))  # every topic's name checked before the first batch
    for topic in sorted(router.known):  # tables of earlier runs are listed even when quiet
        router.route([topic])
    return router


HEARTBEAT_TOPIC_PREFIX = "__debezium-heartbeat"


def database_settings(settings: Settings, namespace: str, source: str) -> Settings:
    """The stream's settings: the namespace names the query; a Kafka source is a pattern; the
    root's one heartbeat topic, when it has one and no heartbeat-source is given, counts as the
    connector's progress (sparkext.actions.cdc.heartbeats)."""
    heartbeat_source = settings.heartbeat_source
    if heartbeat_source is None and not source.startswith(KAFKA):
        base = landing_base(source)
        beats = [t for t in listed_topics(base) if t.startswith(HEARTBEAT_TOPIC_PREFIX)]
        if len(beats) == 1:
            heartbeat_source = f"{base.rstrip('/')}/{beats[0]}"
    return replace(
        settings,
        table=namespace,
        kafka_pattern=source.startswith(KAFKA),
        heartbeat_source=heartbeat_source,
    )


def ingest_database(
    spark: SparkSession,
    settings: Settings,
    namespace: str,
    source: str,
    naming: Naming,
    keys: Keys = NO_KEYS,
    max_files: int | None = None,
    progress: Callable[[str], None] = lambda message: None,
    after_table: Callable[[str], Callable[[], None] | None] = lambda table: None,
) -> list[TopicResult]:
    """Ingest every topic of ``source`` not yet ingested under ``settings.checkpoint``, each
    into its table of ``namespace``; one row per topic."""

    settings = database_settings(settings, namespace, source)
    router = _router(spark, settings, namespace, naming, keys, source, progress, after_table)
    ingest(
        spark,
        settings,
        router.base,
        max_files=max_files,
        progress=progress,
        ingestor=router,  # type: ignore[arg-type]  # the router takes an Ingestor's place
        what=f"ingest_cdc_database into {namespace}",
    )
    return router.results()


def start_database(
    spark: SparkSession,
    settings: Settings,
    namespace: str,
    source: str,
    naming: Naming,
    keys: Keys = NO_KEYS,
    interval: str = "10 seconds",
    max_files: int | None = None,
    after_table: Callable[[str], Callable[[], None] | None] = lambda table: None,
) -> StreamingQuery:
    """The same, continuously (every ``interval``): new topics become tables as they appear."""

    settings = database_settings(settings, namespace, source)
    router = _router(spark, settings, namespace, naming, keys, source, lambda m: None, after_table)
    return start(
        spark,
        settings,
        router.base,
        interval=interval,
        max_files=max_files,
        ingestor=router,  # type: ignore[arg-type]
        what=f"ingest_cdc_database_stream into {namespace}",
    )
