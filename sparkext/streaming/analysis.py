"""What the stream→batch rules tell each other, as one immutable value: :class:`Analysis`.

Floor: streaming rules (pure; no pyspark).

A rule is ``rule(expression, context, analysis) -> Step(expression, analysis)``: it reads the
facts it needs from ``analysis`` and hands what it found to the rules after it by returning a
new :class:`Analysis` (``dataclasses.replace``), never by writing ``node.meta`` or mutating the
context. :func:`analyze` computes up front what the parsed query already says (the dimensions a
temporal or lookup join reads); what only exists once an earlier rule rewrote the tree (the
SELECT that keeps a range's windows, how far back a source is read once a join relates it to a
window, the emission) is handed over by the rule that made it, and the driver
(:func:`sparkext.streaming.rules.run_rules`) threads it to the next rule.

Facts about nodes are keyed by the node's identity (:class:`NodeMap`): sqlglot nodes compare by
structure (two reads of the same table are equal), and the rules rewrite around the nodes they
describe without copying them, so identity is exactly "this reference".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Generic, NamedTuple, TypeVar

from sqlglot import exp

from sparkext.streaming.context import (
    Emission,
    RewriteContext,
    Source,
    ViewSpec,
    WindowRelation,
)

V = TypeVar("V")


class NodeMap(Generic[V]):
    """An immutable mapping from syntax-tree nodes (by identity) to values.

    It keeps the nodes themselves, so an id is never reused while the map lives.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[int, tuple[exp.Expr, V]] | None = None) -> None:
        self._items: Mapping[int, tuple[exp.Expr, V]] = MappingProxyType(dict(items or {}))

    def get(self, node: exp.Expr | None, default: V | None = None) -> V | None:
        found = self._items.get(id(node))
        return default if found is None else found[1]

    def __contains__(self, node: object) -> bool:
        return id(node) in self._items

    def __iter__(self) -> Iterator[exp.Expr]:
        return (node for node, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def set(self, node: exp.Expr, value: V) -> NodeMap[V]:
        """A new map with ``node`` → ``value``."""
        return NodeMap({**self._items, id(node): (node, value)})

    def __repr__(self) -> str:
        return f"NodeMap({[(n.sql(), v) for n, v in self._items.values()]})"


class NodeSet:
    """An immutable set of syntax-tree nodes (by identity)."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: NodeMap[bool] | None = None) -> None:
        self._nodes: NodeMap[bool] = nodes if nodes is not None else NodeMap()

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __iter__(self) -> Iterator[exp.Expr]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def add(self, *nodes: exp.Expr) -> NodeSet:
        """A new set with ``nodes`` too."""
        result = self._nodes
        for node in nodes:
            result = result.set(node, True)
        return NodeSet(result)

    def __repr__(self) -> str:
        return f"NodeSet({[n.sql() for n in self]})"


@dataclass(frozen=True, eq=False)
class Analysis:
    """Everything a rule learns from the rules before it, beside the tree itself."""

    # table references (and derived tables) read as a dimension of a temporal/lookup join:
    # never bounded to the range, never a stream
    dimensions: NodeSet = field(default_factory=NodeSet)
    # a window TVF's DATA table → its DESCRIPTOR column (the event time of an undeclared table)
    descriptors: NodeMap[str] = field(default_factory=NodeMap)
    # TVF DATA tables a rule built (the parser marks the ones written as TABLE t in meta)
    table_arguments: NodeSet = field(default_factory=NodeSet)
    # their SESSION PARTITION BY keys (a legacy GROUP BY SESSION(…)'s other keys)
    partition_by: NodeMap[tuple[exp.Expr, ...]] = field(default_factory=NodeMap)
    # a source table → how far before the range's start it is read (UNBOUNDED: its history);
    # absent and 0 differ: a window's source is "looked back" even when nothing widened it
    lookbacks: NodeMap[timedelta] = field(default_factory=NodeMap)
    # a source table → how far past the range's end it is read (an interval join's other side)
    lookaheads: NodeMap[timedelta] = field(default_factory=NodeMap)
    # the SELECT that keeps a range's windows → how its time columns relate to the window end
    windows: NodeMap[WindowRelation] = field(default_factory=NodeMap)
    # a window TVF's output subquery → its DATA table (a join on its time finds the source)
    window_sources: NodeMap[exp.Table] = field(default_factory=NodeMap)
    # window functions a rule wrote (the dedup's LAG): not the user's OVER aggregation
    generated: NodeSet = field(default_factory=NodeSet)
    # source tables whose own rows the query emits (dedup, OVER aggregation, an interval
    # join's probe side); recorded for the reader, no rule decides on it
    emitting: NodeSet = field(default_factory=NodeSet)
    emission: Emission | None = None  # which rows of the query belong to a range
    completion_delay: timedelta = timedelta(0)  # how far behind the watermark a range is complete
    notes: tuple[str, ...] = ()
    views: tuple[ViewSpec, ...] = ()

    def source(
        self, context: RewriteContext, table: exp.Table, descriptor: str | None = None
    ) -> Source:
        """The context's view of ``table`` with what the rules found about it."""
        return context.source(
            table,
            descriptor or self.descriptors.get(table),
            dimension=table in self.dimensions,
            table_argument=table in self.table_arguments,
        )

    def is_table_argument(self, table: exp.Expr) -> bool:
        """``TABLE t`` of a window TVF: written so (the parser's mark) or built by a rule."""
        return bool(table.meta.get("table_argument")) or table in self.table_arguments

    def partition_keys(self, table: exp.Expr) -> list[exp.Expr]:
        """A SESSION's PARTITION BY keys: a rule's, else the parser's."""
        if table in self.partition_by:
            return list(self.partition_by.get(table) or ())
        return list(table.meta.get("partition_by", []))

    def lookback(self, table: exp.Expr) -> timedelta:
        return self.lookbacks.get(table) or timedelta(0)

    def lookahead(self, table: exp.Expr) -> timedelta:
        return self.lookaheads.get(table) or timedelta(0)

    def window(self, node: exp.Expr) -> WindowRelation | None:
        return self.windows.get(node)

    def emit(self, emission: Emission) -> Analysis:
        """The query's emission: the first found, except that windows outrank rows."""
        if self.emission is None or (self.emission.kind == "rows" and emission.kind == "window"):
            return replace(self, emission=emission)
        return self

    def look_back(self, table: exp.Expr, lookback: timedelta) -> Analysis:
        return replace(self, lookbacks=self.lookbacks.set(table, lookback))

    def note(self, text: str) -> Analysis:
        return replace(self, notes=(*self.notes, text))

    def view(self, spec: ViewSpec) -> Analysis:
        return replace(self, views=(*self.views, spec))


class Step(NamedTuple):
    """What a rule returns: the rewritten expression and the analysis for the next rule."""

    expression: exp.Expr
    analysis: Analysis


Rule = Callable[[exp.Expr, RewriteContext, Analysis], Step]


def analyze(expression: exp.Expr, context: RewriteContext) -> Analysis:
    """What the parsed query says before any rule ran.

    The tables read ``FOR SYSTEM_TIME AS OF <column>`` are dimensions: the temporal-join rule
    replaces or versions them, and until then no rule may take them for a stream. The context
    is an argument so the analysis has what the rules have (the job and the catalog).
    """
    del context  # the dimensions are syntactic; kept in the signature for what may follow
    dimensions = NodeSet().add(
        *(
            table
            for table in expression.find_all(exp.Table)
            if isinstance(version := table.args.get("version"), exp.Version)
            and isinstance(version.expression, exp.Column)
        )
    )
    return Analysis(dimensions=dimensions)
