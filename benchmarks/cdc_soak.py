"""A long ``ingest_cdc_stream`` run: driver memory, cached blocks and open files must stay flat.

Issue 22's leak check. A producer lands one Debezium file of SPARKEXT_SOAK_CHANGES (default
2,000) changes every SPARKEXT_SOAK_EVERY seconds (default 5) into a continuous stream (trigger
every 5 s) for SPARKEXT_SOAK_SECONDS (default 7200: two hours). Once a minute it samples the
driver's Python RSS, the JVM's heap after a GC, the JVM's and Python's open file descriptors,
Spark's cached RDDs and the Python worker processes, each time between two triggers (see
:func:`quiet_sample`). The figures compared are the first sample after a warm-up (10% of the
run) and the last one, and for the heap also its floors (:func:`heap_floors`: the least sample
of the first and of the last 10 minutes after the warm-up); the table is compared with the
producer's own model of the source (key -> row) at the end.

Until 2026-11-29 the samples were taken whenever the minute came, often mid-batch: the heap
figures swung between 90 and 340 MiB within a run and the end-vs-warm-up rule read noise. Three
things were then found (class histograms, ``jcmd <pid> GC.class_histogram``, and Python's
``gc`` module): part of the swing was the batch in flight; part was earlier batches' Java
objects pinned by py4j proxies in Python reference cycles (each stream batch now collects them,
``sparkext.spark.observe.release_proxies``; what PySpark's caller holds past the batch can
still pin one or two batches' worth, ~65 MiB each here); and the slow climb of the floor
(55 -> 147 MiB over the first 40 min, flat after) was Spark's status store filling up to its
default 1,000 SQL executions (two per batch): conf/spark-defaults.conf now keeps 100.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.cdc_ingest import random_image
from benchmarks.harness import Result

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

EPOCH_MS = 1_800_000_000_000


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _parent(pid: str) -> str | None:
    try:
        # the command name may hold spaces and parentheses: the fields after its last ")"
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


# Spark's own daemon, sparkext's (``spark.python.daemon.module``, local masters: until
# 2026-11-29 only the first was counted, so runs since sparkext.executors.daemon counted 0 workers)
# and workers Spark starts without a daemon
_WORKER_COMMANDS = (b"pyspark.daemon", b"sparkext.executors.daemon", b"pyspark.worker")


def _workers(pid: int) -> int:
    """Python worker processes under this JVM (the worker daemon and its forks), not another
    application's."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if not any(command in cmdline for command in _WORKER_COMMANDS):
            continue
        ancestor: str | None = entry
        for _ in range(4):  # JVM -> daemon -> forked worker
            ancestor = _parent(ancestor) if ancestor else None
            if ancestor == str(pid):
                count += 1
                break
    return count


def _batch_id(query: StreamingQuery) -> int | None:
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]


def quiet_sample(
    query: StreamingQuery, sample: Callable[[], dict[str, float]], *, tries: int = 200
) -> dict[str, float]:
    """``sample()`` taken while the stream is between two triggers, so the heap holds what the
    run keeps, not the rows and task metrics of a batch in flight (in local mode the executor is
    this JVM: a sample mid-batch read up to 230 MiB more than the one a minute later).

    A sample counts as quiet when no trigger was active before or after it and the last batch
    id did not change meanwhile; after ``tries`` unquiet attempts (0.1 s apart) the last one is
    returned with ``quiet`` 0, so a stream that never rests is visible rather than hidden.
    """
    for _ in range(tries):
        before = _batch_id(query)
        if not query.status["isTriggerActive"]:
            taken = sample()
            if not query.status["isTriggerActive"] and _batch_id(query) == before:
                return {**taken, "quiet": 1}
        time.sleep(0.1)
    return {**sample(), "quiet": 0}


def _heap_after_gc_mib(jvm, tries: int = 3) -> float:
    """The JVM's used heap right after a full GC, the least of ``tries`` (0.2 s apart): a GC
    the JVM puts off while a thread holds the GC locker (inside a JNI critical section; the
    JVM logs "GC locker is held") leaves garbage in one reading (140 MiB read against 84 MiB
    live in a class histogram a few seconds later, 2026-11-29)."""
    runtime = jvm.java.lang.Runtime.getRuntime()
    readings = []
    for attempt in range(tries):
        if attempt:
            time.sleep(0.2)
        jvm.java.lang.System.gc()
        readings.append((int(runtime.totalMemory()) - int(runtime.freeMemory())) / 2**20)
    return min(readings)


def heap_floors(
    samples: list[tuple[float, dict]], warm_up: float, window: float = 600.0
) -> tuple[float, float, float]:
    """(heap floor of the first ``window`` seconds after ``warm_up``, heap floor of the last
    ``window`` seconds, highest heap sample after ``warm_up``), from ``(seconds, sample)`` pairs.

    A floor is the least sample of its window: between two batches the heap may still hold one
    or two earlier batches' Java objects until Python collects (see ``release_proxies``), so a
    single sample compares a spike with a trough as often as not; what a leak moves is the floor.

    >>> s = [(t, {"jvm_heap_used_mib": h}) for t, h in [(0, 50), (60, 70), (120, 140), (180, 71),
    ...      (240, 205), (300, 72)]]
    >>> heap_floors(s, warm_up=60, window=120)
    (70, 72, 205)
    """
    after = [(t, x["jvm_heap_used_mib"]) for t, x in samples if t >= warm_up]
    if not after:
        raise ValueError(f"no sample after the {warm_up:g}-s warm-up")
    first, last = after[0][0], after[-1][0]
    warm = min(h for t, h in after if t < first + window)
    end = min(h for t, h in after if t > last - window)
    return warm, end, max(h for _, h in after)


def _sample(spark) -> dict[str, float]:
    jvm = spark._jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    return {
        "python_rss_mib": _rss_mib(os.getpid()),
        "jvm_heap_used_mib": _heap_after_gc_mib(jvm),
        "jvm_rss_mib": _rss_mib(jvm_pid),
        "jvm_open_files": _fds(jvm_pid),
        "python_open_files": _fds(os.getpid()),
        "cached_rdds": int(spark.sparkContext._jsc.getPersistentRDDs().size()),
        "python_workers": _workers(jvm_pid),
    }


def _event(key: int, pos: int, op: str, before, after) -> dict:
    return {
        "op": op,
        "before": before,
        "after": after,
        "source": {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": EPOCH_MS + pos},
    }


def run(spark) -> list[Result]:
    import sparkext

    seconds = float(os.environ.get("SPARKEXT_SOAK_SECONDS", "7200"))
    changes = int(os.environ.get("SPARKEXT_SOAK_CHANGES", "2000"))
    every = float(os.environ.get("SPARKEXT_SOAK_EVERY", "5"))
    table = "lake.bench.cdc_soak"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-soak-"))
    landing, checkpoint = work / "landing", work / "checkpoint"
    landing.mkdir()
    rng = random.Random(22)
    model: dict[int, dict] = {}
    pos = 0

    def land(n: int) -> None:
        nonlocal pos
        events = []
        for key in (rng.randrange(50_000) for _ in range(n)):
            pos += 1
            old = model.get(key)
            if old is not None and rng.random() < 0.1:
                events.append(_event(key, pos, "d", old, None))
                del model[key]
                continue
            new = random_image(key, rng)
            events.append(_event(key, pos, "u" if old else "c", old, new))
            model[key] = new
        name = landing / f"{pos:012d}.json"
        tmp = name.with_suffix(".tmp")
        tmp.write_text("\n".join(json.dumps(e) for e in events) + "\n")
        tmp.rename(name)  # the stream never sees a half-written file

    land(changes)
    query = sparkext.ingest_cdc_stream(
        table, str(landing), str(checkpoint), primary_key="id", create=True, interval="5 seconds"
    )
    samples: list[tuple[float, dict[str, float]]] = []
    started = time.monotonic()
    next_sample = started
    try:
        while time.monotonic() - started < seconds:
            time.sleep(every)
            land(changes)
            if query.exception() is not None:
                raise RuntimeError(f"the stream failed: {query.exception()}")
            if time.monotonic() >= next_sample:
                sample = quiet_sample(query, lambda: _sample(spark))
                samples.append((time.monotonic() - started, sample))
                print(f"{samples[-1][0]:7.0f} s  {sample}", flush=True)
                next_sample += 60
        query.processAllAvailable()
    finally:
        query.stop()
    samples.append((time.monotonic() - started, {**_sample(spark), "quiet": 1}))  # stopped
    rows = {
        r.id: {"id": r.id, "name": r.name, "qty": r.qty, "price": r.price}
        for r in spark.table(table).select("id", "name", "qty", "price").collect()
    }
    assert rows == model, f"{table} differs from the source model after the soak run"
    warm = next(s for t, s in samples if t >= 0.1 * seconds)
    quiet = sum(int(s["quiet"]) for _, s in samples)
    last = samples[-1][1]
    hours = samples[-1][0] / 3600
    results = []
    for name, limit in (
        ("python_rss_mib", 1.2),
        ("jvm_heap_used_mib", 1.5),
        ("jvm_open_files", 1.2),
        ("python_open_files", 1.2),
        ("cached_rdds", 1.0),
        ("python_workers", 1.0),
    ):
        before, after = warm[name], last[name]
        results.append(
            Result(
                benchmark="cdc_soak",
                metric=f"{name} at the end of a {hours:.2f}-h stream ({changes:,} changes / "
                f"{every:g} s)",
                ours=after,
                baseline_name="after warm-up",
                baseline=before,
                goal=f"flat (end <= {limit}x warm-up, +1)",
                met=after <= limit * before + 1,
                notes=f"{len(samples)} samples ({quiet} between triggers), {pos:,} changes, "
                "table == source model",
            )
        )
    warm_floor, end_floor, highest = heap_floors(samples, 0.1 * seconds)
    results.append(
        Result(
            benchmark="cdc_soak",
            metric=f"JVM heap floor (least sample of a 10-min window, MiB) at the end of a "
            f"{hours:.2f}-h stream",
            ours=end_floor,
            baseline_name="first 10 min after warm-up",
            baseline=warm_floor,
            goal="flat (end <= 1.2x warm-up, +1)",
            met=end_floor <= 1.2 * warm_floor + 1,
            notes=f"highest sample after warm-up {highest:.0f} MiB",
        )
    )
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    shutil.rmtree(work, ignore_errors=True)
    return results
