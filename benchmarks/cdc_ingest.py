"""Cost of one 10k-change CDC batch as the table grows, next to Iceberg's MERGE INTO.

Goal (issue 3): sparkext's cost stays flat (within 1.3x from 1M to 16M rows) and is >= 5x faster
than MERGE INTO (merge-on-read) at 16M rows. Both sides get the same changes in the same run:
ingest_cdc reads them as Debezium JSON lines (decoding included); MERGE gets them already parsed
and deduplicated in a cached temporary view (which favours the peer).

Sizes come from SPARKEXT_BENCH_SIZES (default "1000000,4000000,16000000").
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Result

CHANGES = 10_000
SEED = 11


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


def _changes(rows: int, batch: int, rng: random.Random) -> list[dict]:
    keys = rng.sample(range(rows), k=min(rows, int(CHANGES * 0.8)))
    # new keys far above every size the tables grow to: a later bulk append must not repeat them
    first_new = 10**12 + (batch + 2) * CHANGES
    new = range(first_new, first_new + CHANGES - len(keys))
    events = []
    pos = 10**12 + batch * 10**6
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


def _merge(spark, table: str, events: list[dict]) -> None:
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


def run(spark) -> list[Result]:
    import sparkext

    sizes = [
        int(s)
        for s in os.environ.get("SPARKEXT_BENCH_SIZES", "1000000,4000000,16000000").split(",")
    ]
    work = Path(tempfile.mkdtemp(prefix="sparkext-bench-cdc-"))
    ours_table, peer_table = "lake.bench.cdc_ours", "lake.bench.cdc_merge"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    for t in (ours_table, peer_table):
        spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    landing, checkpoint = work / "landing", work / "checkpoint"
    landing.mkdir()
    land_seed(landing)
    sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{ours_table}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
    )
    spark.sql(
        f"CREATE TABLE {peer_table} USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        f"'write.merge.mode'='merge-on-read') AS SELECT * FROM {ours_table}"
    )
    rng = random.Random(SEED)
    results, figures, rows = [], {}, 0
    # warm-up, not measured: JIT, Python workers and caches for both sides
    warm = _changes(0, -1, rng)  # positions below every measured batch
    (landing / "000-warm-up.json").write_text("\n".join(json.dumps(e) for e in warm) + "\n")
    sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{ours_table}', source => '{landing}', "
        f"checkpoint => '{checkpoint}')"
    )
    _merge(spark, peer_table, warm)
    for batch, size in enumerate(sizes):
        print(f"growing both tables to {size:,} rows", flush=True)
        _grow(spark, ours_table, rows, size)
        _grow(spark, peer_table, rows, size)
        rows = size
        events = _changes(rows, batch, rng)
        path = landing / f"{batch + 1:03d}-changes.json"
        path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
        started = time.perf_counter()
        out = sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{ours_table}', source => '{landing}', "
            f"checkpoint => '{checkpoint}')"
        ).first()
        ours = time.perf_counter() - started
        assert out.commits == 1 and out.events == CHANGES, out
        peer = _merge(spark, peer_table, events)
        _same_rows(spark, ours_table, peer_table)
        figures[size] = ours
        print(f"{size:,} rows: ingest_cdc {ours:.2f} s, MERGE INTO {peer:.2f} s", flush=True)
        results.append(
            Result(
                benchmark="cdc_ingest",
                metric=f"seconds for one {CHANGES:,}-change batch at {size:,} rows",
                ours=ours,
                baseline_name="MERGE INTO (merge-on-read)",
                baseline=peer,
                goal=">= 5x faster than MERGE at 16M rows",
                met=peer / ours >= 5 if size >= 16_000_000 else True,
                notes=f"{CHANGES / ours:,.0f} changes/s ours, {CHANGES / peer:,.0f} /s MERGE",
            )
        )
    low, high = figures[sizes[0]], figures[sizes[-1]]
    results.append(
        Result(
            benchmark="cdc_ingest_flatness",
            metric=f"batch seconds at {sizes[-1]:,} / at {sizes[0]:,} rows",
            ours=high,
            baseline_name=f"ingest_cdc at {sizes[0]:,} rows",
            baseline=low,
            goal="ratio <= 1.3",
            met=high / low <= 1.3,
        )
    )
    for t in (ours_table, peer_table):
        spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    shutil.rmtree(work, ignore_errors=True)
    return results
