"""sparkext's Python worker daemon: what it imports before forking, and that it is safe to fork."""

from __future__ import annotations

import subprocess
import sys

from sparkext.daemon import preload


def test_every_preloaded_module_imports():
    assert preload() == []


def test_a_module_that_fails_to_import_is_left_to_the_workers(capfd):
    assert preload(("sparkext.no_such_module", "json")) == ["sparkext.no_such_module"]
    out, err = capfd.readouterr()
    assert out == ""
    assert "not preloaded sparkext.no_such_module" in err


def test_what_a_preloaded_module_prints_goes_to_stderr_not_to_the_port(tmp_path, monkeypatch):
    # The JVM reads the daemon's port from the first bytes of its stdout.
    (tmp_path / "noisy_module.py").write_text(
        "import os, sys\nprint('python-level')\nos.write(1, b'fd-level\\n')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import sparkext.daemon as d; "
        "d.preload(('noisy_module',)); print('after')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "after\n"
    assert "python-level" in done.stderr
    assert "fd-level" in done.stderr


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
