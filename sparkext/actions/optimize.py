"""The tiered_optimize action: commit-driven tiered optimisation of one table.

Floor: actions. The procedure (:mod:`sparkext.procedures.tiered_optimize`), the optimisation
service and ``ingest_cdc``'s ``optimize-every`` call :func:`optimize`; each gets typed
:class:`GroupResult` values back.

Commit-driven tiered optimisation as Bilibili's Magnus runs it (seed 002 §3), per partition:
L0 merges small files and converts equality deletes, L1 clusters the level-0 data once enough
has accumulated, L2 re-clusters the whole partition after N L1 runs, when its layout has
decayed, or when it has been idle (:mod:`sparkext.planning.optimize` decides, from metadata
only). Each (partition, level) group reads exactly its planned files at the planned snapshot,
is laid out on the executors (:mod:`sparkext.actions.cluster`) and committed as ONE
RewriteFiles validated from that snapshot with its data sequence number
(:mod:`sparkext.iceberg.optimize_table`). A group that conflicts with a concurrent change
fails alone, with one sentence in its row, and leaves nothing behind; the others commit.

Defaults come from table properties ``sparkext.optimize.<option>`` (and
``sparkext.optimize.cluster-by`` / ``sparkext.optimize.curve``), so a scheduler can call the
action with the table name only.

A table that declares skipping indexes gets them built as the run's last step
(:func:`sparkext.actions.skipping.build_indexes`: only the files no index object lists yet, so
the files the run just wrote), unless option ``build-indexes`` is false.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sparkext.actions import cluster as clustering
from sparkext.actions import lease
from sparkext.actions import skipping as indexes
from sparkext.actions.cluster import resolve_curve
from sparkext.actions.rewrite_deletes import run_round
from sparkext.declarations import (
    Context,
    Option,
    or_empty,
    parse_boolean,
    parse_bytes,
    parse_columns,
    parse_count,
    parse_duration,
    parse_number_above,
    resolve_options,
)
from sparkext.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    ProcedureArgumentError,
    SparkextError,
    did_you_mean,
)
from sparkext.iceberg.commit import discard_unless_unknown
from sparkext.iceberg.errors import translate
from sparkext.iceberg.optimize_table import (
    OPERATION,
    SUMMARY_CLUSTER_BY,
    SUMMARY_CURVE,
    SUMMARY_LEVEL,
    SUMMARY_OPERATION,
    SUMMARY_PARTITION,
    SUMMARY_REASON,
    OptimizeTable,
)
from sparkext.literals import sql_string
from sparkext.planning.equality_deletes import PlanSettings, plan_round
from sparkext.planning.optimize import LEVELS, Group, Settings, plan
from sparkext.spark import cancellation

if TYPE_CHECKING:
    from sparkext.iceberg.catalog import TableRef
    from sparkext.iceberg.optimize_table import OptimizeTable

PROPERTY_PREFIX = "sparkext.optimize."
CLUSTER_BY_PROPERTY = PROPERTY_PREFIX + "cluster-by"
CURVE_PROPERTY = PROPERTY_PREFIX + "curve"

TARGET_FILE_SIZE_BYTES = "target-file-size-bytes"
SMALL_FILE_SIZE_BYTES = "small-file-size-bytes"
L0_MIN_FILES = "l0.min-files"
L1_MIN_BYTES = "l1.min-bytes"
L2_EVERY_L1_RUNS = "l2.every-l1-runs"
L2_MAX_DEPTH_RATIO = "l2.max-depth-ratio"
L2_IDLE = "l2.idle"
CONVERT_EQUALITY_DELETES = "convert-equality-deletes"
MAX_GROUPS = "max-groups"
BUILD_INDEXES = "build-indexes"


@dataclasses.dataclass(frozen=True)
class GroupResult:
    """What one (partition, level) group did, or would do in a dry run (``output_*`` None)."""

    partition: str | None  # the partition as JSON; None: unpartitioned
    level: int
    reason: str
    input_files: int
    input_bytes: int
    output_files: int | None
    output_bytes: int | None
    deletes_removed: int
    snapshot_id: int | None
    duration_ms: int
    error: str | None  # None: committed (or planned)
    state_unknown: bool = False  # the catalog could not say whether the commit landed

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.partition, self.level, self.reason, self.input_files, self.input_bytes,
            self.output_files, self.output_bytes, self.deletes_removed, self.snapshot_id,
            self.duration_ms, self.error,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class IndexStep:
    """The run's last step: the skipping-index build (``built`` None when it failed)."""

    built: indexes.BuildResult | None
    duration_ms: int
    error: str | None

    def row(self) -> tuple[Any, ...]:
        """The procedure's row for it: no partition, no level."""
        built = self.built
        if built is None:
            return (None, None, "skipping indexes", 0, 0, 0, 0, 0, None, self.duration_ms,
                    self.error)  # fmt: skip
        return (
            None, None, f"skipping indexes: {built.summary()}", built.files_read,
            built.bytes_read, 1 if built.written else 0, built.index_bytes if built.written else 0,
            0, built.snapshot_id, self.duration_ms, None,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class OptimizeResult:
    groups: tuple[GroupResult, ...]
    indexes: IndexStep | None = None  # None: the table declares none, or a dry run

    @property
    def committed(self) -> int:
        """Groups that committed (or, in a dry run, were planned)."""
        return sum(1 for g in self.groups if g.error is None)


@dataclasses.dataclass(frozen=True)
class _Run:
    """One run's inputs, fixed once its options are resolved."""

    context: Context
    ref: TableRef
    table: OptimizeTable
    where: str | None
    cluster_by: tuple[str, ...]
    curve: str
    settings: Settings
    options: Mapping[str, Any]
    dry_run: bool
    only: frozenset[str] | None


def parse_ratio(text: str) -> float:
    """A number above 1: ``4`` or ``2.5``.

    >>> parse_ratio("2.5")
    2.5
    """
    return parse_number_above(1, "a number above 1 such as 4 or 2.5")(text)


def parse_levels(text: str | None) -> frozenset[int]:
    """``'l0,l2'`` → {0, 2}; names are case-insensitive, ``0`` and ``L0`` both accepted.

    >>> sorted(parse_levels("L0, l2"))
    [0, 2]
    >>> parse_levels("l3")
    Traceback (most recent call last):
    ...
    sparkext.errors.ProcedureArgumentError: levels => 'l3' names an unknown level 'l3': use \
l0, l1 and/or l2, e.g. levels => 'l0,l1'.
    """
    if text is None:
        return frozenset()
    out = set()
    for part in (p.strip().lower() for p in text.split(",")):
        name = part.removeprefix("l")
        if not name.isdigit() or int(name) not in LEVELS:
            raise ProcedureArgumentError(
                f"levels => {sql_string(text)} names an unknown level '{part}': use l0, l1 "
                "and/or l2, e.g. levels => 'l0,l1'."
            )
        out.add(int(name))
    return frozenset(out)


def settings_from(
    options: Mapping[str, Any],
    target_default: int,
    cluster_by: tuple[str, ...],
    levels: frozenset[int],
) -> Settings:
    target = options[TARGET_FILE_SIZE_BYTES] or target_default
    return Settings(
        target_file_bytes=target,
        small_file_bytes=options[SMALL_FILE_SIZE_BYTES] or max(1, target // 8),
        l0_min_files=options[L0_MIN_FILES],
        l1_min_bytes=options[L1_MIN_BYTES],
        l2_every_l1_runs=options[L2_EVERY_L1_RUNS],
        l2_max_depth_ratio=options[L2_MAX_DEPTH_RATIO],
        l2_idle_ms=options[L2_IDLE],
        cluster_columns=cluster_by,
        levels=levels or frozenset(LEVELS),
        forced=levels,
    )


def optimize(
    context: Context,
    ref: TableRef,
    where: str | None = None,
    levels: str | None = None,
    cluster_by: str | None = None,
    curve: str | None = None,
    options: Mapping[str, str] | None = None,
    dry_run: bool = False,
    only_levels: frozenset[int] | None = None,
    only_partitions: frozenset[str] | None = None,
    leased: bool = False,
    build_indexes: bool = True,
) -> OptimizeResult:
    """One tiered_optimize run (the procedure's body; ``ingest_cdc``'s ``optimize-every`` calls
    it with ``only_levels={0}``: level 0 where its trigger says so, nothing forced; the
    optimisation service with one job's level and partition).

    Unless ``leased`` (the caller holds it) or ``dry_run``, the run holds the table's
    optimisation lease (:mod:`sparkext.actions.lease`): while another process optimises the
    table, it raises :class:`~sparkext.errors.TableBusyError` and changes nothing.
    """

    where = (where or "").strip() or None
    if where is not None and not ref.partitioned:
        raise ProcedureArgumentError(
            f"{ref.name} is unpartitioned, so where => {sql_string(where)} has no partition to "
            "select; leave where out to optimise the whole table."
        )
    properties = dict(ref.properties)
    resolved = resolve_options(OPTIONS, options or {}, properties, PROPERTY_PREFIX)
    forced = parse_levels(levels)
    columns = parse_columns(cluster_by or properties.get(CLUSTER_BY_PROPERTY))
    curve_name = (curve or properties.get(CURVE_PROPERTY) or "auto").strip().lower()
    table = OptimizeTable(context.spark, ref)
    _check_cluster_columns(ref.name, table, columns, forced)
    chosen_curve = _curve(curve_name, columns)
    settings = settings_from(resolved, ref.target_file_size_bytes, columns, forced)
    if only_levels is not None:
        settings = dataclasses.replace(settings, levels=settings.levels & only_levels)
    hold = None if dry_run or leased else _lease_for(context, ref)
    run = _Run(
        context, ref, table, where, columns, chosen_curve, settings, resolved, dry_run,
        only_partitions,
    )  # fmt: skip
    groups = tuple(_optimize(run, hold))
    step = None
    wanted = build_indexes and resolved[BUILD_INDEXES] and not dry_run
    if wanted and not any(g.state_unknown for g in groups) and _declares_indexes(ref):
        step = _build_indexes(context, ref)
    return OptimizeResult(groups, step)


def _declares_indexes(ref: TableRef) -> bool:
    return any(key.startswith(indexes.PROPERTY_PREFIX) for key, _ in ref.properties)


def _build_indexes(context: Context, ref: TableRef) -> IndexStep:
    """The skipping-index build after the groups; a failure is the step's row, not the run's."""
    started = time.monotonic()
    cancellation.raise_if_cancelled()
    context.progress(f"building the skipping indexes of {ref.name}")
    try:
        built = indexes.build_indexes(context, ref)
    except cancellation.StatementCancelled:
        raise
    except Exception as failure:
        text = failure if isinstance(failure, SparkextError) else translate(failure) or failure
        first = (str(text).strip().splitlines() or [type(failure).__name__])[0].rstrip(".")
        return IndexStep(
            None,
            int((time.monotonic() - started) * 1000),
            f"The skipping-index build failed ({first}); the optimisation's commits stand: run "
            f"CALL sparkext.build_indexes(table => '{ref.name}').",
        )
    return IndexStep(built, int((time.monotonic() - started) * 1000), None)


def _lease_for(context: Context, ref: TableRef) -> AbstractContextManager[None]:
    """The table's lease, taken only once the plan has work (a call with nothing to do makes no
    metadata commit: a loop of calls beside a writer must not crowd its commits out)."""

    return lease.held(context.spark, ref.name, lease.owner_name("tiered_optimize"))


@dataclasses.dataclass(frozen=True)
class Planned:
    """One group a run would do now, for a scheduler: its partition and level, why, its size,
    and when the partition last received data (its freshness)."""

    partition: str
    level: int
    reason: str
    input_files: int
    input_bytes: int
    target_file_bytes: int
    converts_deletes: bool
    last_commit_ms: int | None
    label: str | None = None  # the partition as the output's "partition" column shows it


def planned(context: Context, ref: TableRef) -> list[Planned]:
    """What a run with the table's own settings would do now (metadata only, no change)."""

    properties = dict(ref.properties)
    resolved = resolve_options(OPTIONS, {}, properties, PROPERTY_PREFIX)
    columns = parse_columns(properties.get(CLUSTER_BY_PROPERTY))
    table = OptimizeTable(context.spark, ref)
    _check_cluster_columns(ref.name, table, columns, frozenset())
    settings = settings_from(resolved, ref.target_file_size_bytes, columns, frozenset())
    table.refresh()
    start = table.current_snapshot_id()
    if start is None:
        return []
    facts = table.facts(start, None, columns)
    equality = facts.equality_delete_partitions if resolved[CONVERT_EQUALITY_DELETES] else ()
    groups = plan(facts.files, settings, equality, facts.last_commit_ms, facts.now_ms)
    return [
        Planned(
            g.partition,
            g.level,
            g.reason,
            len(g.files),
            g.input_bytes,
            settings.target_file_bytes,
            g.convert_deletes,
            facts.last_commit_ms.get(g.partition),
            _partition_label(g.partition),
        )
        for g in groups
        if len(g.files) >= 2 or g.level > 0 or g.convert_deletes
    ]


def _optimize(run: _Run, hold: Any = None) -> list[GroupResult]:
    """Plan; run the groups — holding ``hold`` (a lease context) when there are any."""
    context, ref, table, where = run.context, run.ref, run.table, run.where
    cluster_by, settings, options, only = run.cluster_by, run.settings, run.options, run.only
    table.refresh()  # the catalog may cache the table: plan from its current state
    start = table.current_snapshot_id()
    if start is None:
        return []
    context.progress(f"reading file metadata of {ref.name}")
    facts = table.facts(start, where, cluster_by)
    equality = facts.equality_delete_partitions if options[CONVERT_EQUALITY_DELETES] else ()
    groups = plan(facts.files, settings, equality, facts.last_commit_ms, facts.now_ms)
    if only is not None:
        groups = [g for g in groups if g.partition in only]
    if hold is not None and groups and not run.dry_run:
        with hold:  # plan again under the lease: another holder may have done it meanwhile
            return _optimize(run)
    groups = groups[: options[MAX_GROUPS]]
    context.progress(f"plan: {_describe_plan(groups)}")
    if run.dry_run:
        return [_planned(g, table) for g in groups]
    rows: list[GroupResult] = []
    converted: dict[str, tuple[int, int]] = {}
    if any(g.convert_deletes for g in groups):
        converted = _convert_equality_deletes(
            run, {g.partition for g in groups if g.convert_deletes}
        )
        if converted:  # the data files' deletes changed: plan again at the new snapshot
            table.refresh()
            start = table.current_snapshot_id()
            assert start is not None  # the conversion committed a snapshot
            facts = table.facts(start, where, cluster_by)
            groups = plan(facts.files, settings, (), facts.last_commit_ms, facts.now_ms)
            if only is not None:
                groups = [g for g in groups if g.partition in only]
            groups = groups[: options[MAX_GROUPS]]
            for partition, (removed, snapshot_id) in converted.items():
                if not any(g.partition == partition for g in groups):
                    rows.append(_conversion(partition, removed, snapshot_id))
    for number, group in enumerate(groups, 1):
        cancellation.raise_if_cancelled()
        if len(group.files) < 2 and group.level == 0:
            continue  # nothing to merge (its deletes were converted above)
        label = f"L{group.level} {_partition_label(group.partition)}"
        context.progress(
            f"group {number}/{len(groups)}: {label}: {len(group.files)} files, "
            f"{_mb(group.input_bytes)} ({group.reason})"
        )
        rows.append(_run_group(run, facts, group, converted))
        if rows[-1].state_unknown:
            break  # the catalog could not say: stop before touching anything else
    return rows


READ_SPLIT_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes default


def _run_group(
    run: _Run, facts: Any, group: Group, converted: Mapping[str, tuple[int, int]]
) -> GroupResult:
    context, table, settings, curve = run.context, run.table, run.settings, run.curve
    started = time.monotonic()
    paths = [f.path for f in group.files]
    records = sum(f.records for f in group.files)
    _, removable = table.deletes_of(paths)
    removed_before, conversion_snapshot = converted.get(group.partition, (0, None))
    written = None
    error = None
    unknown = False
    snapshot_id = conversion_snapshot
    spec_id = table.spec_id_of(paths[0])
    try:
        with table.staged(paths) as group_id:
            # L0: one read task per output file; clustering: Spark-sized tasks (a task per
            # small output file would start a Python worker per few rows for the curve key)
            split = settings.target_file_bytes if group.level == 0 else READ_SPLIT_BYTES
            frame = table.read_staged(group_id, max(split, settings.target_file_bytes))
            if group.level >= 1:
                tasks = clustering.output_tasks(group.input_bytes, settings.target_file_bytes)
                frame = clustering.cluster(frame, settings.cluster_columns, curve, tasks, records)
            written = table.write_staged(group_id, frame, spec_id, settings.target_file_bytes)
            summary = {
                SUMMARY_OPERATION: OPERATION,
                SUMMARY_LEVEL: str(group.level),
                SUMMARY_PARTITION: group.partition,
                SUMMARY_REASON: group.reason,
            }
            if group.level >= 1:
                summary[SUMMARY_CURVE] = curve
                summary[SUMMARY_CLUSTER_BY] = ",".join(settings.cluster_columns)
            made = written
            what = f"L{group.level} of {_partition_label(group.partition) or 'the table'}"
            # the one policy: a failed swap deletes what this group wrote unless its state is
            # unknown (then the files are kept and CommitStateUnknownError says so)
            with discard_unless_unknown(lambda: table.discard(made), run.ref.name, what):
                snapshot_id = table.commit(facts, paths, written, summary)
    except CommitStateUnknownError as unknown_state:
        error, unknown = str(unknown_state), True  # the files may be committed: kept
    except cancellation.StatementCancelled:
        raise  # Ctrl-C: what this group wrote is already gone (before the swap: never committed)
    except Exception as failure:  # a conflict, a failed Spark job: this group only
        error = _sentence(failure, group)
        context.progress(f"L{group.level} {_partition_label(group.partition)} failed: {error}")
    committed = error is None
    return GroupResult(
        _partition_label(group.partition),
        group.level,
        group.reason,
        len(paths),
        group.input_bytes,
        written.files if written is not None and committed else 0,
        written.bytes if written is not None and committed else 0,
        removed_before + (removable if committed else 0),
        snapshot_id if committed or conversion_snapshot else None,
        int((time.monotonic() - started) * 1000),
        error,
        unknown,
    )


def _sentence(failure: Exception, group: Group) -> str:
    """One sentence for a group that failed (its Java/Spark cause only with --verbose)."""

    if isinstance(failure, SparkextError):
        return str(failure)
    translated = translate(failure)
    text = str(translated) if translated is not None else str(failure)
    first = (text.strip().splitlines() or [type(failure).__name__])[0].rstrip(".")
    where = _partition_label(group.partition) or "the table"
    return (
        f"L{group.level} of {where} failed ({first}); nothing of it was committed: run "
        "tiered_optimize again."
    )


def _convert_equality_deletes(run: _Run, partitions: set[str]) -> dict[str, tuple[int, int]]:
    """Convert the equality deletes of ``partitions`` (L0) with rewrite_equality_deletes'
    planner and runner, in one commit; return {partition: (files removed, snapshot)}."""

    context, where, options = run.context, run.where, run.options
    deletes = run.table.deletes
    deletes.refresh()
    start = deletes.current_snapshot_id()
    if start is None or deletes.format_version() < 2:
        return {}
    facts = [
        dataclasses.replace(f, selected=f.selected and f.partition in partitions)
        for f in deletes.delete_files(start, where)
    ]
    granularity = deletes.ref.prop("write.delete.granularity", "file") != "partition"
    settings = PlanSettings(
        format_version=deletes.format_version(),
        file_granularity=granularity,
        min_equality_delete_files=1,
        max_files_per_commit=1_000_000,
        merge_position_deletes=True,
        min_position_delete_files=2,
        partitioned_data_min_sequence=(
            deletes.partitioned_data_min_sequence(start)
            if any(f.is_global for f in facts)
            else None
        ),
    )
    round_plan = plan_round(facts, settings)
    if not round_plan.convert:
        return {}
    context.progress(f"L0: converting {len(round_plan.convert)} equality-delete files")
    try:
        result = run_round(
            context.spark,
            deletes,
            start,
            round_plan,
            where,
            options[TARGET_FILE_SIZE_BYTES] or deletes.ref.target_file_size_bytes,
            context.progress,
            file_granularity=granularity,
        )
    except CommitConflictError as conflict:
        context.progress(f"equality-delete conversion not committed: {conflict}")
        return {}
    if result.snapshot_id is None:
        return {}
    counts: dict[str, int] = {}
    for f in round_plan.convert:
        counts[f.partition] = counts.get(f.partition, 0) + 1
    return {p: (n, result.snapshot_id) for p, n in counts.items()}


def _conversion(partition: str, removed: int, snapshot_id: int) -> GroupResult:
    return GroupResult(
        _partition_label(partition), 0, "equality deletes converted",
        0, 0, 0, 0, removed, snapshot_id, 0, None,
    )  # fmt: skip


def _planned(group: Group, table: OptimizeTable) -> GroupResult:
    _, removable = table.deletes_of([f.path for f in group.files]) if group.files else (0, 0)
    return GroupResult(
        _partition_label(group.partition),
        group.level,
        group.reason,
        len(group.files),
        group.input_bytes,
        None,
        None,
        removable,
        None,
        0,
        None,
    )


def _check_cluster_columns(
    name: str, table: OptimizeTable, cluster_by: tuple[str, ...], levels: frozenset[int]
) -> None:
    if levels & {1, 2} and not cluster_by:
        wanted = ",".join(f"l{lv}" for lv in sorted(levels))
        raise ProcedureArgumentError(
            f"levels => '{wanted}' clusters {name}, but no cluster columns are set: pass "
            f"cluster_by => 'a,b' or set table property {CLUSTER_BY_PROPERTY}."
        )

    columns = table.column_names()
    lower = {c.lower(): c for c in columns}
    for column in cluster_by:
        if column.lower() not in lower:
            raise ProcedureArgumentError(
                f"cluster_by names '{column}', which is not a column of {name}"
                f"{did_you_mean(column, columns)}; use top-level columns, e.g. "
                f"cluster_by => '{','.join(columns[:2])}'."
            )


def _curve(name: str, cluster_by: tuple[str, ...]) -> str:

    return resolve_curve(name, cluster_by) if cluster_by else "linear"


def _partition_label(partition: str) -> str | None:
    """``'0:{"day":"2026-11-21"}'`` → ``'{"day":"2026-11-21"}'``; None when unpartitioned."""
    body = partition.split(":", 1)[1] if ":" in partition else partition
    return None if body in ("{}", "") else body


def _describe_plan(groups: list[Group]) -> str:
    if not groups:
        return "nothing to do"
    counts = {lv: sum(1 for g in groups if g.level == lv) for lv in LEVELS}
    return ", ".join(f"{n} L{lv}" for lv, n in counts.items() if n) + " group(s)"


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


# The options this action reads, declared once: the procedure, help() and the reference page
# show them; table properties sparkext.optimize.<key> give per-table defaults.
OPTIONS = (
    Option(
        TARGET_FILE_SIZE_BYTES,
        "",
        "output file size (default: the table's write.target-file-size-bytes, else 512MB)",
        or_empty(parse_bytes),
    ),
    Option(
        SMALL_FILE_SIZE_BYTES,
        "",
        "a data file below this size is small (default: target-file-size-bytes / 8)",
        or_empty(parse_bytes),
    ),
    Option(
        L0_MIN_FILES,
        "12",
        "L0 merges a partition's small files once there are this many",
        parse_count,
    ),
    Option(
        L1_MIN_BYTES,
        "2GB",
        "L1 clusters a partition's level-0 data once it holds this many bytes",
        parse_bytes,
    ),
    Option(
        L2_EVERY_L1_RUNS,
        "10",
        "L2 re-clusters a partition after this many L1 runs",
        parse_count,
    ),
    Option(
        L2_MAX_DEPTH_RATIO,
        "4",
        "L2 also runs when the partition's clustering depth exceeds this many times the "
        "depth of a fresh clustering",
        parse_ratio,
    ),
    Option(
        L2_IDLE,
        "",
        "L2 also runs on a partition without commits for this long, e.g. '1 day' (default: never)",
        or_empty(parse_duration),
    ),
    Option(
        CONVERT_EQUALITY_DELETES,
        "true",
        "L0 converts the partition's equality deletes to position deletes / deletion vectors",
        parse_boolean,
    ),
    Option(MAX_GROUPS, "1000", "at most this many (partition, level) groups per call", parse_count),
    Option(
        BUILD_INDEXES,
        "true",
        "build the table's skipping indexes as the last step (the files no index object lists "
        "yet); false leaves them to build_indexes",
        parse_boolean,
    ),
)
