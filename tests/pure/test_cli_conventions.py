"""sparkext-sql's command line as users of spark-sql, beeline and psql expect it (no Spark)."""

from __future__ import annotations

import io
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkext.cli.output import write
from sparkext.cli.shell import cli, vertical_terminators
from sparkext.session import build_conf, describe, log_options

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
    assert "commands: backfill, stream" in result.stderr


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
