"""The lake's rows and a source database's rows side by side, for the real-connector tests: each
test module brings its own per-type canonical texts (its oracle); the comparison is here."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def lake_rows(spark, table: str, key: str, columns: Sequence, canonical: Callable) -> dict:
    """key tuple (as text) -> row, each column as ``canonical(name, kind)`` makes it (Spark SQL)."""
    keys = key.split(",")
    exprs = ", ".join(f"{canonical(n, k)} AS `{n}`" for n, _, _, k in columns)
    rows = spark.sql(f"SELECT {', '.join(keys)}, {exprs} FROM {table}").collect()
    return {tuple(str(r[k]) for k in keys): r.asDict() for r in rows}


def mismatches(source: dict, lake: dict, columns: Sequence, same: Callable, name: str) -> list[str]:
    """Every difference between the two, in words (``name``: the source database)."""
    found = [f"key {k} only in {name}" for k in sorted(set(source) - set(lake))]
    found += [f"key {k} only in the lake" for k in sorted(set(lake) - set(source))]
    for k in sorted(set(source) & set(lake)):
        for column, _, _, kind in columns:
            a, b = source[k].get(column), lake[k].get(column)
            if not same(kind, a, b):
                found.append(
                    f"key {k} column {column}: {name} {str(a)[:80]!r}, lake {str(b)[:80]!r}"
                )
    return found
