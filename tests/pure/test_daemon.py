"""sparkext's Python worker daemon: what it imports before forking, and that it is safe to fork."""

from __future__ import annotations

import subprocess
import sys

from sparkext.daemon import PRELOADED, preload


def test_every_preloaded_module_imports():
    assert preload() == []


def test_a_module_that_fails_to_import_is_left_to_the_workers():
    assert preload(("sparkext.no_such_module", "json")) == ["sparkext.no_such_module"]


def test_preloading_starts_no_python_thread_and_leaves_the_daemon_to_pyspark():
    # A Python thread alive at fork() would be missing (with any lock it held) in every worker.
    probe = (
        "import threading, sparkext.daemon as d; d.preload(); "
        "import pyspark.daemon; print(threading.active_count())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"]
    assert "pyiceberg.io.pyarrow" in PRELOADED  # the ~1 s import of the file writer's metrics
