"""Tokenize and split SQL text with sqlglot's Spark tokenizer.

Splitting on tokens (not characters) keeps a ``;`` inside a string, a quoted identifier or a
comment where it belongs. sqlglot treats ``CALL``/``SHOW``/… as opaque commands whose text runs to
the next ``;`` even inside a comment; sparkext tokenizes them like any other statement instead.

Floor: routing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from sparkext.errors import SqlParseError


class _Tokenizer(Spark.Tokenizer):
    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "CALL"
    }
    COMMANDS: ClassVar[set[TokenType]] = set()


@dataclass(frozen=True)
class Statement:
    """One statement of a SQL text: its text, where it starts, and its tokens (absolute offsets)."""

    text: str
    start: int
    tokens: tuple[Token, ...]
    source: str

    @property
    def first_word(self) -> str:
        return self.tokens[0].text.upper() if self.tokens else ""


def line_col(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based line and column of ``offset`` in ``text``.

    >>> line_col("ab\\ncd", 4)
    (2, 2)
    """
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def unterminated_at(text: str, done: list[Token]) -> tuple[int, int, str]:
    """Where a tokenizer that stopped after ``done`` met an unterminated string, identifier or
    comment: its line, column and the first characters there.

    >>> unterminated_at("SELECT 'x", [])
    (1, 1, "SELECT 'x")
    """
    offset = done[-1].end + 1 if done else 0
    while offset < len(text) and text[offset].isspace():
        offset += 1
    line, column = line_col(text, offset)
    snippet = text[offset : offset + 20].splitlines()[0] if offset < len(text) else ""
    return line, column, snippet


def tokenize(text: str) -> list[Token]:
    """Tokenize ``text``; an unterminated string, identifier or comment raises SqlParseError."""
    tokenizer = _Tokenizer()
    try:
        return tokenizer.tokenize(text)
    except TokenError:
        line, column, snippet = unterminated_at(text, tokenizer.tokens)
        raise SqlParseError(
            f"Cannot parse the SQL at line {line}, column {column}: an unterminated string, "
            f"quoted identifier or comment starts at '{snippet}'; close it.",
            line,
            column,
        ) from None


def split_statements(text: str) -> list[Statement]:
    """Split ``text`` into statements at top-level ``;`` tokens; empty statements are dropped.

    >>> [s.text for s in split_statements("SELECT ';' ; -- x;y\\nSELECT 2;")]
    ["SELECT ';'", '-- x;y\\nSELECT 2']
    """
    statements: list[Statement] = []
    current: list[Token] = []
    segment_start = 0

    def flush(end: int) -> None:
        if current:
            # Leading comments belong to the statement text Spark receives; whitespace does not.
            start = segment_start
            while start < end and text[start].isspace():
                start += 1
            statements.append(Statement(text[start:end].rstrip(), start, tuple(current), text))

    for token in tokenize(text):
        if token.token_type == TokenType.SEMICOLON:
            flush(token.start)
            current = []
            segment_start = token.end + 1
        else:
            current.append(token)
    flush(len(text))
    return statements


def is_complete(text: str) -> bool:
    """True when ``text`` ends a statement with ``;`` outside strings and comments (for the shell).

    >>> is_complete("SELECT ';'"), is_complete("SELECT 1; -- done")
    (False, True)
    """
    try:
        tokens = _Tokenizer().tokenize(text)
    except TokenError:
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON
