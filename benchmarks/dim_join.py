"""Dimension joins kept current from the dimension's changelog (issue 17's benchmark).

An ``ingest_cdc`` dimension of ``rows`` items (``--rows``; default 1M, the issue's size is 10M)
gets 1% of its keys updated per simulated hour: one ingest_cdc commit per hour whose events lie
in the hour's first minute. Facts (orders of items) arrive in micro-batches of
SPARKEXT_BENCH_DIM_JOIN_FACTS rows (default 200,000), SPARKEXT_BENCH_DIM_JOIN_BATCHES_PER_HOUR
(default 2) per hour over SPARKEXT_BENCH_DIM_JOIN_HOURS hours (default 8, so that a run stays
under ~20 minutes on 2 cores; 24 for the issue's whole day); their times lie after the hour's
first minute, so "the dimension at the fact's time" is the dimension after that hour's commit,
whichever way a variant computes it. Only ``--rows`` goes through benchmarks/run.py; the other
sizes are these environment variables (as the other benchmarks' are).

Streams, in the same run, over the same dimension commits, each fact micro-batch (LEFT JOIN on
the item key) going through

* (a) sparkext stream mode with ``dimension_state=False``: the event-time temporal join
  (``FOR SYSTEM_TIME AS OF o.order_time``) reads the dimension's state again per micro-batch;
* (b) the peer: Spark Structured Streaming, ``readStream`` of the facts and, in foreachBatch, a
  stream-static join with ``spark.read.table(dim)`` (pinned to the snapshot current at the
  batch's start, recorded like sparkext records its own), appended to a sink;
* (c) sparkext stream mode with ``dimension_state=True`` (state in executor memory, brought
  forward by the new commits' event logs);
* (c90) as (c) with 90% of the facts missing the dimension (throughput goal), fed in the last
  MISS_HOURS hours only (a stream without facts runs no micro-batch; its first one reloads);
* (d) a control: the same sparkext stream without the join (the facts' own time).

Each variant reads its own copy of the facts (identical rows, (c90)'s keys aside), appended
just before it is driven (``processAllAvailable``), so the variants run one after the other,
never at the same time; the order rotates every step.

Dimension bytes per micro-batch: for (c) the refresh records of the run
(``StreamRun.dimensions.records``: event-log bytes of a delta, live bytes of a reload); for (a),
(b) and, as a check, (c) and (d): the input bytes of the Spark stages of the variant's step that
scan the dimension's files (a ``BatchScan`` of the dimension table: data and delete files) or
its event logs (``Scan parquet``), from Spark's status store (task input metrics: what the tasks
read through Hadoop's FileSystem). Driver-side reads (metadata, manifests, Parquet footers while
planning) are not in them. Whole-JVM FileSystem deltas minus (d)'s were tried first and dropped:
in micro-batches after a dimension commit Spark's runtime bloom filter scans the facts a second
time (a subquery that prunes the dimension side), which that subtraction counted as dimension
bytes. Batch time: the stream's ``triggerExecution``. Latency: from a dimension commit to the
first sink commit whose summary ``sparkext.stream.dimension-snapshots`` pinned it (or a later
snapshot; (a) records no pin: there, the first sink commit after it), counted from the later of
the commit and the start of that variant's step (so variants driven before it do not count
against it).

Catch-up: CATCH_UP (SPARKEXT_BENCH_DIM_JOIN_CATCH_UP, default 100) small commits while no facts
arrive, then one micro-batch: (c)'s delta against (c90) forced to reload
(``reload_factor = 0.0``), compared by the refresh's own seconds.

Batch: the day's facts joined in event mode by ``sparkext.dim_join_changelog`` against (i) per
hour the facts of that hour joined with ``VERSION AS OF`` the hour's snapshot, unioned, and
(ii) a range join over a version table materialised from the source's event history with
``lead()`` (the generator's own rows, not the product's; its build is timed apart). Every output
is checked equal (and (c)'s sink over the day to the batch output); so are the sinks of (a),
(b) and (c): with every dimension event before the facts of its hour, processing time and
event time give the same rows here.

The streams start with ``start_from`` = the day's start: the dimension's bulk rows were appended
by Spark in its schema (the quick build of benchmarks.cdc_ingest), not through ingest_cdc, so
they have no event log, and a stream's versions "from the beginning" start at the first logged
event.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import Result

ROWS = 1_000_000
FACTS = int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_FACTS", 200_000))
HOURS = int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_HOURS", 8))
PER_HOUR = int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_BATCHES_PER_HOUR", 2))
CATCH_UP = int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_CATCH_UP", 100))
MISS_HOURS = 3
ROUNDS = int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_ROUNDS", 1))  # batch: timed runs each
UPDATES_PER_10K = 100  # 1% of the keys per hour
DAY = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)
DAY_MS = int(DAY.timestamp() * 1000)
HOUR_MS = 3_600_000
MISS_KEY = 10**12  # facts' keys from here on are in no dimension
SENTINEL = -1  # order id of the fact that moves every watermark past the last hour
STREAMED = ("a", "b", "c", "c90", "d")
NO_MISSES = ("a", "b", "c", "d")  # (c90) gets facts in the last MISS_HOURS hours only
NAMES = {
    "a": "(a) sparkext stream, dimension re-read per micro-batch",
    "b": "(b) Spark stream-static join (foreachBatch)",
    "c": "(c) sparkext stream, dimension state from the changelog",
}
FACT_COLUMNS = ("order_id", "order_time", "item_id", "amount")
OUT_COLUMNS = (*FACT_COLUMNS, "name", "qty", "price")
SINK_DDL = (
    "order_id BIGINT, order_time TIMESTAMP, item_id BIGINT, amount DOUBLE, name STRING, "
    "qty BIGINT, price DOUBLE"
)
JOB = """
CREATE TABLE {facts} (order_id BIGINT, order_time TIMESTAMP, item_id BIGINT, amount DOUBLE,
  WATERMARK FOR order_time AS order_time);
CREATE TABLE {sink} ({sink_ddl});
INSERT INTO {sink} SELECT o.order_id, o.order_time, o.item_id, o.amount, {dims}
FROM {facts} AS o{join};
"""
JOIN = " LEFT JOIN {dim} FOR SYSTEM_TIME AS OF o.order_time AS d ON o.item_id = d.id"


@dataclass
class Step:
    """One round of micro-batches: every variant gets the same facts once."""

    number: int
    label: str
    commits: list[tuple[int, int]]  # dimension (snapshot id, commit ms) made just before
    steady: bool
    variants: tuple[str, ...] = STREAMED  # the variants driven in this step
    runs: dict[str, dict] = field(default_factory=dict)  # variant -> figures


class _Meter:
    """Input bytes of the Spark stages a step runs, by what they scan (Spark's status store)."""

    def __init__(self, spark, dim: str):
        self.spark, self.jvm, self.dim = spark, spark._jvm, dim.lower()
        self.context = spark.sparkContext._jsc.sc()
        self.seen: set[int] = set()
        self.new_stages()  # everything before the streams is not a step's

    def new_stages(self) -> list[tuple[int, int, list[str]]]:
        """(stage id, input bytes, operator names) of the stages finished since the last call."""
        self.context.listenerBus().waitUntilEmpty()
        store = self.context.statusStore()
        found = store.stageList(
            None,
            False,
            False,
            self.spark.sparkContext._gateway.new_array(self.jvm.double, 0),
            self.jvm.java.util.ArrayList(),
        )
        out = []
        for i in range(found.size()):
            stage = found.apply(i)
            if stage.stageId() in self.seen or str(stage.status()) != "COMPLETE":
                continue
            self.seen.add(stage.stageId())
            names = _operator_names(store.operationGraphForStage(stage.stageId()).rootCluster())
            out.append((stage.stageId(), int(stage.inputBytes()), names))
        return out

    def dimension_bytes(self, stages) -> tuple[int, int]:
        """(input bytes of stages that scan the dimension's files or its event logs, of the
        other stages)."""
        dim = other = 0
        for _, read, names in stages:
            scans_dim = any(
                n.lower().startswith("scan parquet")
                or (n.lower().startswith("batchscan") and self.dim in n.lower())
                for n in names
            )
            dim, other = (dim + read, other) if scans_dim else (dim, other + read)
        return dim, other


def _operator_names(cluster) -> list[str]:
    names = []
    children = cluster.childClusters()
    for i in range(children.size()):
        child = children.apply(i)
        names.append(child.name())
        names.extend(_operator_names(child))
    return names


def _current_snapshot(spark, table: str) -> int:
    java = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table
    )
    java.refresh()
    return int(java.currentSnapshot().snapshotId())


# ---- data ----------------------------------------------------------------------------------


def _changes(spark, rows: int, hour: int, commit: int = -1, per_commit: int = 0):
    """Update events (id, ms, pos, name, qty, price): an hour's 1% (``commit`` -1; event times in
    the hour's first minute) or one small catch-up commit (``per_commit`` keys, in its own
    half second of the hour's first minute). Positions grow with (hour, commit, id)."""
    from pyspark.sql import functions as F

    hour_ms = DAY_MS + hour * HOUR_MS
    salt = [F.lit(hour), F.lit(commit)]
    if commit < 0:
        keep = F.pmod(F.xxhash64("id", *salt), F.lit(10_000)) < UPDATES_PER_10K
        ms = F.lit(hour_ms) + (F.col("id") * 59_000 / rows).cast("bigint")
        pos = F.lit(10**13 + hour * 10**11) + F.col("id")
    else:
        keep = F.pmod(F.xxhash64("id", *salt), F.lit(max(1, rows // per_commit))) == 0
        ms = F.lit(hour_ms + commit * 500) + (F.col("id") * 499 / rows).cast("bigint")
        pos = F.lit(10**13 + hour * 10**11 + (commit + 1) * rows) + F.col("id")
    return (
        spark.range(rows)
        .where(keep)
        .select(
            "id",
            ms.alias("ms"),
            pos.alias("pos"),
            F.concat(F.lit("n"), F.pmod(F.xxhash64("id", *salt, F.lit(1)), F.lit(100))).alias(
                "name"
            ),
            F.pmod(F.xxhash64("id", *salt, F.lit(2)), F.lit(1000)).alias("qty"),
            (F.pmod(F.xxhash64("id", *salt, F.lit(3)), F.lit(10_000)) / 100.0).alias("price"),
        )
    )


def _land(spark, work: Path, changes, number: int) -> None:
    """The changes as one Debezium JSON file in the landing zone (written by Spark)."""
    from pyspark.sql import functions as F

    image = F.struct("id", "name", "qty", "price")
    before = F.struct(
        "id",
        F.lit("old").alias("name"),
        F.lit(0).cast("bigint").alias("qty"),
        F.lit(0.0).alias("price"),
    )
    source = F.struct(
        F.lit("mysql-bin.000009").alias("file"),
        F.col("pos"),
        F.lit(0).alias("row"),
        F.col("ms").alias("ts_ms"),
        F.lit("shop").alias("db"),
        F.lit("orders").alias("table"),
    )
    event = F.struct(
        F.lit("u").alias("op"),
        before.alias("before"),
        image.alias("after"),
        F.col("ms").alias("ts_ms"),
        source.alias("source"),
    )
    staging = work / "staging"
    changes.select(F.to_json(event)).coalesce(1).write.mode("overwrite").text(str(staging))
    (part,) = staging.glob("part-*")
    shutil.move(str(part), work / "landing" / f"{number:06d}.json")


def _ingest(spark, work: Path, dim: str, files: int) -> tuple[list[tuple[int, int]], float]:
    """One ingest_cdc CALL committing each of the ``files`` new landed files on its own;
    returns the commits' (snapshot id, commit ms), oldest first, and the CALL's seconds."""
    import sparkext

    started = time.perf_counter()
    out = sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{dim}', source => '{work / 'landing'}', "
        f"checkpoint => '{work / 'cdc'}', options => map('max-files-per-batch', '1'))"
    ).first()
    seconds = time.perf_counter() - started
    assert out.commits == files, out
    java = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, dim
    )
    java.refresh()
    snapshot, made = java.currentSnapshot(), []
    for _ in range(files):
        made.append((int(snapshot.snapshotId()), int(snapshot.timestampMillis())))
        snapshot = java.snapshot(snapshot.parentId())
    return made[::-1], seconds


def _build_dimension(spark, work: Path, dim: str, rows: int) -> None:
    """Created by ingest_cdc from one seed event, then ``rows`` items appended in its schema."""
    import sparkext
    from benchmarks.cdc_ingest import _grow, land_seed

    (work / "landing").mkdir(parents=True)
    land_seed(work / "landing")
    sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{dim}', source => '{work / 'landing'}', "
        f"checkpoint => '{work / 'cdc'}', primary_key => 'id', create => true)"
    ).collect()
    _grow(spark, dim, 0, rows)


def _facts(spark, rows: int, facts: int, step: int, start_ms: int, span_ms: int, misses: bool):
    """One micro-batch of facts, times evenly over [start, start + span); keys uniform over the
    dimension, or (``misses``) 90% of them outside it."""
    from pyspark.sql import functions as F

    order_id = F.lit(step * facts) + F.col("id")
    key = F.pmod(F.xxhash64("id", F.lit(step)), F.lit(rows))
    if misses:
        missing = F.pmod(F.xxhash64("id", F.lit(step), F.lit(9)), F.lit(10)) < 9
        key = F.when(missing, F.lit(MISS_KEY) + order_id).otherwise(key)
    micros = F.lit(start_ms * 1000) + (F.col("id") * (span_ms * 1000) / facts).cast("bigint")
    return spark.range(facts).select(
        order_id.alias("order_id"),
        F.timestamp_micros(micros).alias("order_time"),
        key.alias("item_id"),
        (F.pmod(F.xxhash64("id", F.lit(step), F.lit(5)), F.lit(10_000)) / 100.0).alias("amount"),
    )


# ---- streams -------------------------------------------------------------------------------


def _peer(spark, facts: str, dim: str, sink: str, checkpoint: str):
    """(b): Structured Streaming's stream-static join, written by hand."""
    from pyspark.sql import functions as F

    from sparkext.streaming.dim_state import DIMENSIONS_KEY

    spark.sql(f"CREATE TABLE {sink} ({SINK_DDL}) USING iceberg")

    def each(batch, batch_id: int) -> None:
        session = batch.sparkSession
        pinned = _current_snapshot(session, dim)  # what spark.read.table(dim) reads now
        table = session.read.option("snapshot-id", str(pinned)).table(dim)
        dims = table.select(F.col("id").alias("_id"), "name", "qty", "price")
        joined = batch.join(dims, batch.item_id == dims._id, "left").select(*OUT_COLUMNS)
        joined.writeTo(sink).option(
            f"snapshot-property.{DIMENSIONS_KEY}", json.dumps({dim: pinned})
        ).append()

    return (
        spark.readStream.format("iceberg")
        .load(facts)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def _drive(query, append, meter: _Meter, failures=()) -> dict:
    """Append one micro-batch of facts and wait until the stream has processed it."""
    # idle triggers report the next batch's id with no rows: count batches that had rows
    seen = max((p["batchId"] for p in query.recentProgress if p["numInputRows"]), default=-1)
    meter.new_stages()
    start_ms = time.time() * 1000
    append()
    query.processAllAvailable()
    end_ms = time.time() * 1000
    if failures:
        raise failures[-1]
    deadline = time.monotonic() + 30
    while True:  # the progress of the last trigger lands just after it
        done = [p for p in query.recentProgress if p["batchId"] > seen and p["numInputRows"]]
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    dim_bytes, other_bytes = meter.dimension_bytes(meter.new_stages())
    return {
        "batch_ids": [p["batchId"] for p in done],
        "dim_bytes": dim_bytes,
        "other_bytes": other_bytes,
        "seconds": sum(p["durationMs"].get("triggerExecution", 0) for p in done) / 1000,
        "start_ms": start_ms,
        "end_ms": end_ms,
    }


def _start_streams(spark, names: dict, checkpoints: Path):
    from sparkext.streaming import run_stream

    runs = {}
    start = DAY.strftime("%Y-%m-%d %H:%M:%S")
    for variant in ("a", "c", "c90", "d"):
        job = JOB.format(
            facts=names[f"facts_{variant}"],
            sink=names[f"sink_{variant}"],
            sink_ddl=SINK_DDL,
            dims=(
                "CAST(NULL AS STRING), CAST(NULL AS BIGINT), CAST(NULL AS DOUBLE)"
                if variant == "d"
                else "d.name, d.qty, d.price"
            ),
            join="" if variant == "d" else JOIN.format(dim=names["dim"]),
        )
        runs[variant] = run_stream(
            spark,
            job,
            str(checkpoints / variant),
            interval="1 second",
            start_from=start,  # the dimension's bulk rows came before the day, not via its logs
            dimension_state=variant != "a",
        )
    runs["b"] = _peer(
        spark, names["facts_b"], names["dim"], names["sink_b"], str(checkpoints / "b")
    )
    return runs


def _step(step: Step, runs: dict, names: dict, frames: dict, meter: _Meter) -> None:
    """Every variant's micro-batch of this step, in a rotating order."""
    order = list(step.variants)
    order = order[step.number % len(order) :] + order[: step.number % len(order)]
    for variant in order:
        run = runs[variant]
        query = run if variant == "b" else run.query
        failures = () if variant == "b" else run.failures
        frame = frames["misses" if variant == "c90" else "hits"]
        table = names[f"facts_{variant}"]
        figures = _drive(query, lambda f=frame, t=table: f.writeTo(t).append(), meter, failures)
        if variant in ("c", "c90"):
            records = [r for r in run.dimensions.records if r.batch in figures["batch_ids"]]
            figures["measured"] = figures["dim_bytes"]
            figures["dim_bytes"] = sum(r.bytes_read for r in records)
            figures["refresh"] = [(r.kind, r.seconds, r.bytes_read) for r in records]
        step.runs[variant] = figures


def _stream_day(spark, work: Path, names: dict, rows: int, hours: int, per_hour: int):
    """Drive the day, the catch-up and the flush; returns (steps, the dimension's snapshot of
    each hour, seconds of each hourly ingest_cdc CALL)."""
    runs = _start_streams(spark, names, work / "checkpoints")
    meter = _Meter(spark, names["dim"])
    steps: list[Step] = []
    hourly: dict[int, int] = {}
    ingest_seconds: list[float] = []
    span = (HOUR_MS - 60_000) // per_hour
    number = 0
    try:
        for hour in range(hours + 2):  # the day, the catch-up hour, the flush
            commits = []
            if hour < hours:
                _land(spark, work, _changes(spark, rows, hour), hour)
                commits, seconds = _ingest(spark, work, names["dim"], 1)
                hourly[hour] = commits[0][0]
                ingest_seconds.append(seconds)
            elif hour == hours:  # the catch-up: many small commits while no facts arrive
                per_commit = max(10, rows // 10_000)
                for commit in range(CATCH_UP):
                    changes = _changes(spark, rows, hour, commit, per_commit)
                    _land(spark, work, changes, 10_000 + commit)
                commits, seconds = _ingest(spark, work, names["dim"], CATCH_UP)
                print(f"{CATCH_UP} catch-up commits in {seconds:.0f} s", flush=True)
                runs["c90"].dimensions.reload_factor = 0.0
            slots = per_hour if hour < hours else 1
            for slot in range(slots):
                start = DAY_MS + hour * HOUR_MS + 60_000 + slot * span
                count = FACTS if hour <= hours else 1
                frames = {
                    "hits": _facts(spark, rows, count, number, start, span, misses=False),
                    "misses": _facts(spark, rows, count, number, start, span, misses=True),
                }
                if hour > hours:  # the flush: one fact after everything
                    frames = {k: f.withColumn("order_id", _sentinel()) for k, f in frames.items()}
                label = (
                    f"hour {hour} #{slot + 1}"
                    if hour < hours
                    else ("catch-up" if hour == hours else "flush")
                )
                step = Step(
                    number,
                    label,
                    commits if slot == 0 else [],
                    number > 0 and hour < hours,
                    STREAMED if hour >= hours - MISS_HOURS else NO_MISSES,
                )
                _step(step, runs, names, frames, meter)
                steps.append(step)
                print(_step_line(step), flush=True)
                number += 1
            runs["c90"].dimensions.reload_factor = 1.0
    finally:
        for run in runs.values():
            run.stop()
    return steps, hourly, ingest_seconds


def _sentinel():
    from pyspark.sql import functions as F

    return F.lit(SENTINEL).cast("bigint")


def _step_line(step: Step) -> str:
    parts = []
    for variant in ("a", "b", "c", "c90"):
        figures = step.runs.get(variant, {"seconds": float("nan")})
        parts.append(
            f"{variant} {figures.get('dim_bytes', 0) / 2**20:,.2f} MiB {figures['seconds']:.2f} s"
        )
    refresh = ",".join(k for k, _, _ in step.runs["c"].get("refresh", []))
    return f"step {step.number} ({step.label}; c: {refresh}): " + "; ".join(parts)


# ---- figures -------------------------------------------------------------------------------


def _latencies(spark, sink: str, variant: str, steps: list[Step]) -> dict:
    """Per dimension commit: seconds from it (or from the start of the variant's step, if
    later) to the first sink commit that joined it or a later snapshot: the one its summary
    pinned, else ((a) records none) the newest dimension commit before the sink commit."""
    from pyspark.sql import functions as F

    from sparkext.streaming.dim_state import DIMENSIONS_KEY

    commits = [c for s in steps for c in s.commits]
    order = {sid: i for i, (sid, _) in enumerate(commits)}

    def seen(ms: int, pins: str | None) -> int:
        if pins:
            return order.get(next(iter(json.loads(pins).values())), -1)
        return max((order[sid] for sid, at in commits if at <= ms), default=-1)

    sink_commits = sorted(
        (r.ms, seen(r.ms, r.pins))
        for r in spark.table(f"{sink}.snapshots")
        .select(
            F.unix_millis("committed_at").alias("ms"),
            F.col("summary")[DIMENSIONS_KEY].alias("pins"),
        )
        .collect()  # one row per sink commit
    )
    out = {}
    for sid, dim_ms in commits:
        first = next((ms for ms, i in sink_commits if i >= order[sid]), None)
        if first is None:
            continue
        began = next(
            (
                s.runs[variant]["start_ms"]
                for s in steps
                if s.runs[variant]["start_ms"] <= first <= s.runs[variant]["end_ms"] + 1
            ),
            dim_ms,
        )
        out[sid] = (first - max(dim_ms, began)) / 1000
    return out


def _mismatches(frames: dict, reference: str) -> dict[str, int]:
    """Rows (as a multiset over OUT_COLUMNS) in which each frame differs from ``reference``."""
    from functools import reduce

    from pyspark.sql import functions as F

    tagged = reduce(
        lambda a, b: a.unionByName(b),
        [f.select(*OUT_COLUMNS, F.lit(n).alias("_src")) for n, f in frames.items()],
    )
    counts = tagged.groupBy(*OUT_COLUMNS).pivot("_src", list(frames)).count().na.fill(0)
    others = [n for n in frames if n != reference]
    row = counts.agg(*(F.sum(F.abs(F.col(reference) - F.col(n))).alias(n) for n in others)).first()
    return {n: int(row[n] or 0) for n in others}


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _noop(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _batch(spark, names: dict, rows: int, hours: int, hourly: dict[int, int]) -> dict:
    """Event-mode as-of join of the day's facts: ours, per-hour time travel, range join."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    import sparkext

    facts, dim = names["facts_a"], names["dim"]
    day_end = (DAY_MS + hours * HOUR_MS) * 1000
    day = f"SELECT * FROM {facts} WHERE unix_micros(order_time) < {day_end}"

    def ours():
        return sparkext.sql(
            f"SELECT * FROM sparkext.dim_join_changelog('{day}', '{dim}', 'f.item_id = d.id', "
            "'order_time', 'event')"
        )

    def per_hour():
        parts = [
            f"SELECT {', '.join('f.' + c for c in FACT_COLUMNS)}, d.name, d.qty, d.price "
            f"FROM {facts} f LEFT JOIN (SELECT id, name, qty, price FROM {dim} VERSION AS OF "
            f"{hourly[h]}) d ON f.item_id = d.id WHERE unix_micros(f.order_time) >= "
            f"{(DAY_MS + h * HOUR_MS) * 1000} AND unix_micros(f.order_time) < "
            f"{(DAY_MS + (h + 1) * HOUR_MS) * 1000}"
            for h in range(hours)
        ]
        return spark.sql("\nUNION ALL\n".join(parts))

    def ranged():
        return spark.sql(
            f"SELECT {', '.join('f.' + c for c in FACT_COLUMNS)}, v.name, v.qty, v.price "
            f"FROM ({day}) f LEFT JOIN {names['versions']} v ON f.item_id = v.id "
            "AND f.order_time >= v.valid_from AND (v.valid_to IS NULL OR f.order_time < v.valid_to)"
        )

    def build_versions():  # the source's event history (the generator's own rows), lead()
        base = spark.range(rows).selectExpr(
            "id",
            "concat('name-', id % 997) AS name",
            "id % 1000 AS qty",
            "cast(id % 10000 AS double) / 100 AS price",
            "timestamp_millis(1700000000000 + id) AS valid_from",
            "id AS pos",
        )
        history = base
        for hour in range(hours):
            history = history.unionByName(
                _changes(spark, rows, hour).select(
                    "id", "name", "qty", "price",
                    F.timestamp_millis("ms").alias("valid_from"), "pos",
                )
            )  # fmt: skip
        window = Window.partitionBy("id").orderBy("valid_from", "pos")
        history.withColumn("valid_to", F.lead("valid_from").over(window)).drop("pos").writeTo(
            names["versions"]
        ).using("iceberg").create()

    build = _timed(build_versions)
    queries = {"ours": ours, "per_hour": per_hour, "range": ranged}
    seconds = {name: float("inf") for name in queries}
    for round_ in range(ROUNDS):
        for name in list(queries) if round_ % 2 == 0 else list(reversed(queries)):
            took = _timed(lambda fn=queries[name]: _noop(fn()))
            seconds[name] = min(seconds[name], took)
            print(f"batch {name}: {took:.1f} s", flush=True)
    stream = spark.table(names["sink_c"]).where(
        (F.col("order_id") != SENTINEL) & (F.unix_micros("order_time") < day_end)
    )
    frames = {**{n: q() for n, q in queries.items()}, "stream_c": stream}
    differ = _mismatches(frames, "ours")
    facts_count = spark.sql(day).count()
    return {"seconds": seconds, "build": build, "differ": differ, "facts": facts_count}


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def _median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


def _stream_results(steps: list[Step], latency: dict, differ: dict, compared: int, setup: str):
    steady = [s for s in steps if s.steady]
    mib = 2**20

    def per(variant: str, key: str = "dim_bytes"):
        return [s.runs[variant][key] for s in steady]

    bytes_ = {v: _mean(per(v)) for v in ("a", "b", "c")}
    measured_c = _mean(per("c", "measured"))
    delta_c = [s.runs["c"]["dim_bytes"] for s in steady if s.runs["c"]["dim_bytes"]]
    seconds = {v: _median(per(v, "seconds")) for v in ("a", "b", "c", "d")}
    # (c90) from its second micro-batch (its first reloads), beside (c) in the same steps
    both = [s for s in steady if "c90" in s.runs][1:]
    seconds["c90"] = _median(s.runs["c90"]["seconds"] for s in both)
    seconds["c_both"] = _median(s.runs["c"]["seconds"] for s in both)
    hourly_ids = [s.commits[0][0] for s in steady if s.commits]  # hour 0's comes before any state
    hourly = {v: _median(latency[v][i] for i in hourly_ids if i in latency[v]) for v in "abc"}
    results = []
    for peer in ("a", "b"):
        results.append(
            Result(
                "dim_join",
                f"dimension MiB read per micro-batch, steady state (mean of {len(steady)})",
                bytes_["c"] / mib,
                NAMES[peer],
                bytes_[peer] / mib,
                ">= 10x fewer",
                bytes_[peer] >= 10 * bytes_["c"],
                f"{bytes_[peer] / max(bytes_['c'], 1):,.0f}x fewer; (c) reads only in the "
                f"{len(delta_c)} batches after a commit (mean {_mean(delta_c) / mib:.2f} MiB), "
                f"measured (c) {measured_c / mib:.2f} MiB; {setup}",
            )
        )
    for peer in ("a", "b"):
        results.append(
            Result(
                "dim_join",
                "seconds per micro-batch, steady state (median)",
                seconds["c"],
                NAMES[peer],
                seconds[peer],
                "reported",
                True,
                f"{seconds[peer] / seconds['c']:.2f}x faster; facts alone (d) {seconds['d']:.2f} s",
            )
        )
    for peer in ("a", "b"):
        results.append(
            Result(
                "dim_join",
                "seconds from an hourly dimension commit to the first sink commit joining it "
                "(median)",
                hourly["c"],
                NAMES[peer],
                hourly[peer],
                "reported",
                True,
                "counted from the later of the commit and the variant's facts arriving",
            )
        )
    results.append(
        Result(
            "dim_join",
            "(c) seconds per micro-batch with 90% of facts missing (median, steady)",
            seconds["c90"],
            "(c) with 0% misses, same micro-batches",
            seconds["c_both"],
            "<= 1.2x",
            seconds["c90"] <= 1.2 * seconds["c_both"],
            f"{seconds['c_both'] / seconds['c90']:.2f}x the throughput of 0% misses, over "
            f"{len(both)} micro-batches",
        )
    )
    catch = next(s for s in steps if s.label == "catch-up")
    delta, reload = catch.runs["c"]["refresh"], catch.runs["c90"]["refresh"]
    results.append(
        Result(
            "dim_join",
            f"seconds to catch up {len(catch.commits)} pending dimension snapshots (refresh)",
            sum(r[1] for r in delta),
            "full reload (reload_factor = 0.0)",
            sum(r[1] for r in reload),
            "delta no slower than the reload",
            [r[0] for r in delta] == ["delta"]
            and [r[0] for r in reload] == ["reload"]
            and sum(r[1] for r in delta) <= sum(r[1] for r in reload),
            f"delta {delta}, reload {reload} (kind, s, bytes); micro-batch "
            f"{catch.runs['c']['seconds']:.2f} s "
            f"vs {catch.runs['c90']['seconds']:.2f} s; latency of the last commit: (c) "
            f"{latency['c'].get(catch.commits[-1][0], float('nan')):.2f} s, (a) "
            f"{latency['a'].get(catch.commits[-1][0], float('nan')):.2f} s, (b) "
            f"{latency['b'].get(catch.commits[-1][0], float('nan')):.2f} s",
        )
    )
    results.append(
        Result(
            "dim_join",
            f"stream sinks: rows differing from (a) of {compared:,}",
            differ["c"],
            "(b) stream-static join",
            differ["b"],
            "(a) and (c) equal; (b) equal here",
            differ["c"] == 0 and differ["b"] == 0,
            "multiset difference over every output column, sentinel excluded",
        )
    )
    return results


def _batch_rows(steps: list[Step], latency: dict) -> list[Result]:
    """One row per micro-batch: (c)'s dimension bytes beside (a)'s, the rest in the notes."""
    out = []
    mib = 2**20
    for step in steps:
        runs = step.runs
        refresh = ",".join(k for k, _, _ in runs["c"].get("refresh", [])) or "none"
        pinned = [sid for sid, _ in step.commits]
        lat = " ".join(
            f"{v} {latency[v][pinned[-1]]:.1f}"
            for v in ("a", "b", "c")
            if pinned and pinned[-1] in latency[v]
        )
        out.append(
            Result(
                "dim_join_batch",
                f"dimension MiB, micro-batch {step.number} ({step.label}, (c) {refresh})",
                runs["c"]["dim_bytes"] / mib,
                "(a)",
                runs["a"]["dim_bytes"] / mib,
                "reported",
                True,
                f"(b) {runs['b']['dim_bytes'] / mib:.2f} MiB, (c) measured "
                f"{runs['c']['measured'] / mib:.2f}, (d) {runs['d']['dim_bytes'] / mib:.2f}; "
                "other stages' input (facts, in-memory state) "
                f"a {runs['a']['other_bytes'] / mib:.2f} b "
                f"{runs['b']['other_bytes'] / mib:.2f} c {runs['c']['other_bytes'] / mib:.2f}; "
                f"seconds a {runs['a']['seconds']:.2f} "
                f"b {runs['b']['seconds']:.2f} c {runs['c']['seconds']:.2f} "
                f"c90 {runs.get('c90', {}).get('seconds', float('nan')):.2f} "
                f"d {runs['d']['seconds']:.2f}" + (f"; latency s: {lat}" if lat else ""),
            )
        )
    return out


def run(spark, rows: int | None = None) -> list[Result]:
    rows = rows or int(os.environ.get("SPARKEXT_BENCH_DIM_JOIN_ROWS", ROWS))
    hours, per_hour = HOURS, PER_HOUR
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    stamp = int(time.time())
    names = {"dim": f"lake.bench.dj_dim_{stamp}", "versions": f"lake.bench.dj_versions_{stamp}"}
    for variant in STREAMED:
        names[f"facts_{variant}"] = f"lake.bench.dj_facts_{variant}_{stamp}"
        names[f"sink_{variant}"] = f"lake.bench.dj_sink_{variant}_{stamp}"
    for variant in STREAMED:
        spark.sql(
            f"CREATE TABLE {names[f'facts_{variant}']} (order_id BIGINT, order_time TIMESTAMP, "
            "item_id BIGINT, amount DOUBLE) USING iceberg"
        )
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-dim-join-"))
    try:
        started = time.perf_counter()
        _build_dimension(spark, work, names["dim"], rows)
        print(
            f"dimension of {rows:,} rows built in {time.perf_counter() - started:.0f} s", flush=True
        )
        steps, hourly, ingest_seconds = _stream_day(spark, work, names, rows, hours, per_hour)
        latency = {v: _latencies(spark, names[f"sink_{v}"], v, steps) for v in ("a", "b", "c")}
        sinks = {
            v: spark.table(names[f"sink_{v}"]).where(f"order_id <> {SENTINEL}")
            for v in ("a", "b", "c")
        }
        compared = sinks["a"].count()
        differ = _mismatches(sinks, "a")
        print(f"stream sinks: {compared:,} rows; differing from (a): {differ}", flush=True)
        batch = _batch(spark, names, rows, hours, hourly)
        print(f"batch: {batch}", flush=True)
    finally:
        for name in names.values():
            spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
        shutil.rmtree(work, ignore_errors=True)
    setup = (
        f"{rows:,}-row dimension, {hours} hourly commits of 1% updates (ingest_cdc median "
        f"{_median(ingest_seconds):.1f} s), {FACTS:,} facts per micro-batch, {per_hour} per hour"
    )
    results = _stream_results(steps, latency, differ, compared, setup)
    seconds, differ_batch = batch["seconds"], batch["differ"]
    peers = {
        "per_hour": "(i) per-hour VERSION AS OF joins, unioned",
        "range": "(ii) range join over a materialised version table (lead())",
    }
    for peer, label in peers.items():
        results.append(
            Result(
                "dim_join_batch_event",
                f"seconds, event-mode as-of join of {batch['facts']:,} facts (one day)",
                seconds["ours"],
                label,
                seconds[peer],
                "reported",
                differ_batch[peer] == 0 and differ_batch["stream_c"] == 0,
                f"{seconds[peer] / seconds['ours']:.2f}x faster; rows differing from ours: "
                f"{differ_batch[peer]} (stream (c) over the day: {differ_batch['stream_c']})"
                + (f"; version table built in {batch['build']:.1f} s" if peer == "range" else ""),
            )
        )
    return results + _batch_rows(steps, latency)
