"""Translate Spark, py4j and Iceberg exceptions into sparkext's error tree, in one place."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sparkext.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    SparkError,
    SparkextError,
    SqlParseError,
    TableNotFoundError,
)

_POSITION = re.compile(r"\(line (\d+), pos (\d+)\)")


def _java_message(error: BaseException) -> str | None:
    java = getattr(error, "java_exception", None)
    if java is None:
        return None
    try:
        return str(java.getMessage() or java.toString())
    except Exception:  # the JVM may be gone; fall back to the Python text
        return None


def spark_message(error: BaseException) -> str | None:
    """Return the first line of a Spark/Java error's message, or ``None`` for other errors."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    if isinstance(error, SparkextError):
        return str(error)
    if not isinstance(error, (PySparkException, Py4JError)):
        return None
    text = _java_message(error) or str(error)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else type(error).__name__
    # Py4J prefixes "An error occurred while calling o42.sql.\n: java.lang.X: message"
    first = re.sub(r"^(?:[a-z0-9_$]+\.)+[A-Za-z0-9_$]+(?:Exception|Error):\s*", "", first)
    return first


def translate(error: BaseException, line_offset: int = 0) -> SparkextError | None:
    """Map a Spark/Java exception to a SparkextError; ``None`` when it is not one of theirs.

    ``line_offset`` is the line of the SQL text where the failing statement begins, so a parse
    position Spark reports inside the statement is shown as a position in the user's text.
    """
    message = spark_message(error)
    if message is None:
        return None
    if isinstance(error, SparkextError):
        return error
    name = type(error).__name__
    java_name = ""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            java_name = str(java.getClass().getName())
        except Exception:
            java_name = ""
    if name == "ParseException" or "PARSE_SYNTAX_ERROR" in message:
        position = _POSITION.search(message)
        if position:
            line = int(position.group(1)) + line_offset
            column = int(position.group(2)) + 1
            message = _POSITION.sub("", message).rstrip(". ")
            return SqlParseError(
                f"Cannot parse the SQL at line {line}, column {column}: {message}.", line, column
            )
        return SqlParseError(message)
    if "TABLE_OR_VIEW_NOT_FOUND" in message or java_name.endswith("NoSuchTableException"):
        return TableNotFoundError(message)
    if java_name.endswith(("CommitFailedException", "ValidationException")):
        return CommitConflictError(message)
    return SparkError(message)


def java_exception_classes(error: BaseException) -> list[str]:
    """Class names of the Java exception behind ``error`` and of its causes, outermost first.

    Empty for errors that did not come from the JVM.
    """
    java = getattr(error, "java_exception", None)
    names: list[str] = []
    seen = 0
    while java is not None and seen < 20:
        try:
            names.append(str(java.getClass().getName()))
            cause = java.getCause()
        except Exception:  # the JVM may be gone
            break
        java = None if cause is None or cause.equals(java) else cause
        seen += 1
    return names


@contextmanager
def spark_write(table: str, what: str, rerun_hint: str) -> Iterator[None]:
    """Tell a Spark write's failures apart by their Java exception class.

    A failed Iceberg validation or a lost commit race is :class:`CommitConflictError`; an unknown
    commit state is :class:`CommitStateUnknownError` (nothing may be cleaned up); any other
    failure (a user's UDF, a cast, a lost executor, storage) is translated as itself. The cause
    stays chained, so ``--verbose`` shows it.
    """
    try:
        yield
    except SparkextError:
        raise
    except Exception as error:
        classes = [name.rsplit(".", 1)[-1] for name in java_exception_classes(error)]
        message = spark_message(error)
        if message is None:
            raise
        if "CommitStateUnknownException" in classes:
            raise CommitStateUnknownError(
                f"The catalog could not say whether {what} was committed to {table} "
                f"({message}); nothing was deleted: check {table}'s snapshots before running "
                "again."
            ) from error
        if "ValidationException" in classes or "CommitFailedException" in classes:
            raise CommitConflictError(
                f"Another writer committed to {table} while {what} ran ({message}); "
                f"nothing was written: {rerun_hint}."
            ) from error
        raise (translate(error) or SparkError(message)) from error
