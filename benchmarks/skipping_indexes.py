"""File-level skipping indexes (issue 56) against the same table plain and with Iceberg's
Parquet row-group blooms, in one run, on the same data, answers checked equal.

**The table.** An event/log table of ``rows`` rows (``--rows``; default and issue size 10M) in
FILES data files (SPARKEXT_BENCH_INDEX_FILES, default 2,000), unpartitioned, written by one
``INSERT … SELECT /*+ REPARTITION(files) */ … FROM range(rows)``: every column is derived from a
hash of the row's id, and the round-robin repartition spreads the ids over the files, so the
files are unsorted (each file's min/max of every column spans nearly the whole domain). A row:
``id`` (int, the CDC key), ``event_time``, ``request_id`` (a uuid from md5 of the id),
``trace_id`` (32 hex), ``user_id``, ``host``, ``service``, ``method``, ``path``, ``status``,
``latency`` (ms), ``bytes_sent``, ``user_agent`` and a free-text ``message`` made from a dozen
templates, names and numbers below 1,000 (ids live in their own columns, as in structured logs).
The rare things are rare *per file*, whatever the size, so the goals mean the same at any size:

* ``status`` is A, B, C, D, G or H; E and F appear once per 50 files' worth of rows (≈ 2% of the
  files hold one). E and F sort *inside* A…H, so a file's min/max cannot exclude them: min/max
  alone plans every file for ``status IN ('E', 'F')``.
* ``latency``: 1…1,000 ms skewed low, plus a long tail (1 s…60 s) of about five rows per file,
  so nearly every file's max is far above the probed window ``BETWEEN 30000 AND 30350`` (≈ 3% of
  the files hold a row in it): min/max keeps ≈ 97% of the files.
* ``message``: the word "timeout" once per 50 files' worth of rows (≈ 2% of the files), and the
  rare trigram "tmo" (in "utmost") as rarely; no other text holds either (checked below).

The three tables: ``plain``; ``rgbloom`` with Iceberg's row-group blooms on ``request_id``,
``status``, ``latency`` and ``message`` (``write.parquet.bloom-filter-enabled.column.*``, their
size capped for a file's row count, ``write.parquet.bloom-filter-max-bytes``: Parquet's 1 MB
default would add 1 MB per column to every file); ``sparkext`` with bloom_filter(request_id) (fpp
0.0005: one expected false positive per needle over 2,000 files; the default 0.01 plans ~20),
bitmap(status), bloom_range_filter(latency), token_bitmap(message) and
ngram_bloom_filter(message), built with ``CALL sparkext.build_indexes`` after the load.

**Rounds.** ROUNDS rounds (SPARKEXT_BENCH_INDEX_ROUNDS, default 8) of the query classes below,
each query on the three tables in turn (the order rotating per round). Before every round but the
first, one CDC commit to each table (the same change set: CHANGES keys, SPARKEXT_BENCH_INDEX_CHANGES
default 1,000: 80% updates, 10% deletes, 10% inserts; one RowDelta of a pyarrow-written data file
and an equality-delete file on ``id``, tests/helpers/arrow_cdc.py; the peer's CDC files carry no
Parquet bloom: pyarrow writes none), then ``build_indexes`` on the indexed table (timed: the
incremental build beside the commit it follows). The present needle is, every other round, a key
the last commit updated: its old image (deleted) and its new one live in two files.

**Figures.** Per query class: planned files (ours from the plan's ``sparkext index: kept N of M
files``; the peers' from Iceberg's scan metric ``resultDataFiles``), bytes read (the input bytes of
the query's stages in Spark's status store), p50 seconds (``collect()``), and the answers of the
three tables (sorted rows) compared. Index consult: the time of each ``prune_files`` callback
(timed around the registered answer), p95 <= 50 ms, over every callback and over those whose
index object was decoded already (the first use of each index object decodes it; each build
makes a new one); plus the plan time of a needle with the index on and off (median of
SPARKEXT_BENCH_INDEX_PLAN_ROUNDS, default 20, interleaved). Index bytes: the index object (Puffin
file) of the current snapshot against the live data files' bytes. Indexing time: the full build
against the load it follows, and ``tiered_optimize`` on the indexed table (which builds the index
as its last step) against the same call on the plain one (the same state). Correctness: wrong
answers among the three tables, and RANDOM random predicates (SPARKEXT_BENCH_INDEX_RANDOM,
default 60: each one's index-off side is a full scan) over AND/OR/NOT/IN/NULL/LIKE/ranges on the
indexed table with ``spark.sparkext.index.enabled`` true and false, a CDC commit every 50; the
10,000-predicate oracle of the surviving file sets is the stress tier of
tests/spark/test_skipping_differential.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.harness import Result, interleaved_medians, median_ms

TABLES = {
    "plain": "lake.bench.skip_plain",
    "rgbloom": "lake.bench.skip_rgbloom",
    "sparkext": "lake.bench.skip_index",
}
BLOOM_COLUMNS = ("request_id", "status", "latency", "message")
# request_id's bloom at fpp 0.0005: a needle's expected false positives over 2,000 files is one
# (the default 0.01 would plan ~20 files of 2,000 for every needle)
FPP = 0.0005
INDEXES = (  # name, type, column, OPTIONS
    ("req_bloom", "bloom_filter", "request_id", f"'fpp' = '{FPP}'"),
    ("status_bitmap", "bitmap", "status", ""),
    ("latency_range", "bloom_range_filter", "latency", ""),
    ("message_tokens", "token_bitmap", "message", ""),
    ("message_ngrams", "ngram_bloom_filter", "message", ""),
)
SEED = 56
RARE_FILES = 50  # a rare status / word once per this many files' worth of rows
TAIL_PER_FILE = 5  # latency tail values per file
WINDOW = (30_000, 30_350)  # the latency range probed
IN_SIZE = 100
COMMON_STATUS = ("A", "B", "C", "D", "G", "H")
SERVICES = ("checkout", "search", "auth", "cart", "catalog", "payments", "profile", "gateway")
METHODS = ("GET", "GET", "GET", "POST", "PUT", "DELETE")
NAMES = (
    "alice", "bruno", "chen", "dana", "emeka", "fatima", "goran", "hana",
    "ivan", "julia", "kofi", "lena", "mateo", "nora", "omar", "priya",
)  # fmt: skip
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Version/17.5",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "okhttp/4.12.0",
    "python-requests/2.32.3",
    "Go-http-client/2.0",
    "curl/8.8.0",
    "Apache-HttpClient/5.3.1 (Java/17.0.11)",
)
# The message templates: {n} a number below 1,000, {name}, {service}, {host}, {latency}.
TEMPLATES = (
    "{method} /api/v1/{service}/{n} returned 200 in {latency} ms",
    "user {name} signed in from {host}",
    "cache miss for key session:{n}",
    "payment {n} authorised for customer {name}",
    "retrying call to {service} attempt {k}",
    "connection reset by peer {host}",
    "queued message {n} on topic {service}-events",
    "slow query on table orders took {latency} ms",
    "user {name} updated profile field {k}",
    "health check of {service} passed",
)
RARE_WORD = "upstream timeout after {latency} ms calling {service}"
RARE_NGRAM = "job {n} flagged utmost priority by {service}"


def _check_vocabulary() -> None:
    """Only the rare templates hold "timeout" or "tmo" (numbers and names cannot make them)."""
    words = " ".join((*TEMPLATES, *NAMES, *SERVICES, *METHODS, "web-", "-events"))
    assert "timeout" not in words and "tmo" not in words, "a common text holds a rare word"
    assert "timeout" in RARE_WORD and "tmo" not in RARE_WORD
    assert "tmo" in RARE_NGRAM and "timeout" not in RARE_NGRAM


# ---------------------------------------------------------------------------------------------
# data


def _sql_array(values: tuple[str, ...]) -> str:
    return "array(" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + ")"


def _pick(values: tuple[str, ...], salt: int) -> str:
    return f"element_at({_sql_array(values)}, pmod(hash(id, {salt}), {len(values)}) + 1)"


def _sql_template(template: str) -> str:
    """A template as a Spark SQL concat over the columns of the generating query."""
    parts = re.split(r"(\{\w+\})", template)
    out = []
    for part in parts:
        if not part:
            continue
        if part.startswith("{"):
            out.append(f"cast({part[1:-1]} AS string)")
        else:
            out.append("'" + part + "'")
    return "concat(" + ", ".join(out) + ")"


def generate_sql(table: str, rows: int, files: int) -> str:
    """The INSERT that fills ``table`` (every value a function of the row's id)."""
    per_file = max(1, rows // files)
    rare = per_file * RARE_FILES
    tail = max(1, per_file // TAIL_PER_FILE)
    messages = " ".join(f"WHEN {i} THEN {_sql_template(t)}" for i, t in enumerate(TEMPLATES))
    return f"""
INSERT INTO {table}
SELECT /*+ REPARTITION({files}) */
  id, event_time, request_id, trace_id, user_id, host, service, method,
  concat('/api/v1/', service, '/', cast(n AS string)) AS path, status, latency, bytes_sent,
  user_agent,
  CASE WHEN pmod(hash(id, 23), {rare}) = 0 THEN {_sql_template(RARE_WORD)}
       WHEN pmod(hash(id, 23), {rare}) = 1 THEN {_sql_template(RARE_NGRAM)}
       ELSE CASE pmod(hash(id, 24), {len(TEMPLATES)}) {messages} END END AS message
FROM (
  SELECT id, h,
    timestamp_millis(1767225600000 + pmod(hash(id, 11), 86400000)) AS event_time,
    concat_ws('-', substr(h, 1, 8), substr(h, 9, 4), substr(h, 13, 4), substr(h, 17, 4),
              substr(h, 21, 12)) AS request_id,
    md5(concat('trace-', cast(id AS string))) AS trace_id,
    pmod(hash(id, 12), 1000000) AS user_id,
    concat('web-', lpad(cast(pmod(hash(id, 13), 200) AS string), 3, '0')) AS host,
    {_pick(SERVICES, 14)} AS service,
    {_pick(METHODS, 15)} AS method,
    pmod(hash(id, 16), 1000) AS n,
    pmod(hash(id, 17), 9) + 1 AS k,
    {_pick(NAMES, 18)} AS name,
    CASE WHEN pmod(hash(id, 19), {rare}) = 0
         THEN element_at(array('E', 'F'), pmod(hash(id, 20), 2) + 1)
         ELSE {_pick(COMMON_STATUS, 21)} END AS status,
    CASE WHEN pmod(hash(id, 22), {tail}) = 0 THEN 1000 + pmod(hash(id, 25), 59000)
         ELSE 1 + cast(pow(pmod(hash(id, 26), 1000000) / 1e6, 3) * 999 AS int) END AS latency,
    pmod(hash(id, 27), 200000) AS bytes_sent,
    {_pick(AGENTS, 28)} AS user_agent
  FROM (SELECT cast(id AS int) AS id, md5(concat('req-', cast(id AS string))) AS h
        FROM range({rows}))
)"""


SCHEMA = (
    "id int, event_time timestamp, request_id string, trace_id string, user_id int, "
    "host string, service string, method string, path string, status string, latency int, "
    "bytes_sent int, user_agent string, message string"
)


def request_id(key: int | str) -> str:
    """The uuid the generator gives id ``key`` (or an absent one for a string)."""
    h = hashlib.md5(f"req-{key}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _python_row(key: int, rng: random.Random, per_file: int, moment: int) -> dict:
    """A new image of row ``key`` drawn with the generator's distributions (CDC commits)."""
    import datetime as dt

    rare = 1 / (per_file * RARE_FILES)
    status = rng.choice("EF") if rng.random() < rare else rng.choice(COMMON_STATUS)
    if rng.random() < TAIL_PER_FILE / per_file:
        latency = 1000 + rng.randrange(59000)
    else:
        latency = 1 + int(rng.random() ** 3 * 999)
    service, name = rng.choice(SERVICES), rng.choice(NAMES)
    host, n, k = f"web-{rng.randrange(200):03d}", rng.randrange(1000), rng.randrange(9) + 1
    pick = rng.random()
    template = (
        RARE_WORD if pick < rare else RARE_NGRAM if pick < 2 * rare else rng.choice(TEMPLATES)
    )
    method = rng.choice(METHODS)
    values = dict(method=method, service=service, n=n, k=k, name=name, host=host)
    return {
        "id": key,
        "event_time": dt.datetime.fromtimestamp(1767312000 + moment, dt.timezone.utc),
        "request_id": request_id(key),
        "trace_id": hashlib.md5(f"trace-{key}-{moment}".encode()).hexdigest(),
        "user_id": rng.randrange(1_000_000),
        "host": host,
        "service": service,
        "method": method,
        "path": f"/api/v1/{service}/{n}",
        "status": status,
        "latency": latency,
        "bytes_sent": rng.randrange(200_000),
        "user_agent": rng.choice(AGENTS),
        "message": template.format(latency=latency, **values),
    }


@dataclasses.dataclass
class Changes:
    """One CDC commit's change set (the same for the three tables)."""

    rows: list[dict]
    deleted: list[int]
    updated: list[int]


def _changes(rows: int, round_no: int, count: int, files: int, rng: random.Random) -> Changes:
    per_file = max(1, rows // files)
    keys = rng.sample(range(rows), k=min(rows, count - count // 10))
    deletes = keys[: count // 10]
    updates = keys[count // 10 :]
    inserts = [rows + round_no * count + j for j in range(count // 10)]
    images = [_python_row(k, rng, per_file, round_no) for k in (*updates, *inserts)]
    return Changes(images, deleted=[*deletes, *updates], updated=updates)


# ---------------------------------------------------------------------------------------------
# measuring one query


@dataclasses.dataclass
class Run:
    seconds: float
    bytes_read: int
    planned: int
    candidates: int
    answer: list


def _stages(spark) -> dict[int, int]:
    jvm = spark._jvm
    store = spark.sparkContext._jsc.sc().statusStore()
    stages = store.stageList(
        jvm.java.util.ArrayList(),
        False,
        False,
        spark.sparkContext._gateway.new_array(jvm.double, 0),
        jvm.java.util.ArrayList(),
    )
    out = {}
    iterator = stages.iterator()
    while iterator.hasNext():
        stage = iterator.next()
        out[int(stage.stageId())] = int(stage.inputBytes())
    return out


def _flush(spark) -> None:
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def _scan_metrics(plan) -> dict[str, int]:
    """The first BatchScan's SQL metrics of an executed plan (adaptive stages opened)."""
    name = plan.getClass().getName()
    if name.endswith("AdaptiveSparkPlanExec"):
        return _scan_metrics(plan.executedPlan())
    if "QueryStage" in name:
        return _scan_metrics(plan.plan())
    if plan.nodeName().startswith("BatchScan"):
        out = {}
        iterator = plan.metrics().iterator()
        while iterator.hasNext():
            pair = iterator.next()
            out[str(pair._1())] = int(pair._2().value())
        return out
    children = plan.children()
    for i in range(children.size()):
        found = _scan_metrics(children.apply(i))
        if found:
            return found
    return {}


KEPT = re.compile(r"sparkext index: kept (\d+) of (\d+) files")


def measure(spark, sql: str) -> Run:
    """Run ``sql`` once: seconds to collect, stage input bytes, planned files, sorted rows."""
    _flush(spark)
    before = set(_stages(spark))
    df = spark.sql(sql)
    started = time.perf_counter()
    rows = df.collect()
    seconds = time.perf_counter() - started
    _flush(spark)
    read = sum(b for s, b in _stages(spark).items() if s not in before)
    execution = df._jdf.queryExecution()
    kept = KEPT.search(str(execution.toString()))
    metrics = _scan_metrics(execution.executedPlan())
    if kept:
        planned, candidates = int(kept.group(1)), int(kept.group(2))
    else:
        planned = candidates = metrics.get("resultDataFiles", -1)
    answer = sorted((tuple(r) for r in rows), key=repr)
    return Run(seconds, read, planned, candidates, answer)


# ---------------------------------------------------------------------------------------------
# the run


def _create(spark, rows: int, files: int) -> dict[str, float]:
    """The three tables, loaded; returns the seconds of each load."""
    import sparkext

    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    per_file = max(1, rows // files)
    bloom_bytes = 1 << max(10, (per_file * 10 // 8).bit_length())  # ~10 bits a value, pow. of 2
    properties = {
        "plain": {},
        "rgbloom": {
            "write.parquet.bloom-filter-max-bytes": str(bloom_bytes),
            **{f"write.parquet.bloom-filter-enabled.column.{c}": "true" for c in BLOOM_COLUMNS},
        },
        "sparkext": {},
    }
    loads = {}
    for label, table in TABLES.items():
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        props = {"format-version": "2", **properties[label]}
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        spark.sql(f"CREATE TABLE {table} ({SCHEMA}) USING iceberg TBLPROPERTIES ({listed})")
        started = time.perf_counter()
        spark.sql(generate_sql(table, rows, files))
        loads[label] = time.perf_counter() - started
        print(f"skipping_indexes: loaded {table} in {loads[label]:.1f} s", flush=True)
    for name, kind, column, options in INDEXES:
        with_options = f" OPTIONS ({options})" if options else ""
        sparkext.sql(
            f"CREATE INDEX {name} ON {TABLES['sparkext']} USING {kind} ({column}){with_options}"
        )
    return loads


def _build(table: str) -> float:
    import sparkext

    started = time.perf_counter()
    sparkext.sql(f"CALL sparkext.build_indexes(table => '{table}')").collect()
    return time.perf_counter() - started


def _queries(rows: int, round_no: int, changes: Changes | None, rng: random.Random):
    """(class, SQL with {t} for the table) of one round."""
    if changes is not None and round_no % 2 == 1 and changes.updated:
        needle = rng.choice(changes.updated)  # old image deleted, new one in the CDC file
    else:
        needle = rng.randrange(rows)
    many = ", ".join(f"'{request_id(k)}'" for k in rng.sample(range(rows), IN_SIZE))
    return [
        ("needle present", f"SELECT * FROM {{t}} WHERE request_id = '{request_id(needle)}'"),
        (
            "needle absent",
            f"SELECT * FROM {{t}} WHERE request_id = '{request_id(f'absent-{round_no}')}'",
        ),
        ("IN of 100 ids", f"SELECT id, request_id, status FROM {{t}} WHERE request_id IN ({many})"),
        ("LIKE '%timeout%'", "SELECT id, message FROM {t} WHERE message LIKE '%timeout%'"),
        ("LIKE '%tmo%'", "SELECT id, message FROM {t} WHERE message LIKE '%tmo%'"),
        ("status IN ('E','F')", "SELECT id, status FROM {t} WHERE status IN ('E', 'F')"),
        (
            "latency BETWEEN",
            f"SELECT id, latency FROM {{t}} WHERE latency BETWEEN {WINDOW[0]} AND {WINDOW[1]}",
        ),
    ]


class ConsultTimer:
    """The registered answers with ``prune_files`` timed (seconds per callback)."""

    def __init__(self, spark) -> None:
        from sparkext.routing.in_spark import ANSWERS

        self.spark, self.answers = spark, ANSWERS
        self.seconds: list[float] = []  # per call
        self.cold: list[bool] = []  # per call: the first use of its index object here
        self.calls: list[tuple[int, int]] = []  # (kept, candidates) per call
        self._seen: set[str] = set()

    def __enter__(self) -> ConsultTimer:
        from sparkext.spark.extension import attach

        inner: Callable[..., str] = self.answers.prune_files

        def timed(*args: Any) -> str:
            started = time.perf_counter()
            out = inner(*args)
            self.seconds.append(time.perf_counter() - started)
            self.cold.append(str(args[3]) not in self._seen)  # args[3]: the index object
            self._seen.add(str(args[3]))
            keep = re.search(r'"keep"\s*:\s*"([01]*)"', out or "")
            if keep:
                self.calls.append((keep.group(1).count("1"), len(keep.group(1))))
            return out

        attach(self.spark, dataclasses.replace(self.answers, prune_files=timed))
        return self

    def __exit__(self, *exc: object) -> None:
        from sparkext.spark.extension import attach

        attach(self.spark, self.answers)


def _true_files(spark, where: str) -> int:
    table = TABLES["plain"]
    return int(spark.sql(f"SELECT count(DISTINCT _file) FROM {table} WHERE {where}").first()[0])


def _index_bytes(spark, table: str) -> tuple[int, int]:
    """(bytes of the current snapshot's index object, bytes of the live data files)."""
    from tests.helpers.iceberg import java_table

    spark.catalog.refreshTable(table)
    jt = java_table(spark, table)
    current = int(jt.currentSnapshot().snapshotId())
    index = 0
    files = jt.statisticsFiles()
    for i in range(files.size()):
        stats = files.get(i)
        if int(stats.snapshotId()) == current:
            index = int(stats.fileSizeInBytes())
    data = spark.sql(f"SELECT sum(file_size_in_bytes) FROM {table}.files WHERE content = 0")
    return index, int(data.first()[0])


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))] if ordered else 0.0


def run(spark, rows: int | None = None) -> list[Result]:
    _check_vocabulary()
    rows = rows or int(os.environ.get("SPARKEXT_BENCH_INDEX_ROWS", "10000000"))
    files = int(os.environ.get("SPARKEXT_BENCH_INDEX_FILES", "2000"))
    rounds = int(os.environ.get("SPARKEXT_BENCH_INDEX_ROUNDS", "8"))
    changes_per_commit = int(os.environ.get("SPARKEXT_BENCH_INDEX_CHANGES", "1000"))
    random_count = int(os.environ.get("SPARKEXT_BENCH_INDEX_RANDOM", "60"))
    from tests.helpers.arrow_cdc import commit_changes

    rng = random.Random(SEED)
    loads = _create(spark, rows, files)
    full_build = _build(TABLES["sparkext"])
    print(f"skipping_indexes: full build {full_build:.1f} s", flush=True)
    by_class: dict[str, dict[str, list[Run]]] = {}
    true_in: list[int] = []
    wrong: list[str] = []
    cdc_seconds: list[float] = []
    build_seconds: list[float] = []
    changes: Changes | None = None
    with ConsultTimer(spark) as timer:
        for round_no in range(rounds):
            if round_no:
                changes = _changes(rows, round_no, changes_per_commit, files, rng)
                for label, table in TABLES.items():
                    started = time.perf_counter()
                    commit_changes(spark, table, changes.rows, changes.deleted, "id")
                    if label == "sparkext":
                        cdc_seconds.append(time.perf_counter() - started)
                    spark.catalog.refreshTable(table)
                build_seconds.append(_build(TABLES["sparkext"]))
            order = list(TABLES)[round_no % 3 :] + list(TABLES)[: round_no % 3]
            for kind, sql in _queries(rows, round_no, changes, rng):
                runs = {label: measure(spark, sql.format(t=TABLES[label])) for label in order}
                for label, result in runs.items():
                    by_class.setdefault(kind, {}).setdefault(label, []).append(result)
                answers = {label: r.answer for label, r in runs.items()}
                if not answers["plain"] == answers["rgbloom"] == answers["sparkext"]:
                    wrong.append(f"round {round_no}, {kind}")
                if kind == "IN of 100 ids":
                    true_in.append(_true_files(spark, sql.split(" WHERE ", 1)[1]))
            print(f"skipping_indexes: round {round_no + 1}/{rounds} done", flush=True)
        consult = list(zip(timer.seconds, timer.cold, strict=True))
        index_bytes, data_bytes = _index_bytes(spark, TABLES["sparkext"])
        random_wrong, random_pruned = _random_predicates(
            spark, rows, files, random_count, changes_per_commit, rng
        )
    plan_on, plan_off = _plan_times(spark, rows, rng)
    optimize_ours, optimize_plain = _optimize_times(spark)
    return _results(
        by_class, true_in, wrong, consult, (plan_on, plan_off), (index_bytes, data_bytes),
        (full_build, loads["sparkext"]), (cdc_seconds, build_seconds),
        (optimize_ours, optimize_plain), (random_count, random_wrong, random_pruned),
        dict(rows=rows, files=files, rounds=rounds),
    )  # fmt: skip


def _plan_times(spark, rows: int, rng: random.Random) -> tuple[float, float]:
    """Median ms to plan (optimise + physical plan) a needle with the index on and off."""
    needle = request_id(rng.randrange(rows))
    sql = f"SELECT * FROM {TABLES['sparkext']} WHERE request_id = '{needle}'"

    def plan(enabled: str) -> Callable[[], object]:
        def go() -> object:
            spark.conf.set("spark.sparkext.index.enabled", enabled)
            return spark.sql(sql)._jdf.queryExecution().executedPlan()

        return go

    try:
        rounds = int(os.environ.get("SPARKEXT_BENCH_INDEX_PLAN_ROUNDS", "20"))
        on, off = interleaved_medians(plan("true"), plan("false"), rounds=rounds, warmup=3)
    finally:
        spark.conf.unset("spark.sparkext.index.enabled")
    return median_ms(on), median_ms(off)


def _optimize_times(spark) -> tuple[float, float]:
    """Seconds of tiered_optimize's L0 on the indexed table (building the index as its last step)
    and on the plain table, from the same state."""
    import sparkext

    out = []
    for label in ("sparkext", "plain"):
        started = time.perf_counter()
        sparkext.sql(
            f"CALL sparkext.tiered_optimize(table => '{TABLES[label]}', levels => 'l0')"
        ).collect()
        out.append(time.perf_counter() - started)
    return out[0], out[1]


def _random_predicates(
    spark, rows: int, files: int, count: int, changes: int, rng: random.Random
) -> tuple[int, int]:
    """Random predicates on the indexed table, index on vs off: (wrong answers, pruned ones)."""
    from tests.helpers.arrow_cdc import commit_changes

    table = TABLES["sparkext"]
    wrong = pruned = 0
    for i in range(count):
        if i and i % 50 == 0:
            change = _changes(rows, 1000 + i, changes, files, rng)
            for other in TABLES.values():  # all three: they stay equal for what follows
                commit_changes(spark, other, change.rows, change.deleted, "id")
                spark.catalog.refreshTable(other)
        where = random_predicate(rng, rows)
        sql = f"SELECT id, status, latency, message FROM {table} WHERE {where}"
        spark.conf.set("spark.sparkext.index.enabled", "true")
        on = measure(spark, sql)
        spark.conf.set("spark.sparkext.index.enabled", "false")
        off = measure(spark, sql)
        wrong += on.answer != off.answer
        pruned += on.planned < on.candidates
    spark.conf.unset("spark.sparkext.index.enabled")
    return wrong, pruned


def random_predicate(rng: random.Random, rows: int, depth: int = 0) -> str:
    """A random filter over the log table's indexed columns (and one unindexed)."""
    if depth < 2 and rng.random() < 0.45:
        op = rng.choice(("AND", "OR", "AND", "OR", "NOT"))
        if op == "NOT":
            return f"NOT ({random_predicate(rng, rows, depth + 1)})"
        left, right = (random_predicate(rng, rows, depth + 1) for _ in range(2))
        return f"({left} {op} {right})"
    key = rng.randrange(rows)
    word = rng.choice(("timeout", "utmost", "cache", "peer", "alice", "payments", "200", "zzz"))
    gram = rng.choice(("tmo", "eou", "ach", "ice", "xyz", "ut"))
    status = rng.choice((*COMMON_STATUS, "E", "F", "Z"))
    low = rng.choice((0, 5, 100, 999, 1000, 30000, 59999))
    return rng.choice(
        (
            f"request_id = '{request_id(key)}'",
            f"request_id IN ('{request_id(key)}', '{request_id(rng.randrange(rows))}', NULL)",
            f"request_id <=> '{request_id('absent')}'",
            "request_id IS NULL",
            f"status = '{status}'",
            f"status IN ('{status}', 'E')",
            f"status <> '{status}'",
            f"NOT status IN ('{status}', 'F')",
            f"latency BETWEEN {low} AND {low + rng.choice((0, 10, 500))}",
            f"latency > {low}",
            f"latency <= {low}",
            f"latency = CAST({low} AS BIGINT)",
            f"message LIKE '%{word}%'",
            f"message LIKE '%{gram}%'",
            f"message ILIKE '%{word.upper()}%'",
            f"message LIKE '{word} %'",
            f"lower(message) LIKE '%{word}%'",
            f"message RLIKE '{word}'",
            f"message IS NOT NULL AND id < {rng.randrange(rows)}",
            f"host = 'web-{rng.randrange(200):03d}'",
        )
    )


def _results(
    by_class, true_in, wrong, consult, plan, sizes, load, cdc, optimize, randoms, shape
) -> list[Result]:
    def p50(kind: str, label: str) -> float:
        return statistics.median(r.seconds for r in by_class[kind][label])

    def mean(kind: str, label: str, field: str) -> float:
        return statistics.mean(getattr(r, field) for r in by_class[kind][label])

    shape_note = f"{shape['rows']:,} rows, {shape['files']:,} files, {shape['rounds']} rounds"
    out: list[Result] = []
    for kind in ("needle present", "needle absent"):
        planned = [r.planned for r in by_class[kind]["sparkext"]]
        ours, peer = statistics.median(planned), mean(kind, "rgbloom", "planned")
        out.append(
            Result(
                "skipping_indexes", f"{kind}: planned files (median of {shape['rounds']})", ours,
                "Iceberg row-group blooms (mean)", peer, "<= 2 (peer: all)", ours <= 2,
                notes=f"per round {planned}; candidates "
                f"{mean(kind, 'sparkext', 'candidates'):.0f}; {shape_note}",
            )
        )  # fmt: skip
        ours_s, peer_s = p50(kind, "sparkext"), p50(kind, "rgbloom")
        out.append(
            Result(
                "skipping_indexes", f"{kind}: p50 seconds", ours_s,
                "Iceberg row-group blooms", peer_s, ">= 20x lower", peer_s >= 20 * ours_s,
                notes=f"plain {p50(kind, 'plain'):.3f} s",
            )
        )  # fmt: skip
    kind = "IN of 100 ids"
    planned = [r.planned for r in by_class[kind]["sparkext"]]
    candidates = [r.candidates for r in by_class[kind]["sparkext"]]
    bound_ok = all(
        p <= 1.1 * t + FPP * c for p, t, c in zip(planned, true_in, candidates, strict=True)
    )
    out.append(
        Result(
            "skipping_indexes", f"{kind}: planned files (mean)", statistics.mean(planned),
            "files holding a match (mean)", statistics.mean(true_in),
            "<= 1.1 x true matches + fpp x candidates", bound_ok,
            notes=f"per round planned {planned}, true {true_in}",
        )
    )  # fmt: skip
    ours_s, peer_s = p50(kind, "sparkext"), p50(kind, "rgbloom")
    out.append(
        Result(
            "skipping_indexes", f"{kind}: p50 seconds", ours_s, "Iceberg row-group blooms",
            peer_s, ">= 10x lower", peer_s >= 10 * ours_s,
            notes=f"plain {p50(kind, 'plain'):.3f} s",
        )
    )  # fmt: skip
    for kind in ("LIKE '%timeout%'", "LIKE '%tmo%'"):
        ours_b, peer_b = mean(kind, "sparkext", "bytes_read"), mean(kind, "plain", "bytes_read")
        out.append(
            Result(
                "skipping_indexes", f"{kind}: bytes read (mean)", ours_b, "plain table", peer_b,
                ">= 10x fewer", peer_b >= 10 * ours_b,
                notes=f"files {mean(kind, 'sparkext', 'planned'):.0f} of "
                f"{mean(kind, 'sparkext', 'candidates'):.0f}; row-group blooms "
                f"{mean(kind, 'rgbloom', 'bytes_read'):,.0f} bytes; p50 {p50(kind, 'sparkext'):.3f}"
                f" s vs {p50(kind, 'plain'):.3f} s",
            )
        )  # fmt: skip
    for kind in ("status IN ('E','F')", "latency BETWEEN"):
        ours_f, peer_f = mean(kind, "sparkext", "planned"), mean(kind, "plain", "planned")
        out.append(
            Result(
                "skipping_indexes", f"{kind}: planned files (mean)", ours_f,
                "min/max alone (plain table)", peer_f, ">= 5x fewer", peer_f >= 5 * ours_f,
                notes=f"p50 {p50(kind, 'sparkext'):.3f} s vs {p50(kind, 'plain'):.3f} s",
            )
        )  # fmt: skip
    every = [seconds for seconds, _ in consult]
    warm = [seconds for seconds, cold in consult if not cold]
    cold = [seconds for seconds, is_cold in consult if is_cold]
    p95, p95_warm = _p(every, 0.95) * 1000, _p(warm, 0.95) * 1000
    out.append(
        Result(
            "skipping_indexes", "index consult at planning: p95 ms per prune_files callback",
            p95, "goal", 50.0, "<= 50 ms for 2,000 files", p95 <= 50,
            notes=f"{len(every)} callbacks, p50 {_p(every, 0.5) * 1000:.1f} ms; the first use of "
            f"each index object (decoding it) {len(cold)} times, up to "
            f"{max(cold, default=0) * 1000:.0f} ms; needle plan time {plan[0]:.1f} ms with the "
            f"index, {plan[1]:.1f} ms without",
        )
    )  # fmt: skip
    out.append(
        Result(
            "skipping_indexes", "index consult, index object decoded already: p95 ms", p95_warm,
            "goal", 50.0, "<= 50 ms for 2,000 files", p95_warm <= 50,
            notes=f"{len(warm)} callbacks, p50 {_p(warm, 0.5) * 1000:.1f} ms",
        )
    )  # fmt: skip
    index_bytes, data_bytes = sizes
    out.append(
        Result(
            "skipping_indexes", "index bytes / data bytes", index_bytes / max(1, data_bytes),
            "goal", 0.03, "<= 3%", index_bytes <= 0.03 * data_bytes,
            notes=f"index object {index_bytes:,} bytes, live data files {data_bytes:,} bytes",
        )
    )  # fmt: skip
    build, write = load
    out.append(
        Result(
            "skipping_indexes", "full index build seconds / the load's seconds", build / write,
            "goal", 0.10, "<= 10% of the write it rides on", build <= 0.10 * write,
            notes=f"build {build:.1f} s, load {write:.1f} s",
        )
    )  # fmt: skip
    ours_o, plain_o = optimize
    out.append(
        Result(
            "skipping_indexes", "tiered_optimize L0 seconds, indexed table", ours_o,
            "the same call on the plain table", plain_o, "<= 10% more (the index rides on it)",
            ours_o <= 1.10 * plain_o,
        )
    )  # fmt: skip
    commits, builds = cdc
    if commits:
        out.append(
            Result(
                "skipping_indexes", "incremental build after a CDC commit: median seconds",
                statistics.median(builds), "the CDC commit (median seconds)",
                statistics.median(commits), "report", True,
            )
        )  # fmt: skip
    count, random_wrong, random_pruned = randoms
    out.append(
        Result(
            "skipping_indexes", "wrong answers (three tables; random predicates on vs off)",
            len(wrong) + random_wrong, "goal", 0, "0", not wrong and random_wrong == 0,
            notes=f"{count} random predicates ({random_pruned} pruned files), CDC between; "
            f"{'; '.join(wrong)}",
        )
    )  # fmt: skip
    return out
