"""One writer per ingest_cdc checkpoint: a busy checkpoint says who holds it (issue 50)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from sparkext.actions.cdc.checkpoint import LOCK_NAME, hold
from sparkext.errors import IngestError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip


def test_another_process_is_told_who_holds_the_checkpoint(tmp_path):
    with hold(str(tmp_path), "ingest_cdc into lake.db.orders"):
        other = _child(f"""
            from sparkext.actions.cdc.checkpoint import hold
            try:
                with hold({str(tmp_path)!r}, "ingest_cdc into lake.db.orders"):
                    print("acquired")
            except Exception as error:
                print(error)
        """)
    said = other.stdout.strip()
    assert said.startswith(f"Checkpoint '{tmp_path}' is in use by ingest_cdc into lake.db.orders")
    assert f"(process {os.getpid()})" in said and "acquired" not in said
    assert not (tmp_path / LOCK_NAME).exists()  # released at the end of the block
    with hold(str(tmp_path), "again"):  # and free again
        pass


def test_a_holder_that_crashed_on_this_host_lets_go_at_once(tmp_path):
    crashed = _child(f"""
        import os
        from sparkext.actions.cdc.checkpoint import hold
        with hold({str(tmp_path)!r}, "ingest_cdc into t"):
            os._exit(3)
    """)
    assert crashed.returncode == 3 and (tmp_path / LOCK_NAME).exists()
    with hold(str(tmp_path), "the restart"):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["what"] == "the restart"


def test_a_lapsed_lock_of_another_host_is_taken_over_a_live_one_is_not(tmp_path):
    lock = tmp_path / LOCK_NAME
    stale = {"what": "w", "host": "elsewhere", "pid": 1, "since": "s", "token": "x"}
    lock.write_text(json.dumps({**stale, "expires": time.time() - 1}))
    with hold(str(tmp_path), "mine"):
        pass
    lock.write_text(json.dumps({**stale, "expires": time.time() + 60}))
    busy = pytest.raises(IngestError, match=r"in use by w on host elsewhere \(process 1\)")
    with busy, hold(str(tmp_path), "mine"):
        pass
    assert json.loads(lock.read_text())["host"] == "elsewhere"  # left as it was


def test_the_holder_renews_while_it_works(tmp_path):
    with hold(str(tmp_path), "long", ttl_s=0.6):
        first = json.loads((tmp_path / LOCK_NAME).read_text())["expires"]
        time.sleep(0.9)
        later = json.loads((tmp_path / LOCK_NAME).read_text())["expires"]
    assert later > first
