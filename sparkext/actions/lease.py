"""Hold a table's optimisation lease for a block of work, renewing it in the background.

One lease per table across processes (:mod:`sparkext.iceberg.lease` takes it by
compare-and-swap in the table's metadata): two services, or a service and a manual
``CALL sparkext.tiered_optimize``, never optimise the same table at once — as far as the
catalog's swap is atomic (JDBC, Hive, REST catalogs; the Hadoop catalog on HDFS; on a local
disk or an object store its check-then-rename leaves a window). A holder that crashes
stops renewing; its lease expires after ``ttl`` and the next taker proceeds. Clocks of the
processes are assumed to agree to well within the TTL (default 5 minutes).

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sparkext.errors import TableBusyError
from sparkext.iceberg import lease as store
from sparkext.spark import cancellation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TTL_MS = 5 * 60 * 1000


def owner_name(purpose: str) -> str:
    """``purpose@host:pid/id`` — who holds a lease, as the busy sentence names it; the id
    tells two holders of one process apart (two services, two calls)."""
    return f"{purpose}@{socket.gethostname()}:{os.getpid()}/{uuid.uuid4().hex[:6]}"


def busy_sentence(name: str, holder: store.Holder) -> str:
    """One sentence for a table whose lease someone else holds.

    >>> print(busy_sentence("lake.db.t", store.Holder("optimize-service@h:1/a1", 0)))
    lake.db.t is being optimised by optimize-service@h:1/a1 (its lease runs until 1970-01-01 \
00:00:00 UTC); wait for it to finish, or until the lease expires if that process died.
    """
    until = datetime.fromtimestamp(holder.expires_ms / 1000, tz=timezone.utc)
    return (
        f"{name} is being optimised by {holder.owner} (its lease runs until "
        f"{until:%Y-%m-%d %H:%M:%S} UTC); wait for it to finish, or until the lease expires if "
        "that process died."
    )


def try_acquire(
    spark: SparkSession, name: str, owner: str, ttl_ms: int = TTL_MS, purpose: str = ""
) -> store.Holder | None:
    """Take (or renew) the lease; the live holder in the way if another process has it."""
    expires = int(time.time() * 1000) + ttl_ms
    return store.swap(spark, name, owner, store.Holder(owner, expires, purpose))


def release(spark: SparkSession, name: str, owner: str) -> None:
    store.swap(spark, name, owner, None)


@contextlib.contextmanager
def held(
    spark: SparkSession,
    name: str,
    owner: str,
    ttl_ms: int = TTL_MS,
    purpose: str = "",
    on_lost: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Hold the lease for the block (renewed every third of the TTL); raise
    :class:`TableBusyError` at once when another process holds it.

    When the lease is lost meanwhile (renewals kept failing until it may have expired, or
    another holder has it), ``on_lost`` is called — by default the running statement is marked
    cancelled, so the work stops before its next commit (the commit layer checks the mark right
    before its swap) and discards what it wrote."""
    blocker = try_acquire(spark, name, owner, ttl_ms, purpose)
    if blocker is not None:
        raise TableBusyError(busy_sentence(name, blocker))
    statement = cancellation.current()
    lost_callback = on_lost or (lambda: statement.cancelled.set() if statement else None)
    stop = threading.Event()
    renewed = [time.monotonic()]

    def renew() -> None:
        while not stop.wait(ttl_ms / 3000):
            try:
                blocker = try_acquire(spark, name, owner, ttl_ms, purpose)
            except Exception:  # a missed renewal: the next one retries, while there is time
                blocker = None
                if (time.monotonic() - renewed[0]) * 1000 < ttl_ms * 2 / 3:
                    continue
            else:
                if blocker is None:
                    renewed[0] = time.monotonic()
                    continue
            if not stop.is_set():
                lost_callback()
            return

    renewer = threading.Thread(target=renew, name=f"lease-{name}", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()  # a renewal in flight lands before the release, never after it
        with contextlib.suppress(Exception):  # not released: it expires after the TTL
            release(spark, name, owner)
