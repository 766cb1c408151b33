"""Plan how a CDC table's schema follows its source: new columns, allowed widenings, refusals.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sparkext.errors import SchemaChangeError

# Type promotions Iceberg allows (spec: int -> long, float -> double, and a decimal's precision
# at the same scale, below).
WIDENINGS = {("int", "bigint"), ("float", "double")}
# Types JSON inference reports, and the table types each can fill without loss (decimals and
# lists too: their JSON numbers and arrays parse into them exactly).
_LOOSE = {
    "bigint": {"int", "bigint", "float", "double", "decimal"},
    "double": {"float", "double", "decimal"},
    "boolean": {"boolean"},
    "string": {"string", "date", "timestamp", "timestamp_ntz", "array"},
}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def _family(spark_type: str) -> str:
    """``decimal`` for any ``decimal(p,s)``, ``array`` for any ``array<...>``; else the type."""
    return spark_type.split("(")[0].split("<")[0]


def _decimal_change(column: str, old: str, new: str) -> str | None:
    """For two decimal types: "widen" (more precision), "fits" (less), or a SchemaChangeError
    (another scale); None when either is not a decimal."""
    old_match, new_match = _DECIMAL.match(old), _DECIMAL.match(new)
    if not (old_match and new_match):
        return None
    old_p, old_s = (int(g) for g in old_match.groups())
    new_p, new_s = (int(g) for g in new_match.groups())
    if old_s != new_s:
        raise SchemaChangeError(
            f"Column '{column}' changed from {old} to {new} in the source and Iceberg widens a "
            "decimal's precision only at the same scale; ingestion stopped and nothing of this "
            "batch was committed (add a new column in the source instead, or recreate the "
            "table)."
        )
    return "widen" if new_p > old_p else "fits"


@dataclass(frozen=True)
class SchemaPlan:
    additions: tuple[tuple[str, str], ...] = ()
    widenings: tuple[tuple[str, str], ...] = ()

    @property
    def changes(self) -> bool:
        return bool(self.additions or self.widenings)


def plan_schema(table: Mapping[str, str], batch: Mapping[str, str], exact: bool) -> SchemaPlan:
    """Compare the table's columns with a batch's (``exact``: types from a Connect schema).

    >>> plan_schema({"id": "int"}, {"id": "bigint", "note": "string"}, exact=True)
    SchemaPlan(additions=(('note', 'string'),), widenings=(('id', 'bigint'),))
    >>> plan_schema({"id": "int"}, {"id": "bigint"}, exact=False)
    SchemaPlan(additions=(), widenings=())
    >>> plan_schema({"m": "decimal(10,2)"}, {"m": "decimal(12,2)"}, exact=True).widenings
    (('m', 'decimal(12,2)'),)
    """
    additions, widenings = [], []
    for column, new in batch.items():
        old = table.get(column)
        if old is None:
            additions.append((column, new))
        elif old == new:
            continue
        elif exact and (old, new) in WIDENINGS:
            widenings.append((column, new))
        elif not exact and _family(old) in _LOOSE.get(new, set()):
            continue
        elif exact and (new, old) in WIDENINGS:
            continue  # a narrower source type still fits the wider column
        elif exact and (old, new) == ("timestamp", "timestamp_ntz"):
            continue  # a table made when zone-less times were stored as UTC instants: kept so
        elif exact and (change := _decimal_change(column, old, new)) is not None:
            if change == "widen":
                widenings.append((column, new))
        else:
            raise SchemaChangeError(
                f"Column '{column}' changed from {old} to {new} in the source and Iceberg "
                "cannot convert it; ingestion stopped and nothing of this batch was committed "
                "(add a new column in the source instead, or recreate the table)."
            )
    return SchemaPlan(tuple(additions), tuple(widenings))
