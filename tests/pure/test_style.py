"""House style is part of the suite: ruff lint and format must be clean.

ruff runs from the interpreter running the tests (``python -m ruff``), not from PATH, so the
suite passes from ``.venv/bin/python -m pytest`` without an activated venv.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_ruff(*args: str) -> subprocess.CompletedProcess[str]:
    assert importlib.util.find_spec("ruff"), "ruff is part of the test extra; run bash .ci/setup"
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff(command):
    done = run_ruff(*command, "sparkext", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_is_found_without_an_activated_venv(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ruff, no venv bin/ on PATH
    done = run_ruff("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ruff ")


def test_test_modules_have_unique_basenames():
    """Test directories are not packages: two test files with one name break collection."""
    from collections import Counter
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    names = Counter(p.name for p in root.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
