"""What the JVM extension asks the Python driver: the result of one CALL, or of one table function.

Spark's own parser hands over the statement's text (``spark.sql``, a notebook's ``%sql``, a JDBC
client through the Thrift server, a view's stored text); the invocation is found and bound here by
the same code as ``sparkext.sql``, so arguments, defaults, output and error sentences are the same.

Floor: routing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sparkext.actions.skipping import prune_files
from sparkext.declarations import Kind
from sparkext.errors import SparkextError
from sparkext.iceberg.errors import one_line, translate
from sparkext.routing.invocations import find_table_functions, parse_call
from sparkext.routing.router import expand_and_run, index_statement, run_invocation
from sparkext.routing.tokens import split_statements
from sparkext.security import guard
from sparkext.security.caller import acting_as as acting_as_caller
from sparkext.security.caller import from_java
from sparkext.spark.extension import Answers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_LOG = logging.getLogger("sparkext.extension")


def call_result(spark: SparkSession, sql: str) -> DataFrame:
    """Run the procedure of ``sql``, one ``CALL sparkext.<name>(...)`` statement, or one
    ``CREATE INDEX`` / ``DROP INDEX`` / ``SHOW INDEXES`` statement of sparkext's."""
    statements = split_statements(sql)
    if len(statements) > 1:
        raise SparkextError(
            f"spark.sql runs one statement but this text holds {len(statements)}; run them one "
            "by one, or all at once with sparkext.sql(...)."
        )
    for statement in statements:
        call = parse_call(statement) or index_statement(spark, statement)
        if call is not None:
            return run_invocation(spark, call, Kind.PROCEDURE)
    raise SparkextError(
        "The statement is not a CALL sparkext.<procedure>(...); write e.g. CALL sparkext.help()."
    )


def table_result(spark: SparkSession, sql: str, start: int) -> DataFrame:
    """The table of the ``sparkext.<name>(...)`` starting at character ``start`` of ``sql`` (the
    text Spark's parser read, so the positions agree)."""
    for statement in split_statements(sql):
        for invocation in find_table_functions(statement):
            if invocation.start == start:
                return run_invocation(spark, invocation, Kind.FUNCTION)
    raise SparkextError(
        f"No sparkext.<function>(...) starts at character {start} of the statement Spark parsed; "
        "run it with sparkext.sql(...) and report the statement."
    )


def cache_table_result(spark: SparkSession, sql: str) -> DataFrame:
    """Run ``CACHE TABLE … AS`` over sparkext functions as ``sparkext.sql`` does: each function's
    result is kept as a temp view the cache reads, so the cache holds the rows of that moment."""
    for statement in split_statements(sql):
        functions = find_table_functions(statement)
        if functions:
            return expand_and_run(spark, statement, functions, in_spark=False)
    raise SparkextError(
        "The statement holds no sparkext.<function>(...); write e.g. CACHE TABLE c AS "
        "SELECT * FROM sparkext.help()."
    )


def begin_procedure(
    spark: SparkSession, caller: str, procedure: str, table: str | None, sql: str
) -> str:
    """Check an Iceberg procedure call: its token, or the sentence that refuses it. A policy that
    cannot be read refuses; so does anything else that fails here."""
    try:
        return guard.begin_procedure(spark, from_java(spark, caller), procedure, table, sql)
    except Exception as error:
        _LOG.debug("sparkext could not check an Iceberg procedure call", exc_info=True)
        if isinstance(error, SparkextError):
            return str(error)
        return one_line(f"sparkext could not check this call ({type(error).__name__}: {error})")


@contextmanager
def acting_as(spark: SparkSession, caller: str) -> Iterator[None]:
    """Run the block as the caller the JVM reports for this statement."""
    with acting_as_caller(from_java(spark, caller)):
        yield


def sentence(error: BaseException) -> str:
    """The one sentence a failed routine reaches Spark SQL's caller as."""
    if isinstance(error, SparkextError):
        return str(error)
    translated = translate(error)
    return str(translated) if translated else one_line(f"{type(error).__name__}: {error}")


ANSWERS = Answers(
    call=call_result,
    table=table_result,
    cache_table=cache_table_result,
    begin_procedure=begin_procedure,
    end_procedure=guard.end_procedure,
    acting_as=acting_as,
    sentence=sentence,
    translate=translate,
    prune_files=prune_files,  # the skipping indexes' answer to the planning hook
)
