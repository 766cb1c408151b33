"""TOAST: values Debezium does not have (PostgreSQL's unchanged TOASTed columns arrive as a
placeholder) recognised in every encoding the connector uses, and replaced by the value the row
had just before the event.

Floor: actions (driver side of ingest_cdc). Builds the checks and the filling projection; the
rare batch that needs them is filled by its own jobs (see the pipeline's ``_apply``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sparkext.actions.cdc.ingest.columns import POSITION
from sparkext.identifiers import col, cols

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from sparkext.actions.cdc.ingest.state import Plan

Checks = Mapping[str, Callable[[str], "Column"]]  # column -> (row struct -> "is the placeholder")


def unavailable_checks(
    columns: Mapping[str, str], key: Sequence[str], placeholder: str
) -> dict[str, Callable[[str], Column]]:
    """Column -> (row struct name -> "the value is Debezium's placeholder") for each column that can
    carry it, in the encodings Debezium 3.x's PostgreSQL connector uses for an unchanged TOASTed
    value (checked against the real connector, tests/spark/test_cdc_real_postgres.py):

    * text, varchar, xml, json, jsonb: the placeholder string; hstore: ``{"P":"P"}`` (as JSON
      text, and as a map kept as JSON text);
    * bytea: the placeholder's bytes (``hex:`` placeholders as Debezium decodes them);
    * text[], varchar[], jsonb[], bytea[]: a one-element array of the placeholder (its bytes);
      uuid[]: a one-element array of the name-based UUID of its bytes;
    * int[], bigint[], date[]: the placeholder's character codes as the elements.

    Arrays of other element types (smallint, numeric, float, boolean, timestamps) arrive as NULL
    under REPLICA IDENTITY DEFAULT: no consumer can tell them from a real NULL (the reference
    page says to use REPLICA IDENTITY FULL, with which Debezium sends the old values itself)."""
    from pyspark.sql import functions as F

    if placeholder.startswith("hex:"):  # Debezium decodes it, and uses the bytes as text too
        raw = bytes.fromhex(placeholder[4:])
        placeholder = raw.decode("utf-8", "replace")
    else:
        raw = placeholder.encode("utf-8")
    as_map = "{" + f"{_json_text(placeholder)}:{_json_text(placeholder)}" + "}"
    name_uuid = str(uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3))

    def codes(spark_type: str) -> Column:
        return F.array(*(F.lit(c) for c in raw)).cast(spark_type)

    checks: dict[str, Callable[[str], Column]] = {}
    for name, spark_type in columns.items():
        if name in key:
            continue
        if spark_type == "string":
            checks[name] = _check(name, lambda value: value.isin(placeholder, as_map))
        elif spark_type == "binary":
            checks[name] = _check(name, lambda value: value == F.lit(bytearray(raw)))
        elif spark_type == "array<string>":
            checks[name] = _check(
                name, lambda value: (F.size(value) == 1) & value[0].isin(placeholder, name_uuid)
            )
        elif spark_type == "array<binary>":
            checks[name] = _check(name, lambda value: value == F.array(F.lit(bytearray(raw))))
        elif spark_type in ("array<int>", "array<bigint>"):
            checks[name] = _equal_to(name, codes(spark_type))
        elif spark_type == "array<date>":
            checks[name] = _equal_to(name, F.transform(codes("array<int>"), F.date_from_unix_date))
    return checks


def _check(name: str, test: Callable[[Column], Column]) -> Callable[[str], Column]:
    """``test`` of column ``name`` of a row struct (``after`` or ``before``)."""
    return lambda row: test(col(row, name))


def _equal_to(name: str, expected: Column) -> Callable[[str], Column]:
    """Column ``name`` of a row struct equals ``expected`` (bound here, not to a loop's
    variable)."""
    return _check(name, lambda value: value == expected)


def _json_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def fill_unavailable(
    spark: SparkSession, table: str, typed: DataFrame, plan: Plan, checks: Checks
) -> DataFrame:
    """Replace Debezium's placeholder for a value it does not have (PostgreSQL TOAST: an
    update that did not touch a large column) by the value the row had just before the
    event: the event's own before-image when it has the column (REPLICA IDENTITY FULL), else
    the newer of (the newest earlier event of the key in this batch that carried it, the
    table's row as of the planned snapshot — read by a join on executors, only for keys with
    placeholders). A key with neither keeps NULL."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = list(plan.key)
    order = Window.partitionBy(*cols(key)).orderBy("position", "ts_ms")
    earlier = order.rowsBetween(Window.unboundedPreceding, -1)
    carries = F.col("op").isin("c", "r", "u")
    any_missing = F.lit(False)
    helpers: list[Column] = []  # one projection: a withColumn per column re-analyses the plan
    for name, is_unavailable in checks.items():
        missing = F.coalesce(is_unavailable("after"), F.lit(False))
        any_missing = any_missing | missing
        # wrapped in a struct: a real NULL is a value, a missing one is not
        candidate = F.when(
            carries & ~missing, F.struct(col("after", name).alias("v"), F.col("position"))
        )
        before_has = F.coalesce(
            F.array_contains(F.json_object_keys("before_json"), name), F.lit(False)
        ) & ~F.coalesce(is_unavailable("before"), F.lit(False))
        helpers.append(F.last(candidate, ignorenulls=True).over(earlier).alias(f"__prev_{name}"))
        helpers.append(
            F.when(before_has, F.struct(col("before", name).alias("v"))).alias(f"__before_{name}")
        )
    filled = typed.select("*", *helpers, any_missing.alias("__toasted"))
    stored = _stored_values(spark, table, filled, plan, checks)
    if stored is not None:
        filled = filled.join(stored, key, "left")
    replaced = []
    for name in plan.columns:
        value = col("after", name)
        if name in checks:
            previous = col(f"__prev_{name}")
            fallback = F.when(col(f"__before_{name}").isNotNull(), col(f"__before_{name}", "v"))
            if stored is not None:
                newer = F.col("__stored_position").isNull() | (
                    col(f"__prev_{name}", "position") > F.col("__stored_position")
                )
                fallback = fallback.when(
                    previous.isNotNull() & newer, col(f"__prev_{name}", "v")
                ).otherwise(col(f"__stored_{name}"))
            else:
                fallback = fallback.otherwise(col(f"__prev_{name}", "v"))
            missing = F.coalesce(checks[name]("after"), F.lit(False))
            value = F.when(missing, fallback).otherwise(value)
        replaced.append(value.alias(name))
    return filled.select(  # the input's columns, in its order, ``after`` filled
        *[
            F.struct(*replaced).alias("after") if c == "after" else F.col(f"`{c}`")
            for c in typed.columns
        ]
    )


def _stored_values(
    spark: SparkSession, table: str, filled: DataFrame, plan: Plan, checks: Checks
) -> DataFrame | None:
    """The table's values of the TOASTable columns and the row's position, as of the planned
    snapshot, for the keys with placeholders (a column the batch adds reads NULL)."""
    from pyspark.sql import functions as F

    start = plan.commit.start_snapshot_id
    if start is None:
        return None
    key = list(plan.key)
    keys = filled.where("__toasted").select(*cols(key)).distinct()
    current = spark.read.option("snapshot-id", start).table(table)
    present = set(current.columns)
    return current.join(keys, key, "left_semi").select(
        *cols(key),
        F.col(POSITION).alias("__stored_position"),
        *(
            (col(name) if name in present else F.lit(None)).alias(f"__stored_{name}")
            for name in checks
        ),
    )
