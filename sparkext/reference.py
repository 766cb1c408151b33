"""The generated part of each routine's reference page, rendered from its declaration.

Every routine has a page ``docs/reference/<name>.md``. Between the markers ``<!-- generated:
begin -->`` and ``<!-- generated: end -->`` it holds what the :class:`Routine` declares, in a fixed
form: usage (the ``CALL`` / ``SELECT`` form), arguments, options and output columns. The text
outside the markers is written by hand and never touched. After changing a declaration, run::

    .venv/bin/python -m sparkext.reference

which rewrites the generated part of every page in place (and makes a page for a new routine);
tests/pure/test_reference_pages.py fails while a page and its declaration disagree.

Floor: top.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sparkext.actions.history.changelog_stream import ROUTINE as CHANGELOG_STREAM
from sparkext.declarations import Kind, Option, OutputColumn, Param, Routine, describe
from sparkext.procedures.registry import ROUTINES

BEGIN = "<!-- generated: begin -->"
END = "<!-- generated: end -->"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference"
COMMAND = ".venv/bin/python -m sparkext.reference"


def routines() -> dict[str, Routine]:
    """Every routine with a reference page: the registry's, then ``changelog_stream``."""

    return {**ROUTINES, CHANGELOG_STREAM.name: CHANGELOG_STREAM}


# Routines that are Python functions rather than SQL: their usage is the function's signature.
PYTHON_API: dict[str, str] = {"changelog_stream": "sparkext.changelog_stream"}


def _function(dotted: str) -> Callable[..., Any]:
    module, _, name = dotted.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, ``<``/``>`` outside code as entities.

    >>> _cell("a | b <name> `map<k,v>`")
    'a \\\\| b &lt;name&gt; `map<k,v>`'
    """
    parts = text.replace("|", "\\|").split("`")
    for index in range(0, len(parts), 2):  # outside backticks
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _wrap(text: str) -> list[str]:
    """A paragraph as lines of at most 100 characters (words kept whole)."""
    return textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False)


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in rows]
    return out


def _default(param: Param) -> str:
    if param.required:
        return "required"
    if param.default is None:
        return "optional"
    if param.default == {}:
        return "default `map()`"
    if param.default == []:
        return "default `array()`"
    return f"default {_code(describe(param.default))}"


def _usage(routine: Routine, kind: Kind) -> str:
    """The call's form: required arguments, then the optional ones in brackets.

    >>> from sparkext.procedures.registry import ROUTINES
    >>> print(_usage(ROUTINES["table_health"], Kind.PROCEDURE))
    CALL sparkext.table_health(table => <table> [, options => <map<string,string>>])
    """
    declared = routine.for_kind(kind)
    words = []
    for param in declared.params:
        word = (
            f"{param.name} => <{param.type.value}>"
            if kind == Kind.PROCEDURE
            else f"<{param.name}: {param.type.value}>"
        )
        words.append(word if param.required else f"[{word}]")
    head = (
        f"CALL sparkext.{routine.name}("
        if kind == Kind.PROCEDURE
        else (f"SELECT * FROM sparkext.{routine.name}(")
    )
    text = ", ".join(words).replace(", [", " [, ")
    if len(head) + len(text) < 100:
        return f"{head}{text})"
    lines = []
    for index, word in enumerate(words):
        if word.startswith("["):
            lines.append(f"    [{word[1:]}" if index == 0 else f"    [, {word[1:]}")
        else:
            after = words[index + 1 : index + 2]
            comma = "," if after and not after[0].startswith("[") else ""
            lines.append(f"    {word}{comma}")
    return "\n".join([head, *lines]) + ")"


def _signature(function: Callable[..., Any]) -> str:
    """A Python function's parameters as a user writes them: names and plain defaults.

    >>> def f(a, b=None, *, c="x", d=print): ...
    >>> _signature(f)
    "(a, b=None, *, c='x', d=...)"
    """
    words, star = [], False
    for param in inspect.signature(function).parameters.values():
        if param.kind == param.KEYWORD_ONLY and not star:
            words.append("*")
            star = True
        default = param.default
        if default is param.empty:
            words.append(param.name)
        else:
            plain = default is None or isinstance(default, (str, int, float, bool))
            words.append(f"{param.name}={default!r}" if plain else f"{param.name}=...")
    return "(" + ", ".join(words) + ")"


def _params(params: tuple[Param, ...]) -> list[str]:
    rows = ((f"`{p.name}`", f"`{p.type.value}`", _default(p), _cell(p.doc)) for p in params)
    return _table(("name", "type", "required / default", "meaning"), rows)


def _options(options: tuple[Option, ...]) -> list[str]:
    rows = (
        (
            f"`{o.key}*`" if o.prefix else f"`{o.key}`",
            _code(o.default) or "none",
            _cell(o.doc + (" (any key with this prefix)" if o.prefix else "")),
        )
        for o in options
    )
    return _table(("key", "default", "meaning"), rows)


def _output(columns: tuple[OutputColumn, ...]) -> list[str]:
    rows = ((f"`{c.name}`", f"`{c.type}`", _cell(c.doc)) for c in columns)
    return _table(("column", "type", "meaning"), rows)


def render(routine: Routine) -> str:
    """The generated part of ``routine``'s page, markers excluded."""
    out = [*_wrap(_cell(routine.doc)), ""]
    forms = [k for k in (Kind.PROCEDURE, Kind.FUNCTION) if k in routine.kind]
    out += ["## Usage", ""]
    if routine.name in PYTHON_API:
        name = PYTHON_API[routine.name]
        signature = _signature(_function(name))
        out += ["A Python function (not SQL):", "", "```text", f"{name}{signature}", "```", ""]
        forms = []
    else:
        kinds = {Kind.PROCEDURE: "procedure", Kind.FUNCTION: "table function"}
        out += [f"A {' and a '.join(kinds[k] for k in forms)}.", "", "```text"]
        out += [_usage(routine, kind) for kind in forms] + ["```", ""]
    sections: list[tuple[str | None, Routine]] = [(None, routine)]
    if routine.function is not None and Kind.FUNCTION in routine.kind:
        sections = [(" (procedure)", routine), (" (table function)", routine.function)]
    for suffix, declared in sections:
        label = suffix or ""
        if declared.params:
            out += [f"## Arguments{label}", "", *_params(declared.params), ""]
        elif routine.name not in PYTHON_API:
            out += [f"## Arguments{label}", "", "None.", ""]
        if declared.options:
            where = "the `options` dict" if routine.name in PYTHON_API else "`options => map(...)`"
            out += [f"## Options{label}", "", f"Keys of {where}.", ""]
            out += [*_options(declared.options), ""]
        if declared.output:
            out += [f"## Output columns{label}", "", *_output(declared.output), ""]
        elif routine.name not in PYTHON_API:
            out += [f"## Output columns{label}", "", "The columns depend on the arguments.", ""]
    if routine.failure_column:
        out += _wrap(
            f"A non-NULL `{routine.failure_column}` says that row's part of the work failed; "
            "`sparkext-sql -e`/`-f` then exit with status 1."
        )
        out += [""]
    return "\n".join(out).rstrip("\n") + "\n"


def page_path(name: str, docs: Path = DOCS) -> Path:
    return docs / f"{name}.md"


def generated(text: str) -> str | None:
    """The generated part of a page's text (between the markers), or None without markers."""
    match = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    return match.group(1) if match else None


def rewrite(text: str, routine: Routine) -> str:
    """``text`` with its generated part replaced by ``routine``'s (markers added if missing)."""
    block = f"{BEGIN}\n{render(routine)}{END}"
    if generated(text) is None:
        title, _, rest = text.partition("\n")
        return f"{title}\n\n{block}\n{rest}"
    pattern = re.escape(BEGIN) + r"\n.*?" + re.escape(END)
    return re.sub(pattern, lambda _: block, text, count=1, flags=re.S)


def main(docs: Path = DOCS) -> list[Path]:
    """Rewrite the generated part of every routine's page; return the pages that changed."""
    changed = []
    for name, routine in routines().items():
        path = page_path(name, docs)
        before = path.read_text(encoding="utf-8") if path.exists() else f"# `{name}`\n"
        after = rewrite(before, routine)
        if after != before:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(after, encoding="utf-8")
            changed.append(path)
    return changed


if __name__ == "__main__":
    for path in main():
        print(f"rewrote {path}", file=sys.stderr)
