"""Installs and runs wherever Python does, tried in fresh processes.

A venv's interpreter run by path (pipx, cron, IDEs, systemd) has no venv on PATH: the executors
must still run it, not ``python3`` from PATH. And ``.ci/setup`` must work from a PEP 668 system
Python with no activated venv, and do nothing the second time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each run: set env, start a session with conf, run a mapInArrow that imports pyarrow on the
# executor (as ingest_cdc's writers do), print which Python ran it, which daemon forked it and
# whether pyiceberg's pyarrow module was there before the task imported anything, and whose
# invalidate_caches PySpark's worker calls before each task and whose per-task worker function
# the daemon runs, stop.
SCRIPT = """
import json, os, sys
import sparkext

def where(batches):
    import os, sys
    preloaded = "pyiceberg.io.pyarrow" in sys.modules
    import pyarrow as pa
    import pyspark.worker
    code = getattr(pyspark.worker.importlib.invalidate_caches, "__code__", None)
    invalidation = "/".join(code.co_filename.split("/")[-2:]) if code else "importlib"
    # PySpark's daemon run as a script is __main__; imported (by sparkext's), pyspark.daemon
    runner = sys.modules.get("pyspark.daemon") or sys.modules["__main__"]
    per_task = runner.worker.__code__.co_filename
    acks = "/".join(per_task.split("/")[-2:])
    with open(f"/proc/{os.getppid()}/cmdline") as parent:
        daemon = parent.read().replace(chr(0), " ").strip()
    for batch in batches:
        yield pa.RecordBatch.from_pydict(
            {
                "python": [sys.executable],
                "daemon": [daemon],
                "preloaded": [preloaded],
                "invalidation": [invalidation],
                "acks": [acks],
            }
        )

for run in json.loads(sys.argv[2]):
    os.environ.update(run.get("env", {}))
    spark = sparkext.session(master="local[1]", warehouse=sys.argv[1], **run.get("conf", {}))
    ddl = "python string, daemon string, preloaded boolean, invalidation string, acks string"
    row = spark.range(1).mapInArrow(where, ddl).first()
    print(json.dumps({**row.asDict(), "env": os.environ.get("PYSPARK_PYTHON")}), flush=True)
    spark.stop()
"""


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def without_venv(tmp_path: Path) -> dict[str, str]:
    """This environment as cron would give it: no venv, and a `python3` first on PATH that fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python"):
        script(bin_dir / name, "echo 'wrong interpreter' >&2; exit 1")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_sessions(tmp_path: Path, env: dict[str, str], runs: list[dict]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "wh"), json.dumps(runs)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _assert_sparkexts_daemon(result: dict) -> None:
    """The executors ran the driver's interpreter, forked from sparkext's preloading daemon."""
    assert result["python"] == sys.executable
    assert result["env"] is None  # PYSPARK_PYTHON restored
    # forked from sparkext's daemon, which imported the executor modules before forking
    assert result["daemon"].endswith("-m sparkext.executors.daemon"), result["daemon"]
    assert result["preloaded"] is True
    # Spark's archives on the workers' path are not re-read before every task
    assert result["invalidation"] == "executors/daemon.py", result["invalidation"]
    # and each task runs through sparkext's wrapper, which sets the socket's TCP options
    assert result["acks"] == "executors/daemon.py", result["acks"]


def _assert_pysparks_daemon(result: dict) -> None:
    assert result["daemon"].endswith("-m pyspark.daemon"), result["daemon"]
    assert result["preloaded"] is False
    assert result["invalidation"] != "executors/daemon.py", result["invalidation"]
    assert result["acks"] == "pyspark/daemon.py", result["acks"]


def _chosen_pythons(tmp_path: Path) -> list[str]:
    return [
        script(
            tmp_path / f"python-{n}", f'touch "{tmp_path}/ran-{n}"; exec "{sys.executable}" "$@"'
        )
        for n in ("conf", "env")
    ]


def _assert_chosen_pythons_ran(tmp_path: Path, chosen: list[str], results: list[dict]) -> None:
    assert [r["python"] for r in results] == [sys.executable, sys.executable]
    assert (tmp_path / "ran-conf").exists()  # spark.pyspark.python was ignored before
    assert (tmp_path / "ran-env").exists()
    assert [r["env"] for r in results] == [None, chosen[1]]


@pytest.mark.slow
@pytest.mark.stress
def test_executors_run_the_drivers_interpreter_without_an_activated_venv(tmp_path):
    (result,) = run_sessions(tmp_path, without_venv(tmp_path), [{}])
    _assert_sparkexts_daemon(result)


@pytest.mark.slow
@pytest.mark.stress
def test_the_users_choice_of_python_daemon_is_respected(tmp_path):
    (result,) = run_sessions(
        tmp_path,
        without_venv(tmp_path),
        [{"conf": {"spark.python.daemon.module": "pyspark.daemon"}}],
    )
    _assert_pysparks_daemon(result)


@pytest.mark.slow
@pytest.mark.stress
def test_the_users_choice_of_executor_python_is_respected(tmp_path):
    env = without_venv(tmp_path)
    chosen = _chosen_pythons(tmp_path)
    results = run_sessions(
        tmp_path,
        env,
        [{"conf": {"spark.pyspark.python": chosen[0]}}, {"env": {"PYSPARK_PYTHON": chosen[1]}}],
    )
    _assert_chosen_pythons_ran(tmp_path, chosen, results)


@pytest.mark.slow
def test_executor_python_and_daemon_choices_in_one_process(tmp_path):
    """The default tier's variant of the three tests above: their four sessions one after
    another in ONE process (one JVM start instead of three), with their assertions."""
    env = without_venv(tmp_path)
    chosen = _chosen_pythons(tmp_path)
    ours, users_daemon, by_conf, by_env = run_sessions(
        tmp_path,
        env,
        [
            {},
            {"conf": {"spark.python.daemon.module": "pyspark.daemon"}},
            {"conf": {"spark.pyspark.python": chosen[0]}},
            {"env": {"PYSPARK_PYTHON": chosen[1]}},
        ],
    )
    _assert_sparkexts_daemon(ours)
    _assert_pysparks_daemon(users_daemon)
    _assert_chosen_pythons_ran(tmp_path, chosen, [by_conf, by_env])


# A project that .ci/setup can install offline in seconds: an in-tree build backend (no build
# requirements to download) making an editable wheel whose .pth adds the project directory, where
# stub sparkext, pyspark and pytest modules stand in for the real ones.
STUB_PYPROJECT = """
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "stub"
version = "0"
"""
STUB_BACKEND = """
import base64, hashlib, os, zipfile

def _wheel(directory, *args, **kwargs):
    name = "stub-0-py3-none-any.whl"
    files = {
        "stub.pth": os.path.abspath(".") + "\\n",
        "stub-0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: stub\\nVersion: 0\\n"
        "Provides-Extra: test\\n",
        "stub-0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: stub\\n"
        "Root-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            wheel.writestr(path, data)
        record.append("stub-0.dist-info/RECORD,,")
        wheel.writestr("stub-0.dist-info/RECORD", "\\n".join(record))
    return name

build_wheel = build_editable = _wheel
"""


def system_python() -> str:
    """A Python >= 3.10 with venv: the Debian one (PEP 668) when there is one, else our base."""
    probe = "import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 10))"
    for python in ("/usr/bin/python3", getattr(sys, "_base_executable", sys.executable)):
        if Path(python).exists() and subprocess.run([python, "-c", probe]).returncode == 0:
            return python
    pytest.skip("no Python >= 3.10 with venv and ensurepip to build a venv from")


@pytest.mark.slow
def test_setup_makes_a_venv_from_the_system_python_and_then_does_nothing(tmp_path):
    project = tmp_path / "project"
    (project / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "setup", project / ".ci" / "setup")
    (project / "pyproject.toml").write_text(STUB_PYPROJECT)
    (project / "backend.py").write_text(STUB_BACKEND)
    for module in ("sparkext", "pyspark", "pytest"):
        (project / f"{module}.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    python = system_python()
    env.update(SPARKEXT_PYTHON=python, PIP_NO_INDEX="1")

    def setup() -> str:
        done = subprocess.run(
            ["bash", ".ci/setup"], cwd=project, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "installing sparkext" in setup()
    venv_python = project / ".venv" / "bin" / "python"
    imported = subprocess.run(
        [str(venv_python), "-I", "-c", "import sparkext, pyspark, pytest"], cwd=tmp_path
    )
    assert imported.returncode == 0  # installed into the venv, not the system Python
    assert f"home = {Path(python).parent}\n" in (project / ".venv" / "pyvenv.cfg").read_text()
    assert "installing" not in setup()  # the second run is a no-op
    with (project / "pyproject.toml").open("a") as pyproject:
        pyproject.write("# changed\n")
    assert "installing sparkext" in setup()  # changed dependencies: installed again
    venv_python.unlink()
    assert "installing sparkext" in setup()  # a broken venv is rebuilt
    assert venv_python.exists()
