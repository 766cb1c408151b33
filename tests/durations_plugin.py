"""Per-test durations, recorded instead of remembered.

``pytest --store-durations`` writes the wall time of every test (setup + call + teardown, in
seconds) to ``tests/durations/<tier>.json``, where the tier is ``stress`` when the run selects
``-m stress`` and ``default`` otherwise. Every run ends with a short report of its slowest tests
(``--durations`` in pyproject's addopts). Tests never assert wall-clock times; these files are for
people deciding what belongs in which tier.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

DIRECTORY = Path(__file__).parent / "durations"


def pytest_addoption(parser):
    parser.addoption(
        "--store-durations",
        action="store_true",
        default=False,
        help="write every test's wall time to tests/durations/<tier>.json",
    )


def tier(config) -> str:
    """``stress`` when the run selects ``-m stress`` (an expression naming it, not negating it),
    else ``default``."""
    markexpr = config.getoption("markexpr") or ""
    return "stress" if "stress" in markexpr and "not stress" not in markexpr else "default"


class _Recorder:
    def __init__(self, config):
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session, exitstatus):
        if not self.seconds:
            return
        tier_name = tier(self.config)
        DIRECTORY.mkdir(exist_ok=True)
        path = DIRECTORY / f"{tier_name}.json"
        ordered = dict(sorted(self.seconds.items(), key=lambda item: -item[1]))
        payload = {
            "tier": tier_name,
            "tests": len(ordered),
            "total_seconds": round(sum(ordered.values()), 1),
            "seconds": {nodeid: round(value, 2) for nodeid, value in ordered.items()},
        }
        path.write_text(json.dumps(payload, indent=1) + "\n")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if config.getoption("--store-durations"):
        config.pluginmanager.register(_Recorder(config), "sparkext-durations")
