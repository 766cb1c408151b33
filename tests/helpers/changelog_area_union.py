"""Many reads collected as ONE Spark job: a UNION ALL of the frames, each row tagged with its
frame, split again on the driver.

The reads themselves are unchanged (stock Iceberg time travel, a changelog DataFrame, …); only
their scheduling is: one job runs every read's tasks side by side on both cores, where a read per
job (or per thread) pays a job's fixed cost each time. Used by the changelog, equality-delete,
tiered-optimise and maintenance tests (tests/spark/).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

TAG = "_union_read"


def collect_each(
    frames: dict[Hashable, Any], columns: Sequence[str] | None = None
) -> dict[Hashable, list[tuple]]:
    """``{key: rows of frames[key]}`` (as tuples, in no particular order) from one collect.

    ``columns`` (default: the first frame's) are selected by name from every frame; a frame
    without one of them gets NULLs there (e.g. a snapshot older than an added column)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    keys = list(frames)
    out: dict[Hashable, list[tuple]] = {key: [] for key in keys}
    if not keys:
        return out
    names = list(columns) if columns is not None else list(frames[keys[0]].columns)
    projected = []
    for index, key in enumerate(keys):
        frame = frames[key]
        present = set(frame.columns)
        projected.append(
            frame.select(
                F.lit(index).alias(TAG),
                *(
                    F.col(f"`{name}`") if name in present else F.lit(None).alias(name)
                    for name in names
                ),
            )
        )
    union = functools.reduce(DataFrame.unionAll, projected)
    for row in union.collect():
        out[keys[row[0]]].append(tuple(row[1:]))
    return out


def snapshot_rows(
    spark,
    name: str,
    snapshot_ids: Iterable[int | None],
    columns: Sequence[str] | None = None,
    key: Callable[[tuple], Any] | None = None,
) -> dict[int | None, list[tuple]]:
    """``{snapshot id: sorted rows}``, each read by stock Iceberg-Spark time travel
    (``spark.read.option("snapshot-id", …)``; None: the current table), all in one job."""
    reads = {}
    for snapshot_id in snapshot_ids:
        reader = spark.read.format("iceberg")
        if snapshot_id is not None:
            reader = reader.option("snapshot-id", str(snapshot_id))
        reads[snapshot_id] = reader.load(name)
    found = collect_each(reads, columns)
    return {s: sorted(found[s], key=key) for s in found}


def java_append(spark, name: str, rows: Sequence[dict[str, Any]], **summary: str) -> None:
    """One append snapshot of ``rows`` (a data file per partition, in its partition's directory)
    committed through Iceberg's Java API, with ``summary`` in the snapshot's summary: what a
    Spark ``writeTo(...).append()`` commits, without a Spark job."""
    import uuid

    iceberg = spark._jvm.org.apache.iceberg
    table = iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    schema, spec = table.schema(), table.spec()
    factory = iceberg.data.GenericAppenderFactory(schema, spec)
    columns = [str(f.name()) for f in schema.columns()]
    groups: dict[str, tuple[Any, list]] = {}
    for row in rows:
        record = iceberg.data.GenericRecord.create(schema)
        for column in columns:
            record.setField(column, row.get(column))
        key = None
        if not spec.isUnpartitioned():
            key = iceberg.PartitionKey(spec, schema)
            key.partition(record)
        path = "" if key is None else str(spec.partitionToPath(key))
        groups.setdefault(path, (key, []))[1].append(record)
    append = table.newAppend()
    for key, records in groups.values():
        file_name = f"append-{uuid.uuid4()}.parquet"
        location = (
            table.locationProvider().newDataLocation(file_name)
            if key is None
            else table.locationProvider().newDataLocation(spec, key, file_name)
        )
        output = iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            table.io().newOutputFile(location)
        )
        writer = factory.newDataWriter(output, iceberg.FileFormat.PARQUET, key)
        for record in records:
            writer.write(record)
        writer.close()
        append = append.appendFile(writer.toDataFile())
    for field, value in summary.items():
        append = append.set(field, value)
    append.commit()
