"""Plan how a CDC table's schema follows its source: new columns, allowed widenings, refusals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparkext.errors import SchemaChangeError

# Type promotions Iceberg allows (spec: int -> long, float -> double).
WIDENINGS = {("int", "bigint"), ("float", "double")}
# Types JSON inference reports, and the table types each can fill without loss.
_LOOSE = {
    "bigint": {"int", "bigint", "float", "double"},
    "double": {"float", "double"},
    "boolean": {"boolean"},
    "string": {"string", "date", "timestamp"},
}


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
        elif not exact and old in _LOOSE.get(new, set()):
            continue
        elif exact and (new, old) in WIDENINGS:
            continue  # a narrower source type still fits the wider column
        else:
            raise SchemaChangeError(
                f"Column '{column}' changed from {old} to {new} in the source and Iceberg "
                "cannot convert it; ingestion stopped and nothing of this batch was committed "
                "(add a new column in the source instead, or recreate the table)."
            )
    return SchemaPlan(tuple(additions), tuple(widenings))
