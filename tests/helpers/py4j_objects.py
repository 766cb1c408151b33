"""How many Java objects py4j's gateway holds for the driver's Python proxies."""

from __future__ import annotations

import time
from collections.abc import Callable


def bound_objects(spark) -> Callable[[], int]:
    """A counter of the gateway's bound objects. The bindings map is fetched once and read
    live: fetching it anew each time would bind two more objects per reading (the gateway and
    the map), which with Python's automatic collector off would never be released."""
    bindings = spark.sparkContext._gateway.java_gateway_server.getGateway().getBindings()
    return lambda: int(bindings.size())


def java_objects_held(count: Callable[[], int], within: float = 20.0) -> int:
    """``count()`` once py4j's finalizer thread, which sends the releases of collected proxies
    on its own and sleeps 1 s when it has none, has left it unchanged for 1.5 s."""
    deadline, last = time.monotonic() + within, count()
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = count()
        if now == last:
            return now
        last = now
    return last
