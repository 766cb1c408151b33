"""CALL sparkext.build_indexes(table [, indexes, options]): index the live data files that the
latest index object does not list yet (the backfill).

Floor: procedures (the SQL façade of :mod:`sparkext.actions.skipping`).
"""

from __future__ import annotations

from typing import Any

from sparkext.actions import skipping as action
from sparkext.declarations import BoundArgs, Context, OutputColumn, Param, ParamType, Routine


def run(context: Context, args: BoundArgs) -> list[tuple[Any, ...]]:
    result = action.build_indexes(context, args.table(), args["indexes"], args["options"])
    return [index.row() for index in result.indexes]


ROUTINE = Routine(
    name="build_indexes",
    doc="Build skipping indexes for the live data files the latest index object does not "
    "list yet, on the executors; one index object for the current snapshot.",
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.events'", True),
        Param(
            "indexes",
            ParamType.STRING_ARRAY,
            "the indexes to build, e.g. array('rid_bloom') (default: every declared index)",
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=action.BUILD_OPTIONS,
    output=(
        OutputColumn("name", "string", "the index"),
        OutputColumn("type", "string", "its type"),
        OutputColumn("column", "string", "the column it covers"),
        OutputColumn("live_files", "bigint", "live data files of the snapshot indexed"),
        OutputColumn("files_indexed", "bigint", "entries built by this call"),
        OutputColumn("files_carried", "bigint", "entries kept from the previous index object"),
        OutputColumn(
            "files_skipped",
            "bigint",
            "live files it does not list: not Parquet, or Parquet without field ids",
        ),
        OutputColumn("index_bytes", "bigint", "bytes of its blob"),
        OutputColumn(
            "snapshot_id",
            "bigint",
            "the snapshot its index object belongs to (NULL: the table has no snapshot)",
        ),
        OutputColumn("duration_ms", "bigint", "wall-clock time of the call"),
    ),
    run=run,
)
