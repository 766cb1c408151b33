"""Installs and runs wherever Python does: the README's commands, CI, the executors' Python.

The end-to-end half (fresh processes, .ci/setup on a stub project) is tests/spark/test_install.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkext.spark.session import WORKER_PYTHON, build_conf

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The commands of the README's quick start block, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the README's quick start has no bash block"
    lines = [line.strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_ci_runs_exactly_the_readmes_test_command():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    demo, tests = readme_commands()
    assert run[-1] == tests
    assert demo.startswith("bash .ci/setup && ")


def test_readme_commands_need_no_activated_venv_nor_a_pip_friendly_python():
    # `python3` would be the system interpreter (PEP 668 refuses pip there) or whatever PATH
    # holds; setup installs into .venv, so the commands run its interpreter by path.
    for command in readme_commands():
        assert command.startswith("bash .ci/setup && .venv/bin/python -m "), command
    setup = (ROOT / ".ci" / "setup").read_text(encoding="utf-8")
    assert "VENV=.venv" in setup
    assert "python3 -m pip" not in setup


@pytest.mark.parametrize("script", [".ci/setup", ".ci/run"])
def test_ci_scripts_parse(script):
    done = subprocess.run(["bash", "-n", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_local_executors_run_the_drivers_interpreter(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    conf = build_conf({"master": "local[1]", "warehouse": str(tmp_path)})
    assert conf[WORKER_PYTHON] == sys.executable


def test_the_users_spark_pyspark_python_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    conf = build_conf({"master": "local[1]", WORKER_PYTHON: "/opt/other/bin/python"})
    assert conf[WORKER_PYTHON] == "/opt/other/bin/python"  # as spark-submit: the conf wins


def test_the_users_pyspark_python_is_left_to_pyspark(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert WORKER_PYTHON not in build_conf({"master": "local[1]"})


def test_a_cluster_master_leaves_the_executors_python_to_the_cluster(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert WORKER_PYTHON not in build_conf({"master": "yarn"})
