"""Just what :class:`sparkext.spark.cancellation.Runner` asks of a SparkSession, for pure tests of
signal handling (a real session is in tests/spark)."""

from __future__ import annotations

from collections.abc import Callable


class FakeContext:
    def setJobGroup(self, *args, **kwargs) -> None:
        pass

    def setLocalProperty(self, *args) -> None:
        pass

    def cancelJobGroup(self, group: str) -> None:
        pass

    def cancelAllJobs(self) -> None:
        pass


class FakeStreams:
    """``active`` calls ``on_active`` first (e.g. a Ctrl-C landing inside that py4j call)."""

    def __init__(self, on_active: Callable[[], None] = lambda: None):
        self.on_active = on_active

    @property
    def active(self) -> list:
        self.on_active()
        return []


class FakeSpark:
    def __init__(self, on_active: Callable[[], None] = lambda: None):
        self.sparkContext = FakeContext()
        self.streams = FakeStreams(on_active)
