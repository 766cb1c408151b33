"""``sparkext-sql backfill`` and ``sparkext-sql stream``: one job file, two modes.

sparkext-sql backfill job.sql --from '2024-01-01' --to '2024-01-02' [--dry-run]
sparkext-sql stream job.sql --checkpoint DIR [--available-now]
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from pathlib import Path

import click

from sparkext import times
from sparkext.cli.common import fail, overrides_of, start_session
from sparkext.cli.output import FORMATS, write

_COMMON = [
    click.argument("job", type=click.Path(dir_okay=False)),
    click.option(
        "--conf", "confs", multiple=True, metavar="K=V", help="A Spark setting; repeatable."
    ),
    click.option("--master", help="Spark master URL (default from conf/spark-defaults.conf)."),
    click.option("--verbose", is_flag=True, help="Show Spark's logs and full stack traces."),
]


def _common(function):
    for decorator in reversed(_COMMON):
        function = decorator(function)
    return function


def _inherited(confs: tuple[str, ...], master: str | None, verbose: bool):
    """Options given before the command (``sparkext-sql --conf k=v stream job.sql``) count too."""
    parent = click.get_current_context().parent
    params = parent.params if parent is not None else {}
    return (
        (*params.get("confs", ()), *confs),
        master or params.get("master"),
        verbose or bool(params.get("verbose")),
    )


def _session(overrides: dict[str, str], verbose: bool):
    return start_session(overrides, verbose, announce=sys.stderr.isatty())


EXIT_CANCELLED = 130
_COMMITTED = re.compile(r"\(snapshot \d+\)|no commit")


def _check(text: str, job: str, verbose: bool) -> None:
    """Refuse a job whose text does not parse before Spark starts (that takes 10–30 s)."""
    try:
        from sparkext.streaming.job import check_syntax
    except ImportError:  # pragma: no cover - older checkouts
        return
    try:
        check_syntax(text)
    except Exception as error:
        fail(error, verbose, job)


def _read(job: str) -> str:
    try:
        return Path(job).read_text(encoding="utf-8")
    except OSError as error:
        click.echo(f"Error: cannot read '{job}': {error.strerror}.", err=True)
        sys.exit(1)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_common
@click.option(
    "--from",
    "start",
    required=True,
    metavar="TIME",
    help="Range start (inclusive), session time zone.",
)
@click.option("--to", "end", required=True, metavar="TIME", help="Range end (exclusive).")
@click.option("--dry-run", is_flag=True, help="Print the batch SQL and exit without running it.")
@click.option(
    "--lookup-as-of",
    default="end",
    show_default=True,
    metavar="end|latest|TIME",
    help="Which state of a dimension a processing-time lookup join reads.",
)
@click.option("--output-format", type=click.Choice(FORMATS), default="table", show_default=True)
def backfill(job, confs, master, verbose, start, end, dry_run, lookup_as_of, output_format) -> None:
    """Run a streaming job file as bounded batch SQL over [--from, --to)."""
    from sparkext.cancellation import Runner, Statement, StatementCancelled
    from sparkext.cli.progress import Progress

    confs, master, verbose = _inherited(confs, master, verbose)
    text = _read(job)
    _check(text, job, verbose)
    overrides = overrides_of(confs, master)
    try:
        spark = _session(overrides, verbose)
    except Exception as error:
        fail(error, verbose)
    from sparkext.streaming.backfill import run_backfill

    signal.signal(signal.SIGINT, signal.default_int_handler)  # never PySpark's (see shell)
    running = Statement()
    progress = Progress(sys.stderr, spark, None)

    def report(line: str) -> None:
        if _COMMITTED.search(line):  # a sink's commit: a line that stays
            progress.permanent(line)
        else:
            progress(line)

    def work():
        plan, results = run_backfill(spark, text, start, end, dry_run, lookup_as_of, report)
        selected = [  # a bare SELECT runs here, where Ctrl-C can cancel it
            (times.wall_clock_frame(r.frame).columns, times.wall_clock_frame(r.frame).collect())
            for r in results
            if r.frame is not None
        ]
        return plan, results, selected

    try:
        plan, results, selected = Runner(spark, owns_session=True).run(
            work, f"sparkext-sql backfill {job}", running, on_cancel=progress.stop
        )
    except StatementCancelled as cancelled:
        progress.stop()
        click.echo(str(cancelled), err=True)
        sys.exit(EXIT_CANCELLED)
    except Exception as error:
        progress.stop()
        fail(error, verbose, job)
    progress.stop()
    if dry_run:
        click.echo(plan.script(), nl=False)
        return
    for query in plan.queries:
        for note in query.notes:
            click.echo(f"Note: {note}", err=True)
    rows = [
        (r.sink, r.snapshot_id, r.rows_added, r.rows_deleted, round(r.seconds, 3))
        for r in results
        if r.sink is not None
    ]
    if rows:
        write(
            ["sink", "snapshot_id", "rows_added", "rows_deleted", "seconds"],
            rows,
            output_format,
            sys.stdout,
        )
    for columns, values in selected:  # timestamps in the session zone, as the shell prints
        write(columns, values, output_format, sys.stdout)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_common
@click.option(
    "--checkpoint",
    required=True,
    help="Checkpoint directory: a path or a URI (file://, s3://, hdfs://, …).",
)
@click.option("--available-now", is_flag=True, help="Process what the sources hold now, then stop.")
@click.option(
    "--from",
    "start_from",
    metavar="TIME",
    help="Emit only results after TIME (e.g. where a backfill ended); needed for a sink with rows.",
)
@click.option(
    "--interval",
    metavar="DURATION",
    help="Trigger interval (default: the 'monitor-interval' hint, else 10 s).",
)
@click.option(
    "--dimension-state/--no-dimension-state",
    default=True,
    show_default=True,
    help="Keep temporal-join dimensions in executor memory, brought forward by their changes "
    "each micro-batch (--no-dimension-state: read them again every micro-batch).",
)
def stream(
    job, confs, master, verbose, checkpoint, available_now, start_from, interval, dimension_state
) -> None:
    """Run a streaming job file continuously; Ctrl-C stops it with its checkpoint intact."""
    confs, master, verbose = _inherited(confs, master, verbose)
    text = _read(job)
    _check(text, job, verbose)
    overrides = overrides_of(confs, master)
    try:
        from sparkext.streaming.stream import run_stream

        spark = _session(overrides, verbose)
        run = run_stream(
            spark,
            text,
            checkpoint,
            available_now,
            interval,
            progress=lambda m: click.echo(m, err=True),
            start_from=start_from,
            dimension_state=dimension_state,
        )
    except Exception as error:
        fail(error, verbose, job)
    click.echo(f"streaming; checkpoint {run.checkpoint}; Ctrl-C stops.", err=True)
    # The wait runs on a thread of its own: a signal must not land inside a py4j call of this
    # thread (PySpark's handler would call the JVM from inside it: "reentrant call").
    failures: list[BaseException] = []
    done = threading.Event()

    def wait() -> None:
        try:
            run.wait()
        except BaseException as error:
            failures.append(error)
        finally:
            done.set()

    threading.Thread(target=wait, name="sparkext-stream-wait", daemon=True).start()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping: a second Ctrl-C waits too
        run.stop()
        click.echo(f"stopped; checkpoint intact in {run.checkpoint}.", err=True)
        return
    if failures:
        fail(failures[0], verbose, job)


COMMANDS = {"backfill": backfill, "stream": stream}
