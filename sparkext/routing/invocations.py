"""Find sparkext's own SQL in a statement: ``CALL sparkext.x(...)`` and ``sparkext.f(...)`` tables.

Only the argument lists are parsed (with sqlglot's Spark parser, on the statement's own tokens, so
error positions are those of the user's text); the rest of a statement is left byte for byte as
written and goes to Spark unchanged.

Floor: routing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from sparkext.errors import SqlParseError
from sparkext.routing.tokens import Statement, line_col

NAMESPACE = "sparkext"
_ARGS = "__sparkext_args"
_TABLE_POSITION = {TokenType.FROM, TokenType.JOIN, TokenType.LATERAL}


@dataclass(frozen=True)
class RawArg:
    """One argument as written: its name (``None`` when positional) and its sqlglot expression."""

    name: str | None
    expression: exp.Expression
    sql: str


@dataclass(frozen=True)
class Invocation:
    """``sparkext.<name>(args)`` found in a statement, with its character span in the source."""

    name: str
    args: tuple[RawArg, ...]
    start: int
    end: int  # exclusive
    line: int
    column: int


def _is_name(token: Token) -> bool:
    return token.token_type == TokenType.IDENTIFIER or token.text.isidentifier()


def _is_namespace(tokens: tuple[Token, ...], i: int) -> bool:
    return (
        i + 2 < len(tokens)
        and tokens[i].text.lower() == NAMESPACE
        and tokens[i].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
        and tokens[i + 1].token_type == TokenType.DOT
        and _is_name(tokens[i + 2])
    )


def _matching_paren(tokens: tuple[Token, ...], open_index: int, source: str) -> int:
    depth = 0
    for j in range(open_index, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    line, column = line_col(source, tokens[open_index].start)
    raise SqlParseError(
        f"Cannot parse the SQL at line {line}, column {column}: the '(' opened here is never "
        "closed; add the missing ')'.",
        line,
        column,
    )


def _parse_args(
    tokens: tuple[Token, ...], name_index: int, close: int, source: str
) -> tuple[RawArg, ...]:
    """Parse ``name ( ... )`` as a function call and return its argument expressions."""
    first = tokens[name_index]
    select = Token(TokenType.SELECT, "SELECT", first.line, first.col, first.start, first.start)
    name = Token(TokenType.VAR, _ARGS, first.line, first.col, first.start, first.end)
    body = [select, name, *tokens[name_index + 1 : close + 1]]
    try:
        parsed = Spark().parser().parse(body, source)[0]
    except ParseError as error:
        detail = error.errors[0] if error.errors else {}
        line, column = detail.get("line"), detail.get("col")
        what = detail.get("description", str(error)).rstrip(".")
        if "<class" in what:  # sqlglot's internal wording: say what the user sees instead
            what = f"unexpected '{detail.get('highlight', '')}'"
        raise SqlParseError(
            f"Cannot parse the arguments at line {line}, column {column}: {what}; write "
            "arguments as name => value or as values in parameter order.",
            line,
            column,
        ) from None
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        line, column = line_col(source, first.start)
        raise SqlParseError(
            f"Cannot parse the arguments of sparkext.{first.text.lower()} at line {line}, "
            f"column {column}; check each function's arguments, e.g. map('key', 'value').",
            line,
            column,
        ) from None
    call = parsed.expressions[0] if isinstance(parsed, exp.Select) else None
    if not isinstance(call, exp.Anonymous):
        line, column = line_col(source, first.start)
        raise SqlParseError(
            f"Cannot parse the arguments at line {line}, column {column}; write arguments as "
            "name => value or as values in parameter order.",
            line,
            column,
        )
    args: list[RawArg] = []
    for arg in call.expressions:
        if isinstance(arg, exp.Kwarg):
            args.append(RawArg(arg.this.name.lower(), arg.expression, arg.expression.sql("spark")))
        else:
            args.append(RawArg(None, arg, arg.sql("spark")))
    return tuple(args)


def _invocation(statement: Statement, i: int) -> tuple[Invocation, int]:
    tokens, source = statement.tokens, statement.source
    name_token = tokens[i + 2]
    line, column = line_col(source, tokens[i].start)
    if i + 3 >= len(tokens) or tokens[i + 3].token_type != TokenType.L_PAREN:
        raise SqlParseError(
            f"Cannot parse the SQL at line {line}, column {column}: "
            f"'{NAMESPACE}.{name_token.text}' must be followed by an argument list in "
            "parentheses, e.g. sparkext.help().",
            line,
            column,
        )
    close = _matching_paren(tokens, i + 3, source)
    args = _parse_args(tokens, i + 2, close, source)
    name = name_token.text.lower()
    return Invocation(name, args, tokens[i].start, tokens[close].end + 1, line, column), close


def parse_call(statement: Statement) -> Invocation | None:
    """Return the invocation if ``statement`` is ``CALL sparkext.<name>(...)``, else ``None``."""
    tokens = statement.tokens
    if statement.first_word != "CALL" or not _is_namespace(tokens, 1):
        return None
    invocation, close = _invocation(statement, 1)
    if close + 1 < len(tokens):
        extra = tokens[close + 1]
        line, column = line_col(statement.source, extra.start)
        raise SqlParseError(
            f"Cannot parse the SQL at line {line}, column {column}: unexpected '{extra.text}' "
            "after the CALL's closing ')'; end the statement with ';'.",
            line,
            column,
        )
    return invocation


def _in_from_list(tokens: tuple[Token, ...], comma: int) -> bool:
    """True when the comma at ``comma`` separates FROM items (not SELECT items) at its depth."""
    depth = 0
    for j in range(comma - 1, -1, -1):
        kind = tokens[j].token_type
        if kind == TokenType.R_PAREN:
            depth += 1
        elif kind == TokenType.L_PAREN:
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0 and kind in (TokenType.FROM, TokenType.JOIN):
            return True
        elif depth == 0 and kind in (TokenType.SELECT, TokenType.WHERE, TokenType.GROUP_BY):
            return False
    return False


def find_table_functions(statement: Statement) -> list[Invocation]:
    """Return every ``sparkext.<name>(...)`` that stands where a table does (FROM, JOIN, ``,``)."""
    tokens = statement.tokens
    if not any(t.text.lower() == NAMESPACE for t in tokens):
        return []
    found: list[Invocation] = []
    i = 1
    while i < len(tokens):
        previous = tokens[i - 1].token_type
        in_table_position = previous in _TABLE_POSITION or (
            previous == TokenType.COMMA and _in_from_list(tokens, i - 1)
        )
        if (
            in_table_position
            and _is_namespace(tokens, i)
            and i + 3 < len(tokens)
            and tokens[i + 3].token_type == TokenType.L_PAREN
        ):
            invocation, close = _invocation(statement, i)
            found.append(invocation)
            i = close + 1
        else:
            i += 1
    return found
