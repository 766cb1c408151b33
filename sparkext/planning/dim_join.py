"""Pure planning for ``sparkext.dim_join_changelog``: the join keys, the output columns, the
truncates a version must survive, and how a stream brings its dimension state forward.

No pyspark here: every function takes names, sizes and snapshot facts and returns plain data,
so the rules are unit-tested in milliseconds (tests/pure/test_dim_join_plan.py).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp, parse_one
from sqlglot.errors import ParseError

from sparkext.errors import ProcedureArgumentError

_NAME = re.compile(r"\w+")
FACT_ALIASES = ("f", "fact", "facts")
DIM_ALIASES = ("d", "dim", "dimension")
MODES = ("event", "processing")


@dataclass(frozen=True)
class KeyPair:
    fact: str  # a column of the facts
    dim: str  # the dimension column it equals


def parse_on(
    text: str, fact_names: Sequence[str] = (), dim_names: Sequence[str] = ()
) -> list[KeyPair]:
    """The equalities of ``on``: column names shared by both sides (``'item_id, region'``) or
    ``fact = dim`` conditions joined by AND (``'f.item = d.item_id'``; ``f``/``d`` or the
    tables' own names qualify a side, an unqualified pair is fact = dimension).

    >>> parse_on("item_id")
    [KeyPair(fact='item_id', dim='item_id')]
    >>> parse_on("d.item_id = f.item AND f.r = d.region")
    [KeyPair(fact='item', dim='item_id'), KeyPair(fact='r', dim='region')]
    """
    text = (text or "").strip()
    if not text:
        raise ProcedureArgumentError(
            "on is empty; name the join keys, e.g. 'item_id' or 'f.item = d.item_id'."
        )
    if not any(c in text for c in "=<>()") and " and " not in text.lower():
        names = [n.strip().strip("`") for n in text.split(",")]
        if not all(_NAME.fullmatch(n) for n in names):
            raise ProcedureArgumentError(
                f"on '{text}' is not a list of column names; write 'item_id, region'."
            )
        return [KeyPair(n, n) for n in names]
    try:
        condition = parse_one(text, dialect="spark")
    except ParseError:
        condition = None
    pairs = []
    for part in _conjuncts(condition):
        if not (
            isinstance(part, exp.EQ)
            and isinstance(part.this, exp.Column)
            and isinstance(part.expression, exp.Column)
        ):
            raise ProcedureArgumentError(
                f"on '{text}' must be column equalities joined by AND, such as "
                "'f.item = d.item_id AND f.region = d.region'."
            )
        left, right = part.this, part.expression
        sides = (_side(left, fact_names, dim_names), _side(right, fact_names, dim_names))
        if sides in (("d", "f"), ("d", None), (None, "f")):
            left, right = right, left
        elif sides not in (("f", "d"), ("f", None), (None, "d"), (None, None)):
            raise ProcedureArgumentError(
                f"on '{text}': '{part.sql(dialect='spark')}' compares two columns of one side; "
                "qualify the facts' column with f. and the dimension's with d."
            )
        pairs.append(KeyPair(left.name, right.name))
    return pairs


def _conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if condition is None:
        return [exp.Null()]
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    return [condition.unnest() if isinstance(condition, exp.Paren) else condition]


def _side(column: exp.Column, fact_names: Sequence[str], dim_names: Sequence[str]) -> str | None:
    qualifier = column.table.lower()
    if not qualifier:
        return None
    if qualifier in FACT_ALIASES or qualifier in {n.lower() for n in fact_names}:
        return "f"
    if qualifier in DIM_ALIASES or qualifier in {n.lower() for n in dim_names}:
        return "d"
    raise ProcedureArgumentError(
        f"on: '{column.sql(dialect='spark')}' is qualified by '{column.table}', which is neither "
        "the facts (f) nor the dimension (d)."
    )


@dataclass(frozen=True)
class Output:
    """The dimension columns a join returns, as (dimension column, output name)."""

    columns: tuple[tuple[str, str], ...]


def output_columns(
    fact_columns: Sequence[str],
    dim_columns: Sequence[str],
    keys: Sequence[KeyPair],
    wanted: Sequence[str] | None,
    prefix: str,
    audit: Sequence[str] = (),
) -> Output:
    """Which dimension columns come back and under which names: the requested ones (default:
    every column but the join keys), prefixed, none clashing with a fact column.

    >>> output_columns(["id", "item_id"], ["item_id", "name"], [KeyPair("item_id", "item_id")],
    ...                None, "").columns
    (('name', 'name'),)
    """
    fact_columns = list(fact_columns)
    for pair in keys:
        if pair.fact.lower() not in {c.lower() for c in fact_columns}:
            raise ProcedureArgumentError(
                f"on: '{pair.fact}' is not a column of the facts; they have "
                f"{', '.join(fact_columns)}."
            )
        if pair.dim.lower() not in {c.lower() for c in dim_columns}:
            raise ProcedureArgumentError(
                f"on: '{pair.dim}' is not a column of the dimension; it has "
                f"{', '.join(dim_columns)}."
            )
    by_lower = {c.lower(): c for c in dim_columns}
    if wanted is None:
        key_names = {p.dim.lower() for p in keys}
        chosen = [c for c in dim_columns if c.lower() not in key_names]
    else:
        unknown = [w for w in wanted if w.lower() not in by_lower]
        if unknown:
            raise ProcedureArgumentError(
                f"columns: '{unknown[0]}' is not a column of the dimension; it has "
                f"{', '.join(dim_columns)}."
            )
        chosen = [by_lower[w.lower()] for w in wanted]
    taken = {c.lower() for c in fact_columns} | {a.lower() for a in audit}
    pairs = []
    for name in chosen:
        alias = prefix + name
        if alias.lower() in taken:
            raise ProcedureArgumentError(
                f"the dimension column '{name}' would clash with the facts' column '{alias}'; "
                "choose the columns with options map('columns', '…') or prefix them with "
                "map('column-prefix', 'dim_')."
            )
        taken.add(alias.lower())
        pairs.append((name, alias))
    return Output(tuple(pairs))


def truncate_floors(truncates: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """For truncates as (event time in µs, source position), the position every version must
    exceed from each truncate's time on: the newest position among truncates at or before it.

    A truncate removes every row written before it in the source's order, so at time t the
    version of a key counts only when its position is newer than every truncate up to t.

    >>> truncate_floors([(30, "0005"), (10, "0009"), (20, "0007")])
    [(10, '0009'), (20, '0009'), (30, '0009')]
    """
    floors: list[tuple[int, str]] = []
    newest = ""
    for micros, position in sorted(truncates):
        newest = max(newest, position)
        floors.append((micros, newest))
    return floors


# ---- streams: how the dimension state reaches the snapshot a micro-batch pins -----------------


@dataclass(frozen=True)
class Refresh:
    """How a stream brings its dimension state to the pinned snapshot.

    ``kind``: 'keep' (nothing changed), 'delta' (apply ``logs``, the event logs of the new
    commits, to the state in executor memory) or 'reload' (rebuild the state from the table);
    ``reason`` says why, for the progress line and the note on each batch.
    """

    kind: str
    logs: tuple[str, ...] = ()
    reason: str = ""
    delta_bytes: int = 0
    reload_bytes: int = 0


@dataclass(frozen=True)
class NewCommit:
    """A commit on the dimension after the state's snapshot: its events, if ingest_cdc logged
    them, and whether it changes rows at all (a compaction or delete conversion does not)."""

    snapshot_id: int
    events_location: str | None
    changes_rows: bool
    log_bytes: int = 0


def plan_refresh(
    held: int | None,
    pinned: int | None,
    new_commits: Sequence[NewCommit] | None,
    reload_bytes: int,
    reload_factor: float = 1.0,
) -> Refresh:
    """Delta or reload, by cost.

    ``new_commits`` is None when ``held`` is not an ancestor of ``pinned`` (a rollback, an
    expired history): only a reload is right then. A commit that changes rows without an event
    log (a user's UPDATE, an overwrite) cannot be applied as events: reload. Otherwise apply the
    logs when they are smaller than ``reload_factor`` × the table's live bytes.

    >>> plan_refresh(1, 1, [], 100).kind
    'keep'
    >>> plan = plan_refresh(1, 3, [NewCommit(2, "l/2", True, 10), NewCommit(3, None, False)], 99)
    >>> plan.kind, plan.logs, plan.reason
    ('delta', ('l/2',), '2 commit(s), 10 bytes of events')
    >>> plan_refresh(1, 2, [NewCommit(2, "s3://l/2", True, 500)], 100).kind
    'reload'
    """
    if held is None:
        return Refresh("reload", reason="no state yet", reload_bytes=reload_bytes)
    if held == pinned:
        return Refresh("keep", reason="no new commit")
    if new_commits is None:
        return Refresh(
            "reload",
            reason=f"snapshot {held} is no longer an ancestor of {pinned}",
            reload_bytes=reload_bytes,
        )
    unlogged = [c.snapshot_id for c in new_commits if c.changes_rows and not c.events_location]
    if unlogged:
        return Refresh(
            "reload",
            reason=f"commit {unlogged[0]} changed rows without an event log",
            reload_bytes=reload_bytes,
        )
    logs = tuple(c.events_location for c in new_commits if c.events_location)
    delta = sum(c.log_bytes for c in new_commits)
    if delta > reload_factor * reload_bytes:
        return Refresh(
            "reload",
            logs,
            f"{len(new_commits)} commit(s) hold {delta} bytes of events, more than reloading "
            f"{reload_bytes} bytes",
            delta,
            reload_bytes,
        )
    return Refresh(
        "delta",
        logs,
        f"{len(new_commits)} commit(s), {delta} bytes of events",
        delta,
        reload_bytes,
    )
