"""The blocks of README.md and of every docs page follow the rules tests/spark/test_docs_examples.py
runs them by, and what they name exists; no Spark needed (tests/helpers/doc_blocks.py has the
conventions and the page order)."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from glob import glob

import pytest
from click.testing import CliRunner

from sparkext.demo import EXAMPLES_DIR_DEFAULT, ORDER_CHANGES, main, write_examples
from sparkext.executors.cdc.debezium import decode
from tests.helpers import doc_blocks as docs
from tests.helpers.doc_blocks import ROOT

BLOCKS = docs.blocks()
EXAMPLES = docs.examples()
MARKERS = ("not-run", "from")
# Repository paths an example names: scripts, jobs, conf, the vendored samples.
_PATH = re.compile(r"(?<![\w/.~-])((?:tests/fixtures|sql|conf)/[\w./*+-]*\w)")


def test_every_block_is_an_example_its_output_or_text():
    for block in BLOCKS:
        assert block.lang in (*docs.RUN, *docs.INERT), (
            f"{block.name}: a fence needs a language: bash, sql or python (run by the tests), "
            "output (what the example above prints) or text (never run)"
        )
        for key, value in block.markers.items():
            assert key in MARKERS, f"{block.name}: unknown marker '{key}'"
            assert value, f"{block.name}: '{key}' needs a value (a reason, a path)"


def test_not_run_stays_rare():
    skipped = [b.name for b in BLOCKS if "not-run" in b.markers]
    assert len(skipped) <= len(EXAMPLES) // 3, skipped


def test_every_output_follows_the_example_it_belongs_to():
    for before, block in itertools.pairwise(BLOCKS):
        if block.lang == "output":
            assert before.runs, f"{block.name} follows {before.name}, which does not run"


def test_the_examples_state_their_output():
    silent = [e.block.name for e in EXAMPLES if e.output is None]
    # the quick start (the demo), the shell's option list and a UDF module print nothing to state
    assert len(silent) <= 4, silent


def test_every_command_runs_in_process_or_is_an_install_step():
    for example in EXAMPLES:
        if example.block.lang == "bash":
            for command in docs.commands(example.block.text):
                assert command.kind, (
                    f"{example.block.name}: the tests cannot run {' '.join(command.argv)!r}; "
                    "use sparkext-sql/sparkext-demo, list it in SKIPPED, or mark the block not-run"
                )


def test_the_files_the_examples_name_exist():
    for example in EXAMPLES:
        for path in _PATH.findall(example.block.text):
            assert glob(str(ROOT / path)), f"{example.block.name} names {path}, which is missing"


def _contiguous(part: list[str], whole: list[str]) -> bool:
    return any(whole[i : i + len(part)] == part for i in range(len(whole) - len(part) + 1))


def test_blocks_from_a_file_are_taken_from_it_verbatim():
    parts = defaultdict(list)
    for block in BLOCKS:
        if "from" in block.markers:
            parts[block.markers["from"]].append(block)
    assert parts, "no block of the docs says which file it shows"
    for path, shown in parts.items():
        written = docs.statements((ROOT / path).read_text(encoding="utf-8"))
        part = docs.statements("".join(b.text for b in shown))
        assert part, f"{shown[0].name} shows no statement of {path}"
        assert _contiguous(part, written), f"{', '.join(b.name for b in shown)} differ from {path}"


def test_every_example_script_is_in_the_docs():
    used = {b.markers.get("from") for b in BLOCKS}
    for example in EXAMPLES:
        if example.block.lang == "bash":
            used.update(a for c in docs.commands(example.block.text) for a in c.args)
    for script in sorted((ROOT / "sql" / "examples").glob("*.sql")):
        assert str(script.relative_to(ROOT)) in used, f"no page of the docs runs {script.name}"


def test_the_docs_use_the_directory_the_scripts_are_written_for():
    assert docs.EXAMPLES_DIR == EXAMPLES_DIR_DEFAULT
    text = "".join(page.read_text(encoding="utf-8") for page in docs.pages())
    assert f"sparkext-demo --data {EXAMPLES_DIR_DEFAULT}" in text


@pytest.fixture
def written(tmp_path):
    return tmp_path / "my examples", write_examples(tmp_path / "my examples")


def test_the_scripts_are_written_with_the_data_directory_filled_in(written):
    directory, paths = written
    scripts = sorted(p.name for p in (ROOT / "sql" / "examples").glob("*.sql"))
    assert sorted(p.name for p in paths if p.suffix == ".sql") == scripts
    for name in scripts:
        text = (directory / name).read_text(encoding="utf-8")
        assert EXAMPLES_DIR_DEFAULT not in text
        original = (ROOT / "sql" / "examples" / name).read_text(encoding="utf-8")
        assert text == original.replace(EXAMPLES_DIR_DEFAULT, str(directory))
    assert str(directory / "shop.orders") in (directory / "02_ingest_cdc.sql").read_text()


def test_the_change_files_decode_to_the_documented_history(written):
    """Every line but one is a change event of shop.orders in binlog order; the one reject is
    the schema-change record, and replaying the rest leaves orders 1, 4 and 5."""
    directory, _ = written
    files = sorted((directory / "shop.orders").iterdir(), key=lambda p: p.stat().st_mtime)
    assert [p.name for p in files] == [
        "shop.orders+0+0000000000.json",
        "shop.orders+0+0000000007.json",
    ]
    lines = [line for p in files for line in p.read_text(encoding="utf-8").splitlines()]
    events = [decode(line) for line in lines]
    rejects = [e.reject for e in events if e.reject]
    assert rejects == ["not a Debezium change event: op is None, expected one of c, r, u, d, t"]
    changes = [e for e in events if not e.reject]
    assert len(changes) == len(ORDER_CHANGES)
    assert [e.position for e in changes] == sorted(e.position for e in changes)
    state = {}
    for event in changes:
        if event.op == "d":
            state.pop(event.before["id"])
        else:
            state[event.after["id"]] = event.after
    assert state == {
        1: {"id": 1, "customer": "ana", "status": "shipped", "amount": 12.5},
        4: {"id": 4, "customer": "dana", "status": "new", "amount": 18.0},
        5: {"id": 5, "customer": "eli", "status": "new", "amount": 42.0},
    }
    assert all(json.loads(line) for line in lines)


def test_writing_again_starts_over_and_leaves_other_files_alone(written):
    directory, _ = written
    (directory / "checkpoints" / "orders").mkdir(parents=True)
    (directory / "shop.orders" / "stray.json").write_text("{}\n")
    (directory / "notes.txt").write_text("mine")
    write_examples(directory)
    assert not (directory / "checkpoints").exists()
    assert not (directory / "shop.orders" / "stray.json").exists()
    assert (directory / "notes.txt").read_text() == "mine"


def test_demo_data_option(tmp_path):
    result = CliRunner().invoke(main, ["--data", str(tmp_path / "ex")])
    assert result.exit_code == 0, result.output
    assert "wrote shop.orders/shop.orders+0+0000000000.json" in result.output
    assert f"sparkext-sql -f {tmp_path / 'ex' / '01_quickstart.sql'}" in result.output
    refused = CliRunner().invoke(main, ["--data", str(tmp_path), "--master", "local[1]"])
    assert refused.exit_code == 2
    assert "--data takes no other options" in refused.output
    assert "--data DIR" in CliRunner().invoke(main, ["--help"]).output


_DATE = re.compile(r"(?<!['_])\b20\d\d-\d\d-\d\d\b")  # not a quoted value or a tag's name
_COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def test_the_docs_hold_no_dated_history():
    """Dated measurements and commit hashes live in benchmarks/results/README.md; the pages'
    dates are example data: inside code, or quoted values."""
    for page in docs.pages():
        prose = re.sub(r"^(`{3,}).*?^\1", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        prose = re.sub(r"`[^`]*`", "", prose)
        name = page.relative_to(ROOT)
        for pattern in (_DATE, _COMMIT):
            found = pattern.search(prose)
            assert found is None, f"{name}: {found.group(0)!r}; move it to benchmarks/results/"
