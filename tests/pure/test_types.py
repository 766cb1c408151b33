"""Types are part of the suite: mypy over the package, with pyproject.toml's [tool.mypy].

The strict set (the override in [tool.mypy] with ``disallow_untyped_defs``: planning, routing,
streaming, service and the base modules) must have no error at all. The rest of the package is
checked with mypy's defaults, and its error count may only fall: BASELINE is the count when it
was last lowered.
mypy keeps its cache in .mypy_cache/ at the repository root, so a second run takes seconds.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import sys
import warnings
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[2]

# mypy's error count over the whole package. Fixed errors? Lower this to the new count in the same
# commit. Never raise it: fix the new error instead (or, rarely, a `# type: ignore[code]` with
# the reason beside it).
BASELINE = 0

_ERROR = re.compile(r"^(?P<path>[^:\s]+\.pyi?):\d+(?::\d+)?: error: ", re.MULTILINE)


def strict_modules() -> list[str]:
    """The module patterns of the strict override in pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    found = [
        override["module"]
        for override in config.get("overrides", [])
        if override.get("disallow_untyped_defs")
    ]
    assert len(found) == 1, "expected one strict override in [tool.mypy] of pyproject.toml"
    return [found[0]] if isinstance(found[0], str) else list(found[0])


def module_of(path: str) -> str:
    """``sparkext/planning/lag.py`` -> ``sparkext.planning.lag``; a package's __init__ is the
    package itself."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_strict(module: str, patterns: list[str]) -> bool:
    """mypy's override matching: ``a.b.*`` is ``a.b`` and everything under it."""
    for pattern in patterns:
        if pattern.endswith(".*"):
            if module == pattern[:-2] or module.startswith(pattern[:-1]):
                return True
        elif fnmatch.fnmatchcase(module, pattern):
            return True
    return False


@pytest.fixture(scope="module")
def mypy_errors(monkeypatch_module: pytest.MonkeyPatch) -> list[str]:
    """mypy's error lines for the configured packages, run from the repository root."""
    assert importlib.util.find_spec("mypy"), "mypy is part of the test extra; run bash .ci/setup"
    from mypy import api

    monkeypatch_module.chdir(ROOT)  # mypy reads pyproject.toml and finds sparkext/ from here
    stdout, stderr, status = api.run([])
    assert status in (0, 1), f"mypy did not run (exit status {status}):\n{stdout}{stderr}"
    errors = [line for line in stdout.splitlines() if _ERROR.match(line)]
    assert (status == 1) == bool(errors), stdout + stderr
    return errors


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_the_strict_modules_have_no_type_errors(mypy_errors):
    patterns = strict_modules()
    strict = [
        line for line in mypy_errors if is_strict(module_of(_ERROR.match(line)["path"]), patterns)
    ]
    assert strict == [], "mypy errors in the strict modules:\n" + "\n".join(strict)


def test_the_type_error_count_only_falls(mypy_errors):
    count = len(mypy_errors)
    assert count <= BASELINE, (
        f"mypy reports {count} errors, more than BASELINE = {BASELINE} in {__file__}: fix the new "
        "ones (never raise BASELINE):\n" + "\n".join(mypy_errors)
    )
    if count < BASELINE:
        warnings.warn(
            f"mypy reports {count} errors, below BASELINE = {BASELINE} in {__file__}: lower "
            f"BASELINE to {count} in this commit",
            stacklevel=1,
        )


@pytest.mark.parametrize(
    ("module", "strict"),
    [
        ("sparkext.planning", True),
        ("sparkext.planning.lag", True),
        ("sparkext.planningx", False),
        ("sparkext.errors", True),
        ("sparkext.errors_more", False),
        ("sparkext.actions.cdc", False),
    ],
)
def test_strict_module_matching(module, strict):
    patterns = ["sparkext.planning.*", "sparkext.errors"]
    assert is_strict(module, patterns) is strict


def test_module_of():
    assert module_of("sparkext/planning/lag.py") == "sparkext.planning.lag"
    assert module_of("sparkext/routing/__init__.py") == "sparkext.routing"
