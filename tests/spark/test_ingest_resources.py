"""What one ingest_cdc micro-batch leaves behind (nothing cached) and its key lookups in bulk."""

from __future__ import annotations

import gc

from tests.helpers import cdc_calls
from tests.helpers.cdc_calls import binlog_event, events, land
from tests.helpers.py4j_objects import bound_objects, java_objects_held


def ingest(table: str, landing, checkpoint, options: str = "") -> dict:
    return cdc_calls.ingest(
        table, landing, checkpoint, options=f"'key-cache-batches', '1'{options}"
    )


def cached(spark) -> tuple[int, bool]:
    """Persisted RDDs, and whether Spark's cache manager holds no cached plan."""
    manager = spark._jsparkSession.sharedState().cacheManager()
    return spark.sparkContext._jsc.getPersistentRDDs().size(), bool(manager.isEmpty())


def test_every_micro_batch_releases_what_it_cached(spark, tmp_path, table_name):
    spark.catalog.clearCache()  # other tests' CACHE TABLEs do not count here
    before = cached(spark)  # nor what an earlier test of the shared session left persisted
    assert before[1]
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    missing_key = '{"op": "c", "after": {"name": "no id"}, "source": {"pos": 1}}'
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "x")), [missing_key])
    land(landing, "2.json", events(("u", 1, 20, "b"), ("d", 2, 30, None)))
    # two files, one per micro-batch: a continuous stream would go on like this
    ingest(table_name, landing, checkpoint, ", 'max-files-per-batch', '1'")
    assert cached(spark) == before
    land(landing, "3.json", events(("c", 3, 40, "z")))
    ingest(table_name, landing, checkpoint)  # key 2 leaves the key cache
    assert cached(spark) == before
    land(landing, "4.json", events(("u", 2, 25, "late"), ("u", 1, 15, "late")))
    fourth = ingest(table_name, landing, checkpoint)  # looks keys up in the table
    assert (fourth["late"], fourth["lookups"]) == (2, 2)
    assert cached(spark) == before


def change(op: str, key: str, pos: int, name: str) -> dict:
    before = None if op == "c" else {"id": key, "name": "old"}
    return binlog_event(op, before, {"id": key, "name": name}, pos)


def test_thousands_of_late_keys_are_looked_up_without_a_per_key_list(
    spark, tmp_path, table_name, monkeypatch
):
    from pyspark.sql import Column

    listed: list[int] = []
    isin = Column.isin

    def spy(self, *values):
        listed.append(len(values[0]) if len(values) == 1 and isinstance(values[0], list) else 0)
        return isin(self, *values)

    monkeypatch.setattr(Column, "isin", spy)
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    keys = [f"o'k\\{i}é" for i in range(1500)]  # quotes and backslashes survive as literals
    land(landing, "1.json", [change("c", k, 10_000 + i, "a") for i, k in enumerate(keys)])
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [change("c", "other", 20_000, "x")])
    ingest(table_name, landing, checkpoint)  # batch 1's keys leave the key cache
    # keys 0..749: older than their create (late); 750..1499: newer, yet below the table's
    # high-water mark, so they are looked up too and then applied
    late = [change("u", k, 1 + i, "late") for i, k in enumerate(keys[:750])]
    newer = [change("u", k, 15_000 + i, "b") for i, k in enumerate(keys[750:])]
    land(landing, "3.json", late + newer)
    third = ingest(table_name, landing, checkpoint)
    assert (third["lookups"], third["late"], third["updated"]) == (1500, 750, 750)
    names = {r.id: r.name for r in spark.table(table_name).collect()}
    assert names == {"other": "x", **{k: "a" for k in keys[:750]}, **{k: "b" for k in keys[750:]}}
    assert max(listed, default=0) < 100  # no per-key py4j list


def test_every_micro_batch_lets_go_of_the_java_objects_its_proxies_held(
    spark, tmp_path, table_name
):
    """py4j proxies sit in reference cycles, so the Java objects behind a batch's DataFrames
    would live until Python's next full collection (about 350 objects a batch, 70-140 MiB of
    heap on 2,000-change batches); the batch collects them when it ends. Python's automatic
    collector is off here, so only that can release them."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "x")))
    ingest(table_name, landing, checkpoint)  # the table exists: the next batch is a plain one
    count = bound_objects(spark)
    gc.collect()
    before = java_objects_held(count)
    land(landing, "2.json", events(("u", 1, 20, "b"), ("d", 2, 30, None), ("c", 3, 40, "z")))
    gc.disable()
    try:
        assert ingest(table_name, landing, checkpoint)["updated"] == 1
        after = java_objects_held(count)
    finally:
        gc.enable()
    assert after - before < 60, f"{after - before} Java objects still held after the batch"


def _sockets_and_threads() -> tuple[int, int]:
    """This process's open sockets and its threads, as the OS counts them."""
    import contextlib
    import os

    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed while listed
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return sockets, len(os.listdir("/proc/self/task"))


def test_repeated_calls_leave_no_socket_or_thread_behind(spark, tmp_path, table_name):
    """Each call's streaming query runs its batches on a JVM thread of its own, which calls the
    batch function through a py4j socket of its own, served by a thread here: py4j keeps both
    until the process ends unless the call lets them go (a service or `serve` calling
    ingest_cdc every minute would run out of file descriptors)."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "0.json", events(("c", 0, 10, "a")))
    ingest(table_name, landing, checkpoint)
    before = _sockets_and_threads()
    for i in range(1, 5):
        land(landing, f"{i}.json", events(("c", i, 10 + i, "a")))
        ingest(table_name, landing, checkpoint)
    after = _sockets_and_threads()
    assert after[0] <= before[0], (before, after)
    assert after[1] <= before[1], (before, after)
