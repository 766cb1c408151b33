"""Aligned tables fit the terminal (issue 50): wrapped prose, else the vertical form."""

from __future__ import annotations

import io

from sparkext.cli.output import write

LONG = "a sentence of documentation that runs on for far longer than any terminal is wide " * 2


def test_a_table_wider_than_the_terminal_wraps_its_prose_and_keeps_names_whole():
    out = io.StringIO()
    count = write(
        ["name", "type", "doc"], [["target_file_size_bytes", "bigint", LONG]], "table", out, 80
    )
    lines = out.getvalue().splitlines()
    assert count == 1 and max(len(line) for line in lines) <= 80
    assert "target_file_size_bytes" in lines[3]  # the name is not cut
    assert " ".join(LONG.split()) in " ".join(
        part.strip(" |") for line in lines[3:-1] for part in [line.split("|")[-2]]
    ).replace("  ", " ")


def test_a_table_too_wide_to_wrap_prints_vertically_within_the_width():
    columns = [f"column_number_{i}" for i in range(9)]
    out = io.StringIO()
    write(columns, [[str(i) * 3 for i in range(8)] + [LONG]], "table", out, 80)
    text = out.getvalue()
    assert text.startswith("*" * 27 + " 1. row ")
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "column_number_8: a sentence of documentation" in text


def test_without_a_width_lines_stay_whole():
    out = io.StringIO()
    write(["doc"], [[LONG]], "table", out)
    assert any(LONG.strip() in line for line in out.getvalue().splitlines())
