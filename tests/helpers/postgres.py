"""A throwaway PostgreSQL server for the JDBC-catalog tests: Debian's binaries, started and
stopped by the tests themselves (as the ``postgres`` user when running as root), on a free port
of 127.0.0.1, trust authentication, data in a temporary directory."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

JDBC_JAR = "/usr/share/java/postgresql.jar"
USER = "sparkext"
DATABASE = "iceberg"


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def unavailable() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if _bin() is None:
        return "PostgreSQL's server binaries are not installed (.ci/setup installs postgresql)"
    if not os.path.exists(JDBC_JAR):
        return f"the PostgreSQL JDBC driver {JDBC_JAR} is missing (libpostgresql-jdbc-java)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to start PostgreSQL as another user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base: Path
    port: int
    logical: bool = False  # wal_level=logical: Debezium's pgoutput reads the server's WAL

    @property
    def url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        binaries = _bin()
        data = self.base / "data"
        self._run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", USER)
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        if self.logical:
            options += " -c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=8"
        self._run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                  str(self.base / "log"), "-w", "start")  # fmt: skip
        self._run(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                  USER, DATABASE)  # fmt: skip

    def stop(self) -> None:
        binaries = _bin()
        try:
            self._run(str(binaries / "pg_ctl"), "-D", str(self.base / "data"), "-m", "fast",
                      "stop")  # fmt: skip
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run ``sql`` with psql (unaligned, tuples only, stop at the first error): its output."""
        binaries = _bin()
        done = subprocess.run(
            [str(binaries / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER,
             "-d", database, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", "-"],
            input=sql, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}\n{sql[:2000]}")
        return done.stdout


def start(logical: bool = False) -> Server:
    base = Path(tempfile.mkdtemp(prefix="sparkext-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    server = Server(base, _free_port(), logical)
    server.start()
    return server


def catalog_conf(name: str, server: Server, warehouse: str) -> dict[str, str]:
    """Spark settings of an Iceberg JDBC catalog ``name`` on ``server``."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": server.url,
        f"{prefix}.jdbc.user": USER,
        f"{prefix}.jdbc.password": "unused",
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": warehouse,
    }
