"""``INSERT INTO sink …`` → ``INSERT INTO sink REPLACE WHERE <the range> …``: one atomic commit.

The range is said on the sink column that receives the emission column (``window_end`` — or
``window_start`` for TUMBLE/HOP — or the event time of row results), so running the same
backfill twice replaces exactly what the first run wrote. Iceberg replaces whole files only: when
the range does not cover whole partitions of the sink (a ``days``/``hours``/``months``/``years``
or identity partition on that column), the statement replaces the covering partitions and writes
back the rows of those partitions outside the range, in the same commit.

Floor: streaming rules (pure; no pyspark).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlglot import exp

from sparkext import times
from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import Emission, RewriteContext
from sparkext.streaming.job import error_at, table_key
from sparkext.streaming.sqltools import window_time

_MICRO = timedelta(microseconds=1)


def _utc(moment: datetime, zone: str) -> datetime:
    """A session-local naive time as naive UTC (Iceberg's hour/day/… transforms and Spark's
    window() grid are in UTC)."""
    return times.wall_clock(times.instant(moment, zone), times.UTC)


def _local(moment: datetime, zone: str) -> datetime:
    return times.wall_clock(moment.replace(tzinfo=times.UTC), zone)


def _floor(moment: datetime, unit: str, zone: str = "UTC") -> datetime:
    moment = _utc(moment, zone)
    if unit == "hour":
        moment = moment.replace(minute=0, second=0, microsecond=0)
    elif unit == "day":
        moment = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    elif unit == "month":
        moment = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        moment = moment.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    return _local(moment, zone)


def _next(moment: datetime, unit: str, zone: str = "UTC") -> datetime:
    moment = _utc(moment, zone)
    if unit == "hour":
        moment = moment + timedelta(hours=1)
    elif unit == "day":
        moment = moment + timedelta(days=1)
    elif unit == "month":
        moment = moment.replace(year=moment.year + moment.month // 12, month=moment.month % 12 + 1)
    else:
        moment = moment.replace(year=moment.year + 1)
    return _local(moment, zone)


def _range(
    emission: Emission, role: str, column: exp.Column, context: RewriteContext
) -> tuple[exp.Expr, datetime | None, datetime, timedelta]:
    """The predicate on the sink column, and its inclusive [low, high] with the value spacing."""
    start, end = context.start, context.end

    def literal(moment: datetime) -> exp.Expr:
        return context.literal(moment)

    predicate: exp.Expr
    if emission.kind == "rows":  # [start, end)
        predicate = exp.LT(this=column.copy(), expression=literal(end))
        if start is not None:
            predicate = exp.and_(exp.GTE(this=column.copy(), expression=literal(start)), predicate)
        return predicate, start, end - _MICRO, _MICRO
    if role == "window_end":  # (start, end]
        predicate = exp.LTE(this=column.copy(), expression=literal(end))
        if start is not None:
            predicate = exp.and_(exp.GT(this=column.copy(), expression=literal(start)), predicate)
        return predicate, (start + _MICRO if start else None), end, _MICRO
    # window_start of TUMBLE/HOP: window_end = window_start + size ∈ (start, end]
    epoch = datetime(1970, 1, 1) + emission.offset
    assert emission.slide is not None and emission.size is not None  # a TUMBLE/HOP grid
    slide, size = emission.slide, emission.size
    zone = context.time_zone

    def grid_floor(moment: datetime) -> datetime:
        utc = _utc(moment, zone)
        return _local(utc - ((utc - epoch) % slide), zone)

    high = grid_floor(end - size)
    low = grid_floor(start - size) + slide if start else None
    predicate = exp.LT(this=column.copy(), expression=literal(high + slide))
    if low is not None:
        predicate = exp.and_(exp.GTE(this=column.copy(), expression=literal(low)), predicate)
    return predicate, low, high, slide


def _partition_unit(name: str, column: str, context: RewriteContext) -> str | None:
    decl = context.job.tables.get(name)
    partitioning = (
        context.catalog.partitioning(name) if context.catalog.properties(name) is not None else []
    )
    if not partitioning and decl is not None:
        partitioning = [
            (p.name.lower().rstrip("s"), p.expressions[0].name)
            if isinstance(p, exp.Anonymous | exp.Func)
            else ("identity", p.name)
            for p in decl.partitioned_by
        ]
    return next(
        (t for t, c in partitioning if c.lower() == column.lower() and t in _UNITS),
        None,
    )


_UNITS = ("identity", "hour", "day", "month", "year")


def _qualifier(projection: exp.Expr) -> str:
    inner = projection.this if isinstance(projection, exp.Alias) else projection
    return inner.table if isinstance(inner, exp.Column) else ""


def _owners(query: exp.Expr, alias: str) -> set[str]:
    """The names under which the emitting table's columns reach ``query``: its alias, and the
    alias of a derived table of ``query`` that reads it."""
    owners = {alias.lower()}
    if isinstance(query, exp.Select) and query.args.get("from_"):
        relations = [query.args["from_"].this, *[j.this for j in query.args.get("joins") or []]]
        for relation in relations:
            if isinstance(relation, exp.Subquery) and any(
                isinstance(n, exp.Table | exp.Subquery) and n.alias_or_name.lower() == alias.lower()
                for n in relation.this.walk()
            ):
                owners.add(relation.alias_or_name.lower())
    return owners


def _renamed_window_times(
    query: exp.Select, outputs: list[tuple[str, str]], emission: Emission, analysis: Analysis
) -> list[tuple[str, int]]:
    """(role, output index) of outputs that are a window's end or start under another name
    (``SESSION_END(…) AS endtime``, ``P.starttime`` of a derived table)."""
    found = []
    for index, (output, _) in enumerate(outputs):
        located = window_time(query, output.lower(), analysis.window) if output else None
        if located is None:
            continue
        distance = located[1]
        if distance == timedelta(0):
            found.append(("window_end", index))
        elif (
            emission.window in ("TUMBLE", "HOP")
            and emission.size is not None
            and distance == -emission.size
        ):
            found.append(("window_start", index))
    found.sort(key=lambda pair: pair[0] != "window_end")
    return found


def _missing_time(name: str, wanted: list[str], emission: Emission) -> str:
    if emission.kind == "window":
        return (
            f"INSERT INTO {name} writes no window end or start of the query's {emission.window} "
            f"windows (under any name), and a backfill replaces exactly the windows that end in "
            f"its range by that column; select {' or '.join(wanted)} into a sink column."
        )
    who = f"{emission.alias}.{emission.column}" if emission.alias else emission.column
    return (
        f"INSERT INTO {name} writes no {who}, the event time that decides which range a row "
        "belongs to (a joined row belongs to the first stream of FROM), so a backfill could not "
        f"replace exactly its range; select {who} into a sink column."
    )


def insert_overwrite_rule(
    expression: exp.Expr, context: RewriteContext, analysis: Analysis
) -> Step:
    if not isinstance(expression, exp.Insert):
        return Step(expression, analysis)
    target = expression.this
    sink = target.this if isinstance(target, exp.Schema) else target
    name = table_key(sink)
    emission = analysis.emission
    if emission is None:
        raise error_at(sink, f"INSERT INTO {name} reads no stream, so no time range bounds it.")
    decl = context.job.tables.get(name)
    columns = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
    columns = (
        columns
        or context.catalog.columns(name)
        or ([c.name for c in decl.physical] if decl else [])
    )
    selects = expression.expression.selects
    # (output name, table qualifier): a row result's time must come from its emitting table
    outputs = [
        (p.alias_or_name if not isinstance(p, exp.Func) else "", _qualifier(p)) for p in selects
    ]
    if any(p.is_star for p in selects):  # SELECT *: the sink's own names stand in
        outputs = [(c, "") for c in columns]
    wanted = [emission.column] + (["window_start"] if emission.window in ("TUMBLE", "HOP") else [])
    query = expression.expression
    owners = _owners(query, emission.alias) if emission.alias else set()
    # the column each output is (``B.dateTime AS bid_time`` is dateTime under another name)
    sources = [
        p.unalias().name.lower() if isinstance(p.unalias(), exp.Column) else "" for p in selects
    ]
    if any(p.is_star for p in selects):
        sources = [c.lower() for c in columns]
    found = [
        (w, i)
        for w in wanted
        for i, (output, qualifier) in enumerate(outputs)
        if w.lower() in (output.lower(), sources[i] if i < len(sources) else "")
        and (not qualifier or not emission.alias or qualifier.lower() in owners)
    ]
    if not found and emission.kind == "window" and isinstance(query, exp.Select):
        found = _renamed_window_times(query, outputs, emission, analysis)
    if not found:
        raise error_at(sink, _missing_time(name, wanted, emission))
    names = [(role, columns[i] if i < len(columns) else outputs[i][0]) for role, i in found]
    role, column_name = next(
        ((r, c) for r, c in names if _partition_unit(name, c, context)), names[0]
    )
    column = exp.column(column_name)
    unit = _partition_unit(name, column_name, context)
    predicate, low, high, step = _range(emission, role.lower(), column, context)
    superset: exp.Expr | None = None
    if unit is None:
        superset = exp.true()
    elif unit != "identity" and low is not None:
        zone = context.time_zone
        first, last = _floor(low, unit, zone), _next(_floor(high, unit, zone), unit, zone)
        if first != low or last != high + step:
            superset = exp.and_(
                exp.GTE(this=column.copy(), expression=context.literal(first)),
                exp.LT(this=column.copy(), expression=context.literal(last)),
            )
    elif unit != "identity":
        zone = context.time_zone
        last = _next(_floor(high, unit, zone), unit, zone)
        if last != high + step:
            superset = exp.LT(this=column.copy(), expression=context.literal(last))
    if superset is None:
        expression.set("where", predicate)
        return Step(expression, analysis)
    keep_source = sink.copy()
    keep_source.set("alias", None)
    outside = exp.not_(exp.func("coalesce", exp.paren(predicate), exp.false()))
    keep = (
        exp.select(*[exp.column(c) for c in columns])  # in the INSERT's column order
        .from_(keep_source)
        .where(superset.copy())
        .where(outside)
    )
    expression.set("expression", exp.union(expression.expression, keep, distinct=False))
    expression.set("where", superset)
    analysis = analysis.note(
        f"the range does not cover whole partitions of {name}; the rows of those partitions "
        "outside the range are written back in the same commit."
    )
    return Step(expression, analysis)
