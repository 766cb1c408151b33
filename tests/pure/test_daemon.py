"""sparkext's Python worker daemon: what it imports before forking, and that it is safe to fork."""

from __future__ import annotations

import importlib
import subprocess
import sys

from sparkext.executors.daemon import preload


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
        "import sys; sys.path.insert(0, sys.argv[1]); import sparkext.executors.daemon as d; "
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
        "import threading, sparkext.executors.daemon as d; d.preload(); "
        "import pyspark.daemon; print(threading.active_count())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"]


ARCHIVE_PROBE = """
import os, sys, zipfile, zipimport
import sparkext.executors.daemon as d

archive = sys.argv[1]
with zipfile.ZipFile(archive, "w") as z:
    z.writestr("first_in_zip.py", "X = 1\\n")
    z.writestr("pkg_in_zip/__init__.py", "")
    z.writestr("pkg_in_zip/first.py", "")
sys.path.insert(0, archive)
import first_in_zip
import pkg_in_zip.first  # a second importer of the same archive: modules.zip/pkg_in_zip

reads = []
original = zipimport._read_directory
zipimport._read_directory = lambda path: reads.append(path) or original(path)

d.invalidate_caches()  # first sight of the archive: read again, as the standard call does
first = len(reads)
d.invalidate_caches()  # unchanged: not read again
d.invalidate_caches()
unchanged = len(reads) - first

with zipfile.ZipFile(archive, "a") as z:  # the archive changes: a module is added
    z.writestr("added_later.py", "Y = 2\\n")
    z.writestr("pkg_in_zip/added_too.py", "Z = 3\\n")
os.utime(archive, ns=(1, 1))  # a new stamp even within the file system's time resolution
d.invalidate_caches()
import added_later
import pkg_in_zip.added_too  # every importer of a changed archive reads it again

print(first, unchanged, added_later.Y, archive in sys.path_importer_cache)
"""


def test_an_archive_on_the_path_is_read_again_only_when_it_changed(tmp_path):
    # PySpark's worker invalidates import caches before every task; Spark's zips and jars on
    # the workers' path made that ~0.1-0.2 s a task when each archive was re-read every time.
    done = subprocess.run(
        [sys.executable, "-c", ARCHIVE_PROBE, str(tmp_path / "modules.zip")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, unchanged, added, still_cached = done.stdout.split()
    assert int(first) >= 1  # a changed (or new) archive is read again
    assert unchanged == "0"  # an unchanged one is not
    assert added == "2"  # a module added to the archive is importable after invalidation
    assert still_cached == "True"  # the importers kept aside are put back


def test_the_workers_importlib_is_the_module_with_the_archive_aware_invalidation():
    from sparkext.executors.daemon import _worker_importlib, invalidate_caches

    shim = _worker_importlib()
    assert shim.invalidate_caches is invalidate_caches
    assert shim.import_module is importlib.import_module


def test_the_workers_socket_acknowledges_and_sends_without_delay():
    import socket

    from sparkext.executors.daemon import _with_fast_acks

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    seen = []
    worker = _with_fast_acks(lambda sock, authenticated: seen.append((sock, authenticated)) or 7)
    try:
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        assert worker(accepted, True) == 7  # PySpark's worker runs as before, its code returned
        assert seen == [(accepted, True)]
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        if hasattr(socket, "TCP_QUICKACK"):  # Linux: acknowledging at once, as the task starts
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 1
    finally:
        for sock in (client, accepted, listener):
            sock.close()


def test_a_socket_without_tcp_options_is_left_as_it_is():
    import socket

    from sparkext.executors.daemon import fast_acks

    one, other = socket.socketpair()  # a Unix socket: no TCP options to set
    try:
        fast_acks(one)
        one.sendall(b"x")
        assert other.recv(1) == b"x"
    finally:
        one.close()
        other.close()
