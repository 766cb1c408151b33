"""tiered_optimize against Iceberg's rewrite_data_files (issue 18's benchmarks), in one run.

**Layout quality.** An unpartitioned table of ``rows`` rows (``--rows``; default and issue
size 5M) written in COMMITS (40) small commits; cluster columns ``a`` (strings sharing the
12-byte prefix ``user_0000000``, then 6 digits) and ``b`` (bigint). Each layout starts from the
same written state (``rollback_to_snapshot``, metadata only) and writes files of the same
target size (the table's bytes / TARGET_FILES):

* ``none``: the writers' files;
* ``iceberg_binpack``: ``rewrite_data_files(strategy => 'binpack')``;
* ``iceberg_zorder``: ``rewrite_data_files(strategy => 'sort', sort_order => 'zorder(a, b)')``;
* ``sparkext_zorder`` / ``sparkext_hilbert``: ``tiered_optimize(levels => 'l1', cluster_by =>
  'a,b', curve => …)``;
* ``linear_a``: ``rewrite_data_files(strategy => 'sort', sort_order => 'a')`` (the best case
  for predicates on ``a`` alone).

50 random predicates (fixed seed): points and ranges on ``a`` alone, on ``b`` alone, and on both.
"Files scanned" is deterministic: the live data files whose column bounds (the ``files``
metadata table) could match the predicate. Query time: ``count(*)`` with the predicate, each
predicate once after one warm-up, summed per class.

**Write amplification over a day.** DAY_COMMITS (96) commits of small files into PARTITIONS (2)
partitions (DAY_ROWS rows in all). sparkext: ``tiered_optimize`` after every commit with its
triggers (L0 at 4 small files, L1 at 1/6 of a partition's day, L2 every 4 L1 runs), then one
forced L2 at the end so both end clustered. The peer: every 4 commits ("hourly") Iceberg's
``rewrite_data_files`` zorder(a, b) on the partitions written in that hour. Bytes rewritten:
``removed-files-size`` of the ``replace`` snapshots; bytes ingested: ``added-files-size`` of the
appends. Final layout: mean files scanned over the same predicates.

**Latency and writer safety.** ``ingest_cdc`` in another process commits a batch every
WRITER_INTERVAL seconds for WRITER_MINUTES minutes while this process runs ``tiered_optimize``
in a loop: P95 from a writer commit to the L0 commit that took its files, failed writer batches
(goal 0), failed optimisation groups (goal < 0.1%).

Sizes: SPARKEXT_BENCH_OPTIMIZE_DAY_ROWS (default 2,000,000), SPARKEXT_BENCH_OPTIMIZE_MINUTES
(default 10), SPARKEXT_BENCH_OPTIMIZE_PARTS (``layout,amplification,latency``: which to run).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import sparkext
from benchmarks.harness import Result

COMMITS = 40
TARGET_FILES = 64
PREDICATES = 50
PREFIX = "user_0000000"
DAY_COMMITS = 96
PARTITIONS = 2
WRITER_INTERVAL = 10
TABLE = "lake.bench.optimize_layout"
DAY_TABLE = "lake.bench.optimize_day_{}"
LATENCY_TABLE = "lake.bench.optimize_latency"


def _generate(spark, table: str, start: int, count: int, files: int, partition: bool = False):
    """Rows ``start .. start + count`` (deterministic per id) in ``files`` files per commit."""
    part = ", pmod(id, 2) AS p" if partition else ""
    spark.sql(
        f"INSERT INTO {table} SELECT /*+ REPARTITION({files}) */ "
        f"concat('{PREFIX}', lpad(cast(pmod(hash(id, 1), 1000000) AS string), 6, '0')) AS a, "
        f"pmod(hash(id, 2), 1000000) AS b, id, repeat('x', 20) AS payload{part} "
        f"FROM range({start}, {start + count})"
    )


def _predicates(seed: int = 18) -> list[tuple[str, str, tuple]]:
    """(class, SQL predicate, (a range, b range)) with ranges as inclusive (lo, hi) or None."""
    pick = random.Random(seed)

    def a_value() -> str:
        return f"{PREFIX}{pick.randrange(1_000_000):06d}"

    def a_range() -> tuple[str, str]:
        lo = pick.randrange(990_000)
        return f"{PREFIX}{lo:06d}", f"{PREFIX}{lo + 10_000:06d}"  # 1% of the keys

    def b_range() -> tuple[int, int]:
        lo = pick.randrange(990_000)
        return lo, lo + 10_000

    out = []
    for i in range(PREDICATES):
        kind = ("a", "b", "ab")[i % 3]
        point = i % 2 == 0
        a = b = None
        if kind in ("a", "ab"):
            a = (v := a_value(), v) if point and kind == "a" else a_range()
        if kind in ("b", "ab"):
            b = (v := pick.randrange(1_000_000), v) if point else b_range()
        parts = []
        if a is not None:
            parts.append(f"a BETWEEN '{a[0]}' AND '{a[1]}'")
        if b is not None:
            parts.append(f"b BETWEEN {b[0]} AND {b[1]}")
        out.append((kind, " AND ".join(parts), (a, b)))
    return out


def _files(spark, table: str) -> list[tuple]:
    spark.catalog.refreshTable(table)
    return [
        (r.alo, r.ahi, r.blo, r.bhi, r.size)
        for r in spark.sql(
            f"SELECT readable_metrics.a.lower_bound AS alo, readable_metrics.a.upper_bound AS ahi,"
            f" readable_metrics.b.lower_bound AS blo, readable_metrics.b.upper_bound AS bhi, "
            f"file_size_in_bytes AS size FROM {table}.files WHERE content = 0"
        ).collect()
    ]


def _could_match(f: tuple, ranges: tuple) -> bool:
    a, b = ranges
    if a is not None and not (f[0] <= a[1] and a[0] <= f[1]):
        return False
    return not (b is not None and not (f[2] <= b[1] and b[0] <= f[3]))


def _scanned(files: list[tuple], predicates) -> dict[str, float]:
    by_class: dict[str, list[int]] = {}
    for kind, _, ranges in predicates:
        by_class.setdefault(kind, []).append(sum(_could_match(f, ranges) for f in files))
    return {k: statistics.mean(v) for k, v in by_class.items()}


def _scanned_share(files: list[tuple], predicates) -> dict[str, float]:
    """Share of the table's bytes in files that could match, mean per class (fair across
    layouts with different file counts)."""
    total = sum(f[4] for f in files) or 1
    by_class: dict[str, list[float]] = {}
    for kind, _, ranges in predicates:
        hit = sum(f[4] for f in files if _could_match(f, ranges))
        by_class.setdefault(kind, []).append(hit / total)
    return {k: round(statistics.mean(v), 4) for k, v in by_class.items()}


def _query_seconds(spark, table: str, predicates) -> dict[str, float]:
    spark.sql(f"SELECT count(*) FROM {table} WHERE {predicates[0][1]}").collect()  # warm-up
    out: dict[str, float] = {}
    for kind, sql, _ in predicates:
        started = time.perf_counter()
        spark.sql(f"SELECT count(*) FROM {table} WHERE {sql}").collect()
        out[kind] = out.get(kind, 0.0) + time.perf_counter() - started
    return out


def _layouts(spark, target: int):
    t = TABLE.split(".", 1)[1]
    iceberg = f"map('target-file-size-bytes', '{target}', 'rewrite-all', 'true')"
    ours = f"map('target-file-size-bytes', '{target}')"
    return {
        "none": None,
        "iceberg_binpack": f"CALL lake.system.rewrite_data_files(table => '{t}', "
        f"strategy => 'binpack', options => {iceberg})",
        "iceberg_zorder": f"CALL lake.system.rewrite_data_files(table => '{t}', "
        f"strategy => 'sort', sort_order => 'zorder(a, b)', options => {iceberg})",
        "sparkext_zorder": f"CALL sparkext.tiered_optimize(table => '{TABLE}', levels => 'l1', "
        f"cluster_by => 'a,b', curve => 'zorder', options => {ours})",
        "sparkext_hilbert": f"CALL sparkext.tiered_optimize(table => '{TABLE}', levels => 'l1', "
        f"cluster_by => 'a,b', curve => 'hilbert', options => {ours})",
        "linear_a": f"CALL lake.system.rewrite_data_files(table => '{t}', "
        f"strategy => 'sort', sort_order => 'a', options => {iceberg})",
    }


def layout_quality(spark, rows: int) -> tuple[list[Result], dict]:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
    spark.sql(f"CREATE TABLE {TABLE} (a string, b bigint, id bigint, payload string) USING iceberg")
    per_commit = rows // COMMITS
    for i in range(COMMITS):
        _generate(spark, TABLE, i * per_commit, per_commit, files=4)
    base = spark.sql(
        f"SELECT snapshot_id FROM {TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    size = spark.sql(f"SELECT sum(file_size_in_bytes) FROM {TABLE}.files").first()[0]
    target = max(1, int(size) // TARGET_FILES)
    predicates = _predicates()
    expected = spark.table(TABLE).count()
    figures: dict[str, dict] = {}
    for name, statement in _layouts(spark, target).items():
        spark.sql(f"CALL lake.system.rollback_to_snapshot('{TABLE.split('.', 1)[1]}', {base})")
        started = time.perf_counter()
        if statement is not None and statement.startswith("CALL lake"):
            spark.sql(statement).collect()
        elif statement is not None:
            sparkext.sql(statement).collect()
        rewrite_s = time.perf_counter() - started
        spark.catalog.refreshTable(TABLE)
        assert spark.table(TABLE).count() == expected, name
        files = _files(spark, TABLE)
        figures[name] = {
            "files": len(files),
            "rewrite_s": round(rewrite_s, 2),
            "scanned": _scanned(files, predicates),
            "scanned_bytes_share": _scanned_share(files, predicates),
            "query_s": _query_seconds(spark, TABLE, predicates),
        }
        print(name, figures[name], flush=True)
    results = []
    ours, peer = figures["sparkext_hilbert"], figures["iceberg_zorder"]
    for kind, label in (("a", "a alone"), ("b", "b alone"), ("ab", "a and b")):
        results.append(
            Result(
                "tiered_optimize layout",
                f"files scanned per predicate on {label} (mean)",
                ours["scanned"][kind],
                "Iceberg zorder(a, b)",
                peer["scanned"][kind],
                "<= 0.5 x Iceberg's Z-order on the prefixed strings"
                if kind == "a"
                else "<= 1.5 x the best multi-column layout",
                ours["scanned"][kind] <= 0.5 * peer["scanned"][kind]
                if kind == "a"
                else ours["scanned"][kind]
                <= 1.5
                * min(
                    figures[n]["scanned"][kind]
                    for n in ("iceberg_zorder", "sparkext_zorder", "sparkext_hilbert")
                ),
                notes=", ".join(f"{n}: {f['scanned'][kind]:.1f}" for n, f in figures.items()),
            )
        )
    for kind, label in (("a", "a alone"), ("b", "b alone"), ("ab", "a and b")):
        results.append(
            Result(
                "tiered_optimize layout",
                f"share of the table's bytes in files that could match, {label} (mean)",
                ours["scanned_bytes_share"][kind],
                "Iceberg zorder(a, b)",
                peer["scanned_bytes_share"][kind],
                "report (fair across file counts)",
                True,
                notes=", ".join(
                    f"{n}: {f['scanned_bytes_share'][kind]:.3f}" for n, f in figures.items()
                ),
            )
        )
    results.append(
        Result(
            "tiered_optimize layout",
            "query seconds, 50 predicates",
            sum(ours["query_s"].values()),
            "Iceberg zorder(a, b)",
            sum(peer["query_s"].values()),
            "report",
            True,
            notes=", ".join(f"{n}: {sum(f['query_s'].values()):.1f}" for n, f in figures.items()),
        )
    )
    return results, {"rows": rows, "target_file_bytes": target, "layouts": figures}


def _day_table(spark, name: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
    spark.sql(
        f"CREATE TABLE {name} (a string, b bigint, id bigint, payload string, p bigint) "
        "USING iceberg PARTITIONED BY (p)"
    )


def _bytes(spark, name: str, operation: str, key: str) -> int:
    spark.catalog.refreshTable(name)
    value = spark.sql(
        f"SELECT sum(cast(summary['{key}'] AS bigint)) FROM {name}.snapshots "
        f"WHERE operation = '{operation}'"
    ).first()[0]
    return int(value or 0)


def write_amplification(spark, day_rows: int) -> tuple[list[Result], dict]:
    ours_table, peer_table = DAY_TABLE.format("sparkext"), DAY_TABLE.format("iceberg")
    per_commit = day_rows // DAY_COMMITS
    for name in (ours_table, peer_table):
        _day_table(spark, name)
    per_partition_day = 0
    timings = {"sparkext": 0.0, "iceberg": 0.0}
    for i in range(DAY_COMMITS):
        for name in (ours_table, peer_table):
            _generate(spark, name, i * per_commit, per_commit, files=4, partition=True)
        if i == 0:
            first = spark.sql(f"SELECT sum(file_size_in_bytes) FROM {ours_table}.files").first()[0]
            per_partition_day = int(first) * DAY_COMMITS // PARTITIONS
            spark.sql(
                f"ALTER TABLE {ours_table} SET TBLPROPERTIES ("
                "'sparkext.optimize.cluster-by'='a,b', 'sparkext.optimize.l0.min-files'='4', "
                f"'sparkext.optimize.l1.min-bytes'='{max(1, per_partition_day // 6)}', "
                "'sparkext.optimize.l2.every-l1-runs'='4', "
                f"'sparkext.optimize.target-file-size-bytes'='{max(1, per_partition_day // 16)}')"
            )
        started = time.perf_counter()
        sparkext.sql(f"CALL sparkext.tiered_optimize(table => '{ours_table}')").collect()
        timings["sparkext"] += time.perf_counter() - started
        if (i + 1) % 4 == 0:
            started = time.perf_counter()
            spark.sql(
                f"CALL lake.system.rewrite_data_files(table => '{peer_table.split('.', 1)[1]}', "
                "strategy => 'sort', sort_order => 'zorder(a, b)', options => map("
                f"'target-file-size-bytes', '{max(1, per_partition_day // 16)}', "
                "'rewrite-all', 'true'))"
            ).collect()
            timings["iceberg"] += time.perf_counter() - started
        if i % 16 == 15:
            print(f"day commit {i + 1}/{DAY_COMMITS}", flush=True)
    started = time.perf_counter()
    sparkext.sql(
        f"CALL sparkext.tiered_optimize(table => '{ours_table}', levels => 'l2')"
    ).collect()  # end clustered, as the peer does
    timings["sparkext"] += time.perf_counter() - started
    predicates = _predicates(seed=96)
    figures = {}
    for label, name in (("sparkext", ours_table), ("iceberg", peer_table)):
        ingested = _bytes(spark, name, "append", "added-files-size")
        rewritten = _bytes(spark, name, "replace", "removed-files-size")
        files = _files(spark, name)
        figures[label] = {
            "ingested": ingested,
            "rewritten": rewritten,
            "per_byte": rewritten / ingested,
            "files": len(files),
            "scanned": _scanned(files, predicates),
            "scanned_bytes_share": _scanned_share(files, predicates),
            "optimize_s": round(timings[label], 1),
        }
        print(label, figures[label], flush=True)
    ours, peer = figures["sparkext"], figures["iceberg"]
    results = [
        Result(
            "tiered_optimize write amplification",
            "bytes rewritten per byte ingested over 96 commits",
            ours["per_byte"],
            "Iceberg zorder hourly",
            peer["per_byte"],
            "<= 3 and >= 4x less than the hourly peer",
            ours["per_byte"] <= 3 and peer["per_byte"] >= 4 * ours["per_byte"],
            notes=f"optimize seconds: ours {ours['optimize_s']}, peer {peer['optimize_s']}",
        ),
        Result(
            "tiered_optimize write amplification",
            "final layout: files scanned per predicate (mean of classes)",
            statistics.mean(ours["scanned"].values()),
            "Iceberg zorder hourly",
            statistics.mean(peer["scanned"].values()),
            "equal or better final layout",
            statistics.mean(ours["scanned"].values()) <= statistics.mean(peer["scanned"].values()),
            notes=f"files: ours {ours['files']}, peer {peer['files']}",
        ),
    ]
    return results, figures


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import sparkext
    from tests.helpers.cdc_calls import land
    from tests.helpers.cdc_source import SourceTable
    warehouse, table, zone, checkpoint, minutes, interval = sys.argv[1:7]
    spark = sparkext.session(master="local[1]", warehouse=warehouse,
                             **{"spark.sql.shuffle.partitions": "2"})
    source = SourceTable(seed=5, key_space=20000)
    deadline = time.time() + float(minutes) * 60
    batch = failed = 0
    while time.time() < deadline:
        started = time.time()
        land(Path(zone), f"{batch:06d}.json", [e for e in source.run(500) if e["op"] != "t"])
        try:
            sparkext.sql(
                f"CALL sparkext.ingest_cdc(table => '{table}', source => '{zone}', "
                f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
            ).collect()
        except Exception as error:
            failed += 1
            print("FAILED", type(error).__name__, str(error)[:300], flush=True)
        batch += 1
        time.sleep(max(0.0, float(interval) - (time.time() - started)))
    print("RESULT", json.dumps({"batches": batch, "failed": failed}), flush=True)
    """
)


def latency(spark, minutes: float) -> tuple[list[Result], dict]:
    import json

    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    spark.sql(f"DROP TABLE IF EXISTS {LATENCY_TABLE} PURGE")
    work = Path(tempfile.mkdtemp(prefix="sparkext-optimize-latency-"))
    script = work / "writer.py"
    script.write_text(WRITER)
    root = Path(__file__).resolve().parents[1]
    writer = subprocess.Popen(
        [
            sys.executable, str(script), warehouse, LATENCY_TABLE, str(work / "zone"),
            str(work / "checkpoint"), str(minutes), str(WRITER_INTERVAL),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    groups = failed_groups = 0
    while writer.poll() is None:
        try:
            spark.catalog.refreshTable(LATENCY_TABLE)
            out = sparkext.sql(
                f"CALL sparkext.tiered_optimize(table => '{LATENCY_TABLE}', options => "
                "map('l0.min-files', '2'))"
            ).collect()
        except Exception as error:  # the table may not exist yet
            text = str(error).lower()
            if not any(m in text for m in ("does not exist", "not found", "cannot be found")):
                raise
            time.sleep(2)
            continue
        groups += len(out)
        failed_groups += sum(1 for r in out if r.error is not None)
        if not out:
            time.sleep(1)
    stdout, stderr = writer.communicate()
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"writer failed: {stderr[-2000:]}")
    writer_figures = json.loads(line[len("RESULT ") :])
    spark.catalog.refreshTable(LATENCY_TABLE)
    snapshots = spark.sql(
        f"SELECT committed_at, operation, summary['sparkext.optimize.level'] AS level "
        f"FROM {LATENCY_TABLE}.snapshots ORDER BY committed_at"
    ).collect()
    waits = []
    for i, s in enumerate(snapshots):
        if s.operation == "replace":
            continue
        done = next(
            (t for t in snapshots[i + 1 :] if t.operation == "replace" and t.level == "0"), None
        )
        if done is not None:
            waits.append((done.committed_at - s.committed_at).total_seconds())
    p95 = sorted(waits)[int(0.95 * (len(waits) - 1))] if waits else float("nan")
    figures = {
        **writer_figures,
        "optimisation_groups": groups,
        "failed_groups": failed_groups,
        "p95_commit_to_l0_s": p95,
        "median_commit_to_l0_s": statistics.median(waits) if waits else None,
    }
    print("latency", figures, flush=True)
    results = [
        Result(
            "tiered_optimize writer safety",
            "failed writer batches",
            writer_figures["failed"],
            "goal",
            0,
            "0",
            writer_figures["failed"] == 0,
            notes=f"{writer_figures['batches']} batches every {WRITER_INTERVAL} s",
        ),
        Result(
            "tiered_optimize writer safety",
            "failed optimisation groups (share)",
            failed_groups / max(1, groups),
            "goal",
            0.001,
            "< 0.1%",
            failed_groups / max(1, groups) < 0.001,
            notes=f"{failed_groups} of {groups}",
        ),
        Result(
            "tiered_optimize latency",
            "P95 seconds from a writer commit to its L0 commit",
            p95,
            "writer interval",
            WRITER_INTERVAL,
            "report (Magnus: 15-30 min for real-time tables)",
            True,
            notes=f"median {figures['median_commit_to_l0_s']}",
        ),
    ]
    return results, figures


def run(spark, rows: int | None = None) -> list[Result]:
    parts = os.environ.get("SPARKEXT_BENCH_OPTIMIZE_PARTS", "layout,amplification,latency")
    results: list[Result] = []
    if "layout" in parts:
        results += layout_quality(spark, rows or 5_000_000)[0]
    if "amplification" in parts:
        day_rows = int(os.environ.get("SPARKEXT_BENCH_OPTIMIZE_DAY_ROWS", "2000000"))
        results += write_amplification(spark, day_rows)[0]
    if "latency" in parts:
        results += latency(spark, float(os.environ.get("SPARKEXT_BENCH_OPTIMIZE_MINUTES", "10")))[0]
    return results
