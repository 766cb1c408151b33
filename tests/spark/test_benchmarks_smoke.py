"""Benchmarks run end to end at a small size (their figures are measured at issue size by
``python -m benchmarks.run``; here only that they run and that their correctness checks hold)."""

from __future__ import annotations

from benchmarks import skipping_indexes

FILES = 16


def test_the_skipping_indexes_benchmark_runs_at_a_small_size(spark, monkeypatch):
    for key, value in {
        "SPARKEXT_BENCH_INDEX_FILES": str(FILES),
        "SPARKEXT_BENCH_INDEX_ROUNDS": "2",
        "SPARKEXT_BENCH_INDEX_CHANGES": "20",
        "SPARKEXT_BENCH_INDEX_RANDOM": "6",
        "SPARKEXT_BENCH_INDEX_PLAN_ROUNDS": "4",
    }.items():
        monkeypatch.setenv(key, value)
    try:
        results = skipping_indexes.run(spark, rows=8_000)
    finally:
        for table in skipping_indexes.TABLES.values():
            spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    by_metric = {r.metric: r for r in results}
    for r in results:
        print(f"{r.metric}: {r.ours:.4g} vs {r.baseline_name} {r.baseline:.4g} ({r.notes})")
    wrong = next(r for r in results if r.metric.startswith("wrong answers"))
    assert wrong.ours == 0, wrong.notes
    for kind in ("needle present", "needle absent"):
        planned = by_metric[f"{kind}: planned files (median of 2)"]
        assert planned.ours <= 2 and planned.baseline >= FILES, planned
    assert by_metric["IN of 100 ids: planned files (mean)"].met
    assert by_metric["status IN ('E','F'): planned files (mean)"].ours < FILES
    assert 0 < by_metric["index bytes / data bytes"].ours < 1
