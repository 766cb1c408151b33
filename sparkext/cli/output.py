"""Print query results as aligned tables (like spark-sql), JSON lines or CSV.

Floor: top (command line).
"""

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


def vertical(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO, width: int | None = None
) -> int:
    """One ``column: value`` line per column, rows under a numbered rule (MySQL's and beeline's
    ``\\G``): for results too wide for a terminal, such as table_health's.

    >>> import io; buffer = io.StringIO(); vertical(["id", "name"], [(1, None)], buffer)
    1
    >>> print(buffer.getvalue(), end="")
    *************************** 1. row ***************************
      id: 1
    name: NULL
    """
    import textwrap

    label = max((len(c) for c in columns), default=0)
    room = width - label - 2 if width is not None else None
    count = 0
    for count, row in enumerate(rows, start=1):
        out.write(f"{'*' * 27} {count}. row {'*' * 27}\n")
        for column, value in zip(columns, row, strict=True):
            lines = cell(value).split("\n")
            if room is not None and room >= MIN_COLUMN:  # a long value wraps under itself
                lines = [part for line in lines for part in textwrap.wrap(line, room) or [""]]
            text = ("\n" + " " * (label + 2)).join(lines)
            out.write(f"{column.rjust(label)}: {text}\n")
    return count


MIN_COLUMN = 20  # narrower wrapped columns read worse than the vertical form


def fit(
    widths: Sequence[int], width: int, prose: Sequence[bool] | None = None
) -> list[int | None] | None:
    """The widest each column may be for an aligned table of columns ``widths`` wide (their
    longest cell or header, padding included) to fit ``width`` characters: ``None`` for a
    column left whole; ``None`` overall when even wrapped columns would be narrower than
    ``MIN_COLUMN`` (print vertically instead). Prose columns (``prose``: their cells hold
    spaces) wrap first, the widest first, to one common width; names and numbers stay whole
    while that suffices.

    >>> fit([5, 10], 80)
    [None, None]
    >>> fit([10, 100, 60], 80)
    [None, 30, 30]
    >>> fit([20, 100, 60], 80, prose=[False, True, True])
    [None, 25, 25]
    >>> fit([20] * 10, 80) is None
    True
    """
    frame = 3 * len(widths) + 1  # "| " before each column, " |" after the last
    if sum(widths) + frame <= width:
        return [None] * len(widths)
    budget = width - frame
    for wrapped in ([bool(p) for p in prose] if prose else None, [True] * len(widths)):
        if wrapped is None or not any(wrapped):
            continue
        fixed = sum(w for w, p in zip(widths, wrapped, strict=True) if not p)
        for cap in range(max(widths), MIN_COLUMN - 1, -1):
            used = sum(min(w, cap) for w, p in zip(widths, wrapped, strict=True) if p)
            if fixed + used <= budget:
                return [
                    cap if p and w > cap else None for w, p in zip(widths, wrapped, strict=True)
                ]
    return None


def write(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: str,
    out: TextIO,
    width: int | None = None,
) -> int:
    """Write ``rows`` in ``fmt`` to ``out``; return the number of rows written. ``width``: the
    terminal's; an aligned table wider than it wraps its widest columns, or prints vertically
    when wrapping cannot make it fit."""
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
    caps: list[int | None] = [None] * len(columns)
    if width is not None and columns:
        # tabulate pads a header by two spaces more than a cell
        natural = [
            max([len(c) + 2, *(len(line) for r in materialized for line in r[i].splitlines())])
            for i, c in enumerate(columns)
        ]
        prose = [any(" " in r[i] for r in materialized) for i in range(len(columns))]
        fitted = fit(natural, width, prose)
        if fitted is None:  # cells already rendered: kept as is
            return vertical(columns, materialized, out, width)
        caps = fitted
    text = tabulate(
        materialized,
        headers=list(columns),
        tablefmt="psql",
        disable_numparse=True,
        maxcolwidths=caps if any(caps) else None,
        maxheadercolwidths=caps if any(caps) else None,
    )
    out.write(text)
    out.write("\n")
    return len(materialized)
