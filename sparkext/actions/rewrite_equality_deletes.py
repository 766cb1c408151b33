"""The rewrite_equality_deletes action: equality deletes to position deletes or DVs, in rounds.

Floor: actions (the procedure :mod:`sparkext.procedures.rewrite_equality_deletes` calls
:func:`rewrite_equality_deletes` and gets a typed :class:`RewriteResult` back; this module
declares the options).

Turns equality deletes into position deletes (format v2) or deletion vectors (v3) and merges
small position-delete files, so readers stop testing every row against every delete key
(Yanxuan's two steps; Apache Amoro's "minor optimizing"). Each round: plan from metadata
(:mod:`sparkext.planning.equality_deletes`), join on executors
(:mod:`sparkext.actions.rewrite_deletes`), ONE RewriteFiles commit validated from the planned
snapshot (:mod:`sparkext.iceberg.delete_files`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext.actions.rewrite_deletes import run_round
from sparkext.declarations import Context, Option, one_of, parse_boolean, parse_bytes, parse_count
from sparkext.errors import ProcedureArgumentError
from sparkext.iceberg.delete_files import DeleteTable
from sparkext.literals import sql_string
from sparkext.planning.equality_deletes import PlanSettings, plan_round

if TYPE_CHECKING:
    from sparkext.iceberg.catalog import TableRef

MIN_EQUALITY_DELETE_FILES = "min-equality-delete-files"
MIN_EQUALITY_DELETE_FILES_DEFAULT = "1"
TARGET_FILE_SIZE_BYTES = "target-file-size-bytes"
TARGET_FILE_SIZE_BYTES_DEFAULT = str(64 * 1024 * 1024)
MAX_FILES_PER_COMMIT = "max-files-per-commit"
MAX_FILES_PER_COMMIT_DEFAULT = "1000"
PARTIAL_PROGRESS_ENABLED = "partial-progress.enabled"
PARTIAL_PROGRESS_ENABLED_DEFAULT = "false"
PARTIAL_PROGRESS_MAX_COMMITS = "partial-progress.max-commits"
PARTIAL_PROGRESS_MAX_COMMITS_DEFAULT = "10"
MERGE_POSITION_DELETES = "merge-position-deletes"
MERGE_POSITION_DELETES_DEFAULT = "true"
DELETE_GRANULARITY = "delete-granularity"
DELETE_GRANULARITY_DEFAULT = ""  # empty: the table's write.delete.granularity, else "file"
GRANULARITIES = ("file", "partition")
MIN_POSITION_DELETE_FILES = "min-position-delete-files"
MIN_POSITION_DELETE_FILES_DEFAULT = "2"

OPTIONS = (
    Option(
        MIN_EQUALITY_DELETE_FILES,
        MIN_EQUALITY_DELETE_FILES_DEFAULT,
        "a partition is converted once it has at least this many equality-delete files",
        parse_count,
    ),
    Option(
        TARGET_FILE_SIZE_BYTES,
        TARGET_FILE_SIZE_BYTES_DEFAULT,
        "new position-delete / Puffin files roll over at this size (bytes, or 64MB, 1GB)",
        parse_bytes,
    ),
    Option(
        MAX_FILES_PER_COMMIT,
        MAX_FILES_PER_COMMIT_DEFAULT,
        "equality-delete files converted per commit (whole partitions, oldest first)",
        parse_count,
    ),
    Option(
        PARTIAL_PROGRESS_ENABLED,
        PARTIAL_PROGRESS_ENABLED_DEFAULT,
        "keep committing rounds of max-files-per-commit until done (else one commit)",
        parse_boolean,
    ),
    Option(
        PARTIAL_PROGRESS_MAX_COMMITS,
        PARTIAL_PROGRESS_MAX_COMMITS_DEFAULT,
        "with partial progress, stop after this many commits",
        parse_count,
    ),
    Option(
        MERGE_POSITION_DELETES,
        MERGE_POSITION_DELETES_DEFAULT,
        "merge a partition's position-delete files into one and drop dangling deletes",
        parse_boolean,
    ),
    Option(
        DELETE_GRANULARITY,
        DELETE_GRANULARITY_DEFAULT,
        "v2 position-delete files per data file ('file') or per partition ('partition'); "
        "default: the table's write.delete.granularity, else file",
        one_of("", *GRANULARITIES),
    ),
    Option(
        MIN_POSITION_DELETE_FILES,
        MIN_POSITION_DELETE_FILES_DEFAULT,
        "'partition' granularity: merge a partition without new deletes once it has this "
        "many position-delete files ('file': a data file with several is merged)",
        parse_count,
    ),
)


@dataclass(frozen=True)
class RewriteResult:
    """What the rounds did (a dry run: what the first round would do)."""

    equality_delete_files_removed: int
    position_delete_files_added: int
    deletion_vectors_added: int
    positions_deleted: int | None  # None: dry run
    position_delete_files_merged: int
    dangling_positions_removed: int | None  # None: dry run
    bytes_added: int
    equality_delete_files_remaining: int
    commits: int
    snapshot_id: int | None  # the last commit's
    duration_ms: int
    dry_run: bool

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return (
            self.equality_delete_files_removed, self.position_delete_files_added,
            self.deletion_vectors_added, self.positions_deleted,
            self.position_delete_files_merged, self.dangling_positions_removed, self.bytes_added,
            self.equality_delete_files_remaining, self.commits, self.snapshot_id,
            self.duration_ms, self.dry_run,
        )  # fmt: skip


def check_where(table: str, partitioned: bool, where: str | None) -> None:
    """Refuse ``where`` on a table without partitions: it selects partitions, and there are none.

    >>> try:
    ...     check_where("lake.db.t", False, "day = DATE '2026-11-21'")
    ... except ProcedureArgumentError as error:
    ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
    lake.db.t is unpartitioned, so where => "day = DATE '2026-11-21'" has no partition to
    select; leave where out to convert all of its equality deletes.
    """
    if where is not None and not partitioned:
        raise ProcedureArgumentError(
            f"{table} is unpartitioned, so where => {sql_string(where)} has no partition to "
            "select; leave where out to convert all of its equality deletes."
        )


def rewrite_equality_deletes(
    context: Context,
    ref: TableRef,
    where: str | None,
    options: Mapping[str, Any],
    dry_run: bool = False,
) -> RewriteResult:
    """Plan, join and commit rounds until done (or one round, or one plan in a dry run).

    ``options`` are the resolved :data:`OPTIONS` (parsed values by key)."""
    started = time.monotonic()
    where = (where or "").strip() or None
    check_where(ref.name, ref.partitioned, where)
    table = DeleteTable(context.spark, ref)
    granularity = str(
        options[DELETE_GRANULARITY] or ref.prop("write.delete.granularity", "file")
    ).lower()  # (prop with a default is never None)
    max_commits = options[PARTIAL_PROGRESS_MAX_COMMITS] if options[PARTIAL_PROGRESS_ENABLED] else 1
    totals = dict.fromkeys(
        ("removed", "pos_added", "dvs_added", "positions", "merged", "dangling", "bytes"), 0
    )
    remaining = commits = 0
    snapshot_id = None
    skipped: tuple[tuple[str, str], ...] = ()
    while True:
        table.refresh()
        start = table.current_snapshot_id()
        if start is None or table.format_version() < 2:
            break
        context.progress(f"reading delete-file metadata of {table.ref.name}")
        facts = table.delete_files(start, where)
        settings = PlanSettings(
            format_version=table.format_version(),
            file_granularity=granularity != "partition",
            min_equality_delete_files=options[MIN_EQUALITY_DELETE_FILES],
            max_files_per_commit=options[MAX_FILES_PER_COMMIT],
            merge_position_deletes=options[MERGE_POSITION_DELETES],
            min_position_delete_files=options[MIN_POSITION_DELETE_FILES],
            partitioned_data_min_sequence=(
                table.partitioned_data_min_sequence(start)
                if any(f.is_global for f in facts)
                else None
            ),
        )
        plan = plan_round(facts, settings)
        context.progress(
            f"plan: convert {len(plan.convert)} equality-delete files, "
            f"{len(plan.merge)} position-delete files to consider for merging"
        )
        remaining, skipped = plan.remaining, plan.skipped
        if dry_run:
            totals["removed"] = len(plan.convert)
            totals["merged"] = len(plan.merge)
            return _result(totals, remaining + len(skipped), 0, None, started, dry_run=True)
        if plan.is_empty:
            break
        result = run_round(
            context.spark,
            table,
            start,
            plan,
            where,
            options[TARGET_FILE_SIZE_BYTES],
            context.progress,
            file_granularity=granularity != "partition",
        )
        commits += 1 if result.snapshot_id is not None else 0
        snapshot_id = result.snapshot_id or snapshot_id
        totals["removed"] += result.equality_files_removed
        totals["pos_added"] += result.position_files_added
        totals["dvs_added"] += result.deletion_vectors_added
        totals["positions"] += result.positions
        totals["merged"] += result.position_files_merged
        totals["dangling"] += result.dangling_positions
        totals["bytes"] += result.bytes_added
        if commits >= max_commits or not plan.convert or plan.remaining == 0:
            break
    for path, reason in skipped:
        context.progress(f"left {path}: {reason}")
    return _result(totals, remaining + len(skipped), commits, snapshot_id, started, dry_run)


def _result(
    totals: Mapping[str, int],
    remaining: int,
    commits: int,
    snapshot_id: int | None,
    started: float,
    dry_run: bool = False,
) -> RewriteResult:
    return RewriteResult(
        equality_delete_files_removed=totals["removed"],
        position_delete_files_added=totals["pos_added"],
        deletion_vectors_added=totals["dvs_added"],
        positions_deleted=None if dry_run else totals["positions"],
        position_delete_files_merged=totals["merged"],
        dangling_positions_removed=None if dry_run else totals["dangling"],
        bytes_added=totals["bytes"],
        equality_delete_files_remaining=remaining,
        commits=commits,
        snapshot_id=snapshot_id,
        duration_ms=int((time.monotonic() - started) * 1000),
        dry_run=dry_run,
    )
