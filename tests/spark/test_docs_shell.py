"""The docs' example scripts, run as a new user runs them: one real ``sparkext-sql -f``
process with the shipped conf (``conf/spark-defaults.conf``: its parallelism, not the suite's),
a new warehouse, the statement thread — and what it prints is what the docs state after
each block taken from those scripts (issue 50: tiered_optimize failed only there).

Stress tier (a real process with the shipped conf runs every script for ~45 s). In the default tier
the same scripts and stated outputs run in-process (tests/spark/test_docs_examples.py), and a
routine on a thread new to the JVM — the shell's statement thread — is
tests/spark/test_first_week.py::test_a_routine_on_a_thread_new_to_the_jvm_reads_staged_files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import doc_blocks as docs
from tests.helpers.doc_blocks import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.stress]
SCRIPTS = (  # tiered_optimize first: a statement thread no earlier routine has touched
    "06_tiered_optimize",
    "01_quickstart",
    "02_ingest_cdc",
    "03_rewrite_equality_deletes",
    "04_snapshot_as_of_event_time",
    "07_maintenance",
)


def _stated(path: str) -> list[str]:
    """The output blocks after the docs' blocks taken from ``path``, in page order."""
    return [
        e.output
        for e in docs.examples()
        if e.block.markers.get("from") == path and e.output is not None
    ]


def test_the_example_scripts_print_what_the_docs_say_in_a_real_shell(tmp_path):
    examples = tmp_path / "examples"
    env = {**os.environ, "HOME": str(tmp_path), "SPARKEXT_WAREHOUSE": str(tmp_path / "wh")}
    env.pop("SPARKEXT_LOG_LEVEL", None)
    bin_dir = Path(sys.executable).parent
    demo = subprocess.run(
        [str(bin_dir / "sparkext-demo"), "--data", str(examples)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    script = tmp_path / "all.sql"
    script.write_text("\n".join((examples / f"{n}.sql").read_text() for n in SCRIPTS))
    shell = subprocess.run(
        [str(bin_dir / "sparkext-sql"), "-f", str(script)],
        capture_output=True, text=True, env=env, timeout=900, check=False, cwd=ROOT,
    )  # fmt: skip
    assert shell.returncode == 0, shell.stderr[-3000:]
    printed = shell.stdout + shell.stderr
    for name in SCRIPTS:
        for stated in _stated(f"sql/examples/{name}.sql"):
            stated = docs.relocate(stated, examples)
            assert docs.missing(stated, printed) is None, (name, docs.missing(stated, printed))
