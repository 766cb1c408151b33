"""Fixture pairs per stream→batch rule (tests/fixtures/streaming/<rule>.sql).

Each file: a ``-- range: START / END`` header, a preamble of job statements shared by its cases,
then cases ``-- title: …`` (optionally ``-- range:`` / ``-- lookup:`` lines, and
``-- pipeline`` to run the rules before this one first, for a rule that acts on what they
left), the streaming query,
and either ``-- expected`` with the Spark SQL that ONLY this rule produces, or ``-- error: <text>``.
Expected SQL is compared after sqlglot normalisation, so layout does not matter.
``python -m tests.pure.test_streaming_rules --fill`` writes the output of empty ``-- expected``
sections for review (each one was read and checked by hand before it was committed).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import sqlglot

from sparkext.streaming.context import RewriteContext, StaticCatalog
from sparkext.streaming.dialect import Streaming
from sparkext.streaming.job import StreamingSqlError, parse_job
from sparkext.streaming.rules import RULES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "streaming"
RULES_BY_NAME = {rule.__module__.rsplit(".", 1)[1]: rule for rule in RULES}
CATALOG = StaticCatalog(
    {
        "lake.db.events": {
            "properties": {
                "sparkext.event-time-column": "event_time",
                "sparkext.watermark-delay": "10 s",
            },
            "columns": ["id", "event_time", "kind"],
        },
        "lake.db.currencies": {
            "properties": {},
            "columns": ["code", "name"],
            "snapshots": [["2024-01-01 09:00:00", 11], ["2024-01-01 13:00:00", 12]],
        },
        "lake.db.flat": {"properties": {}, "columns": ["window_end", "n"], "partitioning": []},
        "lake.db.customers": {"properties": {}, "columns": ["id", "tier"], "cdc": True},
    }
)


@dataclass
class Case:
    rule: str
    title: str
    preamble: str
    sql: str
    start: datetime | None
    end: datetime
    lookup: str
    expected: str | None
    error: str | None
    pipeline: bool = False  # "-- pipeline": the rules before this one run first


def _range(text: str) -> tuple[datetime | None, datetime]:
    start, end = (part.strip() for part in text.split("/"))
    return (None if start == "-" else datetime.fromisoformat(start)), datetime.fromisoformat(end)


def load_cases(path: Path) -> list[Case]:
    text = path.read_text(encoding="utf-8")
    head, *blocks = re.split(r"^-- title: ", text, flags=re.M)
    file_range = re.search(r"^-- range: (.+)$", head, flags=re.M).group(1)
    preamble = re.sub(r"^-- range: .+$", "", head, flags=re.M).strip()
    cases = []
    for block in blocks:
        title, _, body = block.partition("\n")
        local_range = re.search(r"^-- range: (.+)$", body, flags=re.M)
        lookup = re.search(r"^-- lookup: (.+)$", body, flags=re.M)
        error = re.search(r"^-- error: (.+)$", body, flags=re.M)
        query, _, expected = body.partition("-- expected")
        pipeline = re.search(r"^-- pipeline$", body, flags=re.M) is not None
        query = re.sub(r"^-- (range|lookup|error): .+$|^-- pipeline$", "", query, flags=re.M)
        query = query.strip()
        start, end = _range(local_range.group(1) if local_range else file_range)
        cases.append(
            Case(
                path.stem,
                title.strip(),
                preamble,
                query,
                start,
                end,
                lookup.group(1).strip() if lookup else "end",
                None if error else expected.strip(),
                error.group(1).strip() if error else None,
                pipeline,
            )
        )
    return cases


# Rules that act on what the earlier rules found (the emission of the query) see the whole
# pipeline up to them; rules that only mark how far back a source must be read are followed by
# bound_sources so the fixture shows the bounds; every other rule is applied alone.
PIPELINE = {"insert_overwrite"}
SHOW_BOUNDS = {"window_tvf", "session_window", "interval_join", "dedup", "over_aggregate"}


def run_case(case: Case) -> str:
    job = parse_job(case.preamble + "\n" + case.sql)
    context = RewriteContext(job, CATALOG, case.start, case.end, case.lookup)
    rule = RULES_BY_NAME[case.rule]
    rules = RULES[: RULES.index(rule) + 1] if case.rule in PIPELINE else (rule,)
    if case.rule in SHOW_BOUNDS:
        rules = (*(RULES[: RULES.index(rule)] if case.pipeline else ()), rule)
        rules = (*rules, RULES_BY_NAME["bound_sources"])
    expression = job.queries[-1].copy()
    for step in rules:
        expression = step(expression, context)
    return expression.sql(dialect="spark", pretty=True)


def normalize(sql: str) -> str:
    return sqlglot.transpile(sql.strip().rstrip(";"), read=Streaming, write="spark", pretty=True)[0]


CASES = [case for path in sorted(FIXTURES.glob("*.sql")) for case in load_cases(path)]


def test_every_rule_has_a_fixture_file():
    assert {p.stem for p in FIXTURES.glob("*.sql")} == set(RULES_BY_NAME)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule}: {c.title}" for c in CASES])
def test_rule_fixture(case: Case):
    if case.error is not None:
        with pytest.raises(StreamingSqlError, match=re.escape(case.error)):
            run_case(case)
        return
    assert case.expected, f"{case.rule}: '{case.title}' has no expected SQL"
    assert normalize(run_case(case)) == normalize(case.expected)


def _fill() -> None:  # pragma: no cover - maintainer tool
    for path in sorted(FIXTURES.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        for case in load_cases(path):
            if case.error is None and not case.expected:
                marker = f"-- title: {case.title}\n"
                at = text.index(marker)
                slot = text.index("-- expected\n", at) + len("-- expected\n")
                text = text[:slot] + run_case(case) + ";\n" + text[slot:]
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--fill" in sys.argv:  # pragma: no cover
    _fill()
