"""Translate Spark, py4j and Iceberg exceptions into sparkext's error tree, in one place.

Floor: iceberg (the Iceberg Java API, through py4j). This is also the one module that tells Java
exceptions apart by class (:func:`commit_failure`, :func:`is_java`): the commit layer
(:mod:`sparkext.iceberg.commit`) decides retry, discard and keep from its answer, so no other
module reads a Java class name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import sparkext.errors
from sparkext.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    EnvironmentSetupError,
    SparkError,
    SparkextError,
    SqlParseError,
    TableNotFoundError,
)
from sparkext.spark.environment import executor_failure
from sparkext.spark.java import jvm as jvm_of
from sparkext.spark.session import active_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Where Spark says a failure is: "...(line 1, pos 7)" (parse errors), "...; line 1 pos 7"
# (analysis errors, at the end of the message) or a "== SQL(line 1, position 8) ==" header.
_PARSE_POSITION = re.compile(r"\s*\(line (\d+), pos (\d+)\)")
_ANALYSIS_POSITION = re.compile(r"\s*;\s*line (\d+) pos (\d+)\s*;?\s*$")
_CONTEXT_POSITION = re.compile(r"^== SQL\s*\(line (\d+), position (\d+)\) ==$")
# Rendered positions: what spark_message writes and translate reads back.
_POSITION = re.compile(r" \(line (\d+), column (\d+)\)")
# Catalyst's attribute ids ("day#63", "id#379L") mean nothing to a user.
_ATTRIBUTE_ID = re.compile(r"(?<=[\w`)])#\d+L?\b")
# Lines after which the rest of a message is noise: stack traces, the query plan, caret blocks.
_STACK_LINE = re.compile(r"^\s*(?:at [\w$.<>/-]+\(.*\)$|\.\.\. \d+ more$|Caused by: |Suppressed: )")
_NOISE_HEADERS = (
    "== SQL",
    "JVM stacktrace:",
    "Driver stacktrace:",
    "== Physical Plan",
    "== Parsed",
)
_JAVA_CLASS_PREFIX = re.compile(r"^(?:[a-z0-9_$]+\.)+[A-Za-z0-9_$]+(?:Exception|Error):\s*")
# "Job aborted due to stage failure: Task 1 in stage 3.0 failed 1 times, most recent failure:
# Lost task 1.0 in stage 3.0 (TID 6) (host executor driver): java.lang.RuntimeException: x"
_TASK_FAILURE = re.compile(
    r"^Job aborted due to stage failure: .*?most recent failure: Lost task [^:]*?\): "
    r"(?=(?:[a-z0-9_$]+\.)+[A-Za-z0-9_$]+(?:Exception|Error):)"
)
_TRACEBACK = "Traceback (most recent call last):"
_RAISED = re.compile(r"^((?:[A-Za-z_]\w*\.)*)([A-Za-z_]\w*)(?::[ \t]*(.*))?$")
# Loggers that print a failed task's whole stack trace (Java and Python) to the console at
# ERROR, although the failure also reaches the statement that ran it, as one sentence.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.util.Utils",  # "Aborting task", with the trace
    "org.apache.spark.sql.execution.datasources.v2.AppendDataExec",
    "org.apache.spark.sql.execution.datasources.v2.OverwriteByExpressionExec",
)


def _java_message(error: BaseException) -> str | None:
    java = getattr(error, "java_exception", None)
    if java is None:
        return None
    # An AnalysisException's getMessage() appends the whole query plan; its simple message is
    # the text and the position. Other exceptions have no simple message.
    for method in ("getSimpleMessage", "getMessage", "toString"):
        try:
            text = getattr(java, method)()
        except Exception:  # no such method, or the JVM is gone
            continue
        if text:
            return str(text)
    return None


def python_error(text: str) -> tuple[str, str, str] | None:
    """(module, class, message) of the exception ending the last Python traceback in ``text``.

    Spark wraps an exception raised by Python code it runs (a UDF, ``mapInArrow``, a
    ``foreachBatch`` function) in its own, with the worker's traceback in the message.

    >>> python_error('An exception was thrown from the Python worker.\\nTraceback (most '
    ...     'recent call last):\\n  File "u.py", line 1, in f\\n    raise ValueError("bad 7")'
    ...     '\\nValueError: bad 7\\n\\n\\tat org.apache.spark.api.python.X(X.scala:1)')
    ('', 'ValueError', 'bad 7')
    >>> python_error("java.io.FileNotFoundException: /x") is None
    True
    """
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    for line in text[at + len(_TRACEBACK) :].splitlines():
        if not line.strip() or line[0].isspace():
            continue  # the frames ("  File ...") and their source lines are indented
        match = _RAISED.match(line.strip())
        if match is None:
            return None
        return match.group(1).rstrip("."), match.group(2), (match.group(3) or "").strip()
    return None


def _raised_in_python(text: str) -> SparkextError | None:
    """The sparkext error, or a :class:`SparkError` of one sentence, for the exception Python
    code raised inside a Spark job; ``None`` when ``text`` holds no Python traceback."""

    found = python_error(text)
    if found is None:
        return None
    module, name, message = found
    if module.split(".")[0] == "sparkext":
        kind = getattr(sparkext.errors, name, None)
        if isinstance(kind, type) and issubclass(kind, SparkextError) and message:
            return kind(message)  # a sparkext error raised on an executor keeps its sentence
    return SparkError(f"{name}: {message}" if message else name)


def _full_text(error: BaseException) -> str:
    return "\n".join(t for t in (_java_message(error), str(error)) if t)


def one_line(text: str, line_offset: int = 0, positions: bool = True) -> str:
    """Spark's (multi-line) message as one line: its detail kept, its noise dropped.

    Lines are joined; a stack trace, a query plan, a ``== SQL ==`` caret block and ``SQLSTATE``
    lines end or leave the text. Spark's position ("; line 1 pos 7", "(line 1, pos 7)", "== SQL
    (line 1, position 8) ==") becomes `` (line L, column C)`` at the end of the first line, the
    line shifted by ``line_offset`` (``positions=False`` drops it: the position of SQL that
    sparkext generated helps nobody). Catalyst's attribute ids (``day#63``) are dropped.

    >>> one_line("[X] Cannot write to `t`, too many columns:\\nTable: `a`.\\nData: `x`, `y`.")
    '[X] Cannot write to `t`, too many columns: Table: `a`. Data: `x`, `y`.'
    >>> one_line("[Y] `id` is not grouped.\\nGroup it.; line 2 pos 7;\\nAggregate [id#2L]", 2)
    '[Y] `id` is not grouped (line 4, column 8). Group it.'
    >>> one_line("[Z] Syntax error at or near 'SELEC'.(line 1, pos 0)\\n\\n== SQL ==\\n^^^")
    "[Z] Syntax error at or near 'SELEC' (line 1, column 1)."
    """
    lines: list[str] = []
    position: tuple[int, int] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        context = _CONTEXT_POSITION.match(line)
        if context:
            position = position or (int(context.group(1)), int(context.group(2)))
        if _STACK_LINE.match(raw) or line.startswith(_NOISE_HEADERS):
            break
        if not line or line.startswith("SQLSTATE:"):
            continue
        found = _ANALYSIS_POSITION.search(line)
        if found:
            position = position or (int(found.group(1)), int(found.group(2)) + 1)
            line = line[: found.start()] + ";"
        found = _PARSE_POSITION.search(line)
        if found:
            position = position or (int(found.group(1)), int(found.group(2)) + 1)
            line = (line[: found.start()] + line[found.end() :]).strip()
        if line.endswith(";"):  # an analysis message ends with ";", the query plan follows
            lines.append(line.rstrip("; "))
            break
        lines.append(line)
    lines = [line for line in lines if line]
    if not lines:
        return text.strip().splitlines()[0] if text.strip() else ""
    if position is not None and positions:
        lines[0] = _with_position(lines[0], position[0] + line_offset, position[1])
    joined = lines[0]
    for line in lines[1:]:
        joined += (" " if joined.endswith((".", ":", ";", ",", "?", "!")) else "; ") + line
    joined = re.sub(r"\s*SQLSTATE: \w+\s*$", "", joined)
    return _ATTRIBUTE_ID.sub("", joined)


def _with_position(text: str, line: int, column: int) -> str:
    """``text`` with `` (line L, column C)`` at the end of its first sentence (outside quotes).

    >>> _with_position("[E] `a.b` cannot be found. Verify it.", 1, 8)
    '[E] `a.b` cannot be found (line 1, column 8). Verify it.'
    >>> _with_position("[E] `x` is ambiguous, could be: [`a`.`x`, `b`.`x`]", 2, 3)
    '[E] `x` is ambiguous, could be: [`a`.`x`, `b`.`x`] (line 2, column 3).'
    """
    quote = None
    for index, char in enumerate(text):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "`'\"":
            quote = char
        elif char == "." and (index + 1 == len(text) or text[index + 1] == " "):
            end = index
            break
    else:
        end = len(text)
    return f"{text[:end]} (line {line}, column {column}){text[end:] or '.'}"


def spark_message(error: BaseException, line_offset: int = 0, positions: bool = True) -> str | None:
    """Return a Spark/Java error's message in one line, or ``None`` for other errors.

    The detail on later lines is kept, the noise dropped (:func:`one_line`; ``line_offset``
    and ``positions`` as there). For an exception raised by Python code inside a Spark job,
    the Python exception's own line (``ValueError: bad value``; a sparkext error's sentence
    alone), not Spark's "An exception was thrown from the Python worker".
    """
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    if isinstance(error, SparkextError):
        return str(error)
    if not isinstance(error, (PySparkException, Py4JError)):
        return None
    raised = _raised_in_python(_full_text(error))
    if raised is not None:
        return str(raised)
    text = (_java_message(error) or str(error)).strip()
    text = _TASK_FAILURE.sub("", text, count=1)  # the task's own exception, not the job's
    # Py4J prefixes "An error occurred while calling o42.sql.\n: java.lang.X: message"
    text = _JAVA_CLASS_PREFIX.sub("", text, count=1)
    return one_line(text, line_offset, positions) or type(error).__name__


def translate(error: BaseException, line_offset: int = 0) -> SparkextError | None:
    """Map a Spark/Java exception to a SparkextError; ``None`` when it is not one of theirs.

    ``line_offset`` is the line of the SQL text where the failing statement begins, so a parse
    position Spark reports inside the statement is shown as a position in the user's text.
    """
    message = spark_message(error, line_offset)
    if message is None:
        return None
    if isinstance(error, SparkextError):
        return error
    environment = _executor_environment(_full_text(error))
    if environment is not None:
        return environment
    raised = _raised_in_python(_full_text(error))
    if raised is not None:
        return raised
    name = type(error).__name__
    if name == "ParseException" or "PARSE_SYNTAX_ERROR" in message:
        position = _POSITION.search(message)
        if position:
            line, column = int(position.group(1)), int(position.group(2))
            message = _POSITION.sub("", message, count=1).rstrip(". ")
            return SqlParseError(
                f"Cannot parse the SQL at line {line}, column {column}: {message}.", line, column
            )
        return SqlParseError(message)
    if "TABLE_OR_VIEW_NOT_FOUND" in message or is_java(error, "NoSuchTableException", causes=False):
        return TableNotFoundError(_with_catalog(message))
    if message.startswith("Missing database in table identifier"):
        return SparkError(_no_namespace())
    if commit_failure(error, causes=False) in (LOST_RACE, VALIDATION):
        return CommitConflictError(message)
    return SparkError(message)


def _executor_environment(text: str) -> EnvironmentSetupError | None:
    """A Python task that failed for its executor's environment: no sparkext there, another
    Python minor version, no such interpreter (:mod:`sparkext.spark.environment`)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    python = (context.pythonExec if context is not None else None) or "python3"
    sentence = executor_failure(text, python)
    return EnvironmentSetupError(sentence) if sentence is not None else None


_NOT_FOUND = re.compile(r"The table or view (\S+) cannot be found(?: \(line \d+, column \d+\))?")


def location(spark: SparkSession, parts: tuple[str, ...] = ()) -> tuple[str, str, str] | None:
    """``(catalog, "warehouse" or "uri", where)`` of the catalog a name resolves in (its own
    catalog when it names a configured one, else the current catalog, as after ``USE``), or
    None when the conf does not say (e.g. Spark's session catalog)."""
    try:
        conf = spark.conf
        if len(parts) > 1 and conf.get(f"spark.sql.catalog.{parts[0]}", None):
            catalog = parts[0]
        elif len(parts) > 2:  # catalog.namespace.table, a catalog sparkext cannot describe
            return None
        else:
            catalog = spark.catalog.currentCatalog()
        prefix = f"spark.sql.catalog.{catalog}"
        uri = conf.get(f"{prefix}.uri", None)
        warehouse = conf.get(f"{prefix}.warehouse", None)
    except Exception:
        return None
    if not catalog:
        return None
    if uri:
        return (catalog, "uri", uri)
    if warehouse:
        return (catalog, "warehouse", warehouse)
    return None


def _with_catalog(message: str) -> str:
    """Spark's TABLE_OR_VIEW_NOT_FOUND as one sentence that says which catalog and warehouse
    were searched (the same statement with another conf or warehouse sees another catalog)."""

    spark = active_session()
    named = _NOT_FOUND.search(message)
    if spark is None or named is None:
        return message
    parts = tuple(p.strip("`") for p in named.group(1).split("`.`"))
    found = location(spark, parts)
    if found is None:
        return message
    catalog, kind, where = found
    show = f"SHOW TABLES IN {'.'.join(parts[:-1])}" if len(parts) > 1 else "SHOW TABLES"
    return (
        f"{message[: named.end()]}; it was looked up in catalog {catalog} ({kind} {where}): "
        f"check the name with {show}."
    )


def _no_namespace() -> str:
    """Iceberg's Hadoop catalog has no namespace of its own: a statement naming no namespace
    (``SHOW TABLES`` at start-up, ``CREATE TABLE t``) before any ``USE`` fails there."""

    spark = active_session()
    catalog = spark.catalog.currentCatalog() if spark is not None else "the current catalog"
    return (
        f"No namespace is in use in catalog {catalog}, whose tables all live in one: name it "
        f"(SHOW TABLES IN {catalog}.db, CREATE TABLE {catalog}.db.t ...), or USE {catalog}.db "
        f"(sparkext-sql --database {catalog}.db) first; SHOW NAMESPACES lists them."
    )


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


CommitFailure = Literal["unknown-state", "lost-race", "validation", "other"]
UNKNOWN_STATE: CommitFailure = "unknown-state"  # the commit may have landed: delete nothing
LOST_RACE: CommitFailure = "lost-race"  # another commit won the swap: nothing landed, retry
VALIDATION: CommitFailure = "validation"  # a check against the new base failed: a conflict
OTHER: CommitFailure = "other"


def commit_failure(error: BaseException, causes: bool = True) -> CommitFailure:
    """How a commit failed, from the class of the Java exception behind ``error``.

    The only place that reads Iceberg's exception classes: the commit layer keeps or deletes
    written files and retries or gives up from this answer alone. An unknown state anywhere in
    the chain wins (it is never safe to treat it as a plain failure). ``causes=False`` looks at
    the outermost exception only (what :func:`translate` has always done).
    """
    names = java_exception_classes(error)
    simple = {n.rsplit(".", 1)[-1] for n in (names if causes else names[:1])}
    if "CommitStateUnknownException" in simple:
        return UNKNOWN_STATE
    if "CommitFailedException" in simple:
        return LOST_RACE
    if "ValidationException" in simple:
        return VALIDATION
    return OTHER


def is_java(error: BaseException, *simple_names: str, causes: bool = True) -> bool:
    """Whether the Java exception behind ``error`` (or one of its causes) is of one of
    ``simple_names`` (e.g. ``"AlreadyExistsException"``); False for Python errors."""
    names = java_exception_classes(error)
    return any(n.rsplit(".", 1)[-1] in simple_names for n in (names if causes else names[:1]))


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
        failure = commit_failure(error)
        message = spark_message(error)
        if message is None:
            raise
        if failure == UNKNOWN_STATE:
            raise CommitStateUnknownError(
                f"The catalog could not say whether {what} was committed to {table} "
                f"({message}); nothing was deleted: check {table}'s snapshots before running "
                "again."
            ) from error
        if failure in (LOST_RACE, VALIDATION):
            raise CommitConflictError(
                f"Another writer committed to {table} while {what} ran ({message}); "
                f"nothing was written: {rerun_hint}."
            ) from error
        raise (translate(error) or SparkError(message)) from error


def quiet_task_failures(spark, quiet: bool = True) -> None:
    """Keep failed tasks' stack traces off the console (``quiet``), or let them through again.

    The failure still reaches the statement that ran the job, which reports it in one sentence;
    ``sparkext-sql --verbose`` shows the traces.
    """
    jvm = jvm_of(spark)
    log4j = jvm.org.apache.logging.log4j
    level = log4j.Level.OFF if quiet else log4j.LogManager.getRootLogger().getLevel()
    for name in TASK_FAILURE_LOGGERS:
        log4j.core.config.Configurator.setLevel(name, level)
