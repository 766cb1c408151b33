"""Names handed to Spark as text: quoted table and column names, column paths, DDL fields.

Spark reads a name in backticks literally (a doubled backtick stands for one), so a column called
``a.b``, ``we`ird`` or ``select`` and a table called ``my-table`` are safe once quoted here.
Every place that joins names into a string Spark parses (``F.col``, ``spark.table``, a DDL
string, a metadata-table name) goes through this module; a name as a plain Python value (a join's
``on`` list, ``withColumnRenamed``, ``alias``) needs no quoting.

Floor: util.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(part: str) -> str:
    """One name part in backticks, its backticks doubled.

    >>> quote("a.b"), quote("we`ird")
    ('`a.b`', '`we``ird`')
    """
    return "`" + part.replace("`", "``") + "`"


def join(parts: Iterable[str]) -> str:
    """A multipart name with every part quoted: ``lake.db.t`` + ``files`` for a metadata table.

    >>> join(["lake", "my ns", "t", "files"])
    '`lake`.`my ns`.`t`.`files`'
    """
    return ".".join(quote(p) for p in parts)


def display(parts: Iterable[str]) -> str:
    """A multipart name as a user writes it: a part is quoted only where it must be.

    >>> display(["lake", "db", "orders"]), display(["lake", "my ns", "t"])
    ('lake.db.orders', 'lake.`my ns`.t')
    """
    return ".".join(p if _PLAIN.fullmatch(p) else quote(p) for p in parts)


def col(*parts: str) -> Column:
    """``F.col`` of the column path ``parts`` (a column, then nested field names), each quoted.

    ``col("after", "a.b")`` is field ``a.b`` of struct ``after``, where ``F.col("after.a.b")``
    would look for field ``b`` of field ``a``.
    """
    from pyspark.sql import functions as F

    return F.col(join(parts))


def cols(names: Iterable[str]) -> list[Column]:
    """``col(name)`` for each top-level column name, for ``select``/``groupBy``/``partitionBy``."""
    return [col(n) for n in names]


def ddl_fields(fields: Iterable[tuple[str, str]]) -> str:
    """A DDL schema string from (name, Spark type) pairs, names quoted.

    >>> ddl_fields([("id", "bigint"), ("a.b", "string")])
    '`id` bigint, `a.b` string'
    """
    return ", ".join(f"{quote(name)} {spark_type}" for name, spark_type in fields)


def map_in_arrow(
    frame: DataFrame,
    func: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    schema: str,
) -> DataFrame:
    """``frame.mapInArrow(func, schema)`` for columns of any name.

    PySpark's ``mapInArrow`` parses every column name (``we`ird`` fails, ``a.b`` is taken as a
    nested field); the frame crosses under positional names and ``func`` sees the real ones.
    """
    names = list(frame.columns)

    def renamed(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        return func(pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches)

    positional = frame.toDF(*(f"_c{i}" for i in range(len(names))))
    return positional.mapInArrow(renamed, schema)
