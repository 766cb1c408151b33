"""What the JVM extension asks the Python driver: the result of one CALL, or of one table function.

Spark's own parser hands over the statement's text (``spark.sql``, a notebook's ``%sql``, a JDBC
client through the Thrift server, a view's stored text); the invocation is found and bound here by
the same code as ``sparkext.sql``, so arguments, defaults, output and error sentences are the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.errors import SparkextError
from sparkext.procedures.base import Kind
from sparkext.routing.invocations import find_table_functions, parse_call
from sparkext.routing.router import expand_and_run, run_invocation
from sparkext.routing.tokens import split_statements

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def call_result(spark: SparkSession, sql: str) -> DataFrame:
    """Run the procedure of ``sql``, one ``CALL sparkext.<name>(...)`` statement."""
    statements = split_statements(sql)
    if len(statements) > 1:
        raise SparkextError(
            f"spark.sql runs one statement but this text holds {len(statements)}; run them one "
            "by one, or all at once with sparkext.sql(...)."
        )
    for statement in statements:
        call = parse_call(statement)
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
