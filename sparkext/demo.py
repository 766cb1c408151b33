"""sparkext-demo: the demo, and the example data the docs' examples run on.

``sparkext-demo`` runs sql/demo.sql on the embedded default (local Spark, warehouse
``~/.sparkext/warehouse``). ``sparkext-demo --data DIR`` writes the example inputs to DIR — Debezium
change files of a MySQL table ``shop.orders``, as Kafka Connect's object-store sink lands them —
plus the example scripts of sql/examples/ with their paths pointing at DIR, and clears the
examples' checkpoints there, so the scripts can run again from the start.

The docs and sql/examples/ are written for DIR = ``/tmp/sparkext-examples`` (an absolute path:
the statements run as written from any directory, in the shell or from Python, and the scripts
need no substitution); the copies written to another DIR have that path replaced by DIR.

The events are generated here rather than shipped as files so that the whole history is the one
table below (``ORDER_CHANGES``), which is what the docs' expected outputs are worked out from.

Floor: top.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path

import click

from sparkext.cli.shell import cli
from sparkext.resources import resource_dir

# The directory the docs and sql/examples/ are written for.
EXAMPLES_DIR_DEFAULT = "/tmp/sparkext-examples"
TOPIC = "shop.orders"
_BINLOG = "mysql-bin.000003"
_COLUMNS = ("id", "customer", "status", "amount")

# shop.orders as its binlog saw it, in order: (op, id, customer, status, amount, source time in
# UTC). u and d carry the row's previous state as their before-image (binlog_row_image=FULL).
# One file per day: day one inserts four orders, pays two and cancels one; day two ships one,
# adds one, changes an amount and deletes a paid order. A schema-change record that reached
# the topic (not a change event) sits between the two days and is rejected.
ORDER_CHANGES: tuple[tuple[str, int, str, str, float, str], ...] = (
    ("c", 1, "ana", "new", 12.5, "2026-11-20 08:00:00"),
    ("c", 2, "bo", "new", 7.0, "2026-11-20 08:05:00"),
    ("c", 3, "chen", "new", 99.9, "2026-11-20 09:10:00"),
    ("u", 1, "ana", "paid", 12.5, "2026-11-20 09:30:00"),
    ("c", 4, "dana", "new", 15.0, "2026-11-20 10:00:00"),
    ("u", 2, "bo", "paid", 7.0, "2026-11-20 11:00:00"),
    ("d", 3, "chen", "new", 99.9, "2026-11-20 12:00:00"),
    ("u", 1, "ana", "shipped", 12.5, "2026-11-21 08:00:00"),
    ("c", 5, "eli", "new", 42.0, "2026-11-21 09:00:00"),
    ("u", 4, "dana", "new", 18.0, "2026-11-21 10:00:00"),
    ("d", 2, "bo", "paid", 7.0, "2026-11-21 11:00:00"),
)
_FIRST_DAY_EVENTS = 7
# What a Debezium connector writes to its schema-change topic; landed here by mistake.
_SCHEMA_CHANGE = {
    "source": {"connector": "mysql", "name": "shop", "db": "shop", "table": "orders"},
    "databaseName": "shop",
    "ddl": "ALTER TABLE orders ADD COLUMN note VARCHAR(255)",
    "tableChanges": [],
}


def _epoch_ms(text: str) -> int:
    moment = dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def order_events() -> list[dict]:
    """The Debezium envelopes (payload only: JSON converter with ``schemas.enable=false``) of
    ``ORDER_CHANGES``, in binlog order.

    >>> events = order_events()
    >>> [(e["op"], (e["after"] or e["before"])["id"]) for e in events[:3]]
    [('c', 1), ('c', 2), ('c', 3)]
    >>> events[3]["before"]["status"], events[3]["after"]["status"], events[3]["source"]["pos"]
    ('new', 'paid', 1354)
    """
    rows: dict[int, dict] = {}
    events = []
    for number, (op, key, customer, status, amount, when) in enumerate(ORDER_CHANGES):
        row = dict(zip(_COLUMNS, (key, customer, status, amount), strict=True))
        before = rows.get(key) if op in ("u", "d") else None
        after = None if op == "d" else row
        if op == "d":
            rows.pop(key, None)
        else:
            rows[key] = row
        ms = _epoch_ms(when)
        source = {
            "version": "2.7.3.Final",
            "connector": "mysql",
            "name": "shop",
            "ts_ms": ms,
            "snapshot": "false",
            "db": "shop",
            "table": "orders",
            "server_id": 223344,
            "file": _BINLOG,
            "pos": 154 + 400 * number,
            "row": 0,
        }
        events.append(
            {"before": before, "after": after, "source": source, "op": op, "ts_ms": ms + 250}
        )
    return events


def _write_lines(path: Path, records: list[dict], mtime: float) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    os.utime(path, (mtime, mtime))  # Spark's file source takes files oldest first


def write_examples(directory: Path) -> list[Path]:
    """Write the example inputs and scripts to ``directory``; return the paths written.

    Only what this function makes is replaced: ``shop.orders/``, ``checkpoints/`` and the
    scripts; anything else in ``directory`` is left alone.
    """
    directory = directory.expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    landing, checkpoints = directory / TOPIC, directory / "checkpoints"
    for made in (landing, checkpoints):
        shutil.rmtree(made, ignore_errors=True)
    landing.mkdir()
    events = order_events()
    first, second = events[:_FIRST_DAY_EVENTS], events[_FIRST_DAY_EVENTS:]
    # Kafka Connect's S3/GCS sink names a file <topic>+<partition>+<start offset>.json
    now = time.time()
    files = [
        landing / f"{TOPIC}+0+{0:010d}.json",
        landing / f"{TOPIC}+0+{len(first):010d}.json",
    ]
    _write_lines(files[0], first, now - 2)
    _write_lines(files[1], [_SCHEMA_CHANGE, *second], now - 1)
    written = list(files)
    for script in sorted((resource_dir("sql") / "examples").glob("*.sql")):
        text = script.read_text(encoding="utf-8").replace(EXAMPLES_DIR_DEFAULT, str(directory))
        target = directory / script.name
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


@click.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": ["-h", "--help"],
    }
)
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help=(
        "Write the docs' example data and scripts to DIR (the docs use "
        f"{EXAMPLES_DIR_DEFAULT}) instead of running the demo."
    ),
)
@click.pass_context
def main(ctx: click.Context, data: Path | None) -> None:
    """Run sql/demo.sql (a table, a few commits, its table_health and help()); other options go
    to sparkext-sql (e.g. --master local[2])."""
    if data is not None:
        if ctx.args:
            raise click.UsageError(f"--data takes no other options, got {' '.join(ctx.args)}.")
        written = write_examples(data)
        root = data.expanduser().resolve()
        for path in written:
            click.echo(f"wrote {path.relative_to(root)}")
        click.echo(
            f"Example data in {root}; run the scripts in order, e.g. "
            f"sparkext-sql -f {root / '01_quickstart.sql'}"
        )
        return

    script = resource_dir("sql") / "demo.sql"
    cli.main(["--echo", "-f", str(script), *ctx.args], prog_name="sparkext-demo")


if __name__ == "__main__":
    main()
