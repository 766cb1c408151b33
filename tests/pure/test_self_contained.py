"""A clone of the repository alone passes: no test, benchmark or example reads a path beside it.

Two checks. Statically, no source file names ``../shared`` (the team's directory beside the
repository) or climbs with ``Path(__file__).parents[N]`` above the repository root. Dynamically, a
copy of the pure tests that read fixtures, run from a temporary copy of the repository with nothing
beside it, pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.fixtures import DEBEZIUM_SAMPLES, ROOT

SOURCES = ("tests", "sparkext", "benchmarks", "sql", "conf", "docs", ".ci")
SUFFIXES = {".py", ".sql", ".conf", ".md", ".yml", ".yaml", ".toml", ""}
_BESIDE = re.compile(r"\.\./shared|[\"']shared[\"']\s*/\s*[\"']data[\"']")
_PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")


def _files():
    yield ROOT / "README.md"
    yield ROOT / "mkdocs.yml"
    for top in SOURCES:
        base = ROOT / top
        if not base.exists():
            continue
        for path in base.rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "results" not in path.parts:
                yield path


def test_no_source_names_a_directory_beside_the_repository():
    this = Path(__file__).resolve()
    offenders = []
    for path in _files():
        if path.resolve() == this:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if _BESIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
            for match in _PARENTS.finditer(line):
                if len(path.relative_to(ROOT).parts) - 1 < int(match.group(1)):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: climbs above the root")
    assert not offenders, (
        "these lines read outside the repository; vendor the input into tests/fixtures/ "
        "(tests/helpers/fixtures.py):\n" + "\n".join(offenders)
    )


def test_the_vendored_samples_are_there_and_say_where_they_come_from():
    assert DEBEZIUM_SAMPLES.is_relative_to(ROOT)
    assert len(list(DEBEZIUM_SAMPLES.glob("*.json"))) >= 13
    assert "debezium/debezium" in (DEBEZIUM_SAMPLES / "README.md").read_text()


def test_a_copy_with_nothing_beside_it_passes_the_fixture_tests(tmp_path):
    clone = tmp_path / "alone" / "sparkext"
    ignore = shutil.ignore_patterns(".venv", ".git", "spark-warehouse", "__pycache__", "*.jar")
    for top in ("tests", "sparkext"):
        shutil.copytree(ROOT / top, clone / top, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", clone / "pyproject.toml")
    tests = ["tests/pure/test_debezium.py", "tests/pure/test_fastjson.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert not (tmp_path / "alone" / "shared").exists()
