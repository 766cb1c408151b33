"""Run benchmarks and print each figure beside its baseline, with the ratio; save JSON.

python3 -m benchmarks.run                                # all
python3 -m benchmarks.run routing_overhead               # some
python3 -m benchmarks.run stream_backfill --out f.json   # results to f.json
python3 -m benchmarks.run changelog --rows 1000000       # a benchmark's table size

A run writes its JSON to ``benchmarks/results/local/<names>-<UTC time>.json``, a directory git
ignores, so running a benchmark never changes a tracked file. The files directly in
``benchmarks/results/`` are results kept on purpose (the runs behind the figures of
docs/development/benchmarks.md, listed in benchmarks/results/README.md): to keep one, copy
the run's file there under a name that says what and when
(``cp benchmarks/results/local/stream_backfill-20261123T101500Z.json
benchmarks/results/stream_backfill-2026-11-23.json``) and commit that file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import platform
from pathlib import Path

from tabulate import tabulate

BENCHMARKS = (
    "routing_overhead",
    "governance",
    "cdc_ingest",
    "cdc_floor",
    "rewrite_equality_deletes",
    "snapshot_as_of_event_time",
    "stream_backfill",
    "changelog",
    "dim_join",
    "tiered_optimize",
    "optimize_service",
    "in_spark_sql",
    "reconcile",
    "reconcile_live",
    "bootstrap",
    "cdc_lag",
    "skipping_indexes",
    "cdc_soak",  # two hours by default (SPARKEXT_SOAK_SECONDS): not part of a run of all
)
LONG = {"cdc_soak"}
RESULTS = Path(__file__).parent / "results"  # results kept on purpose (tracked)
LOCAL_RESULTS = RESULTS / "local"  # every run's own results (ignored by git)


def default_out(names: list[str], now: dt.datetime) -> Path:
    """Where a run of ``names`` (all when empty) started at ``now`` writes its JSON: a new
    file under the ignored :data:`LOCAL_RESULTS`, so runs neither clash nor touch kept files."""
    label = "+".join(names) if names else "all"
    return LOCAL_RESULTS / f"{label}-{now.astimezone(dt.timezone.utc):%Y%m%dT%H%M%SZ}.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="benchmarks to run")
    parser.add_argument(
        "--out",
        "--json",  # its name before --out
        dest="out",
        type=Path,
        metavar="FILE",
        help="write the results' JSON to FILE (default: a new file in benchmarks/results/local/)",
    )
    parser.add_argument(
        "--rows",
        type=int,
        help="table size for the benchmarks that take one (changelog, skipping_indexes); "
        "default: theirs",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = default_out(args.names, dt.datetime.now(dt.timezone.utc))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    import sparkext

    # the PostgreSQL JDBC driver (Debian's libpostgresql-jdbc-java) for reconcile's source
    driver = Path("/usr/share/java/postgresql.jar")
    extra = {"spark.driver.extraClassPath": str(driver)} if driver.exists() else {}
    spark = sparkext.session(**extra)
    results = []
    for name in args.names or [b for b in BENCHMARKS if b not in LONG]:
        module = importlib.import_module(f"benchmarks.{name}")
        takes_rows = "rows" in inspect.signature(module.run).parameters
        results.extend(module.run(spark, rows=args.rows) if takes_rows else module.run(spark))
    rows = [
        [
            r.benchmark,
            r.metric,
            f"{r.ours:.3f}",
            r.baseline_name,
            f"{r.baseline:.3f}",
            f"{r.ratio:.3f}",
            r.goal,
            "yes" if r.met else "NO",
            r.notes,
        ]
        for r in results
    ]
    headers = [
        "benchmark",
        "metric",
        "ours",
        "baseline",
        "baseline figure",
        "ratio",
        "goal",
        "met",
        "notes",
    ]
    print(tabulate(rows, headers=headers, tablefmt="psql", disable_numparse=True))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "machine": {
                    "python": platform.python_version(),
                    "cpus": __import__("os").cpu_count(),
                },
                "results": [r.as_dict() for r in results],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
