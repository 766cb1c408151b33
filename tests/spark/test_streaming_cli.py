"""The issue's 'done when', tried as a new user would, in fresh processes (sparkext-sql).

The stress tier runs the real processes; the default tier runs the same commands, with the same
oracles, in this process (click's CliRunner on the shared session, the job's tables in a
namespace of their own), Ctrl-C as a SIGINT to this process and the host zone as
tests/helpers/zones.py's host_zone (the Python process's zone: the JVM's stays the real one's).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.shell_lines import said
from tests.helpers.zones import host_zone

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "sql" / "jobs" / "clicks_per_minute.sql"
EXE = os.path.join(os.path.dirname(sys.executable), "sparkext-sql")
SETUP = """
CREATE NAMESPACE IF NOT EXISTS lake.demo;
CREATE TABLE lake.demo.clicks (user_id BIGINT, item_id BIGINT, ts TIMESTAMP) USING iceberg;
CREATE TABLE lake.demo.items (item_id BIGINT, category STRING) USING iceberg;
INSERT INTO lake.demo.items VALUES (1, 'books'), (2, 'games'), (3, 'books');
INSERT INTO lake.demo.clicks VALUES
  (10, 1, TIMESTAMP '2026-11-20 10:00:05'), (11, 2, TIMESTAMP '2026-11-20 10:00:30'),
  (12, 3, TIMESTAMP '2026-11-20 10:00:59'), (10, 2, TIMESTAMP '2026-11-20 10:01:10'),
  (13, 9, TIMESTAMP '2026-11-20 10:01:20'), (14, 1, TIMESTAMP '2026-11-20 10:03:00'),
  (15, 1, TIMESTAMP '2026-11-20 12:00:00');
"""
RESULT = "SELECT window_start, category, clicks FROM lake.demo.clicks_per_minute ORDER BY 1, 2"
SINK = "lake.demo.clicks_per_minute"
EXPECTED = [
    "2026-11-20 10:00:00,books,2",
    "2026-11-20 10:00:00,games,1",
    "2026-11-20 10:01:00,games,1",
    "2026-11-20 10:03:00,books,1",
]


def run(env, *args):
    done = subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def rows(env) -> list[str]:
    out = run(env, "--output-format", "csv", "-e", RESULT).stdout.splitlines()
    return out[1:]


def rows_read_here(spark, warehouse: Path) -> list[str]:
    """The result table as the shell prints it (csv), read by the shared session through a
    catalog on that warehouse (no cached tables): one JVM start less per look."""
    catalog = f"cli_{warehouse.parent.name}".replace("-", "_")
    settings = {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "hadoop"}
    settings |= {".warehouse": str(warehouse), ".cache-enabled": "false"}
    for key, value in settings.items():
        spark.conf.set(f"spark.sql.catalog.{catalog}{key}", value)
    found = spark.sql(
        "SELECT date_format(window_start, 'yyyy-MM-dd HH:mm:ss'), category, clicks "
        f"FROM {catalog}.demo.clicks_per_minute ORDER BY 1, 2"
    ).collect()
    return [",".join(str(value) for value in row) for row in found]


class InProcess:
    """The commands run in this process on the shared session (CliRunner), the job's tables in a
    namespace of their own (the shared warehouse holds other tests' lake.demo)."""

    _ids = itertools.count(1)

    def __init__(self, tmp_path: Path):
        self.namespace = f"lake.demo_cli{next(self._ids)}"
        self.job = tmp_path / "clicks_per_minute.sql"
        self.job.write_text(self.named(JOB.read_text()))

    def named(self, text: str) -> str:
        return text.replace("lake.demo", self.namespace)

    def invoke(self, *args: str):
        from sparkext.cli.shell import cli

        return CliRunner().invoke(cli, [self.named(a) for a in args])

    def run(self, *args: str):
        done = self.invoke(*args)
        assert done.exit_code == 0, done.stderr + repr(done.exception)
        return done

    def rows(self) -> list[str]:
        return self.run("--output-format", "csv", "-e", RESULT).stdout.splitlines()[1:]


def interrupt_after_first_commit(checkpoint: Path) -> threading.Thread:
    """Ctrl-C for this process once the stream's first micro-batch has committed (Spark's commit
    log has an entry): the stream command waits on the main thread, as in its own process."""

    def watch() -> None:
        deadline = time.time() + 300
        while time.time() < deadline and not list((checkpoint / "offsets" / "commits").glob("0")):
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=watch, name="ctrl-c-after-first-commit", daemon=True)
    watcher.start()
    return watcher


@pytest.fixture
def own_signals():
    """The stream command installs its own SIGINT and SIGTERM handlers: restored afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def backfill_the_stream_wrote(run, invoke, rows, job: Path, sink: str) -> None:
    """The dry run, two backfills and a bad --from, after a stream wrote EXPECTED: ``run`` and
    ``invoke`` start a command (``run`` asserts exit 0), ``rows`` reads the result table."""
    dry = run("backfill", str(job), "--from", "2026-11-20 00:00:00", "--to", "2026-11-21",
              "--dry-run")  # fmt: skip
    assert f"INSERT INTO {sink}" in dry.stdout
    assert "REPLACE WHERE" in dry.stdout and "WINDOW(ts, '1 minutes')" in dry.stdout
    assert rows() == EXPECTED  # a dry run writes nothing

    for _ in range(2):  # the backfill writes what the stream wrote, and a rerun changes nothing
        run("backfill", str(job), "--from", "2026-11-20 00:00:00", "--to", "2026-11-20 12:00:00")
        assert rows() == EXPECTED

    code, stderr = invoke("backfill", str(job), "--from", "yesterday", "--to", "2026-11-21")
    assert code == 1
    assert said(stderr) == (  # refused before Spark starts, by the option's name
        "Error: --from 'yesterday' is not a time; write 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD'."
    )


def test_stream_then_backfill_the_same_file_in_process(spark, tmp_path, own_signals):
    """test_stream_then_backfill_the_same_file's commands and oracles, in this process."""
    here = InProcess(tmp_path)
    here.run("-e", SETUP)
    checkpoint = tmp_path / "ck"
    watcher = interrupt_after_first_commit(checkpoint)
    stream = here.run("stream", str(here.job), "--checkpoint", str(checkpoint), "--interval", "1s")
    watcher.join(10)
    assert f"{here.named(SINK)} up to" in stream.stderr
    assert "stopped; checkpoint intact" in stream.stderr
    for noise in ("Traceback", "reentrant call", "Py4J", "ERROR"):  # Ctrl-C is one line
        assert noise not in stream.stderr
    assert (checkpoint / "offsets" / "commits").is_dir()
    # The stream emitted every minute up to its watermark (12:00 - 5 s): item 9 has no category.
    assert here.rows() == EXPECTED

    def invoke(*args):
        done = here.invoke(*args)
        return done.exit_code, done.stderr

    backfill_the_stream_wrote(here.run, invoke, here.rows, here.job, here.named(SINK))


@pytest.mark.slow
@pytest.mark.stress
def test_stream_then_backfill_the_same_file(spark, tmp_path):
    env = {**os.environ, "SPARKEXT_WAREHOUSE": str(tmp_path / "wh")}
    run(env, "-e", SETUP)
    checkpoint = tmp_path / "ck"
    stream = subprocess.Popen(
        [EXE, "stream", str(JOB), "--checkpoint", str(checkpoint), "--interval", "1s"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    deadline = time.time() + 300
    while time.time() < deadline:
        line = stream.stderr.readline()
        lines.append(line)
        if not line or f"{SINK} up to" in line:
            break
    stream.send_signal(signal.SIGINT)
    _, rest = stream.communicate(timeout=120)
    assert stream.returncode == 0, "".join(lines) + rest
    assert "stopped; checkpoint intact" in rest
    for noise in ("Traceback", "reentrant call", "Py4J", "ERROR"):  # Ctrl-C is one line
        assert noise not in "".join(lines) + rest
    assert (checkpoint / "offsets" / "commits").is_dir()
    # The stream emitted every minute up to its watermark (12:00 - 5 s): item 9 has no category.
    assert rows(env) == EXPECTED  # as the shell prints it; later looks read it here

    def invoke(*args):
        done = subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=600)
        return done.returncode, done.stderr

    backfill_the_stream_wrote(
        lambda *args: run(env, *args), invoke, lambda: rows_read_here(spark, tmp_path / "wh"),
        JOB, SINK,
    )  # fmt: skip


def test_stream_on_an_asia_shanghai_host_in_process(spark, tmp_path, own_signals):
    """The next test's commands and oracles in this process, its OS zone Asia/Shanghai
    (host_zone) against the shared session's UTC."""
    here = InProcess(tmp_path)
    with host_zone("Asia/Shanghai"):
        here.run("-e", SETUP)
        checkpoint = f"file://{tmp_path}/ck"
        done = here.run("stream", str(here.job), "--checkpoint", checkpoint, "--available-now")
        # The watermark is 12:00:00 - 5 s (UTC, the session zone), not 8 hours later.
        assert f"{here.named(SINK)} up to 2026-11-20 11:59:55" in done.stderr
        assert f"checkpoint {checkpoint};" in done.stderr
        assert (tmp_path / "ck" / "sparkext-state.json").is_file()
        assert (tmp_path / "ck" / "offsets" / "commits").is_dir()
        assert here.rows() == EXPECTED


@pytest.mark.slow
@pytest.mark.stress
def test_stream_on_an_asia_shanghai_host_emits_what_a_utc_host_emits(tmp_path):
    """A real host zone (TZ for the Python process and the JVM) against the UTC session of
    conf/spark-defaults.conf: the same windows, the progress and the shell's output in the
    session zone, the state where a file:// checkpoint URI says."""
    env = {**os.environ, "SPARKEXT_WAREHOUSE": str(tmp_path / "wh"), "TZ": "Asia/Shanghai"}
    run(env, "-e", SETUP)
    checkpoint = f"file://{tmp_path}/ck"
    done = run(env, "stream", str(JOB), "--checkpoint", checkpoint, "--available-now")
    # The watermark is 12:00:00 - 5 s (UTC, the session zone), not 8 hours later.
    assert f"{SINK} up to 2026-11-20 11:59:55" in done.stderr
    assert f"checkpoint {checkpoint};" in done.stderr
    assert (tmp_path / "ck" / "sparkext-state.json").is_file()
    assert (tmp_path / "ck" / "offsets" / "commits").is_dir()
    assert rows(env) == EXPECTED
