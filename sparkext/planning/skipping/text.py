"""Text for the token and n-gram indexes: tokens, n-grams, and what a pattern says a value holds.

**Tokens** are the maximal runs of letters and digits (``str.isalnum``, by Unicode code point):
``"GET /api/v2/users?id=42"`` has the tokens ``GET api v2 users id 42``.

**N-grams** are the runs of ``n`` consecutive code points of a value (none when it is shorter).

**Case folding** (``case_sensitive = false``): a row ``r`` contributes the lower-cased tokens of
``r`` and the tokens of ``lower(r)`` (the same set unless lower-casing changes the length or
the letters; Python's ``str.lower``, which follows Unicode's full case mapping as Java's does in
a non-Turkic locale); likewise for n-grams. Such an index answers predicates on the column
itself (probing lower-cased tokens) and on ``lower(column)`` (probing them as given), never on
``upper(column)``.

**Segments**: a pattern (``LIKE``, ``RLIKE``, ``starts_with``, ``=``...) is read as the literal
texts a matching value must contain, each perhaps anchored at the value's start or end. Inside a
segment a run of letters and digits is *delimited* on a side when a non-alphanumeric character
of the segment or an anchor is next to it there; a run delimited on both sides is a whole token
of the value, one delimited on the left only is a token's prefix, on the right only its suffix,
neither a part of a token.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkext.planning.skipping.hashing import binary_parts

_TOKEN = re.compile(r"[^\W_]+")
_SIGMA = "Σ"


def tokens(text: str) -> list[str]:
    """The tokens of a text.

    >>> tokens("GET /api/v2/users?id=42 — Ünïcode_ok")
    ['GET', 'api', 'v2', 'users', 'id', '42', 'Ünïcode', 'ok']
    """
    return _TOKEN.findall(text)


def index_tokens(texts: Iterable[str], case_sensitive: bool) -> set[str]:
    """Every token an index of these values holds."""
    found: set[str] = set()
    for text in texts:
        if case_sensitive:
            found.update(_TOKEN.findall(text))
        elif text.isascii():
            found.update(_TOKEN.findall(text.lower()))
        else:
            found.update(t.lower() for t in _TOKEN.findall(text))
            found.update(_TOKEN.findall(text.lower()))
    return found


def index_tokens_of(values: pa.Array, case_sensitive: bool) -> pa.Array:
    """Every token an index of these values (binary, UTF-8) holds, as sorted distinct UTF-8
    bytes: the same set as :func:`index_tokens` of the decoded values. ASCII values are cut
    with numpy over Arrow's buffers; the others go through :func:`index_tokens`.

    >>> index_tokens_of(pa.array([b"GET /a?id=42", b"get \\xc3\\x9cber"]), False).to_pylist()
    [b'42', b'a', b'get', b'id', b'\\xc3\\xbcber']
    """
    ascii_values, others = _split_ascii(values)
    offsets, data = binary_parts(ascii_values)
    if not case_sensitive:
        data = _ascii_lower(data)
    alnum = _ASCII_ALNUM[data]
    boundary = np.zeros(len(data) + 1, bool)
    boundary[offsets] = True
    joined = alnum[1:] & alnum[:-1] & ~boundary[1:-1]  # byte i+1 continues byte i's token
    starts = np.nonzero(alnum & ~np.concatenate([[False], joined]))[0]
    ends = np.nonzero(alnum & ~np.concatenate([joined, [False]]))[0] + 1
    token_offsets = np.concatenate([[0], np.cumsum(ends - starts)])
    found = pa.Array.from_buffers(
        pa.large_binary(),
        len(starts),
        [None, pa.py_buffer(token_offsets.astype(np.int64)), pa.py_buffer(data[alnum])],
    )
    if len(others):
        texts = [v.decode("utf-8", "surrogatepass") for v in others.to_pylist()]
        words = [t.encode("utf-8", "surrogatepass") for t in index_tokens(texts, case_sensitive)]
        found = pa.concat_arrays([found, pa.array(words, pa.large_binary())])
    found = found.unique()
    return found.take(pc.sort_indices(found))


_ASCII_ALNUM = np.zeros(256, bool)
_ASCII_ALNUM[[*range(48, 58), *range(65, 91), *range(97, 123)]] = True


def _ascii_lower(data: np.ndarray) -> np.ndarray:
    upper = (data >= 65) & (data <= 90)
    return np.where(upper, data + 32, data).astype(np.uint8)


def _split_ascii(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(the ASCII values, the others) of a binary array, NULLs dropped."""
    values = values.cast(pa.large_binary()).drop_null()
    offsets, data = binary_parts(values)
    if not len(data) or data.max() < 0x80:
        return values, values.slice(0, 0)
    high = np.concatenate([[0], np.cumsum(data >= 0x80)])
    ascii_rows = high[offsets[1:]] == high[offsets[:-1]]
    mask = pa.array(ascii_rows)
    return values.filter(mask), values.filter(pc.invert(mask))


def _per_char(text: str) -> bool:
    """Whether lower-casing maps each character of ``text`` to one character, out of context."""
    return len(text.lower()) == len(text) and _SIGMA not in text


def index_ngrams(texts: Sequence[str], n: int, case_sensitive: bool) -> pa.Array:
    """Every n-gram an index of these values holds, as distinct UTF-32LE byte strings."""
    main = texts if case_sensitive else [t.lower() for t in texts]
    windows = _windows(main, n)
    extra: set[bytes] = set()
    if not case_sensitive:
        for text in texts:
            if not text.isascii() and not _per_char(text):
                extra.update(g.lower().encode("utf-32-le") for g in ngrams(text, n))
    array = pa.Array.from_buffers(
        pa.large_binary(),
        len(windows),
        [
            None,
            pa.py_buffer(np.arange(len(windows) + 1, dtype=np.int64) * 4 * n),
            pa.py_buffer(windows),
        ],
    )
    if extra:
        array = pa.concat_arrays([array, pa.array(sorted(extra), pa.large_binary())])
    return array.unique()


def index_ngrams_of(values: pa.Array, n: int, case_sensitive: bool) -> pa.Array:
    """Every n-gram an index of these values (binary, UTF-8) holds, as distinct UTF-32LE byte
    strings: the same set as :func:`index_ngrams` of the decoded values. ASCII values are cut
    with numpy over Arrow's buffers (each n-gram packed into one 64-bit word); the others go
    through :func:`index_ngrams`.

    >>> sorted(index_ngrams_of(pa.array([b"AbcA", b"ab"]), 3, False).to_pylist())[0]
    b'a\\x00\\x00\\x00b\\x00\\x00\\x00c\\x00\\x00\\x00'
    """
    ascii_values, others = _split_ascii(values)
    offsets, data = binary_parts(ascii_values)
    if not case_sensitive:
        data = _ascii_lower(data)
    lengths = np.diff(offsets)
    ends = np.repeat(offsets[1:], lengths)
    starts = np.nonzero(np.arange(len(data)) + n <= ends)[0]
    packed = np.zeros(len(starts), np.uint64)
    for j in range(n):
        packed |= data[starts + j].astype(np.uint64) << np.uint64(8 * j)
    distinct = pc.unique(pa.array(packed)).to_numpy()
    codes = (distinct[:, None] >> (np.arange(n, dtype=np.uint64) * np.uint64(8))) & np.uint64(255)
    keys = np.ascontiguousarray(codes.astype("<u4"))
    found = pa.Array.from_buffers(
        pa.large_binary(),
        len(keys),
        [None, pa.py_buffer(np.arange(len(keys) + 1, dtype=np.int64) * 4 * n), pa.py_buffer(keys)],
    )
    if len(others):
        texts = [v.decode("utf-8", "surrogatepass") for v in others.to_pylist()]
        found = pa.concat_arrays([found, index_ngrams(texts, n, case_sensitive)]).unique()
    return found


def _windows(texts: Sequence[str], n: int) -> np.ndarray:
    lengths = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), "<u4")
    if len(codes) < n:
        return np.zeros((0, n), "<u4")
    ends = np.repeat(np.cumsum(lengths), lengths)
    starts = np.nonzero(np.arange(len(codes)) + n <= ends)[0]
    windows = np.lib.stride_tricks.sliding_window_view(codes, n)
    return np.ascontiguousarray(windows[starts])


def ngrams(text: str, n: int) -> list[str]:
    """The n-grams of a text, in order.

    >>> ngrams("abcd", 3)
    ['abc', 'bcd']
    """
    return [text[i : i + n] for i in range(len(text) - n + 1)]


def ngram_key(gram: str) -> bytes:
    """An n-gram's canonical bytes (UTF-32LE), as the index holds it."""
    return gram.encode("utf-32-le", "surrogatepass")


# -- what a pattern says a matching value holds ---------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A literal text every matching value contains; anchored: at its start / end."""

    text: str
    at_start: bool = False
    at_end: bool = False


@dataclass(frozen=True)
class Need:
    """A token fact: ``exact`` a whole token; ``prefix``/``suffix``/``infix`` a part of one."""

    kind: str
    text: str


def token_needs(segment: Segment) -> list[Need]:
    """The token facts of one segment.

    >>> [(n.kind, n.text) for n in token_needs(Segment("out of time", at_start=True))]
    [('exact', 'out'), ('exact', 'of'), ('prefix', 'time')]
    """
    needs = []
    text = segment.text
    for run in _TOKEN.finditer(text):
        left = run.start() > 0 or segment.at_start
        right = run.end() < len(text) or segment.at_end
        kind = "exact" if left and right else "prefix" if left else "suffix" if right else "infix"
        needs.append(Need(kind, run.group()))
    return needs


def equality_segments(value: str) -> list[Segment]:
    """``column = value``."""
    return [Segment(value, True, True)]


def like_items(pattern: str, escape: str = "\\") -> list[str | None] | None:
    """Spark's LIKE pattern as items: a one-character string is a literal character, ``None``
    is ``_`` (any one character) and ``""`` is ``%`` (any characters). The result is ``None``
    when Spark refuses the pattern: an escape before a character other than ``_``, ``%`` and
    the escape itself, or at the end.

    >>> like_items("a_%!%", "!")
    ['a', None, '', '%']
    """
    items: list[str | None] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == escape:
            if i + 1 == len(pattern) or pattern[i + 1] not in ("_", "%", escape):
                return None
            items.append(pattern[i + 1])
            i += 2
            continue
        items.append(None if char == "_" else "" if char == "%" else char)
        i += 1
    return items


def like_segments(pattern: str, escape: str = "\\") -> list[Segment] | None:
    """The segments of a LIKE pattern (``None``: Spark refuses the pattern).

    >>> like_segments("% timeout %")
    [Segment(text=' timeout ', at_start=False, at_end=False)]
    >>> like_segments("a_b%c")
    [Segment(text='a', at_start=True, at_end=False), Segment(text='b', at_start=False, \
at_end=False), Segment(text='c', at_start=False, at_end=True)]
    """
    items = like_items(pattern, escape)
    if items is None:
        return None
    segments = []
    start = 0
    literal = ""
    for index, item in enumerate([*items, ""]):
        if item is not None and item != "":
            if not literal:
                start = index
            literal += item
            continue
        if literal:
            end = index == len(items)
            segments.append(Segment(literal, start == 0, end))
            literal = ""
    return segments


def like_re2(pattern: str, escape: str = "\\") -> str | None:
    r"""The same LIKE pattern as an anchored RE2 regex (pyarrow's ``match_substring_regex``;
    pyarrow's own ``match_like`` misreads an escaped backslash inside ``%...%``).

    >>> print(like_re2("a_c%!%", "!"))
    (?s)\Aa.c.*\x{25}\z
    """
    items = like_items(pattern, escape)
    if items is None:
        return None
    out = ["(?s)\\A"]
    for item in items:
        if item is None:
            out.append(".")
        elif item == "":
            out.append(".*")
        else:
            out.append(item if item.isascii() and item.isalnum() else f"\\x{{{ord(item):x}}}")
    out.append("\\z")
    return "".join(out)


# Java regex outside a character class: these are metacharacters; every other character is itself.
_META = set("\\^$.|?*+()[]{}")
_CONTROL = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}
_NOT_LINE = "[^\\n\\r\\u0085\\u2028\\u2029]"
_JAVA_END = "(?=(?:\\r\\n|[\\n\\r\\u0085\\u2028\\u2029])?\\Z)"


@dataclass(frozen=True)
class Regex:
    """A Java regex in the subset read here: its segments, and the same regex for Python's
    ``re`` (``search`` has Java's ``find`` semantics)."""

    segments: list[Segment]
    python: str


def java_regex(pattern: str) -> Regex | None:
    """Read a Java regex made of literals (escaped metacharacters, ``\\Q..\\E``, ``\\t``...),
    ``.``, the quantifiers ``* + ?`` (greedy, lazy or possessive) and ``^``/``$`` at its ends;
    ``None`` for anything else (classes, groups, alternation, ``{n}``, ``\\d``...).

    >>> java_regex("^ERROR .*timeout\\\\.").segments
    [Segment(text='ERROR ', at_start=True, at_end=False), Segment(text='timeout.', \
at_start=False, at_end=False)]
    """
    units: list[tuple[str, str]] = []  # ("lit", char) | ("any", "") | ("quant", text)
    at_start = at_end = False
    python: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "^" and i == 0:
            at_start = True
            python.append("\\A")
            i += 1
        elif char == "$" and i == len(pattern) - 1:
            at_end = True
            python.append(_JAVA_END)
            i += 1
        elif char == "\\":
            if pattern.startswith("\\Q", i):
                end = pattern.find("\\E", i + 2)
                quoted = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                for q in quoted:
                    units.append(("lit", q))
                    python.append(re.escape(q))
                i = len(pattern) if end < 0 else end + 2
                continue
            if i + 1 == len(pattern):
                return None
            nxt = pattern[i + 1]
            if nxt in _CONTROL:
                literal = _CONTROL[nxt]
            elif not nxt.isalnum() and nxt.isascii():
                literal = nxt
            else:
                return None
            units.append(("lit", literal))
            python.append(re.escape(literal))
            i += 2
        elif char == ".":
            units.append(("any", ""))
            python.append(_NOT_LINE)
            i += 1
        elif char in "*+?":
            if not units or units[-1][0] == "quant":
                return None
            j = i + 1
            if j < len(pattern) and pattern[j] in "?+":
                j += 1
            units.append(("quant", pattern[i:j]))
            python.append(pattern[i:j])
            i = j
        elif char in _META:
            return None
        else:
            units.append(("lit", char))
            python.append(re.escape(char))
            i += 1
    return Regex(_regex_segments(units, at_start, at_end), "".join(python))


def _regex_segments(units: list[tuple[str, str]], at_start: bool, at_end: bool) -> list[Segment]:
    # Each unit becomes a literal character or a break; a quantified literal is optional (* ?),
    # or present but perhaps repeated (+): then it ends its segment.
    pieces: list[str | None] = []
    for index, (kind, text) in enumerate(units):
        if kind == "quant":
            continue
        after = units[index + 1] if index + 1 < len(units) else ("", "")
        quant = after[1] if after[0] == "quant" else ""
        if kind == "any" or quant[:1] in ("*", "?"):
            pieces.append(None)
        elif quant[:1] == "+":
            pieces.extend([text, None])
        else:
            pieces.append(text)
    segments = []
    literal = ""
    first = True
    for index, piece in enumerate([*pieces, None]):
        if piece is not None:
            literal += piece
            continue
        if literal:
            end = at_end and index == len(pieces)
            segments.append(Segment(literal, at_start and first, end))
            literal = ""
        first = False
    return segments
