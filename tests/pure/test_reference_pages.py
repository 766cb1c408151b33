"""Each routine's reference page says what its declaration says, and every routine has a page.

The generated part of ``docs/reference/<name>.md`` (between ``<!-- generated: begin -->`` and
``<!-- generated: end -->``) is rendered from the routine's ``Routine`` by
``sparkext.reference``; after changing a declaration run
``.venv/bin/python -m sparkext.reference``.
"""

from __future__ import annotations

import re

import pytest

from sparkext import reference
from sparkext.declarations import Kind, Option, OutputColumn, Param, ParamType, Routine
from tests.helpers.doc_blocks import ROOT, _nav

ROUTINES = reference.routines()
FIX = f"run `{reference.COMMAND}`"
# Pages of docs/reference/ that are not a routine's.
OTHER_PAGES = {"index", "sql", "errors", "configuration", "python"}


@pytest.mark.parametrize("name", sorted(ROUTINES))
def test_the_page_says_what_the_declaration_says(name):
    path = reference.page_path(name)
    assert path.is_file(), f"sparkext.{name} has no reference page {path.relative_to(ROOT)}; {FIX}"
    text = path.read_text(encoding="utf-8")
    written = reference.generated(text)
    assert written is not None, (
        f"{path.relative_to(ROOT)} has no {reference.BEGIN} … {reference.END} part; {FIX}"
    )
    assert written == reference.render(ROUTINES[name]), (
        f"{path.relative_to(ROOT)} and the declaration of sparkext.{name} disagree; {FIX}"
    )


def test_every_reference_page_is_a_routine_or_a_known_page():
    pages = {p.stem for p in reference.DOCS.glob("*.md")}
    strays = sorted(pages - set(ROUTINES) - OTHER_PAGES)
    assert not strays, f"docs/reference/ pages without a routine: {strays}"


def test_every_routine_page_is_in_the_nav():
    import yaml

    nav = _nav(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    missing = sorted(n for n in ROUTINES if f"reference/{n}.md" not in nav)
    assert not missing, f"add these pages to mkdocs.yml's nav: {missing}"


def test_the_hand_written_part_is_kept_when_the_page_is_rewritten():
    routine = ROUTINES["help"]
    text = "# `help`\n\nabove\n\n" + reference.BEGIN + "\nstale\n" + reference.END + "\n\nbelow\n"
    rewritten = reference.rewrite(text, routine)
    assert rewritten.startswith("# `help`\n\nabove\n\n")
    assert rewritten.endswith(reference.END + "\n\nbelow\n")
    assert reference.generated(rewritten) == reference.render(routine)
    assert reference.rewrite(rewritten, routine) == rewritten


def test_a_new_routine_gets_a_page(tmp_path, monkeypatch):
    toy = Routine(
        name="toy",
        doc="A toy | with a pipe.",
        params=(Param("table", ParamType.TABLE, "the <table>", True),),
        output=(OutputColumn("n", "bigint", "rows"),),
        run=lambda context, args: [],
        kind=Kind.PROCEDURE | Kind.FUNCTION,
        options=(Option("max-rows", "10", "at most this many"),),
        failure_column="n",
    )
    monkeypatch.setattr(reference, "routines", lambda: {"toy": toy})
    assert reference.main(tmp_path) == [tmp_path / "toy.md"]
    text = (tmp_path / "toy.md").read_text(encoding="utf-8")
    assert text.startswith("# `toy`\n\n" + reference.BEGIN)
    for line in (
        "A toy \\| with a pipe.",
        "CALL sparkext.toy(table => <table>)",
        "SELECT * FROM sparkext.toy(<table: table>)",
        "| `table` | `table` | required | the &lt;table&gt; |",
        "| `max-rows` | `10` | at most this many |",
        "| `n` | `bigint` | rows |",
        "A non-NULL `n` says that row's part of the work failed;",
    ):
        assert line in text, line
    assert reference.main(tmp_path) == []  # nothing changes the second time


# Keys the code names that are not settings: snapshot-summary keys sparkext writes (each routine's
# page describes its own), Spark's job-local properties, and test hooks.
NOT_SETTINGS = {
    "spark.job.description",
    "spark.jobGroup.id",
    "spark.sql.",
    "spark.sql.catalog",
    "write.metadata.metrics.column.file_path",
    "write.metadata.metrics.column.pos",
    "spark.a",  # doctest examples
    "spark.b",
    "sparkext.tabel_health",  # a misspelt name in an error's example
    "spark.sql",  # a route's name in the audit log
}
_SUMMARY_PREFIXES = (
    "sparkext.cdc.",
    "sparkext.event-time.",
    "sparkext.stream.",
    "sparkext.streaming.",
    "sparkext.changelog.batch-id",
    "sparkext.changelog.checkpoint",
    "sparkext.changelog.query",
    "sparkext.optimize.level",
    "sparkext.optimize.partition",
    "sparkext.optimize.reason",
    "sparkext.executors.curves",
    "sparkext.upsert.",
    "sparkext.run-id",
    "sparkext.operation",
    "sparkext.deletes.",
    "sparkext.extension",  # a logger's name
    "sparkext.audit",  # a logger's name
)
_KEY = re.compile(
    r"""["']((?:spark|sparkext|write|history|commit)\.[A-Za-z0-9_.<>-]*[A-Za-z0-9_.]|SPARKEXT_[A-Z_]+)["']"""
)


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _named_keys() -> set[str]:
    found = set()
    for path in (ROOT / "sparkext").rglob("*.py"):
        found.update(_KEY.findall(path.read_text(encoding="utf-8")))
    for line in (ROOT / "conf" / "spark-defaults.conf").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            found.add(line.split()[0])
    return {
        key
        for key in found
        if key not in NOT_SETTINGS
        and not key.startswith(_SUMMARY_PREFIXES)
        and not (key.startswith("sparkext.") and _is_module(key))
        and key.removeprefix("sparkext.") not in ROUTINES
    }


def test_the_configuration_page_names_every_key_the_code_reads():
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    prefixes = [p[:-1] for p in re.findall(r"`([\w.-]+\.)\*`", page)]
    prefixes += [p for p in re.findall(r"`([\w.-]+\.)<\w+>`", page)]
    missing = sorted(
        key
        for key in _named_keys()
        if f"`{key}`" not in page and not any(key.startswith(p) for p in prefixes)
    )
    assert not missing, f"docs/reference/configuration.md does not name {missing}"
