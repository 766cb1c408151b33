"""Observed figures: what a batch's jobs count on the way (Spark's ``observe``), as frozen
dataclasses with real names, and the columns that compute them.

Floor: actions (driver side of ingest_cdc). The Spark metric names (the aliases below:
``n``, ``p``, ``lo``, ``good``, ``print``, ``p<i>``, …) are the wire format the observed rows
carry; each ``of`` reads them once, so no stage sees a one-letter name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkext.actions.cdc.ingest.columns import fingerprint
from sparkext.actions.cdc.ingest.toast import unavailable_checks
from sparkext.spark.observe import observed_metrics
from sparkext.spark.reused import reused

if TYPE_CHECKING:
    from pyspark.sql import Column, Observation, Row

OBSERVED_WAIT_S = 30.0  # for Spark to report metrics observed by a finished job
Print = Decimal | int | None  # a fingerprint: Decimal when computed, int when reported as JSON


def observed(observation: Observation, compute: Callable[[], Row | None]) -> dict[str, Any]:
    """The figures ``observation`` collected during a finished job, or ``compute()``'s row, by
    their Spark names.

    Spark reports observed metrics through its listener bus, a moment after the job; waiting is
    bounded because a plan Spark proves empty may lose its observing node, and then no report
    ever comes (not seen here; ``compute`` is then one small extra job)."""
    found: dict[str, Any] = {}
    waiter = threading.Thread(
        target=lambda: found.update(observed_metrics(observation)), daemon=True
    )
    waiter.start()
    waiter.join(OBSERVED_WAIT_S)
    if not waiter.is_alive() and found:
        return found
    row = compute()
    assert row is not None  # an aggregate without grouping always has its one row
    return dict(row.asDict())


@dataclass(frozen=True)
class TypeFact:
    """What :func:`sparkext.actions.cdc.model.batch_types` reads of a fact: a Connect schema
    or a row signature."""

    value_schema: str | None
    row_types: str | None


@dataclass(frozen=True)
class DecodedFact:
    """One group of the decoded batch's facts (:func:`decoded_facts`)."""

    bad: bool  # rejected
    family: str | None  # position family
    source_partition: str  # the decoder names one for every event
    value_schema: str | None
    row_types: str | None
    events: int
    highest: str | None  # position
    lowest: str | None  # position

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> DecodedFact:
        return cls(
            bool(row["bad"]),
            row["family"],
            row["source_partition"],
            row["value_schema"],
            row["row_types"],
            row["n"],
            row["p"],
            row["lo"],
        )


@reused
def decoded_facts() -> tuple[tuple[Column | str, ...], tuple[Column, ...]]:
    """Grouping and figures of the decoded batch's facts: schemas, rejects, position families,
    progress per source partition."""
    from pyspark.sql import functions as F

    groups = (
        F.col("reject").isNotNull().alias("bad"),
        F.substring_index("position", ":", 1).alias("family"),
        "source_partition",
        "value_schema",
        "row_types",
    )
    figures = (
        F.count(F.lit(1)).alias("n"),
        F.max("position").alias("p"),
        F.min("position").alias("lo"),
    )
    return groups, figures


@dataclass(frozen=True)
class GuessedFacts:
    """The facts of a batch typed with a guess (:func:`guessed_facts`)."""

    events: int
    good: int  # not rejected, of the guess's family (or of none)
    fingerprint: Print  # of the events that are typed (not rejected)
    others: int  # good but for their family: of another one
    elsewhere: int  # good events of a source partition the guess does not list
    lowest: str | None  # the good events' lowest position
    schemas: tuple[str, ...]  # the good events' Connect schemas, sorted
    row_types: tuple[str, ...]  # their row signatures, sorted
    highest: Mapping[str, str]  # source partition -> its good events' highest position

    @classmethod
    def of(cls, row: Mapping[str, Any], partitions: tuple[str, ...]) -> GuessedFacts:
        highest = {
            p: row[f"p{i}"] for i, p in enumerate(partitions) if row.get(f"p{i}") is not None
        }
        return cls(
            row["n"],
            row["good"] or 0,
            row["print"],
            row["others"] or 0,
            row["elsewhere"] or 0,
            row["lo"],
            tuple(sorted(row["schemas"] or ())),
            tuple(sorted(row["rows"] or ())),
            highest,
        )

    def type_facts(self) -> list[TypeFact]:
        """Schemas first, then signatures: the order the facts' path gives them."""
        found = [TypeFact(schema, None) for schema in self.schemas]
        return found + [TypeFact(None, signature) for signature in self.row_types]


@reused
def guessed_facts(family: str | None, partitions: tuple[str, ...]) -> tuple[Column, ...]:
    """The facts of a batch typed with a guess, observed as it is typed: events, good ones (not
    rejected, of ``family`` or of none), events of another family, the good events' schemas and
    row signatures, their lowest position, and their highest per source partition (``p<i>`` for
    ``partitions[i]``; ``elsewhere``: good events of other partitions)."""
    from pyspark.sql import functions as F

    found = F.substring_index("position", ":", 1)
    other = found.isNotNull()
    if family is not None:
        other = other & (found != F.lit(family))
    accepted = F.col("reject").isNull()
    good = accepted & ~other
    partition = F.col("source_partition")
    elsewhere = good & ~partition.isin(*partitions) if partitions else good
    return (
        F.count(F.lit(1)).alias("n"),
        F.sum(good.cast("int")).alias("good"),
        F.sum(F.when(accepted, fingerprint())).alias("print"),  # the rows that are typed
        F.sum((accepted & other).cast("int")).alias("others"),
        F.sum(elsewhere.cast("int")).alias("elsewhere"),
        F.min(F.when(good, F.col("position"))).alias("lo"),
        F.collect_set(F.when(good, F.col("value_schema"))).alias("schemas"),
        F.collect_set(F.when(good, F.col("row_types"))).alias("rows"),
        *(
            F.max(F.when(good & (partition == F.lit(p)), F.col("position"))).alias(f"p{i}")
            for i, p in enumerate(partitions)
        ),
    )


@dataclass(frozen=True)
class TypedFacts:
    """The typed batch's small facts (:func:`typed_facts`)."""

    rows: int
    fingerprint: Print
    missing_keys: int  # rows without a key: rejected
    truncate_position: str | None  # the batch's last truncate
    truncate_time_ms: int | None  # its event time
    event_time_min: int | None  # over every event with a key, late ones included
    event_time_max: int | None
    unavailable: int  # after-images carrying the placeholder of an unavailable value

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> TypedFacts:
        return cls(
            row["rows"],
            row["print"],
            row["missing"] or 0,
            row["p"],
            row["t"],
            row["low"],
            row["high"],
            row["unavailable"] or 0,
        )


@reused
def typed_facts(
    columns: tuple[tuple[str, str], ...], key: tuple[str, ...], placeholder: str
) -> tuple[Column, ...]:
    """The typed batch's small facts: its rows and their fingerprint (:func:`fingerprint`),
    those missing a key, its last truncate, its event-time bounds and how many after-images
    carry the unavailable-value placeholder."""
    from pyspark.sql import functions as F

    toastable = unavailable_checks(dict(columns), key, placeholder)
    unavailable = F.lit(False)
    for is_unavailable in toastable.values():
        unavailable = unavailable | F.coalesce(is_unavailable("after"), F.lit(False))
    is_truncate = F.col("op") == "t"
    return (
        F.count(F.lit(1)).alias("rows"),
        F.sum(fingerprint()).alias("print"),
        F.sum(F.col("missing_key").cast("int")).alias("missing"),
        F.max(F.when(is_truncate, F.col("position"))).alias("p"),
        F.max_by(
            F.when(is_truncate, F.col("event_time_ms")), F.when(is_truncate, F.col("position"))
        ).alias("t"),
        # bounds over every event of the batch, late ones included: the event log holds them
        F.min(F.when(~F.col("missing_key"), F.col("event_time_ms"))).alias("low"),
        F.max(F.when(~F.col("missing_key"), F.col("event_time_ms"))).alias("high"),
        F.sum(unavailable.cast("int")).alias("unavailable"),
    )


@dataclass(frozen=True)
class AppliedFigures:
    """The figures of a decided batch (:func:`applied_figures`)."""

    inserted: int
    updated: int
    deleted: int
    late: int  # events below their key's current version
    duplicate_keys: int  # events at their key's current version
    duplicates_in_batch: int  # the same position twice in the batch
    lookups: int  # keys looked up in the table
    keys: int
    min_time: int | None  # event time of the applied changes
    max_time: int | None
    max_position: str | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> AppliedFigures:
        return cls(
            row["inserted"] or 0,
            row["updated"] or 0,
            row["deleted"] or 0,
            row["late"] or 0,
            row["dup_keys"] or 0,
            row["dup_in_batch"] or 0,
            row["lookups"] or 0,
            row["keys"] or 0,
            row["min_time"],
            row["max_time"],
            row["max_position"],
        )


@reused
def applied_figures() -> tuple[Column, ...]:
    """The figures of a decided batch, observed as its files are written."""
    from pyspark.sql import functions as F

    applied = F.col("status") == "apply"
    return (
        F.sum(F.when(applied & F.col("last.op").isin("c", "r"), 1).otherwise(0)).alias("inserted"),
        F.sum(F.when(applied & (F.col("last.op") == "u"), 1).otherwise(0)).alias("updated"),
        F.sum(F.when(applied & (F.col("last.op") == "d"), 1).otherwise(0)).alias("deleted"),
        F.sum(F.size(F.filter("all_positions", lambda p: p < F.col("version")))).alias("late"),
        F.sum(F.size(F.filter("all_positions", lambda p: p == F.col("version")))).alias("dup_keys"),
        F.sum(F.col("events") - F.size("all_positions")).alias("dup_in_batch"),
        F.sum(F.when(F.col("looked_up"), 1).otherwise(0)).alias("lookups"),
        F.count(F.lit(1)).alias("keys"),
        F.min(F.when(applied, F.col("min_time"))).alias("min_time"),
        F.max(F.when(applied, F.col("max_time"))).alias("max_time"),
        F.max(F.col("last.position")).alias("max_position"),
    )
