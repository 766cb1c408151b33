"""The predicate JSON a query's filter arrives as, read into a tree with NOT pushed to the leaves.

A file may be skipped only when no row of it makes the whole filter TRUE, so the tree is read
for "may some row satisfy it": ``and`` needs both sides, ``or`` either. ``not`` moves down by De
Morgan, and a negated leaf becomes its complement under SQL's three-valued logic (``not (c = v)``
is ``c <> v``: some non-null value other than v; ``not (c in (...))`` is ``c not in (...)``,
never true when the list holds a NULL; ``not (c < v)`` is ``c >= v``; ``not (c is null)`` is ``c
is not null``; ``not (c <=> v)`` is ``c`` distinct from v). The negation of anything else
(``not (c like 'a%')``, ``unknown``) may be true: it is kept. Comparisons with NULL are never true.
A conjunction's ``lt/le/gt/ge`` leaves on one column become one ``range`` leaf, so that an index
can answer ``c >= 10 and c < 20`` as the range it is.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

VALUE_OPS = frozenset({"eq", "ne", "eq_null_safe", "ne_null_safe", "lt", "le", "gt", "ge"})
LIST_OPS = frozenset({"in", "not_in"})
TEXT_OPS = frozenset({"starts_with", "ends_with", "contains", "like", "rlike"})
RANGE_OPS = frozenset({"lt", "le", "gt", "ge"})
_NEGATE = {
    "eq": "ne",
    "ne": "eq",
    "eq_null_safe": "ne_null_safe",
    "ne_null_safe": "eq_null_safe",
    "in": "not_in",
    "not_in": "in",
    "lt": "ge",
    "ge": "lt",
    "le": "gt",
    "gt": "le",
    "is_null": "is_not_null",
    "is_not_null": "is_null",
}


@dataclass(frozen=True)
class Leaf:
    """One condition on one column (``fold``: it applies to lower(col) or upper(col))."""

    op: str
    col: str
    type: str = ""
    value: Any = None
    values: tuple[Any, ...] = ()
    pattern: str = ""
    escape: str = "\\"
    fold: str | None = None
    bounds: tuple[tuple[str, Any], ...] = ()  # op "range": (lt|le|gt|ge, value) pairs


@dataclass(frozen=True)
class All:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Any_:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Const:
    """TRUE: may hold anywhere (unknown); FALSE: holds for no row."""

    value: bool


Node = Leaf | All | Any_ | Const
TRUE = Const(True)
FALSE = Const(False)


def parse(predicate: str | Mapping[str, Any]) -> Node:
    """The predicate JSON (text or parsed) as a tree with NOT pushed down.

    >>> parse('{"op": "not", "arg": {"op": "in", "col": "c", "type": "int", "values": [1, 2]}}')
    Leaf(op='not_in', col='c', type='int', value=None, values=(1, 2), pattern='', escape='\\\\', \
fold=None, bounds=())
    """
    try:
        data = json.loads(predicate) if isinstance(predicate, str) else predicate
    except ValueError:
        return TRUE  # no predicate to read: every file may match
    return _node(data, False)


def _node(data: Any, negate: bool) -> Node:
    if not isinstance(data, Mapping):
        return TRUE
    op = data.get("op")
    if op in ("and", "or"):
        args = data.get("args")
        if not isinstance(args, list):
            return TRUE
        parts = tuple(_node(a, negate) for a in args)
        return _all(parts) if (op == "and") != negate else _any(parts)
    if op == "not":
        return _node(data.get("arg"), not negate)
    try:
        leaf = _leaf(data)
    except (TypeError, ValueError, KeyError):
        return TRUE
    if isinstance(leaf, Const):
        # TRUE is "unknown", whose negation is unknown too; FALSE is a comparison with NULL,
        # NULL whether negated or not: never true.
        return leaf
    if negate:
        if leaf.op not in _NEGATE:
            return TRUE
        leaf = replace(leaf, op=_NEGATE[leaf.op])
    return _simplify(leaf)


def _leaf(data: Mapping[str, Any]) -> Leaf | Const:
    op = data["op"]
    if op in ("is_null", "is_not_null"):
        return Leaf(op, _text(data["col"]))
    col, type_name = _text(data["col"]), _text(data.get("type", ""))
    fold = data.get("fold")
    if fold not in (None, "lower", "upper"):
        return TRUE
    if op in VALUE_OPS:
        return Leaf(op, col, type_name, data["value"], fold=fold)
    if op in LIST_OPS:
        values = data["values"]
        if not isinstance(values, list):
            return TRUE
        return Leaf(op, col, type_name, values=tuple(values), fold=fold)
    if op in ("starts_with", "ends_with", "contains"):
        return Leaf(op, col, type_name, _text(data["value"]), fold=fold)
    if op == "like":
        escape = _text(data.get("escape", "\\"))
        if len(escape) != 1:
            return TRUE
        return Leaf(op, col, type_name, pattern=_text(data["pattern"]), escape=escape, fold=fold)
    if op == "rlike":
        return Leaf(op, col, type_name, pattern=_text(data["pattern"]), fold=fold)
    return TRUE


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _simplify(leaf: Leaf) -> Node:
    """SQL's NULL rules, before any index: a comparison with NULL is never true."""
    op = leaf.op
    if op in ("eq", "ne", "lt", "le", "gt", "ge") and leaf.value is None:
        return FALSE
    if op in ("starts_with", "ends_with", "contains") and leaf.value is None:
        return FALSE
    if op == "in":
        values = tuple(v for v in leaf.values if v is not None)
        return replace(leaf, values=values) if values else FALSE
    if op == "not_in":
        if any(v is None for v in leaf.values):
            return FALSE
        if not leaf.values:
            return Leaf("is_not_null", leaf.col)
    if op == "eq_null_safe" and leaf.value is None:
        return Leaf("is_null", leaf.col)
    if op == "ne_null_safe" and leaf.value is None:
        return Leaf("is_not_null", leaf.col)
    return leaf


def _all(parts: tuple[Node, ...]) -> Node:
    flat: list[Node] = []
    for part in parts:
        if part == FALSE:
            return FALSE
        if isinstance(part, All):
            flat.extend(part.parts)
        elif part != TRUE:
            flat.append(part)
    flat = _ranges(flat)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else All(tuple(flat))


def _any(parts: tuple[Node, ...]) -> Node:
    flat: list[Node] = []
    for part in parts:
        if part == TRUE:
            return TRUE
        if isinstance(part, Any_):
            flat.extend(part.parts)
        elif part != FALSE:
            flat.append(part)
    if not flat:
        return FALSE
    return flat[0] if len(flat) == 1 else Any_(tuple(flat))


def _ranges(parts: list[Node]) -> list[Node]:
    """``lt/le/gt/ge`` (and ``range``) leaves of one column, type and fold → one ``range``."""
    groups: dict[tuple[str, str, str | None], list[tuple[str, Any]]] = {}
    rest: list[Node] = []
    for part in parts:
        if isinstance(part, Leaf) and part.op in RANGE_OPS | {"range"}:
            key = (part.col, part.type, part.fold)
            bounds = part.bounds if part.op == "range" else ((part.op, part.value),)
            groups.setdefault(key, []).extend(bounds)
        else:
            rest.append(part)
    for (col, type_name, fold), pairs in groups.items():
        if len(pairs) == 1:
            rest.append(Leaf(pairs[0][0], col, type_name, pairs[0][1], fold=fold))
        else:
            rest.append(Leaf("range", col, type_name, fold=fold, bounds=tuple(pairs)))
    return rest


def leaves(node: Node) -> list[Leaf]:
    """Every leaf of a tree."""
    if isinstance(node, Leaf):
        return [node]
    if isinstance(node, All | Any_):
        return [leaf for part in node.parts for leaf in leaves(part)]
    return []
