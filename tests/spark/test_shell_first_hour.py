"""What a new user meets in the first hour: file names in errors, vertical output, quiet logs."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkext.cli.shell import Shell, cli
from tests.helpers.cdc_calls import events, land
from tests.helpers.processes import side_by_side

ROOT = Path(__file__).resolve().parents[2]


def test_a_parse_error_in_an_init_file_names_the_file(spark, tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("SELECT 1;\nSELEC 2;\n")
    result = CliRunner().invoke(cli, ["-i", str(init), "-e", "SELECT 1"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(
        f"Error: {init}: Cannot parse the SQL at line 2, column 1"
    )


def test_any_error_in_an_init_file_names_it_and_a_script_error_does_not(spark, tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("SELECT * FROM lake.test.nowhere;\n")
    result = CliRunner().invoke(cli, ["-i", str(init), "-e", "SELECT 1"])
    assert result.exit_code == 1 and result.stderr.startswith(f"Error: {init}: ")
    script = tmp_path / "job.sql"
    script.write_text("SELECT * FROM lake.test.nowhere;\n")
    result = CliRunner().invoke(cli, ["-f", str(script)])
    assert result.exit_code == 1 and result.stderr.startswith("Error: [TABLE_OR_VIEW_NOT_FOUND]")


def test_backslash_g_prints_one_statement_vertically(spark):
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, out=out, err=err)
    assert shell.run_text("SELECT 1 AS id, 'a' AS name\\G SELECT 2 AS id;")
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        "*************************** 1. row ***************************",
        "  id: 1",
        "name: a",
    ]
    assert lines[3].startswith("+-")  # the second statement ended with ';': a table


def test_vertical_output_format_for_wide_results(spark, table_name):
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    result = CliRunner().invoke(
        cli,
        [
            "--output-format",
            "vertical",
            "-e",
            f"CALL sparkext.table_health(table => '{table_name}')",
        ],
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "*************************** 1. row ***************************"
    assert any(line.strip() == "data_files: 1" for line in lines), lines
    assert max(len(line) for line in lines) < 120  # table_health is ~330 wide as a table


def test_table_not_found_names_the_catalog_and_its_warehouse(spark, warehouse):
    result = CliRunner().invoke(
        cli, ["-e", "CALL sparkext.table_health(table => 'lake.test.nowhere')"]
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: Table 'lake.test.nowhere' does not exist in catalog lake (warehouse "
        f"{warehouse}); check the name with SHOW TABLES IN lake.test."
    )


@pytest.mark.slow
def test_a_failed_micro_batch_is_one_sentence_and_verbose_reaches_log4j(tmp_path):
    """A fresh process whose conf directory has no log4j2.properties (copied from the cluster
    example's instructions): no StatusLogger errors, no MicroBatchExecution ERROR lines, no
    py4j traceback before the one sentence; and --verbose hands its level to the JVM."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    shutil.copy(ROOT / "conf" / "spark-defaults.conf", conf_dir / "spark-defaults.conf")
    env = {
        **os.environ,
        "SPARKEXT_WAREHOUSE": str(tmp_path / "wh"),
        "SPARKEXT_CONF_DIR": str(conf_dir),
        "SPARKEXT_MASTER": "local[2]",
    }
    env.pop("SPARKEXT_LOG_LEVEL", None)
    land(tmp_path / "in", "1.json", events(("c", 1, 10, "a")), ["{oops"])
    call = (
        f"CALL sparkext.ingest_cdc(table => 'lake.db.t', source => '{tmp_path / 'in'}', "
        f"checkpoint => '{tmp_path / 'ck'}', primary_key => 'id', create => true, "
        "options => map('fail-on-reject', 'true'))"
    )
    level = "SELECT java_method('java.lang.System', 'getProperty', 'sparkext.log.level') AS l"
    # Spark logs a WARN line (SQLConf) for a deprecated setting: seen only with --verbose.
    deprecated = "SET spark.sql.hive.verifyPartitionPath=false"
    exe = os.path.join(os.path.dirname(sys.executable), "sparkext-sql")

    def start(args: list[str], warehouse: str) -> subprocess.Popen:
        return subprocess.Popen(
            [exe, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "SPARKEXT_WAREHOUSE": str(tmp_path / warehouse)},
        )

    # both at once: their JVMs start side by side (each on a warehouse of its own)
    failed, verbose = side_by_side(
        [
            start(["-e", f"{level}; {deprecated}; {call}", "--output-format", "json"], "wh"),
            start(["--verbose", "--output-format", "json", "-e", f"{level}; {deprecated}"], "wh2"),
        ]
    )
    assert failed.returncode == 1
    assert json.loads(failed.stdout.splitlines()[0]) == {"l": "null"}
    errors = [
        line
        for line in failed.stderr.splitlines()
        if not line.startswith(("Time taken", "… "))  # progress lines of a long statement
    ]
    assert len(errors) == 1, failed.stderr
    assert errors[0].startswith("Error: 1 event(s) were rejected and fail-on-reject is set")
    for noise in ("ERROR", "StatusLogger", "Traceback", "\tat ", "WARN"):
        assert noise not in failed.stderr, failed.stderr
    assert verbose.returncode == 0, verbose.stderr
    assert json.loads(verbose.stdout.splitlines()[0]) == {"l": "warn"}
    # Spark's own log line, as --verbose's help promises.
    warning = (
        "WARN SQLConf: The SQL config 'spark.sql.hive.verifyPartitionPath' has been deprecated"
    )
    assert warning in verbose.stderr, verbose.stderr
