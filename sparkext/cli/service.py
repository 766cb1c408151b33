"""``sparkext-sql optimize-service``: the optimisation service in the foreground.

Library: click (options), rich (the status line on a terminal). One log line per job on stdout;
the status line (tables, queue, running jobs, counts) on stderr when it is a terminal. Ctrl-C
stops taking jobs and lets the running ones finish; a second Ctrl-C cancels them.

Floor: top (command line).
"""

from __future__ import annotations

import signal
import sys
import threading

import click

import sparkext
from sparkext.cli.common import fail, overrides_of
from sparkext.cli.progress import Progress
from sparkext.cli.streaming import EXIT_CANCELLED, cli_session, inherited_options, spark_options
from sparkext.iceberg.catalog import parse_patterns
from sparkext.service.service import serve


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@spark_options
@click.option(
    "--tables",
    required=True,
    metavar="PATTERNS",
    help="Tables to serve: comma-separated names or patterns, e.g. 'lake.ods.*,lake.dw.orders'.",
)
@click.option("--once", is_flag=True, help="Do what is due now, then exit.")
@click.option("--max-concurrent", default=2, show_default=True, help="Jobs at once, service-wide.")
@click.option("--poll-interval", default="10 seconds", show_default=True, metavar="DURATION")
@click.option(
    "--fresh-window",
    default="1 hour",
    show_default=True,
    metavar="DURATION",
    help="Partitions with commits this recent go first.",
)
@click.option("--lease-ttl", default="5 minutes", show_default=True, metavar="DURATION")
@click.option("--log-table", help="Run log table (default: <catalog>.sparkext.optimize_log).")
@click.option(
    "--maintenance/--no-maintenance",
    default=True,
    show_default=True,
    help="Also run each table's maintenance policy (sparkext.maintenance.*).",
)
@click.option(
    "--lag-alert",
    metavar="DURATION",
    help="Log and show CDC tables further behind their source than this, e.g. '15 minutes' "
    "(a table's property sparkext.cdc.lag-alert overrides it).",
)
def optimize_service(
    confs, master, verbose, tables, once, max_concurrent, poll_interval, fresh_window,
    lease_ttl, log_table, maintenance, lag_alert,
) -> None:  # fmt: skip
    """Keep many tables optimised and maintained: a commit-driven priority queue, one job per
    table at a time, a lease per table across processes, a run log in SQL."""

    confs, master, verbose = inherited_options(confs, master, verbose)
    try:  # bad options are refused before Spark starts
        # no session yet: serve() only checks the options here (the Service is not run)
        serve(None, tables, max_concurrent=max_concurrent, poll_interval=poll_interval,  # type: ignore[arg-type]
              fresh_window=fresh_window, lease_ttl=lease_ttl, lag_alert=lag_alert)  # fmt: skip
    except Exception as error:
        fail(error, verbose)
    spark = cli_session(overrides_of(confs, master), verbose)
    status = _Status()
    service = serve(
        spark, tables, once=once, max_concurrent=max_concurrent, poll_interval=poll_interval,
        fresh_window=fresh_window, lease_ttl=lease_ttl, log_table=log_table,
        maintenance=maintenance, log=status.line, lag_alert=lag_alert,
    )  # fmt: skip
    service.status = status.update
    failures: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            service.run()
        except BaseException as error:
            failures.append(error)
        finally:
            done.set()

    signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=work, name="sparkext-optimize-service", daemon=True).start()
    click.echo(
        f"optimize-service {service.owner}: {', '.join(service.settings.patterns)}; run log "
        f"{service.log_table}; Ctrl-C stops.",
        err=True,
    )
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        running = len(service.running())
        status.line(f"stopping: waiting for {running} running job(s); Ctrl-C again cancels them")
        service.stop()
        try:
            while not done.wait(0.5):
                pass
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            service.cancel()
            done.wait()
            status.close()
            click.echo("cancelled; uncommitted work discarded.", err=True)
            sys.exit(EXIT_CANCELLED)
    status.close()
    if failures:
        fail(failures[0], verbose)
    s = service.stats
    click.echo(
        f"done: {s.cycles} cycles, {s.jobs_ok} jobs ok, {s.jobs_failed} failed, {s.jobs_busy} "
        "busy.",
        err=True,
    )
    if once and s.jobs_failed:  # cron and CI see that something failed (the log says what)
        sys.exit(1)


class _Status:
    """A rich status line on a terminal (stderr); plain job lines on stdout either way."""

    def __init__(self) -> None:
        self._live = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.status import Status

            self._live = Status("starting…", console=Console(stderr=True))
            self._live.start()
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            if self._live is not None:
                self._live.console.print(text, markup=False, highlight=False)
            else:
                click.echo(text)

    def update(self, text: str) -> None:
        if self._live is not None:
            self._live.update(text)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


COMMANDS = {"optimize-service": optimize_service}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@spark_options
@click.option("--tables", required=True, metavar="PATTERNS", help="e.g. 'lake.ods.*,lake.dw.t'.")
@click.option(
    "--out", default="report.html", show_default=True, type=click.Path(dir_okay=False),
    help="The HTML page to write (self-contained: opens offline).",
)  # fmt: skip
@click.option("--log-table", help="Run log table (default: <catalog>.sparkext.optimize_log).")
@click.option("--title", default="sparkext table health", show_default=True)
def report(confs, master, verbose, tables, out, log_table, title) -> None:
    """Write one HTML page: per table and partition, files, small files, delete files,
    optimised share, health score and their trends, the worst partitions first with their fix."""

    confs, master, verbose = inherited_options(confs, master, verbose)
    try:
        parse_patterns(tables)
    except Exception as error:
        fail(error, verbose)
    spark = cli_session(overrides_of(confs, master), verbose)

    progress = Progress(sys.stderr, spark, None)  # a spinner, or a line every 10 s past 10 s
    try:
        path = sparkext.health_report(tables, out=out, log_table=log_table, title=title,
                                      spark=spark, progress=progress)  # fmt: skip
    except Exception as error:
        progress.stop()
        fail(error, verbose)
    progress.stop()
    click.echo(f"wrote {path}", err=True)


COMMANDS["report"] = report
