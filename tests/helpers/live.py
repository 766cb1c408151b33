"""Work that goes on beside a check: each step repeated on a thread of its own until the block
ends (a writer changing the source, an ingest job applying its events)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Repeating:
    """``with Repeating((step, pause), ...) as running:`` calls each ``step(n)`` (n = 1, 2, ...)
    then sleeps ``pause`` seconds, until the block ends; a step that raises stops its thread and
    its error is kept in ``errors``. ``rounds[i]``: how many times step i ran."""

    def __init__(self, *steps: tuple[Callable[[int], object], float]):
        self.steps = steps
        self.rounds = [0] * len(steps)
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(steps))
        ]

    def _run(self, index: int) -> None:
        step, pause = self.steps[index]
        while not self._stop.is_set():
            self.rounds[index] += 1
            try:
                step(self.rounds[index])
            except BaseException as error:  # the test asserts on it
                self.errors.append(error)
                return
            time.sleep(pause)

    def __enter__(self) -> Repeating:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
