"""Evaluate argument expressions: plain literals in Python, anything else once through Spark.

Floor: routing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from sparkext import times
from sparkext.errors import ProcedureArgumentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_NOT_CONSTANT = (exp.Column, exp.Star, exp.Select, exp.Subquery, exp.Placeholder)


def check_constant(expression: exp.Expression, label: str) -> None:
    """Raise when ``expression`` refers to columns or queries: arguments must be constants."""
    for node in expression.walk():
        if isinstance(node, exp.Column):
            raise ProcedureArgumentError(
                f"{label} must be a constant, but '{node.sql('spark')}' is a name; "
                f"quote it as a string: '{node.sql('spark')}'."
            )
        if isinstance(node, _NOT_CONSTANT):
            raise ProcedureArgumentError(
                f"{label} must be a constant, not '{expression.sql('spark')}'."
            )


def literal_value(expression: exp.Expression) -> tuple[bool, Any]:
    """Return ``(True, value)`` for a literal Python can read exactly, else ``(False, None)``.

    >>> literal_value(exp.Literal.number("-3")), literal_value(exp.Literal.string("a"))
    ((True, -3), (True, 'a'))
    """
    if isinstance(expression, exp.Literal):
        if expression.is_string:
            return True, expression.this
        text = expression.this
        try:
            return True, int(text)
        except ValueError:
            try:
                return True, float(text)
            except ValueError:
                return False, None
    if isinstance(expression, exp.Boolean):
        return True, bool(expression.this)
    if isinstance(expression, exp.Null):
        return True, None
    if isinstance(expression, exp.Neg):
        ok, value = literal_value(expression.this)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, -value
    return False, None


def _to_python(value: Any, spark_type: str) -> Any:
    if spark_type == "timestamp" and isinstance(value, int):  # unix_micros, see evaluate()
        return times.from_micros(value)
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    return value


def evaluate(spark: SparkSession, expressions: Sequence[exp.Expression]) -> list[Any]:
    """Evaluate constant expressions; literals stay in Python, the rest run in ONE Spark query."""
    values: list[Any] = [None] * len(expressions)
    pending: list[tuple[int, exp.Expression]] = []
    for index, expression in enumerate(expressions):
        ok, value = literal_value(expression)
        if ok:
            values[index] = value
        else:
            pending.append((index, expression))
    if pending:
        from pyspark.sql import functions as F

        query = exp.select(*(e.copy().as_(f"a{i}") for i, e in pending))
        frame = spark.sql(query.sql(dialect="spark"))
        fields = frame.schema.fields
        # A TIMESTAMP comes back as epoch microseconds, then an aware UTC instant: collected as
        # a TIMESTAMP it would be a naive datetime in the OS zone.
        row = frame.select(
            *[
                F.unix_micros(f.name) if f.dataType.simpleString() == "timestamp" else F.col(f.name)
                for f in fields
            ]
        ).collect()[0]  # one row of constants, not table data
        for (index, _), field, value in zip(pending, fields, row, strict=True):
            values[index] = _to_python(value, field.dataType.simpleString())
    return values
