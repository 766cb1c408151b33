"""A test seam for crash tests: every ingest_cdc pipeline built after :func:`crash_at` stops the
process at a named point of its batches (``os._exit``: no clean-up, no flush), as a real crash
would. The product has no such switch; a crash test's child process installs this before it
calls ingest_cdc (see :data:`CHILD_PREAMBLE`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sparkext.actions.cdc.ingest import Hooks, Ingestor

CRASH_EXIT = 97  # the exit status a crash test expects of its child
POINTS = ("after-write", "after-commit")
# the first lines of a crash test's child script: the point is its last argument
CHILD_PREAMBLE = (
    "import sys\nfrom tests.helpers.crash_hooks import crash_at\ncrash_at(sys.argv.pop())\n"
)


def child_path() -> str:
    """A child's PYTHONPATH: this checkout first (for ``tests.helpers``), then the caller's."""
    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)


class CrashAt(Hooks):
    """Hooks that kill the process at ``point`` (one of :data:`POINTS`)."""

    def __init__(self, point: str) -> None:
        if point not in POINTS:
            raise ValueError(f"no such point of a batch: {point}")
        self.point = point

    def reached(self, point: str) -> None:
        if point == self.point:
            os._exit(CRASH_EXIT)


def crash_at(point: str) -> None:
    """Every Ingestor built from now on in this process gets :class:`CrashAt` hooks."""
    original = Ingestor.__init__
    hooks = CrashAt(point)

    def with_hooks(self: Ingestor, *args: Any, **kwargs: Any) -> None:
        kwargs["hooks"] = hooks
        original(self, *args, **kwargs)

    Ingestor.__init__ = with_hooks  # type: ignore[method-assign]
