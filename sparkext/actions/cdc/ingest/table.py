"""The target table: loaded (and refused when its partitioning cannot take equality deletes),
created from the first events, or given identifier fields from ``primary_key``.

Floor: actions (driver side of ingest_cdc). Catalog calls and one sentence per user error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparkext import identifiers
from sparkext.actions.cdc.ingest.columns import SYSTEM_COLUMNS, TABLE_PROPERTIES
from sparkext.errors import IngestError
from sparkext.executors.cdc.partitioning import unsupported
from sparkext.iceberg.cdc_table import CdcTable, create_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkext.actions.cdc.ingest.state import Context
    from sparkext.iceberg.cdc_table import CdcTable


def load_table(context: Context) -> CdcTable | None:
    """The table, refreshed; ``None`` when it does not exist and may be created."""

    spark, settings = context.spark, context.settings
    if not spark.catalog.tableExists(settings.table):
        if not settings.create:
            raise IngestError(
                f"Table '{settings.table}' does not exist; pass create => true to "
                "create it from the first events."
            )
        return None
    table = CdcTable(spark, settings.table)
    table.refresh()  # the catalog may cache a table another process has moved on
    bad = unsupported(table.partition_fields(), table.key())
    if bad:
        raise IngestError(
            f"Table '{settings.table}' is partitioned by {', '.join(bad)}, which is not "
            "derived from its primary key; ingest_cdc needs partition fields on key columns "
            "(identity, bucket[N] or truncate[W] of int, bigint, string or binary) so a "
            "key's equality deletes land in its rows' partition."
        )
    return table


def create(context: Context, valid: DataFrame, batch_types: Mapping[str, str]) -> CdcTable:
    """The table, created with the first batch's columns and the key ``primary_key`` names
    (else the events' Kafka key)."""
    from pyspark.sql import functions as F

    settings = context.settings
    key = list(settings.primary_key)
    if not key:
        first = valid.where(F.col("key_json").isNotNull()).select("key_json").limit(1).collect()
        key = list(json.loads(first[0].key_json)) if first else []
    if not key:
        raise IngestError(
            "ingest_cdc needs the primary key to create the table: pass "
            "primary_key => 'id' (comma-separated for several columns), or land records "
            "with their Kafka key."
        )
    unknown = [k for k in key if k not in batch_types]
    if unknown:
        raise IngestError(
            f"Primary key column(s) {', '.join(unknown)} are not in the events' rows; "
            f"columns seen: {', '.join(batch_types)}."
        )
    off_key = [c for _, c, _ in settings.partition_by if c not in key]
    if off_key:
        raise IngestError(
            f"partition-by uses {', '.join(off_key)}, which is not a primary-key column; "
            "partition a CDC table by key columns only, e.g. 'bucket(16, id)'."
        )
    columns = [*batch_types.items(), *SYSTEM_COLUMNS]
    properties = dict(TABLE_PROPERTIES)
    if settings.source_table:
        properties["sparkext.cdc.source-table"] = settings.source_table
    context.progress(f"creating {settings.table}")
    return create_table(
        context.spark, settings.table, columns, key, properties, settings.partition_by
    )


def adopt_key(context: Context, table: CdcTable) -> list[str]:
    """An existing table without identifier fields: ``primary_key`` becomes them (one
    schema commit, once no row has a NULL key), or one sentence says what to do."""

    name, wanted = context.settings.table, list(context.settings.primary_key)
    if not wanted:
        raise IngestError(
            f"Table '{name}' has no identifier fields (primary key); pass primary_key => "
            "'id' (comma-separated for several columns) and ingest_cdc makes them its key."
        )
    columns = {c.name: c for c in table.columns()}
    unknown = [k for k in wanted if k not in columns]
    if unknown:
        raise IngestError(
            f"primary_key => '{', '.join(wanted)}' names column(s) {', '.join(unknown)} "
            f"that table '{name}' does not have; its columns are: {', '.join(columns)}."
        )
    optional = [k for k in wanted if not columns[k].required]
    if optional:
        where = " OR ".join(f"{identifiers.quote(k)} IS NULL" for k in optional)
        counted = context.spark.sql(f"SELECT count(*) FROM {name} WHERE {where}").first()
        nulls = counted[0] if counted is not None else 0  # a count always has its one row
        if nulls:
            raise IngestError(
                f"Table '{name}' has {nulls} row(s) with a NULL in {', '.join(optional)}, "
                "and Iceberg's identifier fields cannot be NULL: delete or fix them (DELETE "
                f"FROM {name} WHERE {where}), then run ingest_cdc again."
            )
    table.make_key(wanted)
    context.progress(f"{name}: identifier fields set to ({', '.join(wanted)})")
    return wanted
