"""The CDC pipeline: a Structured Streaming file source whose micro-batches become Iceberg commits.

Per micro-batch (``Ingestor.process``), all data work on executors:

1. decode JSON lines (``mapInArrow``); rejects go to ``<checkpoint>/rejected/``;
2. type the rows (Connect schema, or JSON inference) and evolve the table schema if needed, typed
   with the facts of the table's last batch in this process and checked against the batch's own
   facts, observed on the way (typed again if they differ);
3. keep the last change per key by source position (Liulishuo's row_number dedup);
4. compare keys that may be out of order (position at or below the table's high-water mark) with
   their current version: the key cache first (keys of recent batches), then the table; late and
   duplicate events are recorded in ``<checkpoint>/late/`` and not applied (Yanxuan);
5. write data files (after-images) and equality-delete files (key + full before-image, Bilibili)
   on executors, and commit them on the driver as ONE transaction with the source progress in the
   snapshot summary. A batch whose id the table already records is skipped (replay safety).

The common batch (no truncate, no TOASTed value, every change newer than the table) is ONE job:
steps 1-5 and the event log (every valid event, written by tasks of the same job), decided
before its facts are known and decided and written again when they say it was not common.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc.checkpoint import remove_batches_before, remove_tree
from sparkext.actions.cdc.model import Metrics, Settings, Truncate, batch_types, max_position
from sparkext.actions.cdc.types import typed_rows
from sparkext.errors import BatchOutdatedError, CommitConflictError, IngestError
from sparkext.executors.cdc.decode import DECODED_DDL, decode_documents, decode_lines
from sparkext.executors.cdc.files import (
    DATA,
    EQUALITY_DELETES,
    EVENT_LOG,
    FILE_SCHEMA_DDL,
    KEY_LOG,
    KIND,
    EventLog,
    KeyLog,
    WrittenFile,
    file_writer,
    keep_only,
    remove_written,
)
from sparkext.executors.cdc.partitioning import unsupported
from sparkext.fs import Location
from sparkext.identifiers import col, cols, map_in_arrow
from sparkext.literals import IN_LIST_PRUNES_MAX, in_list
from sparkext.planning.cdc_schema import plan_schema
from sparkext.planning.positions import NAMES, family
from sparkext.spark.observe import (
    input_partitions,
    observed_metrics,
    release_proxies,
    same_session,
)
from sparkext.spark.reused import pinned_mode, reused

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession
    from pyspark.sql.types import DataType

    from sparkext.iceberg.cdc_table import CdcTable, ConcurrentChange, Progress

OP, EVENT_TIME, POSITION = "_cdc_op", "_cdc_event_time", "_cdc_position"
SYSTEM_COLUMNS = ((OP, "string"), (EVENT_TIME, "timestamp"), (POSITION, "string"))
SYSTEM_NAMES = {name for name, _ in SYSTEM_COLUMNS}
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    "sparkext.event-time-column": EVENT_TIME,
}
REPLANS = 8  # a batch whose keys another writer changed meanwhile is decided again
_BACKOFF_S = (0.2, 5.0)  # between plans, doubled each time, with jitter: two writers on the
# same keys stop colliding in lockstep (a slow writer used to run out of plans under load)
CRASH_ENV = "SPARKEXT_TEST_CRASH_AT"  # tests only: kill the process at a named point
KEY_CACHE = "keys"  # <checkpoint>/keys/batch=N: keys a batch applied, with their positions
LEGACY_KEY_CACHE = "key-cache"  # written by Spark before the file writers kept the cache
OBSERVED_WAIT_S = 30.0  # for Spark to report metrics observed by a finished job
EVENT_LOG_EVENTS_PER_FILE = 25_000  # events per event-log file, up to one file per core
GUESSED_PARTITIONS_MAX = 64  # source partitions a guess observes one by one (one figure each)
# Set on the stream's own session (Spark clones the user's for each query), so a user's session
# is untouched (a batch handed in from the user's own session is not tuned); a value the user
# set (anything but Spark's default) is kept. Measured on a 200k-change batch (JFR, 2 cores):
# building the typed rows' cache spent ~30% of the map stage gathering compression statistics
# (a hash map per string column) for blocks read once or twice and dropped at the end of the
# batch; and the per-key aggregate, with tens of thousands of distinct keys per task, fell back
# to sorting after 128 keys on both sides of its shuffle (~14%). Map-stage JVM CPU per 200k
# changes 9.2/7.5/6.2 s -> 5.3/5.3/4.5 s.
BATCH_SQL_CONF: dict[str, tuple[str, str]] = {  # name -> (Spark's default, ours)
    "spark.sql.inMemoryColumnarStorage.compressed": ("true", "false"),
    # keys per task held in a hash map before sorting: a key's buffer holds its last row and
    # first before-image, so ~65k x the row's size per running task (~160 MB for 2 KB of
    # images); enough for a 200k-change batch in four tasks
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": ("128", "65536"),
}


def tune_batch_session(conf: Any) -> None:
    """Apply :data:`BATCH_SQL_CONF` to a stream's session ``conf`` (``RuntimeConfig``), keeping
    any value the user set."""
    for name, (default, ours) in BATCH_SQL_CONF.items():
        if conf.get(name, default) == default:
            conf.set(name, ours)


class KeysChanged(BatchOutdatedError):
    """Another writer committed changes to keys of this batch after it was decided."""


def _crash_point(name: str) -> None:
    import os

    if os.environ.get(CRASH_ENV) == name:
        os._exit(97)


@dataclass(frozen=True)
class _Batch:
    """What every step of one micro-batch needs to know."""

    table: CdcTable
    commit: Any  # the batch's open CdcCommit
    columns: Mapping[str, str]  # user columns -> Spark types, after schema evolution
    key: tuple[str, ...]
    field_ids: Mapping[str, int]
    batch_id: int
    per_partition: Mapping[str, str]  # source partition -> max position in this batch


FoundTypes = tuple[Mapping[str, str], Mapping[str, str], bool]  # types, logical tags, exact


@dataclass(frozen=True)
class _Guess:
    """The facts of a table's last batch in this process, with which the next batch is typed
    while its own facts are observed (one job less); wrong, the batch is typed again."""

    family: str | None  # the position family of good events
    found_types: FoundTypes
    partitions: tuple[str, ...]  # source partitions seen so far
    events: int  # good events: sizes the event log until the batch's own count is known
    common: bool = True  # its changes were all newer than the table's (see Ingestor._common)


@dataclass(frozen=True)
class _Written:
    """What a batch's write job left: its table files, its figures, where and under which
    name prefix its files are (to remove them if the batch is not committed)."""

    files: list[WrittenFile]
    stats: Any  # the figures of _applied_figures()
    directory: str
    prefix: str


class _Misguessed(Exception):
    """The batch's own facts differ from the guess it was typed with: type it again."""


# (table, checkpoint id, decimal setting) -> the guess for its next batch; a hint only: every
# batch typed with it checks it against its own observed facts before anything is committed
_GUESSES: dict[tuple[str, str, str], _Guess] = {}  # oldest use first
_GUESSES_MAX = 256
_GUESSES_LOCK = threading.Lock()  # Ingestors of several tables may run on several threads


class Ingestor:
    """Processes micro-batches for one table and one checkpoint; keeps running totals."""

    def __init__(self, spark: SparkSession, settings: Settings, progress: Callable[[str], None]):
        self.spark = spark
        self.settings = settings
        self.progress = progress
        self.metrics = Metrics()
        self.error: BaseException | None = None
        self._batch_low: str | None = None  # lowest source position of the current batch
        self._batch_events = 0  # valid events of the current batch
        self._input_partitions = 1  # of a batch typed with a guess (see _event_log_files)
        self._batch_known: str | None = None  # the table's high-water mark the batch is decided on
        self._cached: list[DataFrame] = []  # persisted by the current batch, released after it
        self.checkpoint_id = _checkpoint_id(spark, settings.checkpoint)
        self.last_committed_batch: int | None = None  # by this object (heartbeat progress)

    def heartbeat_checkpoints(self) -> list[tuple[str, int | None]]:
        """Where a confirmed heartbeat is recorded: (checkpoint, its newest batch committed)."""
        return [(self.settings.checkpoint, self.last_committed_batch)]

    # ---- entry point for foreachBatch ------------------------------------------------------
    def process(self, lines: DataFrame, batch_id: int) -> None:
        try:
            if not same_session(lines.sparkSession, self.spark):  # a stream's, not the user's
                tune_batch_session(lines.sparkSession.conf)
            with pinned_mode():  # the batch's expressions share one SQL mode, read once
                self._process(lines, batch_id)
        except BaseException as error:  # kept so the caller can raise it, not Spark's wrapper
            self.error = error
            raise
        finally:
            self._release()
            release_proxies()  # the batch's Java objects, not at Python's next full GC

    def _persist(self, frame: DataFrame) -> DataFrame:
        """``frame.persist()``, released when the micro-batch ends (a continuous stream must not
        accumulate one cached copy per batch)."""
        frame = frame.persist()
        self._cached.append(frame)
        return frame

    def _release(self) -> None:
        cached, self._cached = self._cached, []
        for frame in cached:
            frame.unpersist()

    def _process(self, lines: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        self.progress(f"batch {batch_id}: decoding")
        table = self._load_table()
        held = table.progress(self.checkpoint_id) if table is not None else None
        if held is not None and held.batches.get(self.checkpoint_id, -1) >= batch_id:
            self.metrics.batches_replayed += 1  # committed before a crash: never apply twice
            return
        decoder = decode_documents if self.settings.input_format == "json-files" else decode_lines
        decoded = _with_arrival(lines.mapInArrow(decoder, DECODED_DDL), batch_id).persist()
        try:
            marked = self._mark_rejects(decoded)
            held_family = family(held.max_position) if held else None
            guess = self._guess(table, held_family)
            self._input_partitions = 1
            if table is not None and guess is not None:
                saved = copy.deepcopy(self.metrics)
                # the typing job decodes too: never in fewer tasks than the input has
                self._input_partitions = input_partitions(decoded)
                try:
                    self._replanning(
                        table,
                        batch_id,
                        lambda: self._guessed(
                            table, marked, guess, held_family is not None, batch_id
                        ),
                    )
                    return
                except _Misguessed as wrong:
                    self.metrics.__dict__.update(saved.__dict__)
                    self._release()
                    self._input_partitions = 1
                    self.progress(f"batch {batch_id}: {wrong}; typing it again")
            # one pass for the small facts: schemas, rejects, position families, progress per
            # source partition
            groups, figures = _decoded_facts()
            facts = (
                marked.groupBy(*groups)
                .agg(*figures)
                .collect()  # distinct schemas x families x source partitions: a handful of rows
            )
            chosen = _family(held.max_position if held else None, [f for f in facts if not f.bad])
            marked = _reject_other_families(marked, chosen, {f.family for f in facts})
            valid = marked.where(F.col("reject").isNull())
            good = [f for f in facts if not f.bad and (chosen is None or f.family == chosen)]
            self._take_facts(
                marked,
                batch_id,
                sum(f.n for f in facts),
                sum(f.n for f in good),
                min((f.lo for f in good if f.lo is not None), default=None),
            )
            per_partition: dict[str, str] = {}
            for f in good:
                if f.p is not None:
                    per_partition[f.source_partition] = max(
                        f.p, per_partition.get(f.source_partition, f.p)
                    )
            found = batch_types(sorted(good, key=_schema_order), self.settings)
            if table is None:
                if not found[0]:
                    return
                table = self._create(valid, found[0])
            self._replanning(
                table,
                batch_id,
                lambda: self._plan_and_apply(table, valid, found, batch_id, per_partition),
            )
            self._remember(chosen, found, per_partition, self._batch_events)
        finally:
            decoded.unpersist()

    def _replanning(self, table: CdcTable, batch_id: int, attempt: Callable[[], None]) -> None:
        """``attempt()``, again (after a backoff) while other writers change keys of the batch."""
        for replan in range(1, REPLANS + 1):
            saved = copy.deepcopy(self.metrics)
            try:
                attempt()
                return
            except BatchOutdatedError as changed:
                self.metrics.__dict__.update(saved.__dict__)  # the stream holds this object
                self._release()
                if replan == REPLANS:
                    raise CommitConflictError(
                        f"Other writers kept changing keys of this batch in "
                        f"{self.settings.table} ({REPLANS} plans); nothing of batch {batch_id} "
                        "was committed: run ingest_cdc again."
                    ) from changed
                self.progress(f"batch {batch_id}: {changed}; deciding again")
                low, high = _BACKOFF_S
                time.sleep(random.uniform(0.5, 1.0) * min(high, low * 2 ** (replan - 1)))
                table.refresh()

    def _take_facts(
        self, marked: DataFrame, batch_id: int, events: int, good: int, low: str | None
    ) -> None:
        """Count the batch's events, write its rejects (all events but the ``good`` ones)."""
        from pyspark.sql import functions as F

        rejects = marked.where(F.col("reject").isNotNull()).select(
            "reject", F.coalesce("raw", "after_json", "before_json").alias("raw"), "source_file"
        )
        self._record_rejects(rejects, batch_id, events - good)
        self.metrics.events += events
        self._batch_low = low
        self._batch_events = good

    # ---- typing with the last batch's facts ------------------------------------------------------
    def _guess_key(self) -> tuple[str, str, str]:
        return (self.settings.table, self.checkpoint_id, self.settings.variable_scale_decimal)

    def _guess(self, table: CdcTable | None, held: str | None) -> _Guess | None:
        """The last batch's facts, the family the table holds (``held``) in place of its own."""
        if table is None:
            return None
        with _GUESSES_LOCK:
            guess = _GUESSES.get(self._guess_key())
        if guess is None or held is None or held == guess.family:
            return guess
        return replace(guess, family=held)

    def _remember(
        self,
        chosen: str | None,
        found: FoundTypes,
        per_partition: Mapping[str, str],
        events: int,
    ) -> None:
        key = self._guess_key()
        with _GUESSES_LOCK:
            old = _GUESSES.pop(key, None)
            if not events or not found[0] or len(per_partition) > GUESSED_PARTITIONS_MAX:
                return  # nothing to type with; too many partitions to observe one by one
            partitions = set(per_partition) | set(old.partitions if old else ())
            if len(partitions) > GUESSED_PARTITIONS_MAX:
                partitions = set(per_partition)
            while len(_GUESSES) >= _GUESSES_MAX:
                _GUESSES.pop(next(iter(_GUESSES)))  # the least recently remembered
            common = self._all_newer(self._batch_known)
            _GUESSES[key] = _Guess(chosen, found, tuple(sorted(partitions)), events, common)

    def _guessed(
        self, table: CdcTable, marked: DataFrame, guess: _Guess, held: bool, batch_id: int
    ) -> None:
        """The batch typed with ``guess``; its own facts observed as its event log is written and
        checked before anything else is done: :class:`_Misguessed` when they differ, or when
        anything fails before they were checked (typing with wrong types may fail). ``held``: the
        table holds the guess's family, so events of others are rejected as the facts' path does.

        The facts are observed by the first job that reads the typed rows, as it caches them
        (the common batch's one job, whose map stage reads them first; else the event log's
        write): no action may read ``valid`` or the typed rows before it, or the figures would be
        partial. Only counts (events, rejects: figures, not decisions) can be too high, when a
        map stage whose cached blocks were lost runs again; the checks use sets, minima and
        maxima.

        The observation sits under the typed rows' cache: a task that cached its block and then
        failed is run again from the cache, and the failed attempt's figures are dropped, so the
        facts would miss that partition (a too-high lowest position would apply a late event as
        new). The typed rows are therefore also counted and fingerprinted above the cache
        (``rows`` and ``print`` of :func:`_typed_facts`, on the first job's reading of them): the
        facts are used only when they cover exactly the rows that were typed (a count alone
        could be evened out by a partition counted twice)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from sparkext.spark.cancellation import raise_if_cancelled

        if held:
            marked = _reject_other_families(marked, guess.family, set(NAMES))
        observation = Observation()
        figures = _guessed_facts(guess.family, guess.partitions)
        # with no family held, events of another one pass this filter: the check below sees
        # them, and the batch is typed again (the facts' path picks the batch's commonest)
        valid = marked.observe(observation, *figures).where(F.col("reject").isNull())
        self._batch_events = guess.events
        checked = False

        def confirm(typed: Any) -> dict[str, str]:
            nonlocal checked
            seen = observed(observation, lambda: marked.agg(*figures).first())
            if seen.others:
                raise _Misguessed(f"{seen.others} event(s) of another position family")
            if (typed.rows, typed.print) != (seen.good or 0, seen.print):  # see the docstring
                raise _Misguessed(
                    f"its facts saw {seen.good or 0} of its {typed.rows} typed events, not "
                    "exactly those (a task ran again)"
                )
            if seen.elsewhere:
                raise _Misguessed("events of a source partition the last batch did not have")
            facts = [SimpleNamespace(value_schema=s, row_types=None) for s in sorted(seen.schemas)]
            facts += [SimpleNamespace(value_schema=None, row_types=r) for r in sorted(seen.rows)]
            found = batch_types(facts, self.settings)
            if found != guess.found_types:
                raise _Misguessed("its column types differ from the last batch's")
            checked = True
            self._take_facts(marked, batch_id, seen.n, seen.good or 0, seen.lo)
            per_partition = {
                p: getattr(seen, f"p{i}")
                for i, p in enumerate(guess.partitions)
                if getattr(seen, f"p{i}") is not None
            }
            self._remember(guess.family, found, per_partition, seen.good or 0)
            return per_partition

        try:
            self._plan_and_apply(
                table, valid, guess.found_types, batch_id, {}, confirm, guess.common
            )
        except _Misguessed:
            raise
        except Exception as error:
            if checked:
                raise
            raise_if_cancelled()  # a cancel is not a wrong guess
            raise _Misguessed(
                f"typing it with the last batch's types failed ({type(error).__name__})"
            ) from error

    def _plan_and_apply(
        self,
        table: CdcTable,
        valid: DataFrame,
        found_types: FoundTypes,
        batch_id: int,
        per_partition: Mapping[str, str],
        confirm: Callable[[Any], Mapping[str, str]] | None = None,
        last_common: bool = True,
    ) -> None:
        """Decide and commit the batch against the table's current snapshot. ``confirm``: the
        batch was typed with a guess; called once its typing job ran, it checks the guess and
        gives the progress per source partition, given the typed rows' facts
        (``last_common``: see :meth:`_common`)."""
        types, logical, exact = found_types
        key = table.key() or self._adopt_key(table)
        wanted = list(self.settings.primary_key)
        if wanted and set(wanted) != set(key):
            raise IngestError(
                f"primary_key => '{', '.join(wanted)}' differs from the identifier fields of "
                f"table '{self.settings.table}' ({', '.join(key)}), which ingest_cdc keys by: "
                f"pass primary_key => '{', '.join(key)}' or leave it out."
            )
        table_types = {c.name: c.type for c in table.columns() if c.name not in SYSTEM_NAMES}
        plan = plan_schema(table_types, types, exact)
        commit = table.begin()
        commit.evolve(plan.additions, plan.widenings)
        field_ids = commit.field_ids()
        columns = {**table_types, **dict(plan.additions), **dict(plan.widenings)}
        typed, missing_key = self._typed(valid, columns, logical, key)
        batch = _Batch(table, commit, columns, tuple(key), field_ids, batch_id, per_partition)
        self._apply(batch, typed, missing_key, confirm, last_common)

    def _adopt_key(self, table: CdcTable) -> list[str]:
        """An existing table without identifier fields: ``primary_key`` becomes them (one
        schema commit, once no row has a NULL key), or one sentence says what to do."""
        from sparkext import identifiers

        name, wanted = self.settings.table, list(self.settings.primary_key)
        if not wanted:
            raise IngestError(
                f"Table '{name}' has no identifier fields (primary key); pass primary_key => "
                "'id' (comma-separated for several columns) and ingest_cdc makes them its key."
            )
        columns = {c.name: c for c in table.columns()}
        unknown = [k for k in wanted if k not in columns]
        if unknown:
            raise IngestError(
                f"primary_key => '{', '.join(wanted)}' names column(s) {', '.join(unknown)} "
                f"that table '{name}' does not have; its columns are: {', '.join(columns)}."
            )
        optional = [k for k in wanted if not columns[k].required]
        if optional:
            where = " OR ".join(f"{identifiers.quote(k)} IS NULL" for k in optional)
            nulls = self.spark.sql(f"SELECT count(*) FROM {name} WHERE {where}").first()[0]
            if nulls:
                raise IngestError(
                    f"Table '{name}' has {nulls} row(s) with a NULL in {', '.join(optional)}, "
                    "and Iceberg's identifier fields cannot be NULL: delete or fix them (DELETE "
                    f"FROM {name} WHERE {where}), then run ingest_cdc again."
                )
        table.make_key(wanted)
        self.progress(f"{name}: identifier fields set to ({', '.join(wanted)})")
        return wanted

    # ---- steps -------------------------------------------------------------------------------
    def _load_table(self) -> CdcTable | None:
        from sparkext.iceberg.cdc_table import CdcTable

        if not self.spark.catalog.tableExists(self.settings.table):
            if not self.settings.create:
                raise IngestError(
                    f"Table '{self.settings.table}' does not exist; pass create => true to "
                    "create it from the first events."
                )
            return None
        table = CdcTable(self.spark, self.settings.table)
        table.refresh()  # the catalog may cache a table another process has moved on
        bad = unsupported(table.partition_fields(), table.key())
        if bad:
            raise IngestError(
                f"Table '{self.settings.table}' is partitioned by {', '.join(bad)}, which is not "
                "derived from its primary key; ingest_cdc needs partition fields on key columns "
                "(identity, bucket[N] or truncate[W] of int, bigint, string or binary) so a "
                "key's equality deletes land in its rows' partition."
            )
        return table

    def _mark_rejects(self, decoded: DataFrame) -> DataFrame:
        """``reject`` also set for events of another source table, when one is configured."""
        from pyspark.sql import functions as F

        reason = F.col("reject")
        wanted = self.settings.source_table
        if wanted:
            db, _, name = wanted.rpartition(".")
            other = (F.col("source_table") != F.lit(name)) | (
                F.lit(bool(db)) & (F.col("source_db") != F.lit(db))
            )
            reason = F.coalesce(
                reason,
                F.when(
                    other & F.col("source_table").isNotNull(),
                    F.concat(
                        F.lit("event of another table: "),
                        F.concat_ws(".", "source_db", "source_table"),
                        F.lit(f", expected {wanted}"),
                    ),
                ),
            )
        return decoded.withColumn("reject", reason)

    def _create(self, valid: DataFrame, batch_types: Mapping[str, str]) -> CdcTable:
        from pyspark.sql import functions as F

        from sparkext.iceberg.cdc_table import create_table

        key = list(self.settings.primary_key)
        if not key:
            first = valid.where(F.col("key_json").isNotNull()).select("key_json").limit(1).collect()
            key = list(json.loads(first[0].key_json)) if first else []
        if not key:
            raise IngestError(
                "ingest_cdc needs the primary key to create the table: pass "
                "primary_key => 'id' (comma-separated for several columns), or land records "
                "with their Kafka key."
            )
        unknown = [k for k in key if k not in batch_types]
        if unknown:
            raise IngestError(
                f"Primary key column(s) {', '.join(unknown)} are not in the events' rows; "
                f"columns seen: {', '.join(batch_types)}."
            )
        off_key = [c for _, c, _ in self.settings.partition_by if c not in key]
        if off_key:
            raise IngestError(
                f"partition-by uses {', '.join(off_key)}, which is not a primary-key column; "
                "partition a CDC table by key columns only, e.g. 'bucket(16, id)'."
            )
        columns = [*batch_types.items(), *SYSTEM_COLUMNS]
        properties = dict(TABLE_PROPERTIES)
        if self.settings.source_table:
            properties["sparkext.cdc.source-table"] = self.settings.source_table
        self.progress(f"creating {self.settings.table}")
        return create_table(
            self.spark, self.settings.table, columns, key, properties, self.settings.partition_by
        )

    def _typed(
        self,
        valid: DataFrame,
        columns: Mapping[str, str],
        logical: Mapping[str, str],
        key: Sequence[str],
    ) -> tuple[DataFrame, DataFrame]:
        """Typed rows, and rejects: a missing key, or a value of the wrong type."""
        typed, rejects = typed_rows(valid, columns, logical, key)
        return self._persist(typed), rejects

    def _record_rejects(
        self, rejects: DataFrame, batch_id: int, count: int | None, kind: str = ""
    ) -> None:
        """Write ``rejects`` when ``count`` says there are some; ``None``: there are, and they
        are counted as they are written (a count observed on a retried map stage can be too
        high; this write's result stage counts each row once)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        path = f"{self.settings.checkpoint}/rejected/batch={batch_id}{kind}"
        if count is None:
            counting = Observation()
            rejects = rejects.coalesce(1).observe(counting, F.count(F.lit(1)).alias("n"))
            rejects.write.mode("overwrite").json(path)
            count = observed(
                counting,
                lambda: self.spark.read.json(path).agg(F.count(F.lit(1)).alias("n")).first(),
            ).n
            written = True
        else:
            written = False
        self.metrics.rejected += count
        if count:
            if not written:
                rejects.coalesce(1).write.mode("overwrite").json(path)
            if self.settings.fail_on_reject:
                raise IngestError(
                    f"{count} event(s) were rejected and fail-on-reject is set; see {path}."
                )

    def _apply(
        self,
        batch: _Batch,
        typed: DataFrame,
        missing_key: DataFrame,
        confirm: Callable[[Any], Mapping[str, str]] | None = None,
        last_common: bool = True,
    ) -> None:
        """Decide the batch's changes, write its event log and files, commit.

        The common batch (no truncate, no unavailable value, every change newer than the
        table's high-water mark) is ONE job: the event log is written by the tasks that write
        the data and delete files (:meth:`_write` with ``events``), the facts deciding whether
        the batch is common observed on the way. Those that are not are decided again from the
        facts and written by a second job (the event log kept unless values were filled in)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        table, key, batch_id = batch.table, batch.key, batch.batch_id

        self.progress(f"batch {batch_id}: deduplicating")
        progress = table.progress(
            self.checkpoint_id,
            cache_from=batch_id - self.settings.key_cache_batches,
            snapshot_id=batch.commit.start_snapshot_id,
        )
        placeholder = self.settings.unavailable_placeholder
        # the batch's small facts are observed while its event log is written: no job of their own
        observation = Observation()
        facts = _typed_facts(tuple(batch.columns.items()), key, placeholder)
        events = _split_key_changes(
            typed.observe(observation, *facts).where(~F.col("missing_key")), key
        )
        changes = _split_key_changes(typed.where(~F.col("missing_key")), key)
        known = max_position(progress.max_position, progress.truncate_position)
        self._batch_known = known
        common = self._common(known, confirm is not None, last_common)
        written: _Written | None = None
        if common:  # decided before the facts are known: checked below, written again if wrong
            grouped = changes.where(F.col("op") != "t").groupBy(*cols(key)).agg(*_per_key())
            written = self._write(batch, _all_applied(grouped), None, events)
            events_location = self._event_log_dir(batch_id)
        else:
            events_location = self._write_event_log(events, batch)
        try:
            truncate_row = observed(observation, lambda: typed.agg(*facts).first())
            if confirm is not None:  # before anything but the writes (rewritten if wrong)
                batch = replace(batch, per_partition=confirm(truncate_row))
            if truncate_row.missing:  # counted again as written: see _record_rejects
                self._record_rejects(missing_key, batch_id, None, "-values")
        except BaseException:
            if written is not None:  # never committed: no file of it may stay
                self._discard(batch, written)
            raise
        if written is not None and not self._was_common(truncate_row, known):
            self.progress(
                f"batch {batch_id}: a late event, a truncate or a TOASTed value; deciding again"
            )
            self._discard(batch, written)
            written = None
        if truncate_row.unavailable:
            self.progress(f"batch {batch_id}: keeping stored values of unchanged TOASTed columns")
            toastable = _unavailable_checks(batch.columns, key, placeholder)
            changes = self._persist(self._fill_unavailable(changes, batch, toastable))
            self._write_event_log(changes, batch)  # again, with the values kept (rare: TOAST)
        truncate = Truncate.plan(
            truncate_row.p,
            truncate_row.t,
            progress.truncate_position,
            progress.max_position,
        )
        if truncate_row.p is not None and truncate is None:
            self.metrics.duplicates += 1  # a truncate already applied, delivered again
        if truncate is not None:
            self.metrics.truncates += 1
        bounds = (truncate_row.low, truncate_row.high, events_location)
        if written is not None:
            decided = _all_applied(grouped)  # read again only if a concurrent change is checked
        else:
            applying = changes.where(F.col("op") != "t")
            if truncate is not None:
                applying = applying.where(F.col("position") > F.lit(truncate.position))
            grouped = applying.groupBy(*cols(key)).agg(*_per_key())
            decided = self._decide(grouped, batch, known, progress)  # cached only if read twice
            written = self._write(batch, decided, truncate)
        self._commit(batch, changes, decided, truncate, progress, bounds, written)

    def _common(self, known: str | None, guessed: bool, last_common: bool) -> bool:
        """Whether the batch is written as a common one, in one job, before its facts are known:
        when every change is newer than the table's high-water mark ``known``; a batch typed
        with a guess does not know its lowest position yet: when the last batch's were
        (``last_common``: a source whose partitions interleave positions is not written twice
        per batch)."""
        if known is None:
            return True
        return last_common if guessed else self._all_newer(known)

    def _all_newer(self, known: str | None) -> bool:
        low = self._batch_low
        return known is None or (low is not None and low > known)

    def _was_common(self, truncate_row: Any, known: str | None) -> bool:
        """The batch's facts say it is common: it is decided as :meth:`_decide` would have."""
        if truncate_row.p is not None or truncate_row.unavailable:
            return False
        return self._all_newer(known)

    def _decide(
        self, grouped: DataFrame, batch: _Batch, known: str | None, progress: Progress
    ) -> DataFrame:
        """Add ``status`` (apply / late / duplicate); look up only keys that may be out of order."""
        from pyspark.sql import functions as F

        truncate_position = progress.truncate_position

        position = F.col("last.position")
        if known is None:
            return _all_applied(grouped)
        low = self._batch_low
        if low is not None and low > known:
            # every change is newer than anything applied: nothing can be late, no lookups; the
            # per-key rows are read once, by the writers: not cached
            return _all_applied(grouped)
        grouped = self._persist(grouped)  # read by the check below, then by the writers
        suspicious = grouped.where(position <= F.lit(known))
        if suspicious.isEmpty():
            return _all_applied(grouped)
        safe = grouped.where(position > F.lit(known)).withColumn(
            "version", F.lit(None).cast("string")
        )
        version = self._versions(suspicious, batch, progress)
        if truncate_position is not None:
            version = version.withColumn(
                "version", F.greatest(F.col("version"), F.lit(truncate_position))
            )
        combined = safe.withColumn("looked_up", F.lit(False)).unionByName(version)
        status = (
            F.when(F.col("version").isNull() | (position > F.col("version")), "apply")
            .when(position == F.col("version"), "duplicate")
            .otherwise("late")
        )
        return self._persist(combined.withColumn("status", status))  # the late events' join too

    def _versions(self, suspicious: DataFrame, batch: _Batch, progress: Progress) -> DataFrame:
        """Suspicious keys with ``version``: the key cache first, then the table's rows/deletes.

        Everything is read as of the snapshot the batch started from (the commit's check covers
        what comes after). The key cache only knows this checkpoint's writes: it decides alone
        only while no other writer changed data since this checkpoint's last commit.
        """
        from pyspark.sql import functions as F

        key = batch.key
        cache = (
            None if progress.foreign_since_ours else self._key_cache(batch, progress.cache_floor)
        )
        keys = suspicious.select(*cols(key))
        if cache is not None:
            cached = keys.join(cache, list(key), "inner")
            unresolved = keys.join(cache.select(*cols(key)), list(key), "left_anti")
        else:
            cached = None
            unresolved = keys
        start = batch.commit.start_snapshot_id
        reader = self.spark.read
        if start is not None:
            reader = reader.option("snapshot-id", start)
        current = reader.table(self.settings.table).select(*cols(key), F.col(POSITION).alias("v"))
        tombstones = self._tombstones(batch)
        versions = current if tombstones is None else current.unionByName(tombstones)
        unresolved = self._persist(unresolved)
        count = unresolved.count()
        listed = None
        if len(key) == 1 and count <= IN_LIST_PRUNES_MAX:
            # Iceberg skips files by their key bounds for a literal IN list of up to 200 values;
            # built as ONE expression (one py4j call); None: a key type without literals
            values = [r[0] for r in unresolved.collect()]  # at most 200 keys
            listed = in_list(key[0], values)
        if listed is not None:
            versions = versions.where(listed)
        elif count <= self.settings.lookup_in_list_max:
            # more keys prune no file: keep only their rows, without shuffling the table
            versions = versions.join(F.broadcast(unresolved), list(key), "left_semi")
        looked_up = (
            unresolved.join(versions, list(key), "left")
            .groupBy(*cols(key))
            .agg(F.max("v").alias("version"))
            .withColumn("looked_up", F.lit(True))
        )
        if cached is not None:
            looked_up = looked_up.unionByName(
                cached.withColumnRenamed("v", "version").withColumn("looked_up", F.lit(False))
            )
        return suspicious.join(looked_up, list(key), "left").withColumn(
            "looked_up", F.coalesce("looked_up", F.lit(False))
        )

    def _tombstones(self, batch: _Batch) -> DataFrame | None:
        """Deleted keys with the deleting event's position.

        From the event logs of every checkpoint that wrote the table (every delete ever
        ingested, so still there after rewrite_equality_deletes turned the equality deletes into
        position deletes; the table's ``sparkext.cdc.event-logs`` property lists them) and from
        the equality-delete files live in the snapshot the batch started from. Another
        checkpoint's batches count up to the last one it committed.
        """
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        key, batch_id = batch.key, batch.batch_id
        found: list[DataFrame] = []
        roots = {**batch.table.event_logs(), self.checkpoint_id: self._events_root()}
        # another writer's batch counts once committed (its log is written before the commit);
        # a checkpoint whose snapshots all expired counts whole
        committed = batch.table.committed_batches() if len(roots) > 1 else {}
        narrower = batch.table.key_was_narrower(key)
        for checkpoint, root in sorted(roots.items()):
            try:
                # the columns wanted, in the table's types: older batches' files may hold a
                # narrower type of a widened column (int before bigint), which no schema merge
                # of the footers accepts
                logs = _read_columns(
                    self.spark, [root], batch.columns, key, (OP, "string"),
                    (POSITION, "string"), ("batch", "int"), narrower_keys=narrower,
                    base_path=root,
                )  # fmt: skip
            except AnalysisException:  # no event log yet, or a removed checkpoint
                continue
            deleted = F.col(OP) == "d"
            if checkpoint == self.checkpoint_id:
                deleted = deleted & (F.col("batch") < batch_id)  # not this batch's own
            elif checkpoint in committed:
                deleted = deleted & (F.col("batch") <= committed[checkpoint])
            found.append(logs.where(deleted).select(*cols(key), F.col(POSITION).alias("v")))
        paths = batch.table.equality_delete_paths(batch.commit.start_snapshot_id)
        if paths:
            # files without a position (another engine's) read it as NULL, which never wins
            deletes = _read_columns(
                self.spark, paths, batch.columns, key, (POSITION, "string"), narrower_keys=narrower
            )
            found.append(
                deletes.where(F.col(POSITION).isNotNull()).select(
                    *cols(key), F.col(POSITION).alias("v")
                )
            )
        if not found:
            return None
        union = found[0]
        for more in found[1:]:
            union = union.unionByName(more)
        return union

    def _events_root(self) -> str:
        return f"{self.settings.checkpoint}/events"

    def _key_cache(self, batch: _Batch, floor: int | None = None) -> DataFrame | None:
        """Keys -> versions this checkpoint applied in its recent batches; only batches from
        ``floor`` on (committed after every other writer's change)."""
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        key, batch_id = batch.key, batch.batch_id
        path = self._key_cache_dir()
        try:  # "batch" comes from the batch=N directories
            cache = _read_columns(
                self.spark, [path], batch.columns, key, ("position", "string"), ("batch", "int"),
                narrower_keys=batch.table.key_was_narrower(key), base_path=path,
            )  # fmt: skip
        except AnalysisException:  # no cache yet
            return None
        keep_from = max(batch_id - self.settings.key_cache_batches, floor or 0)
        return (
            cache.where((F.col("batch") < batch_id) & (F.col("batch") >= keep_from))
            .groupBy(*cols(key))
            .agg(F.max("position").alias("v"))
        )

    def _write(
        self,
        batch: _Batch,
        decided: DataFrame,
        truncate: Truncate | None,
        events: DataFrame | None = None,
    ) -> _Written:
        """ONE job: the per-key decisions, the data and delete files and the key cache (written
        by the same tasks), with the batch's figures observed on the way; with ``events``, the
        batch's event log too (written by tasks of their own in the same job)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        table, columns, key = batch.table, batch.columns, batch.key
        batch_id = batch.batch_id
        observation = Observation()
        figures = _applied_figures()
        applied = decided.observe(observation, *figures).where(F.col("status") == "apply")
        self.progress(f"batch {batch_id}: writing files")
        wiped = self._wiped(batch.commit.start_snapshot_id, columns, truncate)
        rows = self._rows(applied, columns, key, wiped)
        event_log = None
        if events is not None:
            event_dir = self._event_log_dir(batch_id)
            remove_tree(event_dir)  # a batch written again, or replayed, logs its events anew
            token = uuid.uuid4().hex[:12]
            event_log = EventLog(Location.of(event_dir).uri, self.spark.version, token)
            logged = events.select(
                F.lit(EVENT_LOG).alias(KIND), *_event_log_columns(tuple(columns), key)
            )
            rows = rows.unionByName(logged.coalesce(self._event_log_files()))
        directory = table.data_directory()
        prefix = f"cdc-{self.checkpoint_id[:8]}-{batch_id:06d}-{uuid.uuid4().hex[:8]}"
        key_cache = self._key_cache_dir(batch_id)
        remove_tree(key_cache)  # a batch decided again, or replayed, starts its entries anew
        writer = file_writer(
            directory,
            batch.field_ids,
            prefix,
            table.partition_fields(),
            table.metrics_properties(),
            KeyLog(Location.of(key_cache).uri, tuple(key), POSITION, OP),  # absolute
            event_log,
        )
        written = map_in_arrow(rows, writer, FILE_SCHEMA_DDL)
        try:
            described = written.collect()  # one row per written file
        except Exception:
            remove_written(directory, prefix)  # files of the tasks that did finish
            raise
        files = [
            WrittenFile(
                r.path,
                r.kind,
                r.records,
                r.bytes,
                tuple(json.loads(r.partition or "[]")),
                r.metrics,
            )
            for r in described
            if r.kind in (DATA, EQUALITY_DELETES)
        ]
        # only the side files of this job's successful tasks: not a killed attempt's
        keep_only(key_cache, [r.path for r in described if r.kind == KEY_LOG])
        if event_log is not None:
            keep_only(event_log.directory, [r.path for r in described if r.kind == EVENT_LOG])
        stats = observed(observation, lambda: decided.agg(*figures).first())
        return _Written(files, stats, directory, prefix)

    def _discard(self, batch: _Batch, written: _Written) -> None:
        """The files of a write whose batch is decided again or failed: not committed, never will
        be. Best effort (an orphan is harmless): never hides the error that led here."""
        import contextlib

        with contextlib.suppress(Exception):
            batch.commit.discard(written.files)
        with contextlib.suppress(Exception):
            remove_written(written.directory, written.prefix)
        with contextlib.suppress(Exception):
            remove_tree(self._key_cache_dir(batch.batch_id))

    def _commit(
        self,
        batch: _Batch,
        typed: DataFrame,
        decided: DataFrame,
        truncate: Truncate | None,
        progress: Any,
        bounds: tuple[int | None, int | None, str],
        written: _Written,
    ) -> None:
        from pyspark.sql import functions as F

        commit, key = batch.commit, batch.key
        batch_id, per_partition = batch.batch_id, batch.per_partition
        files, stats = written.files, written.stats
        m = self.metrics
        m.inserted += stats.inserted or 0
        m.updated += stats.updated or 0
        m.deleted += stats.deleted or 0
        m.late += stats.late or 0
        m.duplicates += (stats.dup_keys or 0) + (stats.dup_in_batch or 0)
        m.lookups_made += stats.lookups or 0
        m.lookups_avoided += (stats.keys or 0) - (stats.lookups or 0)
        m.add_times(stats.min_time, stats.max_time)

        if stats.late or stats.dup_keys:
            try:
                self._write_late(typed, decided, key, batch_id)
            except BaseException:
                self._discard(batch, written)  # never committed: no file of it may stay
                raise
        applied = decided.where(F.col("status") == "apply")  # not observed: read again below
        _crash_point("after-write")

        truncate_position = truncate.position if truncate else None
        new_position = max_position(progress.max_position, stats.max_position, truncate_position)
        merged = dict(progress.source_progress)
        for partition, pos in per_partition.items():
            if pos is not None:
                merged[partition] = max_position(merged.get(partition), pos) or pos
        from sparkext.iceberg import cdc_table as keys

        summary = {
            keys.CHECKPOINT_ID: self.checkpoint_id,
            keys.BATCH_ID: str(batch_id),
            keys.SOURCE_PROGRESS: json.dumps(merged, sort_keys=True),
        }
        if new_position is not None:
            summary[keys.MAX_POSITION] = new_position
        truncate_mark = max_position(progress.truncate_position, truncate_position)
        if truncate_mark is not None:
            summary[keys.TRUNCATE_POSITION] = truncate_mark
        low, high, events_location = bounds
        summary[keys.EVENTS_LOCATION] = events_location
        if low is not None:
            summary[keys.EVENT_TIME_MIN] = str(low)
            summary[keys.EVENT_TIME_MAX] = str(high)
            so_far = progress.event_time_max_so_far
            summary[keys.EVENT_TIME_MAX_SO_FAR] = str(high if so_far is None else max(so_far, high))
        if not files and truncate_position is None and low is None:
            return  # no valid event at all (only rejects or tombstones): nothing to record
        # A batch of only late or duplicate events still commits (no files): its snapshot
        # carries the event log an event-time snapshot needs, and replay safety stays uniform.
        self.progress(f"batch {batch_id}: committing {len(files)} file(s)")
        from sparkext.errors import CommitStateUnknownError

        def check(changes: Sequence[ConcurrentChange]) -> None:
            self._check_changes(
                changes, applied, key, truncate is not None, progress.truncate_position
            )

        try:
            snapshot = commit.commit(
                files,
                key,
                summary,
                truncate=truncate is not None and truncate.all,
                check=check,
                event_log=(self.checkpoint_id, self._events_root()),
                what=f"micro-batch {batch_id}",
            )
        except CommitStateUnknownError:
            raise  # the commit may have landed: its files must stay
        except Exception:
            commit.discard(files)  # definitely not committed: leave no orphan files
            raise
        m.commits += 1
        m.snapshot_ids.append(snapshot)
        self.last_committed_batch = batch_id
        self.progress(f"batch {batch_id}: committed snapshot {snapshot}")
        _crash_point("after-commit")
        self._prune_key_cache(batch_id)

    def _write_late(
        self, typed: DataFrame, decided: DataFrame, key: Sequence[str], batch_id: int
    ) -> None:
        """The batch's late and duplicate events, with their images, under
        ``<checkpoint>/late/``."""
        from pyspark.sql import functions as F

        # every event at or below its key's current version, with its images: kept, not lost
        versions = decided.where(F.col("version").isNotNull()).select(*cols(key), "version")
        skipped = typed.where(F.col("op") != "t").join(versions, list(key))
        skipped.where(F.col("position") <= F.col("version")).select(
            *cols(key),
            F.when(F.col("position") == F.col("version"), "duplicate")
            .otherwise("late")
            .alias("status"),
            "op",
            "position",
            "event_time_ms",
            "version",
            "before_json",
            "after_json",
        ).coalesce(1).write.mode("overwrite").parquet(
            f"{self.settings.checkpoint}/late/batch={batch_id}"
        )

    def _fill_unavailable(
        self, typed: DataFrame, batch: _Batch, checks: Mapping[str, Callable[[str], Column]]
    ) -> DataFrame:
        """Replace Debezium's placeholder for a value it does not have (PostgreSQL TOAST: an
        update that did not touch a large column) by the value the row had just before the
        event: the event's own before-image when it has the column (REPLICA IDENTITY FULL), else
        the newer of (the newest earlier event of the key in this batch that carried it, the
        table's row as of the planned snapshot — read by a join on executors, only for keys with
        placeholders). A key with neither keeps NULL."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        key = list(batch.key)
        order = Window.partitionBy(*cols(key)).orderBy("position", "ts_ms")
        earlier = order.rowsBetween(Window.unboundedPreceding, -1)
        carries = F.col("op").isin("c", "r", "u")
        any_missing = F.lit(False)
        helpers: list[Column] = []  # one projection: a withColumn per column re-analyses the plan
        for name, is_unavailable in checks.items():
            missing = F.coalesce(is_unavailable("after"), F.lit(False))
            any_missing = any_missing | missing
            # wrapped in a struct: a real NULL is a value, a missing one is not
            candidate = F.when(
                carries & ~missing, F.struct(col("after", name).alias("v"), F.col("position"))
            )
            before_has = F.coalesce(
                F.array_contains(F.json_object_keys("before_json"), name), F.lit(False)
            ) & ~F.coalesce(is_unavailable("before"), F.lit(False))
            helpers.append(
                F.last(candidate, ignorenulls=True).over(earlier).alias(f"__prev_{name}")
            )
            helpers.append(
                F.when(before_has, F.struct(col("before", name).alias("v"))).alias(
                    f"__before_{name}"
                )
            )
        filled = typed.select("*", *helpers, any_missing.alias("__toasted"))
        stored = self._stored_values(filled, batch, checks)
        if stored is not None:
            filled = filled.join(stored, key, "left")
        replaced = []
        for name in batch.columns:
            value = col("after", name)
            if name in checks:
                previous = col(f"__prev_{name}")
                fallback = F.when(col(f"__before_{name}").isNotNull(), col(f"__before_{name}", "v"))
                if stored is not None:
                    newer = F.col("__stored_position").isNull() | (
                        col(f"__prev_{name}", "position") > F.col("__stored_position")
                    )
                    fallback = fallback.when(
                        previous.isNotNull() & newer, col(f"__prev_{name}", "v")
                    ).otherwise(col(f"__stored_{name}"))
                else:
                    fallback = fallback.otherwise(col(f"__prev_{name}", "v"))
                missing = F.coalesce(checks[name]("after"), F.lit(False))
                value = F.when(missing, fallback).otherwise(value)
            replaced.append(value.alias(name))
        return filled.select(  # the input's columns, in its order, ``after`` filled
            *[
                F.struct(*replaced).alias("after") if c == "after" else F.col(f"`{c}`")
                for c in typed.columns
            ]
        )

    def _stored_values(
        self, filled: DataFrame, batch: _Batch, checks: Mapping[str, Callable[[str], Column]]
    ) -> DataFrame | None:
        """The table's values of the TOASTable columns and the row's position, as of the planned
        snapshot, for the keys with placeholders (a column the batch adds reads NULL)."""
        from pyspark.sql import functions as F

        start = batch.commit.start_snapshot_id
        if start is None:
            return None
        key = list(batch.key)
        keys = filled.where("__toasted").select(*cols(key)).distinct()
        current = self.spark.read.option("snapshot-id", start).table(self.settings.table)
        present = set(current.columns)
        return current.join(keys, key, "left_semi").select(
            *cols(key),
            F.col(POSITION).alias("__stored_position"),
            *(
                (col(name) if name in present else F.lit(None)).alias(f"__stored_{name}")
                for name in checks
            ),
        )

    def _check_changes(
        self,
        changes: Sequence[ConcurrentChange],
        applied: DataFrame,
        key: Sequence[str],
        truncating: bool,
        planned_truncate: str | None = None,
    ) -> None:
        """Raise :class:`KeysChanged` when a snapshot committed since the plan touched a key this
        batch writes (the batch must be decided again); pass when the writers' keys are disjoint.

        Every key an ingest_cdc commit changes is in its equality-delete files, so overlap is a
        semi-join of those files' keys with the batch's (on executors). Compactions and delete
        rewrites ("replace") change no row; other writers' commits, truncates and row-level
        rewrites cannot be read cheaply and always count as touching.
        """
        if truncating and changes:  # a truncate removes the planned files: any change counts
            first = changes[0]
            raise KeysChanged(f"snapshot {first.snapshot_id} ({first.operation}) was committed")
        changing = [c for c in changes if c.operation != "replace"]
        if not changing:
            return
        opaque = [
            c
            for c in changing
            if c.checkpoint_id is None
            or c.removed_data_files
            or (  # another writer's truncate reaches keys it did not list
                c.truncate_position is not None
                and (planned_truncate is None or c.truncate_position > planned_truncate)
            )
        ]
        if opaque:
            first = (opaque or changing)[0]
            raise KeysChanged(
                f"snapshot {first.snapshot_id} ({first.operation}) was committed meanwhile"
            )
        paths = sorted({p for c in changing for p in c.equality_delete_paths})
        if not paths:
            return
        key_types = {f.name: f.dataType.simpleString() for f in applied.select(*cols(key)).schema}
        touched = _read_columns(self.spark, paths, key_types, key)
        if not touched.join(applied.select(*cols(key)), list(key), "left_semi").isEmpty():
            raise KeysChanged(
                f"another writer changed keys of this batch (snapshot {changing[-1].snapshot_id})"
            )

    def _wiped(
        self, planned: int | None, columns: Mapping[str, str], truncate: Truncate | None
    ) -> DataFrame | None:
        """Rows a truncate removes when newer rows may exist: older than its position."""
        from pyspark.sql import functions as F

        if truncate is None or truncate.all:
            return None
        reader = self.spark.read
        if planned is not None:  # the snapshot the batch was planned on, like every read
            reader = reader.option("snapshot-id", planned)
        current = reader.table(self.settings.table)
        return current.where(F.col(POSITION) < F.lit(truncate.position)).select(
            F.lit(EQUALITY_DELETES).alias(KIND),
            *(col(c) for c in columns),
            F.lit("t").alias(OP),
            F.timestamp_millis(F.lit(truncate.event_time_ms).cast("bigint")).alias(EVENT_TIME),
            F.lit(truncate.position).alias(POSITION),
        )

    def _rows(
        self,
        applied: DataFrame,
        columns: Mapping[str, str],
        key: Sequence[str],
        wiped: DataFrame | None,
    ) -> DataFrame:
        """Data rows (after-images) and equality-delete rows (key + before-image) with __kind."""
        rows = _file_rows(tuple(columns), tuple(key))
        both = applied.select(rows)
        if wiped is not None:
            both = both.unionByName(wiped)
        # already hash-partitioned by key from the dedup: narrow to a few files, no new shuffle
        return both.coalesce(
            max(1, self.spark.sparkContext.defaultParallelism // 2)
        ).sortWithinPartitions(*cols(key))

    def _event_log_dir(self, batch_id: int) -> str:
        return f"{self._events_root()}/batch={batch_id}"

    def _write_event_log(self, typed: DataFrame, batch: _Batch) -> str:
        """Every valid event of the batch, late and duplicate ones included, as Parquet (by a
        job of its own; a common batch's is written by its file writers, see :meth:`_write`).

        One row per event: key and user columns (the after-image; only the key for deletes,
        nothing for truncates), op, event time and source position. The snapshot summary points
        here (``sparkext.cdc.events-location``); snapshot_as_of_event_time replays these files.
        """

        path = self._event_log_dir(batch.batch_id)
        typed.select(*_event_log_columns(tuple(batch.columns), batch.key)).coalesce(
            self._event_log_files()
        ).write.mode("overwrite").parquet(path)
        return path

    def _event_log_files(self) -> int:
        """Files of a batch's event log, written by the typing tasks themselves (no shuffle):
        one per 25,000 events, at most one per core, so a big batch is typed in parallel and a
        small one (or one of many small input partitions) does not leave small files. A batch
        typed with a guess is decoded by these tasks too: as many as its input has (up to one
        per core), its size being known only after them."""
        parallelism = self.spark.sparkContext.defaultParallelism
        wanted = max(self._input_partitions, -(-self._batch_events // EVENT_LOG_EVENTS_PER_FILE))
        return max(1, min(parallelism, wanted))

    def _key_cache_dir(self, batch_id: int | None = None) -> str:
        root = f"{self.settings.checkpoint}/{KEY_CACHE}"
        return root if batch_id is None else f"{root}/batch={batch_id}"

    def _prune_key_cache(self, batch_id: int) -> None:
        remove_batches_before(self._key_cache_dir(), batch_id - self.settings.key_cache_batches)
        # the key cache Spark wrote before the writers kept it (a cache: only lookups it saved)
        remove_tree(f"{self.settings.checkpoint}/{LEGACY_KEY_CACHE}")


def observed(observation: Observation, compute: Callable[[], Any]) -> SimpleNamespace:
    """The figures ``observation`` collected during a finished job, or ``compute()``'s row.

    Spark reports observed metrics through its listener bus, a moment after the job; waiting is
    bounded because a plan Spark proves empty may lose its observing node, and then no report
    ever comes (not seen here; ``compute`` is then one small extra job)."""
    import threading

    found: dict[str, Any] = {}
    waiter = threading.Thread(
        target=lambda: found.update(observed_metrics(observation)), daemon=True
    )
    waiter.start()
    waiter.join(OBSERVED_WAIT_S)
    if not waiter.is_alive() and found:
        return SimpleNamespace(**found)
    return SimpleNamespace(**compute().asDict())


@reused
def _decoded_facts() -> tuple[tuple[Column | str, ...], tuple[Column, ...]]:
    """Grouping and figures of the decoded batch's facts: schemas, rejects, position families,
    progress per source partition."""
    from pyspark.sql import functions as F

    groups = (
        F.col("reject").isNotNull().alias("bad"),
        F.substring_index("position", ":", 1).alias("family"),
        "source_partition",
        "value_schema",
        "row_types",
    )
    figures = (
        F.count(F.lit(1)).alias("n"),
        F.max("position").alias("p"),
        F.min("position").alias("lo"),
    )
    return groups, figures


@reused
def _guessed_facts(family: str | None, partitions: tuple[str, ...]) -> tuple[Column, ...]:
    """The facts of a batch typed with a guess, observed as it is typed: events, good ones (not
    rejected, of ``family`` or of none), events of another family, the good events' schemas and
    row signatures, their lowest position, and their highest per source partition (``p<i>`` for
    ``partitions[i]``; ``elsewhere``: good events of other partitions)."""
    from pyspark.sql import functions as F

    found = F.substring_index("position", ":", 1)
    other = found.isNotNull()
    if family is not None:
        other = other & (found != F.lit(family))
    accepted = F.col("reject").isNull()
    good = accepted & ~other
    partition = F.col("source_partition")
    elsewhere = good & ~partition.isin(*partitions) if partitions else good
    return (
        F.count(F.lit(1)).alias("n"),
        F.sum(good.cast("int")).alias("good"),
        F.sum(F.when(accepted, _fingerprint())).alias("print"),  # the rows that are typed
        F.sum((accepted & other).cast("int")).alias("others"),
        F.sum(elsewhere.cast("int")).alias("elsewhere"),
        F.min(F.when(good, F.col("position"))).alias("lo"),
        F.collect_set(F.when(good, F.col("value_schema"))).alias("schemas"),
        F.collect_set(F.when(good, F.col("row_types"))).alias("rows"),
        *(
            F.max(F.when(good & (partition == F.lit(p)), F.col("position"))).alias(f"p{i}")
            for i, p in enumerate(partitions)
        ),
    )


def _fingerprint() -> Column:
    """A row's share of a batch's fingerprint: the hash of its source position, summed without
    overflow (a sum of 2^64-range values in decimal(38,0) fits 10^19 rows)."""
    from pyspark.sql import functions as F

    return F.xxhash64("position").cast("decimal(38,0)")


@reused
def _typed_facts(
    columns: tuple[tuple[str, str], ...], key: tuple[str, ...], placeholder: str
) -> tuple[Column, ...]:
    """The typed batch's small facts: its rows and their fingerprint (:func:`_fingerprint`),
    those missing a key, its last truncate, its event-time bounds and how many after-images
    carry the unavailable-value placeholder."""
    from pyspark.sql import functions as F

    toastable = _unavailable_checks(dict(columns), key, placeholder)
    unavailable = F.lit(False)
    for is_unavailable in toastable.values():
        unavailable = unavailable | F.coalesce(is_unavailable("after"), F.lit(False))
    is_truncate = F.col("op") == "t"
    return (
        F.count(F.lit(1)).alias("rows"),
        F.sum(_fingerprint()).alias("print"),
        F.sum(F.col("missing_key").cast("int")).alias("missing"),
        F.max(F.when(is_truncate, F.col("position"))).alias("p"),
        F.max_by(
            F.when(is_truncate, F.col("event_time_ms")), F.when(is_truncate, F.col("position"))
        ).alias("t"),
        # bounds over every event of the batch, late ones included: the event log holds them
        F.min(F.when(~F.col("missing_key"), F.col("event_time_ms"))).alias("low"),
        F.max(F.when(~F.col("missing_key"), F.col("event_time_ms"))).alias("high"),
        F.sum(unavailable.cast("int")).alias("unavailable"),
    )


@reused
def _per_key() -> tuple[Column, ...]:
    """Aggregates of a key's changes in the batch: its last change, its first before-image,
    how many events and which positions, its event-time range."""
    from pyspark.sql import functions as F

    order = F.struct("position", "ts_ms")
    return (
        F.max_by(F.struct("op", "position", "event_time_ms", "after"), order).alias("last"),
        F.min_by("before", order).alias("first_before"),
        F.count(F.lit(1)).alias("events"),
        F.array_distinct(F.collect_list("position")).alias("all_positions"),
        F.min("event_time_ms").alias("min_time"),
        F.max("event_time_ms").alias("max_time"),
    )


@reused
def _applied_figures() -> tuple[Column, ...]:
    """The figures of a decided batch, observed as its files are written."""
    from pyspark.sql import functions as F

    applied = F.col("status") == "apply"
    return (
        F.sum(F.when(applied & F.col("last.op").isin("c", "r"), 1).otherwise(0)).alias("inserted"),
        F.sum(F.when(applied & (F.col("last.op") == "u"), 1).otherwise(0)).alias("updated"),
        F.sum(F.when(applied & (F.col("last.op") == "d"), 1).otherwise(0)).alias("deleted"),
        F.sum(F.size(F.filter("all_positions", lambda p: p < F.col("version")))).alias("late"),
        F.sum(F.size(F.filter("all_positions", lambda p: p == F.col("version")))).alias("dup_keys"),
        F.sum(F.col("events") - F.size("all_positions")).alias("dup_in_batch"),
        F.sum(F.when(F.col("looked_up"), 1).otherwise(0)).alias("lookups"),
        F.count(F.lit(1)).alias("keys"),
        F.min(F.when(applied, F.col("min_time"))).alias("min_time"),
        F.max(F.when(applied, F.col("max_time"))).alias("max_time"),
        F.max(F.col("last.position")).alias("max_position"),
    )


@reused
def _file_rows(columns: tuple[str, ...], key: tuple[str, ...]) -> Column:
    """Per decided key, its equality-delete row (key + before-image) and, unless it
    was deleted, its data row (after-image), each with ``__kind``: one branch (each key exploded
    into its rows), not a union of two readings of the decided keys, so what is observed on
    them is counted once."""
    from pyspark.sql import functions as F

    system = [
        F.col("last.op").alias(OP),
        F.timestamp_millis(F.col("last.event_time_ms")).alias(EVENT_TIME),
        F.col("last.position").alias(POSITION),
    ]
    data = F.struct(
        F.lit(DATA).alias(KIND),
        *(col("last", "after", c).alias(c) for c in columns),
        *system,
    )
    delete = F.struct(
        F.lit(EQUALITY_DELETES).alias(KIND),
        *((col(c) if c in key else col("first_before", c)).alias(c) for c in columns),
        *system,
    )
    return F.inline(
        F.when(F.col("last.op") == "d", F.array(delete)).otherwise(F.array(delete, data))
    )


@reused
def _event_log_columns(columns: tuple[str, ...], key: tuple[str, ...]) -> tuple[Column, ...]:
    """An event-log row of a typed event: key and user columns (the after-image), op, event
    time and source position."""
    from pyspark.sql import functions as F

    return (
        *((col(c) if c in key else col("after", c)).alias(c) for c in columns),
        F.col("op").alias(OP),
        F.timestamp_millis(F.col("event_time_ms")).alias(EVENT_TIME),
        F.col("position").alias(POSITION),
    )


def _all_applied(grouped: DataFrame) -> DataFrame:
    """Every key's last change applies: none is late, none was looked up."""
    return grouped.select("*", *_applied_columns())


@reused
def _applied_columns() -> tuple[Column, ...]:
    """``status``, ``looked_up`` and ``version`` of a key whose last change applies."""
    from pyspark.sql import functions as F

    return (
        F.lit("apply").alias("status"),
        F.lit(False).alias("looked_up"),
        F.lit(None).cast("string").alias("version"),
    )


def _checkpoint_id(spark: SparkSession, checkpoint: str) -> str:
    from sparkext.actions.cdc.checkpoint import read_or_create_id

    return read_or_create_id(checkpoint, lambda: str(uuid.uuid4()))


def _with_arrival(decoded: DataFrame, batch_id: int) -> DataFrame:
    """Positions of the ``t`` family (commit time only) get arrival as a tie-breaker: the batch,
    the file, the record's place in the file; a second change in the same millisecond is newer,
    not a duplicate."""
    from pyspark.sql import functions as F

    from sparkext.planning.positions import TIME_FAMILY

    arrival = F.concat(  # file names of Kafka Connect sinks sort by partition and offset
        F.col("position"),
        F.lit(f":{batch_id:010d}:"),
        F.coalesce(F.col("source_file"), F.lit("")),
        F.lit(":"),
        F.lpad(F.monotonically_increasing_id().cast("string"), 20, "0"),  # order in the file
    )
    return decoded.withColumn(
        "position",
        F.when(F.col("position").startswith(f"{TIME_FAMILY}:"), arrival).otherwise(
            F.col("position")
        ),
    )


def _reject_other_families(
    marked: DataFrame, chosen: str | None, seen: set[str | None]
) -> DataFrame:
    """``reject`` set for events whose position cannot be ordered against the table's."""
    from pyspark.sql import functions as F

    from sparkext.planning.positions import incomparable

    others = sorted(f for f in seen if f is not None and f != chosen)
    if chosen is None or not others:
        return marked
    reasons = F.create_map(
        *(part for other in others for part in (F.lit(other), F.lit(incomparable(other, chosen))))
    )
    reason = reasons[F.substring_index("position", ":", 1)]  # NULL for the table's own family
    return marked.withColumn("reject", F.coalesce(F.col("reject"), reason))


def _split_key_changes(typed: DataFrame, key: Sequence[str]) -> DataFrame:
    """An update whose before-image has another key also deletes the old key (at the same
    position): a primary-key change is a delete of the old row plus an upsert of the new one.

    One branch (each such update expanded into two rows), not a union of two readings of
    ``typed``: what is observed on ``typed`` is counted once."""
    schema = typed.schema
    return typed.select(_key_split(tuple(schema.names), tuple(key), schema["after"].dataType))


@reused
def _key_split(names: tuple[str, ...], key: tuple[str, ...], after_type: DataType) -> Column:
    """:func:`_split_key_changes`' projection (built once per schema): ``inline`` of one row,
    or two (the old key's delete first) for an update that moves its key."""
    from pyspark.sql import functions as F

    present = F.lit(True)
    moved = F.lit(False)
    for k in key:
        present = present & col("before", k).isNotNull()
        moved = moved | ~col("before", k).eqNullSafe(col(k))
    splits = (F.col("op") == "u") & present & moved
    row = F.struct(*(col(name).alias(name) for name in names))
    old_key = F.struct(
        *(
            F.lit("d").alias(name)
            if name == "op"
            else F.lit(None).cast(after_type).alias(name)
            if name == "after"
            else col("before", name).alias(name)
            if name in key
            else col(name).alias(name)
            for name in names
        )
    )
    return F.inline(F.when(splits, F.array(old_key, row)).otherwise(F.array(row)))


def _unavailable_checks(
    columns: Mapping[str, str], key: Sequence[str], placeholder: str
) -> dict[str, Callable[[str], Column]]:
    """Column -> (row struct name -> "the value is Debezium's placeholder") for each column that can
    carry it, in the encodings Debezium 3.x's PostgreSQL connector uses for an unchanged TOASTed
    value (checked against the real connector, tests/spark/test_cdc_real_postgres.py):

    * text, varchar, xml, json, jsonb: the placeholder string; hstore: ``{"P":"P"}`` (as JSON
      text, and as a map kept as JSON text);
    * bytea: the placeholder's bytes (``hex:`` placeholders as Debezium decodes them);
    * text[], varchar[], jsonb[], bytea[]: a one-element array of the placeholder (its bytes);
      uuid[]: a one-element array of the name-based UUID of its bytes;
    * int[], bigint[], date[]: the placeholder's character codes as the elements.

    Arrays of other element types (smallint, numeric, float, boolean, timestamps) arrive as NULL
    under REPLICA IDENTITY DEFAULT: no consumer can tell them from a real NULL (the reference
    page says to use REPLICA IDENTITY FULL, with which Debezium sends the old values itself)."""
    from pyspark.sql import functions as F

    if placeholder.startswith("hex:"):  # Debezium decodes it, and uses the bytes as text too
        raw = bytes.fromhex(placeholder[4:])
        placeholder = raw.decode("utf-8", "replace")
    else:
        raw = placeholder.encode("utf-8")
    as_map = "{" + f"{_json_text(placeholder)}:{_json_text(placeholder)}" + "}"
    name_uuid = str(uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3))

    def codes(spark_type: str) -> Column:
        return F.array(*(F.lit(c) for c in raw)).cast(spark_type)

    checks: dict[str, Callable[[str], Column]] = {}
    for name, spark_type in columns.items():
        if name in key:
            continue
        if spark_type == "string":
            checks[name] = lambda row, n=name: col(row, n).isin(placeholder, as_map)
        elif spark_type == "binary":
            checks[name] = lambda row, n=name: col(row, n) == F.lit(bytearray(raw))
        elif spark_type == "array<string>":
            checks[name] = lambda row, n=name: (
                (F.size(col(row, n)) == 1) & col(row, n)[0].isin(placeholder, name_uuid)
            )
        elif spark_type == "array<binary>":
            checks[name] = lambda row, n=name: col(row, n) == F.array(F.lit(bytearray(raw)))
        elif spark_type in ("array<int>", "array<bigint>"):
            checks[name] = lambda row, n=name, t=spark_type: col(row, n) == codes(t)
        elif spark_type == "array<date>":
            dates = F.transform(codes("array<int>"), F.date_from_unix_date)
            checks[name] = lambda row, n=name, d=dates: col(row, n) == d
    return checks


def _json_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _read_columns(
    spark: SparkSession,
    paths: Sequence[str],
    types: Mapping[str, str],
    key: Sequence[str],
    *extra: tuple[str, str],
    narrower_keys: bool = False,
    base_path: str | None = None,
) -> DataFrame:
    """The key columns (typed as ``types`` says: the table's current types) and ``extra``
    (name, type) columns of Parquet files sparkext wrote over the table's life.

    Read with this schema, never a footer's or a merge of footers: a column widened since
    (int before ``ALTER … TYPE bigint``) is then simply not read unless it is a key. Spark 3.5's
    Parquet readers cannot read int32 as bigint, so where a key column was narrower once
    (``narrower_keys``) the files' own key types are read first (their footers, on the
    executors), and each group of files is read with its types and cast."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    def schema(key_types: Mapping[str, str]) -> StructType:
        fields = [StructField(k, _parse_datatype_string(key_types[k])) for k in key]
        fields += [StructField(name, _parse_datatype_string(kind)) for name, kind in extra]
        return StructType(fields)

    reader = spark.read if base_path is None else spark.read.option("basePath", base_path)
    whole = reader.schema(schema(types)).parquet(*paths)
    if not narrower_keys:
        return whole
    files = whole.inputFiles()
    if not files:
        return whole
    found = (
        spark.sparkContext.parallelize(
            files, min(len(files), spark.sparkContext.defaultParallelism)
        )
        .map(lambda path, k=tuple(key): (path, _file_key_types(path, k)))
        .collect()
    )
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for path, file_types in found:
        groups.setdefault(file_types, []).append(path)
    parts = []
    for file_types, group in sorted(groups.items()):
        as_written = {**types, **dict(file_types)}
        part = reader.schema(schema(as_written)).parquet(*group)
        parts.append(
            part.select(
                *(col(c).cast(types[c]).alias(c) if c in key else col(c) for c in part.columns)
            )
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union


def _file_key_types(path: str, key: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(column, Spark type) of the key columns a Parquet file holds (on an executor)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_type

    location = Location.of(path)
    with location.filesystem.open_input_file(location.path) as handle:
        arrow = pq.read_schema(handle)
    return tuple(
        (k, from_arrow_type(arrow.field(k).type).simpleString()) for k in key if k in arrow.names
    )


def _schema_order(fact: Any) -> tuple[str, str]:
    """Facts in one order, whichever path found them: when a batch carries several schemas, the
    first one of a column decides between incompatible types and the order of added columns."""
    return (fact.value_schema or "", fact.row_types or "")


def _family(high_water_mark: str | None, good: Sequence[Any]) -> str | None:
    """The position family of the table: the one it holds, else the batch's commonest."""
    held = family(high_water_mark)
    if held is not None:
        return held
    counts: dict[str, int] = {}
    for f in good:
        if f.family is not None:
            counts[f.family] = counts.get(f.family, 0) + f.n
    return max(sorted(counts), key=lambda name: counts[name]) if counts else None
