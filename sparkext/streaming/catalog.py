"""The rewrite's view of a live Spark catalog (what :class:`~.context.Catalog` asks).

Floor: streaming.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

from sparkext import times
from sparkext.actions.history.versions import is_cdc_table
from sparkext.errors import SparkextError
from sparkext.iceberg.catalog import (
    identifier_columns,
    partition_transforms,
    resolve_table,
    snapshot_commit_times,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.iceberg.catalog import TableRef


class SparkCatalog:
    """Tables as the session's catalog has them now; a missing table is ``None``."""

    def __init__(self, spark: SparkSession, names: Mapping[str, str] | None = None):
        self.spark = spark
        time_zone = spark.conf.get(times.SESSION_ZONE_KEY)
        assert time_zone is not None  # Spark always has a session time zone
        self.time_zone = time_zone
        self.names = dict(names or {})  # table key → name as the job writes it

    def name(self, table: str) -> str:
        """The name to ask Spark for (a Hadoop catalog's names are case-sensitive)."""
        return self.names.get(table.lower(), table)

    @cache  # noqa: B019 - one catalog object per rewrite
    def _table(self, table: str) -> TableRef | None:
        try:
            return resolve_table(self.spark, self.name(table))
        except SparkextError:
            return None

    def properties(self, table: str) -> dict[str, str] | None:
        ref = self._table(table)
        return None if ref is None else dict(ref.properties)

    def columns(self, table: str) -> list[str]:
        return self.spark.table(self.name(table)).columns if self._table(table) is not None else []

    def partitioning(self, table: str) -> list[tuple[str, str]]:
        if self._table(table) is None:
            return []
        return partition_transforms(self.spark, self.name(table))

    def snapshots(self, table: str) -> list[tuple[datetime, int]]:
        if self._table(table) is None:
            return []
        zone = times.session_zone(self.spark)
        return [  # commit times as session-zone wall clocks, like the range they are compared to
            (times.wall_clock(times.from_millis(ms), zone), snapshot_id)
            for ms, snapshot_id in snapshot_commit_times(self.spark, self.name(table))
        ]

    @cache  # noqa: B019 - one catalog object per rewrite
    def cdc(self, table: str) -> bool:

        return self._table(table) is not None and is_cdc_table(self.spark, self.name(table))

    def identifier_fields(self, table: str) -> list[str]:
        if self._table(table) is None:
            return []
        return identifier_columns(self.spark, self.name(table))
