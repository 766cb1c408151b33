"""Plan one round of rewrite_equality_deletes from delete-file metadata. Pure: no Spark, no JVM.

Which equality-delete files to convert (whole partitions first, oldest first, at most
``max_files_per_commit``), which existing position-delete files or deletion vectors to merge, and
the data sequence number each new delete file must carry: the largest of the delete files it
replaces (Iceberg's rule for RewriteFiles.addFile(DeleteFile, long)). A position delete names one
data file, and every data file it names is older than the deletes it replaces, so the new file
deletes exactly the rows the replaced ones did.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

POSITION_DELETES, EQUALITY_DELETES = 1, 2
SUPPORTED_EQUALITY_FORMATS = ("PARQUET",)


@dataclass(frozen=True)
class DeleteFileFact:
    """A live delete file, as the ``entries`` metadata table describes it."""

    path: str
    content: int  # POSITION_DELETES or EQUALITY_DELETES
    sequence_number: int  # data sequence number
    partition: str  # "<spec id>:<partition as JSON>", the key data files are grouped by too
    spec_unpartitioned: bool  # an equality delete of an unpartitioned spec applies table-wide
    records: int
    bytes: int
    file_format: str = "PARQUET"
    equality_ids: tuple[int, ...] = ()
    referenced_data_file: str | None = None
    content_offset: int | None = None  # DVs: several share one Puffin file
    selected: bool = True  # its partition lies wholly inside the `where` predicate

    @property
    def ident(self) -> tuple[str, int]:
        """Identifies the file; DVs of one Puffin file differ by offset."""
        return (self.path, -1 if self.content_offset is None else self.content_offset)

    @property
    def is_dv(self) -> bool:
        return self.file_format == "PUFFIN"

    @property
    def is_file_scoped(self) -> bool:
        """A position delete (or DV) that names exactly one data file."""
        return self.content == POSITION_DELETES and self.referenced_data_file is not None

    @property
    def is_global(self) -> bool:
        return self.content == EQUALITY_DELETES and self.spec_unpartitioned


@dataclass(frozen=True)
class PlanSettings:
    format_version: int = 2
    # one position-delete file per data file (v2 "file" granularity; always so for v3 DVs)
    file_granularity: bool = True
    min_equality_delete_files: int = 1
    max_files_per_commit: int = 1000
    merge_position_deletes: bool = True
    min_position_delete_files: int = 2
    # smallest data sequence number among data files of a partitioned spec (None: there are none)
    partitioned_data_min_sequence: int | None = None


@dataclass(frozen=True)
class RoundPlan:
    convert: tuple[DeleteFileFact, ...]
    merge: tuple[DeleteFileFact, ...]  # existing position deletes / DVs that may be rewritten
    remaining: int  # eligible equality-delete files left for a later round or call
    skipped: tuple[tuple[str, str], ...] = ()  # (path, reason) never convertible here
    sequence_numbers: Mapping[str, int] = field(default_factory=dict)
    global_sequence_number: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.convert and not self.merge

    @property
    def equality_ids(self) -> tuple[tuple[int, ...], ...]:
        """The distinct equality-field sets of the files to convert, each joined separately."""
        return tuple(sorted({f.equality_ids for f in self.convert}))

    def sequence_number(self, partition: str, unpartitioned: bool) -> int:
        """Data sequence number for a new delete file in ``partition``.

        >>> plan = RoundPlan((), (), 0, sequence_numbers={"0:{}": 4}, global_sequence_number=7)
        >>> plan.sequence_number("0:{}", True), plan.sequence_number("2:{}", True)
        (7, 7)
        >>> plan.sequence_number("1:{\\"p\\":1}", False)
        Traceback (most recent call last):
        ...
        KeyError: 'no replaced delete file in partition 1:{"p":1}'
        """
        candidates = [self.sequence_numbers.get(partition)]
        if unpartitioned:
            candidates.append(self.global_sequence_number)
        known = [c for c in candidates if c is not None]
        if not known:
            raise KeyError(f"no replaced delete file in partition {partition}")
        return max(known)


def _skip_reason(f: DeleteFileFact, settings: PlanSettings) -> str | None:
    if f.file_format not in SUPPORTED_EQUALITY_FORMATS:
        return f"{f.file_format} equality-delete files are not converted (Parquet only)"
    if (
        f.is_global
        and settings.partitioned_data_min_sequence is not None
        and settings.partitioned_data_min_sequence < f.sequence_number
    ):
        return (
            "a table-wide equality delete over data files of a partitioned spec is not "
            "converted; rewrite_data_files removes it"
        )
    return None


def plan_round(files: Iterable[DeleteFileFact], settings: PlanSettings) -> RoundPlan:
    """Choose the work of one commit.

    >>> def eq(path, seq):
    ...     return DeleteFileFact(path, 2, seq, "0:{}", True, 10, 100, equality_ids=(1,))
    >>> plan = plan_round([eq("a", 3), eq("b", 2)], PlanSettings())
    >>> [f.path for f in plan.convert], plan.remaining, plan.global_sequence_number
    (['b', 'a'], 0, 3)
    >>> plan_round([eq("a", 3)], PlanSettings(min_equality_delete_files=2)).convert
    ()
    """
    files = list(files)
    skipped: list[tuple[str, str]] = []
    groups: dict[str, list[DeleteFileFact]] = defaultdict(list)
    for f in files:
        if f.content != EQUALITY_DELETES or not f.selected:
            continue
        reason = _skip_reason(f, settings)
        if reason:
            skipped.append((f.path, reason))
        else:
            groups["*" if f.is_global else f.partition].append(f)
    eligible = [
        sorted(g, key=lambda f: (f.sequence_number, f.path))
        for g in groups.values()
        if len(g) >= settings.min_equality_delete_files
    ]
    eligible.sort(key=lambda g: (g[0].sequence_number, g[0].path))
    convert: list[DeleteFileFact] = []
    for group in eligible:
        room = settings.max_files_per_commit - len(convert)
        if room <= 0:
            break
        if len(group) <= room or not convert:  # whole partitions; an oversized one alone
            convert.extend(group[:room])
    total = sum(len(g) for g in eligible)
    touched = {f.partition for f in convert}
    merge = _merge_candidates(files, touched, any(f.is_global for f in convert), settings)
    sequences: dict[str, int] = {}
    for f in [*convert, *merge]:
        if not f.is_global:
            sequences[f.partition] = max(sequences.get(f.partition, 0), f.sequence_number)
    global_seq = max((f.sequence_number for f in convert if f.is_global), default=None)
    return RoundPlan(
        convert=tuple(convert),
        merge=tuple(merge),
        remaining=total - len(convert),
        skipped=tuple(skipped),
        sequence_numbers=sequences,
        global_sequence_number=global_seq,
    )


def _merge_candidates(
    files: Sequence[DeleteFileFact],
    touched: set[str],
    touches_unpartitioned: bool,
    settings: PlanSettings,
) -> list[DeleteFileFact]:
    """Position deletes that may be rewritten.

    Partition granularity (v2): all of a partition's files, where new deletes land or once it
    has ``min_position_delete_files``. File granularity (v2 default, and v3 DVs): files scoped to
    one data file are candidates where new deletes land or where a data file has several; the
    runner keeps those whose data file gets new positions, or is gone. Files not scoped to one
    data file are folded in (always in v3, where only DVs may be added).
    """
    v3 = settings.format_version >= 3
    if not settings.merge_position_deletes and not v3:
        return []
    positions = [f for f in files if f.content == POSITION_DELETES and f.selected]
    by_partition: dict[str, list[DeleteFileFact]] = defaultdict(list)
    for f in positions:
        by_partition[f.partition].append(f)
    chosen: list[DeleteFileFact] = []
    for partition, group in sorted(by_partition.items()):
        hit = partition in touched or (touches_unpartitioned and partition.endswith(":{}"))
        crowded = len(group) >= settings.min_position_delete_files
        if not (v3 or settings.file_granularity):
            if hit or crowded:
                chosen.extend(group)
            continue
        scoped = [f for f in group if f.is_file_scoped]
        unscoped = [f for f in group if not f.is_file_scoped]
        per_file: dict[str | None, int] = defaultdict(int)
        for f in scoped:
            per_file[f.referenced_data_file] += 1
        fold = bool(unscoped) and (v3 or hit or crowded)
        if hit or fold:  # folded partition-wide files may name any data file of the partition
            chosen.extend(scoped)
        else:
            chosen.extend(f for f in scoped if per_file[f.referenced_data_file] > 1)
        if fold:
            chosen.extend(unscoped)
    return sorted(chosen, key=lambda f: f.ident)
