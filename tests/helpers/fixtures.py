"""Where the tests' vendored inputs live: inside the repository, so a clone alone passes."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# Real Debezium MySQL-connector events from the debezium/debezium repository (Apache-2.0); the
# directory's README.md names the source of each file.
DEBEZIUM_SAMPLES = FIXTURES / "debezium"
