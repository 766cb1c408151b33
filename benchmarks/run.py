"""Run benchmarks and print each figure beside its baseline, with the ratio; save JSON.

python3 -m benchmarks.run                    # all
python3 -m benchmarks.run routing_overhead   # some
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import platform
from pathlib import Path

from tabulate import tabulate

BENCHMARKS = (
    "routing_overhead",
    "cdc_ingest",
    "rewrite_equality_deletes",
    "snapshot_as_of_event_time",
    "stream_backfill",
)
RESULTS = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="benchmarks to run")
    parser.add_argument("--json", type=Path, default=RESULTS / "latest.json")
    args = parser.parse_args(argv)

    import sparkext

    spark = sparkext.session()
    results = []
    for name in args.names or BENCHMARKS:
        module = importlib.import_module(f"benchmarks.{name}")
        results.extend(module.run(spark))
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
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
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
    print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
