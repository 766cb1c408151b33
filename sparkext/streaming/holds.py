"""A stream job registers itself on its Iceberg sources, so maintenance keeps what it needs.

Spark's Iceberg source keeps its position in the job's checkpoint (``offsets/offsets/<N>``: one
JSON line per source, ``{"snapshot_id": …, "position": …}``). A restart resumes from the
offsets of the last batch that completed, so while batch N runs the snapshot named by
``offsets/<N-1>`` must stay (with everything after it): that snapshot is registered as changelog
consumer ``stream-<checkpoint hash>`` on the source table (the registration maintenance reads,
:mod:`sparkext.planning.changelog_stream`). Before the first batch completes it registers no
snapshot (the whole history: the stream may start from the earliest one). A registration is a
property commit: it is written only when the snapshot moves, or once an hour as a heartbeat.

Floor: streaming.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sparkext.iceberg import changelog_consumers
from sparkext.planning.changelog_stream import Registration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.fs import Location

HEARTBEAT_MS = 3_600_000


def consumer_name(checkpoint: str) -> str:
    """The registration's name: one per checkpoint.

    >>> consumer_name("file:/ck/clicks")
    'stream-4c2391b8'
    """
    return "stream-" + hashlib.sha1(checkpoint.encode()).hexdigest()[:8]


def source_snapshots(text: str | None, count: int) -> list[int | None]:
    """The snapshot of each of ``count`` sources in one offset-log file (None: unknown).

    >>> source_snapshots('v1\\n{"batchWatermarkMs":0}\\n{"version":1,"snapshot_id":7,'
    ...                  '"position":2,"scan_all_files":false}\\n-', 2)
    [7, None]
    """
    if not text:
        return [None] * count
    lines = text.splitlines()[2:]
    out: list[int | None] = []
    for index in range(count):
        try:
            out.append(int(json.loads(lines[index])["snapshot_id"]))
        except (IndexError, ValueError, KeyError, TypeError):
            out.append(None)
    return out


class SourceHolds:
    """Registers a running stream job on its Iceberg sources (module docstring)."""

    def __init__(self, spark: SparkSession, sources: Sequence[str], checkpoint: str,
                 offsets: Location, progress: Callable[[str], None] = lambda m: None):  # fmt: skip
        self.spark = spark
        self.progress = progress
        self.sources = list(sources)
        self.name = consumer_name(checkpoint)
        self.checkpoint = checkpoint
        self.offsets = offsets
        self._written: dict[str, tuple[int | None, int]] = {}

    def before_batch(self, batch_id: int) -> None:
        """Register what a restart during ``batch_id`` would resume from."""
        text = self.offsets.child(str(batch_id - 1)).read_text() if batch_id > 0 else None
        snapshots = source_snapshots(text, len(self.sources))
        now = int(time.time() * 1000)
        for source, snapshot in zip(self.sources, snapshots, strict=True):
            written = self._written.get(source)
            if written is not None and written[0] == snapshot and now - written[1] < HEARTBEAT_MS:
                continue
            self._register(source, snapshot, now)

    def _register(self, source: str, snapshot: int | None, now: int) -> None:

        registration = Registration(self.name, snapshot, now, self.checkpoint)
        try:
            changelog_consumers.set_property(
                self.spark, source, registration.key, registration.to_text()
            )
        except Exception as error:  # never fail the stream for it: the next batch retries
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.progress(f"could not register on {source} for maintenance ({first}); retried")
            return
        self._written[source] = (snapshot, now)
