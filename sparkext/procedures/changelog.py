"""SELECT ... FROM sparkext.changelog('lake.db.t', start, end [, options]): a table's changes.

The incremental changelog of any Iceberg table, merge-on-read ones included (position deletes,
deletion vectors, equality deletes), where Iceberg's changelog scan refuses a table with delete
files. Columns: the table's (current schema), ``_change_type`` (INSERT, DELETE, UPDATE_BEFORE,
UPDATE_AFTER), ``_change_ordinal``, ``_commit_snapshot_id`` as Iceberg's ``<table>.changes``,
and ``_commit_timestamp``. Carry-over rows are removed, as Iceberg's ``create_changelog_view``
does. See :mod:`sparkext.history.changelog` for how, and
:mod:`sparkext.procedures.create_changelog_view` for Iceberg's procedure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sparkext.procedures.base import (
    BoundArgs,
    Context,
    Kind,
    Option,
    Param,
    ParamType,
    Routine,
    parse_boolean,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkext.planning.changelog import RangeRequest

# Iceberg's read options for changelogs (SparkReadOptions), with Iceberg's meaning: snapshot
# ids, or epoch milliseconds for the snapshot current at that time.
START_SNAPSHOT_ID = "start-snapshot-id"
END_SNAPSHOT_ID = "end-snapshot-id"
START_TIMESTAMP = "start-timestamp"
END_TIMESTAMP = "end-timestamp"
RANGE_DEFAULT = ""  # empty: not given
COMPUTE_UPDATES = "compute-updates"
COMPUTE_UPDATES_DEFAULT = ""  # empty: Iceberg's default (true when identifier columns are given)
NET_CHANGES = "net-changes"
NET_CHANGES_DEFAULT = "false"
IDENTIFIER_COLUMNS = "identifier-columns"
IDENTIFIER_COLUMNS_DEFAULT = ""  # empty: the table's identifier fields

_LONG = re.compile(r"\s*([+-]?\d+)\s*")


def parse_long(text: str) -> int:
    """A Java long written in decimal: a snapshot id or epoch milliseconds.

    >>> parse_long(" 5837411 ")
    5837411
    """
    match = _LONG.fullmatch(text)
    if match is None or not -(2**63) <= int(match.group(1)) < 2**63:
        raise ValueError("expected a whole number such as 5837411")
    return int(match.group(1))


def parse_names(text: str) -> list[str]:
    """Comma-separated column names.

    >>> parse_names("id, region")
    ['id', 'region']
    """
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise ValueError("expected column names separated by commas, such as 'id,region'")
    return names


def or_empty(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, except that an empty value is ``None`` (not given).

    >>> or_empty(parse_long)(""), or_empty(parse_long)("7")
    (None, 7)
    """

    def parse_or_empty(text: str) -> Any:
        return None if not text.strip() else parse(text)

    return parse_or_empty


RANGE_OPTIONS = (
    Option(
        START_SNAPSHOT_ID,
        RANGE_DEFAULT,
        "start after this snapshot (exclusive), as Iceberg's read option",
        or_empty(parse_long),
    ),
    Option(
        END_SNAPSHOT_ID,
        RANGE_DEFAULT,
        "end at this snapshot (inclusive; default: the current snapshot)",
        or_empty(parse_long),
    ),
    Option(
        START_TIMESTAMP,
        RANGE_DEFAULT,
        "start after the snapshot current at this time (epoch milliseconds), as Iceberg",
        or_empty(parse_long),
    ),
    Option(
        END_TIMESTAMP,
        RANGE_DEFAULT,
        "end at the snapshot current at this time (epoch milliseconds), as Iceberg",
        or_empty(parse_long),
    ),
)


def range_request(
    options: Mapping[str, Any], start: str | None = None, end: str | None = None
) -> RangeRequest:
    """The range of a call: ``start``/``end`` arguments and Iceberg's read options."""
    from sparkext.planning.changelog import RangeRequest

    return RangeRequest(
        start=start,
        end=end,
        start_snapshot_id=options[START_SNAPSHOT_ID],
        end_snapshot_id=options[END_SNAPSHOT_ID],
        start_timestamp_ms=options[START_TIMESTAMP],
        end_timestamp_ms=options[END_TIMESTAMP],
    )


def run(context: Context, args: BoundArgs) -> DataFrame:
    from sparkext.history.changelog import changelog

    options = args.options
    return changelog(
        context.spark,
        args.table(),
        range_request(options, args["start"], args["end"]),
        compute_updates=options[COMPUTE_UPDATES],
        identifier_columns=options[IDENTIFIER_COLUMNS],
        net_changes=options[NET_CHANGES],
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
    options=(
        *RANGE_OPTIONS,
        Option(
            COMPUTE_UPDATES,
            COMPUTE_UPDATES_DEFAULT,
            "pair a DELETE and an INSERT of one identifier in a snapshot into UPDATE_BEFORE/"
            "UPDATE_AFTER (default: true when identifier-columns is given)",
            or_empty(parse_boolean),
        ),
        Option(
            IDENTIFIER_COLUMNS,
            IDENTIFIER_COLUMNS_DEFAULT,
            "columns identifying a row, comma-separated (default: the table's identifier fields)",
            or_empty(parse_names),
        ),
        Option(
            NET_CHANGES,
            NET_CHANGES_DEFAULT,
            "only the net change of each row over the whole range",
            parse_boolean,
        ),
    ),
    output=(),  # the table's columns and _change_type, _change_ordinal, _commit_snapshot_id, ...
    run=run,
)
