"""The health report: what ``table_health`` says of each table and partition now, with the fix
for the worst ones and the trends the run log kept, as rows (``CALL sparkext.health_report``)
and as one self-contained HTML page (``sparkext-sql report --out report.html``).

Library: plotly (interactive plots: hover, zoom, legend toggles), its JavaScript embedded once
in the page, so the page opens offline. Every number in the page is also in the rows.

**The fix for a partition** (:func:`fix_for`), first that applies: equality deletes →
``tiered_optimize`` L0 converts them; position deletes over 10% of its rows → L0 rewrites the
files they touch; small files (two or more that would pack into fewer) → L0 merges them; a
clustered table whose partition is mostly unclustered (optimised share < 50%) → L1 clusters it;
clustering depth over 4× → L2 re-clusters; declared skipping indexes that do not list every
live data file of the partition → ``build_indexes``; else none.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkext.actions import runlog
from sparkext.actions.lease import owner_name
from sparkext.actions.optimize import CLUSTER_BY_PROPERTY
from sparkext.actions.table_health import table_health
from sparkext.iceberg.catalog import discover, parse_patterns, resolve_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PartitionHealth:
    table: str
    partition: str | None
    score: int
    table_score: int
    data_files: int
    data_bytes: int
    small_files: int
    delete_files: int
    equality_delete_files: int
    deleted_share: float  # rows deleted by position deletes / DVs, over all rows
    optimized_share: float | None
    clustering_depth: float | None
    clustered: bool  # the table has sparkext.optimize.cluster-by
    snapshots: int
    indexes: str | None = None  # the table's skipping indexes (None: none)
    index_coverage: float | None = None  # share of the partition's files every index lists

    @property
    def fix(self) -> str:
        return fix_for(self)


def fix_for(p: PartitionHealth) -> str:
    """The action that would raise this partition's score (module docstring)."""
    call = f"CALL sparkext.tiered_optimize(table => '{p.table}', levels => "
    if p.equality_delete_files:
        return (
            f"{call}'l0'): convert {p.equality_delete_files} equality-delete file(s) into "
            "position deletes"
        )
    if p.deleted_share > 0.1:
        return f"{call}'l0'): rewrite the files {p.deleted_share:.0%} of whose rows are deleted"
    if p.small_files >= 2:
        return f"{call}'l0'): merge {p.small_files} small files"
    if p.clustered and p.optimized_share is not None and p.optimized_share < 0.5:
        return f"{call}'l1'): cluster the {1 - p.optimized_share:.0%} not yet clustered"
    if p.clustering_depth is not None and p.clustering_depth > 4:
        return f"{call}'l2'): re-cluster (a lookup opens {p.clustering_depth:.1f} files)"
    if p.index_coverage is not None and p.index_coverage < 1:
        return (
            f"CALL sparkext.build_indexes(table => '{p.table}'): index the "
            f"{1 - p.index_coverage:.0%} of data files its skipping indexes do not list"
        )
    return "none needed"


def health(spark: SparkSession, tables: Sequence[str]) -> list[PartitionHealth]:
    """Every partition of ``tables``, worst score first (metadata only)."""

    out = []
    for name in tables:
        ref = resolve_table(spark, name)
        clustered = bool(ref.prop(CLUSTER_BY_PROPERTY))
        for p in table_health(spark, ref):
            records = p.data_records or 0
            deleted = (p.position_delete_records or 0) + (p.deletion_vector_records or 0)
            out.append(
                PartitionHealth(
                    table=name,
                    partition=p.partition,
                    score=int(p.health_score),
                    table_score=int(p.table_health_score),
                    data_files=int(p.data_files),
                    data_bytes=int(p.data_bytes),
                    small_files=int(p.small_files),
                    delete_files=int(p.position_delete_files)
                    + int(p.equality_delete_files)
                    + int(p.deletion_vectors),
                    equality_delete_files=int(p.equality_delete_files),
                    deleted_share=deleted / records if records else 0.0,
                    optimized_share=p.optimized_share,
                    clustering_depth=p.clustering_depth,
                    clustered=clustered,
                    snapshots=int(p.snapshot_count),
                    indexes=p.indexes,
                    index_coverage=p.index_coverage,
                )
            )
    out.sort(key=lambda p: (p.score, -p.data_files, p.table, p.partition or ""))
    return out


# trends(): "health" and "jobs", each a list of rows as dicts (column name -> value).
Trend = dict[str, list[dict[str, Any]]]


def record(
    spark: SparkSession, log_table: str, owner: str, partitions: Sequence[PartitionHealth]
) -> None:
    """Append one 'health' row per table to the run log (the trends' data points)."""

    now = runlog.utc_now()
    by_table: dict[str, list[PartitionHealth]] = {}
    for p in partitions:
        by_table.setdefault(p.table, []).append(p)
    entries = []
    for table, parts in sorted(by_table.items()):
        size = sum(p.data_bytes for p in parts)
        shares = [(p.optimized_share or 0.0) * p.data_bytes for p in parts]
        entries.append(
            runlog.Entry(
                now,
                owner,
                table,
                None,
                "health",
                "recorded",
                None,
                size,
                None,
                None,
                None,
                0,
                "ok",
                None,
                float(parts[0].table_score),
                sum(p.data_files for p in parts),
                sum(p.small_files for p in parts),
                sum(p.delete_files for p in parts),
                sum(shares) / size if size else None,
            )
        )
    runlog.append(spark, log_table, entries)


def trends(spark: SparkSession, log_table: str, tables: Sequence[str], days: int = 14) -> Trend:
    """From the run log: per table, the recorded health over time; per hour, jobs by outcome
    and bytes rewritten (small aggregates reach the driver)."""
    from pyspark.sql import functions as F

    if not spark.catalog.tableExists(log_table) or not tables:
        return {"health": [], "jobs": []}
    spark.catalog.refreshTable(log_table)
    since = F.current_timestamp() - F.expr(f"INTERVAL {int(days)} DAYS")
    log = spark.table(log_table).where((F.col("ts") >= since) & F.col("table_name").isin(*tables))
    health_rows = (
        log.where(F.col("job") == "health")
        .select("ts", "table_name", "health_score", "data_files", "small_files", "delete_files")
        .orderBy("ts")
        .collect()  # one row per recorded health check
    )
    jobs = (
        log.where(F.col("job") != "health")
        .groupBy(F.date_trunc("hour", "ts").alias("hour"), "outcome")
        .agg(F.count(F.lit(1)).alias("jobs"), F.sum("input_bytes").alias("bytes"))
        .orderBy("hour")
        .collect()  # one row per hour and outcome
    )
    return {"health": [r.asDict() for r in health_rows], "jobs": [r.asDict() for r in jobs]}


def score_change(trend_rows: Sequence[dict[str, Any]], table: str, now_score: int) -> int | None:
    """Score now minus the first score recorded in the window (None: no record)."""
    first = next((r for r in trend_rows if r["table_name"] == table), None)
    return None if first is None else now_score - int(first["health_score"])


def rows(partitions: Sequence[PartitionHealth], trend: Trend) -> list[tuple[Any, ...]]:
    """The procedure's rows: one per partition, worst first."""
    return [
        (
            p.table,
            p.partition,
            p.score,
            p.table_score,
            p.data_files,
            p.data_bytes,
            p.small_files,
            p.delete_files,
            p.optimized_share,
            p.fix,
            score_change(trend["health"], p.table, p.table_score),
            p.indexes,
            p.index_coverage,
        )
        for p in partitions
    ]


# ---- the page -------------------------------------------------------------------------------


def render(partitions: Sequence[PartitionHealth], trend: Trend, title: str) -> str:
    """One self-contained HTML page (plotly's JavaScript embedded once)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    tables = sorted({p.table for p in partitions})
    figures = []
    scores = go.Figure(
        go.Bar(
            x=tables,
            y=[next(p.table_score for p in partitions if p.table == t) for t in tables],
            marker_color=[
                _color(next(p.table_score for p in partitions if p.table == t)) for t in tables
            ],
        )
    )
    scores.update_layout(title="Health score by table (0–100)", yaxis_range=[0, 100])
    figures.append(scores)
    if trend["health"]:
        lines = go.Figure()
        for t in tables:
            points = [r for r in trend["health"] if r["table_name"] == t]
            lines.add_trace(go.Scatter(x=[r["ts"] for r in points],
                                       y=[r["health_score"] for r in points],
                                       mode="lines+markers", name=t))  # fmt: skip
        lines.update_layout(title="Health score over time", yaxis_range=[0, 100])
        figures.append(lines)
        files = go.Figure()
        for t in tables:
            points = [r for r in trend["health"] if r["table_name"] == t]
            files.add_trace(go.Scatter(x=[r["ts"] for r in points],
                                       y=[r["small_files"] for r in points],
                                       mode="lines+markers", name=f"{t} small files"))  # fmt: skip
            files.add_trace(go.Scatter(x=[r["ts"] for r in points],
                                       y=[r["delete_files"] for r in points], mode="lines",
                                       line_dash="dot", name=f"{t} delete files"))  # fmt: skip
        files.update_layout(title="Small files and delete files over time")
        figures.append(files)
    if trend["jobs"]:
        jobs = go.Figure()
        for outcome in sorted({r["outcome"] for r in trend["jobs"]}):
            points = [r for r in trend["jobs"] if r["outcome"] == outcome]
            color = OUTCOME_COLORS.get(outcome)
            jobs.add_trace(go.Bar(x=[r["hour"] for r in points], y=[r["jobs"] for r in points],
                                  name=outcome, marker_color=color))  # fmt: skip
        jobs.update_layout(title="Jobs per hour by outcome", barmode="stack")
        figures.append(jobs)
    worst = go.Figure(
        go.Bar(
            y=[_label(p) for p in partitions[:20]][::-1],
            x=[p.score for p in partitions[:20]][::-1],
            orientation="h",
            marker_color=[_color(p.score) for p in partitions[:20]][::-1],
        )
    )
    worst.update_layout(title="The 20 worst partitions", xaxis_range=[0, 100],
                        height=max(300, 28 * min(len(partitions), 20) + 120))  # fmt: skip
    figures.append(worst)
    plots = []
    for index, figure in enumerate(figures):
        figure.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 40})
        plots.append(
            pio.to_html(
                figure,
                full_html=False,
                include_plotlyjs=index == 0,
                div_id=f"plot{index}",
                config={"displaylogo": False},
            )
        )
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return PAGE.format(
        title=html.escape(title),
        generated=generated,
        summary=_summary(partitions, tables),
        worst=_worst_table(partitions),
        plots="\n".join(f'<div class="plot">{p}</div>' for p in plots),
        data=html.escape(json.dumps({"tables": len(tables), "partitions": len(partitions)})),
    )


OUTCOME_COLORS = {"ok": "#2e7d32", "skipped": "#9e9e9e", "busy": "#f9a825", "failed": "#c62828"}


def _label(p: PartitionHealth) -> str:
    return f"{p.table} {p.partition or ''}".strip()


def _color(score: int) -> str:
    return "#2e7d32" if score >= 80 else "#f9a825" if score >= 50 else "#c62828"


def _summary(partitions: Sequence[PartitionHealth], tables: Sequence[str]) -> str:
    cells = []
    for t in tables:
        parts = [p for p in partitions if p.table == t]
        score = parts[0].table_score
        cells.append(
            f"<tr><td>{html.escape(t)}</td><td class='score' style='color:{_color(score)}'>"
            f"{score}</td><td>{len(parts)}</td><td>{sum(p.data_files for p in parts)}</td>"
            f"<td>{sum(p.small_files for p in parts)}</td>"
            f"<td>{sum(p.delete_files for p in parts)}</td><td>{parts[0].snapshots}</td>"
            f"<td>{_indexes_cell(parts)}</td></tr>"
        )
    return "\n".join(cells)


def _indexes_cell(parts: Sequence[PartitionHealth]) -> str:
    """The table's skipping indexes and the share of its data files they all list."""
    if not parts[0].indexes:
        return "—"
    files = sum(p.data_files for p in parts)
    listed = sum((p.index_coverage or 0.0) * p.data_files for p in parts)
    share = f" ({listed / files:.0%} of files)" if files else ""
    return html.escape(parts[0].indexes) + share


def _worst_table(partitions: Sequence[PartitionHealth]) -> str:
    cells = []
    for p in partitions[:50]:
        share = "" if p.optimized_share is None else f"{p.optimized_share:.0%}"
        cells.append(
            f"<tr><td>{html.escape(p.table)}</td><td>{html.escape(p.partition or '—')}</td>"
            f"<td class='score' style='color:{_color(p.score)}'>{p.score}</td>"
            f"<td>{p.data_files}</td><td>{p.small_files}</td><td>{p.delete_files}</td>"
            f"<td>{share}</td><td><code>{html.escape(p.fix)}</code></td></tr>"
        )
    return "\n".join(cells)


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
h1 {{ margin-bottom: 0; }} .when {{ color: #666; margin-top: .2em; }}
table {{ border-collapse: collapse; width: 100%; margin: 1em 0 2em; font-size: 14px; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; }}
th {{ background: #f5f5f5; }} .score {{ font-weight: bold; }}
code {{ font-size: 12px; }} .plot {{ margin: 1em 0; }}
</style></head>
<body data-summary="{data}">
<h1>{title}</h1>
<p class="when">Generated {generated} by sparkext. Scores: 100 is healthy (docs:
table_health); the fix column is the call that would raise a partition's score.</p>
<h2>Tables</h2>
<table id="tables"><tr><th>table</th><th>score</th><th>partitions</th><th>data files</th>
<th>small files</th><th>delete files</th><th>snapshots</th><th>skipping indexes</th></tr>
{summary}
</table>
<h2>Worst partitions first</h2>
<table id="worst"><tr><th>table</th><th>partition</th><th>score</th><th>data files</th>
<th>small files</th><th>delete files</th><th>optimised</th><th>fix</th></tr>
{worst}
</table>
<h2>Trends</h2>
{plots}
</body></html>
"""


def gather(
    spark: SparkSession,
    tables: str,
    log_table: str | None,
    record_health: bool,
    progress: Callable[[str], None] = lambda message: None,
) -> tuple[list[PartitionHealth], Any]:
    """(partitions worst first, trends) for the report and the procedure."""

    patterns = parse_patterns(tables)
    log_table = log_table or runlog.default_table(patterns)
    names = discover(spark, patterns, exclude=(log_table,))
    progress(f"reading the health of {len(names)} tables")
    partitions = health(spark, names)
    if record_health and partitions:
        runlog.ensure(spark, log_table)
        record(spark, log_table, owner_name("health_report"), partitions)
    return partitions, trends(spark, log_table, names)
