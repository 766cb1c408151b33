"""sparkext-demo: run sql/demo.sql on the embedded default (local Spark, ./warehouse)."""

from __future__ import annotations

import sys

from sparkext.resources import resource_dir


def main() -> None:
    """Write a small table with a few commits and print its table_health and help()."""
    from sparkext.cli.shell import cli

    script = resource_dir("sql") / "demo.sql"
    cli.main(["--echo", "-f", str(script), *sys.argv[1:]], prog_name="sparkext-demo")


if __name__ == "__main__":
    main()
