"""PySpark's worker daemon with sparkext's executor modules imported before it forks.

Spark starts one daemon per executor and forks a Python worker from it for each task that needs
one; Spark 3.5 stops a worker idle for one minute (``PythonWorkerFactory``, not configurable). A
fresh worker then imports pyarrow, pyiceberg, orjson and sparkext's executor code again before its
first row — pyiceberg's pyarrow module alone takes ~1 s, and a 10k-change ``ingest_cdc`` batch
after 70 s idle took 2–3 s longer than one after 5 s (two Python stages on two cores). Imported
here, in the daemon, they are inherited by every fork, so a micro-batch that comes more than a
minute after the last costs about what one a few seconds later does.

Set by :func:`sparkext.session.build_conf` for local masters (``spark.python.daemon.module``);
on a cluster whose executors have sparkext installed, set it in spark-defaults
(conf/cluster.conf.example).
A module that fails to import is skipped: the daemon then behaves exactly like PySpark's own.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

# Imported by the Python bodies sparkext runs on executors (inside ``mapInArrow``). None of them
# starts a Python thread or opens a connection when imported; pyarrow's jemalloc starts a native
# background thread, which its fork handlers stop in the child (as with any worker importing it).
PRELOADED = (
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.fs",
    "pyarrow.parquet",
    "orjson",
    "pyiceberg.io.pyarrow",  # file metrics where the file is written: ~1 s to import
    "pyiceberg.transforms",
    "sparkext.fs",
    "sparkext.cdc.decode",
    "sparkext.cdc.files",
    "sparkext.cdc.partitioning",
    "sparkext.deletes.dv",
    "sparkext.deletes.writers",
    "sparkext.optimize.curves",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules``; return the ones that could not be imported (left to the workers).

    Whatever they print goes to stderr (the executor's log): the JVM reads the daemon's port from
    its first four bytes of stdout. A failure is reported there too, in one line per module.
    """
    missing = []
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as error:
                missing.append(name)
                print(f"sparkext.daemon: not preloaded {name}: {error!r}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    return missing


if __name__ == "__main__":
    preload()
    gc.freeze()  # the preloaded objects stay out of the workers' collections: fewer copied pages
    from pyspark.daemon import manager

    manager()
