"""``sparkext-sql serve`` with real clients: beeline (from pyspark's wheel) and PyHive.

The server runs in its own process, as a user starts it; clients connect over the HiveServer2
protocol. Also: Spark's own JVM-only spark-sql, configured with sparkext's extension but with no
Python driver, answers a sparkext call with one sentence.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyspark
import pytest

import sparkext
from sparkext.procedures.registry import ROUTINES
from tests.helpers.serve import free_port

BIN = Path(pyspark.__file__).resolve().parent / "bin"
pytestmark = pytest.mark.slow


def environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(tmp_path), SPARKEXT_WAREHOUSE=str(tmp_path / "warehouse"))
    env.pop("SPARKEXT_LOG_LEVEL", None)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A running ``sparkext-sql serve``; its stderr is returned for the tests that read it."""
    tmp_path = tmp_path_factory.mktemp("thrift")
    port = free_port()
    log = tmp_path / "server.log"
    command = [
        sys.executable, "-m", "sparkext.cli.shell", "serve", "--port", str(port),
        "--master", "local[4]", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.driver.memory=1g",
    ]  # fmt: skip
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=environment(tmp_path),
            cwd=tmp_path,
        )  # fmt: skip
    deadline = time.monotonic() + 240
    while "Ctrl-C stops" not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    url = f"jdbc:hive2://localhost:{port}/default"
    yield {"url": url, "port": port, "process": process, "log": log}
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def beeline(url: str, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "beeline"), "-u", url, "--silent=true", "--outputformat=csv2", "-e", sql],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


_PROMPT = re.compile(r"^(?:\d+: jdbc:\S+> |(?:\. )+\.> )+")


def lines(output: str) -> list[str]:
    """beeline's result lines, without the prompts it echoes for a multi-line statement."""
    return [kept for line in output.splitlines() if (kept := _PROMPT.sub("", line).strip())]


SETUP = (
    "CREATE NAMESPACE IF NOT EXISTS lake.db",
    "CREATE TABLE lake.db.t (id BIGINT, v STRING) USING iceberg",
    "INSERT INTO lake.db.t VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO lake.db.t VALUES (3, 'c')",
)


def _ensure_table(server) -> None:
    """lake.db.t, two commits, made once through PyHive (no client JVM to start)."""
    from pyhive import hive

    cursor = hive.connect(host="localhost", port=server["port"], auth="NONE").cursor()
    cursor.execute("CREATE NAMESPACE IF NOT EXISTS lake.db")
    cursor.execute("SHOW TABLES IN lake.db")
    if "t" not in [row[1] for row in cursor.fetchall()]:
        for statement in SETUP:
            cursor.execute(statement)


def test_beeline_runs_procedures_functions_and_ordinary_sql(server):
    _ensure_table(server)
    # three clients at once (each a beeline JVM of its own): two read lake.db.t, the third
    # runs a script of ordinary statements (DDL, two commits, a metadata-table query)
    with ThreadPoolExecutor(max_workers=3) as pool:
        health, selected, iceberg = pool.map(
            functools.partial(beeline, server["url"]),
            [
                "CALL sparkext.table_health(table => 'lake.db.t')",
                "SELECT t.id, h.live_rows FROM lake.db.t t "
                "JOIN sparkext.table_health('lake.db.t') h ON true ORDER BY t.id",
                "CREATE TABLE lake.db.u (id BIGINT, v STRING) USING iceberg; "
                "INSERT INTO lake.db.u VALUES (1, 'a'), (2, 'b'); "
                "INSERT INTO lake.db.u VALUES (3, 'c'); "
                "SELECT count(*) AS n FROM lake.db.u.snapshots",
            ],
        )
    assert health.returncode == 0, health.stderr
    assert iceberg.returncode == 0, iceberg.stderr
    header, row = health.stdout.strip().splitlines()[:2]
    columns = dict(zip(header.split(","), row.split(","), strict=True))
    assert columns["live_rows"] == "3" and columns["snapshot_count"] == "2"
    assert lines(selected.stdout) == ["id,live_rows", "1,3", "2,3", "3,3"]
    # beeline prints a "Result" header for each statement without rows, then the query's rows
    assert lines(iceberg.stdout) == ["Result"] * 3 + ["n", "2"]


def test_a_bad_call_is_one_sentence_and_the_server_keeps_serving(server):
    bad = beeline(server["url"], "CALL sparkext.table_health(tabel => 'lake.db.t')")
    assert bad.returncode != 0
    errors = [line for line in bad.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: Error running query: sparkext.table_health has no parameter 'tabel' (did you "
        "mean 'table'?); parameters: table, options. (state=,code=0)"
    ]
    assert "\tat " not in bad.stderr and "Traceback" not in bad.stderr
    again = beeline(server["url"], "SELECT count(*) AS n FROM sparkext.help()")
    assert again.returncode == 0 and lines(again.stdout) == ["n", str(len(ROUTINES))]


@pytest.mark.parametrize(
    "long_ms",
    [pytest.param(15000, id="15s"), pytest.param(40000, id="40s", marks=pytest.mark.stress)],
)
def test_four_python_clients_at_once_and_a_long_call_blocks_no_one(server, long_ms):
    from pyhive import hive

    _ensure_table(server)

    def connect():
        return hive.connect(host="localhost", port=server["port"], auth="NONE", username="t")

    slow_started, slow_finished = threading.Event(), threading.Event()
    results: dict[str, list] = {}
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            cursor = connect().cursor()
            slow_started.set()
            # The argument is evaluated by the routine, in the Python driver, for long_ms (one of
            # the server's 4 task slots).
            cursor.execute(
                "CALL sparkext.table_health(table => CASE WHEN reflect('java.lang.Thread', "
                f"'sleep', {long_ms}L) IS NULL THEN 'lake.db.t' ELSE 'lake.db.t' END)"
            )
            results["slow"] = cursor.fetchall()
        except BaseException as error:
            errors.append(error)
        finally:
            slow_finished.set()

    def client(name: str) -> None:
        try:
            cursor = connect().cursor()
            seen = []
            for _ in range(1):
                cursor.execute("CALL sparkext.table_health(table => 'lake.db.t')")
                seen.append(len(cursor.fetchall()))
                cursor.execute("SELECT count(*) FROM sparkext.help() WHERE section = 'procedure'")
                seen.append(cursor.fetchall()[0][0] > 0)
                cursor.execute("SELECT sum(id) FROM lake.db.t")
                seen.append(cursor.fetchall()[0][0])
            results[name] = [seen, slow_finished.is_set()]
        except BaseException as error:
            errors.append(error)

    long_call = threading.Thread(target=slow)
    long_call.start()
    assert slow_started.wait(120)
    time.sleep(2)  # the long call is in the server
    clients = [threading.Thread(target=client, args=(f"c{i}",)) for i in range(4)]
    for thread in clients:
        thread.start()
    for thread in (*clients, long_call):
        thread.join(timeout=600)
    assert not errors, errors
    for i in range(4):
        seen, slow_was_done = results[f"c{i}"]
        assert seen == [1, True, 6]
        assert not slow_was_done, "a client waited for the long call"
    assert len(results["slow"]) == 1


def test_the_server_stops_on_sigterm(server):
    process = server["process"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    assert "stopped." in server["log"].read_text()


def test_a_taken_port_is_one_sentence(tmp_path):
    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "sparkext.cli.shell", "serve", "--port", str(port)],
            capture_output=True, text=True, timeout=120, env=environment(tmp_path), check=False,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: Port {port} on localhost is already in use; stop what listens there or pick "
        "another with --port."
    )


@pytest.mark.stress
def test_stock_spark_sql_without_the_python_side_says_so(tmp_path):
    """Spark's own spark-sql, a JVM no Python driver ever attached to. In the default tier:
    tests/spark/test_in_spark_sql.py::test_without_the_python_driver_one_sentence (the shared
    session with its driver detached: the same sentence, and no Java trace in it)."""
    conf = sparkext.spark_conf()
    command = [str(BIN / "spark-sql"), "--master", "local[1]"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += ["-e", "CALL sparkext.help()"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=environment(tmp_path),
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "sparkext's procedures and table functions run in its Python driver and none is "
        "attached to this JVM: start the server with `sparkext-sql serve` (not "
        "start-thriftserver.sh or spark-sql), or call sparkext.attach(spark) in PySpark."
    ) in done.stderr
    assert "\tat io.sparkext" not in done.stderr


def test_attach_adds_the_extension_to_a_session_built_elsewhere(tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "import sparkext\n"
        "from sparkext.spark.session import ICEBERG_EXTENSION, iceberg_jars\n"
        "conf = iceberg_jars({'spark.master': 'local[1]',\n"
        "                     'spark.sql.extensions': ICEBERG_EXTENSION})\n"
        "builder = SparkSession.builder\n"
        "for key, value in conf.items():\n"
        "    builder = builder.config(key, value)\n"
        "spark = builder.getOrCreate()\n"
        "spark.sql('CREATE TEMP VIEW mine AS SELECT 1 AS x')\n"
        "spark = sparkext.attach(spark)\n"
        "print(spark.sql('CALL sparkext.help()').count(), spark.table('mine').first().x,\n"
        "      spark.sql('SELECT count(*) FROM sparkext.help()').first()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300,
        env=environment(tmp_path), cwd=tmp_path, check=False,
    )  # fmt: skip
    count = len(ROUTINES)
    assert done.stdout.split() == [str(count), "1", str(count)], done.stderr[-2000:]
