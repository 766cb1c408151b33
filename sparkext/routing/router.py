"""Route each statement: our CALLs to procedures, sparkext.*() tables expanded, the rest to Spark.

A statement that is not ours reaches ``spark.sql`` byte for byte as the user wrote it (Iceberg's own
``CALL lake.system.*`` included); routing costs one tokenization of the text.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkext.errors import SparkextError, UnknownRoutineError, did_you_mean
from sparkext.procedures.base import Context, Kind, Routine
from sparkext.procedures.binding import bind, evaluator
from sparkext.procedures.registry import ROUTINES
from sparkext.routing.invocations import Invocation, find_table_functions, parse_call
from sparkext.routing.tokens import Statement, line_col, split_statements

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_view_ids = itertools.count(1)


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


def _run(spark: SparkSession, invocation: Invocation, kind: Kind, progress) -> DataFrame:
    from sparkext.iceberg.catalog import resolve_table

    routine = _routine(invocation, kind)
    args = bind(
        routine,
        invocation.args,
        evaluator(spark, routine),
        lambda name: resolve_table(spark, name),
    )
    result = routine.run(Context(spark, progress), args)
    if isinstance(result, list):
        return spark.createDataFrame(result, schema=routine.output_ddl)
    if not routine.output:  # a table whose columns depend on the arguments
        return result
    return result.select(*(c.name for c in routine.output))


def _quiet(message: str) -> None:
    return None


def execute(
    spark: SparkSession, statement: Statement, progress: Callable[[str], None] = _quiet
) -> DataFrame:
    """Run one statement and return its result."""
    from sparkext.iceberg.errors import translate

    line_offset = line_col(statement.source, statement.start)[0] - 1
    try:
        call = parse_call(statement)
        if call is not None:
            return _run(spark, call, Kind.PROCEDURE, progress)
        functions = find_table_functions(statement)
        if not functions:
            return spark.sql(statement.text)
        return _expand_and_run(spark, statement, functions, progress)
    except SparkextError:
        raise
    except Exception as error:
        translated = translate(error, line_offset)
        if translated is None:
            raise
        raise translated from error


def _expand_and_run(
    spark: SparkSession, statement: Statement, functions: list[Invocation], progress
) -> DataFrame:
    """Replace each ``sparkext.f(...)`` by a temp view of its result, run, then drop the views."""
    pieces: list[str] = []
    views: list[str] = []
    cursor = statement.start
    try:
        for invocation in functions:
            frame = _run(spark, invocation, Kind.FUNCTION, progress)
            view = f"__sparkext_{invocation.name}_{next(_view_ids)}"
            frame.createOrReplaceTempView(view)
            views.append(view)
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
