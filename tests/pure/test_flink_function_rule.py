"""The Flink function table covers what the rule does; every refusal is one sentence."""

from __future__ import annotations

import re

import pytest

from sparkext.streaming import flink_builtins as fb
from sparkext.streaming.job import StreamingSqlError, parse_job
from sparkext.streaming.rules import flink_functions as ff

HEAD = "CREATE TABLE t (s STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"


def rewrite(select: str) -> str:
    job = parse_job(HEAD + f"SELECT {select} FROM t;")
    return ff.translate(job.queries[0].copy(), job).sql(dialect="spark")


def test_every_translated_call_has_a_row_in_the_table():
    names = set(ff._ANONYMOUS) | {name for name, _ in ff._TYPED.values()}
    assert names <= set(fb.FLINK_FUNCTIONS)
    kinds = {entry.kind for entry in fb.FLINK_FUNCTIONS.values()}
    assert kinds == {fb.SAME, fb.TRANSLATED, fb.REFUSED}


REFUSED_CALLS = [
    name
    for name, entry in fb.FLINK_FUNCTIONS.items()
    if entry.kind == fb.REFUSED and re.fullmatch(r"[A-Z_]+", name) and name not in fb._BARE
]


@pytest.mark.parametrize("name", REFUSED_CALLS)
def test_a_refused_function_is_named_in_one_sentence(name):
    arguments = {
        "JSON_OBJECT": "'k' VALUE s",
        "JSON_OBJECTAGG": "KEY s VALUE s",
        "ARRAY_SLICE": "ARRAY[1], 1, 2",
        "CURRENT_WATERMARK": "ts",
    }.get(name, "s")
    with pytest.raises(StreamingSqlError) as caught:
        rewrite(f"{name}({arguments})")
    assert re.fullmatch(
        rf"line 2, column \d+: Flink's {name}\(…\) has no Spark translation in sparkext; .+\.",
        str(caught.value),
    )


def test_window_functions_and_unknown_calls_are_left_alone():
    job = parse_job(
        HEAD + "SELECT window_start, my_spark_fn(s) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
        "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, s;"
    )
    before = job.queries[0].sql(dialect="spark")
    assert ff.translate(job.queries[0].copy(), job).sql(dialect="spark") == before


def test_the_markdown_table_has_a_row_per_function():
    table = fb.markdown_table()
    assert table.count("\n") == len(fb.FLINK_FUNCTIONS) + 2
    assert "| SPLIT_INDEX |" in table and "refused: Flink's ARRAY_SLICE(…)" in table


def test_translations_of_nested_calls_apply_inside_out():
    assert rewrite("SUBSTRING(REGEXP_EXTRACT(s, 'a(b)', 1), 1, -1)") == (
        "SELECT CASE WHEN -1 < 0 THEN CAST(NULL AS STRING) ELSE SUBSTRING(CASE WHEN s RLIKE "
        "'a(b)' THEN REGEXP_EXTRACT(s, 'a(b)') END, 1, -1) END FROM t"
    )


def test_readme_lists_every_flink_function():
    """The dialect guide's table of Flink built-ins is the code's table (regenerate it with
    ``flink_builtins.markdown_table()`` when a function's handling changes)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "guides" / "streaming-dialect.md").read_text(encoding="utf-8")
    assert fb.markdown_table() in page
