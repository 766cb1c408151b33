"""Streaming job text → bounded batch Spark SQL over [start, end).

:func:`to_batch` is the public entry; :func:`plan_batch` returns the pieces the runners need
(statements, notes, the emission of each query, how far behind the watermark it completes).
Rules live in :mod:`sparkext.streaming.rules`, one per construct, applied in order like
sqlglot's optimizer; :func:`~sparkext.streaming.rules.run_rules` threads the
:class:`~sparkext.streaming.analysis.Analysis` (what they tell each other) from rule to rule,
and the query's emission, notes and views come out of its last value.

Floor: streaming.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlglot import exp

from sparkext import times
from sparkext.streaming.analysis import Rule
from sparkext.streaming.catalog import SparkCatalog
from sparkext.streaming.context import (
    Catalog,
    Emission,
    RewriteContext,
    StaticCatalog,
    ViewSpec,
)
from sparkext.streaming.job import (
    Job,
    StreamingSqlError,
    UpdatingQueryError,
    parse_job,
    position,
    table_name,
)
from sparkext.streaming.rules import RULES, run_rules
from sparkext.streaming.rules.insert_overwrite import insert_overwrite_rule

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def parse_time(value: datetime | str | None, name: str, time_zone: str = "UTC") -> datetime | None:
    """A wall clock in the session zone ``time_zone``: from a naive datetime (already one), an
    aware datetime, or 'YYYY-MM-DD HH:MM:SS' / 'YYYY-MM-DD' text (with an offset: converted).

    >>> parse_time("2026-11-21 00:00:00+00:00", "start", "Asia/Shanghai")
    datetime.datetime(2026, 11, 21, 8, 0)
    """
    if value is None:
        return None
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise StreamingSqlError(
            f"{name} '{value}' is not a time; write 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD'."
        ) from None
    return times.wall_clock(moment, time_zone)


@dataclass
class BatchQuery:
    """One query of the job as batch SQL over the range.

    An append query (``key`` empty) is one ``INSERT … REPLACE WHERE <range>``. An updating query
    into a primary-key sink (``key``: the sink's key) is the job's query over the whole history
    before the range's end, and ``previous`` the same before its start: the runner upserts the
    rows of every key that differs between the two.
    """

    statement: exp.Expr  # the batch statement (Spark dialect)
    sink: str | None
    emission: Emission | None
    completion_delay: timedelta
    notes: list[str] = field(default_factory=list)
    views: list[ViewSpec] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    previous: BatchQuery | None = None
    updating: bool = False  # evaluated over the whole history (a bare SELECT: its final rows)
    start: datetime | None = None  # the range (session-zone wall clocks), for an upsert
    end: datetime | None = None

    def sql(self, pretty: bool = True) -> str:
        return self.statement.sql(dialect="spark", pretty=pretty)


@dataclass
class BatchPlan:
    job: Job
    ddl: list[exp.Expr]
    queries: list[BatchQuery]

    def script(self) -> str:
        """The whole batch job as one SQL script (what ``--dry-run`` prints)."""
        parts = [
            f"-- function {name} = Python {target} (registered with spark.udf)"
            for name, target in self.job.functions.items()
        ]
        parts += [d.sql(dialect="spark", pretty=True) + ";" for d in self.ddl]
        for query in self.queries:
            parts += [f"-- note: {n}" for n in query.notes]
            for step in (query, query.previous) if query.previous else (query,):
                parts += [
                    f"-- view {v.name}: versions of {v.table} (ingest_cdc) valid in "
                    f"[{v.low or 'its first change'}, {v.high}): its state at the start "
                    "(snapshot_as_of_event_time) and every logged change after it"
                    for v in step.views
                ]
                parts.append(step.sql() + ";")
        return "\n\n".join(parts) + "\n"


def table_ddl(job: Job) -> list[exp.Expr]:
    """``CREATE TABLE IF NOT EXISTS … USING iceberg`` for each declared table.

    Each table gets its declared physical columns (and PARTITIONED BY, if any); primary-key
    columns are NOT NULL (the runner then makes them the table's identifier fields).
    """
    statements: list[exp.Expr] = []
    for decl in job.tables.values():
        key = {k.lower() for k in decl.primary_key}
        columns = [c.copy() for c in decl.physical]
        for column in columns:  # a primary key is NOT NULL (Flink's rule; Iceberg's too)
            if column.name.lower() in key and not any(
                isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
                for c in column.constraints
            ):
                column.append(
                    "constraints", exp.ColumnConstraint(kind=exp.NotNullColumnConstraint())
                )
        schema = exp.Schema(this=decl.statement.this.this.copy(), expressions=columns)
        properties: list[exp.Expr] = [exp.FileFormatProperty(this=exp.var("iceberg"))]
        if decl.partitioned_by:
            properties.append(
                exp.PartitionedByProperty(
                    this=exp.Schema(expressions=[p.copy() for p in decl.partitioned_by])
                )
            )
        statements.append(
            exp.Create(
                this=schema,
                kind="TABLE",
                exists=True,
                properties=exp.Properties(expressions=properties),
            )
        )
    return statements


def sink_of(query: exp.Expr) -> str | None:
    """The name of the table an ``INSERT`` writes, as written (None for a bare SELECT)."""
    if not isinstance(query, exp.Insert):
        return None
    target = query.this
    return table_name(target.this if isinstance(target, exp.Schema) else target)


def sink_key(sink: str, job: Job, catalog: Catalog) -> list[str]:
    """The sink's primary key: the job's ``PRIMARY KEY (…) NOT ENFORCED``, else the table's
    identifier fields."""
    decl = job.tables.get(sink.lower())
    if decl is not None and decl.primary_key:
        return list(decl.primary_key)
    return catalog.identifier_fields(sink) if catalog.properties(sink) is not None else []


def rewrite_query(
    query: exp.Expr,
    job: Job,
    catalog: Catalog,
    start: datetime | None,
    end: datetime,
    lookup_as_of: str = "end",
    rules: Sequence[Rule] = RULES,
) -> BatchQuery:
    """The batch form of one query over [start, end).

    A query that produces updates (:class:`UpdatingQueryError` from a rule) is refused unless
    its sink has a primary key; then it is evaluated over the whole history before ``end``
    (and, as ``previous``, before ``start``) with the rules in upsert mode.
    """
    try:
        return _rewrite(query, job, catalog, start, end, lookup_as_of, rules)
    except UpdatingQueryError as error:
        sink = sink_of(query)
        key = sink_key(sink, job, catalog) if sink is not None else []
        if sink is not None and not key:
            raise
        what = error.what
    rules = tuple(r for r in rules if r is not insert_overwrite_rule)
    current = _rewrite(query, job, catalog, None, end, lookup_as_of, rules, upsert=True)
    current.key, current.updating, current.start, current.end = key, True, start, end
    if sink is None:
        current.notes.append(
            f"{what} produces updates: the result is its final rows over the whole history "
            f"before {end}."
        )
        return current
    columns = catalog.columns(sink)
    missing = [k for k in key if columns and k.lower() not in {c.lower() for c in columns}]
    if missing:
        raise StreamingSqlError(
            f"the primary key of {sink} names {', '.join(missing)}, which is not a column of "
            f"it; declare PRIMARY KEY over its columns ({', '.join(columns)})."
        )
    bad = _partitions_off_key(sink, key, job, catalog)
    if bad:
        raise StreamingSqlError(
            f"{sink} is partitioned by {', '.join(bad)}, which is not derived from its primary "
            f"key ({', '.join(key)}); an upsert sink needs partition fields on key columns "
            "(identity, bucket or truncate) so a key's deletes land in its rows' partition: "
            "partition it by the key, or not at all."
        )
    if start is not None:  # lookups read the dimension as of the same moment as the end's
        same_lookup = str(end) if lookup_as_of == "end" else lookup_as_of
        current.previous = _rewrite(query, job, catalog, None, start, same_lookup, rules, True)
    current.notes.append(
        f"{what} produces updates and {sink} has PRIMARY KEY ({', '.join(key)}): the "
        "statements below are the query over the whole history before the range's end"
        + (" and before its start" if start is not None else "")
        + "; every key whose row differs between them is upserted (equality deletes and new "
        "rows in one commit), a key that disappeared is deleted."
    )
    return current


def _partitions_off_key(sink: str, key: list[str], job: Job, catalog: Catalog) -> list[str]:
    """The sink's partition fields an upsert cannot keep consistent (not identity, bucket or
    truncate of a key column), as 'transform(column)'."""
    keys = {k.lower() for k in key}
    if catalog.properties(sink) is not None:
        fields = catalog.partitioning(sink)
    else:
        decl = job.tables.get(sink.lower())
        fields = []
        for p in decl.partitioned_by if decl is not None else []:
            if isinstance(p, exp.Column | exp.Identifier):
                fields.append(("identity", p.name))
                continue
            columns: list[exp.Expr] = list(p.find_all(exp.Column)) or list(
                p.find_all(exp.Identifier)
            )
            kind = next((k for k in ("bucket", "truncate") if k in p.key), None)
            name = kind or (p.name if isinstance(p, exp.Anonymous) else p.key)
            fields.append((name.lower(), columns[-1].name if columns else "?"))
    return [
        f"{transform}({column})"
        for transform, column in fields
        if column.lower() not in keys
        or transform.split("[")[0].lower() not in ("identity", "bucket", "truncate")
    ]


def _rewrite(
    query: exp.Expr,
    job: Job,
    catalog: Catalog,
    start: datetime | None,
    end: datetime,
    lookup_as_of: str,
    rules: Sequence[Rule],
    upsert: bool = False,
) -> BatchQuery:
    context = RewriteContext(job, catalog, start, end, lookup_as_of, upsert=upsert)
    expression, analysis = run_rules(query.copy(), context, rules)
    leftover = next(
        (
            n
            for n in expression.walk()
            if isinstance(n, exp.Anonymous)
            and n.name.upper() in ("TUMBLE", "HOP", "CUMULATE", "SESSION", "DESCRIPTOR", "PROCTIME")
        ),
        None,
    )
    if leftover is not None:
        line, col = position(leftover)
        raise StreamingSqlError(
            f"line {line}, column {col}: {leftover.name.upper()}(…) in this place "
            "cannot be rewritten to batch SQL; "
            "window functions belong in FROM TABLE(…) or GROUP BY.",
            line,
            col,
        )
    sink = sink_of(expression)
    return BatchQuery(
        expression,
        sink,
        analysis.emission,
        analysis.completion_delay,
        list(analysis.notes),
        list(analysis.views),
    )


def plan_batch(
    sql: str | Job,
    start: datetime | str | None,
    end: datetime | str,
    catalog: Catalog | None = None,
    lookup_as_of: str = "end",
) -> BatchPlan:
    # here, not at the top: the changelog runner rewrites its batches with this module
    from sparkext.streaming.changelog_source import refuse_in_batch

    job = sql if isinstance(sql, Job) else parse_job(sql)
    refuse_in_batch(job)
    time_zone = getattr(catalog, "time_zone", "UTC")
    begin, finish = parse_time(start, "start", time_zone), parse_time(end, "end", time_zone)
    if finish is None:
        raise StreamingSqlError("a backfill needs an end time.")
    if begin is not None and begin >= finish:
        raise StreamingSqlError(f"start {begin} is not before end {finish}; swap --from and --to.")
    catalog = catalog or StaticCatalog()
    queries = [rewrite_query(q, job, catalog, begin, finish, lookup_as_of) for q in job.queries]
    return BatchPlan(job, table_ddl(job), queries)


def to_batch(
    sql: str,
    start: datetime | str | None,
    end: datetime | str,
    catalog: Catalog | None = None,
    lookup_as_of: str = "end",
    spark: SparkSession | None = None,
) -> str:
    """The bounded batch SQL of a streaming job over [start, end) (session time zone).

    ``catalog`` describes the tables the job reads without declaring them; with ``spark`` the
    session's catalog is asked. ``lookup_as_of``: proctime lookup joins read the dimension as of
    'end' (default), 'latest', or a given 'YYYY-MM-DD HH:MM:SS'.
    """
    job = parse_job(sql)
    if catalog is None and spark is not None:
        catalog = SparkCatalog(spark, job.names)
    return plan_batch(job, start, end, catalog, lookup_as_of).script()
