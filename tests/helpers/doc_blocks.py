"""The code blocks of README.md and of every docs page as data, and the rules that keep them
runnable.

The pages are read in one fixed order (``pages()``): README.md first, then docs/ in the order of
mkdocs.yml's ``nav`` — a walkthrough, as the README was before it was split: an example may use
what an earlier one made. A block's name says its file and line:
``docs/reference/ingest_cdc.md:123-sql``.

How the pages mark their blocks (the tests below read exactly this):

- The fence's language says what a block is. ```bash, ```sql and ```python blocks are examples:
  tests/spark/test_docs_examples.py runs every one of them, in page order, on the shared
  session. ```output is what the example just above it prints. ```text is not code (error
  sentences, diagrams) and is never run. A fence with any other language, or none, is an error.
- ```output holds the lines the example must print (stdout and stderr, as on a terminal), in
  order; other printed lines may come between them. Runs of spaces count as one, runs of ``-``
  too (table rules widen with their cells), and ``…`` stands for any text inside a line:
  snapshot ids, commit times, durations, file sizes.
- HTML comments on the lines right above a fence, one ``<!-- key: value -->`` each:
  ``<!-- not-run: why -->`` shows an example without running it (a Kafka broker, a benchmark that
  takes minutes, a job's text that a command above runs) — keep these rare;
  ``<!-- from: path -->`` says the block is taken from that file: the blocks naming one file are,
  joined in page order, a run of that file's statements, verbatim (comment lines and spacing
  aside) — the whole file, or the part a section is about.
- Bash blocks hold commands, one per line (``\\`` continues a line, ``&&`` chains, ``echo … |``
  feeds standard input); each is either ``sparkext-sql``/``sparkext-demo`` (also by their
  ``.venv/bin/`` paths or ``python -m``), run in-process through click, or an install/test
  command of ``SKIPPED``. Anything else fails tests/pure/test_docs_blocks.py.
- The example data lives in ``EXAMPLES_DIR`` (``/tmp/sparkext-examples``, what ``sparkext-demo
  --data`` is told in the docs). The tests put it in a temporary directory instead: every
  occurrence of that path — in blocks, in stated outputs, in the sql/examples/ scripts a command
  runs — is replaced by it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
EXAMPLES_DIR = "/tmp/sparkext-examples"
RUN = ("bash", "sql", "python")
INERT = ("output", "text")

SHELL = ("sparkext-sql", ".venv/bin/sparkext-sql")
DEMO = (
    ("sparkext-demo",),
    (".venv/bin/sparkext-demo",),
    (".venv/bin/python", "-m", "sparkext.demo"),
    ("python", "-m", "sparkext.demo"),
)
# Install and test commands: the docs' own setup, not examples; none can run inside a test.
SKIPPED = (
    ("bash", ".ci/setup"),
    (".venv/bin/python", "-m", "pytest"),
    ("python", "-m", "pytest"),
    ("pip", "install"),
    (".venv/bin/pip", "install"),
    (".", ".venv/bin/activate"),
)

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
_MARKER = re.compile(r"^<!--\s*([a-z-]+)\s*:\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its first line's number (the fence's), language, text and markers."""

    line: int
    lang: str
    text: str
    markers: dict[str, str] = field(default_factory=dict)
    path: str = "README.md"  # the page, relative to the repository root

    @property
    def runs(self) -> bool:
        return self.lang in RUN and "not-run" not in self.markers

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}-{self.lang}"


@dataclass(frozen=True)
class Example:
    """A block the tests run, with the output its page states for it (or None)."""

    block: Block
    output: str | None


@dataclass(frozen=True)
class Command:
    """One command of a bash block: its words and what ``echo … |`` feeds it."""

    argv: tuple[str, ...]
    stdin: str | None = None

    @property
    def kind(self) -> str | None:
        """'skip', 'shell', 'demo', or None for a command the tests cannot run."""
        for prefix in SKIPPED:
            if self.argv[: len(prefix)] == prefix:
                return "skip"
        if self.argv[0] in SHELL:
            return "shell"
        if any(self.argv[: len(prefix)] == prefix for prefix in DEMO):
            return "demo"
        return None

    @property
    def args(self) -> list[str]:
        """The arguments after the program (``python -m sparkext.demo`` is one program)."""
        for prefix in DEMO:
            if self.argv[: len(prefix)] == prefix:
                return list(self.argv[len(prefix) :])
        return list(self.argv[1:])


def _nav(entries: list) -> list[str]:
    found = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            found += _nav(value) if isinstance(value, list) else [value]
    return found


def pages() -> list[Path]:
    """README.md, then every page of mkdocs.yml's nav, in nav order."""
    import yaml

    nav = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))["nav"]
    return [README, *(DOCS / page for page in _nav(nav))]


def blocks(text: str | None = None, path: str = "README.md") -> list[Block]:
    """Every fenced block of every page in order (or of ``text``, named as page ``path``)."""
    if text is None:
        return [
            block
            for page in pages()
            for block in blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
        ]
    lines = text.splitlines()
    found, index = [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, lang = match.group(1), match.group(2)
        end = index + 1
        while end < len(lines) and not (
            lines[end].startswith(fence[0] * len(fence)) and not lines[end].strip(fence[0]).strip()
        ):
            end += 1
        markers, above = {}, index - 1
        while above >= 0 and (marker := _MARKER.match(lines[above].strip())):
            markers[marker.group(1)] = marker.group(2)
            above -= 1
        body = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Block(index + 1, lang, body, markers, path))
        index = end + 1
    return found


def examples(text: str | None = None) -> list[Example]:
    """The blocks the tests run, each with the ```output block that follows it on its page."""
    found = blocks(text)
    out = []
    for block, after in zip(found, [*found[1:], None], strict=True):
        if after is not None and after.path != block.path:
            after = None
        if block.runs:
            stated = after.text if after is not None and after.lang == "output" else None
            out.append(Example(block, stated))
    return out


def commands(script: str) -> list[Command]:
    """The commands of a bash block: comments dropped, ``\\`` lines joined, ``&&`` split."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            part = words[: words.index("&&")] if "&&" in words else words
            words = words[len(part) + 1 :]
            stdin = None
            if "|" in part:
                left, part = part[: part.index("|")], part[part.index("|") + 1 :]
                if left[:1] != ["echo"]:
                    raise ValueError(f"only `echo … |` pipes are understood: {line!r}")
                stdin = " ".join(left[1:]) + "\n"
            found.append(Command(tuple(part), stdin))
    return found


def relocate(text: str, directory: Path | str) -> str:
    """``text`` with the docs' example directory replaced by ``directory``."""
    return text.replace(EXAMPLES_DIR, str(directory))


def normalize(line: str) -> str:
    """A printed line as compared: outer space dropped, inner runs of spaces and of ``-`` one.

    >>> normalize("| a   |  b |"), normalize("+------+---+")
    ('| a | b |', '+-+-+')
    """
    return re.sub(r"\s+", " ", re.sub(r"-{2,}", "-", line.strip()))


def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in normalize(line).split("…")))


def missing(stated: str, printed: str) -> str | None:
    """The first stated line not printed (in order, ``…`` matching anything), or None.

    >>> missing("| 1 | … |\\n| 2 | b |", "header\\n|  1 | 8231 |\\nnoise\\n| 2 |  b |")
    >>> missing("| 2 | b |\\n| 1 | a |", "| 1 | a |\\n| 2 | b |")
    '| 1 | a |'
    """
    lines = [normalize(line) for line in printed.splitlines()]
    position = 0
    for want in stated.splitlines():
        if not want.strip():
            continue
        pattern = _pattern(want)
        while position < len(lines) and not pattern.fullmatch(lines[position]):
            position += 1
        if position == len(lines):
            return want.strip()
        position += 1
    return None


def statements(sql: str) -> list[str]:
    """SQL text as its statements, comment lines dropped and spaces normalised (none around
    brackets and commas), for comparing a docs block with the file it comes from.

    >>> statements("-- two\\nSELECT f( a ,b );\\nSELECT 2")
    ['SELECT f(a,b)', 'SELECT 2']
    """
    from sparkext.routing.tokens import split_statements

    return [
        re.sub(r"\s*([(),;])\s*", r"\1", " ".join(s.text.split()))
        for s in split_statements(_without_comments(sql))
    ]


def _without_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
