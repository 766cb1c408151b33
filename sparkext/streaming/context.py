"""What the stream→batch rules are given: the job, the range and the catalog.

Floor: streaming rules (pure; no pyspark).

:class:`RewriteContext` is frozen: what the rules find and tell each other (lookbacks,
dimensions, the emission, notes, views) is :class:`sparkext.streaming.analysis.Analysis`, a
value each rule returns. The catalog is a protocol so fixtures describe tables with a dict
(:class:`StaticCatalog`) and a run asks Spark (:class:`sparkext.streaming.catalog.SparkCatalog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlglot import exp

from sparkext import times
from sparkext.streaming.job import (
    EVENT_TIME_PROPERTY,
    WATERMARK_DELAY_PROPERTY,
    Job,
    TableDecl,
    error_at,
    parse_duration,
    table_key,
)

UNBOUNDED = timedelta.max  # a lookback that reads the whole history


class Catalog(Protocol):
    def properties(self, table: str) -> dict[str, str] | None:
        """Table properties, or None when the table does not exist."""

    def columns(self, table: str) -> list[str]:
        """Column names in order."""

    def partitioning(self, table: str) -> list[tuple[str, str]]:
        """Partition fields as (transform, source column): ('day', 'ts'), ('identity', 'dt')."""

    def snapshots(self, table: str) -> list[tuple[datetime, int]]:
        """(commit time in the session time zone, snapshot id) of every snapshot."""

    def cdc(self, table: str) -> bool:
        """Whether ingest_cdc writes the table (its changes carry event times)."""

    def identifier_fields(self, table: str) -> list[str]:
        """The table's primary key (Iceberg identifier fields); [] without one."""


@dataclass
class StaticCatalog:
    """A catalog described by data: {name: {"properties": …, "columns": …, "partitioning": …}}."""

    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    time_zone: str = "UTC"

    def properties(self, table: str) -> dict[str, str] | None:
        found = self.tables.get(table.lower())
        return None if found is None else dict(found.get("properties", {}))

    def columns(self, table: str) -> list[str]:
        return list(self.tables.get(table.lower(), {}).get("columns", []))

    def partitioning(self, table: str) -> list[tuple[str, str]]:
        return [tuple(p) for p in self.tables.get(table.lower(), {}).get("partitioning", [])]

    def snapshots(self, table: str) -> list[tuple[datetime, int]]:
        found = self.tables.get(table.lower(), {}).get("snapshots", [])
        return [(datetime.fromisoformat(when), snapshot_id) for when, snapshot_id in found]

    def cdc(self, table: str) -> bool:
        return bool(self.tables.get(table.lower(), {}).get("cdc", False))

    def identifier_fields(self, table: str) -> list[str]:
        return list(self.tables.get(table.lower(), {}).get("key", []))


@dataclass(frozen=True)
class Source:
    """A table the job reads, as the rules see it."""

    name: str
    event_time: str | None
    delay: timedelta
    streaming: bool
    decl: TableDecl | None


@dataclass(frozen=True)
class Emission:
    """Which rows of a query belong to a range, and the output column that tells.

    ``window``: windows whose end lies in (start, end] (``column`` is window_end; ``size``,
    ``slide``, ``offset`` describe the grid so a window_start column can stand in).
    ``rows``: rows whose event time lies in [start, end) (``column`` is that event time).
    """

    kind: str
    column: str
    window: str = ""
    size: timedelta | None = None
    slide: timedelta | None = None
    offset: timedelta = timedelta(0)
    alias: str = ""  # rows: the table (alias) whose event time decides


@dataclass(frozen=True)
class WindowRelation:
    """What a window rule finds about the SELECT that keeps a range's windows (``Analysis.windows``)
    so a join rule can relate another stream's time to the window's end and widen the range.

    ``columns``: output column → its distance from the window's end (window_end 0, window_time
    −1 ms, window_start −size where that is fixed); ``end_column``: the column the SELECT's
    WHERE keeps in (start, end]; ``lookback``: what the window's source reads before a kept
    window's end.
    """

    kind: str
    columns: dict[str, timedelta]
    end_column: str
    lookback: timedelta


@dataclass(frozen=True)
class ViewSpec:
    """A temp view the runner must register before the statement runs: the versions of an
    ingest_cdc table valid in [low, high) (low None: from its first change), or (``kind``
    'lookup') a stream's dimension as of the snapshot its micro-batch pins."""

    name: str
    table: str
    low: datetime | None
    high: datetime
    kind: str = "versions"


@dataclass(frozen=True)
class RewriteContext:
    """The job, the range and the catalog of one rewrite; the same for every rule."""

    job: Job
    catalog: Catalog
    start: datetime | None  # None: from the beginning of every source
    end: datetime
    lookup_as_of: str = "end"  # proctime lookups: 'end', 'latest' or a timestamp text
    upsert: bool = False  # the query's whole history is evaluated for a primary-key sink

    def source(
        self,
        table: exp.Table,
        descriptor: str | None = None,
        *,
        dimension: bool = False,
        table_argument: bool = False,
    ) -> Source:
        """``table`` as the rules see it. ``descriptor``: a window TVF's DESCRIPTOR column;
        ``dimension``/``table_argument``: what the rules found about this reference
        (:meth:`sparkext.streaming.analysis.Analysis.source` passes them)."""
        name = table_key(table)
        decl = self.job.tables.get(name)
        properties = self.catalog.properties(name) or {}
        column: str | None
        if decl is not None and decl.watermark is not None:
            column, delay = decl.watermark
        else:
            column = properties.get(EVENT_TIME_PROPERTY)
            delay = parse_duration(properties.get(WATERMARK_DELAY_PROPERTY, "0 s"))
        if (
            descriptor is not None
            and decl is not None
            and descriptor.lower() in {p.lower() for p in decl.proctime}
        ):
            raise error_at(
                table,
                f"DESCRIPTOR({descriptor}) is the processing-time column of {name}: a "
                "processing-time window groups rows by when a machine happens to see them, which "
                "a backfill cannot reproduce and sparkext does not run; window on the event-time "
                f"column{' ' + column if column else ''} instead (Flink's results on event time "
                "do not depend on arrival).",
            )
        if descriptor is not None:
            if column is not None and column.lower() != descriptor.lower():
                raise error_at(
                    table,
                    f"DESCRIPTOR({descriptor}) differs from the event-time column {column} "
                    f"that {name} declares; use DESCRIPTOR({column}).",
                )
            column = descriptor
        streaming = not dimension and (
            table.meta.get("options", {}).get("streaming", "").lower() == "true"
            or table.meta.get("table_argument", False)
            or table_argument
            or (decl is not None and decl.watermark is not None)
        )
        return Source(name, column, delay, streaming, decl)

    @property
    def time_zone(self) -> str:
        """The session time zone the range's times are in."""
        return getattr(self.catalog, "time_zone", "UTC")

    def literal(self, moment: datetime) -> exp.Expr:
        """A Spark TIMESTAMP literal (naive datetimes are in the session time zone)."""
        text = times.wall_clock_text(moment, self.time_zone)
        return exp.cast(exp.Literal.string(text), exp.DataType.build("timestamp"))
