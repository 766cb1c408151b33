"""sparkext.changelog over the last 10 of 20 CDC commits, against two time-travel reads' difference.

Issue 16's benchmark. A table of ``rows`` (default 10M; ``--rows``) base rows gets 1% of its keys
changed over 20 commits (per commit rows/2,000 events: mostly updates, 10% deletes, 5% inserts
of new keys, and from the second commit on 10% re-updates of keys changed before). The
changelog of the last 10 commits is read, in the same run, by

* sparkext: ``SELECT * FROM sparkext.changelog(t, S10, S20, options)``, with
  ``net-changes`` (the peer's semantics: outputs checked equal) and, timed apart, the non-net
  changelog with ``compute-updates``;
* the peer, what a user computes today: ``S20 EXCEPT ALL S10`` (inserts), ``S10 EXCEPT ALL S20``
  (deletes), and a full outer join on the key pairing them into UPDATE_BEFORE / UPDATE_AFTER.

Each side is materialised the same way (a write to Spark's ``noop`` sink). Two shapes of table:

* ``ingest_cdc``: created by ``CALL sparkext.ingest_cdc(... create => true)``, the base appended
  by Spark in that table's schema, then 20 real ``ingest_cdc`` commits of Debezium JSON events
  (full-row equality deletes: sparkext's fast path);
* ``key-only``: the same base rows and changes (user columns only) committed the way a Flink
  upsert writer does, through Iceberg's Java API: per commit one data file of the new rows and
  one equality-delete file holding only the keys (sparkext's slow path: the deleted rows are
  found among the rows live before each commit).

Bytes read: Hadoop's FileSystem statistics of the JVM (every thread, driver-side planning and
Iceberg's delete-loading pool included; local mode, so the executors are in this JVM), taken
before and after each measured call; the stages' input bytes (Spark's status store, the figure
the UI's REST API serves) are printed beside them, per stage for sparkext. The bytes of the files
added in the range are the sizes of the ADDED entries of the range's snapshots in
``<table>.all_entries`` (data and delete files).

Goals (issue 16): >= 10x faster than the peer, and bytes read <= 1.1x the bytes added in the
range (the fast path; the slow path's figures are reported).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.cdc_ingest import random_image
from benchmarks.harness import Result

ROWS = 10_000_000
COMMITS = 20
RANGE = 10  # the changelog covers the last RANGE commits
SEED = 16
CDC_TABLE = "lake.bench.changelog_cdc"
KEY_ONLY_TABLE = "lake.bench.changelog_key_only"
STAGE_ROWS = "lake.bench.changelog_stage_rows"  # one commit's new rows, read back by Java
STAGE_KEYS = "lake.bench.changelog_stage_keys"  # one commit's deleted keys
USER_COLUMNS = "id BIGINT, name STRING, qty BIGINT, price DOUBLE"
NET = "map('net-changes', 'true')"
UPDATES = "map('compute-updates', 'true')"
# timed runs per query (SPARKEXT_BENCH_CHANGELOG_ROUNDS), after a warm-up run of sparkext's
# queries (the first changelog call, planning cache cold, is reported apart) and, on the first
# shape, the peer's
ROUNDS = int(os.environ.get("SPARKEXT_BENCH_CHANGELOG_ROUNDS", "2"))


def _base_image(key: int) -> dict:
    """A base row as cdc_ingest._grow writes it (the same expressions, in Python)."""
    return {"id": key, "name": f"name-{key % 997}", "qty": key % 1000, "price": (key % 10000) / 100}


def _history(rows: int, rng: random.Random) -> list[list[tuple[str, int, dict | None, dict]]]:
    """COMMITS batches of (op, key, before image, after image) changing 1% of the keys."""
    per_commit = max(20, rows // 100 // COMMITS)
    fresh = iter(rng.sample(range(rows), k=per_commit * COMMITS))
    current: dict[int, dict | None] = {}  # changed keys' images (None: deleted)
    next_new = rows  # new keys: above every base key
    batches = []
    for _commit in range(COMMITS):
        n_new, n_delete = per_commit // 20, per_commit // 10
        live = sorted(k for k, image in current.items() if image is not None)
        again = rng.sample(live, k=min(len(live), per_commit // 10))
        batch = []
        for i in range(per_commit):
            if i < n_new:
                op, key, before = "c", next_new, None
                next_new += 1
            elif i < n_new + len(again):
                key = again[i - n_new]
                op, before = "u", current[key]
            else:
                key = next(fresh)
                before = _base_image(key)
                op = "d" if i >= per_commit - n_delete else "u"
            after = None if op == "d" else random_image(key, rng)
            current[key] = after
            batch.append((op, key, before, after))
        rng.shuffle(batch)
        batches.append(batch)
    return batches


def _debezium(batches: list[list[tuple]]) -> list[list[dict]]:
    """The batches as Debezium MySQL events, binlog positions increasing (after the base's)."""
    pos, out = 10**12, []
    for batch in batches:
        events = []
        for op, _key, before, after in batch:
            pos += 1
            source = {"file": "mysql-bin.000009", "pos": pos, "row": 0}
            events.append(
                {
                    "op": op,
                    "before": before,
                    "after": after,
                    "ts_ms": 1_800_000_000_000 + pos,
                    "source": {
                        **source,
                        "ts_ms": 1_800_000_000_000 + pos,
                        "db": "shop",
                        "table": "orders",
                    },
                }
            )
        out.append(events)
    return out


def _build_cdc(spark, work: Path, rows: int, batches: list[list[tuple]]) -> None:
    """An ingest_cdc table: created by the procedure, base appended by Spark in its schema, then
    COMMITS real ingest_cdc commits (one landed file each)."""
    import sparkext
    from benchmarks.cdc_ingest import _grow, land_seed

    landing, checkpoint = work / "landing", work / "checkpoint"
    landing.mkdir()
    land_seed(landing)
    call = (
        f"CALL sparkext.ingest_cdc(table => '{CDC_TABLE}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true, "
        "options => map('max-files-per-batch', '1'))"
    )
    sparkext.sql(call).collect()
    started = time.perf_counter()
    _grow(spark, CDC_TABLE, 0, rows)
    print(f"base of {rows:,} rows appended in {time.perf_counter() - started:.0f} s", flush=True)
    for commit, events in enumerate(_debezium(batches)):
        text = "\n".join(json.dumps(e) for e in events) + "\n"
        (landing / f"{commit + 1:03d}-changes.json").write_text(text)
    started = time.perf_counter()
    out = sparkext.sql(call).first()
    assert out.commits == COMMITS, out
    print(f"{COMMITS} ingest_cdc commits in {time.perf_counter() - started:.0f} s", flush=True)


def _java_table(spark, name: str):
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )
    table.refresh()
    return table


def _java_array(spark, kind, *items):
    array = spark.sparkContext._gateway.new_array(kind, len(items))
    for i, item in enumerate(items):
        array[i] = item
    return array


def _build_key_only(spark, rows: int, batches: list[list[tuple]]) -> None:
    """The same base and changes, committed as a Flink upsert writer does (Java API): per commit
    one RowDelta of a data file (the new rows) and an equality-delete file of the keys only (every
    key the commit touched, new ones too, as upsert mode writes). The rows go through two staging
    tables Spark writes and Iceberg's generic reader reads back, so py4j moves no row."""
    from pyspark.sql import functions as F

    spark.sql(
        f"CREATE TABLE {KEY_ONLY_TABLE} (id BIGINT NOT NULL, name STRING, qty BIGINT, "
        "price DOUBLE) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read')"
    )
    spark.sql(f"ALTER TABLE {KEY_ONLY_TABLE} SET IDENTIFIER FIELDS id")
    spark.range(0, rows).selectExpr(
        "id",
        "concat('name-', id % 997) AS name",
        "id % 1000 AS qty",
        "cast(id % 10000 AS double) / 100 AS price",
    ).writeTo(KEY_ONLY_TABLE).append()
    spark.sql(f"CREATE TABLE {STAGE_ROWS} ({USER_COLUMNS}) USING iceberg")
    spark.sql(f"CREATE TABLE {STAGE_KEYS} (id BIGINT) USING iceberg")
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    # FileWriter.write(Iterable), called by reflection: py4j would pick write(T) for an
    # Iterable (T erases to Object). The rows stay in the JVM.
    iterable = _java_array(
        spark, jvm.java.lang.Class, jvm.java.lang.Class.forName("java.lang.Iterable")
    )
    for batch in batches:
        new_rows = [tuple(after.values()) for _op, _key, _before, after in batch if after]
        keys = [(key,) for _op, key, _before, _after in batch]
        spark.createDataFrame(new_rows, USER_COLUMNS).coalesce(1).writeTo(STAGE_ROWS).overwrite(
            F.lit(True)
        )
        spark.createDataFrame(keys, "id BIGINT").coalesce(1).writeTo(STAGE_KEYS).overwrite(
            F.lit(True)
        )
        table = _java_table(spark, KEY_ONLY_TABLE)
        schema = table.schema()
        ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
        ids[0] = schema.findField("id").fieldId()
        names = jvm.java.util.ArrayList()
        names.add("id")
        factory = iceberg.data.GenericAppenderFactory(
            schema, table.spec(), ids, schema.select(names), None
        )

        def output(prefix: str, table=table):
            location = table.locationProvider().newDataLocation(f"{prefix}-{uuid.uuid4()}.parquet")
            return iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
                table.io().newOutputFile(location)
            )

        data = factory.newDataWriter(output("flink-data"), iceberg.FileFormat.PARQUET, None)
        deletes = factory.newEqDeleteWriter(output("flink-eq"), iceberg.FileFormat.PARQUET, None)
        for writer, stage in ((data, STAGE_ROWS), (deletes, STAGE_KEYS)):
            records = iceberg.data.IcebergGenerics.read(_java_table(spark, stage)).build()
            write_all = writer.getClass().getMethod("write", iterable)
            write_all.invoke(writer, _java_array(spark, jvm.java.lang.Object, records))
            records.close()
            writer.close()
        table.newRowDelta().addRows(data.toDataFile()).addDeletes(deletes.toDeleteFile()).commit()
    for stage in (STAGE_ROWS, STAGE_KEYS):
        spark.sql(f"DROP TABLE IF EXISTS {stage} PURGE")


def _range(spark, table: str) -> tuple[int, int, list[int]]:
    """(S10, S20, the range's snapshot ids): the end's ancestry, last RANGE commits."""
    ancestry = [
        r.snapshot_id
        for r in spark.sql(
            f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at"
        ).collect()
    ]
    return ancestry[-RANGE - 1], ancestry[-1], ancestry[-RANGE:]


def _added_bytes(spark, table: str, snapshots: list[int]) -> tuple[int, int]:
    """(bytes, count) of the data and delete files the snapshots added."""
    row = spark.sql(
        f"SELECT sum(data_file.file_size_in_bytes), count(*) FROM {table}.all_entries "
        f"WHERE status = 1 AND snapshot_id IN ({', '.join(map(str, snapshots))})"
    ).first()
    return int(row[0]), int(row[1])


class _Meter:
    """Bytes the JVM reads (Hadoop FileSystem statistics, every thread) and the stages a
    measured call runs (Spark's status store: nothing else runs in this process meanwhile)."""

    def __init__(self, spark):
        self.spark = spark
        self.jvm = spark._jvm
        self.context = spark.sparkContext._jsc.sc()

    def fs_bytes(self) -> int:
        return sum(
            s.getBytesRead() for s in self.jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
        )

    def stages(self) -> dict[tuple[int, int], tuple[str, int, int, int]]:
        """(stage id, attempt) -> (name, input bytes, tasks, executor run ms)."""
        self.context.listenerBus().waitUntilEmpty()
        gateway = self.spark.sparkContext._gateway
        found = self.context.statusStore().stageList(
            None,
            False,
            False,
            gateway.new_array(self.jvm.double, 0),
            self.jvm.java.util.ArrayList(),
        )
        out = {}
        for i in range(found.size()):
            stage = found.apply(i)
            out[(stage.stageId(), stage.attemptId())] = (
                stage.name(),
                stage.inputBytes(),
                stage.numTasks(),
                stage.executorRunTime(),
            )
        return out

    def measure(self, label: str, fn: Callable[[], None]) -> tuple[float, int, dict]:
        """(seconds, bytes read, the stages it ran) of one call of ``fn``."""
        before_stages, before = self.stages(), self.fs_bytes()
        self.spark.sparkContext.setJobGroup(f"bench-changelog-{label}", label)
        try:
            started = time.perf_counter()
            fn()
            seconds = time.perf_counter() - started
        finally:
            self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
            self.spark.sparkContext.setLocalProperty("spark.job.description", None)
        read = self.fs_bytes() - before
        stages = {k: v for k, v in self.stages().items() if k not in before_stages}
        return seconds, read, stages


def _ours(table: str, start: int, end: int, options: str):
    import sparkext

    return sparkext.sql(
        f"SELECT * FROM sparkext.changelog(table => '{table}', start => '{start}', "
        f"end => '{end}', options => {options})"
    )


def _peer(spark, table: str, start: int, end: int):
    """The user's fallback today: the difference of two time-travel reads, updates paired."""
    return spark.sql(
        f"""
        WITH old AS (SELECT * FROM {table} VERSION AS OF {start}),
             new AS (SELECT * FROM {table} VERSION AS OF {end}),
             deleted AS (SELECT * FROM old EXCEPT ALL SELECT * FROM new),
             inserted AS (SELECT * FROM new EXCEPT ALL SELECT * FROM old),
             paired AS (
               SELECT d.image AS before, i.image AS after
               FROM (SELECT id, struct(*) AS image FROM deleted) d
               FULL OUTER JOIN (SELECT id, struct(*) AS image FROM inserted) i ON d.id = i.id)
        SELECT change.image.*, change.type AS _change_type
        FROM paired LATERAL VIEW explode(filter(array(
            named_struct('image', before,
                         'type', IF(after IS NULL, 'DELETE', 'UPDATE_BEFORE')),
            named_struct('image', after,
                         'type', IF(before IS NULL, 'INSERT', 'UPDATE_AFTER'))),
          c -> c.image IS NOT NULL)) AS change
        """
    )


def _materialise(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _check_equal(spark, table: str, start: int, end: int) -> dict[str, int]:
    """sparkext's net changelog and the peer hold the same (row, change) multiset, the peer's
    update images counted as the DELETE / INSERT they net to; returns the counts per change."""
    from pyspark.sql import functions as F

    columns = spark.table(table).columns
    ours = _ours(table, start, end, NET).select(*columns, "_change_type")
    peer = _peer(spark, table, start, end).select(
        *columns,
        F.when(F.col("_change_type") == "UPDATE_BEFORE", "DELETE")
        .when(F.col("_change_type") == "UPDATE_AFTER", "INSERT")
        .otherwise(F.col("_change_type"))
        .alias("_change_type"),
    )
    if not (ours.exceptAll(peer).isEmpty() and peer.exceptAll(ours).isEmpty()):
        raise AssertionError(f"{table}: sparkext's net changelog and the peer's differ")
    counts = _peer(spark, table, start, end).groupBy("_change_type").count().collect()
    return {r._change_type: r["count"] for r in counts}


def _stage_lines(stages: dict) -> list[str]:
    return [
        f"      stage {sid}.{attempt}: {tasks} tasks, {ms / 1000:.1f} s run, "
        f"{read / 2**20:,.1f} MiB input  ({name})"
        for (sid, attempt), (name, read, tasks, ms) in sorted(stages.items())
    ]


def _shape(spark, label: str, table: str, rows: int, fast: bool, warm_peer: bool) -> list[Result]:
    start, end, in_range = _range(spark, table)
    added, added_files = _added_bytes(spark, table, in_range)
    meter = _Meter(spark)
    queries = {
        "ours_net": lambda: _materialise(_ours(table, start, end, NET)),
        "ours_updates": lambda: _materialise(_ours(table, start, end, UPDATES)),
        "peer": lambda: _materialise(_peer(spark, table, start, end)),
    }
    first: dict[str, float] = {}
    for name, fn in queries.items():  # warm-up: JIT, caches, Python workers
        if name != "peer" or warm_peer:
            first[name] = meter.measure(f"{label}-{name}-warm-up", fn)[0]
    times: dict[str, list[float]] = {name: [] for name in queries}
    read: dict[str, tuple[int, int, dict]] = {}
    for i in range(ROUNDS):
        order = list(queries) if i % 2 == 0 else list(reversed(queries))
        for name in order:
            seconds, fs_read, stages = meter.measure(f"{label}-{name}", queries[name])
            times[name].append(seconds)
            read[name] = (fs_read, sum(s[1] for s in stages.values()), stages)
    median = {name: statistics.median(t) for name, t in times.items()}
    counts = _check_equal(spark, table, start, end)  # after the timing: a cold first call above
    print(f"[{label}] outputs equal; peer's changes: {counts}", flush=True)
    print(
        f"[{label}] {rows:,} rows, range of {RANGE} commits adds {added_files} files, "
        f"{added:,} bytes",
        flush=True,
    )

    def runs(samples: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in samples)

    for name in queries:
        fs_read, stage_read, stages = read[name]
        print(
            f"[{label}] {name}: {median[name]:.2f} s (runs {runs(times[name])}); "
            f"read {fs_read:,} bytes (stages' input {stage_read:,}) = "
            f"{fs_read / added:.2f}x the added bytes"
            + (
                f"; first call (planning cache cold) {first[name]:.2f} s"
                if name == "ours_net"
                else ""
            ),
            flush=True,
        )
        if name != "peer":
            print("\n".join(_stage_lines(stages)), flush=True)
    print(
        f"[{label}] ours (net) {median['ours_net']:.2f} s, peer {median['peer']:.2f} s: "
        f"{median['peer'] / median['ours_net']:.1f}x faster (goal >= 10x); bytes read ours / "
        f"added in range = {read['ours_net'][0] / added:.2f} (goal <= 1.1)",
        flush=True,
    )
    shape = f"{label}, {rows:,} rows, changelog of the last {RANGE} of {COMMITS} commits"
    peer_name = "two time-travel reads, EXCEPT ALL both ways + update pairing"
    bytes_goal = "<= 1.1x the bytes added in the range" if fast else "reported (slow path)"
    return [
        Result(
            "changelog",
            f"seconds, net changes ({shape})",
            median["ours_net"],
            peer_name,
            median["peer"],
            ">= 10x faster" if fast else "reported (slow path)",
            median["peer"] / median["ours_net"] >= 10 if fast else True,
            f"{median['peer'] / median['ours_net']:.1f}x faster; first call (cold) "
            f"{first['ours_net']:.2f} s; outputs equal; {counts}",
        ),
        Result(
            "changelog",
            f"seconds, changelog with compute-updates ({shape})",
            median["ours_updates"],
            peer_name,
            median["peer"],
            "reported",
            True,
            f"{median['peer'] / median['ours_updates']:.1f}x faster",
        ),
        Result(
            "changelog",
            f"bytes read, net changes ({shape})",
            read["ours_net"][0],
            "bytes of the files added in the range",
            added,
            bytes_goal,
            read["ours_net"][0] <= 1.1 * added if fast else True,
            f"stages' input {read['ours_net'][1]:,}; peer read {read['peer'][0]:,} "
            f"(stages' input {read['peer'][1]:,}); compute-updates read "
            f"{read['ours_updates'][0]:,}",
        ),
    ]


def run(spark, rows: int | None = None) -> list[Result]:
    rows = rows or int(os.environ.get("SPARKEXT_BENCH_CHANGELOG_ROWS", ROWS))
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-changelog-"))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    tables = (CDC_TABLE, KEY_ONLY_TABLE, STAGE_ROWS, STAGE_KEYS)
    for table in tables:
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    batches = _history(rows, random.Random(SEED))
    try:
        started = time.perf_counter()
        _build_cdc(spark, work, rows, batches)
        print(f"ingest_cdc table built in {time.perf_counter() - started:.0f} s", flush=True)
        results = _shape(spark, "ingest_cdc", CDC_TABLE, rows, fast=True, warm_peer=True)
        spark.sql(f"DROP TABLE IF EXISTS {CDC_TABLE} PURGE")
        started = time.perf_counter()
        _build_key_only(spark, rows, batches)
        print(f"key-only table built in {time.perf_counter() - started:.0f} s", flush=True)
        results += _shape(spark, "key-only", KEY_ONLY_TABLE, rows, fast=False, warm_peer=False)
    finally:
        for table in tables:
            spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        shutil.rmtree(work, ignore_errors=True)
    return results
