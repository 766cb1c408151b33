"""PySpark's worker daemon with sparkext's executor modules imported before it forks.

Spark starts one daemon per executor and forks a Python worker from it for each task that needs
one; Spark 3.5 stops a worker idle for one minute (``PythonWorkerFactory``, not configurable). A
fresh worker then imports pyarrow, pyiceberg, orjson and sparkext's executor code again before its
first row — pyiceberg's pyarrow module alone takes ~1 s, and a 10k-change ``ingest_cdc`` batch
after 70 s idle took 2–3 s longer than one after 5 s (two Python stages on two cores). Imported
here, in the daemon, they are inherited by every fork, so a micro-batch that comes more than a
minute after the last costs about what one a few seconds later does.

Every task also paid ~0.1–0.2 s before its first row in ``importlib.invalidate_caches()``, which
PySpark's worker calls per task so that files added to the job become importable: Spark puts its
own archives on the workers' path (``pyspark.zip``, py4j's zip, even ``spark-core``'s jar), and a
zip importer re-reads its archive's whole directory, in Python, on every invalidation — 13 of
them per task here. The workers forked from this daemon re-read an archive only when it changed
(:func:`invalidate_caches`); a task of one row went from ~0.3 s to ~0.14 s.

And each task stalled ~40 ms reading its header from the JVM (measured inside the worker: 40 ms
between the first int and the rest; 1–3 ms once the worker acknowledges at once). 40 ms is
Linux's delayed acknowledgement: a second small write of the JVM held back by Nagle's algorithm
until the first is acknowledged. The workers acknowledge at once and send without delay
(:func:`fast_acks`, before every task): a one-row ``mapInArrow`` job 0.25 s -> 0.13 s.

Set by :func:`sparkext.spark.session.build_conf` for local masters (``spark.python.daemon.module``);
on a cluster whose executors have sparkext installed, set it in spark-defaults
(conf/cluster.conf.example).
A module that fails to import is skipped: the daemon then behaves exactly like PySpark's own.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import socket
import sys
import types
import zipimport
from collections.abc import Callable

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
    "sparkext.executors.cdc.decode",
    "sparkext.executors.cdc.files",
    "sparkext.executors.cdc.partitioning",
    "sparkext.executors.deletes.dv",
    "sparkext.executors.deletes.writers",
    "sparkext.executors.curves",
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
                print(
                    f"sparkext.executors.daemon: not preloaded {name}: {error!r}", file=sys.stderr
                )
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    return missing


_read_when: dict[str, tuple[int, int, int] | None] = {}  # archive -> its stat at the last re-read


def _stat(archive: str) -> tuple[int, int, int] | None:
    try:
        found = os.stat(archive)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def invalidate_caches() -> None:
    """``importlib.invalidate_caches()``, except that a zip archive on the path whose file has
    not changed since its directory was last read is not read again.

    Exactly what the standard call guarantees (an archive that changed, or has gone, is read
    again; every directory finder and every other finder is invalidated as before), at the cost
    of one ``stat`` per archive instead of re-reading its directory.
    """
    cache = sys.path_importer_cache
    zips = {e: f for e, f in cache.items() if isinstance(f, zipimport.zipimporter)}
    unchanged: dict[str, bool] = {}  # per archive: every importer of a changed one re-reads it
    for finder in zips.values():
        if finder.archive not in unchanged:
            now = _stat(finder.archive)
            unchanged[finder.archive] = now is not None and _read_when.get(finder.archive) == now
            _read_when[finder.archive] = now  # read again below, by the standard call, if not
    kept = {e: f for e, f in zips.items() if unchanged[f.archive]}
    for entry in kept:
        del cache[entry]
    try:
        importlib.invalidate_caches()
    finally:
        cache.update(kept)


def _worker_importlib() -> types.ModuleType:
    """What PySpark's worker sees as ``importlib``: the module, with :func:`invalidate_caches`."""
    shim = types.ModuleType("importlib")
    shim.__dict__.update(importlib.__dict__)
    shim.invalidate_caches = invalidate_caches  # type: ignore[attr-defined]
    return shim


def fast_acks(sock: socket.socket) -> None:
    """The worker's end of the JVM's socket acknowledges at once (``TCP_QUICKACK``, Linux; the
    kernel may leave quick-ack mode, so it is set again before every task) and sends without
    Nagle's delay (``TCP_NODELAY``): a task's small request/reply exchanges no longer wait
    40 ms for a delayed acknowledgement. Best effort: a socket that refuses is left as it is."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    quick_ack = getattr(socket, "TCP_QUICKACK", None)
    if quick_ack is not None:
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, quick_ack, 1)


def _with_fast_acks(worker: Callable[[socket.socket, bool], int]):
    """PySpark's per-task ``worker(sock, authenticated)``, preceded by :func:`fast_acks`."""

    def run(sock: socket.socket, authenticated: bool) -> int:
        fast_acks(sock)
        return worker(sock, authenticated)

    return run


if __name__ == "__main__":
    preload()
    import pyspark.daemon
    import pyspark.worker

    invalidate_caches()  # the archives read once here, stamped: every fork inherits both
    pyspark.worker.importlib = _worker_importlib()
    pyspark.daemon.worker = _with_fast_acks(pyspark.daemon.worker)
    gc.freeze()  # the preloaded objects stay out of the workers' collections: fewer copied pages
    from pyspark.daemon import manager

    manager()
