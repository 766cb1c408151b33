"""The maintain action: apply a table's maintenance policy.

Floor: actions (the procedure :mod:`sparkext.procedures.maintain` and the optimisation service
call :func:`maintain` and get typed :class:`ActionResult` values back).

The policy is table properties ``sparkext.maintenance.<option>`` (each option below; a value in
``options => map(...)`` wins for this call), so a scheduler passes the table name only. Four
actions, one output row each, in this order: expire snapshots, remove dangling deletes,
rewrite manifests, remove orphan files (last: what expiry freed is gone by then). What each
decides is :mod:`sparkext.planning.maintenance`'s (pure, from metadata); the work is Iceberg's
own Spark actions (:mod:`sparkext.iceberg.maintenance`). An action that fails is its row's
one-sentence ``error``; the others still run.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from sparkext.declarations import (
    Context,
    Expected,
    Option,
    or_empty,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_number_above,
    resolve_options,
)
from sparkext.errors import SnapshotExpiredError, SparkextError
from sparkext.iceberg import changelog_consumers
from sparkext.iceberg import maintenance as iceberg
from sparkext.iceberg.errors import translate
from sparkext.planning import maintenance as plan
from sparkext.planning.changelog_stream import registrations
from sparkext.planning.event_time import SnapshotFact, has_event_time, plan_as_of
from sparkext.planning.summary import EVENT_LOGS
from sparkext.spark import cancellation

if TYPE_CHECKING:
    from sparkext.iceberg.catalog import TableRef

PROPERTY_PREFIX = plan.PROPERTY_PREFIX
OK, SKIPPED, PLANNED, FAILED = "ok", "skipped", "planned", "failed"


def parse_actions(text: str) -> frozenset[str]:
    """``'expire_snapshots, remove_orphan_files'`` → those actions; ``all`` → every one.

    >>> sorted(parse_actions("remove_orphan_files,expire_snapshots"))
    ['expire_snapshots', 'remove_orphan_files']
    """
    if text.strip().lower() == "all":
        return frozenset(plan.ACTIONS)
    names = {t.strip().lower() for t in text.split(",") if t.strip()}
    if not names or not names <= set(plan.ACTIONS):
        raise Expected("'all' or a comma-separated list of " + ", ".join(plan.ACTIONS))
    return frozenset(names)


parse_positive = parse_number_above(0, "a positive number such as 4 or 2.5")


def parse_orphan_age(text: str) -> int:
    value = parse_duration(text)
    if value < plan.MIN_ORPHAN_AGE_MS:
        raise Expected(
            "at least '1 hour': a younger file may belong to a commit still being written "
            "(the default '3 days' is Iceberg's advice)"
        )
    return value


def policy_of(ref: TableRef, given: dict[str, str] | None = None) -> plan.Policy:
    """The table's policy: ``given`` options, else its ``sparkext.maintenance.*`` properties,
    else the defaults (snapshot age and count default to Iceberg's ``history.expire.*``
    properties when the table sets them)."""
    properties = dict(ref.properties)
    defaults = {}
    if "history.expire.max-snapshot-age-ms" in properties:
        defaults["snapshot-max-age"] = properties["history.expire.max-snapshot-age-ms"] + " ms"
    if "history.expire.min-snapshots-to-keep" in properties:
        defaults["min-snapshots"] = properties["history.expire.min-snapshots-to-keep"]
    o = resolve_options(OPTIONS, {**defaults, **(given or {})}, properties, PROPERTY_PREFIX)
    return plan.Policy(
        snapshot_max_age_ms=o["snapshot-max-age"],
        min_snapshots=o["min-snapshots"],
        orphan_min_age_ms=o["orphan-min-age"],
        cdc_checkpoint_ttl_ms=o["cdc-checkpoint-ttl"],
        event_time_retention_ms=o["event-time-retention"],
        manifest_min_count=o["manifest-min-count"],
        manifest_small_bytes=o["manifest-small-bytes"] or 0,
        manifest_max_per_partition=o["manifest-max-per-partition"],
        manifest_oversized_ratio=o["manifest-oversized-ratio"],
        actions=o["actions"],
    )


def maintain(
    context: Context,
    ref: TableRef,
    options: dict[str, str] | None = None,
    dry_run: bool = False,
    only: frozenset[str] | None = None,
) -> MaintainResult:
    """One maintain run (the procedure's body; the optimisation service calls it with ``only``
    the actions that are due)."""
    policy = policy_of(ref, options)
    wanted = policy.actions if only is None else policy.actions & only
    rows: list[ActionResult] = []
    for action, step in (
        ("expire_snapshots", _expire),
        ("remove_dangling_deletes", _dangling),
        ("rewrite_manifests", _manifests),
        ("remove_orphan_files", _orphans),
    ):
        if action not in wanted:
            continue
        cancellation.raise_if_cancelled()
        context.progress(f"{action.replace('_', ' ')} on {ref.name}")
        started = time.monotonic()
        try:
            row = step(context, ref, policy, dry_run)
        except cancellation.StatementCancelled:
            raise
        except Exception as failure:
            row = Row(FAILED, "", error=_sentence(failure, action, ref.name))
        rows.append(row.result(action, int((time.monotonic() - started) * 1000)))
    return MaintainResult(tuple(rows))


class Row:
    def __init__(
        self,
        outcome: str,
        reason: str,
        items: int = 0,
        files_deleted: int | None = None,
        bytes_deleted: int | None = None,
        files_written: int | None = None,
        snapshot_id: int | None = None,
        error: str | None = None,
    ):
        self.outcome, self.reason, self.items = outcome, reason, items
        self.files_deleted, self.bytes_deleted = files_deleted, bytes_deleted
        self.files_written, self.snapshot_id, self.error = files_written, snapshot_id, error

    def result(self, action: str, duration_ms: int) -> ActionResult:
        return ActionResult(
            action, self.outcome, self.reason, self.items, self.files_deleted,
            self.bytes_deleted, self.files_written, self.snapshot_id, duration_ms, self.error,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """What one maintenance action did (or, in a dry run, would do)."""

    action: str
    outcome: str  # ok, skipped, planned or failed
    reason: str
    items: int
    files_deleted: int | None
    bytes_deleted: int | None
    files_written: int | None
    snapshot_id: int | None
    duration_ms: int
    error: str | None

    def row(self) -> tuple[Any, ...]:
        """The procedure's output row (its declared columns, in order)."""
        return dataclasses.astuple(self)


@dataclasses.dataclass(frozen=True)
class MaintainResult:
    actions: tuple[ActionResult, ...]


def _sentence(failure: Exception, action: str, name: str) -> str:

    if isinstance(failure, SparkextError):
        return str(failure)
    translated = translate(failure)
    text = str(translated) if translated is not None else str(failure)
    first = (text.strip().splitlines() or [type(failure).__name__])[0].rstrip(".")
    return (
        f"{action} on {name} failed ({first}); the other actions still ran: run maintain again "
        "(what this one committed before failing, if anything, is in the table's history)."
    )


def expiry_plan(context: Context, ref: TableRef, policy: plan.Policy) -> plan.ExpiryPlan:
    """What ``expire_snapshots`` would expire now, and what holds keep (no change made)."""

    state = iceberg.state(context.spark, ref.name)
    now = int(time.time() * 1000)
    consumers = registrations(_fresh_properties(context, ref))
    held = plan.holds(
        state.snapshots,
        state.head,
        consumers,
        policy,
        now,
        _event_time_base(state, now - policy.event_time_retention_ms),
    )
    return plan.plan_expiry(state.snapshots, state.refs, state.head, policy, held, now)


def _fresh_properties(context: Context, ref: TableRef) -> dict[str, str]:

    return changelog_consumers.properties(context.spark, ref.name)


def _event_time_base(state: iceberg.TableState, as_of_ms: int) -> int | None:
    """The base s1 of T0 = ``as_of_ms`` (None: the table carries no event times, or that base
    is already gone)."""

    chain = plan.ancestry(state.snapshots, state.head)[::-1]
    facts = [SnapshotFact(s.snapshot_id, s.parent_id, s.summary) for s in chain]
    if not has_event_time(facts):
        return None
    try:
        base = plan_as_of(facts, as_of_ms).base_snapshot_id
    except SnapshotExpiredError:
        return None
    return base if base is not None else (chain[0].snapshot_id if chain else None)


def _expire(context: Context, ref: TableRef, policy: plan.Policy, dry_run: bool) -> Row:

    decided = expiry_plan(context, ref, policy)
    if not decided.expire:
        return Row(SKIPPED, decided.reason)
    if dry_run:
        return Row(PLANNED, decided.reason, len(decided.expire))
    removed = iceberg.expire_snapshots(context.spark, ref.name, list(decided.expire))
    return Row(
        OK,
        f"{decided.reason}; deleted {removed.detail}",
        len(decided.expire),
        removed.files,
        removed.bytes,
    )


def _dangling(context: Context, ref: TableRef, policy: plan.Policy, dry_run: bool) -> Row:

    if ref.format_version < 2:
        return Row(SKIPPED, f"format version {ref.format_version} has no delete files")
    if dry_run:
        return Row(PLANNED, "would remove delete files no live data file can match")
    files, size, snapshot = iceberg.remove_dangling_deletes(context.spark, ref.name)
    if not files:
        return Row(SKIPPED, "no dangling delete files")
    return Row(
        OK,
        f"{_n(files, 'delete file')} ({size} bytes) match no live data file; storage is freed "
        "when the snapshots before this one expire",
        files,
        0,
        0,
        0,
        snapshot,
    )


def _manifests(context: Context, ref: TableRef, policy: plan.Policy, dry_run: bool) -> Row:

    stats = iceberg.manifest_stats(context.spark, ref.name)
    decision = plan.manifest_decision(stats, policy)
    if not decision.rewrite:
        return Row(SKIPPED, decision.reason)
    if dry_run:
        return Row(PLANNED, decision.reason, len(stats.lengths))
    rewritten, added, size, snapshot = iceberg.rewrite_manifests(context.spark, ref.name)
    return Row(
        OK,
        f"{decision.reason}; {rewritten} manifests rewritten into {added} ({size} bytes)",
        rewritten,
        0,  # the old manifests stay until their snapshot expires
        0,
        added,
        snapshot,
    )


def _orphans(context: Context, ref: TableRef, policy: plan.Policy, dry_run: bool) -> Row:

    state = iceberg.state(context.spark, ref.name)
    inside = _side_locations_inside(context, ref, state.location)
    if inside:
        return Row(
            SKIPPED,
            f"{inside[0]} lies inside the table location {state.location}; orphan removal "
            "would delete it: move it outside the table location",
        )
    cutoff = plan.orphan_cutoff_ms(policy, int(time.time() * 1000))
    paths = iceberg.orphan_files(context.spark, ref.name, cutoff)
    age = _age(policy.orphan_min_age_ms)
    if not paths:
        return Row(SKIPPED, f"no unreferenced file older than {age}")
    size = iceberg.sizes(context.spark, ref.name, paths)
    reason = f"{_n(len(paths), 'file')} older than {age} that no retained snapshot references"
    if dry_run:
        return Row(PLANNED, reason, len(paths), None, size)
    iceberg.delete_files(context.spark, ref.name, paths)
    return Row(OK, reason, len(paths), len(paths), size)


def _side_locations_inside(context: Context, ref: TableRef, location: str) -> list[str]:
    """sparkext's own files of this table (ingest_cdc checkpoints and event logs, changelog
    checkpoints) that lie under the table location, where Iceberg would see them as orphans."""
    import json

    properties = _fresh_properties(context, ref)
    places = list(json.loads(properties.get(EVENT_LOGS) or "{}").values())
    places += [r.checkpoint for r in registrations(properties) if r.checkpoint]
    root = _normal(location)
    return sorted(p for p in places if _normal(p).startswith(root + "/"))


def _normal(path: str) -> str:
    """``file:///a/b/`` and ``/a/b`` compare equal."""
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            path = path[len(scheme) :]
            break
    return "/" + path.strip("/")


def _n(count: int, noun: str) -> str:
    """A count and its noun.

    >>> _n(1, "file"), _n(2, "file")
    ('1 file', '2 files')
    """
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _age(ms: int) -> str:
    for unit, size in (("days", 86_400_000), ("hours", 3_600_000), ("minutes", 60_000)):
        if ms % size == 0 and ms >= size:
            return f"{ms // size} {unit}"
    return f"{ms // 1000} seconds"


# The options this action reads, declared once: the procedure, help() and the reference page
# show them; table properties sparkext.maintenance.<key> give per-table defaults.
OPTIONS = (
    Option(
        "snapshot-max-age",
        "5 days",
        "expire snapshots older than this (default: the "
        "table's history.expire.max-snapshot-age-ms when set)",
        parse_duration,
    ),
    Option(
        "min-snapshots",
        "10",
        "always keep this many newest snapshots of the main "
        "branch (default: history.expire.min-snapshots-to-keep when set)",
        parse_count,
    ),
    Option(
        "orphan-min-age",
        "3 days",
        "remove only unreferenced files older than this (at least '1 hour')",
        parse_orphan_age,
    ),
    Option(
        "cdc-checkpoint-ttl",
        "7 days",
        "keep an ingest_cdc checkpoint's newest commit "
        "(replay safety) while it is younger than this",
        parse_duration,
    ),
    Option(
        "event-time-retention",
        "7 days",
        "keep the base snapshot snapshot_as_of_event_time needs for any T0 this far back",
        parse_duration,
    ),
    Option(
        "manifest-min-count",
        "16",
        "rewrite manifests only when there are this many "
        "small ones (or this many in all, for the per-partition measure)",
        parse_count,
    ),
    Option(
        "manifest-small-bytes",
        "",
        "a manifest below this size is small (default: a "
        "tenth of commit.manifest.target-size-bytes)",
        or_empty(parse_bytes),
    ),
    Option(
        "manifest-max-per-partition",
        "4",
        "rewrite when there are more manifests than this per live partition",
        parse_positive,
    ),
    Option(
        "manifest-oversized-ratio",
        "4",
        "rewrite when one manifest is this many times commit.manifest.target-size-bytes",
        parse_positive,
    ),
    Option(
        "actions",
        "all",
        "which actions run: all, or a list of " + ", ".join(plan.ACTIONS),
        parse_actions,
    ),
)
