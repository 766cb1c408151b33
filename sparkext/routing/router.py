"""Route each statement: our CALLs to procedures, sparkext.*() tables expanded, the rest to Spark.

A statement that is not ours reaches ``spark.sql`` byte for byte as the user wrote it (Iceberg's own
``CALL lake.system.*`` included); routing costs one tokenization of the text.

Floor: routing.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from sparkext.declarations import BoundArgs, Context, Kind, Routine
from sparkext.errors import (
    NotAnIcebergTableError,
    SparkextError,
    TableNotFoundError,
    UnknownRoutineError,
    did_you_mean,
)
from sparkext.iceberg.catalog import activate_session, resolve_table
from sparkext.iceberg.errors import translate
from sparkext.procedures.registry import ROUTINES
from sparkext.routing import index_statements
from sparkext.routing.binding import bind, evaluator
from sparkext.routing.invocations import Invocation, find_table_functions, parse_call
from sparkext.routing.local_rows import local_frame
from sparkext.routing.tokens import Statement, line_col, split_statements
from sparkext.security.guard import governed
from sparkext.spark.environment import check_executors
from sparkext.spark.extension import is_attached

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_view_ids = itertools.count(1)
# Spark's error for sparkext.f(...) used as a scalar function (its position as translated).
_UNRESOLVED_OURS = re.compile(
    r"^\[UNRESOLVED_ROUTINE\] Cannot resolve function `sparkext`\.`([^`]+)`"
    r"(?:.*? \(line (\d+), column (\d+)\))?"
)


def _routine(invocation: Invocation, kind: Kind) -> Routine:
    routine = ROUTINES.get(invocation.name)
    what = "procedure" if kind == Kind.PROCEDURE else "table function"
    if routine is None:
        candidates = [n for n, r in ROUTINES.items() if kind in r.kind]
        raise UnknownRoutineError(
            f"Unknown {what} 'sparkext.{invocation.name}' at line {invocation.line}, column "
            f"{invocation.column}{did_you_mean(invocation.name, candidates)}; "
            "CALL sparkext.help() lists them."
        )
    if kind not in routine.kind:
        usage = (
            f"SELECT * FROM sparkext.{routine.name}(...)"
            if kind == Kind.PROCEDURE
            else f"CALL sparkext.{routine.name}(...)"
        )
        raise UnknownRoutineError(f"sparkext.{routine.name} is not a {what}; use it as {usage}.")
    return routine.for_kind(kind)


def run_invocation(
    spark: SparkSession,
    invocation: Invocation,
    kind: Kind,
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """Bind one invocation's arguments, run its routine and return the result's DataFrame."""

    arguments = ", ".join(f"{a.name} => {a.sql}" if a.name else a.sql for a in invocation.args)
    label = "procedure" if kind == Kind.PROCEDURE else "function"
    with governed(spark, f"sparkext.{invocation.name.lower()}", label, arguments) as call:
        routine = _routine(invocation, kind)
        call.resolved(routine)
        args = bind(
            routine,
            invocation.args,
            evaluator(spark, routine),
            lambda name: resolve_table(spark, name),
        )
        call.bound(routine, args)
        check_executors(spark)  # once per application: their Python imports this sparkext
        result = routine.run(Context(spark, progress or _quiet), args)
        if isinstance(result, list):
            return local_frame(spark, result, routine.output_ddl)
        if not routine.output:  # a table whose columns depend on the arguments
            return result
        return result.select(*(c.name for c in routine.output))


def run_action(
    spark: SparkSession,
    name: str,
    given: Mapping[str, Any],
    action: Callable[[Context], list[tuple[Any, ...]]],
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """A Python API call of routine ``name`` that runs its action with typed values: checked
    and audited as ``CALL sparkext.<name>(<given>)`` is (:func:`run_invocation`), with
    ``given`` as the call's arguments and the other parameters at their defaults; the rows
    ``action`` returns become the routine's declared output (:func:`local_frame`). Errors come
    as :func:`execute` gives them."""

    activate_session(spark)
    routine = ROUTINES[name]
    # the text the CALL's arguments are recorded as: each one as sqlglot renders it
    arguments = ", ".join(f"{k} => {exp.convert(v).sql('spark')}" for k, v in given.items())
    values = {p.name: given.get(p.name, p.default) for p in routine.params}
    try:
        with governed(spark, f"sparkext.{name}", "procedure", arguments) as call:
            call.resolved(routine)
            call.bound(routine, BoundArgs(values))
            check_executors(spark)
            rows = action(Context(spark, progress or _quiet))
            return local_frame(spark, rows, routine.output_ddl)
    except SparkextError:
        raise
    except Exception as error:
        translated = translate(error)
        if translated is None:
            raise
        raise translated from error


def failure_column(statement: Statement) -> tuple[str, str] | None:
    """``(routine name, column)`` when ``statement`` is a CALL of a routine whose rows report
    failures in a column of their own (``tiered_optimize``'s and ``maintain``'s ``error``)."""
    try:
        call = parse_call(statement)
    except SparkextError:
        return None
    routine = ROUTINES.get(call.name) if call is not None else None
    if routine is None or routine.failure_column is None:
        return None
    return routine.name, routine.failure_column


def _quiet(message: str) -> None:
    return None


def execute(
    spark: SparkSession, statement: Statement, progress: Callable[[str], None] = _quiet
) -> DataFrame:
    """Run one statement and return its result."""

    # The calling thread may be new to the JVM (the shell's statement thread, a user's pool):
    # Iceberg's source and SQLConf.get read the thread's active session, not this one.
    activate_session(spark)
    line_offset = line_col(statement.source, statement.start)[0] - 1
    try:
        call = parse_call(statement)
        if call is not None:
            return run_invocation(spark, call, Kind.PROCEDURE, progress)
        index = index_statement(spark, statement)
        if index is not None:
            return run_invocation(spark, index, Kind.PROCEDURE, progress)
        functions = find_table_functions(statement)
        if not functions:
            return spark.sql(statement.text)
        return expand_and_run(spark, statement, functions, progress)
    except SparkextError:
        raise
    except Exception as error:
        translated = translate(error, line_offset)
        if translated is None:
            raise
        raise (scalar_use(str(translated)) or translated) from error


def index_statement(spark: SparkSession, statement: Statement) -> Invocation | None:
    """The routine invocation of a CREATE INDEX, DROP INDEX or SHOW INDEXES statement that is
    sparkext's (:mod:`sparkext.routing.index_statements`); None for any other statement, and
    for a DROP INDEX on a table that is not an Iceberg table (Spark's own DROP INDEX)."""
    found = index_statements.recognise(statement)
    if found is None:
        return None
    if found.routine == index_statements.DROP:
        try:
            resolve_table(spark, found.table)
        except (TableNotFoundError, NotAnIcebergTableError):
            return None
    return found.invocation


def scalar_use(message: str) -> UnknownRoutineError | None:
    """The sentence for Spark's UNRESOLVED_ROUTINE on ``sparkext.f(...)`` written where a value
    goes (a select list, a WHERE): sparkext's routines are tables or procedures, never scalars.

    >>> spark_says = "[UNRESOLVED_ROUTINE] Cannot resolve function `sparkext`.`{}` on search "
    >>> spark_says += "path [`system`.`builtin`] (line 2, column 8)."
    >>> print(scalar_use(spark_says.format("table_health")))  # doctest: +ELLIPSIS
    sparkext.table_health is a table function: use it in FROM (SELECT * FROM ...) or as CALL ...
    >>> print(scalar_use(spark_says.format("tabel_health")))  # doctest: +ELLIPSIS
    Unknown function 'sparkext.tabel_health' at line 2, column 8 (did you mean 'table_health'?); ...
    """
    found = _UNRESOLVED_OURS.match(message)
    if found is None:
        return None
    name = found.group(1).lower()
    routine = ROUTINES.get(name)
    if routine is None:
        where = f" at line {found.group(2)}, column {found.group(3)}" if found.group(2) else ""
        return UnknownRoutineError(
            f"Unknown function 'sparkext.{name}'{where}{did_you_mean(name, ROUTINES)}; "
            "CALL sparkext.help() lists them."
        )
    call = f"CALL sparkext.{routine.name}(...)"
    if Kind.FUNCTION not in routine.kind:
        return UnknownRoutineError(
            f"sparkext.{routine.name} is a procedure, not a function: run it as {call}."
        )
    also = f" or as {call}" if Kind.PROCEDURE in routine.kind else ""
    return UnknownRoutineError(
        f"sparkext.{routine.name} is a table function: use it in FROM "
        f"(SELECT * FROM sparkext.{routine.name}(...)){also}."
    )


def _stored_query(statement: Statement) -> str | None:
    """How a statement keeps its query: ``"temp"`` for a temp view or ``CACHE TABLE`` (Spark
    analyses the query's text again at every use), ``"persistent"`` for a catalog view, ``None``
    for a statement that runs its query once (SELECT, INSERT, CREATE TABLE … AS)."""
    kinds = [t.token_type for t in statement.tokens[:8]]
    if not kinds:
        return None
    if kinds[0] == TokenType.CACHE or kinds[:2] == [TokenType.ALTER, TokenType.VIEW]:
        return "temp"
    if kinds[0] == TokenType.CREATE and TokenType.VIEW in kinds:
        head = kinds[: kinds.index(TokenType.VIEW)]
        if TokenType.TABLE not in head:
            return "temp" if TokenType.TEMPORARY in head else "persistent"
    return None


def _in_spark(spark: SparkSession) -> bool:

    return is_attached(spark)


def _kept_view_name(invocation: Invocation, statement: Statement) -> str:
    """A name that depends only on the statement and the call, so running the same statement
    again replaces the view instead of adding one, while two statements over the same call
    (two caches) keep one view each."""
    call = ", ".join(f"{a.name} => {a.sql}" if a.name else a.sql for a in invocation.args)
    key = f"{statement.text}\n{invocation.start - statement.start}:{invocation.name}({call})"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return f"__sparkext_{invocation.name}_{digest}"


def expand_and_run(
    spark: SparkSession,
    statement: Statement,
    functions: list[Invocation],
    progress: Callable[[str], None] = _quiet,
    in_spark: bool | None = None,
) -> DataFrame:
    """Replace each ``sparkext.f(...)`` by a temp view of its result, run, then drop the views.

    When sparkext's JVM extension is attached (every session :func:`sparkext.session` builds), a
    view goes to Spark as written: Spark keeps its text and runs the function at each read, as
    it reads a table (``in_spark``). Otherwise, and for ``CACHE TABLE`` always, a temp view or
    cache over a function keeps the function's view: its rows are the function's result when
    the statement ran; a catalog view cannot read a session's temp view and is refused.
    """
    stored = _stored_query(statement)
    if in_spark is None:  # CACHE TABLE keeps the rows of now, so it is always expanded here
        cache = statement.tokens[0].token_type == TokenType.CACHE
        in_spark = stored is not None and not cache and _in_spark(spark)
    if stored is not None and in_spark:
        # Spark stores the view's text and parses it (through sparkext's extension) at each
        # read: the view shows the function's result at that time, and may be persistent.
        return spark.sql(statement.text)
    if stored == "persistent":
        first = functions[0]
        raise SparkextError(
            f"A persistent view cannot read sparkext.{first.name}(...) (line {first.line}, "
            f"column {first.column}): its result exists only in this Spark session; create "
            "a TEMP VIEW, or store the rows with CREATE TABLE ... AS SELECT."
        )
    pieces: list[str] = []
    views: list[str] = []
    cursor = statement.start
    try:
        for invocation in functions:
            frame = run_invocation(spark, invocation, Kind.FUNCTION, progress)
            if stored == "temp":
                view = _kept_view_name(invocation, statement)
            else:
                view = f"__sparkext_{invocation.name}_{next(_view_ids)}"
                views.append(view)
            frame.createOrReplaceTempView(view)
            pieces.append(statement.source[cursor : invocation.start])
            pieces.append(view)
            cursor = invocation.end
        pieces.append(statement.source[cursor : statement.start + len(statement.text)])
        # Spark analyses eagerly: the result keeps the views' plans after the views are dropped.
        return spark.sql("".join(pieces))
    finally:
        for view in views:
            spark.catalog.dropTempView(view)


def run_text(spark: SparkSession, text: str, progress: Callable[[str], None] = _quiet) -> DataFrame:
    """Split ``text`` and run every statement in order; return the last result."""
    statements = split_statements(text)
    if not statements:
        raise SparkextError("The SQL text holds no statement; write one, e.g. SELECT 1.")
    result = None
    for statement in statements:
        result = execute(spark, statement, progress)
    assert result is not None
    return result
