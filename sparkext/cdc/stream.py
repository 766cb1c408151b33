"""Run the CDC pipeline as a Structured Streaming query over a file landing zone.

``ingest`` processes every file not yet ingested (available-now trigger) and returns totals;
``start`` runs the same pipeline continuously with a processing-time trigger.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkext.cdc.ingest import Ingestor
from sparkext.cdc.model import Metrics, Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def _lines(spark: SparkSession, source: str, max_files: int | None, whole_files: bool) -> DataFrame:
    from pyspark.sql import functions as F

    reader = spark.readStream.format("text").option("wholetext", str(whole_files).lower())
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    has_glob = any(ch in source for ch in "*?[{")
    if not has_glob:
        reader = reader.option("recursiveFileLookup", "true")
    return reader.load(source).select("value", F.col("_metadata.file_path").alias("source_file"))


def _query(
    spark: SparkSession,
    settings: Settings,
    source: str,
    ingestor: Ingestor,
    max_files: int | None,
    trigger: dict,
) -> StreamingQuery:
    writer = (
        _lines(spark, source, max_files, settings.input_format == "json-files")
        .writeStream.foreachBatch(ingestor.process)
        .option("checkpointLocation", os.path.join(settings.checkpoint, "source"))
        .queryName(f"sparkext_ingest_cdc_{settings.table}".replace(".", "_"))
    )
    return writer.trigger(**trigger).start()


def ingest(
    spark: SparkSession,
    settings: Settings,
    source: str,
    max_files: int | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> Metrics:
    """Ingest every file of ``source`` not yet ingested under this checkpoint; return totals."""
    ingestor = Ingestor(spark, settings, progress)
    query = _query(spark, settings, source, ingestor, max_files, {"availableNow": True})
    try:
        query.awaitTermination()
    except Exception:
        if ingestor.error is not None:
            raise ingestor.error from None
        raise
    if ingestor.error is not None:
        raise ingestor.error
    return ingestor.metrics


def start(
    spark: SparkSession,
    settings: Settings,
    source: str,
    interval: str = "10 seconds",
    max_files: int | None = None,
) -> StreamingQuery:
    """Run the same pipeline continuously (every ``interval``); stop it with ``query.stop()``."""
    ingestor = Ingestor(spark, settings, lambda message: None)
    return _query(spark, settings, source, ingestor, max_files, {"processingTime": interval})
