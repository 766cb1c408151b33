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
    from pyspark.sql.streaming import StreamingQuery

__version__ = "0.1.0"
__all__ = ["SparkextError", "__version__", "ingest_cdc_stream", "session", "sql"]


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


def ingest_cdc_stream(
    table: str,
    source: str,
    checkpoint: str,
    primary_key: str | None = None,
    create: bool = False,
    options: dict[str, str] | None = None,
    interval: str = "10 seconds",
    spark: SparkSession | None = None,
) -> StreamingQuery:
    """Run ``CALL sparkext.ingest_cdc`` continuously, one micro-batch every ``interval``.

    Same parameters, options, table and checkpoint layout as the procedure, so a continuous job
    and a catch-up CALL can share a checkpoint (not at the same time). Stop with ``query.stop()``.
    """
    from pyspark.sql import SparkSession

    from sparkext.cdc.stream import start
    from sparkext.procedures.base import BoundArgs
    from sparkext.procedures.binding import bind_options
    from sparkext.procedures.ingest_cdc import ROUTINE, settings_from, source_location

    spark = spark or SparkSession.getActiveSession() or session()
    values = {
        "table": table,
        "checkpoint": checkpoint,
        "primary_key": primary_key,
        "create": create,
    }
    settings = settings_from(BoundArgs(values, bind_options(ROUTINE, options or {})))
    max_files = bind_options(ROUTINE, options or {})["max-files-per-batch"]
    return start(spark, settings, source_location(source), interval=interval, max_files=max_files)
