"""SELECT ... FROM sparkext.changelog('lake.db.t', start, end [, options]): a table's changes.

The incremental changelog of any Iceberg table, merge-on-read ones included (position deletes,
deletion vectors, equality deletes), where Iceberg's changelog scan refuses a table with delete
files. Columns: the table's (current schema), ``_change_type`` (INSERT, DELETE, UPDATE_BEFORE,
UPDATE_AFTER), ``_change_ordinal``, ``_commit_snapshot_id`` as Iceberg's ``<table>.changes``,
and ``_commit_timestamp``. Carry-over rows are removed, as Iceberg's ``create_changelog_view``
does. See :mod:`sparkext.actions.history.changelog` for how, and
:mod:`sparkext.procedures.create_changelog_view` for Iceberg's procedure.

Floor: procedures (the SQL façade of an action).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.actions.history import changelog as changelog_action
from sparkext.declarations import (
    BoundArgs,
    Context,
    Kind,
    Param,
    ParamType,
    Routine,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run(context: Context, args: BoundArgs) -> DataFrame:
    options = args.options
    return changelog_action.changelog(
        context.spark,
        args.table(),
        changelog_action.range_request(options, args["start"], args["end"]),
        compute_updates=options[changelog_action.COMPUTE_UPDATES],
        identifier_columns=options[changelog_action.IDENTIFIER_COLUMNS],
        net_changes=options[changelog_action.NET_CHANGES],
        progress=context.progress,
    )


ROUTINE = Routine(
    writes=False,
    name="changelog",
    doc="A table's row changes between two snapshots, merge-on-read deletes included.",
    kind=Kind.FUNCTION,
    params=(
        Param("table", ParamType.TABLE, "Iceberg table, e.g. 'lake.db.t'", True),
        Param(
            "start",
            ParamType.SNAPSHOT,
            "exclusive start: snapshot id, tag or branch, or time ('2026-11-21 08:00:00'); "
            "default: before the first snapshot",
        ),
        Param(
            "end",
            ParamType.SNAPSHOT,
            "inclusive end: snapshot id, tag or branch, or time; default: the current snapshot",
        ),
        Param("options", ParamType.STRING_MAP, "map of options, see below", default={}),
    ),
    options=changelog_action.OPTIONS,
    output=(),  # the table's columns and _change_type, _change_ordinal, _commit_snapshot_id, ...
    run=run,
)
