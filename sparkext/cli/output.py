"""Print query results as aligned tables (like spark-sql), JSON lines or CSV."""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, TextIO

from tabulate import tabulate

from sparkext import times

FORMATS = ("table", "vertical", "json", "csv")


def _plain(value: Any) -> Any:
    """A JSON-ready form of a Spark value (Row, map, array, timestamp, decimal, bytes)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):  # naive: a session wall clock, printed as spark-sql does
        return times.wall_clock_text(value) if value.tzinfo is None else value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dt.timedelta):
        return str(value)
    return value


def cell(value: Any) -> str:
    """Render one value as spark-sql does: NULL, true/false, JSON for nested values.

    >>> cell(None), cell(True), cell({"a": [1]}), cell(1.5)
    ('NULL', 'true', '{"a":[1]}', '1.5')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    plain = _plain(value)
    if isinstance(plain, (dict, list)):
        return json.dumps(plain, separators=(",", ":"), default=str)
    return str(plain)


def vertical(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """One ``column: value`` line per column, rows under a numbered rule (MySQL's and beeline's
    ``\\G``): for results too wide for a terminal, such as table_health's.

    >>> import io; buffer = io.StringIO(); vertical(["id", "name"], [(1, None)], buffer)
    1
    >>> print(buffer.getvalue(), end="")
    *************************** 1. row ***************************
      id: 1
    name: NULL
    """
    width = max((len(c) for c in columns), default=0)
    count = 0
    for count, row in enumerate(rows, start=1):
        out.write(f"{'*' * 27} {count}. row {'*' * 27}\n")
        for column, value in zip(columns, row, strict=True):
            text = cell(value).replace("\n", "\n" + " " * (width + 2))
            out.write(f"{column.rjust(width)}: {text}\n")
    return count


def write(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, out: TextIO) -> int:
    """Write ``rows`` in ``fmt`` to ``out``; return the number of rows written."""
    count = 0
    if fmt == "vertical":
        return vertical(columns, rows, out)
    if fmt == "json":
        for row in rows:
            record = {c: _plain(v) for c, v in zip(columns, row, strict=True)}
            out.write(json.dumps(record, default=str) + "\n")
            count += 1
        return count
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else cell(v) for v in row])
            count += 1
        return count
    materialized = [[cell(v) for v in row] for row in rows]
    out.write(tabulate(materialized, headers=list(columns), tablefmt="psql", disable_numparse=True))
    out.write("\n")
    return len(materialized)
