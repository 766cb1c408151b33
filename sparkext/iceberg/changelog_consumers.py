"""Table properties of changelog consumers, through the commit layer's property swap (py4j).

Floor: iceberg (the Iceberg Java API). A registration is a property update, never a snapshot:
it cannot conflict with a data commit's validation. It goes through
:func:`sparkext.iceberg.commit.swap_property` — one compare-and-swap on the metadata just read,
re-read and re-applied when another commit landed in between — with up to ``ROUNDS`` rounds and
back-off, so a busy table does not fail a stream (each round is one swap, with no hidden retry
of Iceberg's inside it, so the rounds are the whole budget). The
other writer's commit, if ours won the race, retries the same way (Iceberg's producers and
sparkext's commit layer both retry a lost swap), so a registration never fails a commit of
someone else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkext.iceberg.commit import PropertyChange, swap_property
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.java import string_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUNDS = 8


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
    _update(spark, name, key, lambda current: PropertyChange(value))


def remove_property(spark: SparkSession, name: str, key: str) -> bool:
    """Remove one table property (True when it was there), retrying lost races."""
    return _update(
        spark, name, key, lambda current: None if current is None else PropertyChange(None)
    )


def _update(
    spark: SparkSession, name: str, key: str, decide: Callable[[str | None], PropertyChange | None]
) -> bool:
    """Swap ``key`` as ``decide`` says; True when it changed."""
    return swap_property(
        spark,
        _load(spark, name),
        name,
        key,
        decide,
        what=f"table property '{key}'",
        then="the registration is retried at the next commit of the stream",
        rounds=ROUNDS,
    ).changed
