"""Iceberg data and delete files from files written on executors: partition data, metrics read
from the executors' own footers, and the row-delta steps that add and remove them.

Floor: iceberg (the Iceberg Java API). Shared by every writer that commits files it wrote on
executors: ingest_cdc (:mod:`sparkext.iceberg.cdc_table`), event-time tags
(:mod:`sparkext.iceberg.tags`) and the delete rewrite (:mod:`sparkext.iceberg.delete_files`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkext.executors.cdc.files import WrittenFile

from sparkext.executors.cdc.files import DATA
from sparkext.spark.java import iterate as _iterate
from sparkext.spark.java import jvm as jvm_of


def _int_array(spark, values: Sequence[int]):
    array = spark.sparkContext._gateway.new_array(spark._jvm.int, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def partition_data(spark: SparkSession, spec, values: Sequence[str]):
    """Iceberg's PartitionData for partition strings (parsed by Iceberg, typed in Java)."""
    jvm = jvm_of(spark)
    strings = jvm.java.util.ArrayList()
    for value in values:
        strings.add(value)
    probe = (  # DataFiles parses the strings into a typed PartitionData for the spec
        jvm.org.apache.iceberg.DataFiles.builder(spec)
        .withPath("partition-probe.parquet")
        .withFileSizeInBytes(0)
        .withRecordCount(0)
        .withPartitionValues(strings)
        .build()
    )
    return probe.partition()


def remove_live_files(table, delta, snapshot_id: int | None):
    """``delta`` removing every data and delete file live in ``snapshot_id`` (None: nothing)."""
    if snapshot_id is None:
        return delta
    removed_deletes = set()
    tasks = table.newScan().useSnapshot(snapshot_id).planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            task = iterator.next()
            delta = delta.removeRows(task.file())
            for delete in _iterate(task.deletes()):
                if str(delete.location()) not in removed_deletes:
                    removed_deletes.add(str(delete.location()))
                    delta = delta.removeDeletes(delete)
    finally:
        tasks.close()
    return delta


def add_written_files(spark: SparkSession, table, delta, files: Sequence[WrittenFile], key):
    """``delta`` adding files written by :func:`sparkext.executors.cdc.files.file_writer`: data
    files and equality deletes on the ``key`` columns, with the metrics their writers computed."""

    iceberg = jvm_of(spark).org.apache.iceberg
    spec = table.spec()
    schema = table.schema()
    key_ids = _int_array(spark, [schema.findField(k).fieldId() for k in key])
    for f in files:
        file_metrics = java_metrics(spark, table, f.path, f.metrics)
        partition = partition_data(spark, spec, f.partition) if f.partition else None
        if f.kind == DATA:
            builder = iceberg.DataFiles.builder(spec)
        else:
            builder = iceberg.FileMetadata.deleteFileBuilder(spec).ofEqualityDeletes(key_ids)
        builder = (
            builder.withPath(f.path)
            .withFormat(iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(f.bytes)
            .withMetrics(file_metrics)
        )
        if partition is not None:
            builder = builder.withPartition(partition)
        if f.kind == DATA:
            delta = delta.addRows(builder.build())
        else:
            delta = delta.addDeletes(builder.build())
    return delta


def java_metrics(spark: SparkSession, table, path: str, metrics: str | None, deletes=False):
    """Iceberg ``Metrics`` for a file an executor wrote.

    ``metrics`` is the JSON the executor computed from its own Parquet footer
    (:func:`sparkext.executors.cdc.files.parquet_metrics`); without it the footer is read here
    (slower: one read per file on the driver).
    """
    iceberg = jvm_of(spark).org.apache.iceberg
    if metrics is None:
        config = (
            iceberg.MetricsConfig.forPositionDelete(table)
            if deletes
            else iceberg.MetricsConfig.forTable(table)
        )
        return iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(path), config)
    import base64

    jvm = jvm_of(spark)
    guava = jvm.org.apache.iceberg.relocated.com.google.common
    helper = _file_metrics_class(spark)
    if helper is not None:  # sparkext's jar: the maps in one call instead of ~80
        maps = list(helper.maps(metrics))
        count = json.loads(metrics)["record_count"]
        return iceberg.Metrics(guava.primitives.Longs.stringConverter().convert(str(count)), *maps)
    values = json.loads(metrics)

    def longs(name: str):
        # py4j hands small Python ints to Java as Integer (and every Long back as an int), so
        # the values cross as strings and become Longs inside the JVM
        strings = jvm.java.util.HashMap()
        for key, value in (values.get(name) or {}).items():
            strings.put(jvm.java.lang.Integer.valueOf(int(key)), str(int(value)))
        return guava.collect.Maps.newHashMap(
            guava.collect.Maps.transformValues(strings, guava.primitives.Longs.stringConverter())
        )

    def buffers(name: str):
        out = jvm.java.util.HashMap()
        for key, value in (values.get(name) or {}).items():
            out.put(
                jvm.java.lang.Integer.valueOf(int(key)),
                jvm.java.nio.ByteBuffer.wrap(bytearray(base64.b64decode(value))),
            )
        return out

    return iceberg.Metrics(
        guava.primitives.Longs.stringConverter().convert(str(int(values["record_count"]))),
        longs("column_sizes"),
        longs("value_counts"),
        longs("null_value_counts"),
        longs("nan_value_counts"),
        buffers("lower_bounds"),
        buffers("upper_bounds"),
    )


def _file_metrics_class(spark: SparkSession):
    """``io.sparkext.spark.FileMetrics`` when sparkext's jar is on the driver, else None (a session
    built without ``sparkext.spark_conf()``: the maps are then built entry by entry)."""
    from py4j.java_gateway import JavaClass

    found = jvm_of(spark).io.sparkext.spark.FileMetrics
    return found if isinstance(found, JavaClass) else None
