"""The state ingest_cdc's stages pass each other: the pipeline's long-lived context, the
per-micro-batch state, the batch as planned against one snapshot, what a write left, and the
named points a test may stop the process at.

Floor: actions (driver side of ingest_cdc). Data only: every stage takes these as arguments, so
nothing of one batch is kept on the long-lived pipeline object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc.ingest.figures import AppliedFigures

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.actions.cdc.model import Settings
    from sparkext.executors.cdc.files import WrittenFile
    from sparkext.iceberg.cdc_table import CdcTable

KEY_CACHE = "keys"  # <checkpoint>/keys/batch=N: keys a batch applied, with their positions
LEGACY_KEY_CACHE = "key-cache"  # written by Spark before the file writers kept the cache


class Hooks:
    """Named points of a batch ("after-write": its files written, not committed;
    "after-commit": committed, the stream's checkpoint not yet): nothing happens there. A test
    passes a subclass that stops the process at one of them, to prove a restart neither loses
    nor doubles a batch."""

    def reached(self, point: str) -> None:
        """Called at ``point``; the product's hooks do nothing."""


NO_HOOKS = Hooks()


@dataclass(frozen=True)
class Context:
    """What every stage reads of the long-lived pipeline: the session, the settings, the
    checkpoint's id, where progress lines go and the test hooks; and the checkpoint's paths."""

    spark: SparkSession
    settings: Settings
    checkpoint_id: str
    progress: Callable[[str], None]
    hooks: Hooks = NO_HOOKS

    def events_root(self) -> str:
        return f"{self.settings.checkpoint}/events"

    def event_log_dir(self, batch_id: int) -> str:
        return f"{self.events_root()}/batch={batch_id}"

    def key_cache_dir(self, batch_id: int | None = None) -> str:
        root = f"{self.settings.checkpoint}/{KEY_CACHE}"
        return root if batch_id is None else f"{root}/batch={batch_id}"

    def legacy_key_cache_dir(self) -> str:
        return f"{self.settings.checkpoint}/{LEGACY_KEY_CACHE}"


class Persisted:
    """The frames a micro-batch persisted, released when it ends (a continuous stream must not
    accumulate one cached copy per batch) or when it is decided again."""

    def __init__(self) -> None:
        self._frames: list[DataFrame] = []

    def persist(self, frame: DataFrame) -> DataFrame:
        """``frame.persist()``, released with the others."""
        frame = frame.persist()
        self._frames.append(frame)
        return frame

    def release(self) -> None:
        frames, self._frames = self._frames, []
        for frame in frames:
            frame.unpersist()


@dataclass(frozen=True)
class BatchState:
    """One micro-batch, created when it starts and passed through the stages; a stage that
    learns more returns a new one (``dataclasses.replace``)."""

    batch_id: int
    persisted: Persisted = field(default_factory=Persisted)
    # of a batch typed with a guess: its typing tasks decode too, so its event log is written
    # by at least as many tasks as its input has (see write.event_log_files)
    input_partitions: int = 1
    events: int = 0  # good events (the guess's count until the batch's own is known)
    low: str | None = None  # lowest source position of its good events
    known: str | None = None  # the table's high-water mark the batch is decided on

    def all_newer(self, known: str | None) -> bool:
        """Every change of the batch is newer than ``known`` (the table's high-water mark)."""
        return known is None or (self.low is not None and self.low > known)


@dataclass(frozen=True)
class Plan:
    """The batch planned against the table's current snapshot: what deciding, writing and
    committing it need to know (planned again when another writer changed its keys)."""

    table: CdcTable
    commit: Any  # the batch's open CdcCommit
    columns: Mapping[str, str]  # user columns -> Spark types, after schema evolution
    key: tuple[str, ...]
    field_ids: Mapping[str, int]
    batch_id: int
    per_partition: Mapping[str, str]  # source partition -> max position in this batch


@dataclass(frozen=True)
class Written:
    """What a batch's write job left: its table files, its figures, where and under which
    name prefix its files are (to remove them if the batch is not committed)."""

    files: list[WrittenFile]
    figures: AppliedFigures
    directory: str
    prefix: str
