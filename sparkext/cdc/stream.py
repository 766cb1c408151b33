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

KAFKA = "kafka:"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def _lines(
    spark: SparkSession, settings: Settings, source: str, max_files: int | None
) -> DataFrame:
    """The stream of records as (value, source_file): JSON text and where it came from."""
    from pyspark.sql import functions as F

    if source.startswith(KAFKA):
        return kafka_lines(_kafka_stream(spark, settings, source[len(KAFKA) :]))
    whole_files = settings.input_format == "json-files"
    reader = spark.readStream.format("text").option("wholetext", str(whole_files).lower())
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    has_glob = any(ch in source for ch in "*?[{")
    if not has_glob:
        reader = reader.option("recursiveFileLookup", "true")
    return reader.load(source).select("value", F.col("_metadata.file_path").alias("source_file"))


def _kafka_stream(spark: SparkSession, settings: Settings, topics: str) -> DataFrame:
    from sparkext.errors import IngestError

    options = dict(settings.kafka_options)
    if not topics or "kafka.bootstrap.servers" not in options:
        raise IngestError(
            "A Kafka source needs topics and brokers: write source => 'kafka:shop.orders' and "
            "options => map('kafka.bootstrap.servers', 'host:9092')."
        )
    reader = (
        spark.readStream.format("kafka")
        .options(**options)
        .option("subscribe", topics)
        .option("startingOffsets", settings.starting_offsets)
        .option("failOnDataLoss", "true")
    )
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    try:
        return reader.load()
    except Exception as error:
        from sparkext.iceberg.errors import spark_message

        message = spark_message(error) or ""
        if "kafka" in message.lower() and "data source" in message.lower():
            raise IngestError(
                "Reading Kafka needs Spark's Kafka connector on the classpath: start the session "
                "with spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.5, or "
                "land the topic with a Kafka Connect sink and pass its directory."
            ) from None
        raise


def kafka_lines(records: DataFrame) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset) as the pipeline's JSON lines.

    A record with a key becomes ``{"key": <key>, "value": <value>}`` (the decoder takes the key
    from it); a null value is a tombstone. ``source_file`` names topic, partition and offset, so
    per-partition progress works as for landed files.
    """
    from pyspark.sql import functions as F

    value = F.coalesce(F.col("value").cast("string"), F.lit("null"))
    key = F.col("key").cast("string")
    line = F.when(key.isNull(), value).otherwise(
        F.concat(F.lit('{"key":'), key, F.lit(',"value":'), value, F.lit("}"))
    )
    where = F.concat(
        F.lit("kafka:"),
        F.col("topic"),
        F.lit("/partition="),
        F.col("partition").cast("string"),
        F.lit("/offset="),
        F.col("offset").cast("string"),
    )
    return records.select(line.alias("value"), where.alias("source_file"))


def _query(
    spark: SparkSession,
    settings: Settings,
    source: str,
    ingestor: Ingestor,
    max_files: int | None,
    trigger: dict,
) -> StreamingQuery:
    writer = (
        _lines(spark, settings, source, max_files)
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
