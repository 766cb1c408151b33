"""Partition values of CDC rows, computed on executors (pyiceberg's transforms, no JVM).

ingest_cdc writes partitioned tables only when every partition field derives from primary-key
columns (identity, bucket[N], truncate[W]): a key's rows and its equality deletes then always
fall in the same partition, which Iceberg needs to apply the deletes (Flink's upsert writer has
the same rule).

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SUPPORTED = ("identity", "bucket", "truncate")


@dataclass(frozen=True)
class PartitionField:
    name: str  # the partition field's name, e.g. "id_bucket"
    source: str  # the source column
    transform: str  # Iceberg's text: "identity", "bucket[16]", "truncate[4]"
    source_type: str  # the source column's Spark type, e.g. "bigint"


def unsupported(fields: Sequence[PartitionField], key: Sequence[str]) -> list[str]:
    """Descriptions of the fields ingest_cdc cannot keep consistent; empty when all is fine.

    >>> unsupported([PartitionField("id_bucket", "id", "bucket[8]", "bigint")], ["id"])
    []
    >>> unsupported([PartitionField("d_day", "d", "day", "date")], ["id"])
    ['day(d)']
    """
    bad = []
    for f in fields:
        kind = f.transform.split("[", 1)[0]
        typed = kind == "identity" or f.source_type in ("int", "bigint", "string", "binary")
        if f.source not in key or kind not in SUPPORTED or not typed:
            bad.append(f"{f.transform}({f.source})")
    return bad


def _iceberg_type(spark_type: str):
    from pyiceberg import types

    return {
        "int": types.IntegerType(),
        "bigint": types.LongType(),
        "string": types.StringType(),
        "binary": types.BinaryType(),
    }.get(spark_type)


def partitioner(
    fields: Sequence[PartitionField],
) -> Callable[[Mapping[str, list[Any]]], list[tuple[str, ...]]]:
    """A function from column lists to each row's partition values as Iceberg partition strings.

    >>> p = partitioner([PartitionField("id_bucket", "id", "bucket[16]", "bigint")])
    >>> p({"id": [5, 1234567890123]})
    [('7',), ('14',)]
    """
    from pyiceberg.transforms import parse_transform

    functions = []
    for f in fields:
        transform = parse_transform(f.transform)
        iceberg_type = _iceberg_type(f.source_type)
        if iceberg_type is None and f.transform != "identity":
            raise ValueError(f"{f.transform} of a {f.source_type} column")
        functions.append(
            (f.source, transform.transform(iceberg_type) if iceberg_type else (lambda v: v))
        )

    def values(columns: Mapping[str, list[Any]]) -> list[tuple[str, ...]]:
        per_field = [[_text(fn(v)) for v in columns[source]] for source, fn in functions]
        return list(zip(*per_field, strict=True))

    return values


def _text(value: Any) -> str:
    """Iceberg's partition string of a transformed value (Conversions.fromPartitionString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_partition_by(text: str) -> tuple[tuple[str, str, int | None], ...]:
    """The ``partition-by`` option: ``id``, ``bucket(16, id)``, ``truncate(4, code)``, comma-joined.

    >>> parse_partition_by("bucket(16, id), region")
    (('bucket', 'id', 16), ('identity', 'region', None))
    """
    import re

    if not text.strip():
        return ()
    pattern = re.compile(r"\s*(?:(bucket|truncate)\s*\(\s*(\d+)\s*,\s*(\w+)\s*\)|(\w+))\s*")
    result: list[tuple[str, str, int | None]] = []
    position = 0
    while position < len(text):
        match = pattern.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(
                "expected column, bucket(N, column) or truncate(W, column), comma-separated"
            )
        if match.group(4):
            result.append(("identity", match.group(4), None))
        else:
            result.append((match.group(1), match.group(3), int(match.group(2))))
        position = match.end()
        if position < len(text):
            if text[position] != ",":
                raise ValueError("separate partition fields with commas")
            position += 1
    return tuple(result)
