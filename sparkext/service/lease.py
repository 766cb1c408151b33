"""Hold a table's optimisation lease for a block of work, renewing it in the background.

One lease per table across processes (:mod:`sparkext.iceberg.lease` takes it by
compare-and-swap in the table's metadata): two services, or a service and a manual
``CALL sparkext.tiered_optimize``, never optimise the same table at once. A holder that crashes
stops renewing; its lease expires after ``ttl`` and the next taker proceeds. Clocks of the
processes are assumed to agree to well within the TTL (default 5 minutes).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sparkext.errors import TableBusyError
from sparkext.iceberg import lease as store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TTL_MS = 5 * 60 * 1000


def owner_name(purpose: str) -> str:
    """``purpose@host:pid`` — who holds a lease, as the busy sentence names it."""
    return f"{purpose}@{socket.gethostname()}:{os.getpid()}"


def busy_sentence(name: str, holder: store.Holder) -> str:
    """One sentence for a table whose lease someone else holds.

    >>> print(busy_sentence("lake.db.t", store.Holder("optimize-service@h:1", 0)))
    lake.db.t is being optimised by optimize-service@h:1 (its lease runs until 1970-01-01 \
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
    spark: SparkSession, name: str, owner: str, ttl_ms: int = TTL_MS, purpose: str = ""
) -> Iterator[None]:
    """Hold the lease for the block (renewed every third of the TTL); raise
    :class:`TableBusyError` at once when another process holds it."""
    blocker = try_acquire(spark, name, owner, ttl_ms, purpose)
    if blocker is not None:
        raise TableBusyError(busy_sentence(name, blocker))
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl_ms / 3000):
            with contextlib.suppress(Exception):  # a missed renewal: the next one retries
                try_acquire(spark, name, owner, ttl_ms, purpose)

    renewer = threading.Thread(target=renew, name=f"lease-{name}", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join(timeout=5)
        with contextlib.suppress(Exception):  # not released: it expires after the TTL
            release(spark, name, owner)
