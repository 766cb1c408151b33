"""Plain data of the CDC pipeline: settings, running totals, truncate plans, schema facts.

Pure Python: no Spark, no JVM, unit-testable in milliseconds.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkext.actions.cdc.types import VARIABLE_SCALE_DEFAULT, connect_columns, merge_column
from sparkext.executors.cdc.decode import merge_types


@dataclass
class Metrics:
    """Totals over all micro-batches of one ingest_cdc call."""

    events: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    duplicates: int = 0
    late: int = 0
    rejected: int = 0
    files_missing: int = 0  # planned input files gone before they were read (also rejected)
    commits: int = 0
    batches_replayed: int = 0
    truncates: int = 0
    min_event_time_ms: int | None = None
    max_event_time_ms: int | None = None
    lookups_made: int = 0
    lookups_avoided: int = 0
    snapshot_ids: list[int] = field(default_factory=list)

    def add_times(self, low: int | None, high: int | None) -> None:
        if low is not None:
            self.min_event_time_ms = (
                low if self.min_event_time_ms is None else min(self.min_event_time_ms, low)
            )
        if high is not None:
            self.max_event_time_ms = (
                high if self.max_event_time_ms is None else max(self.max_event_time_ms, high)
            )


@dataclass(frozen=True)
class Settings:
    table: str
    checkpoint: str
    primary_key: tuple[str, ...]
    create: bool
    source_table: str | None
    fail_on_reject: bool
    key_cache_batches: int
    lookup_in_list_max: int
    input_format: str = "json-lines"  # or "json-files": each file one JSON document
    kafka_options: tuple[tuple[str, str], ...] = ()  # kafka.* settings for Spark's Kafka reader
    kafka_pattern: bool = False  # the Kafka topics are one regular expression (subscribePattern)
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    partition_by: tuple[tuple[str, str, int | None], ...] = ()  # for create => true
    # table type of PostgreSQL numeric without precision (io.debezium.data.VariableScaleDecimal)
    variable_scale_decimal: str = "decimal(38,10)"
    # what Debezium writes for a value it does not have (PostgreSQL TOAST): the stored one stays
    unavailable_placeholder: str = "__debezium_unavailable_value"
    # the landing directory of the connector's heartbeat topic: heartbeats count as progress
    heartbeat_source: str | None = None


@dataclass(frozen=True)
class Keys:
    """Primary keys for tables whose events carry no Debezium key (a sink that landed values
    only): ``default`` for every table, ``per_table`` by table name (without namespace)."""

    default: tuple[str, ...] = ()
    per_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, table: str) -> tuple[str, ...]:
        return self.per_table.get(table, self.default)


@dataclass(frozen=True)
class Truncate:
    """A truncate to apply in this batch: all files (metadata only) or the rows older than it."""

    position: str
    event_time_ms: int | None
    all: bool  # True: no row can be newer than the truncate, so every data file goes

    @staticmethod
    def plan(
        position: str | None,
        event_time_ms: int | None,
        applied_truncate: str | None,
        high_water_mark: str | None,
    ) -> Truncate | None:
        """None when there is none, or it was applied before (a re-delivered truncate).

        >>> Truncate.plan("m:5", 1, None, "m:3").all, Truncate.plan("m:5", 1, None, "m:9").all
        (True, False)
        >>> Truncate.plan("m:5", 1, "m:5", "m:9") is None
        True
        """
        if position is None or (applied_truncate is not None and position <= applied_truncate):
            return None
        return Truncate(
            position, event_time_ms, high_water_mark is None or position > high_water_mark
        )


def batch_types(
    facts: Sequence[Any],
    settings: Settings | None = None,
    notice: Callable[[str], None] | None = None,
) -> tuple[dict[str, str], dict[str, str], bool]:
    """Column -> Spark type of a batch's rows, Debezium logical-type tags, and whether exact.

    A Connect ``schema`` wrapper gives exact types (several schemas in one batch merge by
    :func:`sparkext.actions.cdc.types.merge_column`); otherwise the per-row signatures the decoder
    inferred from JSON values are merged. ``settings`` chooses the type of variable-scale
    decimals; ``notice`` hears of unknown logical types (default: a warning).
    """

    variable = settings.variable_scale_decimal if settings else VARIABLE_SCALE_DEFAULT
    schemas = [json.loads(f.value_schema) for f in facts if f.value_schema]
    if schemas:
        columns: dict[str, tuple[str, str | None]] = {}
        for schema in schemas:  # several when the source schema changed inside the batch
            for name, spark_type, logical in connect_columns(schema, variable, notice):
                old = columns.get(name)
                found = (spark_type, logical)
                columns[name] = found if old is None else merge_column(name, old, found)
        types = {name: t for name, (t, _) in columns.items()}
        return types, {name: lt for name, (_, lt) in columns.items() if lt}, True
    signatures = [json.loads(f.row_types) for f in facts if f.row_types]
    return merge_types(signatures), {}, False


def max_position(*positions: str | None) -> str | None:
    present = [p for p in positions if p is not None]
    return max(present) if present else None
