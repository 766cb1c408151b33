"""Lay out a group's rows for its output files: bin-pack, linear sort, Z-order or Hilbert.

Runs as Spark plans over the staged read of a group (no JVM objects here): a clustering samples
the cluster columns (one pass over those columns only, a bounded number of rows to the
driver), turns the sample into per-column quantile boundaries (:func:`curves.boundaries`),
computes every row's curve key on the executors in Arrow batches (``mapInArrow`` with
:func:`curves.curve_key`), range-partitions by the key into one task per output file and sorts
each task by it. ``linear`` range-partitions and sorts by the columns themselves.

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sparkext import identifiers
from sparkext.errors import ProcedureArgumentError, did_you_mean
from sparkext.executors import curves
from sparkext.executors.curves import curve_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KEY = "__sparkext_curve_key"
CURVES = ("auto", "zorder", "hilbert", "linear")
SAMPLE_ROWS = 200_000  # rows of the cluster columns sampled for the boundaries
BUCKETS = 4096  # quantile buckets per column (curves: finer gains nothing at file granularity)


def resolve_curve(curve: str, columns: Sequence[str]) -> str:
    """The curve a run uses: ``auto`` is ``linear`` for one column, else ``hilbert``.

    Hilbert for two or more columns: at the same number of files it scans fewer of them for
    range predicates than Z-order (no long jumps between consecutive keys, so each file covers
    one compact box), and computing it costs little next to reading and writing the rows.

    >>> resolve_curve("auto", ["a"]), resolve_curve("auto", ["a", "b"])
    ('linear', 'hilbert')
    >>> resolve_curve("zorder", ["a"])
    'linear'
    """
    if curve not in CURVES:
        raise ProcedureArgumentError(
            f"Unknown curve '{curve}'{did_you_mean(curve, CURVES)}: use one of {', '.join(CURVES)}."
        )
    if len(columns) == 1:
        return "linear"
    if len(columns) > curves.MAX_COLUMNS and curve != "linear":
        raise ProcedureArgumentError(
            f"A {curve if curve != 'auto' else 'space-filling'} curve clusters at most "
            f"{curves.MAX_COLUMNS} columns, got {len(columns)}: cluster by fewer columns or use "
            "curve => 'linear'."
        )
    return "hilbert" if curve == "auto" else curve


def output_tasks(input_bytes: int, target_file_bytes: int) -> int:
    """One write task per output file of about the target size.

    >>> output_tasks(10, 4), output_tasks(0, 4)
    (3, 1)
    """
    return max(1, math.ceil(input_bytes / max(1, target_file_bytes)))


def cluster(
    frame: DataFrame, columns: Sequence[str], curve: str, tasks: int, records: int
) -> DataFrame:
    """``frame`` range-partitioned into ``tasks`` tasks and sorted along ``curve``."""
    names = [identifiers.col(c) for c in columns]
    if curve == "linear":
        return frame.repartitionByRange(tasks, *names).sortWithinPartitions(*names)
    keyed = with_curve_key(frame, columns, curve, records)
    return keyed.repartitionByRange(tasks, KEY).sortWithinPartitions(KEY).drop(KEY)


def with_curve_key(frame: DataFrame, columns: Sequence[str], curve: str, records: int) -> DataFrame:
    """``frame`` plus a bigint column ``KEY``: each row's ``curve`` key over ``columns``."""
    from pyspark.sql.types import LongType, StructField, StructType

    fraction = min(1.0, SAMPLE_ROWS / max(1, records))
    sample = frame.select(*[identifiers.col(c) for c in columns])
    if fraction < 1.0:
        sample = sample.sample(False, fraction, seed=17)
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(sample.schema)
    batches = sample._collect_as_arrow()  # a bounded sample of the cluster columns only
    table = pa.Table.from_batches(batches) if batches else arrow_schema.empty_table()
    bounds = [curves.boundaries(table.column(i), BUCKETS) for i in range(len(columns))]
    positions = [frame.columns.index(_resolve(frame, c)) for c in columns]
    schema = StructType([*frame.schema.fields, StructField(KEY, LongType(), False)])
    return frame.mapInArrow(_key_function(positions, bounds, curve), schema)


def _resolve(frame: DataFrame, column: str) -> str:
    for name in frame.columns:
        if name.lower() == column.lower():
            return name
    raise ProcedureArgumentError(
        f"Column '{column}' is not in the table{did_you_mean(column, frame.columns)}: "
        "cluster by top-level columns."
    )


def _key_function(
    positions: list[int], bounds: list[Any], curve: str
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    # pyarrow is untyped here (no stubs): its batches and arrays are Any
    def add_keys(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            key = curve_key([batch.column(p) for p in positions], bounds, curve)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(key, type=pa.int64())],
                schema=batch.schema.append(pa.field(KEY, pa.int64(), nullable=False)),
            )

    return add_keys
