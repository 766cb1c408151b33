"""Build or attach a SparkSession with the Iceberg runtime and conf/spark-defaults.conf.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkext.conf import load_defaults
from sparkext.errors import EnvironmentSetupError
from sparkext.jvm import ICEBERG_RUNTIME
from sparkext.resources import resource_dir
from sparkext.spark.extension import Answers, attach, has_extension, spark_conf, thread_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_JAR = ICEBERG_RUNTIME  # the extension's skipping hook compiles against this one
ICEBERG_JAR_ENV = "SPARKEXT_ICEBERG_JAR"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
SUPPORTED_JAVA = (17, 21)
WORKER_PYTHON = "spark.pyspark.python"
WORKER_PYTHON_ENV = "PYSPARK_PYTHON"
DAEMON_MODULE = "spark.python.daemon.module"
# Dates before 1582-10-15 and timestamps before 1900 (MySQL DATETIME '1000-01-01') are written and
# read as they are: proleptic Gregorian, like Iceberg, pyarrow and Java 8 time. Spark's defaults
# (EXCEPTION) fail on them, in the event log sparkext writes and in files pyarrow wrote.
PARQUET_REBASE = {
    f"spark.sql.parquet.{kind}RebaseModeIn{way}": "CORRECTED"
    for kind in ("datetime", "int96")
    for way in ("Read", "Write")
}
# Timestamps in Parquet Spark writes (ingest_cdc's event logs, late events) as INT64 microseconds,
# as pyarrow and Iceberg write them, not Spark's legacy INT96: a reader (DuckDB, pyarrow) sees the
# same type in every batch's event log, whichever writer wrote it
PARQUET_TIMESTAMPS = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
_SHORTCUTS = {
    "master": "spark.master",
    "app_name": "spark.app.name",
    "warehouse": "spark.sql.catalog.lake.warehouse",
}


def java_version(java: str) -> int:
    """Return the major version of the ``java`` executable (8 for 1.8)."""
    output = subprocess.run(
        [java, "-version"], capture_output=True, text=True, timeout=60, check=False
    ).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if not match:
        raise EnvironmentSetupError(
            f"Cannot tell the Java version of '{java}' (it printed {output.strip()[:80]!r}); "
            "install Java 17 and set JAVA_HOME to it."
        )
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """Return the java executable Spark will use, or raise one actionable sentence."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        where = f"JAVA_HOME ({home})" if home else "PATH"
        raise EnvironmentSetupError(
            f"sparkext needs Java 17 but found no java on {where}; install it "
            "(e.g. apt-get install -y openjdk-17-jre-headless) and set JAVA_HOME."
        )
    version = java_version(java)
    if version not in SUPPORTED_JAVA:
        raise EnvironmentSetupError(
            f"sparkext needs Java 17 but '{java}' is Java {version}; install Java 17 "
            "(e.g. apt-get install -y openjdk-17-jre-headless) and set JAVA_HOME to it."
        )
    return java


def iceberg_jars(conf: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """Add the Iceberg runtime: the user's Maven package, else $SPARKEXT_ICEBERG_JAR, else ours."""
    environ = dict(os.environ) if environ is None else environ
    out = dict(conf)
    if "iceberg-spark-runtime" in conf.get("spark.jars.packages", ""):
        return out
    jar = environ.get(ICEBERG_JAR_ENV)
    if jar:
        if not Path(jar).is_file():
            raise EnvironmentSetupError(
                f"{ICEBERG_JAR_ENV} is '{jar}' but no such file exists; point it at an "
                "iceberg-spark-runtime-3.5_2.12 jar or unset it to use the bundled one."
            )
    else:
        try:
            from snowpark_connect_deps_iceberg import get_jar_path
        except ImportError as error:
            raise EnvironmentSetupError(
                "The bundled Iceberg runtime is missing; run pip install "
                "'snowpark-connect-deps-iceberg==1.0.2' or set SPARKEXT_ICEBERG_JAR."
            ) from error
        jar = str(get_jar_path(ICEBERG_JAR))
    existing = [j for j in out.get("spark.jars", "").split(",") if j]
    out["spark.jars"] = ",".join([*existing, jar])
    return out


def worker_python(conf: dict[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Make local executors run this interpreter unless the user chose one.

    PySpark's workers otherwise run ``python3`` from PATH, which outside an activated venv (pipx,
    cron, IDEs, systemd, ``venv/bin/python job.py``) lacks pyarrow and sparkext. The user's
    ``spark.pyspark.python`` or ``$PYSPARK_PYTHON`` wins; on a cluster the executors' Python is
    theirs to set (docs/reference/configuration.md, conf/cluster.conf.example).

    >>> worker_python({"spark.master": "local[2]"}, {})["spark.pyspark.python"] == sys.executable
    True
    >>> worker_python({"spark.master": "yarn"}, {})
    {'spark.master': 'yarn'}
    """
    environ = os.environ if environ is None else environ
    out = dict(conf)
    chosen = out.get(WORKER_PYTHON) or environ.get(WORKER_PYTHON_ENV)
    if not chosen and out.get("spark.master", "").startswith("local") and sys.executable:
        out[WORKER_PYTHON] = sys.executable
    return out


def worker_daemon(conf: dict[str, str]) -> dict[str, str]:
    """Fork local Python workers from :mod:`sparkext.executors.daemon` unless the user chose a
    daemon.

    Spark stops a Python worker idle for a minute; a fresh one forked from PySpark's daemon
    imports pyarrow, pyiceberg and sparkext's executor code again (2–4 s on an ``ingest_cdc``
    batch after a pause). sparkext's daemon has them imported before it forks. Only when the
    workers run this very interpreter (local mode, see ``worker_python``), which has sparkext:
    a daemon that cannot import would fail every Python task. On a cluster, set it where the
    executors' Python has sparkext (conf/cluster.conf.example).

    >>> worker_daemon({"spark.master": "local[2]", "spark.pyspark.python": sys.executable})[
    ...     "spark.python.daemon.module"]
    'sparkext.executors.daemon'
    >>> worker_daemon({"spark.master": "local[2]", "spark.pyspark.python": "/opt/py/bin/python"})
    {'spark.master': 'local[2]', 'spark.pyspark.python': '/opt/py/bin/python'}
    """
    out = dict(conf)
    if DAEMON_MODULE not in out and out.get(WORKER_PYTHON) == sys.executable:
        out[DAEMON_MODULE] = "sparkext.executors.daemon"
    return out


@contextmanager
def _worker_python_env(python: str | None) -> Iterator[None]:
    """Hand ``spark.pyspark.python`` to PySpark, which reads only $PYSPARK_PYTHON when it starts."""
    if not python:
        yield
        return
    saved = os.environ.get(WORKER_PYTHON_ENV)
    os.environ[WORKER_PYTHON_ENV] = python
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(WORKER_PYTHON_ENV, None)
        else:
            os.environ[WORKER_PYTHON_ENV] = saved


LOG_CONFIG = "log4j2.properties"
_LOG_OPTION = re.compile(r"-Dlog4j2\.configurationFile=(\S+)")


def log_options(conf: dict[str, str], conf_dir: Path, level: str | None = None) -> dict[str, str]:
    """Point the driver's log4j at an existing configuration: the one the conf names if it
    exists, else ``conf_dir``'s, else the one shipped with sparkext (a conf directory copied
    without it would print log4j's StatusLogger errors and Spark's INFO lines). ``level``
    (``SPARKEXT_LOG_LEVEL``, set by ``--verbose``) is handed to it as ``sparkext.log.level``.
    """
    key = "spark.driver.extraJavaOptions"
    out = dict(conf)
    options = out.get(key, "")
    named = _LOG_OPTION.search(options)
    path = named.group(1) if named else None
    if path is None or ("://" not in path and not Path(path).is_file()):
        local = conf_dir / LOG_CONFIG
        shipped = _shipped_conf_dir() / LOG_CONFIG
        chosen = f"-Dlog4j2.configurationFile={local if local.is_file() else shipped}"
        options = _LOG_OPTION.sub(chosen, options) if named else f"{options} {chosen}".strip()
    if level:
        options = re.sub(r"\s*-Dsparkext\.log\.level=\S+", "", options)
        options = f"{options} -Dsparkext.log.level={level.lower()}"
    out[key] = options
    return out


def _shipped_conf_dir() -> Path:
    saved = os.environ.pop("SPARKEXT_CONF_DIR", None)
    try:
        return resource_dir("conf")
    finally:
        if saved is not None:
            os.environ["SPARKEXT_CONF_DIR"] = saved


def describe(conf: Mapping[str, str]) -> str:
    """Where a session runs and which catalog it writes, for the shell's startup line.

    >>> describe({"spark.master": "local[*]", "spark.sql.defaultCatalog": "lake",
    ...           "spark.sql.catalog.lake.type": "hadoop",
    ...           "spark.sql.catalog.lake.warehouse": "/data/wh"})
    'master local[*], catalog lake (hadoop) at /data/wh'
    """
    master = conf.get("spark.master", "local[*]")
    catalog = conf.get("spark.sql.defaultCatalog", "spark_catalog")
    prefix = f"spark.sql.catalog.{catalog}"
    kind = conf.get(f"{prefix}.type") or conf.get(f"{prefix}.catalog-impl", "").split(".")[-1]
    where = conf.get(f"{prefix}.uri") or conf.get(f"{prefix}.warehouse") or "?"
    kind_text = f" ({kind})" if kind else ""
    return f"master {master}, catalog {catalog}{kind_text} at {where}"


def active_session() -> SparkSession | None:
    """The session this process already runs, or None (no SparkContext yet): this thread's
    active session on the JVM side, else the application's default one.

    ``SparkSession.getActiveSession()`` alone is wrong twice over: it is None on a thread whose
    JVM twin has no active session while a session exists (a new thread, a pool, a CLI run
    in-process), and otherwise it returns PySpark's process-wide ``_activeSession``, which
    ``createDataFrame`` on any session repoints — a streaming micro-batch's cloned session
    after ``ingest_cdc``, with its own current namespace and temp views.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    context = SparkContext._active_spark_context
    if context is None:
        return None
    return thread_session(context) or SparkSession.builder.getOrCreate()


def build_conf(overrides: dict[str, Any]) -> dict[str, str]:
    """conf/spark-defaults.conf, then ``overrides`` (Spark keys or master/app_name/warehouse),
    over sparkext's own defaults (``PARQUET_REBASE``, ``PARQUET_TIMESTAMPS``).

    In local mode the executors' Python is this interpreter unless set (see ``worker_python``).
    """
    conf_dir = resource_dir("conf")
    conf = {**PARQUET_REBASE, **PARQUET_TIMESTAMPS, **load_defaults(conf_dir)}
    for key, value in overrides.items():
        spark_key = _SHORTCUTS.get(key, key)
        if "." not in spark_key:
            raise EnvironmentSetupError(
                f"Unknown session override '{key}'; pass Spark keys such as "
                "**{'spark.sql.shuffle.partitions': '8'} or one of master, app_name, warehouse."
            )
        if spark_key.endswith(".warehouse"):
            value = (
                str(Path(str(value)).expanduser().resolve()) if "://" not in str(value) else value
            )
        conf[spark_key] = "true" if value is True else "false" if value is False else str(value)
    conf = log_options(conf, conf_dir, os.environ.get("SPARKEXT_LOG_LEVEL"))
    return worker_daemon(worker_python(spark_conf(iceberg_jars(conf))))


def session(answers: Answers, **overrides: Any) -> SparkSession:
    """Return a SparkSession configured from conf/ plus ``overrides``, with Iceberg available,
    sparkext's SQL in ``spark.sql`` answered by ``answers`` (:func:`sparkext.session` passes
    the routing floor's).

    If a session is already running it is returned as is (Spark cannot change static settings of
    a running session); runtime settings among ``overrides`` are applied to it.
    """
    from pyspark.sql import SparkSession

    # A running application's session, even where this thread's JVM twin has none active (a
    # new thread, a pool): building it again would apply the whole default conf to it, the
    # warehouse included, through PySpark's getOrCreate.
    active = active_session()
    if active is not None:
        for key, value in PARQUET_REBASE.items():
            if active.conf.get(key, None) in (None, "EXCEPTION"):  # Spark's default: fails
                active.conf.set(key, value)
        for key, value in overrides.items():
            spark_key = _SHORTCUTS.get(key, key)
            if spark_key.startswith("spark.sql.") and not spark_key.startswith("spark.sql.catalog"):
                active.conf.set(spark_key, str(value))
        return attach(active, answers) if has_extension(active) else active
    conf = build_conf(overrides)
    check_java()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _worker_python_env(conf.get(WORKER_PYTHON)):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARKEXT_LOG_LEVEL", "ERROR"))
    return attach(spark, answers)
