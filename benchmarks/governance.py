"""What the policy check and the audit log cost per call (issue 53), against the same call with
neither: an Iceberg procedure through ``spark.sql`` (sparkext's interception, the policy, the
audit record) and a sparkext procedure through ``sparkext.sql``.

Goal: under 5 ms per call, as for routing. The baseline of the Iceberg call detaches sparkext's
driver for its rounds (Spark then runs Iceberg's statement exactly as without sparkext); the
baseline of the sparkext call switches the audit log and the policy off for its rounds. A policy
file is in force for "ours", so its check (a stat of the file) is counted.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.harness import Result, interleaved_medians, median_ms

ROUNDS = 200


def run(spark) -> list[Result]:
    import sparkext
    from sparkext import attach
    from sparkext.security import audit, guard, policy
    from sparkext.spark import extension
    from sparkext.spark.extension import detach

    table = "lake.bench.governed"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
    for i in range(3):
        spark.sql(f"INSERT INTO {table} VALUES ({i})")
    rules = Path(tempfile.mkdtemp()) / "policy.toml"
    rules.write_text('default = "all"\n[[grant]]\nto = ["*"]\nroutines = ["*"]\n')
    real_policy, real_log = guard.active_policy, audit.audit_log

    def governed() -> None:
        guard.active_policy = lambda s, c: policy.load(str(rules))
        audit.audit_log = real_log

    def ungoverned() -> None:
        guard.active_policy = lambda s, c: None
        audit.audit_log = lambda s: None

    iceberg = f"CALL lake.system.ancestors_of(table => '{table.removeprefix('lake.')}')"

    bridge, driver = extension._bridge(spark), extension._registered[0]

    def iceberg_ours() -> None:
        bridge.register(driver)  # one round trip, as detach() is for the baseline
        governed()
        spark.sql(iceberg).collect()

    def iceberg_stock() -> None:
        detach(spark)
        spark.sql(iceberg).collect()

    call = f"CALL sparkext.event_time_tags(table => '{table}')"

    def sparkext_ours() -> None:
        governed()
        sparkext.sql(call, spark).collect()

    def sparkext_bare() -> None:
        ungoverned()
        sparkext.sql(call, spark).collect()

    try:
        ice_ours, ice_base = interleaved_medians(iceberg_ours, iceberg_stock, ROUNDS)
        ext_ours, ext_base = interleaved_medians(sparkext_ours, sparkext_bare, ROUNDS)
    finally:
        attach(spark)
        guard.active_policy, audit.audit_log = real_policy, real_log
        audit.flush(spark)
    results = []
    for name, ours, base, baseline_name in (
        ("Iceberg procedure (ancestors_of) via spark.sql", ice_ours, ice_base,
         "the same statement with sparkext detached"),
        ("sparkext procedure (event_time_tags) via sparkext.sql", ext_ours, ext_base,
         "the same call with no policy and no audit log"),
    ):  # fmt: skip
        overhead = median_ms(ours) - median_ms(base)
        results.append(
            Result(
                benchmark="governance",
                metric=f"median ms per call, {name} ({ROUNDS} rounds)",
                ours=median_ms(ours),
                baseline_name=baseline_name,
                baseline=median_ms(base),
                goal="overhead (ours - baseline) < 5 ms",
                met=overhead < 5.0,
                notes=f"overhead {overhead:.3f} ms",
            )
        )
    return results
