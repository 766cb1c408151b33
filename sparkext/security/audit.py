"""The audit log: every routine call on every route, appended to an Iceberg table in batches.

One row per call of a sparkext routine (procedure or table function) or an Iceberg procedure:
who, route, routine, arguments as written (secrets masked), tables touched, snapshots produced,
outcome, duration. Calls are queued in memory and appended in one commit per batch, every
``spark.sparkext.audit.flush-interval`` seconds (10), at 500 queued calls, and when the process
exits. Recording never fails the call it records: a batch that cannot be written is kept and
tried again at the next flush (the server's log says why), up to 100,000 calls.

Settings (the application's Spark conf, which a JDBC client's ``SET`` cannot change):
``spark.sparkext.audit.enabled`` (true), ``spark.sparkext.audit.table``
(``<default catalog>.sparkext.audit_log``), ``spark.sparkext.audit.flush-interval`` (10).

Floor: security.
"""

from __future__ import annotations

import atexit
import collections
import datetime as dt
import logging
import re
import threading
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING

from sparkext import identifiers
from sparkext.iceberg.catalog import activate_session, split_name
from sparkext.spark import settings
from sparkext.spark.extension import thread_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG = logging.getLogger("sparkext.audit")
NAMESPACE, TABLE = "sparkext", "audit_log"
SCHEMA = (
    ("ts", "timestamp", "when the call started"),
    ("user", "string", "who: the serve client's authenticated user, else Spark's user"),
    ("route", "string", "shell, python (sparkext.sql), spark.sql, serve or service"),
    ("client", "string", "serve: the client's address (NULL on other routes)"),
    ("routine", "string", "sparkext.<name>, or the Iceberg procedure as written"),
    ("kind", "string", "procedure, function or iceberg procedure"),
    ("arguments", "string", "the arguments as written, secret values masked as ***"),
    ("tables", "array<string>", "the tables its table arguments name"),
    ("snapshots", "map<string,bigint>", "table -> the snapshot the call left current, if new"),
    ("outcome", "string", "ok, failed or refused"),
    ("error", "string", "the one-sentence error (NULL: none)"),
    ("duration_ms", "bigint", "wall-clock time of the call (a table function: building it)"),
    ("application", "string", "the Spark application id"),
)
DDL = ", ".join(f"`{name}` {kind}" for name, kind, _ in SCHEMA)
FLUSH_AT = 500
KEEP_AT_MOST = 100_000
# Spark's own default for spark.redaction.regex: the keys whose values Spark hides in its UI.
SPARK_REDACTION = r"(?i)secret|password|token|access[.]key"
MASK = "***"


@dataclass
class Entry:
    ts: dt.datetime
    user: str
    route: str
    client: str | None
    routine: str
    kind: str
    arguments: str
    tables: list[str] = field(default_factory=list)
    snapshots: dict[str, int] = field(default_factory=dict)
    outcome: str = "ok"
    error: str | None = None
    duration_ms: int | None = None
    application: str | None = None


def mask(text: str, secret: str = SPARK_REDACTION) -> str:
    """``text`` (SQL arguments) with the values of secret keys replaced by ``***``: a string
    following a key string that matches ``secret`` (a map's pair), a named argument whose name
    matches, and ``key=value`` in URLs and connection strings.

    >>> print(mask("map('source.password', 'p''w', 'user', 'bob')"))
    map('source.password', '***', 'user', 'bob')
    >>> print(mask("source => 'jdbc:postgresql://h/db?user=a&password=hunter2', token => 'x'"))
    source => 'jdbc:postgresql://h/db?user=a&password=***', token => '***'
    """
    flags = re.IGNORECASE if secret.startswith("(?i)") else 0
    words = secret[4:] if secret.startswith("(?i)") else secret
    key = rf"(?:{words})"
    literal = r"'(?:[^'\\]|''|\\.)*'"
    text = re.sub(
        rf"('(?:[^'\\]|''|\\.)*?{key}(?:[^'\\]|''|\\.)*'\s*,\s*){literal}",
        rf"\1'{MASK}'",
        text,
        flags=flags,
    )
    text = re.sub(rf"(\b\w*{key}\w*\s*=>\s*){literal}", rf"\1'{MASK}'", text, flags=flags)
    return re.sub(rf"(\b[\w.]*{key}[\w.]*=)[^&;'\s)]+", rf"\1{MASK}", text, flags=flags)


class AuditLog:
    """The queue of one Spark application's calls and the thread that appends them."""

    def __init__(self, spark: SparkSession, table: str, interval: float):
        self.table = table
        self._context = spark.sparkContext
        self._interval = interval
        self._pending: collections.deque[Entry] = collections.deque()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._ensured = False
        self._warned: str | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="sparkext-audit", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def record(self, entry: Entry) -> None:
        with self._lock:
            self._pending.append(entry)
            while len(self._pending) > KEEP_AT_MOST:
                self._pending.popleft()
            many = len(self._pending) >= FLUSH_AT
        if many:
            self._wake.set()

    def flush(self, quiet: bool = False) -> int:
        """Append every queued call now; returns how many were written (0 when it failed)."""
        with self._write_lock:
            with self._lock:
                batch = list(self._pending)
            if not batch:
                return 0
            try:
                self._append(batch)
            except Exception as error:  # never the caller's failure: kept for the next flush
                why = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                if quiet:
                    _LOG.debug("sparkext audit log %s not written at exit (%s)", self.table, why)
                elif why != self._warned:
                    _LOG.warning("sparkext audit log %s not written, kept (%s)", self.table, why)
                    self._warned = why
                return 0
            self._warned = None
            with self._lock:
                for _ in batch:
                    self._pending.popleft()
            return len(batch)

    def close(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        try:
            # after spark.stop() there is nothing to write with: the calls of the last
            # flush interval are lost, quietly (flush() never raises)
            self.flush(quiet=True)
        except Exception:
            _LOG.debug("audit log not flushed at exit", exc_info=True)

    def _run(self) -> None:
        from pyspark import SparkContext

        while not self._stopped:
            self._wake.wait(self._interval)
            self._wake.clear()
            if SparkContext._active_spark_context is not self._context:
                return  # spark.stop(): nothing to write with any more
            if not self._stopped:
                self.flush()

    def _append(self, batch: list[Entry]) -> None:

        spark = thread_session(self._context)
        if spark is None:
            raise RuntimeError("no Spark session")
        activate_session(spark)
        name = identifiers.join(split_name(spark, self.table))
        if not self._ensured:
            namespace = identifiers.join(split_name(spark, self.table)[:-1])
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
            spark.sql(
                f"CREATE TABLE IF NOT EXISTS {name} ({DDL}) USING iceberg "
                "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2', "
                "'commit.retry.num-retries'='20')"
            )
            self._ensured = True
        spark.createDataFrame([astuple(e) for e in batch], DDL).writeTo(name).append()


_LOGS: dict[str, AuditLog] = {}
_LOGS_LOCK = threading.Lock()


def audit_log(spark: SparkSession) -> AuditLog | None:
    """The application's audit log, or None when ``spark.sparkext.audit.enabled`` is false."""
    enabled = settings.setting(spark, "spark.sparkext.audit.enabled", "true") or ""
    if enabled.strip().lower() == "false":
        return None
    application = settings.application(spark).id
    found = _LOGS.get(application)
    if found is not None:
        return found
    with _LOGS_LOCK:
        if application not in _LOGS:
            catalog = settings.setting(spark, "spark.sql.defaultCatalog", "spark_catalog")
            table = settings.setting(spark, "spark.sparkext.audit.table") or (
                f"{catalog}.{NAMESPACE}.{TABLE}"
            )
            every = settings.setting(spark, "spark.sparkext.audit.flush-interval", "10")
            interval = float(every or 10)
            _LOGS[application] = AuditLog(spark, table, max(interval, 0.1))
        return _LOGS[application]


def flush(spark: SparkSession) -> int:
    """Write the application's queued calls now (``sparkext.security.audit.flush(spark)``)."""
    log = audit_log(spark)
    return log.flush() if log is not None else 0


def redaction(spark: SparkSession) -> str:
    return settings.setting(spark, "spark.redaction.regex", SPARK_REDACTION) or SPARK_REDACTION


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)
