"""A streaming job as data: its table declarations, functions, settings and queries.

A job file is Flink-style streaming SQL (``sparkext.streaming.dialect.Streaming``)::

    CREATE FUNCTION norm AS 'mypkg.udfs.norm';
    SET 'table.exec.state.ttl' = '1 h';
    CREATE TABLE lake.db.bids (bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING,
        WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE);
    INSERT INTO lake.db.totals SELECT window_start, window_end, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE lake.db.bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;

``CREATE TABLE`` declares a table of the catalog (created when missing, physical columns only);
its watermark, computed columns and primary key are the job's metadata about that table.

Floor: streaming.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from sparkext import durations
from sparkext.errors import SqlParseError
from sparkext.routing.tokens import unterminated_at
from sparkext.streaming.dialect import Streaming

# Table properties that give an undeclared catalog table its time attribute.
EVENT_TIME_PROPERTY = "sparkext.event-time-column"
WATERMARK_DELAY_PROPERTY = "sparkext.watermark-delay"
STATE_TTL_SETTING = "table.exec.state.ttl"
SESSION_LOOKBACK_SETTING = "sparkext.session.max-duration"


class StreamingSqlError(SqlParseError):
    """A job's streaming SQL is invalid, or uses a construct the batch rewrite cannot express."""


class UpdatingQueryError(StreamingSqlError):
    """The query produces updates (an aggregate without a window, keep-last dedup, Top-N, a
    join without a time bound): only a sink with a primary key can take it (as upserts)."""

    def __init__(self, message: str, line: int | None, column: int | None, what: str):
        super().__init__(message, line, column)
        self.what = what  # the updating operator, as the sentence names it


UPSERT_HINT = (
    "declare the sink's key — PRIMARY KEY (…) NOT ENFORCED in its CREATE TABLE (or identifier "
    "fields on the table) — and sparkext writes the query's final rows as upserts"
)


def updating_at(node: exp.Expr | None, what: str, otherwise: str) -> UpdatingQueryError:
    """``UpdatingQueryError``: '<what> produces updates, which an append-only sink cannot hold;
    <the primary-key hint>, or <otherwise>.'"""
    error = error_at(
        node,
        f"{what} produces updates, which an append-only sink cannot hold; {UPSERT_HINT}, "
        f"or {otherwise}.",
    )
    return UpdatingQueryError(str(error), error.line, error.column, what)


def position(node: exp.Expr | None) -> tuple[int | None, int | None]:
    """Line and column of the first token of ``node`` that the parser placed."""
    for child in node.walk() if node is not None else ():
        if "line" in child.meta:
            return child.meta["line"], child.meta["col"]
    return None, None


def error_at(node: exp.Expr | None, message: str) -> StreamingSqlError:
    """``StreamingSqlError`` whose text starts with the node's line and column."""
    line, col = position(node)
    where = f"line {line}, column {col}: " if line is not None else ""
    return StreamingSqlError(where + message, line, col)


def parse_duration(text: str) -> timedelta:
    """``'10 minutes'``, ``'1 h'``, ``'90s'``, ``'1.5 hours'`` → timedelta.

    >>> parse_duration("10 minutes"), parse_duration("1 h")
    (datetime.timedelta(seconds=600), datetime.timedelta(seconds=3600))
    >>> parse_duration("90s")
    datetime.timedelta(seconds=90)
    """
    try:
        return durations.parse(text)
    except ValueError:
        raise StreamingSqlError(
            f"'{text}' is not a duration; write a number and a unit, e.g. '10 minutes' or '1 h'."
        ) from None


def interval(node: exp.Expr) -> timedelta:
    """The duration of ``INTERVAL '10' MINUTES`` / ``INTERVAL '10 minutes'``."""
    if isinstance(node, exp.Interval):
        unit = node.unit
        unit_text = unit.name if unit is not None else ""
        value = node.this.name if isinstance(node.this, exp.Literal) else None
        if value is not None:
            return parse_duration(f"{value} {unit_text}" if unit_text else value)
    raise error_at(
        node, f"{node.sql(dialect='spark')} is not an interval such as INTERVAL '10' MINUTES."
    )


def spark_duration(delta: timedelta) -> str:
    """The shortest exact Spark duration string: 600 s → '10 minutes'.

    >>> spark_duration(timedelta(minutes=10)), spark_duration(timedelta(milliseconds=1500))
    ('10 minutes', '1500 milliseconds')
    """
    micros = round(delta.total_seconds() * 1_000_000)
    for unit, size in (
        ("days", 86_400_000_000),
        ("hours", 3_600_000_000),
        ("minutes", 60_000_000),
        ("seconds", 1_000_000),
        ("milliseconds", 1000),
    ):
        if micros % size == 0:
            return f"{micros // size} {unit}"
    return f"{micros} microseconds"


def table_key(table: exp.Table) -> str:
    """How a table is named in the job: its dotted name, lower case, without alias."""
    return table_name(table).lower()


def table_name(table: exp.Table) -> str:
    """The table's dotted name as the job writes it (what the catalog is asked for: a Hadoop
    catalog's names are case-sensitive)."""
    return ".".join(part.name for part in table.parts)


@dataclass
class TableDecl:
    """One ``CREATE TABLE`` of the job."""

    name: str
    statement: exp.Create
    physical: list[exp.ColumnDef] = field(default_factory=list)
    computed: dict[str, exp.Expr] = field(default_factory=dict)
    proctime: set[str] = field(default_factory=set)
    watermark: tuple[str, timedelta] | None = None
    primary_key: list[str] = field(default_factory=list)
    partitioned_by: list[exp.Expr] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    """Everything a job file says, in the order it says it."""

    tables: dict[str, TableDecl] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    queries: list[exp.Expr] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # table key → its name as written

    def spelled(self, key: str) -> str:
        """A table's name as the job writes it (``key``: its lower-case :func:`table_key`)."""
        return self.names.get(key.lower(), key)

    @property
    def state_ttl(self) -> timedelta | None:
        value = self.settings.get(STATE_TTL_SETTING)
        return parse_duration(value) if value else None

    @property
    def session_lookback(self) -> timedelta:
        return parse_duration(self.settings.get(SESSION_LOOKBACK_SETTING, "1 day"))


def _watermark(constraint: exp.WatermarkColumnConstraint) -> tuple[str, timedelta]:
    column, expression = constraint.this, constraint.expression
    if isinstance(expression, exp.Column) and expression.name == column.name:
        return column.name, timedelta(0)
    if (
        isinstance(expression, exp.Sub)
        and isinstance(expression.this, exp.Column)
        and expression.this.name == column.name
    ):
        return column.name, interval(expression.expression)
    raise error_at(
        constraint,
        f"WATERMARK FOR {column.name} AS {expression.sql(dialect='spark')} is not supported; "
        f"write WATERMARK FOR {column.name} AS {column.name} - INTERVAL 'n' SECONDS.",
    )


def _declare_table(create: exp.Create) -> TableDecl:
    schema = create.this
    if not isinstance(schema, exp.Schema):
        raise error_at(create, "CREATE TABLE in a job must list its columns.")
    decl = TableDecl(name=table_key(schema.this), statement=create)
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            computed = next(
                (
                    c.args["kind"]
                    for c in item.constraints
                    if isinstance(c.args.get("kind"), exp.ComputedColumnConstraint)
                ),
                None,
            )
            if computed is None:
                decl.physical.append(item)
            elif (
                isinstance(computed.this, exp.Anonymous)
                and computed.this.name.upper() == "PROCTIME"
            ):
                decl.proctime.add(item.name)
            else:
                decl.computed[item.name] = computed.this
        elif isinstance(item, exp.WatermarkColumnConstraint):
            decl.watermark = _watermark(item)
        elif isinstance(item, exp.PrimaryKey):
            decl.primary_key = [e.name for e in item.expressions]
        else:
            raise error_at(item, f"{item.sql(dialect='spark')} is not supported in CREATE TABLE.")
    for prop in (create.args.get("properties") or exp.Properties()).expressions:
        if isinstance(prop, exp.PartitionedByProperty):
            target = prop.this
            decl.partitioned_by = (
                list(target.expressions) if isinstance(target, exp.Schema | exp.Tuple) else [target]
            )
        elif isinstance(prop, exp.Property):
            key = prop.name if not isinstance(prop.this, exp.Literal) else prop.this.name
            decl.options[key] = prop.args["value"].name
    connector = decl.options.get("connector", "iceberg").lower()
    if connector != "iceberg":
        raise error_at(
            create,
            f"table {decl.name} uses connector '{connector}'; jobs read and write Iceberg tables "
            "of the catalog only (drop the WITH clause or use 'connector'='iceberg').",
        )
    return decl


# Flink constructs sparkext does not run, found by their tokens before the parse (some do not
# parse as Spark SQL at all, and the parser's own complaint would not name them).
_UNSUPPORTED = (
    (
        ("MATCH_RECOGNIZE",),
        "MATCH_RECOGNIZE (row pattern matching) has no Spark equivalent and sparkext does not "
        "run it; express the pattern with window functions (LAG/LEAD over the event time) or "
        "run this job on Flink.",
    ),
    (
        ("STATEMENT", "SET"),
        "a STATEMENT SET is not needed: write its INSERT INTO statements one after another; "
        "each runs as its own atomic commit.",
    ),
    (
        ("VIEW",),
        "CREATE VIEW is not supported in a job; write the view's query where it is read, as a "
        "subquery or in a WITH clause.",
    ),
    (
        ("LATERAL", "TABLE", "("),
        "LATERAL TABLE(…) calls a table function, and sparkext registers scalar functions only; "
        "for an array column write CROSS JOIN UNNEST(arr) AS t (x).",
    ),
)


def _creates_view(before: list[str]) -> bool:
    """Whether the words before a VIEW are CREATE [OR REPLACE] [TEMPORARY]."""
    head = before[:]
    while head and head[-1] in ("OR", "REPLACE", "TEMPORARY", "TEMP"):
        head.pop()
    return bool(head) and head[-1] == "CREATE"


def _tokens(text: str) -> list[Token]:
    """The job's tokens; an unterminated string, identifier or comment is a StreamingSqlError."""
    tokenizer = Streaming().tokenizer()
    try:
        return tokenizer.tokenize(text)
    except TokenError:
        line, col, snippet = unterminated_at(text, tokenizer.tokens)
        raise StreamingSqlError(
            f"line {line}, column {col}: an unterminated string, quoted identifier or comment "
            f"starts at '{snippet}'; close it.",
            line,
            col,
        ) from None


def _refuse_unsupported(tokens: list[Token]) -> None:
    words: list[str] = []
    places: list[tuple[int, int]] = []
    previous = None
    for token in tokens:
        if token.token_type != TokenType.STRING:
            words.append(token.text.upper())
            places.append((token.line, token.col))
        elif previous in (TokenType.COMMAND, TokenType.EXECUTE):  # the rest of EXECUTE …
            words += token.text.upper().split()[:2]
            places += [(token.line, token.col)] * 2
        previous = token.token_type  # a string literal is neither a word nor a place
    for index, (line, col) in enumerate(places):
        for pattern, sentence in _UNSUPPORTED:
            if tuple(words[index : index + len(pattern)]) != pattern:
                continue
            if pattern == ("VIEW",) and not _creates_view(words[:index]):
                continue
            raise StreamingSqlError(f"line {line}, column {col}: {sentence}", line, col)


# What may not follow a comma: Flink's grammar (Calcite's) has no trailing comma in any list
# (SELECT, GROUP BY, ORDER BY, PARTITION BY, FROM, arguments, columns, WITH options) and no
# empty item, while sqlglot's parser skips both silently.
_NOT_AFTER_A_COMMA = {
    TokenType.COMMA,
    TokenType.R_PAREN,
    TokenType.SEMICOLON,
    TokenType.SELECT,
    TokenType.FROM,
    TokenType.WHERE,
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.WINDOW,
    TokenType.QUALIFY,
    TokenType.ORDER_BY,
    TokenType.PARTITION_BY,
    TokenType.DISTRIBUTE_BY,
    TokenType.SORT_BY,
    TokenType.CLUSTER_BY,
    TokenType.LIMIT,
    TokenType.UNION,
    TokenType.INTERSECT,
    TokenType.EXCEPT,
    TokenType.JOIN,
    TokenType.ON,
    TokenType.USING,
    TokenType.ROWS,
    TokenType.RANGE,
    TokenType.INTO,
}
# The list a comma belongs to, by the clause that opens it.
_LISTS = {
    TokenType.SELECT: "SELECT list",
    TokenType.GROUP_BY: "GROUP BY list",
    TokenType.ORDER_BY: "ORDER BY list",
    TokenType.PARTITION_BY: "PARTITION BY list",
    TokenType.FROM: "FROM list",
    TokenType.WITH: "WITH list",
    TokenType.VALUES: "VALUES list",
}
# The list in parentheses after a clause keyword: TABLE t PARTITION BY (a, b), WITH ('k'='v').
_PARENTHESIZED: dict[TokenType | None, str] = {
    TokenType.PARTITION_BY: "PARTITION BY list",
    TokenType.WITH: "WITH option list",
}
_CLAUSES = {*_LISTS, TokenType.WHERE, TokenType.HAVING, TokenType.ON, TokenType.SET}


def _list_of(tokens: list[Token], comma: int) -> str:
    """The name of the list the comma at ``comma`` separates ("GROUP BY list", …)."""
    depth = 0
    for index in range(comma - 1, -1, -1):
        kind = tokens[index].token_type
        if kind == TokenType.R_PAREN:
            depth += 1
        elif kind == TokenType.L_PAREN:
            if depth == 0:  # the list is inside these parentheses
                before = tokens[index - 1].token_type if index else None
                return _PARENTHESIZED.get(before, "list in parentheses")
            depth -= 1
        elif depth == 0 and kind in _CLAUSES:
            return _LISTS.get(kind, "list")
    return "list"


def _refuse_trailing_commas(tokens: list[Token]) -> None:
    """Refuse what Flink refuses and sqlglot accepts: ``GROUP BY a, b,`` and ``a,, b``."""
    for index, token in enumerate(tokens):
        if token.token_type != TokenType.COMMA:
            continue
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        if after is not None and after.token_type not in _NOT_AFTER_A_COMMA:
            continue
        where = f"line {token.line}, column {token.col}"
        if after is not None and after.token_type == TokenType.COMMA:
            sentence = "two commas in a row; remove one (Flink SQL has no empty list item)."
        else:
            ahead = f"before '{after.text}'" if after is not None else "at the end of the job"
            sentence = (
                f"the {_list_of(tokens, index)} ends with a comma {ahead}; remove the trailing "
                "comma (Flink SQL does not allow one)."
            )
        raise StreamingSqlError(f"{where}: {sentence}", token.line, token.col)


def check_syntax(text: str) -> None:
    """Check a job's text as far as it can be checked without Spark or a catalog, in well under
    a second: syntax, constructs sparkext refuses, trailing commas, the statements a job may
    hold, its CREATE TABLE declarations and its SET durations.

    Raises the :class:`StreamingSqlError` (line and column in its message and attributes) that
    :func:`parse_job`, and so ``run_stream``/``run_backfill``, would raise later; returns
    ``None`` when the text passes. What needs the catalog (the tables a job reads without
    declaring them, their columns and event times) is checked when the job is planned.

    >>> check_syntax("INSERT INTO s SELECT a FROM t GROUP BY a,")
    Traceback (most recent call last):
    ...
    sparkext.streaming.job.StreamingSqlError: line 1, column 41: the GROUP BY list ends with a \
comma at the end of the job; remove the trailing comma (Flink SQL does not allow one).
    """
    parse_job(text)


def parse_job(text: str) -> Job:
    """Parse a job file into a :class:`Job`; errors name line and column."""
    tokens = _tokens(text)
    _refuse_unsupported(tokens)
    _refuse_trailing_commas(tokens)
    try:
        statements = [s for s in sqlglot.parse(text, read=Streaming) if s is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        line, col = first.get("line"), first.get("col")
        reason = first.get("description", str(error)).rstrip(".")
        near = first.get("highlight", "")
        if "<class" in reason:  # sqlglot's internal wording: say where instead
            reason = "syntax error"
        raise StreamingSqlError(
            f"line {line}, column {col}: {reason} (near '{near}').", line, col
        ) from None
    job = Job()
    for statement in statements:
        for table in statement.find_all(exp.Table):
            if isinstance(table.this, exp.Identifier):
                job.names.setdefault(table_key(table), table_name(table))
    for statement in statements:
        if isinstance(statement, exp.Create) and statement.kind == "TABLE":
            decl = _declare_table(statement)
            job.tables[decl.name] = decl
        elif isinstance(statement, exp.Create) and statement.kind == "FUNCTION":
            target = statement.expression
            if not (isinstance(target, exp.Literal) and target.is_string and "." in target.name):
                raise error_at(statement, "CREATE FUNCTION needs AS 'module.function'.")
            job.functions[statement.this.name.lower()] = target.name
        elif isinstance(statement, exp.Set):
            for item in statement.expressions:
                assignment = item.this
                if not isinstance(assignment, exp.EQ):
                    raise error_at(statement, "SET needs 'key' = 'value'.")
                key, value = assignment.this.name, assignment.expression.name
                if key in (STATE_TTL_SETTING, SESSION_LOOKBACK_SETTING):
                    try:
                        parse_duration(value)
                    except StreamingSqlError as bad:
                        raise error_at(statement, f"SET '{key}': {bad}") from None
                job.settings[key] = value
        elif isinstance(statement, exp.Insert | exp.Query):
            job.queries.append(statement)
        else:
            raise error_at(
                statement,
                f"{statement.key.upper()} is not a job statement; a job holds CREATE TABLE, "
                "CREATE FUNCTION, SET and INSERT INTO / SELECT.",
            )
    if not job.queries:
        raise StreamingSqlError("the job has no INSERT INTO or SELECT statement to run.")
    return job
