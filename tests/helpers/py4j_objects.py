"""How many Java objects py4j's gateway holds for the driver's Python proxies."""

from __future__ import annotations

import time


def _bound(spark) -> int:
    return int(spark.sparkContext._gateway.java_gateway_server.getGateway().getBindings().size())


def java_objects_held(spark, within: float = 15.0) -> int:
    """The gateway's bound objects once py4j's finalizer thread (which sends the releases of
    collected proxies asynchronously) has stopped changing the count for 0.5 s."""
    deadline, last = time.monotonic() + within, _bound(spark)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _bound(spark)
        if now == last:
            return now
        last = now
    return last
