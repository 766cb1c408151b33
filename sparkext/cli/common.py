"""What every sparkext command line shares: error lines, --conf parsing, starting Spark.

Floor: top (command line).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import click

import sparkext
from sparkext.errors import SparkextError, SqlParseError
from sparkext.iceberg.errors import quiet_task_failures, translate
from sparkext.spark.session import active_session, build_conf, describe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


LOG_LEVEL = "SPARKEXT_LOG_LEVEL"


def error_message(
    error: BaseException, verbose: bool, source: str | None = None, always: bool = False
) -> str:
    """One line for the user (``Error: [source: ]sentence``); the Python and Java stack traces
    only with ``verbose``. ``source`` (a file name) prefixes a parse error that has a line
    and column (they are in that file) — or every error with ``always`` (an ``-i`` file runs
    unseen)."""

    translated = error if isinstance(error, SparkextError) else translate(error)
    in_file = isinstance(translated, SqlParseError) and translated.line is not None
    named = source and (always or in_file)
    where = f"{source}: " if named else ""
    if translated is not None:
        text = f"Error: {where}{translated}"
    else:
        text = (
            f"Error: {where}internal error {type(error).__name__}: {error}; "
            "rerun with --verbose for the stack trace and report it."
        )
    if verbose:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        text = f"{trace}\n{text}"
    return text


def parse_conf(values: tuple[str, ...]) -> dict[str, str]:
    """``--conf K=V`` options as a dict; a value without ``=`` is a usage error."""
    conf: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"'{item}' is not key=value", param_hint="--conf")
        conf[key.strip()] = value.strip()
    return conf


def overrides_of(confs: tuple[str, ...], master: str | None) -> dict[str, str]:
    overrides = parse_conf(confs)
    if master:
        overrides["spark.master"] = master
    return overrides


class _QuietCtrlC(logging.Filter):
    """py4j logs a Ctrl-C that lands inside one of its calls, with its traceback, through the
    root logger ("KeyboardInterrupt while sending command."); the command line says it in one
    line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "KeyboardInterrupt while sending command."


_QUIET_CTRL_C = _QuietCtrlC()


def _spark_children(pid: int) -> list[int]:
    """This process's child processes that run Spark (spark-submit, then its JVM), from /proc;
    none where there is no /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not Linux's format
            continue
        if parent == pid and b"spark" in command.lower():
            found.append(int(stat.parent.name))
    return found


def _stop_unstarted_jvm() -> None:
    """A Ctrl-C while PySpark waits for its JVM to come up loses the JVM: PySpark deletes the
    file the JVM was to report its port in, and the JVM then runs on, alone, for good. Stop it.
    (Once PySpark has its gateway, the JVM exits with this process: its stdin closes.)"""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return
    for pid in _spark_children(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def start_session(overrides: dict[str, str], verbose: bool, announce: bool = False) -> SparkSession:
    """Start (or attach to) the Spark session; with ``announce``, say on stderr what is being
    started (master, catalog, warehouse) and when it is ready — Spark takes 10–30 s to start."""

    started = time.perf_counter()
    if announce and active_session() is None:
        click.echo(f"Starting Spark: {describe(build_conf(overrides))} …", err=True)
    saved = os.environ.get(LOG_LEVEL)
    if verbose:  # for this session only: never leaked to processes started later
        os.environ[LOG_LEVEL] = "WARN"
    else:
        logging.getLogger().addFilter(_QUIET_CTRL_C)
    try:
        spark = sparkext.session(**overrides)
    except KeyboardInterrupt:
        _stop_unstarted_jvm()
        raise
    finally:
        if saved is None:
            os.environ.pop(LOG_LEVEL, None)
        else:
            os.environ[LOG_LEVEL] = saved
    quiet_task_failures(spark, quiet=not verbose)  # the error's one sentence is enough
    # py4j logs a failed foreachBatch (a micro-batch's error, a cancel) with its traceback
    # through Python's logging, which prints to stderr; the error's sentence says it once.
    logging.getLogger("py4j").setLevel(logging.INFO if verbose else logging.CRITICAL)
    if announce:
        conf = {k: v for k, v in spark.sparkContext.getConf().getAll()}
        click.echo(
            f"Spark {spark.version} ready in {time.perf_counter() - started:.1f} s: "
            f"{describe(conf)}.",
            err=True,
        )
    return spark


def fail(error: BaseException, verbose: bool, source: str | None = None) -> None:
    """Print the one-line error and exit with status 1."""
    click.echo(error_message(error, verbose, source), err=True)
    sys.exit(1)
