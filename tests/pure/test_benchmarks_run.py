"""``python -m benchmarks.run`` writes its results where git does not track them."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import run

REPO = Path(run.__file__).resolve().parent.parent
NOW = dt.datetime(2026, 11, 23, 10, 15, 0, tzinfo=dt.timezone.utc)


def test_the_default_output_is_a_new_file_under_the_local_directory():
    args = run.parse_args(["routing_overhead"])
    assert args.out.parent == run.LOCAL_RESULTS
    assert args.out.name.startswith("routing_overhead-") and args.out.suffix == ".json"
    assert run.default_out([], NOW).name == "all-20261123T101500Z.json"
    assert run.default_out(["cdc_ingest", "stream_backfill"], NOW).name == (
        "cdc_ingest+stream_backfill-20261123T101500Z.json"
    )


def test_out_names_the_file_and_json_is_its_old_name(tmp_path):
    assert run.parse_args(["--out", str(tmp_path / "a.json")]).out == tmp_path / "a.json"
    assert run.parse_args(["--json", str(tmp_path / "b.json")]).out == tmp_path / "b.json"


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)
def test_git_ignores_the_default_output_and_tracks_no_file_there():
    path = run.default_out(["stream_backfill"], NOW).relative_to(REPO)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO, check=False)
    assert ignored.returncode == 0, f"{path} is not ignored by git"
    tracked = subprocess.run(
        ["git", "ls-files", str(run.LOCAL_RESULTS.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert tracked.stdout == ""


def test_a_bad_sustained_shape_is_one_sentence_naming_the_variable():
    from benchmarks.cdc_ingest import sustained_shape

    assert sustained_shape("200000x10") == (200_000, 10)
    assert sustained_shape("0") is None
    for bad in ("0x0", "200000x0", "10000x4", "lots", "200000", "2\u00b2x4"):
        with pytest.raises(ValueError, match="SPARKEXT_BENCH_SUSTAINED must be 0 or"):
            sustained_shape(bad)


def test_bad_table_sizes_are_one_sentence_naming_the_variable():
    from benchmarks.cdc_ingest import table_sizes

    assert table_sizes("1000000, 16000000") == [1_000_000, 16_000_000]
    for bad in ("", "1M", "16000000,1000000", "1000000,1000000", "64000000", "0,10"):
        with pytest.raises(ValueError, match="SPARKEXT_BENCH_SIZES must list increasing"):
            table_sizes(bad)


class _Stream:
    """A stand-in for a StreamingQuery whose trigger state follows a script, one entry per
    look at ``status``: True while a batch is in flight."""

    def __init__(self, active: list[bool], batches: list[int]):
        self.active, self.batches = iter(active), iter(batches)

    @property
    def status(self) -> dict:
        return {"isTriggerActive": next(self.active)}

    @property
    def lastProgress(self) -> dict:  # Spark's name
        return {"batchId": next(self.batches)}


def test_the_soak_samples_only_between_two_triggers():
    from benchmarks.cdc_soak import quiet_sample

    taken = []

    def sample() -> dict:
        taken.append(len(taken))
        return {"heap": float(len(taken))}

    # busy; then idle but a batch ran meanwhile (id 3 -> 4); then idle across the sample
    stream = _Stream(active=[True, False, False, False, False], batches=[3, 3, 4, 4, 4, 4])
    assert quiet_sample(stream, sample, tries=5) == {"heap": 2.0, "quiet": 1}
    assert taken == [0, 1]
    # a stream that never rests: the last attempt, marked as not quiet
    busy = _Stream(active=[True] * 3, batches=[7] * 3)
    assert quiet_sample(busy, sample, tries=3) == {"heap": 3.0, "quiet": 0}


def test_the_soak_counts_only_the_worker_processes_under_its_own_jvm():
    import os
    import signal
    import sys
    import time

    from benchmarks.cdc_soak import _workers

    sleep = f'"{sys.executable}" -c "import time; time.sleep(60)"'
    # a stand-in JVM with a daemon, a worker and an unrelated child; a Python parent whose own
    # command line does not hold the names (a forked child shows its parent's until it execs)
    starter = (
        "import subprocess, sys, time\n"
        "nap = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "for name in ('sparkext.executors.' + 'daemon', 'pyspark.' + 'worker', None):\n"
        "    subprocess.Popen(nap + ([name] if name else []))\n"
        "time.sleep(60)\n"
    )
    jvm = subprocess.Popen([sys.executable, "-c", starter], start_new_session=True)
    # a daemon whose shell exited at once belongs to init, not to the stand-in
    orphan = subprocess.run(
        ["sh", "-c", f"{sleep} pyspark.daemon > /dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    try:
        deadline = time.monotonic() + 10
        while _workers(jvm.pid) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # until /proc shows the commands
        assert _workers(jvm.pid) == 2
    finally:
        os.killpg(jvm.pid, signal.SIGKILL)
        jvm.wait()
        os.kill(int(orphan.stdout.strip()), signal.SIGKILL)


def test_the_soak_compares_heap_floors_not_single_samples():
    from benchmarks.cdc_soak import heap_floors

    def samples(heaps: list[float]) -> list[tuple[float, dict]]:
        return [(60.0 * i, {"jvm_heap_used_mib": h}) for i, h in enumerate(heaps)]

    # a trough at warm-up and a spike at the end (one batch still pinned): the floor is flat
    flat = samples([40, 73, 140, 74, 206, 73, 140, 75, 206])
    assert heap_floors(flat, warm_up=60, window=180) == (73, 75, 206)
    # a leak lifts every sample, so the floor too
    leak = samples([40, 73, 140, 80, 150, 100, 170, 120, 190])
    warm, end, _ = heap_floors(leak, warm_up=60, window=180)
    assert (warm, end) == (73, 120) and end > 1.2 * warm + 1
    with pytest.raises(ValueError, match="no sample after the 600-s warm-up"):
        heap_floors(samples([40, 50]), warm_up=600)
