"""Table properties of changelog consumers, through Iceberg's ``UpdateProperties`` (py4j).

A registration is a property update, never a snapshot: it cannot conflict with a data commit's
validation. When another commit lands between our refresh and our swap, Iceberg's
``PropertiesUpdate`` refreshes and applies the change again (``commit.retry.num-retries``
times); this module retries a few more rounds on top, with back-off, so a busy table does not
fail a stream. The other writer's commit, if ours won the race, retries the same way (Iceberg's
producers and sparkext's commit layer both retry a lost swap), so a registration never fails a
commit of someone else.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from sparkext.errors import CommitConflictError
from sparkext.iceberg.errors import java_exception_classes
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import string_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUNDS = 5


def _load(spark: SparkSession, name: str):  # -> JavaObject, kept inside this package
    return jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )


def refresh(spark: SparkSession, name: str) -> None:
    """Make the table Spark's catalog caches see commits made since it was loaded (another
    process's included): the next changelog plans on the newest metadata."""
    _load(spark, name).refresh()


def properties(spark: SparkSession, name: str) -> dict[str, str]:
    """The table's properties, freshly read."""
    table = _load(spark, name)
    table.refresh()
    return string_map(table.properties())


def set_property(spark: SparkSession, name: str, key: str, value: str) -> None:
    """Set one table property, retrying lost races."""
    _update(spark, name, key, value)


def remove_property(spark: SparkSession, name: str, key: str) -> bool:
    """Remove one table property (True when it was there), retrying lost races."""
    if key not in properties(spark, name):
        return False
    _update(spark, name, key, None)
    return True


def _update(spark: SparkSession, name: str, key: str, value: str | None) -> None:
    for round_number in range(1, ROUNDS + 1):
        table = _load(spark, name)
        table.refresh()
        update = table.updateProperties()
        update = update.remove(key) if value is None else update.set(key, value)
        try:
            update.commit()
            return
        except Exception as error:
            lost = any(c.endswith("CommitFailedException") for c in java_exception_classes(error))
            if not lost:
                raise
            if round_number == ROUNDS:
                raise CommitConflictError(
                    f"Could not update table property '{key}' of {name}: other commits kept "
                    f"winning the race {ROUNDS} times; the registration is retried at the next "
                    "commit of the stream."
                ) from None
            time.sleep(min(2.0, 0.1 * 2**round_number) * (0.5 + random.random()))
