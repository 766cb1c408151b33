"""The py4j side of ``io.sparkext.spark.LocalRows``: pickled rows to a JVM local relation.

Floor: spark (the py4j edge). Kept apart from the routing code, which never talks to the JVM; one
call, whose answer is a DataFrame over a ``LocalRelation`` (see ``sparkext.routing.local_rows``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.spark.java import jvm as jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def local_relation(spark: SparkSession, pickled: bytes, schema_json: str) -> DataFrame | None:
    """The rows of ``pickled`` (a list of tuples in Spark's internal form) as a DataFrame of the
    schema ``schema_json``, held in the plan; None where the extension's jar is not loaded (a
    session built without sparkext's settings)."""
    from py4j.java_gateway import JavaClass
    from pyspark.sql import DataFrame

    rows = jvm_of(spark).io.sparkext.spark.LocalRows  # remembered: one round trip per call
    if not isinstance(rows, JavaClass):
        return None
    return DataFrame(rows.frame(spark._jsparkSession, pickled, schema_json), spark)
