"""sparkext's Python on a cluster's executors: shipped with the job, and checked before use.

Procedures run Python on the executors (``mapInArrow`` and ``foreachPartition`` code in
``sparkext.actions.cdc``, ``sparkext.deletes``, …), so every executor's Python must import the same
sparkext as the driver, with the same Python minor version (PySpark's own rule). Two ways:

* sparkext installed on every node (an image, a packed environment in ``spark.archives``), or
* shipped with the job: :func:`package` zips the driver's sparkext (its Python modules only) for
  ``spark-submit --py-files`` (``python -m sparkext.spark.environment`` prints the path), and
  ``spark.sparkext.ship=true`` makes :func:`sparkext.attach` add it to a running application
  (``SparkContext.addPyFile``), for sessions built in a notebook or by ``sparkext.session()``.

:func:`check_executors` asks the executors once per application, before the first routine that
runs there, and turns each way it can go wrong into one sentence on the driver.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
import weakref
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkext.errors import EnvironmentSetupError
from sparkext.executors import probe as executor_probe
from sparkext.spark.settings import application, setting
from sparkext.version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHIP = "spark.sparkext.ship"
CHECK = "spark.sparkext.check-executors"
GUIDE = "docs/guides/deploy.md"
_PACKAGE = Path(__file__).resolve().parent.parent  # sparkext/
_SHIPPED_SUFFIXES = (".py", ".typed")
_LOCK = threading.Lock()
_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()  # SparkContexts whose executors answered
_SHIPPED: weakref.WeakSet[Any] = weakref.WeakSet()
_WARNED: weakref.WeakSet[Any] = weakref.WeakSet()
# PySpark 3.5's worker: "…has different version (3, 10) than that in driver 3.11, …"
_MISMATCH = re.compile(
    r"different version:? ?\(?(\d+)(?:\.|, )(\d+)\)? than that in driver:? ?(\d+\.\d+)"
)
_NO_PROGRAM = re.compile(r'Cannot run program "([^"]+)"')
_MISSING = re.compile(r"No module named '?sparkext[.']")


def _files() -> list[Path]:
    return sorted(
        p
        for p in _PACKAGE.rglob("*")
        if p.is_file() and p.suffix in _SHIPPED_SUFFIXES and "__pycache__" not in p.parts
    )


def package(directory: str | os.PathLike[str] | None = None) -> str:
    """The path of a zip of this sparkext's Python modules, for ``--py-files``: made once per
    content in ``directory`` and reused while the modules are unchanged. Its name carries
    sparkext's version and a hash of the modules. The default directory is the user's own
    (``$XDG_CACHE_HOME/sparkext/ship``, else ``~/.cache/sparkext/ship``, mode 0700), never a
    shared temp directory: a zip found there is sent to every executor and run as is, so a name
    anyone can predict must not be anyone's to plant."""

    files = _files()
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    if directory:
        where = Path(directory)
        where.mkdir(parents=True, exist_ok=True)
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        where = Path(cache) / "sparkext" / "ship"
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = where / f"sparkext-{__version__}-{digest.hexdigest()[:12]}.zip"
    if not target.is_file():
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, str(Path("sparkext") / path.relative_to(_PACKAGE)))
        partial.replace(target)
    return str(target)


def _local(spark: SparkSession) -> bool:

    return application(spark).conf.get("spark.master", "local").startswith("local")


def ship(spark: SparkSession) -> None:
    """Add :func:`package` to the application (once) when ``spark.sparkext.ship`` is true."""

    context = spark.sparkContext
    if context in _SHIPPED or (setting(spark, SHIP, "false") or "").lower() != "true":
        return
    with _LOCK:
        if context not in _SHIPPED:
            context.addPyFile(package())
            _SHIPPED.add(context)


def hadoop_catalogs_on_a_cluster(conf: dict[str, str]) -> list[str]:
    """The Hadoop catalogs a cluster application writes through (their commit lock is one
    host's ``flock``): a warning's subject, empty in local mode.

    >>> hadoop_catalogs_on_a_cluster({"spark.master": "yarn",
    ...     "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    ...     "spark.sql.catalog.lake.type": "hadoop"})
    ['lake']
    >>> hadoop_catalogs_on_a_cluster({"spark.master": "local[2]",
    ...     "spark.sql.catalog.lake.type": "hadoop"})
    []
    """
    if conf.get("spark.master", "local").startswith("local"):
        return []
    found = (key.split(".") for key, value in conf.items() if value == "hadoop")
    return sorted(p[3] for p in found if len(p) == 5 and p[:3] == ["spark", "sql", "catalog"]
                  and p[4] == "type")  # fmt: skip


def warn_about_the_catalog(spark: SparkSession) -> None:
    """Once per application: say so when a cluster application has a Hadoop catalog."""
    import logging

    context = spark.sparkContext
    if context in _WARNED:
        return
    _WARNED.add(context)
    for name in hadoop_catalogs_on_a_cluster(dict(application(spark).conf)):
        logging.getLogger("sparkext.spark.environment").warning(
            "Catalog %s is a Hadoop catalog: sparkext serialises its commits with a lock that "
            "holds on one host only, so concurrent writers on a cluster can lose commits; use "
            "Iceberg's JDBC, REST or Hive catalog (%s).",
            name,
            GUIDE,
        )


def check_executors(spark: SparkSession) -> None:
    """Raise one sentence unless every executor's Python imports this sparkext (same version,
    same Python minor version). Once per application, on cluster masters; local masters (one
    machine: a routine that needs no Python there, ``help``, runs with any) and
    ``spark.sparkext.check-executors=false`` skip it. A Python task that fails the same ways
    later, on any master, gets the same sentences (:func:`executor_failure`)."""

    context = spark.sparkContext
    if context in _CHECKED:
        return
    conf = setting(spark, CHECK, "true") or "true"
    if conf.lower() == "false" or _local(spark):
        _CHECKED.add(context)
        return
    with _LOCK:
        if context in _CHECKED:
            return
        answers = _ask(spark)
        _judge(answers)
        _CHECKED.add(context)


def _ask(spark: SparkSession) -> list[tuple[str, str, str, str]]:
    from pyspark import cloudpickle

    context = spark.sparkContext
    cloudpickle.register_pickle_by_value(executor_probe)
    slices = max(int(context.defaultParallelism), 1)
    python = context.pythonExec or "python3"
    described = context.getLocalProperty("spark.job.description")  # the caller's, kept
    try:
        context.setJobDescription("sparkext: check the executors' Python")
        return list(
            set(context.parallelize(range(slices), slices).map(executor_probe.probe).collect())
        )
    except Exception as error:
        if "cancelled" in str(error).lower():  # Ctrl-C, a job group cancelled: not the nodes'
            raise
        raise EnvironmentSetupError(_sentence(str(error), python)) from None
    finally:
        context.setLocalProperty("spark.job.description", described)  # type: ignore[arg-type]


def executor_failure(text: str, python: str) -> str | None:
    """The sentence for a Python task that failed because of the executors' environment (the
    text of Spark's error), or None when it failed for another reason."""
    if _MISSING.search(text):
        return (
            f"The executors' Python ('{python}') cannot import sparkext; install sparkext where "
            "it runs, point spark.pyspark.python at an interpreter that has it, or ship it with "
            f"the job (spark.sparkext.ship=true; {GUIDE})."
        )
    if _MISMATCH.search(text) or _NO_PROGRAM.search(text):
        return _sentence(text, python)
    return None


def _sentence(text: str, python: str) -> str:
    found = _MISMATCH.search(text)
    if found:
        worker, driver = f"{found.group(1)}.{found.group(2)}", found.group(3)
        return (
            f"The executors run Python {worker} but the driver runs {driver}; "
            f"point spark.pyspark.python at a Python {driver} on every node or ship one "
            f"in spark.archives ({GUIDE})."
        )
    found = _NO_PROGRAM.search(text)
    if found:
        return (
            f"The executors cannot start Python '{found.group(1)}' (no such program on a "
            "node); set spark.pyspark.python to an interpreter every node has, or ship one in "
            f"spark.archives ({GUIDE})."
        )
    if "daemon" in text.lower():
        return (
            "The executors' Python worker daemon did not start (spark.python.daemon.module "
            "needs sparkext installed on every node); unset it when sparkext is shipped with "
            f"the job ({GUIDE})."
        )
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)[:300]
    return (
        f"The executors could not run Python '{python}' ({first}); check spark.pyspark.python "
        f"and the executors' logs ({GUIDE})."
    )


def _judge(answers: list[tuple[str, str, str, str]]) -> None:

    driver_python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for host, python, version, error in sorted(answers):
        if error:
            raise EnvironmentSetupError(
                f"The executors on {host} cannot import sparkext ({error}); install sparkext "
                "on every node, or ship it with the job (spark.sparkext.ship=true, or "
                f"spark-submit --py-files of `python -m sparkext.spark.environment`; {GUIDE})."
            )
        if python != driver_python:  # PySpark refuses first; kept for a worker that did not
            raise EnvironmentSetupError(
                f"The executors on {host} run Python {python} but the driver runs "
                f"{driver_python}; point spark.pyspark.python at a Python {driver_python} on "
                f"every node ({GUIDE})."
            )
        if version != __version__:
            raise EnvironmentSetupError(
                f"The executors on {host} import sparkext {version} but the driver runs "
                f"{__version__}; install the same version on every node, or ship the driver's "
                f"with the job (spark.sparkext.ship=true; {GUIDE})."
            )


if __name__ == "__main__":
    print(package(sys.argv[1] if len(sys.argv) > 1 else None))
