from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

from sparkext.cli.output import cell, write


def test_table_output_is_aligned_with_nulls():
    out = io.StringIO()
    count = write(["a", "bb"], [(1, None), (22, "x")], "table", out)
    lines = out.getvalue().splitlines()
    assert count == 2
    assert len({len(line) for line in lines}) == 1  # every line the same width
    assert "NULL" in out.getvalue()


def test_json_lines_and_csv():
    rows = [(1, Decimal("2.50"), dt.datetime(2026, 1, 2, 3, 4, 5), {"k": [1]})]
    out = io.StringIO()
    write(["i", "d", "t", "m"], rows, "json", out)
    assert json.loads(out.getvalue()) == {
        "i": 1,
        "d": "2.50",
        "t": "2026-01-02 03:04:05",
        "m": {"k": [1]},
    }
    out = io.StringIO()
    write(["i", "s"], [(1, "a,b"), (2, None)], "csv", out)
    assert out.getvalue() == 'i,s\n1,"a,b"\n2,\n'


def test_cells():
    assert cell(False) == "false"
    assert cell([1, None]) == "[1,null]"
