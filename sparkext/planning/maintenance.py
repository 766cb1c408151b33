"""Decide a table's maintenance from its metadata: pure Python, no Spark.

Policy (table properties ``sparkext.maintenance.<key>``, or ``options => map(...)``):

* **expire snapshots** older than ``snapshot-max-age`` (default 5 days, Iceberg's own default),
  always keeping the newest ``min-snapshots`` (default 10) of the main branch;
* **remove orphan files** never younger than ``orphan-min-age`` (default 3 days; a shorter age
  is refused below 1 hour: Iceberg's docs warn that in-flight writes' files look orphaned);
* **rewrite manifests** when planning would benefit (:func:`manifest_decision`);
* **remove dangling deletes** (delete files that no live data file can match any more).

**Holds.** A snapshot that something still depends on is kept, and with it every snapshot
committed after it on the same history, so each dependent can walk from the table's head down
to it (:func:`holds`):

1. a registered changelog consumer (streams with ``consumer-name``, the stream jobs' Iceberg
   sources): the last snapshot it consumed, while its heartbeat is younger than its TTL;
2. an ``ingest_cdc`` checkpoint: its newest commit (replay safety reads the batch id there),
   while that commit is younger than ``cdc-checkpoint-ttl`` (default 7 days);
3. ``snapshot_as_of_event_time``: the base snapshot s1 of T0 = now − ``event-time-retention``
   (default 7 days), so any T0 inside the window plans from a retained base;
4. a tag or branch head (Iceberg's own refs; their ``max-ref-age`` is Iceberg's to apply).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparkext.planning.changelog_stream import Registration
from sparkext.planning.summary import CHECKPOINT_ID

PROPERTY_PREFIX = "sparkext.maintenance."
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MIN_ORPHAN_AGE_MS = HOUR_MS  # below this, orphan removal would race in-flight writes

ACTIONS = (
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_manifests",
    "remove_dangling_deletes",
)


@dataclass(frozen=True)
class Policy:
    snapshot_max_age_ms: int = 5 * DAY_MS
    min_snapshots: int = 10
    orphan_min_age_ms: int = 3 * DAY_MS
    cdc_checkpoint_ttl_ms: int = 7 * DAY_MS
    event_time_retention_ms: int = 7 * DAY_MS
    manifest_min_count: int = 16
    manifest_small_bytes: int = 0  # 0: a tenth of commit.manifest.target-size-bytes
    manifest_max_per_partition: float = 4.0
    manifest_oversized_ratio: float = 4.0  # a manifest this many times the target is oversized
    actions: frozenset[str] = frozenset(ACTIONS)


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    summary: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Ref:
    name: str
    kind: str  # "BRANCH" or "TAG"
    snapshot_id: int


@dataclass(frozen=True)
class Hold:
    """A snapshot kept because ``holder`` (one phrase) still depends on it."""

    snapshot_id: int
    holder: str


@dataclass(frozen=True)
class ExpiryPlan:
    expire: tuple[int, ...]  # snapshot ids, oldest first
    held: tuple[int, ...]  # old enough to expire, kept for a hold
    holders: tuple[str, ...]  # the holds that kept something

    @property
    def reason(self) -> str:
        if not self.expire and not self.held:
            return "no snapshot past the policy's age and count"
        said = f"{len(self.expire)} snapshot(s) past the policy's age and count"
        if self.held:
            said += f"; {len(self.held)} more kept for {', '.join(self.holders)}"
        return said


def ancestry(snapshots: Mapping[int, Snapshot], head: int | None) -> list[Snapshot]:
    """``head`` and its retained ancestors, newest first.

    >>> s = {1: Snapshot(1, None, 1), 2: Snapshot(2, 1, 2), 3: Snapshot(3, 1, 3)}
    >>> [x.snapshot_id for x in ancestry(s, 2)]
    [2, 1]
    """
    chain, current = [], snapshots.get(head) if head is not None else None
    while current is not None:
        chain.append(current)
        current = snapshots.get(current.parent_id) if current.parent_id is not None else None
    return chain


def holds(
    snapshots: Mapping[int, Snapshot],
    head: int | None,
    consumers: Iterable[Registration],
    policy: Policy,
    now_ms: int,
    event_time_base: int | None = None,
) -> list[Hold]:
    """What the table's dependents need (see the module docstring); ``event_time_base`` is the
    base snapshot s1 of T0 = now − event-time-retention, planned by the caller with
    :func:`sparkext.planning.event_time.plan_as_of` over the same ancestry.

    >>> s = {1: Snapshot(1, None, 0, {CHECKPOINT_ID: "ck"}), 2: Snapshot(2, 1, 50)}
    >>> holds(s, 2, [Registration("es", 1, heartbeat_ms=90)], Policy(cdc_checkpoint_ttl_ms=100),
    ...       now_ms=100)
    [Hold(snapshot_id=1, holder="changelog consumer 'es'"), \
Hold(snapshot_id=1, holder="ingest_cdc checkpoint 'ck'")]
    """
    out: list[Hold] = []
    main = ancestry(snapshots, head)
    for consumer in consumers:
        if consumer.is_stale(now_ms):
            continue
        if consumer.snapshot_id is None:  # before the first snapshot: the whole history
            if main:
                out.append(Hold(main[-1].snapshot_id, f"changelog consumer '{consumer.name}'"))
        elif consumer.snapshot_id in snapshots:
            out.append(Hold(consumer.snapshot_id, f"changelog consumer '{consumer.name}'"))
    newest: dict[str, Snapshot] = {}
    for snapshot in main:  # newest first: the first one seen per checkpoint is its newest
        checkpoint = snapshot.summary.get(CHECKPOINT_ID)
        if checkpoint is not None and checkpoint not in newest:
            newest[checkpoint] = snapshot
    for checkpoint, snapshot in newest.items():
        if now_ms - snapshot.timestamp_ms <= policy.cdc_checkpoint_ttl_ms:
            out.append(Hold(snapshot.snapshot_id, f"ingest_cdc checkpoint '{checkpoint}'"))
    if event_time_base is not None and event_time_base in snapshots:
        out.append(Hold(event_time_base, "snapshot_as_of_event_time's retention window"))
    return out


def plan_expiry(
    snapshots: Mapping[int, Snapshot],
    refs: Sequence[Ref],
    head: int | None,
    policy: Policy,
    held: Sequence[Hold],
    now_ms: int,
) -> ExpiryPlan:
    """The snapshots to expire: on the main branch's history, older than the max age and not
    among its newest ``min_snapshots``, and not at or before a hold's snapshot on that history
    (a hold keeps its snapshot and everything after it); snapshots on no branch's history (left
    by a rollback) older than the max age. Ref heads and other branches' histories are kept.

    >>> s = {i: Snapshot(i, i - 1 if i > 1 else None, i * 10) for i in range(1, 7)}
    >>> p = plan_expiry(s, [Ref("main", "BRANCH", 6)], 6, Policy(snapshot_max_age_ms=25,
    ...                 min_snapshots=2), [Hold(2, "consumer 'x'")], now_ms=60)
    >>> p.expire, p.held, p.holders
    ((1,), (2, 3), ("consumer 'x'",))
    """
    cutoff = now_ms - policy.snapshot_max_age_ms
    main = ancestry(snapshots, head)
    keep: set[int] = {r.snapshot_id for r in refs}
    keep.update(s.snapshot_id for s in main[: max(policy.min_snapshots, 1)])
    on_branch: set[int] = set()
    for ref in refs:
        if ref.kind.upper() == "BRANCH":
            chain = ancestry(snapshots, ref.snapshot_id)
            on_branch.update(s.snapshot_id for s in chain)
            if ref.snapshot_id != head:
                keep.update(s.snapshot_id for s in chain)  # another branch: its own policy
    position = {s.snapshot_id: i for i, s in enumerate(main)}  # 0 = head
    hold_at: dict[int, list[str]] = {}
    deepest = -1
    for hold in held:
        if hold.snapshot_id in position:
            deepest = max(deepest, position[hold.snapshot_id])
            hold_at.setdefault(position[hold.snapshot_id], []).append(hold.holder)
        else:
            keep.add(hold.snapshot_id)  # on another branch, or unknown: keep just that one
    expire: list[int] = []
    kept_for_hold: list[int] = []
    holders: list[str] = []
    for index, snapshot in enumerate(main):
        old = snapshot.timestamp_ms < cutoff
        if snapshot.snapshot_id in keep or not old:
            continue
        if index <= deepest:
            kept_for_hold.append(snapshot.snapshot_id)
            continue
        expire.append(snapshot.snapshot_id)
    if kept_for_hold:  # a hold at depth k keeps 0..k: it kept something if k reaches one
        shallowest = min(position[i] for i in kept_for_hold)
        for index in sorted(hold_at, reverse=True):  # the one furthest behind first
            if index >= shallowest:
                holders.extend(h for h in hold_at[index] if h not in holders)
    for snapshot in snapshots.values():  # off every branch (a rollback left it behind)
        if (
            snapshot.snapshot_id not in on_branch
            and snapshot.snapshot_id not in keep
            and snapshot.timestamp_ms < cutoff
        ):
            expire.append(snapshot.snapshot_id)
    expire.sort(key=lambda i: (snapshots[i].timestamp_ms, i))
    kept_for_hold.sort(key=lambda i: (snapshots[i].timestamp_ms, i))
    return ExpiryPlan(tuple(expire), tuple(kept_for_hold), tuple(holders))


@dataclass(frozen=True)
class ManifestStats:
    """The current snapshot's data manifests: their sizes, and how many live partitions."""

    lengths: tuple[int, ...]
    partitions: int
    target_bytes: int


@dataclass(frozen=True)
class ManifestDecision:
    rewrite: bool
    reason: str


def manifest_decision(stats: ManifestStats, policy: Policy) -> ManifestDecision:
    """Whether rewriting the data manifests would speed up planning, by three measures:

    * **small manifests**: at least ``manifest-min-count`` manifests smaller than a tenth of
      the target size (each commit of a stream adds one; planning opens every one);
    * **manifests per partition**: more than ``manifest-max-per-partition`` manifests per live
      partition (with at least ``manifest-min-count`` manifests): a one-partition query cannot
      prune them, since each commit's manifest spans the partitions it touched;
    * **an oversized manifest**: one above ``manifest-oversized-ratio`` × the target size
      (planning reads it on one thread).

    >>> manifest_decision(ManifestStats((100,) * 20, 10, 8 << 20), Policy()).reason
    '20 small manifests (< 838860 bytes each; the policy allows 15)'
    >>> manifest_decision(ManifestStats((8 << 20,) * 3, 3, 8 << 20), Policy()).rewrite
    False
    """
    lengths = stats.lengths
    target = max(stats.target_bytes, 1)
    small_limit = policy.manifest_small_bytes or max(target // 10, 1)
    small = sum(1 for n in lengths if n < small_limit)
    if small >= policy.manifest_min_count:
        return ManifestDecision(
            True,
            f"{small} small manifests (< {small_limit} bytes each; the policy allows "
            f"{policy.manifest_min_count - 1})",
        )
    per_partition = len(lengths) / max(stats.partitions, 1)
    if len(lengths) >= policy.manifest_min_count and per_partition > (
        policy.manifest_max_per_partition
    ):
        return ManifestDecision(
            True,
            f"{len(lengths)} manifests for {stats.partitions} partitions ({per_partition:.1f} "
            f"per partition; the policy allows {policy.manifest_max_per_partition:g})",
        )
    biggest = max(lengths, default=0)
    if biggest > policy.manifest_oversized_ratio * target:
        return ManifestDecision(
            True,
            f"one manifest of {biggest} bytes ({biggest / target:.1f}× the {target}-byte target)",
        )
    return ManifestDecision(
        False,
        f"{len(lengths)} manifests, {small} small, {per_partition:.1f} per partition: "
        "planning would not benefit",
    )


def orphan_cutoff_ms(policy: Policy, now_ms: int) -> int:
    """Files modified before this instant may be removed when nothing references them."""
    return now_ms - max(policy.orphan_min_age_ms, MIN_ORPHAN_AGE_MS)
