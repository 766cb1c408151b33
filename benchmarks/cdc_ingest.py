"""Cost of CDC micro-batches as the table grows, next to Iceberg's MERGE INTO.

Goals (issues 3 and 22): one 10k-change batch stays flat (within 1.3x from 1M to 16M rows), takes
<= 2 s and is >= 5x faster than MERGE INTO (merge-on-read) at 16M rows; 200k-change batches, ten
in a row on the 16M-row table, sustain >= 15,000 changes/s. Both sides get the same changes in the
same run: ingest_cdc reads them as Debezium JSON lines (decoding included); MERGE gets them already
parsed in a cached temporary view (which favours the peer). After every batch both tables must
hold the same rows.

Each batch's time is broken down by the stages ingest_cdc reports (its progress lines): start
(the streaming query finds the new files), decode (decode, facts, typing), dedup (event log,
per-key dedup and decision, key cache, statistics), write (data and delete files), commit (the
Iceberg commit) and finish (stream bookkeeping, the result row). The per-batch fixed cost and the
per-change cost are fitted from the 10k and 200k batches at 16M rows. A single batch swings by 30%
or more on a 2-core machine, so each size runs SPARKEXT_BENCH_SAMPLES (default 3) 10k batches and
reports the median of each side (with every sample in the notes). Before the first measured batch
both sides run SPARKEXT_BENCH_WARMUP (default 15) unmeasured 10k batches: a young JVM's first
batches are slower (class loading, JIT compilation; back to back on a 200k-row table, 2026-11-28:
ours 6.8 s in its first batch, a median of 2.96 s in batches 6-10, 2.72 s in 11-20, 2.4 s from
the 21st on), and a figure of a JVM warming up is no figure of either side.

Each side runs in a Spark application of its own, as each would in production: ingest_cdc in this
process, MERGE INTO and the after-batch comparison in a child process (``python -m
benchmarks.cdc_ingest --peer``) on the same warehouse, driven over its stdin and stdout. They take
turns, so one side's work never overlaps the other's timing. Until 2026-11-28 both shared this
process's JVM, and each side's batch ran right after the other's leftovers (MERGE's and the
16M-row comparison's garbage, shuffle files and cached blocks): a 10k batch of ours that takes
2.5 s back to back, or 3-3.6 s after 70 s idle and a full collection, took 5.3-6.4 s there.
SPARKEXT_BENCH_SHARED_JVM=1 runs the peer in this process as before.

SPARKEXT_BENCH_SIZES (default "1000000,4000000,16000000"; add 64000000 for the large shape) and
SPARKEXT_BENCH_SUSTAINED ("200000x10", "0" to skip) choose the shapes.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Result

CHANGES = 10_000
SEED = 11
SAMPLES = 3  # 10k batches per table size; each side's median is reported
WARM_UP = 15  # unmeasured 10k batches of each side first (5 until 2026-11-28)
SETTLE_S = 10.0  # for the background work a full garbage collection sets off (see _settle)


def random_image(key: int, rng: random.Random) -> dict:
    """A random after-image of the orders table these benchmarks use."""
    return {
        "id": key,
        "name": f"n{rng.randint(0, 99)}",
        "qty": rng.randint(0, 999),
        "price": round(rng.uniform(0, 100), 2),
    }


def land_seed(landing: Path) -> None:
    """One create event (id -1) in the landing zone: what the first ingest_cdc call creates the
    table from (the orders schema of these benchmarks)."""
    seed = {
        "op": "c",
        "before": None,
        "after": {"id": -1, "name": "x", "qty": 0, "price": 0.0},
        "source": {
            "file": "mysql-bin.000001",
            "pos": 1,
            "row": 0,
            "ts_ms": 1,
            "db": "shop",
            "table": "orders",
        },
    }
    (landing / "000-seed.json").write_text(json.dumps(seed) + "\n")


def _grow(spark, table: str, start: int, end: int) -> None:
    """Append rows [start, end) straight through Spark (the bulk history, older positions)."""
    spark.range(start, end).selectExpr(
        "id",
        "concat('name-', id % 997) AS name",
        "id % 1000 AS qty",
        "cast(id % 10000 AS double) / 100 AS price",
        "'c' AS _cdc_op",
        "timestamp_millis(1700000000000 + id) AS _cdc_event_time",
        "concat('m:0000000001:', lpad(cast(id AS string), 20, '0'), ':0000000000') "
        "AS _cdc_position",
    ).writeTo(table).append()


def _changes(rows: int, batch: int, rng: random.Random, changes: int = CHANGES) -> list[dict]:
    keys = rng.sample(range(rows), k=min(rows, int(changes * 0.8)))
    # new keys far above every size the tables grow to: a later bulk append must not repeat them
    first_new = 10**12 + (batch + 2) * 10**7
    new = range(first_new, first_new + changes - len(keys))
    events = []
    pos = 10**12 + batch * 10**7
    for i, key in enumerate([*keys, *new]):
        pos += 1
        is_new = i >= len(keys)
        op = "c" if is_new else rng.choice("uuuuuuud")
        after = None if op == "d" else random_image(key, rng)
        before = None if is_new else {"id": key, "name": "old", "qty": 0, "price": 0.0}
        events.append(
            {
                "op": op,
                "before": before,
                "after": after,
                "ts_ms": 1_800_000_000_000 + pos,
                "source": {
                    "file": "mysql-bin.000009",
                    "pos": pos,
                    "row": 0,
                    "ts_ms": 1_800_000_000_000 + pos,
                    "db": "shop",
                    "table": "orders",
                },
            }
        )
    return events


def _merge(spark, table: str, events: list[dict]) -> float:
    rows = [
        (
            e["op"],
            (e["after"] or e["before"])["id"],
            *((e["after"][c] for c in ("name", "qty", "price")) if e["after"] else (None,) * 3),
        )
        for e in events
    ]
    changes = spark.createDataFrame(
        rows, "op string, id bigint, name string, qty bigint, price double"
    ).cache()
    changes.count()
    changes.createOrReplaceTempView("bench_changes")
    _settle(spark)
    started = time.perf_counter()
    spark.sql(
        f"""MERGE INTO {table} t USING bench_changes c ON t.id = c.id
        WHEN MATCHED AND c.op = 'd' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.name = c.name, t.qty = c.qty, t.price = c.price,
             t._cdc_op = c.op
        WHEN NOT MATCHED AND c.op <> 'd' THEN INSERT (id, name, qty, price, _cdc_op)
             VALUES (c.id, c.name, c.qty, c.price, c.op)"""
    )
    elapsed = time.perf_counter() - started
    changes.unpersist()
    return elapsed


def _same_rows(spark, ours: str, peer: str) -> None:
    """Oracle at benchmark scale: ingest_cdc and MERGE INTO must hold exactly the same rows."""
    columns = ["id", "name", "qty", "price"]
    a, b = spark.table(ours).select(*columns), spark.table(peer).select(*columns)
    if not (a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()):
        raise AssertionError(f"{ours} and {peer} differ after the same changes")


class _Peer:
    """MERGE INTO's side: its table, its batches and the comparison with ours, in ``spark``."""

    def __init__(self, spark, ours: str, table: str) -> None:
        self.spark, self.ours, self.table = spark, ours, table

    def create(self) -> None:
        """The peer's table: a copy of ours (its seed row), merge-on-read."""
        self.spark.sql(f"DROP TABLE IF EXISTS {self.table} PURGE")
        self.spark.sql(
            f"CREATE TABLE {self.table} USING iceberg TBLPROPERTIES ('format-version'='2', "
            "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
            f"'write.merge.mode'='merge-on-read') AS SELECT * FROM {self.ours}"
        )

    def grow(self, start: int, end: int) -> None:
        _grow(self.spark, self.table, start, end)

    def merge(self, landed: str) -> float:
        """MERGE the Debezium events of the file ``landed`` (as ours reads them); seconds."""
        lines = Path(landed).read_text().splitlines()
        return _merge(self.spark, self.table, [json.loads(line) for line in lines if line])

    def compare(self) -> None:
        self.spark.sql(f"REFRESH TABLE {self.ours}")  # written by another application
        _same_rows(self.spark, self.ours, self.table)

    def drop(self) -> None:
        self.spark.sql(f"DROP TABLE IF EXISTS {self.table} PURGE")

    def close(self) -> None:
        pass


_REPLY = "cdc_ingest-peer-reply: "  # the child's answers, told apart from anything else it prints


class _ChildPeer:
    """:class:`_Peer` in a Spark application of its own (``python -m benchmarks.cdc_ingest
    --peer``) on the same warehouse: each call is one JSON line to its stdin, answered by one
    line on its stdout; its other output goes to this process's stderr."""

    def __init__(self, spark, ours: str, table: str) -> None:
        env = dict(os.environ)
        env["SPARKEXT_WAREHOUSE"] = spark.conf.get("spark.sql.catalog.lake.warehouse")
        root = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.cdc_ingest", "--peer", ours, table],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
        )

    def _call(self, name: str, *args: object) -> object:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"call": name, "args": args}) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(_REPLY):
                answer = json.loads(line[len(_REPLY) :])
                if "error" in answer:
                    failed = answer["error"]
                    raise RuntimeError(f"the MERGE INTO process failed in {name}: {failed}")
                return answer["value"]
            print(line, end="", file=sys.stderr)
        raise RuntimeError(f"the MERGE INTO process exited during {name} ({self.process.wait()})")

    def create(self) -> None:
        self._call("create")

    def grow(self, start: int, end: int) -> None:
        self._call("grow", start, end)

    def merge(self, landed: str) -> float:
        return float(self._call("merge", landed))  # type: ignore[arg-type]

    def compare(self) -> None:
        self._call("compare")

    def drop(self) -> None:
        self._call("drop")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def _serve_peer(ours: str, table: str) -> None:
    """The child's loop: one :class:`_Peer` call per line of stdin, its answer on stdout."""
    import traceback

    import sparkext

    peer = _Peer(sparkext.session(), ours, table)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"value": getattr(peer, request["call"])(*request["args"])}
        except Exception as error:
            traceback.print_exc()
            answer = {"error": f"{type(error).__name__}: {error}"}
        print(_REPLY + json.dumps(answer), flush=True)


STAGES = {  # ingest_cdc's progress line -> the stage it starts
    "checking its files": "start",
    "decoding": "decode",
    "deduplicating": "dedup",
    "writing files": "write",
    "committing": "commit",
    "committed": "finish",
}


def table_sizes(text: str) -> list[int]:
    """``SPARKEXT_BENCH_SIZES``: increasing table sizes, one of them at most 16M rows (the
    flatness and cost-model figures are taken there)."""
    parts = [p.strip() for p in text.split(",")]
    if all(p.isdecimal() for p in parts):
        sizes = [int(p) for p in parts]
        if min(sizes) <= 16_000_000 and sizes == sorted(set(sizes)) and min(sizes) > 0:
            return sizes
    raise ValueError(
        "SPARKEXT_BENCH_SIZES must list increasing table sizes, one of them at most "
        f"16,000,000 rows, such as 1000000,16000000; got {text!r}."
    )


def sustained_shape(text: str) -> tuple[int, int] | None:
    """``SPARKEXT_BENCH_SUSTAINED``: ``"0"`` (no sustained batches) or ``"<changes>x<batches>"``.

    >>> sustained_shape("200000x10")
    (200000, 10)
    >>> sustained_shape("0") is None
    True
    """
    if text.strip() == "0":
        return None
    parts = text.lower().split("x")
    if len(parts) == 2 and all(p.strip().isdecimal() for p in parts):
        changes, count = (int(p) for p in parts)
        if changes > CHANGES and count > 0:
            return changes, count
    raise ValueError(
        f"SPARKEXT_BENCH_SUSTAINED must be 0 or <changes>x<batches> with more than {CHANGES:,} "
        f"changes and at least one batch, such as 200000x10; got {text!r}."
    )


def _settle(spark) -> None:
    """Give each side the same start: the previous step's dirty pages written out, a full JVM
    garbage collection and what it sets off finished. Without it one side pays for the other's
    leftovers: ingest_cdc ran right after the full-table comparison of 16M rows (GBs of shuffle
    files still being flushed, a heap full of garbage) and MERGE right after a small ingest_cdc
    batch; its write stage doubled there, and only there. Something a big job leaves behind still
    runs for seconds after the collection (presumably Spark's ContextCleaner deleting the shuffle
    files of the jobs the collection frees; not confirmed): a 10k batch timed right after a
    20M-row shuffle job and the collection took 4.8-4.9 s, one timed SETTLE_S later 4.0-4.2 s,
    as did the batches with no such job before them (200k-row table, one JVM, 2026-11-27)."""
    os.sync()
    spark._jvm.java.lang.System.gc()
    time.sleep(SETTLE_S)
    os.sync()


def create_ours(work: Path, table: str) -> tuple[Path, str]:
    """Create ``table`` with ingest_cdc from the seed event in a new landing zone under ``work``;
    return the landing zone and the CALL that ingests what lands there next."""
    import sparkext

    landing = work / "landing"
    landing.mkdir()
    land_seed(landing)
    call = (
        f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
        f"checkpoint => '{work / 'checkpoint'}')"
    )
    sparkext.sql(call.replace(")", ", primary_key => 'id', create => true)"))
    return landing, call


def _ingest(spark, call: str) -> tuple[float, dict[str, float], object]:
    """Run one ingest_cdc CALL; return seconds, seconds per stage, and the result row."""
    from sparkext.routing.router import run_text

    _settle(spark)

    marks: list[tuple[float, str]] = []

    def progress(message: str) -> None:
        text = message.split(": ", 1)[-1]
        stage = next((v for k, v in STAGES.items() if text.startswith(k)), None)
        if stage is not None:
            marks.append((time.perf_counter(), stage))

    started = time.perf_counter()
    out = run_text(spark, call, progress).first()
    ended = time.perf_counter()
    stages: dict[str, float] = {}
    points = [(started, "start"), *marks, (ended, "")]
    for (at, stage), (after, _) in itertools.pairwise(points):
        stages[stage] = stages.get(stage, 0.0) + after - at
    return ended - started, stages, out


def _breakdown(stages: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in stages.items() if v)


def run(spark) -> list[Result]:
    import sparkext

    sizes = table_sizes(os.environ.get("SPARKEXT_BENCH_SIZES", "1000000,4000000,16000000"))
    sustained = sustained_shape(os.environ.get("SPARKEXT_BENCH_SUSTAINED", "200000x10"))
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-cdc-"))
    ours_table, peer_table = "lake.bench.cdc_ours", "lake.bench.cdc_merge"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    for t in (ours_table, peer_table):
        spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    landing, call = create_ours(work, ours_table)
    shared = os.environ.get("SPARKEXT_BENCH_SHARED_JVM", "0") == "1"
    merger = (_Peer if shared else _ChildPeer)(spark, ours_table, peer_table)
    merger.create()
    rng = random.Random(SEED)
    results, figures, rows, batch = [], {}, 0, 0
    # warm-up, not measured: JIT, Python workers and caches for both sides; new keys only, at
    # positions below every measured batch
    warm_up = max(1, int(os.environ.get("SPARKEXT_BENCH_WARMUP", WARM_UP)))
    for n in range(warm_up, 0, -1):
        warm = _changes(0, -n, rng)
        path = landing / f"000-warm-up-{warm_up - n:02d}.json"
        path.write_text("\n".join(json.dumps(e) for e in warm) + "\n")
        sparkext.sql(call)
        merger.merge(str(path))

    def one_batch(changes: int) -> tuple[float, float, dict[str, float]]:
        nonlocal batch
        events = _changes(rows, batch, rng, changes)
        path = landing / f"{batch + 1:03d}-changes.json"
        path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
        batch += 1
        ours, stages, out = _ingest(spark, call)
        assert out.commits == 1 and out.events == changes, out
        merged = merger.merge(str(path))
        merger.compare()
        return ours, merged, stages

    for size in sizes:
        print(f"growing both tables to {size:,} rows", flush=True)
        _grow(spark, ours_table, rows, size)
        merger.grow(rows, size)
        rows = size
        samples = []
        for _ in range(max(1, int(os.environ.get("SPARKEXT_BENCH_SAMPLES", SAMPLES)))):
            samples.append(one_batch(CHANGES))
            print(
                f"{size:,} rows: ingest_cdc {samples[-1][0]:.2f} s "
                f"({_breakdown(samples[-1][2])}), MERGE INTO {samples[-1][1]:.2f} s",
                flush=True,
            )
        ours, _, stages = sorted(samples, key=lambda s: s[0])[(len(samples) - 1) // 2]
        peer = statistics.median(s[1] for s in samples)
        figures[size] = ours
        results.append(
            Result(
                benchmark="cdc_ingest",
                metric=f"seconds for one {CHANGES:,}-change batch at {size:,} rows",
                ours=ours,
                baseline_name="MERGE INTO (merge-on-read)",
                baseline=peer,
                goal=">= 5x faster than MERGE at 16M rows; <= 2 s per batch",
                met=(peer / ours >= 5 and ours <= 2) if size >= 16_000_000 else ours <= 2,
                notes=f"median of {len(samples)}; {CHANGES / ours:,.0f} changes/s ours, "
                f"{CHANGES / peer:,.0f} /s MERGE; stages s of the median batch: "
                f"{_breakdown(stages)}; samples ours "
                + ", ".join(f"{s[0]:.2f}" for s in samples)
                + "; MERGE "
                + ", ".join(f"{s[1]:.2f}" for s in samples),
            )
        )
    low = figures[sizes[0]]
    flat_at = max(s for s in sizes if s <= 16_000_000)
    if flat_at > sizes[0]:  # a ratio of the smallest size to itself says nothing
        results.append(
            Result(
                benchmark="cdc_ingest_flatness",
                metric=f"batch seconds at {flat_at:,} / at {sizes[0]:,} rows",
                ours=figures[flat_at],
                baseline_name=f"ingest_cdc at {sizes[0]:,} rows",
                baseline=low,
                goal="ratio <= 1.3",
                met=figures[flat_at] / low <= 1.3,
            )
        )
    if sizes[-1] > 16_000_000:
        results.append(
            Result(
                benchmark="cdc_ingest_flatness",
                metric=f"batch seconds at {sizes[-1]:,} / at {sizes[0]:,} rows",
                ours=figures[sizes[-1]],
                baseline_name=f"ingest_cdc at {sizes[0]:,} rows",
                baseline=low,
                goal="flat vs 1M (ratio <= 1.3)",
                met=figures[sizes[-1]] / low <= 1.3,
            )
        )
    if sustained is not None:
        changes, count = sustained
        total_ours = total_peer = 0.0
        totals: dict[str, float] = {}
        for i in range(count):
            ours, peer, stages = one_batch(changes)
            total_ours, total_peer = total_ours + ours, total_peer + peer
            for k, v in stages.items():
                totals[k] = totals.get(k, 0.0) + v
            print(
                f"{changes:,}-change batch {i + 1}/{count} at {rows:,} rows: ingest_cdc "
                f"{ours:.2f} s ({_breakdown(stages)}), MERGE INTO {peer:.2f} s",
                flush=True,
            )
        rate = changes * count / total_ours
        results.append(
            Result(
                benchmark="cdc_ingest_sustained",
                metric=f"changes/s over {count} x {changes:,}-change batches at {rows:,} rows",
                ours=rate,
                baseline_name="MERGE INTO (merge-on-read), changes/s",
                baseline=changes * count / total_peer,
                goal=">= 15,000 changes/s",
                met=rate >= 15_000,
                notes="mean stage s per batch: "
                + _breakdown({k: v / count for k, v in totals.items()}),
            )
        )
        small = figures[rows]  # the 10k batches at the size the big ones ran at
        per_change = (total_ours / count - small) / (changes - CHANGES)
        results.append(
            Result(
                benchmark="cdc_ingest_cost_model",
                metric="fixed seconds per batch (fitted from 10k and "
                f"{changes // 1000}k batches at {rows:,} rows)",
                ours=small - CHANGES * per_change,
                baseline_name="microseconds per change",
                baseline=per_change * 1e6,
                goal="(a model, not a goal)",
                met=True,
            )
        )
    merger.drop()
    merger.close()
    spark.sql(f"DROP TABLE IF EXISTS {ours_table} PURGE")
    shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__" and sys.argv[1:2] == ["--peer"]:
    _serve_peer(*sys.argv[2:4])
