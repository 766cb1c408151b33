"""``sparkext-sql serve`` in a process of its own, as a user starts it, for the JDBC tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


@dataclass
class Served:
    process: subprocess.Popen
    log: Path
    port: int


def launch(tmp: Path, warehouse: Path, *options: str, master: str = "local[2]") -> Served:
    """Start the server (HOME and the cwd in ``tmp``, on ``warehouse``); :func:`ready` waits."""
    port = free_port()
    log = tmp / f"server-{port}.log"
    env = {**os.environ, "HOME": str(tmp), "SPARKEXT_WAREHOUSE": str(warehouse)}
    env.pop("SPARKEXT_LOG_LEVEL", None)
    command = [
        sys.executable, "-m", "sparkext.cli.shell", "serve", "--port", str(port),
        "--master", master, "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.driver.memory=1g", "--conf", "spark.sparkext.audit.flush-interval=1",
        *options,
    ]  # fmt: skip
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    return Served(process, log, port)


def ready(served: Served, within: float = 240) -> Served:
    """Wait for the server's "Ctrl-C stops" line; its log is the failure's message."""
    deadline = time.monotonic() + within
    while "Ctrl-C stops" not in served.log.read_text():
        assert served.process.poll() is None, served.log.read_text()
        assert time.monotonic() < deadline, served.log.read_text()
        time.sleep(0.05)
    return served


def stop(served: Served) -> None:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=120)
