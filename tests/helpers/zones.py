"""Time zones for tests: emulate a host's OS zone, set the session's, and read timestamps back
without the OS zone (an oracle independent of sparkext's own conversions)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator


@contextlib.contextmanager
def host_zone(name: str) -> Iterator[None]:
    """The Python process's OS time zone is ``name`` inside the block (what PySpark's collect
    of a TIMESTAMP and ``F.lit(naive datetime)`` use), as on a host set to that zone."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


@contextlib.contextmanager
def session_zone(spark, name: str) -> Iterator[None]:
    """``spark.sql.session.timeZone`` is ``name`` inside the block."""
    key = "spark.sql.session.timeZone"
    before = spark.conf.get(key)
    spark.conf.set(key, name)
    try:
        yield
    finally:
        spark.conf.set(key, before)


def wall_clock_rows(frame) -> list[tuple]:
    """Rows of ``frame`` with top-level TIMESTAMP columns as naive session-zone wall clocks
    (cast to TIMESTAMP_NTZ in Spark, so the OS zone of this process plays no part), sorted."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    columns = [
        F.col(f"`{f.name}`").cast("timestamp_ntz").alias(f.name)
        if isinstance(f.dataType, TimestampType)
        else F.col(f"`{f.name}`")
        for f in frame.schema.fields
    ]
    return sorted(tuple(r) for r in frame.select(*columns).collect())
