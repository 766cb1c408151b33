"""sparkext-sql: a spark-sql-like shell that also speaks CALL sparkext.* and FROM sparkext.*().

Libraries: click (options), prompt_toolkit (line editing, history, multi-line input),
tabulate (aligned tables), rich (a progress spinner on a terminal).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from sparkext import times
from sparkext.cli.output import FORMATS, write
from sparkext.errors import SparkextError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkext.routing.tokens import Statement

HISTORY_FILE = Path(os.environ.get("SPARKEXT_HISTORY", Path.home() / ".sparkext_sql_history"))
PROMPT, CONTINUATION = "sparkext-sql> ", "            > "


def error_message(error: BaseException, verbose: bool) -> str:
    """One line for the user; the Python and Java stack traces only with ``verbose``."""
    from sparkext.iceberg.errors import translate

    translated = error if isinstance(error, SparkextError) else translate(error)
    if translated is not None:
        text = f"Error: {translated}"
    else:
        text = (
            f"Error: internal error {type(error).__name__}: {error}; "
            "rerun with --verbose for the stack trace and report it."
        )
    if verbose:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        text = f"{trace}\n{text}"
    return text


class Shell:
    """Runs SQL text statement by statement and prints each result."""

    def __init__(
        self,
        spark: SparkSession,
        output_format: str = "table",
        out: TextIO | None = None,
        err: TextIO | None = None,
        verbose: bool = False,
        echo: bool = False,
    ):
        self.spark = spark
        self.output_format = output_format
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.verbose = verbose
        self.echo = echo

    @contextmanager
    def _progress(self) -> Iterator:
        if not self.err.isatty():
            yield lambda message: None
            return
        from rich.console import Console

        with Console(file=self.err).status("running…") as status:
            yield lambda message: status.update(message)

    def show(self, frame: DataFrame, quiet: bool = False) -> int:
        columns = frame.columns
        if not columns or quiet:
            return 0
        frame = times.wall_clock_frame(frame)  # timestamps in the session zone, as spark-sql
        rows = frame.toLocalIterator() if self.output_format != "table" else frame.collect()
        return write(columns, rows, self.output_format, self.out)

    def run_statement(self, statement: Statement, quiet: bool = False) -> None:
        from sparkext.routing.router import execute

        if self.echo:
            self.out.write(f"\n{statement.text};\n")
        started = time.perf_counter()
        with self._progress() as progress:
            frame = execute(self.spark, statement, progress)
            count = self.show(frame, quiet)
        self.out.flush()
        if not quiet:
            elapsed = time.perf_counter() - started
            self.err.write(f"Time taken: {elapsed:.3f} seconds, Fetched {count} row(s)\n")
            self.err.flush()

    def run_text(self, text: str, quiet: bool = False) -> bool:
        """Run every statement; stop at the first error and return False."""
        from sparkext.routing.tokens import split_statements

        try:
            for statement in split_statements(text):
                self.run_statement(statement, quiet)
        except Exception as error:
            self.err.write(error_message(error, self.verbose) + "\n")
            self.err.flush()
            return False
        return True

    def interactive(self, input=None, output=None) -> None:
        """Read statements ended by ';' with line editing and history until quit/exit/Ctrl-D."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        from sparkext.routing.tokens import is_complete

        bindings = KeyBindings()

        @bindings.add("enter")
        def _enter(event) -> None:
            buffer = event.current_buffer
            text = buffer.text.strip()
            if not text or is_complete(text) or text.lower() in ("quit", "exit"):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        prompt = PromptSession(
            history=FileHistory(str(HISTORY_FILE)),
            multiline=True,
            key_bindings=bindings,
            prompt_continuation=CONTINUATION,
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


def _parse_conf(values: tuple[str, ...]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"'{item}' is not key=value", param_hint="--conf")
        conf[key.strip()] = value.strip()
    return conf


def _use_database(spark: SparkSession, database: str) -> None:
    from sqlglot import exp

    from sparkext.routing.router import execute
    from sparkext.routing.tokens import split_statements

    statement = exp.Use(this=exp.to_table(database)).sql(dialect="spark")
    execute(spark, split_statements(statement)[0])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
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
    help="How results are printed.",
)
@click.option("--echo", is_flag=True, help="Print each statement before its result.")
@click.option("--verbose", is_flag=True, help="Show Spark's logs and full stack traces.")
def cli(
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

    Without -e or -f it reads statements interactively (ended by ';'), or from standard input
    when that is not a terminal.
    """
    if execute_text is not None and file is not None:
        raise click.UsageError("Give -e or -f, not both.")
    try:
        script = Path(file).read_text(encoding="utf-8") if file else None
        init_text = Path(init).read_text(encoding="utf-8") if init else None
    except OSError as error:
        click.echo(f"Error: cannot read '{error.filename}': {error.strerror}.", err=True)
        sys.exit(1)
    overrides: dict[str, str] = _parse_conf(confs)
    if master:
        overrides["spark.master"] = master
    if verbose:
        os.environ["SPARKEXT_LOG_LEVEL"] = "WARN"
    try:
        import sparkext
        from sparkext.iceberg.errors import quiet_task_failures

        spark = sparkext.session(**overrides)
        quiet_task_failures(spark, quiet=not verbose)  # the error's one sentence is enough
    except Exception as error:
        click.echo(error_message(error, verbose), err=True)
        sys.exit(1)
    shell = Shell(spark, output_format, verbose=verbose, echo=echo)
    if init_text is not None and not shell.run_text(init_text, quiet=True):
        sys.exit(1)
    if database:
        try:
            _use_database(spark, database)
        except Exception as error:
            click.echo(error_message(error, verbose), err=True)
            sys.exit(1)
    text = execute_text if execute_text is not None else script
    if text is None and not sys.stdin.isatty():
        text = sys.stdin.read()
    if text is not None:
        sys.exit(0 if shell.run_text(text) else 1)
    shell.interactive()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("backfill", "stream"):
        from sparkext.cli.streaming import COMMANDS

        command = sys.argv.pop(1)
        COMMANDS[command](prog_name=f"sparkext-sql {command}")
        return
    cli()


if __name__ == "__main__":
    main()
