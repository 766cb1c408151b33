"""sparkext: SQL procedures and table functions for Apache Iceberg tables on PySpark.

>>> import sparkext
>>> spark = sparkext.session()                                     # doctest: +SKIP
>>> sparkext.sql("CALL sparkext.table_health(table => 'lake.db.t')").show()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkext.errors import SparkextError
from sparkext.session import session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__version__ = "0.1.0"
__all__ = ["SparkextError", "__version__", "session", "sql"]


def sql(text: str, spark: SparkSession | None = None) -> DataFrame:
    """Run one or several ``;``-separated statements and return the last statement's result.

    ``CALL sparkext.<procedure>(...)`` and ``FROM sparkext.<function>(...)`` are handled by
    sparkext; every other statement goes to ``spark.sql`` unchanged. Without ``spark``, the active
    session is used, or one is built with :func:`session`.
    """
    from pyspark.sql import SparkSession

    from sparkext.routing.router import run_text

    spark = spark or SparkSession.getActiveSession() or session()
    return run_text(spark, text)
