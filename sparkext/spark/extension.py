"""The py4j side of sparkext's JVM extension: the Python driver Spark calls back into.

``attach`` registers one callback object with the JVM (``io.sparkext.spark.Bridge``), through the
callback server PySpark starts for ``foreachBatch``. Spark's parser, in any session of the
application (``spark.sql``, the Thrift server's sessions, a view being read), turns sparkext's SQL
into pending-routine plan nodes; the extension's analyser rule asks this object for each one, and
it answers with a Dataset (a plan) or the error sentence, never with rows.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sparkext.errors import EnvironmentSetupError, SparkextError
from sparkext.fs import set_default_filesystem
from sparkext.jvm import BRIDGE, EXTENSION, jar_path
from sparkext.spark.environment import ship, warn_about_the_catalog
from sparkext.spark.java import import_pyspark_short_names
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_LOG = logging.getLogger("sparkext.extension")
_LOCK = threading.Lock()
_registered: list[Any] = []  # the callback object: py4j keeps only a weak reference to it
# The last results handed to the JVM: a Python DataFrame dropped as soon as the callback returns
# could let py4j release its Java object before the JVM has read the reply.
_HANDED: collections.deque[Any] = collections.deque(maxlen=64)


def spark_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the extension added: its class last in ``spark.sql.extensions`` (after
    Iceberg's, so its parser wraps Iceberg's), its jar on ``spark.jars`` (executors) and, with
    every local jar of ``spark.jars``, on ``spark.driver.extraClassPath``: the Thrift server
    opens its sessions with Hive's class loader, which sees only the driver's class path."""
    out = dict(conf)
    extensions = [e.strip() for e in out.get("spark.sql.extensions", "").split(",") if e.strip()]
    if EXTENSION not in extensions:
        out["spark.sql.extensions"] = ",".join([*extensions, EXTENSION])
    jar = str(jar_path())
    jars = [j for j in out.get("spark.jars", "").split(",") if j]
    if jar not in jars:
        jars.append(jar)
        out["spark.jars"] = ",".join(jars)
    key = "spark.driver.extraClassPath"
    path = [p for p in out.get(key, "").split(os.pathsep) if p]
    for local in jars:
        if "://" not in local and local not in path:
            path.append(local)
    out[key] = os.pathsep.join(path)
    return out


def has_extension(spark: SparkSession) -> bool:
    """Whether ``spark`` was built with sparkext's extension (its sessions parse sparkext's SQL)."""
    configured = spark.sparkContext.getConf().get("spark.sql.extensions", "") or ""
    return EXTENSION in [e.strip() for e in configured.split(",")]


def is_attached(spark: SparkSession) -> bool:
    """Whether ``spark.sql`` runs sparkext's SQL: the session parses with the extension and this
    driver answers."""
    if not _registered or not _bridge(spark).isRegistered():
        return False
    return _parses_ours(spark)


def _parses_ours(spark: SparkSession) -> bool:
    from py4j.java_gateway import JavaClass

    bridge = _bridge(spark)
    if not isinstance(bridge, JavaClass):  # the extension's jar is not on this JVM's class path
        return False
    # The parser is a proxy (it exposes the interfaces of the parser it wraps, Iceberg's included).
    return bool(bridge.isSparkextParser(spark._jsparkSession.sessionState().sqlParser()))


def thread_session(context: Any) -> SparkSession | None:
    """The Python face of this thread's active JVM session, else of the application's
    default one (None: neither is set). The session PySpark built first keeps its object."""
    from pyspark.sql import SparkSession

    jvm = jvm_of(context)
    for found in (jvm.SparkSession.getActiveSession(), jvm.SparkSession.getDefaultSession()):
        if found.isDefined():
            jsession = found.get()
            known = SparkSession._instantiatedSession
            if known is not None and known._jsparkSession.equals(jsession):
                return known
            return SparkSession(context, jsession)
    return None


def attach(spark: SparkSession, answers: Answers) -> SparkSession:
    """Make ``spark.sql`` (and every session of its application) run sparkext's SQL.

    A session built with the extension (``sparkext.session()``, or spark-submit / a notebook
    with ``spark.sql.extensions`` and ``spark.jars`` as ``sparkext.spark_conf()`` gives them) is
    returned as it is. One built without it cannot change its parser: the extension is added to
    the application and a clone of the session (same conf, temp views, catalogs) is returned and
    made the active one, so write ``spark = sparkext.attach(spark)``.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    if not has_extension(spark) and not _parses_ours(spark):
        spark = _clone_with_extension(spark)
    gateway = spark.sparkContext._gateway
    with _LOCK:
        ensure_callback_server_started(gateway)
        if not _registered:
            _registered.append(_Routines(spark, answers))
        _registered[0].answers = answers
        _bridge(spark).register(_registered[0])
        import_pyspark_short_names(spark)  # PySpark's F.* and select() ask for them each call

    # a plain path is where Spark reads it: on the default file system (hdfs://… on YARN)
    set_default_filesystem(spark._jsc.hadoopConfiguration().get("fs.defaultFS", "file:///"))
    ship(spark)  # spark.sparkext.ship: this sparkext to the executors, once per application
    warn_about_the_catalog(spark)
    return spark


def detach(spark: SparkSession) -> None:
    """Stop answering: sparkext's SQL in ``spark.sql`` then fails with one sentence."""
    _bridge(spark).unregister()


def _bridge(spark: SparkSession) -> Any:
    bridge = jvm_of(spark)
    for part in BRIDGE.split("."):
        bridge = getattr(bridge, part)
    return bridge


_CALLER: dict[int, Any] = {}  # by gateway: io.sparkext.spark.Caller


def jvm_caller(spark: SparkSession, route: str, user: str) -> Callable[[], None]:
    """Name ``route`` and ``user`` on this thread's JVM twin for the statements it passes to Spark
    (``io.sparkext.spark.Caller``); returns what undoes it. A no-op without the extension's jar."""
    from py4j.java_gateway import JavaClass

    gateway = spark.sparkContext._gateway
    caller = _CALLER.get(id(gateway))
    if caller is None:
        try:
            caller = jvm_of(spark).io.sparkext.spark.Caller  # four round trips: once
        except Exception:  # a stopped gateway
            return lambda: None
        if not isinstance(caller, JavaClass):
            return lambda: None
        _CALLER[id(gateway)] = caller
    caller.enter(route, user)
    return caller.leave


def _clone_with_extension(spark: SparkSession) -> SparkSession:
    """Add the extension to a running application and return a clone of ``spark`` that has it."""
    from pyspark.sql import SparkSession

    jvm = jvm_of(spark)
    jar = str(jar_path())
    try:
        spark.sql(f"ADD JAR '{jar}'")  # the session's class loader, for this thread
        extension = jvm.io.sparkext.spark.SparkextExtensions()
        extension.apply(spark._jsparkSession.extensions())
        clone = spark._jsparkSession.cloneSession()
        # A clone starts in the default catalog: keep the session's USE.
        here, there = (s.sessionState().catalogManager() for s in (spark._jsparkSession, clone))
        there.setCurrentCatalog(here.currentCatalog().name())
        there.setCurrentNamespace(here.currentNamespace())
    except Exception as error:
        raise EnvironmentSetupError(
            "This Spark session was built without sparkext's extension and it could not be added "
            "while it runs; build it with the settings sparkext.spark_conf() returns "
            f"(spark.sql.extensions, spark.jars) ({type(error).__name__})."
        ) from error
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(clone)
    jvm.org.apache.spark.sql.SparkSession.setDefaultSession(clone)
    python = SparkSession(spark.sparkContext, clone)
    SparkSession._activeSession = python
    SparkSession._instantiatedSession = python
    return python


@dataclass(frozen=True)
class Answers:
    """What the extension's callback asks, answered by the floors above this one (routing and
    security): the callback only turns Java's calls into these and their results into Java's."""

    call: Callable[[SparkSession, str], DataFrame]  # the CALL statement's result
    table: Callable[[SparkSession, str, int], DataFrame]  # the table function at a position
    cache_table: Callable[[SparkSession, str], DataFrame]  # CACHE TABLE … AS over functions
    # an Iceberg procedure call: "" lets it run, a sentence refuses it; never raises
    begin_procedure: Callable[[SparkSession, str, str, str | None, str], str]
    end_procedure: Callable[[str, str | None], None]
    acting_as: Callable[[SparkSession, str], AbstractContextManager[object]]  # the JVM's caller
    sentence: Callable[[BaseException], str]  # the one sentence a failure reaches SQL as
    translate: Callable[[BaseException], Exception | None]  # a Java failure as sparkext's error
    # which candidate files of a scan to read, by a skipping index (Routines.pruneFiles: table,
    # snapshot id, index path, size, footer size, predicate JSON, '\n'-joined paths): "" keeps
    # every file, else {"keep": "0110…", "used": [...]}; called from the optimizer
    prune_files: Callable[[SparkSession, Any, int, str, int, int, str, str], str]


class _Routines:
    """Implements ``io.sparkext.spark.Routines``; py4j runs each call on a callback thread."""

    def __init__(self, spark: SparkSession, answers: Answers):
        self._context = spark.sparkContext
        self.answers = answers

    def call(self, jsession: Any, sql: str, caller: str) -> Any:
        return self._answer(jsession, caller, lambda spark: self.answers.call(spark, sql))

    def table(self, jsession: Any, sql: str, start: int, caller: str) -> Any:
        return self._answer(jsession, caller, lambda spark: self.answers.table(spark, sql, start))

    def cacheTable(self, jsession: Any, sql: str, caller: str) -> Any:  # the Java interface's name
        return self._answer(jsession, caller, lambda spark: self.answers.cache_table(spark, sql))

    def beginProcedure(  # the Java interface's name
        self, jsession: Any, procedure: str, table: str | None, sql: str, caller: str
    ) -> str:
        try:
            spark = self._session(jsession)
        except Exception as error:  # a stopped session: refuse rather than run unchecked
            return self.answers.sentence(error)
        return self.answers.begin_procedure(spark, caller, procedure, table, sql)

    def endProcedure(self, token: str, error: str | None) -> None:  # the Java interface's name
        self.answers.end_procedure(token, error)

    def pruneFiles(  # the Java interface's name
        self,
        jsession: Any,
        table: Any,
        snapshot_id: int,
        index_path: str,
        index_size: int,
        footer_size: int,
        predicate: str,
        candidates: str,
    ) -> str:
        """Never raises into Java: any failure keeps every file (the query reads them all)."""
        try:
            spark = self._session(jsession)
            answer = self.answers.prune_files(
                spark,
                table,
                snapshot_id,
                index_path,
                index_size,
                footer_size,
                predicate,
                candidates,
            )
            return answer if isinstance(answer, str) else ""
        except Exception:
            _LOG.debug("sparkext's skipping index kept every file of a scan", exc_info=True)
            return ""

    def _session(self, jsession: Any) -> SparkSession:
        """The Python face of the calling session (the Thrift server has one per client). Made
        for each call and not kept: a long-running server sees sessions come and go."""
        from pyspark.sql import SparkSession

        # py4j serves this callback's calls on a JVM thread of its own: make it the session's.
        jvm_of(self._context).org.apache.spark.sql.SparkSession.setActiveSession(jsession)
        return SparkSession(self._context, jsession)

    def _answer(self, jsession: Any, caller: str, run: Callable[[SparkSession], DataFrame]) -> Any:
        try:
            spark = self._session(jsession)
            with self.answers.acting_as(spark, caller):
                frame = run(spark)
            _HANDED.append(frame)
            return frame._jdf
        except Exception as error:
            if not isinstance(error, SparkextError):
                _LOG.debug("sparkext routine failed inside Spark SQL", exc_info=True)
            return self.answers.sentence(error)

    class Java:
        implements: ClassVar[list[str]] = ["io.sparkext.spark.Routines"]


class ThriftServer:
    """Spark's HiveServer2-compatible Thrift server, running inside this sparkext driver."""

    def __init__(self, server: Any, host: str, port: int):
        self._server = server
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    def stop(self) -> None:
        self._server.stop()


SYNC_EXECUTION = {"spark.sql.hive.thriftServer.async": "false"}


def start_thrift_server(
    spark: SparkSession,
    answers: Answers,
    host: str = "localhost",
    port: int = 10000,
    hive: dict[str, str] | None = None,
) -> ThriftServer:
    """Start the Thrift JDBC/ODBC server on ``spark``'s application; each client gets its own
    session (``spark.newSession()``, so sparkext's SQL works in it).

    Statements run on the client's connection thread (``SYNC_EXECUTION``, set when the
    application is built): a refused call reaches the client as its one sentence, where
    Spark's asynchronous mode would send the server's stack trace as the message.
    """
    attach(spark, answers)
    default_catalog = spark.conf.get("spark.sql.defaultCatalog", "spark_catalog")
    if default_catalog != "spark_catalog":
        # JDBC clients open their session with USE default; Spark's own catalog always has it.
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{default_catalog}`.default")
    spark.conf.set("hive.server2.thrift.bind.host", host)
    spark.conf.set("hive.server2.thrift.port", str(port))
    spark.conf.set("hive.server2.transport.mode", "binary")
    jvm = jvm_of(spark)
    # HiveServer2's settings (authentication, TLS) as JVM system properties: Hive builds its
    # LDAP and custom providers with a configuration of its own, which reads only those, and a
    # secret there is out of every session's conf (a client's SET would print it).
    for key, value in (hive or {}).items():
        jvm.java.lang.System.setProperty(key, value)
        if not _is_secret(key):
            spark.conf.set(key, value)
    try:
        server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
            spark._jsparkSession.sqlContext()
        )
    except Exception as error:
        raise (
            answers.translate(error)
            or EnvironmentSetupError(
                f"The Thrift server could not start on {host}:{port} ({type(error).__name__}); "
                "is the port taken? Pick another with --port."
            )
        ) from error
    secrets = [key for key in (hive or {}) if _is_secret(key)]
    if secrets:  # read when the server opened its socket; then out of every client's reach
        _when_listening(host, port)
        for key in secrets:
            jvm.java.lang.System.clearProperty(key)
    return ThriftServer(server, host, port)


def _is_secret(key: str) -> bool:
    """A HiveServer2 setting that holds a password (not one naming a file of them).

    >>> _is_secret("hive.server2.keystore.password"), _is_secret("sparkext.serve.password-file")
    (True, False)
    """
    return key.lower().endswith(".password")


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _when_listening(host: str, port: int, within: float = 120.0) -> None:
    """Return once ``host:port`` is bound (the server's socket thread opened it)."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline and port_free(host, port):
        time.sleep(0.05)
