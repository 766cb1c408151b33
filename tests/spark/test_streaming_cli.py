"""The issue's 'done when', tried as a new user would, in fresh processes (sparkext-sql)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.shell_lines import said

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


@pytest.mark.slow
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
        if not line or "lake.demo.clicks_per_minute up to" in line:
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

    dry = run(
        env,
        "backfill",
        str(JOB),
        "--from",
        "2026-11-20 00:00:00",
        "--to",
        "2026-11-21",
        "--dry-run",
    )
    assert "INSERT INTO lake.demo.clicks_per_minute" in dry.stdout
    assert "REPLACE WHERE" in dry.stdout and "WINDOW(ts, '1 minutes')" in dry.stdout
    assert rows_read_here(spark, tmp_path / "wh") == EXPECTED  # a dry run writes nothing

    for _ in range(2):  # the backfill writes what the stream wrote, and a rerun changes nothing
        run(
            env,
            "backfill",
            str(JOB),
            "--from",
            "2026-11-20 00:00:00",
            "--to",
            "2026-11-20 12:00:00",
        )
        assert rows_read_here(spark, tmp_path / "wh") == EXPECTED

    bad = subprocess.run(
        [EXE, "backfill", str(JOB), "--from", "yesterday", "--to", "2026-11-21"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert bad.returncode == 1
    assert said(bad.stderr) == (  # refused before Spark starts, by the option's name
        "Error: --from 'yesterday' is not a time; write 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD'."
    )


@pytest.mark.slow
def test_stream_on_an_asia_shanghai_host_emits_what_a_utc_host_emits(tmp_path):
    """A real host zone (TZ for the Python process and the JVM) against the UTC session of
    conf/spark-defaults.conf: the same windows, the progress and the shell's output in the
    session zone, the state where a file:// checkpoint URI says."""
    env = {**os.environ, "SPARKEXT_WAREHOUSE": str(tmp_path / "wh"), "TZ": "Asia/Shanghai"}
    run(env, "-e", SETUP)
    checkpoint = f"file://{tmp_path}/ck"
    done = run(env, "stream", str(JOB), "--checkpoint", checkpoint, "--available-now")
    # The watermark is 12:00:00 - 5 s (UTC, the session zone), not 8 hours later.
    assert "lake.demo.clicks_per_minute up to 2026-11-20 11:59:55" in done.stderr
    assert f"checkpoint {checkpoint};" in done.stderr
    assert (tmp_path / "ck" / "sparkext-state.json").is_file()
    assert (tmp_path / "ck" / "offsets" / "commits").is_dir()
    assert rows(env) == EXPECTED
