"""sparkext-sql: in-process runs on the shared session, plus one real process end to end."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import subprocess
import sys
from subprocess import PIPE

import pytest
from click.testing import CliRunner

from sparkext.cli.shell import Shell, cli
from tests.helpers.processes import side_by_side
from tests.helpers.shell_lines import said
from tests.helpers.zones import host_zone, session_zone


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin)


def test_help_lists_table_health_as_an_aligned_table(spark):
    result = run("-e", "CALL sparkext.help()")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("+-") and any("| table_health" in line for line in lines)
    assert len({len(line) for line in lines}) == 1
    from sparkext.procedures.registry import ROUTINES

    assert "Time taken:" in result.stderr
    assert f"Fetched {len(ROUTINES)} row(s)" in result.stderr


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CALL sparkext.tabel_health()", "Unknown procedure 'sparkext.tabel_health'"),
        ("CALL sparkext.table_health(x => 1)", "has no parameter 'x'"),
        ("CALL sparkext.table_health()", "Missing required parameter(s) 'table'"),
        ("CALL sparkext.help(name => 'a', name => 'b')", "is given more than once"),
        ("CALL sparkext.help('a', name => 'b')", "cannot be mixed"),
        ("CALL sparkext.table_health(table => true)", "expects a table, got true"),
        ("CALL sparkext.table_health(table => 'lake.test.none')", "does not exist"),
        ("SELECT * FROM lake.test.none", "TABLE_OR_VIEW_NOT_FOUND"),
        ("SELECT 1;\nSELEC 2", "Cannot parse the SQL at line 2, column 1"),
        ("SELECT 'unterminated", "an unterminated string"),
    ],
)
def test_bad_input_exits_1_with_one_sentence(spark, sql, message):
    result = run("-e", sql)
    assert result.exit_code == 1
    errors = said(result.stderr).splitlines()
    assert len(errors) == 1 and errors[0].startswith("Error: ") and message in errors[0]
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr


def test_unknown_option_key_lists_valid_keys(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT) USING iceberg")
    result = run("-e", f"CALL sparkext.table_health('{table_name}', map('bogus', '1'))")
    assert result.exit_code == 1
    assert said(result.stderr) == (
        "Error: Unknown option 'bogus' for sparkext.table_health; "
        "valid options: small-file-threshold-bytes."
    )


def test_verbose_shows_the_stack_trace(spark):
    result = run("--verbose", "-e", "SELECT * FROM lake.test.none")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr


def test_file_init_database_and_formats(spark, tmp_path, table_name):
    short = table_name.split(".")[-1]
    init = tmp_path / "init.sql"
    init.write_text(f"CREATE TABLE {table_name} (id BIGINT, s STRING) USING iceberg;")
    script = tmp_path / "job.sql"
    script.write_text(
        f"INSERT INTO {short} VALUES (1, 'a,b'), (2, NULL);\nSELECT * FROM {short} ORDER BY id;"
    )
    result = run(
        "-i", str(init), "--database", "lake.test", "-f", str(script), "--output-format", "json"
    )
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"id": 1, "s": "a,b"},
        {"id": 2, "s": None},
    ]
    result = run("--output-format", "csv", "-e", f"SELECT * FROM {table_name} ORDER BY id")
    assert list(csv.reader(io.StringIO(result.stdout))) == [["id", "s"], ["1", "a,b"], ["2", ""]]


def test_conf_and_stdin(spark):
    result = run(
        "--conf", "spark.sql.shuffle.partitions=3", stdin="SET spark.sql.shuffle.partitions;"
    )
    assert result.exit_code == 0, result.stderr
    assert "| spark.sql.shuffle.partitions | 3" in result.stdout


def test_missing_file_and_bad_conf(spark, tmp_path):
    result = run("-f", str(tmp_path / "nope.sql"))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot read")
    result = run("--conf", "novalue", "-e", "SELECT 1")
    assert result.exit_code == 2 and "'novalue' is not key=value" in result.stderr


def test_interactive_multiline_statements_and_quit(spark, tmp_path, monkeypatch):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    import sparkext.cli.shell as shell_module

    monkeypatch.setattr(shell_module, "HISTORY_FILE", tmp_path / "history")
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, out=out, err=err)
    with create_pipe_input() as pipe:
        pipe.send_text(
            "SELECT 40\r  + 2 AS answer\r;\rSELEC 1;\rSELECT 'after error' AS s;\rquit\r"
        )
        shell.interactive(input=pipe, output=DummyOutput())
    assert "| 42" in out.getvalue()
    assert "| after error" in out.getvalue()  # an error does not end an interactive session
    assert "Error: Cannot parse the SQL" in err.getvalue()
    assert "+SELECT 40\n+  + 2 AS answer\n+;\n" in (tmp_path / "history").read_text()


@pytest.mark.slow
def test_real_process_end_to_end(tmp_path):
    """A fresh process: its own JVM, the installed entry point, exit statuses as a shell sees."""
    exe = os.path.join(os.path.dirname(sys.executable), "sparkext-sql")

    def start(sql: str, name: str) -> subprocess.Popen:
        env = {**os.environ, "SPARKEXT_WAREHOUSE": str(tmp_path / name)}
        return subprocess.Popen([exe, "-e", sql], stdout=PIPE, stderr=PIPE, text=True, env=env)

    # both at once: their JVMs start side by side (each on a warehouse of its own)
    ok, bad = side_by_side(
        [start("CALL sparkext.help()", "wh"), start("CALL sparkext.nope()", "wh2")], timeout=300
    )
    assert ok.returncode == 0, ok.stderr
    assert "table_health" in ok.stdout
    assert said(ok.stderr) == ""
    assert bad.returncode == 1
    assert said(bad.stderr) == (
        "Error: Unknown procedure 'sparkext.nope' at line 1, column 6; "
        "CALL sparkext.help() lists them."
    )


TIMES_SQL = (
    "SELECT TIMESTAMP '2026-11-21 08:00:00+00:00' AS t, "
    "TIMESTAMP '2026-11-21 08:00:00.5+00:00' AS f, "
    "named_struct('t', TIMESTAMP '2026-11-21 08:00:00+00:00') AS s"
)


@pytest.mark.parametrize(
    ("session", "wall"),
    [("UTC", "2026-11-21 08:00:00"), ("America/Los_Angeles", "2026-11-21 00:00:00")],
)
def test_timestamps_print_as_spark_sql_prints_them_whatever_the_host_zone(spark, session, wall):
    """spark-sql shows a TIMESTAMP in the session zone, without an offset, as CAST(t AS STRING)
    does; sparkext-sql too, in every format, on a host set to Asia/Shanghai."""
    from sparkext.cli.output import FORMATS

    outputs = {}
    with host_zone("Asia/Shanghai"), session_zone(spark, session):
        spark_text = tuple(spark.sql(f"SELECT string(t), string(f) FROM ({TIMES_SQL})").first())
        for fmt in FORMATS:
            out = io.StringIO()
            assert Shell(spark, fmt, out=out, err=io.StringIO()).run_text(TIMES_SQL)
            outputs[fmt] = out.getvalue()
    assert spark_text == (wall, f"{wall}.5")  # Spark's own rendering, the oracle
    assert json.loads(outputs["json"]) == {"t": wall, "f": f"{wall}.5", "s": {"t": wall}}
    assert list(csv.reader(io.StringIO(outputs["csv"]))) == [
        ["t", "f", "s"],
        [wall, f"{wall}.5", json.dumps({"t": wall}, separators=(",", ":"))],
    ]
    assert f'| {wall} | {wall}.5 | {{"t":"{wall}"}} |' in outputs["table"]


def test_a_java_failure_on_an_executor_is_one_sentence(spark):
    result = run("-e", "SELECT assert_true(id < 0, 'id must be negative') FROM range(1)")
    assert result.exit_code == 1
    assert said(result.stderr) == "Error: id must be negative"


EXECUTOR_FAILURE = """
import sparkext
from sparkext.cli.shell import main

spark = sparkext.session()


def fails(x):
    raise ValueError(f"bad value {x}")


spark.udf.register("fails", fails, "string")
main()
"""


def _in_process(spark, args: list[str]) -> tuple[int, str]:
    """The shell's command line on the shared session with the UDF registered there; stderr
    as the terminal shows it: the JVM's console lines (printed while the statement runs), then
    the shell's own."""
    from tests.helpers.console_tee import console

    def fails(x):
        raise ValueError(f"bad value {x}")

    spark.udf.register("fails", fails, "string")
    try:
        with console(spark) as jvm:
            result = CliRunner().invoke(cli, args)
    finally:
        spark.sql("DROP TEMPORARY FUNCTION IF EXISTS fails")
    return result.exit_code, jvm.text + result.stderr


def _in_a_process(tmp_path, args: list[str]) -> tuple[int, str]:
    """A fresh process: its own JVM, whose console log shares the process's stderr."""
    env = {**os.environ, "SPARKEXT_WAREHOUSE": str(tmp_path / "wh")}
    done = subprocess.run(
        [sys.executable, "-c", EXECUTOR_FAILURE, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("in-process", id="in-process"),
        pytest.param("process", id="process", marks=[pytest.mark.slow, pytest.mark.stress]),
    ],
)
def test_a_python_failure_on_an_executor_is_one_sentence_unless_verbose(request, tmp_path, where):
    """What a user's terminal shows (the JVM's console log included) when a Python UDF fails
    inside a task: without --verbose only the worker's own exception, as one line. In-process
    (the default tier) on the shared session, the JVM's console lines copied by
    tests/helpers/console_tee.py; in fresh processes in the stress tier."""
    if where == "process":
        shell = functools.partial(_in_a_process, tmp_path)
    else:
        shell = functools.partial(_in_process, request.getfixturevalue("spark"))
    sql = "SELECT fails(id) FROM range(1)"
    quiet_code, quiet = shell(["-e", sql])
    assert quiet_code == 1
    assert said(quiet) == "Error: ValueError: bad value 0"
    verbose_code, verbose = shell(["--verbose", "-e", sql])
    assert verbose_code == 1
    assert "Traceback" in verbose and "\tat org.apache.spark" in verbose
    assert said(verbose).endswith("Error: ValueError: bad value 0")
