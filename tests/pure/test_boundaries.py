"""The architecture's import boundaries, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import sparkext

ROOT = Path(sparkext.__file__).parent


def _sources(package: str | None = None):
    base = ROOT / package if package else ROOT
    return sorted(base.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_planning_imports_no_spark_and_no_py4j():
    for path in _sources("planning"):
        bad = {n for n in _imports(path) if n.split(".")[0] in ("pyspark", "py4j")}
        assert not bad, f"{path.name} imports {bad}"


def test_only_the_spark_and_iceberg_packages_touch_the_jvm():
    for path in _sources():
        if path.relative_to(ROOT).parts[0] in ("spark", "iceberg"):
            continue
        tree = ast.parse(path.read_text())
        attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        jvm = attributes & {"_jvm", "_jsparkSession", "_jsc", "_jdf", "java_exception"}
        assert not jvm, f"{path.relative_to(ROOT)} uses {jvm}"
        py4j = {n for n in _imports(path) if n.split(".")[0] == "py4j"}
        assert not py4j, f"{path.relative_to(ROOT)} imports {py4j}"


def test_every_routine_module_is_registered():
    from sparkext.procedures.registry import ROUTINES

    modules = {
        p.stem
        for p in _sources("procedures")
        if p.stem not in ("__init__", "base", "binding", "registry")
    }
    assert modules == set(ROUTINES)
