"""Which data files a query must read: the predicate evaluated against the loaded indexes.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkext.planning.skipping.answers import answer
from sparkext.planning.skipping.blob import LoadedIndex
from sparkext.planning.skipping.predicate import All, Any_, Const, Leaf, Node, parse


@dataclass(frozen=True)
class Pruned:
    """``keep``: per candidate, read it; ``used``: the indexes that answered a leaf, as
    ``"bloom_filter, request_id"`` in the order of ``indexes``."""

    keep: np.ndarray
    used: tuple[str, ...]

    @property
    def kept(self) -> int:
        return int(self.keep.sum())


@dataclass
class _Bound:
    """One index, mapped onto this call's candidates."""

    index: LoadedIndex
    present: np.ndarray  # candidate positions the index lists
    rows: np.ndarray  # their rows in the index
    used: bool = False


def prune(
    indexes: Sequence[LoadedIndex], predicate: str | Mapping[str, Any], candidates: Sequence[str]
) -> Pruned:
    """Per candidate data file: may it hold a row for which ``predicate`` is TRUE?

    A file is skipped only when, for the predicate with NOT pushed down, some index rules out
    every way the predicate could be TRUE in it (AND: either side ruled out; OR: both). A leaf
    on a column without an index, one an index cannot answer, and a candidate an index does not
    list are "may".
    """
    tree = parse(predicate)
    count = len(candidates)
    by_column: dict[str, list[_Bound]] = {}
    columns = {leaf_col for leaf_col in _columns(tree)}
    for index in indexes:
        if index.spec.column not in columns:
            continue
        rows = np.fromiter((index.row_of.get(p, -1) for p in candidates), np.int64, count)
        present = np.nonzero(rows >= 0)[0]
        by_column.setdefault(index.spec.column, []).append(_Bound(index, present, rows[present]))
    keep = _evaluate(tree, count, by_column)
    labels: list[str] = []
    for bounds in by_column.values():
        labels.extend(b.index.spec.label for b in bounds if b.used)
    order = {index.spec.label: at for at, index in enumerate(indexes)}
    used = tuple(dict.fromkeys(sorted(labels, key=lambda label: order[label])))
    return Pruned(keep, used)


def _columns(node: Node) -> set[str]:
    if isinstance(node, Leaf):
        return {node.col}
    if isinstance(node, All | Any_):
        return set().union(*(_columns(p) for p in node.parts))
    return set()


def _evaluate(node: Node, count: int, by_column: dict[str, list[_Bound]]) -> np.ndarray:
    if isinstance(node, Const):
        return np.full(count, node.value, bool)
    if isinstance(node, All):
        result = np.ones(count, bool)
        for part in node.parts:
            result &= _evaluate(part, count, by_column)
            if not result.any():
                break
        return result
    if isinstance(node, Any_):
        result = np.zeros(count, bool)
        for part in node.parts:
            result |= _evaluate(part, count, by_column)
            if result.all():
                break
        return result
    result = np.ones(count, bool)
    for bound in by_column.get(node.col, []):
        may, answered = answer(bound.index, node, bound.rows)
        bound.used |= answered
        result[bound.present] &= may
    return result
