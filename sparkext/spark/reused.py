"""Column expressions built once per JVM and reused by every micro-batch.

Building a PySpark expression costs a py4j round trip per function, literal and column name: the
typing of a five-column CDC batch alone took ~1,200 of them (~0.4 s of driver time per batch, more
than its Spark jobs on a small batch). The expressions depend only on the table's schema, not on
the batch, so ``@reused`` builds them once per distinct argument tuple and hands back the same
Column objects afterwards.

Reusing a Column is safe: it is an unresolved expression tree, resolved anew in each DataFrame
that uses it. What to keep out of a reused builder: ``Observation`` objects (one per action),
DataFrames, and anything that reads a DataFrame (its schema, its columns): pass those in as plain
hashable arguments instead. An alias keeps its expression id across reuses, which Spark handles
like the same DataFrame read twice (it deduplicates ids on a self-join).

Spark fixes some semantics when an expression is built rather than when it runs: a cast's or an
arithmetic operator's ANSI mode comes from the session's ``spark.sql.ansi.enabled`` at
construction. The mode in force is part of every entry's key, so a batch built under ANSI never
gets expressions built without it (or the other way round). Reading the mode is itself a few
py4j calls (~100 per micro-batch of ingest_cdc): within :func:`pinned_mode` a thread reads it once.

Entries belong to the JVM they were built in: a new gateway (a restarted driver JVM) starts an
empty cache. At most ``CAPACITY`` entries are kept (least recently used dropped): a stream whose
schema keeps evolving does not accumulate them.

Floor: spark (the py4j edge into Spark).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from sparkext.spark.observe import ansi_mode

CAPACITY = 256

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_entries: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_owner: list[Any] = [None]  # the gateway the entries were built through
_pinned = threading.local()  # .mode: this thread's mode while pinned_mode() runs
_UNPINNED = object()


def _gateway() -> Any:
    from pyspark import SparkContext

    return SparkContext._gateway


def _read_mode() -> Hashable:
    """The session state that expressions capture when they are built (see the module)."""

    return ansi_mode()


def _mode() -> Hashable:
    mode = getattr(_pinned, "mode", _UNPINNED)
    return _read_mode() if mode is _UNPINNED else mode


@contextmanager
def pinned_mode() -> Iterator[None]:
    """Build this thread's expressions under the mode in force when the block starts (read once):
    for a unit of work, such as a micro-batch, that does not change the session's SQL mode.

    >>> import sparkext.spark.reused as r
    >>> reads = []
    >>> real, r._read_mode = r._read_mode, lambda: reads.append(1) or True
    >>> with pinned_mode():
    ...     r._mode(), r._mode(), len(reads)
    (True, True, 1)
    >>> r._mode(), len(reads)  # unpinned again: read each time
    (True, 2)
    >>> r._read_mode = real
    """
    previous = getattr(_pinned, "mode", _UNPINNED)
    _pinned.mode = _read_mode()
    try:
        yield
    finally:
        _pinned.mode = previous


def reused(build: Callable[P, R]) -> Callable[P, R]:
    """Decorator: ``build(*args)`` once per JVM and distinct (hashable) ``args``.

    >>> calls = []
    >>> @reused
    ... def square(x):
    ...     calls.append(x)
    ...     return x * x
    >>> square(3), square(3), calls
    (9, 9, [3])
    """

    @functools.wraps(build)
    def cached(*args: P.args, **kwargs: P.kwargs) -> R:
        gateway = _gateway()
        key = (build.__module__, build.__qualname__, _mode(), args, tuple(sorted(kwargs.items())))
        with _lock:
            if _owner[0] is not gateway:
                _entries.clear()
                _owner[0] = gateway
            if key in _entries:
                _entries.move_to_end(key)
                return _entries[key]
        value = build(*args, **kwargs)  # outside the lock: two threads may both build, harmlessly
        with _lock:
            if _owner[0] is gateway:
                _entries[key] = value
                while len(_entries) > CAPACITY:
                    _entries.popitem(last=False)
        return value

    return cached


def clear() -> None:
    """Forget every entry (tests)."""
    with _lock:
        _entries.clear()
