"""Translate Spark, py4j and Iceberg exceptions into sparkext's error tree, in one place."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sparkext.errors import (
    CommitConflictError,
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


@contextmanager
def commit_conflicts(sentence: Callable[[str], str]) -> Iterator[None]:
    """Turn a failed Iceberg commit into ONE CommitConflictError sentence.

    ``sentence`` gets the first line of the Java message and returns what the user reads.
    Errors that are not Spark/Java ones pass through unchanged.
    """
    try:
        yield
    except Exception as error:
        message = spark_message(error)
        if message is None:
            raise
        raise CommitConflictError(sentence(message)) from None
