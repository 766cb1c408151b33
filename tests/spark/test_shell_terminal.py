"""The interactive shell in a real pseudo-terminal, as a user meets it (pexpect).

One fresh process: what it says while Spark starts, a result table on lines of its own (the
spinner cleared first), Ctrl-C on a long statement (one line, the session usable at once), and
no Python or Java traceback anywhere in the transcript.
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")
FOREVER = "SELECT sum(hash(id)) AS s FROM range(0, 400000000000, 1, 2)"


@pytest.mark.slow
def test_starting_cancelling_and_answering_in_a_terminal(tmp_path):
    warehouse = tmp_path / "wh"
    env = {
        **os.environ,
        "SPARKEXT_WAREHOUSE": str(warehouse),
        "SPARKEXT_HISTORY": str(tmp_path / "history"),
        "SPARKEXT_MASTER": "local[2]",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
    }
    env.pop("SPARKEXT_LOG_LEVEL", None)
    transcript = io.StringIO()
    exe = os.path.join(os.path.dirname(sys.executable), "sparkext-sql")
    child = pexpect.spawn(
        exe, env=env, encoding="utf-8", timeout=300, dimensions=(50, 220), cwd=str(tmp_path)
    )
    child.logfile_read = transcript
    try:
        child.expect_exact("Starting Spark: master local[2], catalog lake (hadoop) at ")
        child.expect_exact(str(warehouse))
        child.expect(r"Spark 3\.5\.\d+ ready in \d+\.\d s")
        child.expect_exact("sparkext-sql>")

        child.send("SELECT 1 AS x;\r")
        child.expect_exact("Time taken")
        lines = ANSI.sub("", child.before).splitlines()
        table = [line for line in lines if "| x" in line or line.startswith("+")]
        assert table and all(line.startswith(("+", "|")) for line in table), lines
        assert not any("running" in line and "+-" in line for line in lines), lines

        child.expect_exact("sparkext-sql>")
        child.send(FOREVER + ";\r")
        child.expect("running|stage")  # the spinner: the statement is under way
        child.expect(r"stage \d+: \d+/\d+ tasks", timeout=120)
        child.sendintr()
        child.expect_exact("Cancelled; nothing was committed.", timeout=120)
        child.expect_exact("sparkext-sql>")

        child.send("SELECT 42 AS answer;\r")  # answers now, not behind the cancelled job
        child.expect(r"\| 42 ", timeout=120)
        child.expect_exact("sparkext-sql>")
        child.send("quit;\r")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    text = ANSI.sub("", transcript.getvalue())
    for noise in ("Traceback", "reentrant call", "Py4J", "\tat org.", "ERROR"):
        assert noise not in text, text[-3000:]


def _spark_processes(marker: str) -> list[int]:
    """Spark's processes (spark-submit, its JVM) whose environment holds ``marker`` (this
    test's warehouse path)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            ours = marker.encode() in environ.read_bytes()
            spark = b"spark" in (environ.parent / "cmdline").read_bytes().replace(b"sparkext", b"")
        except OSError:
            continue
        if ours and spark:
            found.append(int(environ.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_while_spark_starts_is_one_line_and_leaves_no_jvm(tmp_path):
    """Ctrl-C as soon as the JVM is being launched (the user started the shell in the wrong
    place): one line, status 130, no py4j traceback, and no JVM left running on its own.

    The shell runs under ``sh``, as under a user's shell: the terminal's session outlives it,
    so nothing is killed by a hangup when it exits (a JVM PySpark lost would run on)."""
    warehouse = str(tmp_path / "wh-ctrl-c-at-start")
    env = {
        **os.environ,
        "SPARKEXT_WAREHOUSE": warehouse,
        "SPARKEXT_HISTORY": str(tmp_path / "history"),
        "SPARKEXT_MASTER": "local[2]",
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    env.pop("SPARKEXT_LOG_LEVEL", None)
    transcript = io.StringIO()
    exe = os.path.join(os.path.dirname(sys.executable), "sparkext-sql")
    script = f"trap : INT; '{exe}'; echo status=$?; sleep 300"  # sh outlives a Ctrl-C
    child = pexpect.spawn("sh", ["-c", script], env=env, encoding="utf-8", timeout=300)
    child.logfile_read = transcript
    try:
        child.expect_exact("Starting Spark: ")
        deadline = time.monotonic() + 120
        while not _spark_processes(warehouse):
            assert time.monotonic() < deadline, "no JVM was launched"
            time.sleep(0.02)
        child.sendintr()
        child.expect_exact("Cancelled while Spark was starting.", timeout=120)
        child.expect_exact("status=130", timeout=60)
        deadline = time.monotonic() + 60
        while _spark_processes(warehouse):
            assert time.monotonic() < deadline, f"left running: {_spark_processes(warehouse)}"
            time.sleep(0.5)
    finally:
        child.close(force=True)
    text = ANSI.sub("", transcript.getvalue())
    for noise in ("Traceback", "KeyboardInterrupt", "reentrant call", "Py4J", "ERROR"):
        assert noise not in text, text
