"""sparkext-sql: a spark-sql-like shell that also speaks CALL sparkext.* and FROM sparkext.*().

Libraries: click (options), prompt_toolkit (line editing, history, multi-line input),
tabulate (aligned tables), rich (a progress spinner on a terminal).

Floor: top (command line).
"""

from __future__ import annotations

import importlib
import itertools
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from sparkext import times
from sparkext.cli.common import error_message, fail, overrides_of, parse_conf, start_session
from sparkext.cli.completion import shell_completer
from sparkext.cli.output import FORMATS, write
from sparkext.cli.progress import Progress
from sparkext.errors import RoutineReportedFailure, SqlParseError, did_you_mean
from sparkext.procedures.registry import ROUTINES
from sparkext.routing.router import execute, failure_column
from sparkext.routing.tokens import is_complete, split_statements, tokenize
from sparkext.security.caller import entered
from sparkext.spark import cancellation
from sparkext.spark.cancellation import Runner, StatementCancelled
from sparkext.spark.cancellation import Statement as Running
from sparkext.spark.session import ICEBERG_JAR, active_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.routing.tokens import Statement

HISTORY_FILE = Path(os.environ.get("SPARKEXT_HISTORY", Path.home() / ".sparkext_sql_history"))
PROMPT, CONTINUATION = "sparkext-sql> ", "            > "
EXIT_CANCELLED = 130  # as a shell reports a command ended by SIGINT
_parse_conf = parse_conf  # kept for callers of the old name
__all__ = ["Shell", "cli", "error_message", "main", "vertical_terminators"]


def vertical_terminators(text: str) -> tuple[str, set[int]]:
    r"""Replace each ``\G`` that ends a statement (outside strings and comments) by ``;``, as
    MySQL and beeline read it; return the new text (same offsets) and where those ``;`` are.

    >>> vertical_terminators("SELECT '\\\\G' AS g\\G SELECT 2;")
    ("SELECT '\\\\G' AS g;  SELECT 2;", {17})
    """
    from sqlglot.tokens import TokenType

    if "\\G" not in text:
        return text, set()
    try:
        tokens = tokenize(text)
    except SqlParseError:
        return text, set()
    positions = {
        token.start
        for token, after in itertools.pairwise(tokens)
        if token.token_type == TokenType.BACKSLASH
        and after.text == "G"
        and after.start == token.end + 1
    }
    chars = list(text)
    for position in positions:
        chars[position : position + 2] = [";", " "]
    return "".join(chars), positions


def terminal_width() -> int | None:
    """The width aligned tables are fitted to: the terminal's (``COLUMNS`` overrides it, as
    for ``ls``), None when standard output is not a terminal and ``COLUMNS`` is unset (a file
    or a pipe keeps whole lines)."""
    import shutil

    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def _terminator(statement: Statement) -> int:
    """Offset of the character that ends ``statement`` (its ``;``), or the text's end."""
    source, end = statement.source, statement.start + len(statement.text)
    while end < len(source) and source[end].isspace():
        end += 1
    return end


class _Failures:
    """Counts the result rows of a routine that report a failure in a column of their own."""

    def __init__(self, routine: str, column: str):
        self.routine, self.column, self.count = routine, column, 0

    def counted(self, rows, index: int):
        for row in rows:
            if row[index] is not None:
                self.count += 1
            yield row

    def raise_if_any(self) -> None:

        if self.count:
            rows = "row" if self.count == 1 else "rows"
            raise RoutineReportedFailure(
                f"sparkext.{self.routine} reported {self.count} failed {rows} (its "
                f"'{self.column}' column says why); the rows without one report work that was done."
            )


class Shell:
    """Runs SQL text statement by statement and prints each result.

    Each statement runs under a :class:`~sparkext.spark.cancellation.Runner`: Ctrl-C cancels its
    Spark jobs (one job group per statement) and what it would still commit, prints one line
    and leaves the session usable.
    """

    def __init__(
        self,
        spark: SparkSession,
        output_format: str = "table",
        out: TextIO | None = None,
        err: TextIO | None = None,
        verbose: bool = False,
        echo: bool = False,
        owns_session: bool = False,
        width: int | None = None,
    ):
        self.spark = spark
        self.output_format = output_format
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.verbose = verbose
        self.echo = echo
        self.runner = Runner(spark, owns_session=owns_session)
        self.width = width  # the terminal's: aligned tables are fitted to it
        self.cancelled = False

    def _show(
        self, frame, progress: Progress, quiet: bool, fmt: str, failures: _Failures | None
    ) -> int:
        """Print ``frame``; the spinner is cleared first so it never shares a line with it."""
        cancellation.raise_if_cancelled()  # e.g. a stopped ingest_cdc: its totals are partial
        columns = frame.columns
        if failures is not None and failures.column not in columns:
            failures = None
        if not columns or (quiet and failures is None):
            progress.stop()
            return 0
        frame = times.wall_clock_frame(frame)  # timestamps in the session zone, as spark-sql
        # streamed in json/csv: the first rows print before the last are read
        whole = fmt in ("table", "vertical") or quiet
        rows = frame.collect() if whole else frame.toLocalIterator()
        progress.stop()
        if failures is not None:
            rows = failures.counted(rows, columns.index(failures.column))
        if quiet:
            for _ in rows:
                pass
            return 0
        return write(columns, rows, fmt, self.out, self.width)

    def run_statement(
        self, statement: Statement, quiet: bool = False, fmt: str | None = None
    ) -> None:

        if self.echo:
            self.out.write(f"\n{statement.text};\n")
        started = time.perf_counter()
        running = Running()
        # A shell that owns its session shows every running stage: a streaming query's
        # batches (ingest_cdc) run in the query's own job group, not the statement's.
        group = None if self.runner.owns_session else running.group
        progress = Progress(self.err, self.spark, group)

        reporting = failure_column(statement)
        failures = _Failures(*reporting) if reporting else None

        def work() -> int:

            with entered(self.spark, "shell"):
                frame = execute(self.spark, statement, progress)
            return self._show(frame, progress, quiet, fmt or self.output_format, failures)

        try:
            count = self.runner.run(work, statement.text, running, on_cancel=progress.stop)
        finally:
            progress.stop()
        self.out.flush()
        if not quiet:
            elapsed = time.perf_counter() - started
            self.err.write(f"Time taken: {elapsed:.3f} seconds, Fetched {count} row(s)\n")
            self.err.flush()
        if failures is not None:
            failures.raise_if_any()

    def run_text(
        self, text: str, quiet: bool = False, source: str | None = None, setup: bool = False
    ) -> bool:
        """Run every statement; stop at the first error or a Ctrl-C and return False.

        ``source`` (a file name) prefixes parse errors, so their line and column say which
        file; with ``setup`` (an ``-i`` file, run quietly) every error names it.
        """

        self.cancelled = False
        try:
            text, vertical = vertical_terminators(text)
            for statement in split_statements(text):
                fmt = "vertical" if _terminator(statement) in vertical else None
                self.run_statement(statement, quiet, fmt)
        except StatementCancelled as cancelled:
            self.cancelled = True
            self.err.write(f"{cancelled}\n")
            self.err.flush()
            return False
        except KeyboardInterrupt:  # between two statements: the ones before it ran whole
            self.cancelled = True
            self.err.write("Cancelled; the statements before this point ran.\n")
            self.err.flush()
            return False
        except Exception as error:
            self.err.write(error_message(error, self.verbose, source, always=setup) + "\n")
            self.err.flush()
            return False
        return True

    def interactive(self, input=None, output=None) -> None:
        """Read statements ended by ';' (or ``\\G``) with line editing and history until
        quit/exit/Ctrl-D."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("enter")
        def _enter(event) -> None:
            buffer = event.current_buffer
            text = buffer.text.strip()
            done = is_complete(vertical_terminators(text)[0])
            if not text or done or text.lower() in ("quit", "exit"):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(HISTORY_FILE)),
            multiline=True,
            key_bindings=bindings,
            prompt_continuation=CONTINUATION,
            completer=shell_completer(self.spark, ROUTINES),  # Tab: routines, parameters, tables
            complete_while_typing=False,
            input=input,
            output=output,
        )
        while True:
            try:
                text = prompt.prompt(PROMPT)
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if text.strip().rstrip(";").strip().lower() in ("quit", "exit"):
                break
            if text.strip():
                self.run_text(text)


def _use_database(spark: SparkSession, database: str) -> None:
    from sqlglot import exp

    statement = exp.Use(this=exp.to_table(database)).sql(dialect="spark")
    execute(spark, split_statements(statement)[0])


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import version

    iceberg = ICEBERG_JAR.rsplit("-", 1)[-1].removesuffix(".jar")
    click.echo(f"sparkext {version('sparkext')} (PySpark {version('pyspark')}, Iceberg {iceberg})")
    ctx.exit()


# Each subcommand's module, loaded when the subcommand runs (or --help lists it): the shell's
# start-up pays for the shell only, not for the Thrift server's or the streaming runner's.
SUBCOMMANDS = {
    "backfill": "sparkext.cli.streaming",
    "stream": "sparkext.cli.streaming",
    "optimize-service": "sparkext.cli.service",
    "report": "sparkext.cli.service",
    "serve": "sparkext.cli.serve",
}


class _Commands(click.Group):
    """The shell itself plus subcommands, each loaded when it is asked for; a mistyped
    subcommand gets a suggestion and SQL typed without -e gets told to use -e."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in SUBCOMMANDS and cmd_name not in self.commands:
            module = importlib.import_module(SUBCOMMANDS[cmd_name])
            self.add_command(module.COMMANDS[cmd_name], cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]):

        name = args[0] if args else ""
        if name and name not in self.commands and name not in SUBCOMMANDS:
            if " " in name.strip() or name.rstrip().endswith(";"):
                ctx.fail(f"'{name}' looks like SQL; run it with -e: sparkext-sql -e \"{name}\"")
            choices = ", ".join(self.list_commands(ctx))
            ctx.fail(
                f"No such command '{name}'{did_you_mean(name, self.list_commands(ctx))}; "
                f"commands: {choices} (SQL goes in -e or -f)."
            )
        return super().resolve_command(ctx, args)


@click.group(
    cls=_Commands,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("-e", "execute_text", metavar="SQL", help="Run the SQL text and exit.")
@click.option("-f", "file", type=click.Path(dir_okay=False), help="Run the SQL file and exit.")
@click.option("-i", "init", type=click.Path(dir_okay=False), help="Run this file first, quietly.")
@click.option("--conf", "confs", multiple=True, metavar="K=V", help="A Spark setting; repeatable.")
@click.option("--master", help="Spark master URL (default from conf/spark-defaults.conf).")
@click.option("--database", help="Current database (namespace) to start in, e.g. lake.db.")
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="How results are printed (vertical: one column per line, also a statement ended by \\G).",
)
@click.option("--echo", is_flag=True, help="Print each statement before its result.")
@click.option(
    "--verbose", is_flag=True, help="Show Spark's warnings and full stack traces on errors."
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Print the versions of sparkext, PySpark and Iceberg and exit.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    execute_text: str | None,
    file: str | None,
    init: str | None,
    confs: tuple[str, ...],
    master: str | None,
    database: str | None,
    output_format: str,
    echo: bool,
    verbose: bool,
) -> None:
    """A spark-sql-like shell for PySpark + Iceberg with sparkext's procedures and functions.

    Without -e or -f it reads statements interactively (ended by ';', or by \\G for vertical
    output; Ctrl-C cancels a running statement), or from standard input when that is not a
    terminal. The commands below run streaming job files.
    """
    if ctx.invoked_subcommand is not None:
        if execute_text is not None or file is not None or init is not None:
            raise click.UsageError(f"-e, -f and -i do not apply to '{ctx.invoked_subcommand}'.")
        return
    if execute_text is not None and file is not None:
        raise click.UsageError("Give -e or -f, not both.")
    try:
        script = Path(file).read_text(encoding="utf-8") if file else None
        init_text = Path(init).read_text(encoding="utf-8") if init else None
    except OSError as error:
        click.echo(f"Error: cannot read '{error.filename}': {error.strerror}.", err=True)
        sys.exit(1)
    interactive = execute_text is None and script is None and sys.stdin.isatty()

    owns_session = active_session() is None
    overrides = overrides_of(confs, master)  # a malformed --conf is a usage error (status 2)
    try:  # on a terminal, -e and -f say what starts too (as the subcommands do)
        spark = start_session(overrides, verbose, announce=interactive or sys.stderr.isatty())
    except KeyboardInterrupt:
        click.echo("Cancelled while Spark was starting.", err=True)
        sys.exit(EXIT_CANCELLED)
    except Exception as error:
        fail(error, verbose)
    if owns_session and threading.current_thread() is threading.main_thread():
        # From here on Ctrl-C is a KeyboardInterrupt wherever it lands; PySpark's handler
        # would call the JVM from inside a py4j call of this thread ("reentrant call").
        signal.signal(signal.SIGINT, signal.default_int_handler)
    shell = Shell(
        spark,
        output_format,
        verbose=verbose,
        echo=echo,
        owns_session=owns_session,
        width=terminal_width(),
    )
    if init_text is not None and not shell.run_text(init_text, quiet=True, source=init, setup=True):
        sys.exit(EXIT_CANCELLED if shell.cancelled else 1)
    if database:
        try:
            shell.runner.run(lambda: _use_database(spark, database), f"USE {database}")
        except StatementCancelled as cancelled:
            click.echo(str(cancelled), err=True)
            sys.exit(EXIT_CANCELLED)
        except Exception as error:
            fail(error, verbose)
    text = execute_text if execute_text is not None else script
    if text is None and not sys.stdin.isatty():
        text = sys.stdin.read()
    if text is not None:
        if shell.run_text(text, source=file):
            sys.exit(0)
        sys.exit(EXIT_CANCELLED if shell.cancelled else 1)
    if interactive:
        click.echo(
            "End statements with ';' (or \\G for vertical output); Ctrl-C cancels a running "
            "statement; CALL sparkext.help(); lists procedures; quit; leaves.",
            err=True,
        )
    shell.interactive()


def main() -> None:
    cli(prog_name="sparkext-sql")


if __name__ == "__main__":
    main()
