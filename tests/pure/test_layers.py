"""The floors hold: import-linter's contracts (pyproject.toml, [tool.importlinter]) on every
import of the package, function-local ones included, and the function-local imports of
sparkext that remain are counted so that they only go down."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sparkext

pytestmark = pytest.mark.pure

ROOT = Path(sparkext.__file__).parent
REPO = ROOT.parent
# Function-local imports of sparkext modules: each one is a floor in the wrong place or a
# start-up cost. Lower this when you remove some; never raise it.
LOCAL_IMPORTS_BASELINE = 19


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _local_sparkext_imports() -> int:
    count = 0
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sparkext"):
                    count += 1
                elif isinstance(node, ast.Import):
                    count += sum(a.name.startswith("sparkext") for a in node.names)
    return count


def test_function_local_imports_of_sparkext_only_go_down():
    count = _local_sparkext_imports()
    assert count <= LOCAL_IMPORTS_BASELINE, (
        f"{count} function-local imports of sparkext (baseline {LOCAL_IMPORTS_BASELINE}): import "
        "at module level; a floor that needs a local import is a floor in the wrong place."
    )


def test_the_python_api_calls_actions_never_procedures():
    """``sparkext/__init__.py`` imports no procedure module and runs no ``sql(...)`` of its own:
    the Python API calls actions (a routine's declaration, when it needs one, via routing)."""
    tree = ast.parse((ROOT / "__init__.py").read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m.startswith("sparkext.procedures")], imported
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "sql"
    ]
    assert not calls, [ast.unparse(c) for c in calls]
