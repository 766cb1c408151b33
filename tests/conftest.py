"""Shared fixtures: ONE local Spark session for the whole run, its warehouse in a temp dir.

Tests under tests/spark/ are marked ``spark``; tests/pure/ and the doctests in sparkext/ are
marked ``pure`` and never start Spark: ``pytest -m pure`` runs in seconds.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

_names = itertools.count(1)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).parts
        if "tests" in parts and "spark" in parts:
            item.add_marker(pytest.mark.spark)
        else:  # tests/pure and the doctests in sparkext/
            item.add_marker(pytest.mark.pure)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse):
    import sparkext

    os.environ.setdefault("SPARKEXT_HISTORY", str(warehouse.parent / "history"))
    session = sparkext.session(
        master="local[2]",
        warehouse=str(warehouse),
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
        },
    )
    session.sql("CREATE NAMESPACE IF NOT EXISTS lake.test")
    yield session
    session.stop()


@pytest.fixture
def table_name(spark) -> str:
    """A fresh, unused table name in lake.test."""
    return f"lake.test.t{next(_names)}"
