"""``JOIN dim FOR SYSTEM_TIME AS OF x.t`` → a join against the right version of the dimension.

On a processing-time attribute (a ``PROCTIME()`` column) it is a lookup join: the dimension is
read as of the backfill's end (``lookup_as_of='end'``: the newest snapshot committed at or before
it, else the oldest one, with a note), or its current snapshot (``'latest'``), or a given time.

On the event-time attribute it is a temporal join: the dimension must be versioned (its rows carry
their own event time: a WATERMARK in the job or the property ``sparkext.event-time-column``);
each version is valid from its time until the next version of the same key (keys = the equality
conditions in ON), and the probe row joins the version valid at its event time. A dimension written
by ingest_cdc needs no declaration: its versions are its state as of the range's start
(snapshot_as_of_event_time) and every logged change after it, which the runner provides as a temp
view (``sparkext.actions.history.versions``).

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

from sqlglot import exp

from sparkext import times
from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import UNBOUNDED, RewriteContext, ViewSpec
from sparkext.streaming.job import StreamingSqlError, error_at, table_key
from sparkext.streaming.sqltools import (
    bind_tvf,
    conjuncts,
    select_template,
    template,
    window_tvf,
)

STATE = "state"  # lookup_as_of of a stream that keeps its dimensions in memory: latest, pinned
VERSIONS = """
SELECT *, lead(:ts) OVER (PARTITION BY :keys ORDER BY :ts) AS _sparkext_valid_to
FROM :dim
"""
VALID = "(:probe >= :alias_from AND (:probe < :alias_to OR :alias_to IS NULL))"
CDC_VERSIONS = "SELECT * FROM :view"  # the view has each version's end (_sparkext_valid_to)
CDC_VALID = """
((:alias_from IS NULL OR :probe >= :alias_from)
 AND (:probe < :alias_to OR :alias_to IS NULL) AND :alias_op <> 'd')
"""


def _probe_source(select: exp.Select, alias: str, analysis: Analysis) -> exp.Table | None:
    candidates = [select.args["from_"].this, *[j.this for j in select.args.get("joins") or []]]
    for candidate in candidates:
        if candidate.alias_or_name.lower() != alias.lower():
            continue
        if isinstance(candidate, exp.Table):
            call = window_tvf(candidate)
            if call is None:
                return candidate
            data = bind_tvf(call, analysis.is_table_argument)["DATA"]
            return data if isinstance(data, exp.Table) else None  # bind_tvf checked it
        if isinstance(candidate, exp.Subquery) and candidate in analysis.window_sources:
            return analysis.window_sources.get(candidate)  # a window TVF's output
    return None


def _computed_proctime(select: exp.Select | None, attribute: exp.Column) -> bool:
    """Whether ``alias.column`` is ``PROCTIME() AS column`` of a derived table joined before."""
    if select is None or not attribute.table:
        return False
    candidates = [select.args["from_"].this, *[j.this for j in select.args.get("joins") or []]]
    for candidate in candidates:
        if (
            isinstance(candidate, exp.Subquery)
            and candidate.alias_or_name.lower() == attribute.table.lower()
        ):
            inner = candidate.unnest()
            for projection in inner.expressions if isinstance(inner, exp.Select) else []:
                value = projection.unalias()
                if (
                    projection.alias_or_name.lower() == attribute.name.lower()
                    and isinstance(value, exp.Anonymous)
                    and value.name.upper() == "PROCTIME"
                ):
                    return True
    return False


def _lookup(dim: exp.Table, context: RewriteContext, analysis: Analysis) -> Analysis:
    """A lookup join: the dimension at one snapshot. In a stream whose dimensions are kept in
    memory (``lookup_as_of`` 'state'), a temp view the micro-batch fills from that state."""
    analysis = replace(analysis, dimensions=analysis.dimensions.add(dim))
    if context.lookup_as_of.lower() != STATE:
        version, note = _lookup_version(dim, context)
        dim.set("version", version)
        return analysis if note is None else analysis.note(note)
    number = len(analysis.views) + 1
    view = ViewSpec(
        f"_sparkext_lookup_{number}",
        context.job.spelled(table_key(dim)),
        None,
        context.end,
        kind="lookup",
    )
    subquery = exp.select("*").from_(exp.to_table(view.name)).subquery(dim.alias_or_name)
    dim.replace(subquery)
    return replace(analysis.view(view), dimensions=analysis.dimensions.add(subquery))


def _lookup_version(
    dim: exp.Table, context: RewriteContext
) -> tuple[exp.Version | None, str | None]:
    """The snapshot a lookup reads, and a note when it had to read one after the moment."""
    mode = context.lookup_as_of.lower()
    if mode == "latest":
        return None, None
    try:
        moment = (
            context.end
            if mode == "end"
            else times.wall_clock(datetime.fromisoformat(context.lookup_as_of), context.time_zone)
        )
    except ValueError:
        raise StreamingSqlError(
            f"lookup-as-of '{context.lookup_as_of}' is not 'end', 'latest' or a time such as "
            "'2026-11-20 00:00:00'."
        ) from None
    snapshots = sorted(context.catalog.snapshots(table_key(dim)))
    if not snapshots:
        return None, None
    eligible = [s for s in snapshots if s[0] <= moment]
    committed, snapshot_id = eligible[-1] if eligible else snapshots[0]
    note = None
    if not eligible:
        note = (
            f"{table_key(dim)} has no snapshot at or before {moment}; the lookup join reads its "
            f"oldest snapshot {snapshot_id} (committed {committed})."
        )
    version = exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(snapshot_id))
    return version, note


def _versions_join(
    versions: exp.Select,
    keys: list[exp.Expr],
    alias: str,
    valid_template: str,
    attribute: exp.Column,
    valid_from: str,
) -> tuple[exp.Subquery, exp.Expr]:
    """The versions as the joined subquery (``lead()`` partitioned by the join keys) and the
    condition that picks the version valid at the probe's time."""
    window = versions.find(exp.Window)
    if window is not None:
        window.set("partition_by", keys)
    subquery = versions.subquery(alias)
    valid = template(
        valid_template,
        probe=attribute.copy(),
        alias_from=exp.column(valid_from, table=alias),
        alias_to=exp.column("_sparkext_valid_to", table=alias),
        alias_op=exp.column("_cdc_op", table=alias),
    )
    return subquery, valid


def _own_versions(
    dim: exp.Table,
    event_time: str,
    attribute: exp.Column,
    keys: list[exp.Expr],
    analysis: Analysis,
) -> tuple[exp.Subquery, exp.Expr, Analysis]:
    """A versioned table: its rows are the versions, valid from their own event time."""
    plain = dim.copy()
    plain.set("version", None)
    plain.set("alias", None)
    versions = select_template(VERSIONS, ts=exp.column(event_time), dim=plain)
    alias = dim.alias_or_name
    subquery, valid = _versions_join(versions, keys, alias, VALID, attribute, event_time)
    # the table read for its versions is no stream, however it is declared (the subquery holds
    # a copy of it: sqlglot's builder copied the SELECT)
    read = [t for t in subquery.find_all(exp.Table) if isinstance(t.this, exp.Identifier)]
    return subquery, valid, replace(analysis, dimensions=analysis.dimensions.add(subquery, *read))


def _cdc_versions(
    dim: exp.Table,
    name: str,
    probe: exp.Table,
    attribute: exp.Column,
    keys: list[exp.Expr],
    context: RewriteContext,
    analysis: Analysis,
) -> tuple[exp.Subquery, exp.Expr, Analysis]:
    """An ingest_cdc table: its state at the range's start and its logged changes after it
    (a temp view the runner fills from snapshot_as_of_event_time and the event logs)."""
    lookback = analysis.lookback(probe)
    low = None
    if context.start is not None and lookback != UNBOUNDED:
        low = context.start - lookback
    number = len(analysis.views) + 1
    view = ViewSpec(f"_sparkext_versions_{number}", context.job.spelled(name), low, context.end)
    versions = select_template(CDC_VERSIONS, view=exp.to_table(view.name))
    alias = dim.alias_or_name
    subquery, valid = _versions_join(
        versions, keys, alias, CDC_VALID, attribute, "_sparkext_valid_from"
    )
    analysis = analysis.view(view)
    return subquery, valid, replace(analysis, dimensions=analysis.dimensions.add(subquery))


def temporal_join_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    for dim in list(expression.find_all(exp.Table)):
        version = dim.args.get("version")
        if version is None or not isinstance(version.expression, exp.Column):
            continue
        join = dim.parent
        # a join's parent is the SELECT it joins in
        select = cast("exp.Select", join.parent) if isinstance(join, exp.Join) else None
        attribute = version.expression
        probe = (
            _probe_source(select, attribute.table, analysis)
            if select is not None and attribute.table
            else None
        )
        if probe is None and _computed_proctime(select, attribute):
            analysis = _lookup(dim, context, analysis)  # PROCTIME() of a subquery: a lookup
            continue
        if probe is None:
            raise error_at(
                attribute,
                f"FOR SYSTEM_TIME AS OF {attribute.sql(dialect='spark')} "
                "must name a time column of a table joined before it, "
                "e.g. FOR SYSTEM_TIME AS OF o.order_time.",
            )
        assert isinstance(join, exp.Join)  # a probe was found in the SELECT it joins
        source = analysis.source(context, probe)
        analysis = replace(analysis, dimensions=analysis.dimensions.add(dim))
        if source.decl is not None and attribute.name in source.decl.proctime:
            analysis = _lookup(dim, context, analysis)
            continue
        if attribute.name.lower() != (source.event_time or "").lower():
            raise error_at(
                attribute,
                f"{attribute.name} is neither the event-time column of {source.name} "
                "nor a PROCTIME() column; a temporal join is on one of them.",
            )
        dim_source = analysis.source(context, dim)
        is_cdc = dim_source.decl is None and context.catalog.cdc(dim_source.name)
        if dim_source.event_time is None and not is_cdc:
            raise error_at(
                dim,
                f"an event-time temporal join needs versions of {dim_source.name}: "
                "declare it in the job with a WATERMARK (rows are versions valid from their "
                "event time), or set its property 'sparkext.event-time-column', or write it "
                "with ingest_cdc; or join on a PROCTIME() column for a lookup.",
            )
        alias = dim.alias_or_name
        keys: list[exp.Expr] = []
        for condition in conjuncts(join.args.get("on")):
            if isinstance(condition, exp.EQ):
                for side in (condition.this, condition.expression):
                    if isinstance(side, exp.Column) and side.table.lower() == alias.lower():
                        keys.append(exp.column(side.name))
        if not keys:
            raise error_at(
                join, f"the temporal join with {dim_source.name} needs key equalities in ON."
            )
        if is_cdc:
            subquery, valid, analysis = _cdc_versions(
                dim, dim_source.name, probe, attribute, keys, context, analysis
            )
        else:
            assert dim_source.event_time is not None  # checked above
            subquery, valid, analysis = _own_versions(
                dim, dim_source.event_time, attribute, keys, analysis
            )
        dim.replace(subquery)
        join.set("on", exp.and_(join.args.get("on"), valid))
    return Step(expression, analysis)
