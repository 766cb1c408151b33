"""sparkext-sql's command line as users of spark-sql, beeline and psql expect it (no Spark)."""

from __future__ import annotations

import io
import os
import re
import signal
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkext.cli.output import write
from sparkext.cli.shell import cli, vertical_terminators
from sparkext.spark.session import build_conf, describe, log_options
from tests.helpers.fake_spark import FakeSpark

pytestmark = pytest.mark.pure


def run(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="sparkext-sql")


def test_help_lists_the_subcommands_and_the_options():
    result = run("--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:", 1)[1]
    assert "backfill" in commands and "stream" in commands
    for option in ("-e SQL", "-f FILE", "-i FILE", "--output-format", "-V, --version"):
        assert option in result.stdout
    assert "vertical" in result.stdout


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_sparkext_pyspark_and_iceberg(flag):
    result = run(flag)
    assert result.exit_code == 0
    assert result.stdout.strip() == (
        f"sparkext {version('sparkext')} (PySpark {version('pyspark')}, Iceberg 1.10.2)"
    )


def test_a_mistyped_subcommand_gets_a_suggestion():
    result = run("strem", "job.sql")
    assert result.exit_code == 2
    assert "No such command 'strem' (did you mean 'stream'?)" in result.stderr
    assert "commands: backfill, optimize-service, report, serve, stream" in result.stderr


def test_sql_without_e_is_told_to_use_e():
    result = run("SELECT 1")
    assert result.exit_code == 2
    assert "'SELECT 1' looks like SQL; run it with -e" in result.stderr


def test_shell_options_do_not_apply_to_a_subcommand():
    result = run("-e", "SELECT 1", "backfill", "job.sql", "--from", "a", "--to", "b")
    assert result.exit_code == 2
    assert "-e, -f and -i do not apply to 'backfill'" in result.stderr


def test_backslash_g_ends_a_statement_for_vertical_output_outside_strings_only():
    text, where = vertical_terminators("SELECT 1 AS a\\G\nSELECT '\\G' AS b;\n-- \\G\n")
    assert text == "SELECT 1 AS a; \nSELECT '\\G' AS b;\n-- \\G\n"
    assert where == {13}
    assert vertical_terminators("SELECT 2;") == ("SELECT 2;", set())


def test_vertical_output_aligns_names_and_numbers_rows():
    out = io.StringIO()
    assert (
        write(["table", "small_files"], [("lake.db.t", 3), ("lake.db.u", None)], "vertical", out)
        == 2
    )
    assert out.getvalue().splitlines() == [
        "*************************** 1. row ***************************",
        "      table: lake.db.t",
        "small_files: 3",
        "*************************** 2. row ***************************",
        "      table: lake.db.u",
        "small_files: NULL",
    ]


def test_the_default_warehouse_does_not_depend_on_the_current_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARKEXT_WAREHOUSE", raising=False)
    monkeypatch.delenv("SPARKEXT_CONF_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = set()
    for where in (tmp_path / "a", tmp_path / "b"):
        where.mkdir()
        monkeypatch.chdir(where)
        found.add(build_conf({})["spark.sql.catalog.lake.warehouse"])
    assert found == {str(tmp_path / "home" / ".sparkext" / "warehouse")}


def test_startup_line_names_master_catalog_and_warehouse(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARKEXT_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("SPARKEXT_CONF_DIR", raising=False)
    text = describe(build_conf({"master": "local[2]"}))
    assert text == f"master local[2], catalog lake (hadoop) at {tmp_path / 'wh'}"


def test_a_conf_directory_without_log4j2_gets_the_shipped_one(monkeypatch, tmp_path):
    shipped = Path(__file__).resolve().parents[2] / "conf"
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    defaults = (shipped / "spark-defaults.conf").read_text(encoding="utf-8")
    (conf_dir / "spark-defaults.conf").write_text(defaults, encoding="utf-8")
    monkeypatch.setenv("SPARKEXT_CONF_DIR", str(conf_dir))
    options = build_conf({})["spark.driver.extraJavaOptions"]
    assert f"-Dlog4j2.configurationFile={shipped / 'log4j2.properties'}" in options
    # ... and a conf without the option at all (cluster.conf.example) gets it too.
    assert (
        "-Dlog4j2.configurationFile=" in log_options({}, conf_dir)["spark.driver.extraJavaOptions"]
    )
    # A directory that has its own keeps it.
    (conf_dir / "log4j2.properties").write_text("rootLogger.level = warn\n", encoding="utf-8")
    options = build_conf({})["spark.driver.extraJavaOptions"]
    assert f"-Dlog4j2.configurationFile={conf_dir / 'log4j2.properties'}" in options


def test_verbose_hands_its_level_to_log4j_without_leaking(monkeypatch, tmp_path):
    options = log_options({}, tmp_path, "WARN")["spark.driver.extraJavaOptions"]
    assert options.endswith("-Dsparkext.log.level=warn")
    shipped = (Path(__file__).resolve().parents[2] / "conf" / "log4j2.properties").read_text()
    assert "rootLogger.level = ${sys:sparkext.log.level:-error}" in shipped
    # what a failed micro-batch or a cancel makes Spark log at ERROR shows only with --verbose
    for logger in ("MicroBatchExecution", "StreamExecution", "TorrentBroadcast"):
        name = re.search(rf"logger\.(\w+)\.name = org\.apache\.spark\.[\w.]+\.{logger}\n", shipped)
        assert name, logger
        assert f"logger.{name.group(1)}.level = ${{sys:sparkext.log.level:-off}}" in shipped


@pytest.mark.parametrize(
    "command",
    [["backfill", "--from", "2026-11-20", "--to", "2026-11-21"], ["stream", "--checkpoint", "ck"]],
)
def test_a_job_syntax_error_is_reported_before_spark_starts(tmp_path, monkeypatch, command):
    import sparkext.cli.common as common

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for a job that does not parse")

    monkeypatch.setattr(common, "start_session", no_spark)
    monkeypatch.setattr("sparkext.cli.streaming.start_session", no_spark)
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE s (user_id BIGINT, ts TIMESTAMP);\n"
        "INSERT INTO t SELECT user_id, COUNT(*) FROM s\n"
        "GROUP BY user_id,;\n"
    )
    name, *options = command
    result = run(name, str(job), *options)
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith(f"Error: {job}: line 3, column "), line
    assert "trailing comma" in line


@pytest.mark.parametrize(
    ("command", "sentence"),
    [
        (
            ["backfill", "--from", "2026-11-2x", "--to", "2026-11-21"],
            "Error: --from '2026-11-2x' is not a time; write 'YYYY-MM-DD HH:MM:SS' or "
            "'YYYY-MM-DD'.",
        ),
        (
            ["backfill", "--from", "2026-11-21", "--to", "2026-11-20"],
            "Error: --from 2026-11-21 00:00:00 is not before --to 2026-11-20 00:00:00; swap "
            "--from and --to.",
        ),
        (
            ["backfill", "--from", "2026-11-20", "--to", "2026-11-21", "--lookup-as-of", "now"],
            "Error: --lookup-as-of 'now' is not 'end', 'latest' or a time such as "
            "'2026-11-20 00:00:00'.",
        ),
        (
            ["stream", "--checkpoint", "ck", "--interval", "four"],
            "Error: 'four' is not a duration; write a number and a unit, e.g. '10 minutes' or "
            "'1 h'.",
        ),
        (
            ["stream", "--checkpoint", "ck", "--from", "yesterday"],
            "Error: --from 'yesterday' is not a time; write 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD'.",
        ),
    ],
)
def test_a_bad_option_value_is_refused_before_spark_starts(
    tmp_path, monkeypatch, command, sentence
):
    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for options that the run refuses")

    monkeypatch.setattr("sparkext.cli.streaming.start_session", no_spark)
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE s (user_id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "INSERT INTO t SELECT user_id, ts FROM s;\n"
    )
    name, *options = command
    result = run(name, str(job), *options)
    assert result.exit_code == 1
    assert result.stderr.strip() == sentence


def test_good_option_values_reach_spark(tmp_path, monkeypatch):
    def started(*args, **kwargs):
        raise SystemExit(7)  # where Spark would start

    monkeypatch.setattr("sparkext.cli.streaming.start_session", started)
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE s (user_id BIGINT, ts TIMESTAMP);\nINSERT INTO t SELECT * FROM s;\n"
    )
    for command in (
        ["backfill", "--from", "2026-11-20", "--to", "2026-11-20 06:00:00+08:00"],
        ["backfill", "--from", "2026-11-20", "--to", "2026-11-21", "--lookup-as-of", "Latest"],
        ["backfill", "--from", "2026-11-20", "--to", "2026-11-21", "--lookup-as-of", "2026-11-20"],
        ["stream", "--checkpoint", "ck", "--interval", "30 s", "--from", "2026-11-20 08:00:00"],
    ):
        name, *options = command
        result = run(name, str(job), *options)
        assert result.exit_code == 7, (command, result.stderr)


@pytest.mark.parametrize(
    "command",
    [["backfill", "--from", "2026-11-20", "--to", "2026-11-21"], ["stream", "--checkpoint", "ck"]],
)
def test_ctrl_c_while_spark_starts_is_one_line(tmp_path, monkeypatch, command):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as a Ctrl-C during the 10-30 s Spark takes to start

    monkeypatch.setattr("sparkext.cli.streaming.start_session", interrupted)
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE s (user_id BIGINT, ts TIMESTAMP);\nINSERT INTO t SELECT * FROM s;\n"
    )
    name, *options = command
    result = run(name, str(job), *options)
    assert result.exit_code == 130
    assert result.stderr == "Cancelled while Spark was starting.\n"


def test_ctrl_c_while_a_stream_starts_cancels_the_start_in_one_line(tmp_path, monkeypatch):
    """run_stream runs on the Runner's worker: a Ctrl-C while it starts (creating tables,
    planning, starting queries) is a KeyboardInterrupt in the waiting main thread, never inside
    one of its py4j calls, and the command says in one line what the cancel left."""
    import signal
    import threading
    import time

    from sparkext.spark import cancellation

    main = threading.main_thread().ident
    reached: list[bool] = []

    def run_stream(*args, **kwargs):
        statement = cancellation.current()
        deadline = time.monotonic() + 30
        while signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            assert time.monotonic() < deadline, "the main thread never waited interruptibly"
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)
        assert statement is not None and statement.cancelled.wait(30)
        reached.append(True)
        raise cancellation.StatementCancelled(statement.commits)  # as a cancelled job fails

    monkeypatch.setattr("sparkext.cli.streaming.start_session", lambda *a, **k: FakeSpark())
    monkeypatch.setattr("sparkext.streaming.stream.run_stream", run_stream)
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE s (user_id BIGINT, ts TIMESTAMP);\nINSERT INTO t SELECT * FROM s;\n"
    )
    try:
        result = run("stream", str(job), "--checkpoint", str(tmp_path / "ck"))
    finally:
        signal.signal(signal.SIGINT, sigint)
        signal.signal(signal.SIGTERM, sigterm)
    assert reached and result.exit_code == 130, result.stderr
    assert result.stderr == (
        f"Cancelled while the stream was starting; checkpoint intact in {tmp_path / 'ck'}.\n"
    )


_ANNOUNCED = """
import sys
import sparkext.cli.shell as shell

def start_session(overrides, verbose, announce=False):
    print(f"announce={announce}", file=sys.stderr)
    raise SystemExit(0)

shell.start_session = start_session
sys.argv = ["sparkext-sql", "-e", "SELECT 1"]
shell.main()
"""


def test_e_says_what_spark_it_starts_on_a_terminal_only():
    """-e/-f announce the 10-30 s start when stderr is a terminal, and stay quiet redirected."""
    import subprocess
    import sys

    import pexpect

    child = pexpect.spawn(sys.executable, ["-c", _ANNOUNCED], encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    assert "announce=True" in child.before
    redirected = subprocess.run(
        [sys.executable, "-c", _ANNOUNCED], capture_output=True, text=True, timeout=60, check=False
    )
    assert redirected.stderr.strip() == "announce=False"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds children through /proc")
def test_ctrl_c_while_the_jvm_launches_stops_that_jvm_and_its_traceback(monkeypatch, caplog):
    """PySpark loses the JVM it is launching when Ctrl-C comes before the JVM reports its port;
    the command stops it (a Spark child of this process) and py4j's traceback for a Ctrl-C
    inside one of its calls is not printed (the command says it in one line)."""
    import logging
    import subprocess
    import time

    from pyspark import SparkContext

    import sparkext
    import sparkext.cli.common as common

    monkeypatch.setattr(SparkContext, "_gateway", None)  # PySpark is still launching
    jvm = subprocess.Popen(["bash", "-c", "exec -a spark-submit sleep 60"])
    bystander = subprocess.Popen(["sleep", "60"])  # a child that is not Spark: left alone
    try:
        deadline = time.monotonic() + 10
        while jvm.pid not in common._spark_children(os.getpid()):
            assert time.monotonic() < deadline, "the stand-in JVM never showed"
            time.sleep(0.05)

        def ctrl_c(**overrides):
            logging.exception("KeyboardInterrupt while sending command.")  # as py4j does
            raise KeyboardInterrupt

        monkeypatch.setattr(sparkext, "session", ctrl_c)
        with caplog.at_level(logging.INFO), pytest.raises(KeyboardInterrupt):
            common.start_session({}, verbose=False)
        assert jvm.wait(10) == -signal.SIGTERM
        assert bystander.poll() is None
        assert caplog.messages == []
    finally:
        logging.getLogger().removeFilter(common._QUIET_CTRL_C)
        for child in (jvm, bystander):
            child.kill()
            child.wait()
