"""The CDC pipeline: a Structured Streaming file source whose micro-batches become Iceberg commits.

Floor: actions (driver side of ingest_cdc). :class:`Ingestor` keeps what lives as long as the
stream (settings, running totals, the guesses it is handed, the newest batch it committed) and
runs each micro-batch through the stages with a :class:`~.state.BatchState` created for it.

Per micro-batch (``Ingestor.process``), all data work on executors:

1. decode JSON lines (``mapInArrow``); rejects go to ``<checkpoint>/rejected/``;
2. type the rows (Connect schema, or JSON inference) and evolve the table schema if needed, typed
   with the facts of the table's last batch in this process and checked against the batch's own
   facts, observed on the way (typed again if they differ: guess.py);
3. keep the last change per key by source position (Liulishuo's row_number dedup);
4. compare keys that may be out of order (position at or below the table's high-water mark) with
   their current version: the key cache first (keys of recent batches), then the table; late and
   duplicate events are recorded in ``<checkpoint>/late/`` and not applied (Yanxuan; decide.py);
5. write data files (after-images) and equality-delete files (key + full before-image, Bilibili)
   on executors (write.py), and commit them on the driver as ONE transaction with the source
   progress in the snapshot summary (commit.py). A batch whose id the table already records is
   skipped (replay safety).

The common batch (no truncate, no TOASTed value, every change newer than the table) is ONE job:
steps 1-5 and the event log (every valid event, written by tasks of the same job), decided
before its facts are known and decided and written again when they say it was not common.
"""

from __future__ import annotations

import copy
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from sparkext.actions.cdc.checkpoint import read_or_create_id
from sparkext.actions.cdc.ingest import table as target
from sparkext.actions.cdc.ingest.columns import (
    SYSTEM_NAMES,
    all_applied,
    per_key,
    reject_other_families,
    split_key_changes,
    with_arrival,
)
from sparkext.actions.cdc.ingest.commit import commit_batch
from sparkext.actions.cdc.ingest.decide import decide
from sparkext.actions.cdc.ingest.figures import (
    DecodedFact,
    GuessedFacts,
    TypedFacts,
    decoded_facts,
    guessed_facts,
    observed,
    typed_facts,
)
from sparkext.actions.cdc.ingest.guess import (
    FoundTypes,
    Guess,
    GuessCache,
    GuessKey,
    Misguessed,
    check,
)
from sparkext.actions.cdc.ingest.state import NO_HOOKS, BatchState, Context, Hooks, Plan, Written
from sparkext.actions.cdc.ingest.toast import fill_unavailable, unavailable_checks
from sparkext.actions.cdc.ingest.write import (
    discard,
    record_rejects,
    write,
    write_event_log,
)
from sparkext.actions.cdc.model import Metrics, Settings, Truncate, batch_types, max_position
from sparkext.actions.cdc.types import typed_rows
from sparkext.errors import BatchOutdatedError, CommitConflictError, IngestError
from sparkext.executors.cdc.decode import DECODED_DDL, decode_documents, decode_lines
from sparkext.identifiers import cols
from sparkext.planning.cdc_schema import plan_schema
from sparkext.planning.positions import NAMES, family
from sparkext.spark.cancellation import raise_if_cancelled
from sparkext.spark.observe import input_partitions, release_proxies, same_session
from sparkext.spark.reused import pinned_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.iceberg.cdc_table import CdcTable

T = TypeVar("T")
# a guessed batch's check, called once its typing job ran: its state and progress per partition
Confirm = Callable[[BatchState, TypedFacts], tuple[BatchState, Mapping[str, str]]]

REPLANS = 8  # a batch whose keys another writer changed meanwhile is decided again
_BACKOFF_S = (0.2, 5.0)  # between plans, doubled each time, with jitter: two writers on the
# same keys stop colliding in lockstep (a slow writer used to run out of plans under load)
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


class Ingestor:
    """Processes micro-batches for one table and one checkpoint; keeps running totals.

    ``guesses``: the guesses it types batches with, held by whoever needs them to outlive this
    object (one ``CALL`` makes one Ingestor; the stream module keeps the process's); by default
    its own. ``hooks``: named points of a batch (tests stop the process there)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        progress: Callable[[str], None],
        *,
        guesses: GuessCache | None = None,
        hooks: Hooks = NO_HOOKS,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.progress = progress
        self.metrics = Metrics()
        self.error: BaseException | None = None
        self.guesses = guesses if guesses is not None else GuessCache()
        self.checkpoint_id = _checkpoint_id(settings.checkpoint)
        self.context = Context(spark, settings, self.checkpoint_id, progress, hooks)
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
            release_proxies()  # the batch's Java objects, not at Python's next full GC

    def _process(self, lines: DataFrame, batch_id: int) -> None:
        state = BatchState(batch_id)  # this batch's, and only this batch's
        try:
            self._ingest(state, lines)
        finally:
            state.persisted.release()

    def _ingest(self, state: BatchState, lines: DataFrame) -> None:
        from pyspark.sql import functions as F

        batch_id = state.batch_id
        self.progress(f"batch {batch_id}: decoding")
        table = target.load_table(self.context)
        held = table.progress(self.checkpoint_id) if table is not None else None
        if held is not None and held.batches.get(self.checkpoint_id, -1) >= batch_id:
            self.metrics.batches_replayed += 1  # committed before a crash: never apply twice
            return
        decoder = decode_documents if self.settings.input_format == "json-files" else decode_lines
        # pyspark's stubs want Iterable -> Iterable; the decoders take and give iterators
        mapped = lines.mapInArrow(decoder, DECODED_DDL)  # type: ignore[arg-type]
        decoded = with_arrival(mapped, batch_id).persist()
        try:
            marked = self._mark_rejects(decoded)
            held_family = family(held.max_position) if held else None
            guess = self._guess(table, held_family)
            if table is not None and guess is not None:
                saved = copy.deepcopy(self.metrics)
                # the typing job decodes too: never in fewer tasks than the input has
                guessing = replace(state, input_partitions=input_partitions(decoded))
                known_table, known_guess = table, guess
                try:
                    self._replanning(
                        guessing,
                        table,
                        lambda: self._guessed(
                            guessing, known_table, marked, known_guess, held_family is not None
                        ),
                    )
                    return
                except Misguessed as wrong:
                    self.metrics.__dict__.update(saved.__dict__)
                    state.persisted.release()
                    self.progress(f"batch {batch_id}: {wrong}; typing it again")
            # one pass for the small facts: schemas, rejects, position families, progress per
            # source partition
            groups, figures = decoded_facts()
            facts = [  # distinct schemas x families x source partitions: a handful of rows
                DecodedFact.of(row.asDict())
                for row in marked.groupBy(*groups).agg(*figures).collect()
            ]
            chosen = _family(held.max_position if held else None, [f for f in facts if not f.bad])
            marked = reject_other_families(marked, chosen, {f.family for f in facts})
            valid = marked.where(F.col("reject").isNull())
            good = [f for f in facts if not f.bad and (chosen is None or f.family == chosen)]
            state = self._take_facts(
                state,
                marked,
                sum(f.events for f in facts),
                sum(f.events for f in good),
                min((f.lowest for f in good if f.lowest is not None), default=None),
            )
            per_partition: dict[str, str] = {}
            for f in good:
                if f.highest is not None:
                    per_partition[f.source_partition] = max(
                        f.highest, per_partition.get(f.source_partition, f.highest)
                    )
            found = batch_types(sorted(good, key=_schema_order), self.settings)
            if table is None:
                if not found[0]:
                    return
                table = target.create(self.context, valid, found[0])
            planned, facts_state = table, state
            state = self._replanning(
                state,
                table,
                lambda: self._plan_and_apply(facts_state, planned, valid, found, per_partition),
            )
            self._remember(state, chosen, found, per_partition)
        finally:
            decoded.unpersist()

    def _replanning(self, state: BatchState, table: CdcTable, attempt: Callable[[], T]) -> T:
        """``attempt()``, again (after a backoff) while other writers change keys of the batch."""
        for replan in range(1, REPLANS + 1):
            saved = copy.deepcopy(self.metrics)
            try:
                return attempt()
            except BatchOutdatedError as changed:
                self.metrics.__dict__.update(saved.__dict__)  # the stream holds this object
                state.persisted.release()
                if replan == REPLANS:
                    raise CommitConflictError(
                        f"Other writers kept changing keys of this batch in "
                        f"{self.settings.table} ({REPLANS} plans); nothing of batch "
                        f"{state.batch_id} was committed: run ingest_cdc again."
                    ) from changed
                self.progress(f"batch {state.batch_id}: {changed}; deciding again")
                low, high = _BACKOFF_S
                time.sleep(random.uniform(0.5, 1.0) * min(high, low * 2 ** (replan - 1)))
                table.refresh()
        raise AssertionError("unreachable: the last plan returns or raises")

    def _take_facts(
        self, state: BatchState, marked: DataFrame, events: int, good: int, low: str | None
    ) -> BatchState:
        """Count the batch's events, write its rejects (all events but the ``good`` ones)."""
        from pyspark.sql import functions as F

        rejects = marked.where(F.col("reject").isNotNull()).select(
            "reject", F.coalesce("raw", "after_json", "before_json").alias("raw"), "source_file"
        )
        record_rejects(self.context, self.metrics, rejects, state.batch_id, events - good)
        self.metrics.events += events
        return replace(state, low=low, events=good)

    # ---- typing with the last batch's facts ------------------------------------------------------
    def _guess_key(self) -> GuessKey:
        return (self.settings.table, self.checkpoint_id, self.settings.variable_scale_decimal)

    def _guess(self, table: CdcTable | None, held: str | None) -> Guess | None:
        """The last batch's facts, the family the table holds (``held``) in place of its own."""
        if table is None:
            return None
        return self.guesses.get(self._guess_key(), held)

    def _remember(
        self,
        state: BatchState,
        chosen: str | None,
        found: FoundTypes,
        per_partition: Mapping[str, str],
    ) -> None:
        common = state.all_newer(state.known)
        self.guesses.remember(self._guess_key(), chosen, found, per_partition, state.events, common)

    def _guessed(
        self, state: BatchState, table: CdcTable, marked: DataFrame, guess: Guess, held: bool
    ) -> None:
        """The batch typed with ``guess``; its own facts observed as its event log is written and
        checked before anything else is done: :class:`Misguessed` when they differ, or when
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
        (``rows`` and ``print`` of :func:`~.figures.typed_facts`, on the first job's reading of
        them): the facts are used only when they cover exactly the rows that were typed (a count
        alone could be evened out by a partition counted twice)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if held:
            marked = reject_other_families(marked, guess.family, set(NAMES))
        observation = Observation()
        figures = guessed_facts(guess.family, guess.partitions)
        # with no family held, events of another one pass this filter: the check below sees
        # them, and the batch is typed again (the facts' path picks the batch's commonest)
        valid = marked.observe(observation, *figures).where(F.col("reject").isNull())
        checked = False

        def confirm(state: BatchState, typed: TypedFacts) -> tuple[BatchState, Mapping[str, str]]:
            nonlocal checked
            row = observed(observation, lambda: marked.agg(*figures).first())
            seen = GuessedFacts.of(row, guess.partitions)
            found = check(guess, seen, typed, self.settings)  # see the docstring
            checked = True
            state = self._take_facts(state, marked, seen.events, seen.good, seen.lowest)
            self._remember(state, guess.family, found, seen.highest)
            return state, seen.highest

        try:
            self._plan_and_apply(
                replace(state, events=guess.events),
                table,
                valid,
                guess.found_types,
                {},
                confirm,
                guess.common,
            )
        except Misguessed:
            raise
        except Exception as error:
            if checked:
                raise
            raise_if_cancelled()  # a cancel is not a wrong guess
            raise Misguessed(
                f"typing it with the last batch's types failed ({type(error).__name__})"
            ) from error

    # ---- plan, decide, write, commit -------------------------------------------------------
    def _plan_and_apply(
        self,
        state: BatchState,
        table: CdcTable,
        valid: DataFrame,
        found_types: FoundTypes,
        per_partition: Mapping[str, str],
        confirm: Confirm | None = None,
        last_common: bool = True,
    ) -> BatchState:
        """Decide and commit the batch against the table's current snapshot. ``confirm``: the
        batch was typed with a guess; called once its typing job ran, it checks the guess and
        gives the progress per source partition, given the typed rows' facts
        (``last_common``: see :meth:`_common`). The batch's state as it ended."""
        types, logical, exact = found_types
        key = table.key() or target.adopt_key(self.context, table)
        wanted = list(self.settings.primary_key)
        if wanted and set(wanted) != set(key):
            raise IngestError(
                f"primary_key => '{', '.join(wanted)}' differs from the identifier fields of "
                f"table '{self.settings.table}' ({', '.join(key)}), which ingest_cdc keys by: "
                f"pass primary_key => '{', '.join(key)}' or leave it out."
            )
        table_types = {c.name: c.type for c in table.columns() if c.name not in SYSTEM_NAMES}
        planned = plan_schema(table_types, types, exact)
        commit = table.begin()
        commit.evolve(planned.additions, planned.widenings)
        field_ids = commit.field_ids()
        columns = {**table_types, **dict(planned.additions), **dict(planned.widenings)}
        # typed rows, and rejects: a missing key, or a value of the wrong type
        typed, missing_key = typed_rows(valid, columns, logical, key)
        typed = state.persisted.persist(typed)
        plan = Plan(table, commit, columns, tuple(key), field_ids, state.batch_id, per_partition)
        return self._apply(state, plan, typed, missing_key, confirm, last_common)

    def _apply(
        self,
        state: BatchState,
        plan: Plan,
        typed: DataFrame,
        missing_key: DataFrame,
        confirm: Confirm | None = None,
        last_common: bool = True,
    ) -> BatchState:
        """Decide the batch's changes, write its event log and files, commit.

        The common batch (no truncate, no unavailable value, every change newer than the
        table's high-water mark) is ONE job: the event log is written by the tasks that write
        the data and delete files (:func:`~.write.write` with ``events``), the facts deciding
        whether the batch is common observed on the way. Those that are not are decided again
        from the facts and written by a second job (the event log kept unless values were
        filled in)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        context, metrics = self.context, self.metrics
        table, key, batch_id = plan.table, plan.key, plan.batch_id

        self.progress(f"batch {batch_id}: deduplicating")
        progress = table.progress(
            self.checkpoint_id,
            cache_from=batch_id - self.settings.key_cache_batches,
            snapshot_id=plan.commit.start_snapshot_id,
        )
        placeholder = self.settings.unavailable_placeholder
        # the batch's small facts are observed while its event log is written: no job of their own
        observation = Observation()
        facts = typed_facts(tuple(plan.columns.items()), key, placeholder)
        events = split_key_changes(
            typed.observe(observation, *facts).where(~F.col("missing_key")), key
        )
        changes = split_key_changes(typed.where(~F.col("missing_key")), key)
        known = max_position(progress.max_position, progress.truncate_position)
        state = replace(state, known=known)
        common = self._common(state, known, confirm is not None, last_common)
        written: Written | None = None
        if common:  # decided before the facts are known: checked below, written again if wrong
            grouped = changes.where(F.col("op") != "t").groupBy(*cols(key)).agg(*per_key())
            written = write(context, state, plan, all_applied(grouped), None, events)
            events_location = context.event_log_dir(batch_id)
        else:
            events_location = write_event_log(context, state, events, plan)
        try:
            seen = TypedFacts.of(observed(observation, lambda: typed.agg(*facts).first()))
            if confirm is not None:  # before anything but the writes (rewritten if wrong)
                state, per_partition = confirm(state, seen)
                plan = replace(plan, per_partition=per_partition)
            if seen.missing_keys:  # counted again as written: see write.record_rejects
                record_rejects(context, metrics, missing_key, batch_id, None, "-values")
        except BaseException:
            if written is not None:  # never committed: no file of it may stay
                discard(context, plan, written)
            raise
        if written is not None and not _was_common(state, seen, known):
            self.progress(
                f"batch {batch_id}: a late event, a truncate or a TOASTed value; deciding again"
            )
            discard(context, plan, written)
            written = None
        if seen.unavailable:
            self.progress(f"batch {batch_id}: keeping stored values of unchanged TOASTed columns")
            toastable = unavailable_checks(plan.columns, key, placeholder)
            filled = fill_unavailable(self.spark, self.settings.table, changes, plan, toastable)
            changes = state.persisted.persist(filled)
            write_event_log(context, state, changes, plan)  # again, with the values kept (rare)
        truncate = Truncate.plan(
            seen.truncate_position,
            seen.truncate_time_ms,
            progress.truncate_position,
            progress.max_position,
        )
        if seen.truncate_position is not None and truncate is None:
            metrics.duplicates += 1  # a truncate already applied, delivered again
        if truncate is not None:
            metrics.truncates += 1
        bounds = (seen.event_time_min, seen.event_time_max, events_location)
        if written is not None:
            decided = all_applied(grouped)  # read again only if a concurrent change is checked
        else:
            applying = changes.where(F.col("op") != "t")
            if truncate is not None:
                applying = applying.where(F.col("position") > F.lit(truncate.position))
            grouped = applying.groupBy(*cols(key)).agg(*per_key())
            decided = decide(context, state, grouped, plan, known, progress)  # cached if read twice
            written = write(context, state, plan, decided, truncate)
        commit_batch(
            context,
            metrics,
            plan,
            changes,
            decided,
            truncate,
            progress,
            bounds,
            written,
            self._committed,
        )
        return state

    def _committed(self, batch_id: int) -> None:
        self.last_committed_batch = batch_id

    def _common(
        self, state: BatchState, known: str | None, guessed: bool, last_common: bool
    ) -> bool:
        """Whether the batch is written as a common one, in one job, before its facts are known:
        when every change is newer than the table's high-water mark ``known``; a batch typed
        with a guess does not know its lowest position yet: when the last batch's were
        (``last_common``: a source whose partitions interleave positions is not written twice
        per batch)."""
        if known is None:
            return True
        return last_common if guessed else state.all_newer(known)

    # ---- decoding ------------------------------------------------------------------------------
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


def _was_common(state: BatchState, seen: TypedFacts, known: str | None) -> bool:
    """The batch's facts say it is common: it is decided as :func:`~.decide.decide` would
    have."""
    if seen.truncate_position is not None or seen.unavailable:
        return False
    return state.all_newer(known)


def _checkpoint_id(checkpoint: str) -> str:

    return read_or_create_id(checkpoint, lambda: str(uuid.uuid4()))


def _schema_order(fact: DecodedFact) -> tuple[str, str]:
    """Facts in one order, whichever path found them: when a batch carries several schemas, the
    first one of a column decides between incompatible types and the order of added columns."""
    return (fact.value_schema or "", fact.row_types or "")


def _family(high_water_mark: str | None, good: Sequence[DecodedFact]) -> str | None:
    """The position family of the table: the one it holds, else the batch's commonest."""
    held = family(high_water_mark)
    if held is not None:
        return held
    counts: dict[str, int] = {}
    for f in good:
        if f.family is not None:
            counts[f.family] = counts.get(f.family, 0) + f.events
    return max(sorted(counts), key=lambda name: counts[name]) if counts else None
