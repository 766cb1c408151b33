"""Fixture pairs per stream→batch rule (tests/fixtures/streaming/<rule>.sql).

Each file: a ``-- range: START / END`` header, a preamble of job statements shared by its cases,
then cases ``-- title: …`` (optionally ``-- range:`` / ``-- lookup:`` lines, and
``-- pipeline`` to run the rules before this one first, for a rule that acts on what they
left), the streaming query,
and either ``-- expected`` with the Spark SQL that ONLY this rule produces, or ``-- error: <text>``.
Expected SQL is compared after sqlglot normalisation, so layout does not matter.
``pipeline.sql`` is not one rule's: each case runs the whole rewrite (every rule, through
:func:`~sparkext.streaming.rewrite.rewrite_query`, upsert fallback included) and its expected
text also states what the rules hand to the runner: ``-- emission:``, ``-- completion delay:``,
``-- note:``, ``-- view:`` lines (compared as text), and an upsert's ``-- previous`` statement.
``python -m tests.pure.test_streaming_rules --fill`` writes the output of empty ``-- expected``
sections for review (each one was read and checked by hand before it was committed).
"""

from __future__ import annotations

import re
import sys
from dataclasses import FrozenInstanceError, dataclass
from datetime import datetime
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from sparkext.streaming.context import RewriteContext, StaticCatalog
from sparkext.streaming.dialect import Streaming
from sparkext.streaming.job import StreamingSqlError, UpdatingQueryError, parse_job
from sparkext.streaming.rewrite import BatchQuery, rewrite_query
from sparkext.streaming.rules import RULES, run_rules

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


PIPELINE_FILE = "pipeline"  # every rule in combination, through the rewrite driver


def _describe(query: BatchQuery) -> list[str]:
    """What a batch query hands to the runner besides its statement, one comment line each."""
    e = query.emission
    lines = [
        "-- emission: none"
        if e is None
        else f"-- emission: {e.kind} {e.column} window={e.window or '-'} size={e.size} "
        f"slide={e.slide} offset={e.offset} alias={e.alias or '-'}",
        f"-- completion delay: {query.completion_delay}",
    ]
    if query.key:
        lines.append(f"-- key: {', '.join(query.key)} (updating: {query.updating})")
    lines += [f"-- note: {note}" for note in query.notes]
    lines += [f"-- view: {v.name} {v.kind} of {v.table} [{v.low}, {v.high})" for v in query.views]
    return lines


def run_pipeline(case: Case) -> str:
    job = parse_job(case.preamble + "\n" + case.sql)
    query = rewrite_query(job.queries[-1], job, CATALOG, case.start, case.end, case.lookup)
    parts = [*_describe(query), query.sql() + ";"]
    if query.previous is not None:
        parts += ["-- previous", *_describe(query.previous), query.previous.sql() + ";"]
    return "\n".join(parts)


def run_case(case: Case) -> str:
    if case.rule == PIPELINE_FILE:
        return run_pipeline(case)
    job = parse_job(case.preamble + "\n" + case.sql)
    context = RewriteContext(job, CATALOG, case.start, case.end, case.lookup)
    rule = RULES_BY_NAME[case.rule]
    rules = RULES[: RULES.index(rule) + 1] if case.rule in PIPELINE else (rule,)
    if case.rule in SHOW_BOUNDS:
        rules = (*(RULES[: RULES.index(rule)] if case.pipeline else ()), rule)
        rules = (*rules, RULES_BY_NAME["bound_sources"])
    expression = run_rules(job.queries[-1].copy(), context, rules).expression
    return expression.sql(dialect="spark", pretty=True)


def normalize(sql: str) -> str:
    return sqlglot.transpile(sql.strip().rstrip(";"), read=Streaming, write="spark", pretty=True)[0]


def normalize_script(text: str) -> list[str]:
    """A pipeline case's text: its ``-- …`` lines as they are, each statement normalised."""
    items: list[str] = []
    statement: list[str] = []
    for line in text.strip().splitlines():
        if not statement and line.startswith("-- "):
            items.append(line.strip())
            continue
        statement.append(line)
        if line.rstrip().endswith(";"):
            items.append(normalize("\n".join(statement)))
            statement = []
    if statement:
        items.append(normalize("\n".join(statement)))
    return items


CASES = [case for path in sorted(FIXTURES.glob("*.sql")) for case in load_cases(path)]


def test_every_rule_has_a_fixture_file():
    assert {p.stem for p in FIXTURES.glob("*.sql")} == {*RULES_BY_NAME, PIPELINE_FILE}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule}: {c.title}" for c in CASES])
def test_rule_fixture(case: Case):
    if case.error is not None:
        with pytest.raises(StreamingSqlError, match=re.escape(case.error)):
            run_case(case)
        return
    assert case.expected, f"{case.rule}: '{case.title}' has no expected SQL"
    if case.rule == PIPELINE_FILE:
        assert normalize_script(run_case(case)) == normalize_script(case.expected)
        return
    assert normalize(run_case(case)) == normalize(case.expected)


def _fill() -> None:  # pragma: no cover - maintainer tool
    for path in sorted(FIXTURES.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        for case in load_cases(path):
            if case.error is None and not case.expected:
                marker = f"-- title: {case.title}\n"
                at = text.index(marker)
                slot = text.index("-- expected\n", at) + len("-- expected\n")
                output = run_case(case)
                output += "" if output.endswith(";") else ";"
                text = text[:slot] + output + "\n" + text[slot:]
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--fill" in sys.argv:  # pragma: no cover
    _fill()


def _meta_keys(expression: exp.Expr) -> set[str]:
    return {key for node in expression.walk() for key in node.meta}


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.rule == PIPELINE_FILE and c.error is None],
    ids=lambda c: c.title,
)
def test_rules_hand_over_nothing_through_node_meta(case: Case):
    """What a rule finds reaches the next one in the Analysis it returns: after every rule,
    the tree carries only what the parser put in ``meta`` (positions, hints, TABLE marks)."""
    job = parse_job(case.preamble + "\n" + case.sql)
    query = job.queries[-1].copy()
    parsed = _meta_keys(query)
    context = RewriteContext(job, CATALOG, case.start, case.end, case.lookup)
    try:
        expression, analysis = run_rules(query.copy(), context)
    except UpdatingQueryError:  # as the driver does: the whole history, for a primary key
        context = RewriteContext(job, CATALOG, None, case.end, case.lookup, upsert=True)
        rules = tuple(r for r in RULES if r is not RULES_BY_NAME["insert_overwrite"])
        expression, analysis = run_rules(query.copy(), context, rules)
    assert _meta_keys(expression) <= parsed | {"line", "col", "table_argument", "options"}
    with pytest.raises(FrozenInstanceError):
        analysis.emission = None  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        context.start = None  # type: ignore[misc]
