"""The health report: its rows agree with table_health and with the files Iceberg lists; the page
opens in a real headless Chromium without console errors and its plots render."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import sparkext
from tests.helpers.iceberg import flink_commit


def make(spark, name: str) -> None:
    spark.sql(
        f"CREATE TABLE {name} (id int, v string, p string) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='2', 'sparkext.optimize.l0.min-files'='2')"
    )
    for i in range(4):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'x', 'small')")
    spark.sql(f"INSERT INTO {name} VALUES (100, 'y', 'fine')")


def report_rows(tables: str, log_table: str) -> list[dict]:
    return [
        r.asDict()
        for r in sparkext.sql(
            f"CALL sparkext.health_report(tables => '{tables}', log_table => '{log_table}')"
        ).collect()
    ]


def test_rows_agree_with_table_health_and_name_the_fix(spark, table_name):
    make(spark, table_name)
    flink_commit(spark, table_name, ["id"], deletes=[{"id": 100, "v": "y", "p": "fine"}])
    log_table = "lake.test.health_log"
    rows = report_rows(table_name, log_table)
    health = {
        r.partition: r
        for r in sparkext.sql(f"CALL sparkext.table_health(table => '{table_name}')").collect()
    }
    assert [r["partition"] for r in rows] == sorted(
        health, key=lambda p: (health[p].health_score, -health[p].data_files)
    )  # worst first
    by_partition = {r["partition"]: r for r in rows}
    small, fine = by_partition['{"p":"small"}'], by_partition['{"p":"fine"}']
    spark.catalog.refreshTable(table_name)
    files = spark.sql(f"SELECT partition.p AS p, count(*) AS n FROM {table_name}.files "
                      "WHERE content = 0 GROUP BY 1").collect()  # fmt: skip
    assert {r.p: r.n for r in files} == {"small": small["data_files"], "fine": fine["data_files"]}
    assert small["health_score"] == health['{"p":"small"}'].health_score
    assert "merge 4 small files" in small["fix"] and "levels => 'l0'" in small["fix"]
    assert "equality-delete" in fine["fix"] and fine["delete_files"] == 1
    assert small["score_change"] == 0  # the first record is now

    sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{table_name}')").collect()
    again = {r["partition"]: r for r in report_rows(table_name, log_table)}
    assert again['{"p":"small"}']["fix"] == "none needed"
    assert again['{"p":"small"}']["score_change"] > 0  # the trend from the run log
    logged = spark.sql(
        f"SELECT count(*) FROM {log_table} WHERE job = 'health' AND table_name = '{table_name}'"
    ).first()[0]
    assert logged == 2


def test_the_python_api_gives_the_calls_rows_checked_and_audited_as_the_call(
    spark, table_name, monkeypatch
):
    """sparkext.health_report without out runs the action, not SQL: same rows and columns as
    the CALL, and the same policy check and audit record (route python)."""
    from sparkext.errors import AccessDeniedError
    from sparkext.security import guard, policy

    make(spark, table_name)
    log_table = "lake.test.health_log_api"
    recorded = []

    def record(call, outcome, error):
        recorded.append((call.caller.route, call.routine, call.kind, call.arguments, outcome))

    monkeypatch.setattr(guard, "_record", record)
    by_api = sparkext.health_report(table_name, log_table=log_table, record=False)
    by_call = sparkext.sql(
        f"CALL sparkext.health_report(tables => '{table_name}', log_table => '{log_table}', "
        "record => false)"
    )
    assert by_api.schema == by_call.schema
    assert by_api.collect() == by_call.collect()
    arguments = f"tables => '{table_name}', log_table => '{log_table}', record => FALSE"
    assert recorded == [("python", "sparkext.health_report", "procedure", arguments, "ok")] * 2

    monkeypatch.setattr(guard, "active_policy", lambda spark, caller: policy.NETWORK_DEFAULT)
    refused = []
    for run in (
        lambda: sparkext.health_report(table_name),  # record => true writes the run log
        lambda: sparkext.sql(f"CALL sparkext.health_report(tables => '{table_name}')"),
    ):
        with pytest.raises(AccessDeniedError) as error:
            run()
        refused.append(str(error.value))
    assert refused[0] == refused[1] and "may not call sparkext.health_report" in refused[0]
    assert [r[-1] for r in recorded[2:]] == ["refused", "refused"]
    assert recorded[2][3] == f"tables => '{table_name}', record => TRUE"  # as the CALL was


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_page_opens_in_chromium_with_its_plots(spark, table_name, tmp_path):
    if _chromium() is None:
        pytest.skip("Chromium is not installed (.ci/setup installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    make(spark, table_name)
    log_table = "lake.test.health_log_page"
    sparkext.health_report(table_name, log_table=log_table).collect()  # a first data point
    sparkext.optimize_service(table_name, once=True, log_table=log_table, log=lambda x: None).run()
    page_path = sparkext.health_report(
        table_name, out=str(tmp_path / "report.html"), log_table=log_table
    )
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=_chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"file://{page_path}")
            page.wait_for_function(
                "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4",
                timeout=30_000,
            )
            plots = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
            marks = page.evaluate(
                "document.querySelectorAll('.js-plotly-plot .bars path, "
                ".js-plotly-plot .scatterlayer .trace').length"
            )
            first = page.inner_text("#worst tr:nth-child(2)")
            screenshot = tmp_path / "report.png"
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert plots == 5 and marks > 0  # score bars, score and file trends, jobs, worst partitions
    assert [u for u in requests if not u.startswith("file:")] == []  # offline
    assert table_name in first
    assert screenshot.stat().st_size > 10_000
    print(f"report screenshot: {screenshot}")


def test_the_shell_commands_run_the_service_and_write_the_report_in_process(spark, tmp_path):
    """The default tier's variant: the same commands and checks through click on this session
    (the real processes: the stress test below; the service in a real terminal: the next)."""
    from click.testing import CliRunner

    from sparkext.cli.shell import cli

    name = "lake.test.shell_served_here"
    make(spark, name)
    served = CliRunner().invoke(
        cli, ["optimize-service", "--tables", name, "--once", "--log-table", "lake.test.shell_log2"]
    )
    assert served.exit_code == 0, served.output[-3000:]
    assert "ok      lake.test.shell_served_here" in served.stdout
    assert "Traceback" not in served.stderr
    out = tmp_path / "page.html"
    made = CliRunner().invoke(
        cli,
        ["report", "--tables", name, "--out", str(out), "--log-table", "lake.test.shell_log2"],
    )
    assert made.exit_code == 0, made.output[-3000:]
    assert out.exists() and "Worst partitions first" in out.read_text(encoding="utf-8")
    bad = CliRunner().invoke(cli, ["optimize-service", "--tables", "orders"])
    assert bad.exit_code == 1 and "catalog.namespace.table" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
@pytest.mark.stress
def test_the_shell_commands_run_the_service_and_write_the_report(spark, warehouse, tmp_path):
    name = "lake.test.shell_served"
    make(spark, name)
    env = dict(os.environ)
    base = [sys.executable, "-m", "sparkext.cli.shell", "--conf", "spark.master=local[1]",
            "--conf", f"spark.sql.catalog.lake.warehouse={warehouse}"]  # fmt: skip
    served = subprocess.run(
        [*base, "optimize-service", "--tables", name, "--once", "--log-table",
         "lake.test.shell_log"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert served.returncode == 0, served.stderr[-3000:]
    assert "ok      lake.test.shell_served" in served.stdout
    assert "Traceback" not in served.stderr
    out = tmp_path / "page.html"
    made = subprocess.run(
        [*base, "report", "--tables", name, "--out", str(out), "--log-table",
         "lake.test.shell_log"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    assert out.exists() and "Worst partitions first" in out.read_text(encoding="utf-8")
    bad = subprocess.run([*base, "optimize-service", "--tables", "orders"], capture_output=True,
                         text=True, timeout=120, env=env)  # fmt: skip
    assert bad.returncode == 1 and "catalog.namespace.table" in bad.stderr
    assert "Starting Spark" not in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_the_service_on_a_terminal_shows_progress_and_stops_on_ctrl_c(spark, warehouse):
    """In a real pseudo-terminal: the status line, one line per job, Ctrl-C stops gracefully
    (running jobs finish, exit status 0), nothing printed as a traceback."""
    import pexpect

    name = "lake.test.served_on_a_terminal"
    make(spark, name)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "sparkext.cli.shell", "--conf", "spark.master=local[1]", "--conf",
         f"spark.sql.catalog.lake.warehouse={warehouse}", "optimize-service", "--tables", name,
         "--poll-interval", "1 second", "--log-table", "lake.test.terminal_log"],
        env=dict(os.environ), encoding="utf-8", timeout=300, dimensions=(40, 200),
    )  # fmt: skip
    try:
        child.expect("Ctrl-C stops")
        child.expect(r"tables · queue")  # the status line
        child.expect(r"ok\s+lake\.test\.served_on_a_terminal")  # one line per job
        child.sendintr()
        child.expect("stopping: waiting for")
        child.expect("done: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in (child.before or "")
