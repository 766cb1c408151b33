"""Observed metrics of a finished Spark action, in two py4j calls.

PySpark's ``Observation.get`` converts Spark's Java map entry by entry (~9 py4j calls per metric:
90 for a ten-figure observation); the metrics row's JSON comes over in one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Observation


def observed_metrics(observation: Observation) -> dict[str, Any]:
    """The metrics ``observation`` collected (waits for them, like ``Observation.get``).

    Values are those of JSON: integers, strings, floats and None, which is what sparkext
    observes (counts, sums, positions, event times)."""
    java = observation._jo
    if java is None:
        raise ValueError("observation was not used: call DataFrame.observe first")
    return dict(json.loads(str(java.getRow().json())))
