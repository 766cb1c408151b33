"""``CREATE INDEX``, ``DROP INDEX`` and ``SHOW INDEXES``: bound to the skipping-index routines.

The statements, as Spark's own grammar writes them::

    CREATE INDEX [IF NOT EXISTS] name ON [TABLE] t USING type (column) [OPTIONS (key = value, ...)]
    DROP INDEX [IF EXISTS] name ON [TABLE] t
    SHOW INDEX[ES] (FROM | IN | ON) t

are read from the statement's own tokens (sqlglot's tokenizer: quoted identifiers, string
literals and comments as Spark reads them) and turned into the invocation of the routine that
does the work — ``create_index``, ``drop_index``, ``show_indexes`` — so binding, the policy, the
audit log, the result's columns and every error sentence are the CALL's. ``OPTIONS`` takes
Spark's property list: keys as identifiers (``a.b``) or strings, values as strings, numbers or
booleans, ``=`` optional.

Spark has CREATE INDEX and DROP INDEX of its own, for tables that support indexes (JDBC
tables): a CREATE INDEX is sparkext's only when its ``USING`` type is one of the seven skipping
index types, and the router hands a DROP INDEX on a table that is not an Iceberg table to Spark
(the JVM extension's parser decides the same way).

Floor: routing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from sparkext import identifiers
from sparkext.errors import SqlParseError, UsageError
from sparkext.planning.skipping import INDEX_TYPES
from sparkext.routing.invocations import Invocation, RawArg
from sparkext.routing.tokens import Statement, line_col

CREATE, DROP, SHOW = "create_index", "drop_index", "show_indexes"
_NAME_TYPES = {TokenType.IDENTIFIER, TokenType.VAR}
_LABEL = {CREATE: "CREATE INDEX", DROP: "DROP INDEX", SHOW: "SHOW INDEXES"}
_USAGE = {
    CREATE: "CREATE INDEX name ON table USING bloom_filter (column) [OPTIONS (key = value)]",
    DROP: "DROP INDEX [IF EXISTS] name ON table",
    SHOW: "SHOW INDEXES FROM table",
}


@dataclass(frozen=True)
class IndexStatement:
    """A recognised statement: the routine it runs, its table as written, its invocation."""

    routine: str
    table: str
    invocation: Invocation


def recognise(statement: Statement) -> IndexStatement | None:
    """The index statement ``statement`` is, or None (any other statement, and a CREATE INDEX
    whose ``USING`` type is not a skipping index type: Spark's own)."""
    tokens = statement.tokens
    words = [t.text.upper() for t in tokens[:2]]
    if words == ["CREATE", "INDEX"]:
        if not _ours_by_type(tokens):
            return None
        return _Parser(statement, CREATE).create()
    if words == ["DROP", "INDEX"]:
        return _Parser(statement, DROP).drop()
    if words and words[0] == "SHOW" and len(words) > 1 and words[1] in ("INDEX", "INDEXES"):
        return _Parser(statement, SHOW).show()
    return None


def _ours_by_type(tokens: tuple[Token, ...]) -> bool:
    for i, token in enumerate(tokens[:-1]):
        if token.token_type == TokenType.USING:
            return tokens[i + 1].text.lower() in INDEX_TYPES
    return False


def _is_name(token: Token) -> bool:
    if token.token_type in _NAME_TYPES:
        return True
    return token.token_type != TokenType.STRING and token.text.isidentifier()


class _Parser:
    """A cursor over one statement's tokens (statement keywords compared case-insensitively)."""

    def __init__(self, statement: Statement, routine: str):
        self.statement = statement
        self.tokens = statement.tokens
        self.routine = routine
        self.i = 2

    # ---- the three statements --------------------------------------------------------------

    def create(self) -> IndexStatement:
        if_not_exists = self._words("IF", "NOT", "EXISTS")
        name = self._name("the index's name")
        self._expect("ON")
        self._word("TABLE")
        table = self._table()
        self._expect("USING")
        index_type = self._name("the index type")
        self._expect_type(TokenType.L_PAREN, "'(' and the column")
        columns = [self._path("the column")]
        while self._type(TokenType.COMMA):
            columns.append(self._path("a column"))
        self._expect_type(TokenType.R_PAREN, "')' after the column")
        options: list[tuple[str, str]] = []
        if self._word("OPTIONS"):
            options = self._properties()
        self._end()
        args = [
            self._arg("table", exp.Literal.string(table)),
            self._arg("name", exp.Literal.string(name)),
            self._arg("type", exp.Literal.string(index_type.lower())),
            self._arg("column", exp.Literal.string(self._one_column(columns))),
        ]
        if options:
            pairs = [exp.Literal.string(p) for kv in options for p in kv]
            args.append(self._arg("options", exp.Anonymous(this="map", expressions=pairs)))
        if if_not_exists:
            args.append(self._arg("if_not_exists", exp.Boolean(this=True)))
        return self._statement(table, args)

    def drop(self) -> IndexStatement | None:
        try:
            if_exists = self._words("IF", "EXISTS")
            name = self._name("the index's name")
            self._expect("ON")
            self._word("TABLE")
            table = self._table()
            self._end()
        except SqlParseError:
            return None  # not a DROP INDEX sparkext can read: Spark's, with Spark's message
        args = [
            self._arg("table", exp.Literal.string(table)),
            self._arg("name", exp.Literal.string(name)),
        ]
        if if_exists:
            args.append(self._arg("if_exists", exp.Boolean(this=True)))
        return self._statement(table, args)

    def show(self) -> IndexStatement:
        if not (self._word("FROM") or self._word("IN") or self._word("ON")):
            self._fail("expected FROM, IN or ON and the table")
        table = self._table()
        self._end()
        return self._statement(table, [self._arg("table", exp.Literal.string(table))])

    # ---- pieces ----------------------------------------------------------------------------

    def _statement(self, table: str, args: list[RawArg]) -> IndexStatement:
        first = self.tokens[0]
        line, column = line_col(self.statement.source, first.start)
        end = self.tokens[-1].end + 1
        invocation = Invocation(self.routine, tuple(args), first.start, end, line, column)
        return IndexStatement(self.routine, table, invocation)

    @staticmethod
    def _arg(name: str, expression: exp.Expression) -> RawArg:
        return RawArg(name, expression, expression.sql("spark"))

    @staticmethod
    def _one_column(columns: list[str]) -> str:
        if len(columns) > 1:  # validate_spec's sentence, for the CALL says the same
            raise UsageError(
                f"An index covers one column, not {len(columns)} ({', '.join(columns)}): create "
                "one index per column."
            )
        return columns[0]

    def _peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _word(self, word: str) -> bool:
        token = self._peek()
        if (
            token is not None
            and token.token_type != TokenType.STRING
            and (token.text.upper() == word)
        ):
            self.i += 1
            return True
        return False

    def _words(self, *words: str) -> bool:
        start = self.i
        for word in words:
            if not self._word(word):
                self.i = start
                return False
        return True

    def _type(self, kind: TokenType) -> bool:
        token = self._peek()
        if token is not None and token.token_type == kind:
            self.i += 1
            return True
        return False

    def _expect(self, word: str) -> None:
        if not self._word(word):
            self._fail(f"expected {word}")

    def _expect_type(self, kind: TokenType, what: str) -> None:
        if not self._type(kind):
            self._fail(f"expected {what}")

    def _name(self, what: str) -> str:
        token = self._peek()
        if token is None or not _is_name(token):
            self._fail(f"expected {what}")
        assert token is not None
        self.i += 1
        return token.text

    def _path(self, what: str) -> str:
        parts = [self._name(what)]
        while self._type(TokenType.DOT):
            parts.append(self._name(what))
        return ".".join(parts)

    def _table(self) -> str:
        parts = [self._name("the table's name")]
        while self._type(TokenType.DOT):
            parts.append(self._name("the table's name"))
        return identifiers.display(parts)

    def _properties(self) -> list[tuple[str, str]]:
        self._expect_type(TokenType.L_PAREN, "'(' and the options")
        out: list[tuple[str, str]] = []
        while True:
            token = self._peek()
            if token is not None and token.token_type == TokenType.STRING:
                self.i += 1
                key = token.text
            else:
                key = self._path("an option's name")
            self._type(TokenType.EQ)
            out.append((key, self._value(key)))
            if not self._type(TokenType.COMMA):
                break
        self._expect_type(TokenType.R_PAREN, "')' after the options")
        return out

    def _value(self, key: str) -> str:
        sign = "-" if self._type(TokenType.DASH) else ""
        if not sign:
            self._type(TokenType.PLUS)
        token = self._peek()
        if token is None:
            self._fail(f"expected a value for option '{key}'")
        assert token is not None
        if token.token_type == TokenType.NUMBER or (
            not sign and token.token_type in (TokenType.STRING, TokenType.TRUE, TokenType.FALSE)
        ):
            self.i += 1
            text = token.text.lower() if token.token_type != TokenType.STRING else token.text
            return sign + text
        self._fail(f"expected a value for option '{key}' (a string, number, true or false)")
        raise AssertionError  # unreachable: _fail raises

    def _end(self) -> None:
        token = self._peek()
        if token is not None:
            self._fail(f"unexpected '{token.text}'")

    def _fail(self, what: str) -> None:
        index = self.i
        token = self.tokens[min(index, len(self.tokens) - 1)]
        offset = token.start if index < len(self.tokens) else token.end + 1
        line, column = line_col(self.statement.source, offset)
        raise SqlParseError(
            f"Cannot parse the {_LABEL[self.routine]} statement at line "
            f"{line}, column {column}: {what}; write {_USAGE[self.routine]}.",
            line,
            column,
        )
