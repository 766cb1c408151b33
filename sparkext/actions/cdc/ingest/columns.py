"""The columns of ingest_cdc: the table's system columns and the column expressions every stage
builds on (per-key aggregates, file rows, event-log rows, key changes, arrival order), and the
reading of sparkext's own Parquet files with the table's current types.

Floor: actions (driver side of ingest_cdc). Builds expressions and readers only; no job runs here
except the footer reading of :func:`read_columns` for a key column that was narrower once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sparkext.executors.cdc.files import DATA, EQUALITY_DELETES, KIND
from sparkext.fs import Location
from sparkext.identifiers import col
from sparkext.planning.positions import TIME_FAMILY, incomparable
from sparkext.spark.reused import reused

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

OP, EVENT_TIME, POSITION = "_cdc_op", "_cdc_event_time", "_cdc_position"
SYSTEM_COLUMNS = ((OP, "string"), (EVENT_TIME, "timestamp"), (POSITION, "string"))
SYSTEM_NAMES = {name for name, _ in SYSTEM_COLUMNS}
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    "sparkext.event-time-column": EVENT_TIME,
}


def fingerprint() -> Column:
    """A row's share of a batch's fingerprint: the hash of its source position, summed without
    overflow (a sum of 2^64-range values in decimal(38,0) fits 10^19 rows)."""
    from pyspark.sql import functions as F

    return F.xxhash64("position").cast("decimal(38,0)")


@reused
def per_key() -> tuple[Column, ...]:
    """Aggregates of a key's changes in the batch: its last change, its first before-image,
    how many events and which positions, its event-time range."""
    from pyspark.sql import functions as F

    order = F.struct("position", "ts_ms")
    return (
        F.max_by(F.struct("op", "position", "event_time_ms", "after"), order).alias("last"),
        F.min_by("before", order).alias("first_before"),
        F.count(F.lit(1)).alias("events"),
        F.array_distinct(F.collect_list("position")).alias("all_positions"),
        F.min("event_time_ms").alias("min_time"),
        F.max("event_time_ms").alias("max_time"),
    )


@reused
def file_rows(columns: tuple[str, ...], key: tuple[str, ...]) -> Column:
    """Per decided key, its equality-delete row (key + before-image) and, unless it
    was deleted, its data row (after-image), each with ``__kind``: one branch (each key exploded
    into its rows), not a union of two readings of the decided keys, so what is observed on
    them is counted once."""
    from pyspark.sql import functions as F

    system = [
        F.col("last.op").alias(OP),
        F.timestamp_millis(F.col("last.event_time_ms")).alias(EVENT_TIME),
        F.col("last.position").alias(POSITION),
    ]
    data = F.struct(
        F.lit(DATA).alias(KIND),
        *(col("last", "after", c).alias(c) for c in columns),
        *system,
    )
    delete = F.struct(
        F.lit(EQUALITY_DELETES).alias(KIND),
        *((col(c) if c in key else col("first_before", c)).alias(c) for c in columns),
        *system,
    )
    return F.inline(
        F.when(F.col("last.op") == "d", F.array(delete)).otherwise(F.array(delete, data))
    )


@reused
def event_log_columns(columns: tuple[str, ...], key: tuple[str, ...]) -> tuple[Column, ...]:
    """An event-log row of a typed event: key and user columns (the after-image), op, event
    time and source position."""
    from pyspark.sql import functions as F

    return (
        *((col(c) if c in key else col("after", c)).alias(c) for c in columns),
        F.col("op").alias(OP),
        F.timestamp_millis(F.col("event_time_ms")).alias(EVENT_TIME),
        F.col("position").alias(POSITION),
    )


def all_applied(grouped: DataFrame) -> DataFrame:
    """Every key's last change applies: none is late, none was looked up."""
    return grouped.select("*", *_applied_columns())


@reused
def _applied_columns() -> tuple[Column, ...]:
    """``status``, ``looked_up`` and ``version`` of a key whose last change applies."""
    from pyspark.sql import functions as F

    return (
        F.lit("apply").alias("status"),
        F.lit(False).alias("looked_up"),
        F.lit(None).cast("string").alias("version"),
    )


def with_arrival(decoded: DataFrame, batch_id: int) -> DataFrame:
    """Positions of the ``t`` family (commit time only) get arrival as a tie-breaker: the batch,
    the file, the record's place in the file; a second change in the same millisecond is newer,
    not a duplicate."""
    from pyspark.sql import functions as F

    arrival = F.concat(  # file names of Kafka Connect sinks sort by partition and offset
        F.col("position"),
        F.lit(f":{batch_id:010d}:"),
        F.coalesce(F.col("source_file"), F.lit("")),
        F.lit(":"),
        F.lpad(F.monotonically_increasing_id().cast("string"), 20, "0"),  # order in the file
    )
    return decoded.withColumn(
        "position",
        F.when(F.col("position").startswith(f"{TIME_FAMILY}:"), arrival).otherwise(
            F.col("position")
        ),
    )


def reject_other_families(
    marked: DataFrame, chosen: str | None, seen: set[str | None]
) -> DataFrame:
    """``reject`` set for events whose position cannot be ordered against the table's."""
    from pyspark.sql import functions as F

    others = sorted(f for f in seen if f is not None and f != chosen)
    if chosen is None or not others:
        return marked
    reasons = F.create_map(
        *(part for other in others for part in (F.lit(other), F.lit(incomparable(other, chosen))))
    )
    reason = reasons[F.substring_index("position", ":", 1)]  # NULL for the table's own family
    return marked.withColumn("reject", F.coalesce(F.col("reject"), reason))


def split_key_changes(typed: DataFrame, key: Sequence[str]) -> DataFrame:
    """An update whose before-image has another key also deletes the old key (at the same
    position): a primary-key change is a delete of the old row plus an upsert of the new one.

    One branch (each such update expanded into two rows), not a union of two readings of
    ``typed``: what is observed on ``typed`` is counted once."""
    schema = typed.schema
    return typed.select(_key_split(tuple(schema.names), tuple(key), schema["after"].dataType))


@reused
def _key_split(names: tuple[str, ...], key: tuple[str, ...], after_type: DataType) -> Column:
    """:func:`split_key_changes`' projection (built once per schema): ``inline`` of one row,
    or two (the old key's delete first) for an update that moves its key."""
    from pyspark.sql import functions as F

    present = F.lit(True)
    moved = F.lit(False)
    for k in key:
        present = present & col("before", k).isNotNull()
        moved = moved | ~col("before", k).eqNullSafe(col(k))
    splits = (F.col("op") == "u") & present & moved
    row = F.struct(*(col(name).alias(name) for name in names))
    old_key = F.struct(
        *(
            F.lit("d").alias(name)
            if name == "op"
            else F.lit(None).cast(after_type).alias(name)
            if name == "after"
            else col("before", name).alias(name)
            if name in key
            else col(name).alias(name)
            for name in names
        )
    )
    return F.inline(F.when(splits, F.array(old_key, row)).otherwise(F.array(row)))


def read_columns(
    spark: SparkSession,
    paths: Sequence[str],
    types: Mapping[str, str],
    key: Sequence[str],
    *extra: tuple[str, str],
    narrower_keys: bool = False,
    base_path: str | None = None,
) -> DataFrame:
    """The key columns (typed as ``types`` says: the table's current types) and ``extra``
    (name, type) columns of Parquet files sparkext wrote over the table's life.

    Read with this schema, never a footer's or a merge of footers: a column widened since
    (int before ``ALTER … TYPE bigint``) is then simply not read unless it is a key. Spark 3.5's
    Parquet readers cannot read int32 as bigint, so where a key column was narrower once
    (``narrower_keys``) the files' own key types are read first (their footers, on the
    executors), and each group of files is read with its types and cast."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    def schema(key_types: Mapping[str, str]) -> StructType:
        fields = [StructField(k, _parse_datatype_string(key_types[k])) for k in key]
        fields += [StructField(name, _parse_datatype_string(kind)) for name, kind in extra]
        return StructType(fields)

    reader = spark.read if base_path is None else spark.read.option("basePath", base_path)
    whole = reader.schema(schema(types)).parquet(*paths)
    if not narrower_keys:
        return whole
    files = whole.inputFiles()
    if not files:
        return whole
    wanted = tuple(key)

    def key_types(path: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return path, _file_key_types(path, wanted)  # on an executor

    found = (
        spark.sparkContext.parallelize(
            files, min(len(files), spark.sparkContext.defaultParallelism)
        )
        .map(key_types)
        .collect()
    )
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for path, file_types in found:
        groups.setdefault(file_types, []).append(path)
    parts = []
    for file_types, group in sorted(groups.items()):
        as_written = {**types, **dict(file_types)}
        part = reader.schema(schema(as_written)).parquet(*group)
        parts.append(
            part.select(
                *(col(c).cast(types[c]).alias(c) if c in key else col(c) for c in part.columns)
            )
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union


def _file_key_types(path: str, key: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(column, Spark type) of the key columns a Parquet file holds (on an executor)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_type

    location = Location.of(path)
    with location.filesystem.open_input_file(location.path) as handle:
        arrow = pq.read_schema(handle)
    return tuple(
        (k, from_arrow_type(arrow.field(k).type).simpleString()) for k in key if k in arrow.names
    )
