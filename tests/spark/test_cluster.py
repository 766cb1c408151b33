"""sparkext on a real Spark cluster (issue 54): a standalone master and workers started from the
installed pyspark, executors in JVMs of their own whose Python never installed sparkext, the
catalog Iceberg's JDBC catalog on the PostgreSQL the tests start (tests/helpers/cluster.py).

The end-to-end scenarios (tests/helpers/cluster_scenarios.py) run on the cluster from a driver
process of its own and, on the same input, in local mode on the shared session: the two must
print the same lines, and ``ingest_cdc``'s rows must equal a brute-force replay of the events.

Default tier: one worker, the CDC / delete-conversion / changelog / event-time / dimension-join
scenario (through ``sparkext.sql`` and ``spark.sql``), sparkext shipped by
``SparkContext.addPyFile`` after the executors' check refused it in one sentence. Stress tier
(``pytest -m stress``): two workers,
every scenario, sparkext shipped by ``spark.sparkext.ship``, ``ingest_cdc`` as a stream killed
mid-run and restarted, ``sparkext-sql serve`` on the cluster answering a JDBC client, and a
packed environment with sparkext installed in ``spark.archives`` (the worker daemon on).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cluster as clusters
from tests.helpers import cluster_scenarios as scenarios
from tests.helpers.postgres import JDBC_JAR, catalog_conf

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ["cdc_and_deletes"]


def _driver(
    spec: dict, tmp: Path, name: str, timeout: float = 900
) -> tuple[dict, subprocess.CompletedProcess]:
    spec_file, out_file = tmp / f"{name}-spec.json", tmp / f"{name}-out.json"
    spec_file.write_text(json.dumps(spec))
    # the driver's working directory is not the checkout: a local master's Python workers start
    # there, and would import sparkext from it
    bootstrap = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from tests.helpers.cluster_driver import main; sys.exit(main(*sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", bootstrap, str(spec_file), str(out_file)],
        cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    out = json.loads(out_file.read_text()) if out_file.exists() else {}
    return out, done


def _conf(cluster, server, warehouse: str, **extra: str) -> dict:
    return {
        **catalog_conf("pg", server, warehouse),
        "spark.pyspark.python": str(cluster.python),
        "spark.driver.extraClassPath": JDBC_JAR,
        "spark.driver.memory": "1g",
        "spark.executor.memory": "1g",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        **extra,
    }


def _local(spark, names: list[str], ns: str, root: Path) -> dict:
    """The same scenarios in local mode, on the shared session (its time zone UTC meanwhile)."""
    saved = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    try:
        return {name: scenarios.SCENARIOS[name](spark, ns, root.as_uri()) for name in names}
    finally:
        spark.conf.set("spark.sql.session.timeZone", saved)


def _same(cluster_out: dict, local_out: dict, names: list[str], cluster) -> None:
    for name in names:
        got = cluster_out.get(name)
        assert not isinstance(got, dict), (
            f"{name} failed on the cluster:\n{got['error']}\n{cluster.logs()}"
        )
        assert got == local_out[name], name


@pytest.fixture
def one_worker(tmp_path):
    base = tmp_path / "cluster"
    base.mkdir()
    cluster = clusters.start(base, workers=1, cores=2)
    yield cluster
    clusters.remove(cluster)


def test_on_a_cluster_the_scenarios_equal_local_mode(
    spark, jdbc_catalog, postgres_server, one_worker, tmp_path
):
    warehouse = (tmp_path / "warehouse").as_uri()
    spec = {
        "master": one_worker.url,
        "conf": _conf(one_worker, postgres_server, warehouse),
        "ns": "pg.on_cluster",
        "root": (tmp_path / "cluster-root").as_uri(),
        "phase": "run",
        "scenarios": DEFAULT,
    }
    out, done = _driver(spec, tmp_path, "default")
    assert done.returncode == 0, done.stderr[-6000:] + one_worker.logs()
    # before sparkext reached them, the executors were checked: one sentence on the driver
    assert out["before_shipping"].startswith("EnvironmentSetupError: The executors on "), out[
        "before_shipping"
    ]
    assert (
        "cannot import sparkext (ModuleNotFoundError: No module named 'sparkext')"
        in (out["before_shipping"])
    )
    assert out["daemon"] is None  # no worker daemon where sparkext is not installed
    assert out["executors"] == 1
    assert one_worker.executor_dirs(), "executors ran in JVMs the worker started"
    local = _local(spark, DEFAULT, "pg.in_local_mode", tmp_path / "local-root")
    _same(out, local, DEFAULT, one_worker)

    # and against oracles that share no code with sparkext: a replay of the events
    def lines(prefix: str) -> list[str]:
        return [x.removeprefix(prefix) for x in out["cdc_and_deletes"] if x.startswith(prefix)]

    assert lines("after ingest: ") == scenarios.replayed(3)
    assert lines("after rewrite: ") == scenarios.replayed(3)
    assert lines("tag as_of_7s: ") == scenarios.replayed(3, until=7)
    assert lines("dim join: ") == scenarios.joined()


@pytest.mark.stress
def test_two_workers_every_scenario_a_crashed_stream_and_serve(
    spark, jdbc_catalog, postgres_server, tmp_path
):
    base = tmp_path / "cluster"
    base.mkdir()
    cluster = clusters.start(base, workers=2, cores=1)
    try:
        warehouse = (tmp_path / "warehouse").as_uri()
        conf = _conf(cluster, postgres_server, warehouse, **{"spark.sparkext.ship": "true"})
        names = list(scenarios.SCENARIOS)
        root = (tmp_path / "cluster-root").as_uri()
        spec = {"master": cluster.url, "conf": conf, "ns": "pg.cluster_all", "root": root,
                "phase": "run", "scenarios": names}  # fmt: skip
        out, done = _driver(spec, tmp_path, "all")
        assert done.returncode == 0, done.stderr[-6000:] + cluster.logs()
        assert out["executors"] == 2
        local = _local(spark, names, "pg.local_all", tmp_path / "local-root")
        _same(out, local, names, cluster)

        stream = {**spec, "ns": "pg.cluster_stream", "root": (tmp_path / "stream-root").as_uri()}
        crashed, done = _driver({**stream, "phase": "stream-crash"}, tmp_path, "crash")
        assert done.returncode == 17, done.stderr[-6000:]
        assert crashed["first"] == scenarios.replayed(1)
        restarted, done = _driver({**stream, "phase": "stream-restart"}, tmp_path, "restart")
        assert done.returncode == 0, done.stderr[-6000:] + cluster.logs()
        assert restarted["rows"] == scenarios.replayed(3)
        _serve_on(cluster, tmp_path)

        # a packed environment with sparkext installed, shipped in spark.archives: each executor
        # unpacks its own; the worker daemon is known to work there, so it is on
        packed = {
            **spec,
            "ns": "pg.cluster_packed",
            "root": (tmp_path / "packed-root").as_uri(),
            "installed": True,
            "scenarios": ["hilbert"],
            "conf": {
                **conf,
                "spark.sparkext.ship": "false",
                "spark.archives": f"{clusters.packed_environment(tmp_path)}#env",
                "spark.pyspark.python": "./env/bin/python",
                "spark.python.daemon.module": "sparkext.executors.daemon",
            },
        }
        out, done = _driver(packed, tmp_path, "packed")
        assert done.returncode == 0, done.stderr[-6000:] + cluster.logs()
        assert out["daemon"] == "sparkext.executors.daemon"
        _same(out, local, ["hilbert"], cluster)
        unpacked = [d / "env" / "bin" / "python" for d in cluster.executor_dirs()]
        assert [p for p in unpacked if p.exists()], "each executor unpacked the environment"
    finally:
        clusters.remove(cluster)


def _serve_on(cluster, tmp_path: Path) -> None:
    """``sparkext-sql serve`` with the cluster as its master: a JDBC client's CALL runs there."""
    from tests.helpers import serve
    from tests.spark.test_thrift_server import BIN

    served = serve.launch(
        tmp_path, tmp_path / "serve-warehouse", "--conf", f"spark.pyspark.python={cluster.python}",
        "--conf", "spark.sparkext.ship=true", "--conf", "spark.executor.memory=1g",
        master=cluster.url,
    )  # fmt: skip
    try:
        serve.ready(served)
        url = f"jdbc:hive2://localhost:{served.port}/default"
        insert = (
            "INSERT INTO lake.s.points "
            "SELECT CAST(id % 100 AS INT), CAST(id % 37 AS INT) FROM range(1000)"
        )
        script = (
            "CREATE NAMESPACE IF NOT EXISTS lake.s; "
            "CREATE TABLE lake.s.points (x INT, y INT) USING iceberg; "
            f"{insert}; {insert}; "
            "CALL sparkext.tiered_optimize(table => 'lake.s.points', levels => 'l2', "
            "cluster_by => 'x, y', curve => 'hilbert'); "
            "SELECT count(*) AS n, sum(x) AS sx FROM lake.s.points;"
        )
        done = subprocess.run(
            [str(BIN / "beeline"), "-u", url, "--silent=true", "--outputformat=csv2", "-e", script],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:] + served.log.read_text()[-4000:]
        expected = f"{2000},{2 * sum(i % 100 for i in range(1000))}"
        assert done.stdout.strip().splitlines()[-1] == expected, done.stdout
        # serve's default catalog is the embedded Hadoop one: on a cluster it says what that means
        assert "Catalog lake is a Hadoop catalog: sparkext serialises its commits with a lock " in (
            served.log.read_text()
        )
    finally:
        serve.stop(served)


def _other_python() -> str | None:
    """An interpreter of another minor version than this one, if the machine has one."""
    import glob
    import shutil

    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3.*"))
    candidates += [shutil.which(f"python3.{minor}") or "" for minor in range(8, 15)]
    for path in candidates:
        name = Path(path).name.removeprefix("python")
        if path and re.fullmatch(r"3\.\d+", name) and name != mine and Path(path).exists():
            return path
    return None


@pytest.mark.stress
def test_the_executors_check_says_what_is_wrong_in_one_sentence(
    postgres_server, one_worker, tmp_path
):
    warehouse = (tmp_path / "warehouse").as_uri()
    base = {"master": one_worker.url, "ns": "pg.probe", "root": tmp_path.as_uri(), "phase": "probe"}
    cases = {
        "missing interpreter": (
            {"spark.pyspark.python": "/opt/none/bin/python"},
            "EnvironmentSetupError: The executors cannot start Python '/opt/none/bin/python' (no "
            "such program on a node); set spark.pyspark.python to an interpreter every node has, "
            "or ship one in spark.archives (docs/guides/deploy.md).",
        ),
        "daemon without sparkext": (
            {"spark.python.daemon.module": "sparkext.executors.daemon"},
            "EnvironmentSetupError: The executors' Python worker daemon did not start "
            "(spark.python.daemon.module needs sparkext installed on every node); unset it when "
            "sparkext is shipped with the job (docs/guides/deploy.md).",
        ),
    }
    other = _other_python()
    if other is not None:
        minor = Path(other).name.removeprefix("python")
        mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
        cases["another minor version"] = (
            {"spark.pyspark.python": other},
            f"EnvironmentSetupError: The executors run Python {minor} but the driver runs {mine}; "
            f"point spark.pyspark.python at a Python {mine} on every node or ship one in "
            "spark.archives (docs/guides/deploy.md).",
        )
    said = {}
    for name, (extra, _) in cases.items():
        conf = _conf(one_worker, postgres_server, warehouse, **extra)
        out, done = _driver({**base, "conf": conf}, tmp_path, name.replace(" ", "-"))
        assert done.returncode == 0, done.stderr[-6000:]
        said[name] = out["error"]
    assert said == {name: sentence for name, (_, sentence) in cases.items()}


@pytest.mark.stress
def test_in_local_mode_an_executor_python_without_sparkext_is_one_sentence(tmp_path):
    """Local masters are not checked before a routine (``help`` needs no Python there); a
    routine whose Python tasks fail for want of sparkext still ends in one sentence."""
    python = clusters.node_python(tmp_path / "python")
    spec = {
        "master": "local[1]",
        "conf": {"spark.pyspark.python": str(python), "spark.driver.memory": "1g"},
        "ns": "lake.probe",
        "root": tmp_path.as_uri(),
        "phase": "probe",
        "statement": "CALL sparkext.ingest_cdc(table => '{ns}.t', source => '{root}/landing', "
        "checkpoint => '{root}/ck', primary_key => 'id', create => true)",
    }
    spec["conf"]["spark.sql.catalog.lake.warehouse"] = str(tmp_path / "warehouse")
    out, done = _driver(spec, tmp_path, "local-probe")
    assert done.returncode == 0, done.stderr[-6000:]
    assert out["error"] == (
        f"EnvironmentSetupError: The executors' Python ('{python}') cannot import sparkext; "
        "install sparkext where it runs, point spark.pyspark.python at an interpreter that has "
        "it, or ship it with the job (spark.sparkext.ship=true; docs/guides/deploy.md)."
    )
