"""Iceberg's own SQL and Spark's parser-level statements behave the same with sparkext attached.

The oracle is stock Iceberg-Spark: the same script (``tests/helpers/iceberg_compat.py``) in an
application without sparkext. It is played there, on the suite's attached session (sparkext's
parser wrapping Iceberg's) and on a session that applies sparkext's extension BEFORE Iceberg's
(Iceberg's parser wrapping sparkext's): in-process by default, as an application of its own in
the stress tier; every step must end the same way. The default tier plays the script's core
(every statement form a parser wrapper can disturb, the sort and Z-order rewrites among them),
the stress tier all of it (``iceberg_compat.SCRIPTS``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import iceberg_compat

ROOT = Path(__file__).resolve().parents[2]


def _start(mode: str, workdir: Path, script: str) -> subprocess.Popen:
    workdir.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.iceberg_compat", mode, str(workdir), script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _finish(child: subprocess.Popen) -> dict:
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sparkext_first", "script"),
    [
        pytest.param("in-process", "core", id="core-script-sparkext-first-in-process"),
        pytest.param(
            "process",
            "full",
            id="full-script-sparkext-first-in-a-process",
            marks=pytest.mark.stress,
        ),
    ],
)
def test_iceberg_statements_end_the_same_with_and_without_sparkext(
    spark, tmp_path, sparkext_first, script
):
    """The stock application is always a process of its own (the oracle: no sparkext in it).
    The order with sparkext's extension first is built in-process by default (a second session
    of the suite's application, the extensions applied in that order on a warehouse of its
    own), and as its own application (``spark.sql.extensions`` so listed) in the stress tier.
    All of them play the same script: its core by default, all of it in the stress tier."""
    assert any("zorder" in s.sql for s in iceberg_compat.steps(script))  # the sort rewrites too
    plain = _start("plain", tmp_path / "plain", script)
    reversed_ = (
        _start("reversed", tmp_path / "reversed", script) if sparkext_first == "process" else None
    )
    try:
        iceberg_compat.forget(spark)  # an earlier run's tables, in this session's warehouse
        with ThreadPoolExecutor(max_workers=1) as pool:
            # sparkext first, in-process: on a thread of its own, while the script plays here
            in_process = (
                pool.submit(
                    iceberg_compat.play_sparkext_first, spark, str(tmp_path / "reversed"), script
                )
                if reversed_ is None
                else None
            )
            attached = iceberg_compat.run(spark, str(tmp_path / "attached"), script=script)
            first = in_process.result(timeout=600) if in_process is not None else None
    finally:
        spark.sql("RESET spark.wap.id")
        stock = _finish(plain)
        if reversed_ is not None:
            first = _finish(reversed_)
    if in_process is not None:  # Iceberg's parser outermost, sparkext's inside it
        assert first["parser"].endswith(".IcebergSparkSqlExtensionsParser"), first["parser"]
    expected = stock["outcomes"]
    # the oracle itself ran the script: every Iceberg statement worked in stock Iceberg-Spark
    failed = [o["sql"] for o in expected if not o["ok"]]
    assert failed == ["SELECT count(*) AS n FROM compat_view"], failed  # the dropped view
    for name, outcomes in (("attached", attached), ("sparkext first", first["outcomes"])):
        differ = [
            (e["sql"], e["result"], o["result"]) for e, o in zip(expected, outcomes, strict=True)
        ]
        differ = [d for d in differ if d[1] != d[2]]
        assert not differ, f"{name}: {differ}"
        assert len(outcomes) == len(expected)
    # with Iceberg's parser outermost, sparkext's SQL still runs
    assert first["extra"] == {
        "table_health_rows": 2,
        "changelog_rows": first["extra"]["changelog_rows"],
    }
    assert first["extra"]["changelog_rows"] > 0


def test_the_session_parser_is_still_icebergs_extended_parser(spark):
    """Iceberg finds its sort-order parser by ``sqlParser() instanceof ExtendedParser``."""
    jvm = spark._jvm
    parser = spark._jsparkSession.sessionState().sqlParser()
    assert jvm.io.sparkext.spark.Bridge.isSparkextParser(parser)
    fields = jvm.org.apache.iceberg.spark.ExtendedParser.parseSortOrder(
        spark._jsparkSession, "zorder(id, s), d DESC NULLS LAST"
    )
    assert fields.size() == 2
    assert (
        str(fields.get(1).direction()) == "DESC" and str(fields.get(1).nullOrder()) == "NULLS LAST"
    )
