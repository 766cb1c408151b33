"""Faster JVM start-up for the ~60 extra Spark processes the suite's multi-process and shell
tests start, for tests only (the product's JVMs are untouched).

A dynamic class-data-sharing archive (``-XX:SharedArchiveFile``) of the classes a small
Spark + Iceberg + sparkext workload loads, dumped once per machine by a training process
(``-XX:ArchiveClassesAtExit``, ~50 s) and reused while Spark's jars, Iceberg's, sparkext's
extension and the JDK are the same (they are the archive's key; HotSpot also checks the class
path and the jars' sizes and times itself and ignores, silently here, an archive that does not
match: the shared session, whose class path starts with PostgreSQL's driver, runs without it).
It goes in ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to the driver JVM's command line
and which child processes inherit; ``-Xlog:cds*=off`` keeps HotSpot's CDS notices (an archive
that does not match) out of the output the shell tests compare. A training run that fails leaves
a ``.failed`` marker for that key (no retraining every run); a new archive replaces the old ones.

Measured on this machine (2 cores, idle): a process that starts a session, creates, inserts
into and counts one table takes 13.9 s as is and 8.8-8.9 s with the archive. The client
compiler alone (``-XX:TieredStopAtLevel=1``) would take it to 5.8-6.2 s but made 50 tests on
the shared session 25% slower (397 s -> 497 s): the shared session keeps both compilers, and
the processes the tests start once it runs get the client compiler only (:func:`for_children`).
They live seconds to a few minutes on small data, where the server compiler's work on two
cores costs more than it gives back: the two-writer race of tests/spark/test_cdc_writers.py
took 124 s with it and 83 s without, three crash/concurrency tests of test_ingest_cdc.py
108 s and 102 s.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

OPTIONS_ENV = "SPARK_SUBMIT_OPTS"
C1_ONLY = "-XX:TieredStopAtLevel=1"
QUIET = "-Xlog:cds*=off -Xlog:class+path=off"

TRAINING = """
import sys
import sparkext
spark = sparkext.session(master="local[2]", warehouse=sys.argv[1])
spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.cds")
spark.sql("CREATE TABLE lake.cds.t (id bigint, v string, d date) USING iceberg "
          "PARTITIONED BY (d) TBLPROPERTIES ('format-version'='2', "
          "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
spark.sql("INSERT INTO lake.cds.t VALUES (1, 'a', DATE '2026-01-01'), (2, 'b', NULL)")
spark.sql("UPDATE lake.cds.t SET v = 'c' WHERE id = 1")
spark.sql("DELETE FROM lake.cds.t WHERE id = 2")
spark.sql("MERGE INTO lake.cds.t t USING (SELECT 3 AS id, 'x' AS v) s ON t.id = s.id "
          "WHEN NOT MATCHED THEN INSERT (id, v, d) VALUES (s.id, s.v, NULL)")
spark.sql("SELECT d, count(*), max(v) FROM lake.cds.t GROUP BY d ORDER BY d").collect()
spark.sql("SELECT * FROM lake.cds.t.snapshots").collect()
spark.range(10).selectExpr("id", "cast(id AS string) AS s").mapInArrow(
    lambda batches: batches, "id bigint, s string").collect()
spark.stop()
"""


def _key() -> str:
    """What the archive depends on: the JDK and every jar the driver loads classes from."""
    import pyspark

    from sparkext.jvm import jar_path
    from sparkext.spark.session import ICEBERG_JAR, check_java

    java = Path(os.path.realpath(check_java()))
    parts = [str(java)]
    for libjvm in sorted(java.parent.parent.glob("lib/*/libjvm.so")):  # a JDK updated in place
        stat = libjvm.stat()
        parts.append(f"{libjvm}:{stat.st_size}:{stat.st_mtime_ns}")
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    try:
        from snowpark_connect_deps_iceberg import get_jar_path

        jars.append(Path(get_jar_path(ICEBERG_JAR)))
    except ImportError:
        pass
    jars.append(jar_path())
    for jar in jars:
        stat = jar.stat()
        parts.append(f"{jar}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _where() -> Path:
    """Where the archive for this machine's jars is (or will be)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sparkext-tests"
    return cache / f"spark-{_key()}.jsa"


def _archive(workdir: Path) -> Path | None:
    """The archive for this machine's jars, dumped by a training process if missing (None if
    it could not be made: the suite then runs without it, only slower)."""
    archive = _where()
    cache = archive.parent
    failed = archive.with_suffix(".failed")
    if archive.is_file():
        return archive
    if failed.is_file():
        return None
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f".{archive.name}.{os.getpid()}"
    script = workdir / "cds_training.py"
    script.write_text(TRAINING)
    env = {**os.environ, OPTIONS_ENV: f"{C1_ONLY} {QUIET} -XX:ArchiveClassesAtExit={partial}"}
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(workdir / "warehouse")],
            capture_output=True,
            env=env,
            timeout=600,
        )
        made = done.returncode == 0 and partial.is_file()
    except subprocess.TimeoutExpired:
        made = False
    if not made:
        partial.unlink(missing_ok=True)
        failed.write_text("the training run made no archive; delete this file to try again\n")
        return None
    os.replace(partial, archive)
    for old in cache.glob("spark-*.jsa"):
        if old != archive:
            old.unlink(missing_ok=True)
    return archive


_preparing: list[threading.Thread] = []


def _archive_or_none(workdir: Path) -> Path | None:
    try:
        return _archive(workdir)
    except Exception:  # no cache directory, no JDK yet...: the JVMs start as they would
        return None


def prepare_in_background(workdir: Path) -> None:
    """Find or make the archive on a thread (:func:`speed_up` does not wait for it)."""
    thread = threading.Thread(target=_archive_or_none, args=(workdir,), daemon=True)
    thread.start()
    _preparing.append(thread)


def speed_up(workdir: Path) -> str:
    """Set ``SPARK_SUBMIT_OPTS`` for this process and its children; return what was set.

    While a training thread is still making the archive, nothing waits for it: the option
    names the path the archive will be renamed to. The shared session never uses the archive
    (its class path differs), and a JVM started before the rename finds no file there and
    starts as it would without the option (silently: HotSpot's -Xshare:auto)."""
    if any(thread.is_alive() for thread in _preparing):
        try:
            archive: Path | None = _where()
        except Exception:
            archive = None
    else:
        archive = _archive_or_none(workdir)
    options = [] if archive is None else [QUIET, f"-XX:SharedArchiveFile={archive}"]
    existing = os.environ.get(OPTIONS_ENV, "")
    os.environ[OPTIONS_ENV] = " ".join([existing, *options]).strip()
    return os.environ[OPTIONS_ENV]


def for_children() -> str:
    """Add the client-compiler-only option to ``SPARK_SUBMIT_OPTS`` for the processes started
    from now on (call it once the shared session's JVM runs: it keeps its options); return what
    is set. Idempotent."""
    existing = os.environ.get(OPTIONS_ENV, "")
    if C1_ONLY not in existing.split():
        os.environ[OPTIONS_ENV] = f"{existing} {C1_ONLY}".strip()
    return os.environ[OPTIONS_ENV]
