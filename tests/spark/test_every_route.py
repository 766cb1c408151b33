"""Every routine, and its bad-input sentences, the same from every route (issue 50).

Routes: ``sparkext.sql``, ``spark.sql`` (the session extension), the shell on its statement
thread (``-e``, ``-f``, statements on standard input, the interactive prompt), and ``sparkext-sql
serve`` in its own process reached over JDBC's wire protocol (PyHive), on the same warehouse.
Every route must give the same rows, or the same one sentence (and, in the shell, status 1).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from click.testing import CliRunner

import sparkext
from sparkext.cli.shell import Shell, cli
from tests.helpers.shell_lines import said

pytestmark = pytest.mark.slow
T = "lake.test.routes"

CASES = (
    "CALL sparkext.help()",
    "CALL sparkext.help('changelog')",
    f"CALL sparkext.table_health(table => '{T}')",
    f"SELECT partition, data_files, live_rows FROM sparkext.table_health('{T}')",
    f"SELECT id, _change_type, _change_ordinal FROM sparkext.changelog('{T}', {{first}}) "
    "ORDER BY 1, 2",
    f"SELECT id, _change_type FROM sparkext.changelog('{T}', 'v1', '{{second}}') ORDER BY 1",
    f"CALL sparkext.tiered_optimize(table => '{T}', dry_run => true)",
    f"CALL sparkext.tiered_optimize(table => '{T}', levels => 'l0', dry_run => true)",
    f"CALL sparkext.maintain(table => '{T}', dry_run => true)",
    f"CALL sparkext.rewrite_equality_deletes(table => '{T}', dry_run => true)",
    f"SELECT count(*) AS n FROM sparkext.changelog('{T}') WHERE _change_type = 'INSERT'",
    # bad input: one sentence, whichever route
    "CALL sparkext.table_health(table => 'lake.test.no_such_table')",
    f"CALL sparkext.tiered_optimize(table => '{T}', levels => 'l9')",
    f"SELECT * FROM sparkext.changelog('{T}', true)",
    "CALL sparkext.tabel_health()",
    "CALL sparkext.table_health()",
    f"CALL sparkext.maintain(table => '{T}', options => map('no-such-option', '1'))",
)

_TIME = re.compile(r"^(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(\.\d*)?$")


def canonical(value) -> str | None:
    """One text per value whatever the route's types: JSON, PyHive's, PySpark's."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, dt.datetime):
        value = value.isoformat(sep=" ")
    text = str(value)
    found = _TIME.match(text)
    if found:
        fraction = (found.group(3) or "").rstrip("0").rstrip(".")
        return f"{found.group(1)} {found.group(2)}{fraction}"
    return text


VARIES = {"duration_ms"}  # wall-clock time of the call: differs from run to run


def rows_of(columns, rows) -> tuple:
    """The rows, canonical, with the columns that measure the run itself masked."""
    names = [c.split(".")[-1] for c in columns]  # PyHive names a column by its table too
    if not rows:
        names = []  # the shell's JSON lines of an empty result carry no column names
    return (
        "rows",
        names,
        [
            ["<varies>" if n in VARIES else canonical(v) for n, v in zip(names, row, strict=True)]
            for row in rows
        ],
    )


def failed(sentence: str) -> tuple:
    return ("error", sentence.strip())


@pytest.fixture(scope="module")
def table(spark):
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(
        f"CREATE TABLE {T} (id bigint, d string) USING iceberg PARTITIONED BY (d) "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')"
    )
    spark.sql(f"INSERT INTO {T} VALUES (1, 'a'), (2, 'b')")
    first = spark.sql(f"SELECT snapshot_id FROM {T}.snapshots").first()[0]
    spark.sql(f"ALTER TABLE {T} CREATE TAG v1")
    spark.sql(f"INSERT INTO {T} VALUES (3, 'a')")
    spark.sql(f"DELETE FROM {T} WHERE id = 2")
    second = spark.sql(
        f"SELECT snapshot_id FROM {T}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    return {"first": first, "second": second}


@pytest.fixture(scope="module")
def server(request, spark, warehouse, tmp_path_factory):
    """``sparkext-sql serve`` in its own process, on the suite's warehouse (the routes' table is
    made while its JVM starts, before it is asked anything)."""
    from tests.helpers.serve import launch, ready, stop

    served = launch(tmp_path_factory.mktemp("routes-serve"), warehouse)
    request.getfixturevalue("table")
    ready(served)
    yield served.port
    stop(served)


def via_python(spark, sql):
    try:
        frame = sparkext.sql(sql)
        return rows_of(frame.columns, frame.collect())
    except sparkext.SparkextError as error:
        return failed(str(error))


def via_spark(spark, sql):
    from pyspark.errors import AnalysisException

    try:
        frame = spark.sql(sql)
        return rows_of(frame.columns, frame.collect())
    except AnalysisException as error:
        return failed(str(error))


def _shell_outcome(result) -> tuple:
    if result.exit_code != 0:
        assert result.exit_code == 1, result.stderr
        message = said(result.stderr)
        assert message.startswith("Error: ") and "\n" not in message, message
        return failed(message[len("Error: ") :])
    return _json_rows(result.stdout)


def _json_rows(text: str) -> tuple:
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    columns = list(lines[0]) if lines else []
    return rows_of(columns, [list(line.values()) for line in lines])


def via_shell_e(spark, sql):
    return _shell_outcome(CliRunner().invoke(cli, ["--output-format", "json", "-e", sql]))


def via_shell_f(spark, sql, tmp_path):
    script = tmp_path / "statement.sql"
    script.write_text(f"{sql};\n")
    return _shell_outcome(CliRunner().invoke(cli, ["--output-format", "json", "-f", str(script)]))


def via_shell_stdin(spark, sql):
    return _shell_outcome(CliRunner().invoke(cli, ["--output-format", "json"], input=f"{sql};\n"))


def via_shell_interactive(spark, sql, tmp_path, monkeypatch):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    import sparkext.cli.shell as shell_module

    monkeypatch.setattr(shell_module, "HISTORY_FILE", tmp_path / "history")
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(spark, "json", out=out, err=err)
    with create_pipe_input() as pipe:
        pipe.send_text(f"{sql};\rquit\r")
        shell.interactive(input=pipe, output=DummyOutput())
    errors = [line for line in said(err.getvalue()).splitlines() if line.startswith("Error: ")]
    if errors:
        return failed(errors[0][len("Error: ") :])
    return _json_rows(out.getvalue())


def via_jdbc(port, sql):
    from pyhive import exc, hive

    cursor = hive.connect(host="localhost", port=port, auth="NONE", username="t").cursor()
    try:
        cursor.execute(sql)
        rows = cursor.fetchall()
        return rows_of([d[0] for d in cursor.description or ()], rows)
    except exc.OperationalError as error:
        # Spark's Thrift server frames every error so; the sentence follows it unchanged
        return failed(error.args[0].status.errorMessage.removeprefix("Error running query: "))
    finally:
        cursor.close()


@pytest.mark.parametrize("case", CASES)
def test_every_route_gives_the_same_rows_and_sentences(
    spark, table, server, case, tmp_path, monkeypatch
):
    sql = case.format(**table)
    # The server answers in its own process while this one runs the other routes (every case
    # only reads the table).
    with ThreadPoolExecutor(max_workers=1) as pool:
        jdbc = pool.submit(via_jdbc, server, sql)
        outcomes = {
            "sparkext.sql": via_python(spark, sql),
            "spark.sql": via_spark(spark, sql),
            "shell -e": via_shell_e(spark, sql),
            "shell -f": via_shell_f(spark, sql, tmp_path),
            "shell stdin": via_shell_stdin(spark, sql),
            "shell interactive": via_shell_interactive(spark, sql, tmp_path, monkeypatch),
            "serve (JDBC)": jdbc.result(timeout=600),
        }
    expected = outcomes["sparkext.sql"]
    differ = {route: o for route, o in outcomes.items() if o != expected}
    assert not differ, f"sparkext.sql gave {expected}; others: {differ}"
    if expected[0] == "error":  # one sentence, no Java in it
        assert "\tat " not in expected[1] and "Exception:" not in expected[1], expected[1]


def test_failed_rows_make_the_shell_exit_1(spark, table_name, tmp_path):
    """A routine whose rows report a failure (its error column) fails -e and -f."""
    from sparkext.cli import shell as shell_module

    spark.sql(f"CREATE TABLE {table_name} (id bigint) USING iceberg")
    ok = CliRunner().invoke(cli, ["-e", f"CALL sparkext.maintain(table => '{table_name}')"])
    assert ok.exit_code == 0, ok.stderr

    def broken(self, frame, progress, quiet, fmt, failures):  # a row with its error column set
        rows = [("x", "boom")]
        if failures is not None:
            rows = list(failures.counted(rows, 1))
        progress.stop()
        return len(rows)

    original = shell_module.Shell._show
    try:
        shell_module.Shell._show = broken
        bad = CliRunner().invoke(cli, ["-e", f"CALL sparkext.maintain(table => '{table_name}')"])
    finally:
        shell_module.Shell._show = original
    assert bad.exit_code == 1
    assert said(bad.stderr) == (
        "Error: sparkext.maintain reported 1 failed row (its 'error' column says why); the rows "
        "without one report work that was done."
    )


ROUTES = ("sparkext.sql", "spark.sql", "shell -e", "shell -f", "shell stdin", "serve (JDBC)")


@pytest.mark.parametrize("route", ROUTES)
def test_a_routine_that_writes_works_from_every_route(spark, server, route, tmp_path):
    """tiered_optimize reads the staged files of the group it merges: the shell's statement
    thread once failed every group with "Catalog 'default_cache_iceberg' … not found"."""
    name = f"lake.test.routes_write_{ROUTES.index(route)}"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id bigint, k string) USING iceberg")
    for i in range(3):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'k{i}')")
    sql = f"CALL sparkext.tiered_optimize(table => '{name}', levels => 'l0')"
    run = {
        "sparkext.sql": lambda: via_python(spark, sql),
        "spark.sql": lambda: via_spark(spark, sql),
        "shell -e": lambda: via_shell_e(spark, sql),
        "shell -f": lambda: via_shell_f(spark, sql, tmp_path),
        "shell stdin": lambda: via_shell_stdin(spark, sql),
        "serve (JDBC)": lambda: via_jdbc(server, sql),
    }[route]
    kind, columns, rows = run()
    assert kind == "rows" and len(rows) == 1, rows
    row = dict(zip(columns, rows[0], strict=True))
    assert row["error"] is None and row["input_files"] == "3" and row["output_files"] == "1"
    # stock Iceberg's view of the table: one live data file, the same rows
    spark.sql(f"REFRESH TABLE {name}")
    assert spark.sql(f"SELECT count(*) FROM {name}.files").first()[0] == 1
    assert sorted(r.id for r in spark.table(name).collect()) == [0, 1, 2]


AUDITED = {
    "python": lambda spark, server, sql, tmp: via_python(spark, sql),
    "spark.sql": lambda spark, server, sql, tmp: via_spark(spark, sql),
    "shell": lambda spark, server, sql, tmp: via_shell_f(spark, sql, tmp),
    "serve": lambda spark, server, sql, tmp: via_jdbc(server, sql),
}


def test_the_audit_log_holds_every_call_from_every_route(spark, table, server, tmp_path):
    """Issue 53: each route's calls (a sparkext procedure, a refused one, a table function and
    an Iceberg procedure) are rows of the audit table, with who, route, outcome and the
    snapshot a writing call produced; the server's rows reach the same table from its process."""
    from sparkext.security import audit

    name = "lake.test.routes_audit"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg")
    marks = {}
    for route, run in AUDITED.items():
        mark = f"audit-{route}-{time.monotonic_ns()}"
        marks[route] = mark
        spark.sql(f"INSERT INTO {name} VALUES (1), (2)")  # a small file for each route's merge
        spark.sql(f"INSERT INTO {name} VALUES (3)")
        spark.sql(f"INSERT INTO {name} VALUES (4)")
        calls = (
            f"CALL sparkext.tiered_optimize(table => '{name}', levels => 'l0' /* {mark} */)",
            f"SELECT count(*) FROM sparkext.help('{mark}')",
            f"CALL lake.system.ancestors_of(table => 'test.routes_audit' /* {mark} */)",
        )
        for sql in calls:
            run(spark, server, sql, tmp_path)
    audit.flush(spark)
    table_name = audit.audit_log(spark).table
    deadline = time.monotonic() + 120
    while True:  # the server appends its own rows every second
        spark.sql(f"REFRESH TABLE {table_name}")
        rows = spark.sql(
            f"SELECT route, user, routine, kind, arguments, tables, snapshots, outcome, error, "
            f"client FROM {table_name}"
        ).collect()
        found = {r: [x for x in rows if marks[r] in x.arguments] for r in marks}
        if len(found["serve"]) == 3 or time.monotonic() > deadline:
            break
        time.sleep(1)
    for route, entries in found.items():
        by_routine = {e.routine: e for e in entries}
        assert set(by_routine) == {
            "sparkext.tiered_optimize",
            "sparkext.help",
            "lake.system.ancestors_of",
        }, (route, entries)
        assert all(e.route == route for e in entries), entries
        assert all(e.user == ("t" if route == "serve" else spark.sparkContext.sparkUser())
                   for e in entries), entries  # fmt: skip
        merge = by_routine["sparkext.tiered_optimize"]
        assert merge.outcome == "ok" and merge.tables == [name], merge
        spark.sql(f"REFRESH TABLE {name}")  # the server committed from its own process
        current = spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()
        assert merge.snapshots[name] in {r.snapshot_id for r in current}, merge
        assert by_routine["sparkext.help"].outcome == "failed"  # help('<mark>') names nothing
        assert by_routine["sparkext.help"].error.startswith("Unknown procedure or function")
        assert by_routine["lake.system.ancestors_of"].tables == [name]
        assert (by_routine["lake.system.ancestors_of"].client is not None) == (route == "serve")
