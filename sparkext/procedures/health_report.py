"""CALL sparkext.health_report(tables [, log_table, record]): the health report's data as rows.

One row per partition of every table the patterns name, worst score first, with the fix that
would raise it and the table's score change over the run log's window; ``record`` (default
true) also appends the tables' current health to the run log, where the trends come from.
``sparkext-sql report --out report.html`` renders the same data as a page
(:mod:`sparkext.actions.health_report`).

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import health_report as report
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    OutputColumn,
    Param,
    ParamType,
    Routine,
)


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    partitions, trend = report.gather(
        context.spark, args["tables"], args["log_table"], args["record"], context.progress
    )
    return report.rows(partitions, trend)


ROUTINE = Routine(
    writes=lambda args: bool(args["record"]),
    name="health_report",
    kind=Kind.PROCEDURE | Kind.FUNCTION,
    doc="Health of many tables per partition, worst first, with the fix for each and the "
    "trend from the run log (sparkext-sql report renders it as HTML).",
    params=(
        Param("tables", ParamType.STRING, "tables or patterns, e.g. 'lake.ods.*,lake.dw.t'", True),
        Param("log_table", ParamType.STRING, "run log (default: <catalog>.sparkext.optimize_log)"),
        Param("record", ParamType.BOOLEAN, "append the current health to the run log", False, True),
    ),
    output=(
        OutputColumn("table_name", "string", "the table"),
        OutputColumn("partition", "string", "partition as JSON (NULL: unpartitioned)"),
        OutputColumn("health_score", "int", "0-100 partition score (table_health)"),
        OutputColumn("table_health_score", "int", "0-100 score of the whole table"),
        OutputColumn("data_files", "bigint", "live data files"),
        OutputColumn("data_bytes", "bigint", "their bytes"),
        OutputColumn("small_files", "bigint", "small data files"),
        OutputColumn("delete_files", "bigint", "delete files and deletion vectors"),
        OutputColumn("optimized_share", "double", "share of bytes clustered by L1/L2"),
        OutputColumn("fix", "string", "the call that would raise the score (or 'none needed')"),
        OutputColumn(
            "score_change",
            "int",
            "table score now minus the first one the run log recorded in 14 days (NULL: none)",
        ),
        OutputColumn(
            "indexes", "string", "the table's skipping indexes (table_health; NULL: none)"
        ),
        OutputColumn(
            "index_coverage",
            "double",
            "share of the partition's live data files every index lists (NULL: no index)",
        ),
    ),
    run=run,
)
