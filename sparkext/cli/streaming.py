"""``sparkext-sql backfill`` and ``sparkext-sql stream``: one job file, two modes.

sparkext-sql backfill job.sql --from '2024-01-01' --to '2024-01-02' [--dry-run]
sparkext-sql stream job.sql --checkpoint DIR [--available-now]

Floor: top (command line).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path

import click

from sparkext import times
from sparkext.cli.common import fail, overrides_of, start_session
from sparkext.cli.output import FORMATS, write
from sparkext.cli.progress import Progress
from sparkext.spark.cancellation import Runner, Statement, StatementCancelled
from sparkext.streaming import stream as stream_runner
from sparkext.streaming.backfill import run_backfill
from sparkext.streaming.job import StreamingSqlError, check_syntax, parse_duration
from sparkext.streaming.rewrite import parse_time

_SPARK = [
    click.option(
        "--conf", "confs", multiple=True, metavar="K=V", help="A Spark setting; repeatable."
    ),
    click.option("--master", help="Spark master URL (default from conf/spark-defaults.conf)."),
    click.option("--verbose", is_flag=True, help="Show Spark's logs and full stack traces."),
]
_COMMON = [click.argument("job", type=click.Path(dir_okay=False)), *_SPARK]


def _common(function):
    for decorator in reversed(_COMMON):
        function = decorator(function)
    return function


def spark_options(function):
    """--conf, --master, --verbose (the subcommands without a job file)."""
    for decorator in reversed(_SPARK):
        function = decorator(function)
    return function


def inherited_options(confs: tuple[str, ...], master: str | None, verbose: bool):
    """Options given before the command (``sparkext-sql --conf k=v stream job.sql``) count too."""
    parent = click.get_current_context().parent
    params = parent.params if parent is not None else {}
    return (
        (*params.get("confs", ()), *confs),
        master or params.get("master"),
        verbose or bool(params.get("verbose")),
    )


EXIT_CANCELLED = 130


def cli_session(overrides: dict[str, str], verbose: bool):
    """Start Spark; a failure is one line (status 1), a Ctrl-C while it starts another (130)."""
    try:
        return start_session(overrides, verbose, announce=sys.stderr.isatty())
    except KeyboardInterrupt:
        click.echo("Cancelled while Spark was starting.", err=True)
        sys.exit(EXIT_CANCELLED)
    except Exception as error:
        fail(error, verbose)


_COMMITTED = re.compile(r"\(snapshot \d+\)|no commit")


def _check(text: str, job: str, verbose: bool) -> None:
    """Refuse a job whose text does not parse before Spark starts (that takes 10–30 s)."""

    try:
        check_syntax(text)
    except Exception as error:
        fail(error, verbose, job)


def check_options(
    start: str | None = None,
    end: str | None = None,
    lookup_as_of: str | None = None,
    interval: str | None = None,
) -> None:
    """Refuse a malformed option (a time, ``--lookup-as-of``, ``--interval``) before Spark
    starts, in the sentence the run would give after it: a typo costs a second, not 30.

    The times are read here only for their form and order; the run reads them again in the
    session time zone.

    >>> check_options("2026-11-21", "2026-11-20")
    Traceback (most recent call last):
    ...
    sparkext.streaming.job.StreamingSqlError: --from 2026-11-21 00:00:00 is not before --to \
2026-11-20 00:00:00; swap --from and --to.
    """

    begin, finish = parse_time(start, "--from"), parse_time(end, "--to")
    # Two wall clocks compare alike in every zone; a time with an offset waits for the session's.
    naive = all(
        t is not None and datetime.fromisoformat(t.strip()).tzinfo is None for t in (start, end)
    )
    if naive and begin is not None and finish is not None and begin >= finish:
        raise StreamingSqlError(
            f"--from {begin} is not before --to {finish}; swap --from and --to."
        )
    if lookup_as_of is not None and lookup_as_of.lower() not in ("end", "latest"):
        try:
            datetime.fromisoformat(lookup_as_of)
        except ValueError:
            raise StreamingSqlError(
                f"--lookup-as-of '{lookup_as_of}' is not 'end', 'latest' or a time such as "
                "'2026-11-20 00:00:00'."
            ) from None
    if interval is not None:
        parse_duration(interval)


def _check_options(verbose: bool, **options: str | None) -> None:
    try:
        check_options(**options)
    except Exception as error:
        fail(error, verbose)


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

    confs, master, verbose = inherited_options(confs, master, verbose)
    text = _read(job)
    _check(text, job, verbose)
    _check_options(verbose, start=start, end=end, lookup_as_of=lookup_as_of)
    spark = cli_session(overrides_of(confs, master), verbose)

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
    confs, master, verbose = inherited_options(confs, master, verbose)
    text = _read(job)
    _check(text, job, verbose)
    _check_options(verbose, start=start_from, interval=interval)
    spark = cli_session(overrides_of(confs, master), verbose)

    def start():
        return stream_runner.run_stream(
            spark,
            text,
            checkpoint,
            available_now,
            interval,
            progress=lambda m: starting.permanent(m),  # above the spinner, or as is
            start_from=start_from,
            dimension_state=dimension_state,
        )

    # Starting takes seconds of py4j calls (tables, plans, the queries): they run on the
    # Runner's worker, so a Ctrl-C meanwhile cancels the start (and stops any query it started)
    # in one line instead of landing inside a py4j call of this thread. A micro-batch that
    # committed meanwhile did so with its checkpoint, as when a running stream is stopped.
    signal.signal(signal.SIGINT, signal.default_int_handler)  # never PySpark's (see shell)

    starting = Progress(sys.stderr, spark, None)  # starting can take a while: never silent
    starting("starting the stream")
    try:
        run = Runner(spark, owns_session=True).run(start, f"sparkext-sql stream {job}")
    except StatementCancelled:
        starting.stop()
        click.echo(
            f"Cancelled while the stream was starting; checkpoint intact in {checkpoint}.",
            err=True,
        )
        sys.exit(EXIT_CANCELLED)
    except Exception as error:
        starting.stop()
        fail(error, verbose, job)
    starting.stop()
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
