"""Tab completion in the interactive shell: routine names, their parameters and option keys,
and table names.

:func:`complete` is a pure planner over the text before the cursor (tested without a
terminal); :class:`ShellCompleter` is its prompt_toolkit face, with the tables of the current
catalog listed lazily and cached for a short while.

Floor: top (command line).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkext import identifiers
from sparkext.declarations import Kind, ParamType, Routine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_ROUTINE = re.compile(r"\bsparkext\.(\w*)$", re.IGNORECASE)
_OPEN_CALL = re.compile(r"\bsparkext\.(\w+)\s*\(", re.IGNORECASE)
_WORD = re.compile(r"[\w.`]*$")
_TABLE_CONTEXT = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|DESCRIBE|DESC|REFRESH)\s+[\w.`]*$", re.IGNORECASE
)
_CALL_BEFORE = re.compile(r"\bCALL\s+sparkext\.\w*$", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    text: str  # what replaces the word being typed
    replaces: int  # how many characters before the cursor it replaces
    meta: str = ""  # shown beside it: a parameter's type, a routine's doc


def _depth_after(text: str) -> tuple[int, bool, list[int]]:
    """Parenthesis depth at the end of ``text``, whether the end is inside a string, and the
    offsets of the still-open parentheses (strings and backticks skipped)."""
    opened: list[int] = []
    quote = None
    for index, char in enumerate(text):
        if quote is not None:
            if char == quote:
                quote = None
            continue
        if char in "'\"`":
            quote = char
        elif char == "(":
            opened.append(index)
        elif char == ")" and opened:
            opened.pop()
    return len(opened), quote == "'" or quote == '"', opened


def complete(
    before: str, routines: dict[str, Routine], tables: Callable[[], Iterable[str]]
) -> list[Candidate]:
    """What may come at the end of ``before`` (the statement typed so far)."""
    found = _ROUTINE.search(before)
    if found:
        partial = found.group(1).lower()
        wanted = Kind.PROCEDURE if _CALL_BEFORE.search(before) else None
        return [
            Candidate(name, len(partial), routine.doc)
            for name, routine in sorted(routines.items())
            if name.startswith(partial) and (wanted is None or wanted in routine.kind)
        ]
    _, in_string, opened = _depth_after(before)
    for call in reversed(list(_OPEN_CALL.finditer(before))):
        paren = call.end() - 1
        if paren not in opened:
            continue  # closed already
        routine = routines.get(call.group(1).lower())
        if routine is None:
            return []
        return _inside(before, paren, opened, in_string, routine, tables)
    if _TABLE_CONTEXT.search(before) and not in_string:
        word = _WORD.search(before)
        assert word is not None  # _WORD matches at the end of any text, if only ""
        return _tables(word.group(0), tables)
    return []


def _inside(
    before: str,
    paren: int,
    opened: list[int],
    in_string: bool,
    routine: Routine,
    tables: Callable[[], Iterable[str]],
) -> list[Candidate]:
    """Completions inside ``sparkext.<routine>(`` … (``paren`` is its open parenthesis)."""
    inner = opened[opened.index(paren) + 1 :]
    if inner and re.search(r"\bmap\s*$", before[: inner[-1]], re.IGNORECASE):
        # inside options => map(…): a key goes where an odd number of items precede
        items = before[inner[-1] + 1 :]
        partial = re.search(r"'([\w.-]*)$", items)
        if partial is not None and items.count(",") % 2 == 0:
            typed = partial.group(1)
            return [
                Candidate(f"'{o.key}'", len(typed) + 1, o.doc)
                for o in routine.options
                if o.key.startswith(typed)
            ]
        return []
    if inner:
        return []
    args = before[paren + 1 :]
    table_value = re.search(r"(\w+)\s*=>\s*'([\w.`]*)$", args)
    if in_string and table_value:
        param = routine.param(table_value.group(1).lower())
        if param is not None and param.type == ParamType.TABLE:
            typed = table_value.group(2)
            return [Candidate(f"'{c.text}'", len(typed) + 1) for c in _tables(typed, tables)]
        return []
    if in_string:
        return []
    name = re.search(r"(?:^|[(,])\s*(\w*)$", args)
    if name is None:
        return []
    typed = name.group(1).lower()
    given = {m.lower() for m in re.findall(r"(\w+)\s*=>", args)}
    return [
        Candidate(
            f"{p.name} => ", len(typed), f"{p.type.value}{', required' if p.required else ''}"
        )
        for p in routine.params
        if p.name.startswith(typed) and p.name not in given
    ]


def _tables(typed: str, tables: Callable[[], Iterable[str]]) -> list[Candidate]:
    lowered = typed.lower()
    return [
        Candidate(t, len(typed)) for t in sorted(set(tables())) if t.lower().startswith(lowered)
    ]


class TableNames:
    """The tables a user may name: those of the current namespace, bare, and every table of
    the current catalog, qualified; listed on first use and kept for ``ttl_s``."""

    def __init__(self, spark: SparkSession, ttl_s: float = 30.0, max_namespaces: int = 50):
        self._spark = spark
        self._ttl_s = ttl_s
        self._max = max_namespaces
        self._names: Sequence[str] = ()
        self._listed = float("-inf")

    def __call__(self) -> Sequence[str]:
        if time.monotonic() - self._listed > self._ttl_s:
            self._names = self._list()
            self._listed = time.monotonic()
        return self._names

    def _list(self) -> list[str]:

        spark = self._spark
        names: list[str] = []
        try:
            catalog = spark.catalog.currentCatalog()
            names += [t.name for t in spark.catalog.listTables()]
            spaces = spark.sql(f"SHOW NAMESPACES IN {identifiers.quote(catalog)}").collect()
            for row in spaces[: self._max]:
                space = row[0]
                shown = spark.sql(f"SHOW TABLES IN {identifiers.quote(catalog)}.{space}")
                names += [identifiers.display([catalog, *space.split("."), r.tableName])
                          for r in shown.collect() if not r.isTemporary]  # fmt: skip
        except Exception:  # completion never fails a prompt
            return names
        return names


def shell_completer(spark: SparkSession, routines: dict[str, Routine]):
    """A prompt_toolkit completer over :func:`complete`."""
    from prompt_toolkit.completion import Completer, Completion

    tables = TableNames(spark)

    class ShellCompleter(Completer):
        def get_completions(self, document, complete_event):
            for candidate in complete(document.text_before_cursor, routines, tables):
                yield Completion(
                    candidate.text, -candidate.replaces, display_meta=candidate.meta[:60]
                )

    return ShellCompleter()
