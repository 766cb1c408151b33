"""Debezium heartbeats as progress, and the checkpoint's progress record (``cdc_lag``).

A connector with ``heartbeat.interval.ms`` writes a heartbeat record to its heartbeat topic
(``__debezium-heartbeat.<topic.prefix>``) at that interval, also while the source is idle. Its
value is ``{"ts_ms": <connector time>}`` (schema name ``io.debezium.connector.common.Heartbeat``).
A heartbeat at time H says: the connector had emitted every change committed before H.

So once ingest_cdc has consumed every data file that was landed when heartbeat H was read, the
lake holds every change committed before H, even if the last one is hours old. The run reads the
newest heartbeat *before* it lists its source, and records it as confirmed only when the run
drained the source without an error (:func:`confirm`): the record lives in
``<checkpoint>/progress.json`` (an idle source makes no commit to put it in), and ``cdc_lag``
reads it beside the table's snapshot summaries.

The assumption, documented in the guide: the landing sink lands a topic's records no later than a
heartbeat written after them (the embedded engine and a Kafka Connect sink whose data topics flush
at least as often as the heartbeat topic do).

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparkext.errors import IngestError
from sparkext.fs import Location

HEARTBEAT_SCHEMA = "io.debezium.connector.common.Heartbeat"
PROGRESS_FILE = "progress.json"


@dataclass(frozen=True)
class Confirmed:
    """A heartbeat the lake has caught up with, and when that was established."""

    heartbeat_ms: int
    confirmed_ms: int  # wall clock of the run that drained the source
    batch_id: int | None  # the checkpoint's newest committed batch then (None: none yet)

    def as_json(self) -> str:
        return json.dumps(
            {
                "heartbeat-ms": self.heartbeat_ms,
                "confirmed-ms": self.confirmed_ms,
                "batch-id": self.batch_id,
            },
            sort_keys=True,
        )


def heartbeat_time(line: str) -> int | None:
    """The ``ts_ms`` of one heartbeat record (with or without the converter's schema envelope;
    a Kafka Connect ``{"key":…, "value":…}`` pair too); ``None`` for a blank line.

    >>> heartbeat_time('{"schema": {"name": "io.debezium.connector.common.Heartbeat"},'
    ...                ' "payload": {"ts_ms": 1700000000123}}')
    1700000000123
    >>> heartbeat_time('{"ts_ms": 5}'), heartbeat_time("  ")
    (5, None)
    >>> heartbeat_time('{"payload": {"op": "c", "ts_ms": 5}}')
    Traceback (most recent call last):
    ...
    ValueError: a change event, not a heartbeat
    """
    text = line.strip()
    if not text:
        return None
    record = json.loads(text)
    if isinstance(record, dict) and "value" in record and "key" in record:
        record = record["value"]
    if isinstance(record, dict) and "payload" in record:
        record = record["payload"]
    if not isinstance(record, dict) or "op" in record or "source" in record:
        raise ValueError("a change event, not a heartbeat")
    value = record.get("ts_ms")
    if not isinstance(value, int):
        raise ValueError("no ts_ms number")
    return value


def newest(source: str) -> int | None:
    """The newest heartbeat time among the files under ``source`` (the heartbeat topic's
    landing directory, searched recursively): the last record of the most recently landed
    file. ``None`` when no heartbeat has landed yet.

    Raises:
        IngestError: the location is missing, or its newest file holds no heartbeat records.
    """
    from pyarrow import fs

    location = Location.of(source)
    if not location.exists():
        raise IngestError(
            f"Heartbeat source '{source}' does not exist: point heartbeat-source at the landing "
            "directory of the connector's heartbeat topic (__debezium-heartbeat.<topic.prefix>, "
            "written when the connector sets heartbeat.interval.ms)."
        )
    files = [
        info
        for info in location.filesystem.get_file_info(
            fs.FileSelector(location.path, recursive=True)
        )
        # hidden and marker files are not records (the topic's own files start with "__")
        if info.type == fs.FileType.File
        and not info.base_name.startswith(".")
        and info.base_name != "_SUCCESS"
        and not info.base_name.endswith((".tmp", ".crc"))
    ]
    for info in sorted(files, key=lambda f: (f.mtime_ns or 0, f.path), reverse=True)[:3]:
        with location.filesystem.open_input_stream(info.path) as stream:
            lines = stream.read().decode("utf-8", "replace").splitlines()
        try:
            times = [t for t in (heartbeat_time(line) for line in lines) if t is not None]
        except ValueError as error:
            raise IngestError(
                f"Heartbeat source '{source}' holds records that are not Debezium heartbeats "
                f"({error}, in {info.base_name}): point heartbeat-source at the heartbeat "
                "topic's own directory, not at a table's."
            ) from None
        if times:
            return max(times)
    return None


def confirm(checkpoint: str, confirmed: Confirmed) -> None:
    """Record ``confirmed`` as the checkpoint's progress, unless a newer heartbeat is there."""
    previous = read(checkpoint)
    if previous is not None and previous.heartbeat_ms > confirmed.heartbeat_ms:
        return
    Location.of(checkpoint).child(PROGRESS_FILE).write_text(confirmed.as_json())


def read(checkpoint: str) -> Confirmed | None:
    """The checkpoint's progress record; ``None`` when it has none (or it cannot be read)."""
    try:
        text = Location.of(checkpoint).child(PROGRESS_FILE).read_text()
        if text is None:
            return None
        data = json.loads(text)
        batch = data.get("batch-id")
        return Confirmed(
            int(data["heartbeat-ms"]),
            int(data["confirmed-ms"]),
            int(batch) if batch is not None else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
