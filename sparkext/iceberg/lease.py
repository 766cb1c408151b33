"""A per-table lease kept in the table's own metadata, taken by compare-and-swap (py4j).

Floor: iceberg (the Iceberg Java API). The lease is table property ``sparkext.lease`` = JSON
``{"owner", "expires", "purpose"}``. It is read, decided on and replaced with the commit layer's
:func:`sparkext.iceberg.commit.swap_property`: ONE ``TableOperations.commit(base, updated)``
that fails when another commit landed since ``base`` was read, so two processes (on any
catalog: Hadoop, JDBC, REST) can never both see the lease free and both take it; a lost race is
re-read and decided again, never re-applied blindly (which Iceberg's own
``UpdateProperties.commit()`` would do, overwriting a lease someone else just took). A property
change is a metadata commit, not a snapshot: data writers that lose a race to it retry as for
any other commit. The guarantee is the catalog's: a JDBC, Hive or REST catalog swaps
atomically, and so does the Hadoop catalog on HDFS and (under the commit layer's file lock,
among sparkext processes) on a local disk; on an object store the Hadoop catalog's
check-then-rename leaves a small window (use a JDBC catalog for several processes there).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.iceberg.commit import PropertyChange, swap_property
from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROPERTY = "sparkext.lease"
ROUNDS = 8


@dataclass(frozen=True)
class Holder:
    owner: str
    expires_ms: int
    purpose: str = ""

    def live(self, now_ms: int) -> bool:
        return self.expires_ms > now_ms

    def to_text(self) -> str:
        return json.dumps(
            {"owner": self.owner, "expires": self.expires_ms, "purpose": self.purpose},
            sort_keys=True,
        )


def parse(text: str | None) -> Holder | None:
    """The lease a property value describes (None: no lease, or unreadable).

    >>> parse('{"owner": "a", "expires": 5}')
    Holder(owner='a', expires_ms=5, purpose='')
    >>> parse("garbage") is None, parse(None) is None
    (True, True)
    """
    if not text:
        return None
    try:
        value = json.loads(text)
        return Holder(str(value["owner"]), int(value["expires"]), str(value.get("purpose", "")))
    except (ValueError, TypeError, KeyError):
        return None


def _table(spark: SparkSession, name: str):  # -> JavaObject, kept inside this package
    return jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )


def holder(spark: SparkSession, name: str) -> Holder | None:
    """The table's lease as its metadata says now (expired ones included)."""
    base = _table(spark, name).operations().refresh()
    return parse(base.properties().get(PROPERTY))


def swap(
    spark: SparkSession, name: str, owner: str, new: Holder | None, now_ms: int | None = None
) -> Holder | None:
    """Set the lease to ``new`` (None: remove it) if it is free, expired or ``owner``'s own;
    return the live holder that prevented it (None: done). Lost races are re-read and decided
    again, never re-applied blindly."""
    blocked: list[Holder] = []  # the live holder the last decision met, if any

    def decide(text: str | None) -> PropertyChange | None:
        blocked.clear()
        current = parse(text)
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if current is not None and current.owner != owner and current.live(now):
            blocked.append(current)
            return None
        if new is None and (current is None or current.owner != owner):
            return None  # nothing of ours to release
        return PropertyChange(None if new is None else new.to_text())

    swap_property(
        spark,
        _table(spark, name),
        name,
        PROPERTY,
        decide,
        what="the optimisation lease",
        then="run again",
        rounds=ROUNDS,
        pause_s=lambda round_number: 0.05 * round_number,
    )
    return blocked[0] if blocked else None
