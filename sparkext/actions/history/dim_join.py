"""Dimension joins as of a time: each fact with the dimension row valid when it happened.

Event mode (``mode => 'event'``) joins each fact with the dimension's version valid at the
fact's time: the last change at or before it (a change at exactly the fact's time counts). The
versions come from ONE base state and the changes inside the facts' time range, never from a
time travel per fact:

* an ``ingest_cdc`` dimension: its state as of the earliest fact
  (:func:`~sparkext.actions.history.as_of.state_as_of`) plus the logged events up to the latest
  fact,
  each valid from its event time; a delete ends the key; a truncate ends every key older than it
  in the source's order; per key the change with the newest source position among those up to a
  time wins (the rule of ``snapshot_as_of_event_time``);
* any other Iceberg table: its snapshot current at the earliest fact plus its changelog
  (:func:`~sparkext.actions.history.changelog.changelog`) up to the latest fact, each change valid
  from its commit time.

The join itself is one shuffle by key and a sort: facts and versions are unioned, ordered per
key by (time, versions before facts, source order), and every fact takes the last version
before it (``last(…, ignorenulls)`` over a running window) — the cost follows the facts plus
the versions, with no range join whose cost grows with versions × facts per key.

Processing mode joins every fact with one pinned snapshot of the dimension (default: the
current one), as a lookup join at that moment does.

Floor: actions (the table function :mod:`sparkext.procedures.dim_join_changelog` builds a
:class:`DimJoinRequest` with :func:`request_of` and calls :func:`dim_join`; this module declares
its options).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext import times
from sparkext.actions.history.as_of import EVENT_TIME, EVENT_TIME_PROPERTY, OP, POSITION
from sparkext.actions.history.changelog import changelog
from sparkext.actions.history.versions import (
    VALID_FROM,
    cdc_range,
    is_cdc_table,
    truncates,
    versions_from,
)
from sparkext.declarations import Option, one_of, or_empty, parse_boolean, parse_names
from sparkext.errors import ProcedureArgumentError
from sparkext.iceberg.catalog import identifier_columns, resolve_table, split_name
from sparkext.iceberg.changelog import ChangelogTable
from sparkext.iceberg.errors import spark_message
from sparkext.identifiers import col, cols
from sparkext.planning.changelog import Bound, RangeRequest, parse_bound, resolve_end
from sparkext.planning.dim_join import (
    MODES,
    KeyPair,
    Output,
    output_columns,
    parse_on,
    truncate_floors,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from sparkext.iceberg.catalog import TableRef

VERSION_COLUMN = "_dim_version"  # the source position (ingest_cdc) or snapshot id joined
VALID_FROM_COLUMN = "_dim_valid_from"  # when that version's change happened (or was committed)
AUDIT = (VERSION_COLUMN, VALID_FROM_COLUMN)

_K, _T, _KIND, _SEQ, _V, _F = "__sx_k", "__sx_t", "__sx_kind", "__sx_seq", "__sx_v", "__sx_f"
_LABEL, _SINCE, _OP = "__sx_label", "__sx_since", "__sx_op"


@dataclass(frozen=True)
class DimJoinRequest:
    facts: str  # a table name or a query
    dimension: TableRef
    on: str
    fact_time: str | None = None
    mode: str = "event"
    join: str = "left"  # or 'inner'
    columns: Sequence[str] | None = None  # dimension columns to return (default: all but keys)
    prefix: str = ""
    audit: bool = False
    as_of: str | None = None  # processing mode: snapshot id, tag, branch or time


JOIN = "join"
JOIN_DEFAULT = "left"
COLUMNS = "columns"
COLUMNS_DEFAULT = ""  # every dimension column but the join keys
COLUMN_PREFIX = "column-prefix"
COLUMN_PREFIX_DEFAULT = ""
AUDIT_OPTION = "audit"
AUDIT_DEFAULT = "false"
AS_OF = "as-of"
AS_OF_DEFAULT = ""  # processing mode: the current snapshot

OPTIONS = (
    Option(
        JOIN,
        JOIN_DEFAULT,
        "'left' keeps facts without a version, 'inner' drops them",
        one_of("left", "inner"),
    ),
    Option(
        COLUMNS,
        COLUMNS_DEFAULT,
        "dimension columns to return, comma-separated (default: all but the join keys)",
        or_empty(parse_names),
    ),
    Option(COLUMN_PREFIX, COLUMN_PREFIX_DEFAULT, "prefix for the returned dimension columns"),
    Option(
        AUDIT_OPTION,
        AUDIT_DEFAULT,
        "add _dim_version (the source position or snapshot id joined) and _dim_valid_from "
        "(when that version's change happened)",
        parse_boolean,
    ),
    Option(
        AS_OF,
        AS_OF_DEFAULT,
        "processing mode: the snapshot to join, a snapshot id, tag, branch or time "
        "(default: the current snapshot)",
    ),
)


def request_of(
    facts: str,
    dimension: TableRef,
    on: str,
    fact_time: str | None,
    mode: str | None,
    options: Mapping[str, Any],
) -> DimJoinRequest:
    """The request dim_join_changelog's arguments make (``options``: the resolved
    :data:`OPTIONS`); the mode defaults to 'event' when ``fact_time`` is given."""
    chosen = (mode or ("event" if fact_time else "processing")).lower()
    if chosen not in MODES:
        raise ProcedureArgumentError(
            f"mode '{mode}' is not one of {', '.join(MODES)}; 'event' joins the version "
            "valid at each fact's time, 'processing' one snapshot of the dimension."
        )
    if options[AS_OF] and chosen == "event":
        raise ProcedureArgumentError(
            f"option as-of '{options[AS_OF]}' pins one snapshot, which is processing mode; "
            "drop it, or pass mode => 'processing'."
        )
    return DimJoinRequest(
        facts=facts,
        dimension=dimension,
        on=on,
        fact_time=fact_time or None,
        mode=chosen,
        join=options[JOIN],
        columns=options[COLUMNS],
        prefix=options[COLUMN_PREFIX],
        audit=options[AUDIT_OPTION],
        as_of=options[AS_OF],
    )


@dataclass(frozen=True)
class Versions:
    """A dimension's versions: user columns, ``_sparkext_valid_from`` (NULL: valid from before
    the earliest fact), ``_cdc_op`` ('d' ends the key), ``_cdc_position`` (the order among
    versions at one time), ``__sx_label`` (what the audit column shows) and ``__sx_since``
    (when the version's change happened), plus the truncates that end older versions."""

    frame: DataFrame
    key: list[str]
    truncates: list[tuple[int, str]]


def facts_frame(spark: SparkSession, text: str) -> DataFrame:
    """The facts: a table name, or a query (any text that is not a table name)."""

    text = text.strip()
    try:
        split_name(spark, text)
        is_name = True
    except Exception:
        is_name = False
    try:
        return spark.table(text) if is_name else spark.sql(text)
    except Exception as error:
        what = "table" if is_name else "query"
        raise ProcedureArgumentError(
            f"facts: the {what} '{text}' cannot be read ({spark_message(error) or error}); "
            "give a table name such as 'lake.dw.clicks' or a query such as "
            "'SELECT * FROM lake.dw.clicks WHERE dt = ...'."
        ) from None


def dim_join(
    spark: SparkSession,
    request: DimJoinRequest,
    progress: Callable[[str], None] = lambda message: None,
) -> DataFrame:
    """The facts joined with the dimension, in the request's mode (see the module doc)."""

    facts = facts_frame(spark, request.facts)
    dimension = request.dimension
    dim_schema = spark.table(dimension.name).schema
    cdc = is_cdc_table(spark, dimension.name)
    system = {"_cdc_op", "_cdc_event_time", "_cdc_position"} if cdc else set()
    dim_names = [f.name for f in dim_schema.fields if f.name not in system]
    pairs = parse_on(request.on, _last_parts(request.facts), dimension.parts[-1:])
    output = output_columns(
        facts.columns,
        dim_names,
        pairs,
        request.columns,
        request.prefix,
        AUDIT if request.audit else (),
    )
    fact_case = {c.lower(): c for c in facts.columns}
    dim_case = {c.lower(): c for c in dim_names}
    pairs = [KeyPair(fact_case[p.fact.lower()], dim_case[p.dim.lower()]) for p in pairs]
    if request.mode == "processing":
        return _processing(spark, facts, request, pairs, output)
    time_column = _fact_time(spark, facts, request)
    fact_time = col(time_column).cast("timestamp")
    progress(f"finding the time range of the facts ({time_column})")
    low, high = _time_range(facts, fact_time)
    if low is None:  # no fact has a time: nothing joins
        return _as_of_join(facts, None, pairs, fact_time, output, request)
    progress(f"building the versions of {dimension.name} in the facts' time range")
    if cdc:
        versions = _cdc_versions(spark, dimension, low, high)
    else:
        versions = _changelog_versions(spark, dimension, pairs, low, high, progress)
    _check_key(dimension.name, versions.key, pairs)
    return _as_of_join(facts, versions, pairs, fact_time, output, request)


def _last_parts(facts: str) -> list[str]:
    text = facts.strip()
    return [text.split(".")[-1]] if text and " " not in text else []


def _fact_time(spark: SparkSession, facts: DataFrame, request: DimJoinRequest) -> str:

    column = request.fact_time
    if column is None:
        try:
            column = resolve_table(spark, request.facts.strip()).prop(EVENT_TIME_PROPERTY)
        except Exception:
            column = None
    if column is None:
        raise ProcedureArgumentError(
            "event mode needs the facts' time: pass fact_time (e.g. 'ts'), set the facts "
            "table's property 'sparkext.event-time-column', or use mode => 'processing'."
        )
    found = {c.lower(): c for c in facts.columns}
    if column.lower() not in found:
        raise ProcedureArgumentError(
            f"fact_time '{column}' is not a column of the facts; they have "
            f"{', '.join(facts.columns)}."
        )
    return found[column.lower()]


def _time_range(facts: DataFrame, fact_time: Column) -> tuple[dt.datetime | None, dt.datetime]:
    """The earliest fact's time and just after the latest (instants; one aggregate row)."""
    from pyspark.sql import functions as F

    row = facts.agg(
        F.min(F.unix_micros(fact_time)).alias("lo"), F.max(F.unix_micros(fact_time)).alias("hi")
    ).first()
    assert row is not None  # an aggregation without grouping has one row
    if row.lo is None:
        return None, times.from_micros(0)
    return times.from_micros(row.lo), times.from_micros(row.hi + 1)


def _check_key(name: str, key: Sequence[str], pairs: Sequence[KeyPair]) -> None:
    if not key:
        return
    if {k.lower() for k in key} != {p.dim.lower() for p in pairs}:
        raise ProcedureArgumentError(
            f"event mode joins {name} on its primary key ({', '.join(key)}), which decides "
            f"what a version is; on names {', '.join(p.dim for p in pairs)}. Join on the key, "
            "or use mode => 'processing' for a lookup on other columns."
        )


# ---- versions ------------------------------------------------------------------------------


def _cdc_versions(
    spark: SparkSession, dimension: TableRef, low: dt.datetime, high: dt.datetime
) -> Versions:
    from pyspark.sql import functions as F

    found = cdc_range(spark, dimension.name, low, high)
    frame = versions_from(
        found.base, found.changes, found.names, found.key, found.floors, found.truncate_floor
    )
    frame = frame.withColumn(_LABEL, F.col(POSITION)).withColumn(_SINCE, F.col(EVENT_TIME))
    return Versions(frame, found.key, truncates(found.changes))


def _changelog_versions(
    spark: SparkSession,
    dimension: TableRef,
    pairs: Sequence[KeyPair],
    low: dt.datetime,
    high: dt.datetime,
    progress: Callable[[str], None],
) -> Versions:
    """Versions of a table without event logs, valid from their commit times."""
    from pyspark.sql import functions as F

    names = spark.table(dimension.name).columns
    key = identifier_columns(spark, dimension.name) or [p.dim for p in pairs]
    history = ChangelogTable(spark, dimension).history()
    low_ms, high_ms = times.to_millis(low), times.to_millis(high)
    base_id = resolve_end(history, Bound("the earliest fact", timestamp_ms=low_ms))
    end_id = resolve_end(history, Bound("the latest fact", timestamp_ms=high_ms))
    if base_id is not None:
        committed = history.snapshots[base_id].timestamp_ms
        base = spark.read.option("snapshot-id", str(base_id)).table(dimension.name)
        base = base.select(
            *cols(names),
            F.lit(None).cast("timestamp").alias(VALID_FROM),
            F.lit("r").alias(OP),
            F.lit("").alias(POSITION),
            F.lit(str(base_id)).alias(_LABEL),
            times.lit(times.from_millis(committed)).alias(_SINCE),
        )
    else:
        base = None
    if end_id is None or end_id == base_id:
        changes = None
    else:
        request = RangeRequest(start=None if base_id is None else str(base_id), end=str(end_id))
        rows = changelog(spark, dimension, request, progress=progress)
        inserted = F.col("_change_type").isin("INSERT", "UPDATE_AFTER")
        # the order of versions: by commit, and an insert after a delete of the same commit
        order = F.format_string("%012d", F.col("_change_ordinal"))
        changes = rows.select(
            *cols(names),
            F.col("_commit_timestamp").alias(VALID_FROM),
            F.when(inserted, "u").otherwise("d").alias(OP),
            F.concat(order, F.when(inserted, "1").otherwise("0")).alias(POSITION),
            F.col("_commit_snapshot_id").cast("string").alias(_LABEL),
            F.col("_commit_timestamp").alias(_SINCE),
        )
    if base is None and changes is None:
        frame = spark.table(dimension.name).limit(0)
        frame = frame.select(
            *cols(names),
            F.lit(None).cast("timestamp").alias(VALID_FROM),
            F.lit("r").alias(OP),
            F.lit("").alias(POSITION),
            F.lit("").alias(_LABEL),
            F.lit(None).cast("timestamp").alias(_SINCE),
        )
    elif changes is None:
        assert base is not None  # both None is the branch above
        frame = base
    elif base is None:
        frame = changes
    else:
        frame = base.unionByName(changes)
    return Versions(frame, key, [])


# ---- the join ------------------------------------------------------------------------------


def _as_of_join(
    facts: DataFrame,
    versions: Versions | None,
    pairs: Sequence[KeyPair],
    fact_time: Column,
    output: Output,
    request: DimJoinRequest,
) -> DataFrame:
    """Every fact with the last version of its key at or before its time (module doc)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    fact_struct = F.struct(*cols(facts.columns))
    keys = [f"{_K}{i}" for i in range(len(pairs))]
    if versions is None:
        return _finish(facts.select(fact_struct.alias(_F)), None, output, request)
    frame = versions.frame
    dim_types = dict(frame.dtypes)
    payload = F.struct(
        *(col(name).alias(name) for name, _ in output.columns),
        F.col(OP).alias(_OP),
        F.col(POSITION).alias(POSITION),
        F.col(_LABEL).alias(_LABEL),
        F.col(_SINCE).alias(_SINCE),
    )
    side_v = frame.select(
        *(col(p.dim).alias(k) for p, k in zip(pairs, keys, strict=True)),
        F.col(VALID_FROM).alias(_T),
        F.lit(0).alias(_KIND),
        F.coalesce(F.col(POSITION), F.lit("")).alias(_SEQ),
        payload.alias(_V),
        F.lit(None).cast(facts.select(fact_struct).schema[0].dataType).alias(_F),
    )
    v_type = side_v.schema[_V].dataType
    side_f = facts.select(
        *(col(p.fact).cast(dim_types[p.dim]).alias(k) for p, k in zip(pairs, keys, strict=True)),
        fact_time.alias(_T),
        F.lit(1).alias(_KIND),
        F.lit("").alias(_SEQ),
        F.lit(None).cast(v_type).alias(_V),
        fact_struct.alias(_F),
    )
    running = (
        Window.partitionBy(*keys)
        .orderBy(F.col(_T).asc_nulls_first(), _KIND, _SEQ)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    has_key = F.lit(True)
    for k in keys:
        has_key = has_key & F.col(k).isNotNull()
    found = F.last(_V, ignorenulls=True).over(running)
    joined = (
        side_v.unionByName(side_f)
        .withColumn(_V, F.when(has_key & F.col(_T).isNotNull(), found))
        .where(F.col(_KIND) == 1)
    )
    version = F.col(_V)
    valid = version.isNotNull() & (version[_OP] != "d")
    floors = truncate_floors(versions.truncates)
    if floors:  # a truncate at or before the fact ends every version older than it
        floor = F.lit(None).cast("string")
        for micros, position in floors:
            floor = F.when(F.unix_micros(F.col(_T)) >= micros, position).otherwise(floor)
        valid = valid & (floor.isNull() | (version[POSITION] > floor))
    joined = joined.withColumn("__sx_valid", valid)
    return _finish(joined, version, output, request)


def _finish(
    joined: DataFrame,
    version: Column | None,
    output: Output,
    request: DimJoinRequest,
) -> DataFrame:
    """Fact columns, then the dimension's (NULL on a miss), then the audit columns."""
    from pyspark.sql import functions as F

    if version is None:
        valid = F.lit(False)
        dims = [F.lit(None).alias(alias) for _, alias in output.columns]
        label, since = F.lit(None).cast("string"), F.lit(None).cast("timestamp")
    else:
        valid = F.col("__sx_valid")
        dims = [F.when(valid, version[name]).alias(alias) for name, alias in output.columns]
        label, since = F.when(valid, version[_LABEL]), F.when(valid, version[_SINCE])
    if request.join == "inner":
        joined = joined.where(valid)
    audit = [label.alias(VERSION_COLUMN), since.alias(VALID_FROM_COLUMN)] if request.audit else []
    return joined.select(F.col(f"{_F}.*"), *dims, *audit)


def _processing(
    spark: SparkSession,
    facts: DataFrame,
    request: DimJoinRequest,
    pairs: Sequence[KeyPair],
    output: Output,
) -> DataFrame:
    """Every fact with the pinned snapshot's row of its key (an equi-join)."""
    from pyspark.sql import functions as F

    snapshot_id, committed_ms = pin_snapshot(spark, request.dimension, request.as_of)
    if snapshot_id is None:
        dim = spark.table(request.dimension.name).limit(0)
    else:
        dim = spark.read.option("snapshot-id", str(snapshot_id)).table(request.dimension.name)
    label = F.lit(None if snapshot_id is None else str(snapshot_id)).cast("string")
    since = (
        times.lit(times.from_millis(committed_ms))
        if committed_ms is not None
        else F.lit(None).cast("timestamp")
    )
    right = dim.select(
        *(col(p.dim).alias(f"{_K}{i}") for i, p in enumerate(pairs)),
        *(col(name).alias(alias) for name, alias in output.columns),
        *([label.alias(VERSION_COLUMN), since.alias(VALID_FROM_COLUMN)] if request.audit else []),
    )
    condition = None
    for i, p in enumerate(pairs):
        equal = facts[p.fact] == right[f"{_K}{i}"]
        condition = equal if condition is None else condition & equal
    joined = facts.join(right, condition, "inner" if request.join == "inner" else "left")
    return joined.drop(*(f"{_K}{i}" for i in range(len(pairs))))


def pin_snapshot(
    spark: SparkSession, table: TableRef, as_of: str | None
) -> tuple[int | None, int | None]:
    """(snapshot id, commit ms) that ``as_of`` names: a snapshot id, a tag or branch, or a time
    (session zone or with an offset); None: the current snapshot."""

    history = ChangelogTable(spark, table).history()
    bound = None
    if as_of:
        bound = parse_bound(as_of, "as-of", history.refs, times.session_zone(spark))
    snapshot_id = resolve_end(history, bound)
    if snapshot_id is None:
        if as_of:
            raise ProcedureArgumentError(
                f"as-of '{as_of}': {table.name} has no snapshot at or before it; choose a later "
                f"time (SELECT snapshot_id, committed_at FROM {table.name}.snapshots)."
            )
        return None, None
    return snapshot_id, history.snapshots[snapshot_id].timestamp_ms
