"""Shared fixtures: ONE local Spark session for the whole run, its warehouse in a temp dir.

Tests under tests/spark/ are marked ``spark``; tests/pure/ and the doctests in sparkext/ are
marked ``pure`` and never start Spark: ``pytest -m pure`` runs in seconds. Tests marked ``stress``
(full-size randomized oracles, multi-process races, long end-to-end runs) are left out unless the
``-m`` expression names them: ``pytest -m stress`` runs that tier alone.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.durations_plugin"]

_names = itertools.count(1)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).parts
        if "tests" in parts and "spark" in parts:
            item.add_marker(pytest.mark.spark)
        else:  # tests/pure and the doctests in sparkext/
            item.add_marker(pytest.mark.pure)
    # The stress tier runs only when asked for by name (-m stress, or an expression naming it).
    if "stress" not in (config.getoption("markexpr") or ""):
        stress = [item for item in items if item.get_closest_marker("stress")]
        if stress:
            config.hook.pytest_deselected(items=stress)
            items[:] = [item for item in items if not item.get_closest_marker("stress")]


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


def pytest_collection_finish(session):
    """A run with Spark tests starts making the class-data archive at once, on a thread: a new
    machine's training process (~50 s) then overlaps the pure tests, which use one core."""
    if os.environ.get("SPARKEXT_TEST_FAST_JVM") == "0" or session.config.option.collectonly:
        return
    if any(item.get_closest_marker("spark") for item in session.items):
        from tests.helpers.jvm_start import prepare_in_background

        prepare_in_background(session.config._tmp_path_factory.mktemp("cds"))


@pytest.fixture(scope="session")
def fast_jvm_start(tmp_path_factory) -> str:
    """SPARK_SUBMIT_OPTS for every Spark process of the run (tests/helpers/jvm_start.py);
    SPARKEXT_TEST_FAST_JVM=0 runs them with the JVM's defaults."""
    if os.environ.get("SPARKEXT_TEST_FAST_JVM") == "0":
        return ""
    from tests.helpers.jvm_start import speed_up

    return speed_up(tmp_path_factory.mktemp("cds"))


@pytest.fixture(autouse=True)
def _spark_processes_start_fast(request):
    """Tests that start Spark in other processes (shell runs, second writers) get the options
    too, whether or not they use the shared session."""
    if request.node.get_closest_marker("spark"):
        request.getfixturevalue("fast_jvm_start")


# Spark's own test-suite switch: expressions evaluated by the interpreter, no whole-stage Java
# code generated and compiled per new plan. The suite runs hundreds of distinct small plans, each
# compiled once by Janino on two cores; interpreted, the same tests used 15% less time (Spark
# guarantees both paths give the same results, and sparkext defines no expression of its own).
# The stress tier, the processes tests start (shell, serve, second writers) and
# SPARKEXT_TEST_CODEGEN=1 keep Spark's default, generated code.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def _interpreted(config) -> dict[str, str]:
    from tests.durations_plugin import tier

    if tier(config) == "stress" or os.environ.get("SPARKEXT_TEST_CODEGEN") == "1":
        return {}
    return INTERPRETED


@pytest.fixture(scope="session")
def spark(warehouse, fast_jvm_start, pytestconfig):
    import sparkext

    os.environ.setdefault("SPARKEXT_HISTORY", str(warehouse.parent / "history"))
    from tests.helpers.mariadb import mysql_jdbc_jar
    from tests.helpers.postgres import JDBC_JAR

    # the source databases' JDBC drivers (reconcile, bootstrap_cdc): Debian's PostgreSQL one,
    # and the MySQL one the Debezium package bundles (for MariaDB)
    jars = [j for j in (JDBC_JAR, mysql_jdbc_jar()) if j and os.path.exists(j)]
    extra = {"spark.driver.extraClassPath": ":".join(jars)} if jars else {}
    session = sparkext.session(
        master="local[2]",
        warehouse=str(warehouse),
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
            **extra,  # the JDBC-catalog tests' driver (tests/helpers/postgres.py)
            **_interpreted(pytestconfig),
        },
    )
    session.sql("CREATE NAMESPACE IF NOT EXISTS lake.test")
    if os.environ.get("SPARKEXT_TEST_FAST_JVM") != "0":  # what tests start: client compiler
        from tests.helpers.jvm_start import for_children

        for_children()
    yield session
    session.stop()


@pytest.fixture
def table_name(spark) -> str:
    """A fresh, unused table name in lake.test."""
    return f"lake.test.t{next(_names)}"


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the whole run (skipped, with the reason, where it cannot be
    installed or started)."""
    from tests.helpers import postgres

    reason = postgres.unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = postgres.start(logical=True)  # the real-Debezium tests read its WAL too
    yield server
    server.stop()


@pytest.fixture(scope="session")
def jdbc_catalog(spark, postgres_server, tmp_path_factory) -> str:
    """Catalog ``pg``: Iceberg's JDBC catalog on that PostgreSQL server."""
    from tests.helpers.postgres import catalog_conf

    warehouse = tmp_path_factory.mktemp("pg-warehouse")
    for key, value in catalog_conf("pg", postgres_server, str(warehouse)).items():
        spark.conf.set(key, value)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS pg.test")
    return "pg"


@pytest.fixture(params=["hadoop", "jdbc"])
def catalog(request) -> str:
    """Each concurrency test on both catalogs: the Hadoop catalog 'lake' (commit by rename) and
    Iceberg's JDBC catalog on PostgreSQL 'pg' (commit by a conditional UPDATE)."""
    if request.param == "hadoop":
        return "lake"
    return request.getfixturevalue("jdbc_catalog")
