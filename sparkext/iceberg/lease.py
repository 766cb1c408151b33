"""A per-table lease kept in the table's own metadata, taken by compare-and-swap (py4j).

The lease is table property ``sparkext.lease`` = JSON ``{"owner", "expires", "purpose"}``. It
is read and replaced through the table's ``TableOperations``: ``commit(base, updated)`` fails
when another commit landed since ``base`` was read, so two processes (on any catalog: Hadoop,
JDBC, REST) can never both see the lease free and both take it. A property change is a metadata
commit, not a snapshot: data writers that lose a race to it retry as for any other commit. The
guarantee is the catalog's: a JDBC, Hive or REST catalog swaps atomically, and so does the
Hadoop catalog on HDFS; on a local disk or an object store the Hadoop catalog's
check-then-rename leaves a small window (use a JDBC catalog for several processes there).

Iceberg's own ``UpdateProperties`` cannot be used here: on a lost race it refreshes and applies
the same change again, blindly overwriting a lease someone else just took.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext.errors import CommitConflictError
from sparkext.iceberg.errors import java_exception_classes
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


def _operations(spark: SparkSession, name: str):  # -> JavaObject, kept inside this package
    table = jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )
    return table.operations()


def holder(spark: SparkSession, name: str) -> Holder | None:
    """The table's lease as its metadata says now (expired ones included)."""
    base = _operations(spark, name).refresh()
    return parse(base.properties().get(PROPERTY))


def swap(
    spark: SparkSession, name: str, owner: str, new: Holder | None, now_ms: int | None = None
) -> Holder | None:
    """Set the lease to ``new`` (None: remove it) if it is free, expired or ``owner``'s own;
    return the live holder that prevented it (None: done). Lost races are re-read and decided
    again, never re-applied blindly."""
    jvm = jvm_of(spark)
    ops = _operations(spark, name)
    for round_number in range(1, ROUNDS + 1):
        base = ops.refresh()
        current = parse(base.properties().get(PROPERTY))
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if current is not None and current.owner != owner and current.live(now):
            return current
        if new is None and (current is None or current.owner != owner):
            return None  # nothing of ours to release
        properties = jvm.java.util.HashMap(base.properties())
        if new is None:
            properties.remove(PROPERTY)
        else:
            properties.put(PROPERTY, new.to_text())
        try:
            ops.commit(base, base.replaceProperties(properties))
            return None
        except Exception as error:
            lost = any(c.endswith("CommitFailedException") for c in java_exception_classes(error))
            if not lost:
                raise
            if round_number == ROUNDS:
                raise CommitConflictError(
                    f"Could not update the optimisation lease of {name}: other commits kept "
                    f"winning the race {ROUNDS} times; run again."
                ) from None
            time.sleep(0.05 * round_number)
    return None
