"""Per-statement overhead of sparkext's routing versus spark.sql, for a 1 KB query.

Goal (issue 2): under 5 ms per statement. Both sides parse and analyse the same 1 KB SELECT
(DataFrame creation, no job); the difference of the medians is what routing costs. The pure
routing step (tokenize, split, look for sparkext calls) is also timed on its own.
"""

from __future__ import annotations

import time

from benchmarks.harness import Result, interleaved_medians, median_ms

ROUNDS = 300


def one_kb_query() -> str:
    columns = ", ".join(f"c{i % 8} + {i} AS x{i}" for i in range(62))
    text = f"SELECT {columns} FROM bench_source WHERE c0 > 1 AND c1 <> 'a;b'"
    assert 1000 <= len(text) <= 1300, len(text)
    return text


def run(spark) -> list[Result]:
    import sparkext
    from sparkext.routing.invocations import find_table_functions, parse_call
    from sparkext.routing.tokens import split_statements

    spark.range(10).selectExpr(*(f"id AS c{i}" for i in range(8))).createOrReplaceTempView(
        "bench_source"
    )
    query = one_kb_query()
    ours, base = interleaved_medians(
        lambda: sparkext.sql(query, spark), lambda: spark.sql(query), ROUNDS
    )
    overhead = median_ms(ours) - median_ms(base)

    def route_only() -> None:
        for statement in split_statements(query):
            if parse_call(statement) is None:
                find_table_functions(statement)

    for _ in range(50):
        route_only()
    start = time.perf_counter()
    for _ in range(1000):
        route_only()
    routing_ms = time.perf_counter() - start  # 1000 calls: seconds == ms per call

    return [
        Result(
            benchmark="routing_overhead",
            metric=f"median ms per 1 KB statement ({len(query)} chars, {ROUNDS} rounds)",
            ours=median_ms(ours),
            baseline_name="spark.sql directly",
            baseline=median_ms(base),
            goal="overhead (ours - baseline) < 5 ms",
            met=overhead < 5.0,
            notes=f"overhead {overhead:.3f} ms; routing alone {routing_ms:.3f} ms per statement",
        )
    ]
