"""The streaming-SQL dialect: Flink-style streaming SQL parsed by sqlglot.

sqlglot has no Flink dialect (its maintainers expect a custom one), so this is a small
subclass of sqlglot's Spark dialect that adds what streaming jobs are written with:

* ``CREATE TABLE`` with ``WATERMARK FOR col AS col - INTERVAL …`` and computed columns
  such as ``proc AS PROCTIME()``, ``PRIMARY KEY (…) NOT ENFORCED`` and ``WITH ('k'='v')``;
* table hints ``t /*+ OPTIONS('streaming'='true', …) */`` after a table name;
* window table-valued functions ``TUMBLE``, ``HOP``, ``CUMULATE``, ``SESSION`` with positional
  or named (``DATA => TABLE t``) arguments, ``TABLE t [PARTITION BY …]`` and ``DESCRIPTOR(…)``;
* ``FOR SYSTEM_TIME AS OF`` on joined tables, ``CREATE FUNCTION f AS 'module.function'``,
  ``SET 'key' = 'value'`` and everything Spark SQL already has (GROUPING SETS, OVER, …).

sqlglot's expression classes are compiled (they cannot be subclassed from Python), so the
extra constructs are represented with stock nodes: a window TVF is ``exp.Anonymous`` named
``TUMBLE``/``HOP``/…, its ``TABLE t`` argument an ``exp.Table`` whose ``meta`` holds the
``PARTITION BY`` columns (``meta["partition_by"]``), a table hint a dict in the table's
``meta["options"]``.

>>> import sqlglot
>>> tree = sqlglot.parse_one(
...     "SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))",
...     read=Streaming,
... )
>>> tvf = tree.find(exp.Anonymous)
>>> tvf.name, tvf.expressions[0].name
('TABLE', 'TUMBLE')

Floor: streaming.
"""

from __future__ import annotations

import sqlglot.parser
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from sparkext.errors import EnvironmentSetupError

WINDOW_TVFS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")

if not sqlglot.parser.__file__.endswith(".py"):  # pragma: no cover - depends on the install
    raise EnvironmentSetupError(
        "sqlglotc (sqlglot compiled with mypyc) is installed and its parser cannot be extended "
        "by the streaming dialect; run 'pip uninstall -y sqlglotc'."
    )


# sqlglot's own parser tables are plain class attributes; overriding them is the extension point.
class StreamingParser(SparkParser):
    CONSTRAINT_PARSERS = {  # noqa: RUF012
        **SparkParser.CONSTRAINT_PARSERS,
        "WATERMARK": lambda self: self.expression(
            exp.WatermarkColumnConstraint(
                this=self._match(TokenType.FOR) and self._parse_column(),
                expression=self._match(TokenType.ALIAS) and self._parse_disjunction(),
            )
        ),
    }

    SCHEMA_UNNAMED_CONSTRAINTS = {*SparkParser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}  # noqa: RUF012

    FUNC_TOKENS = {*SparkParser.FUNC_TOKENS, TokenType.SESSION}  # noqa: RUF012

    FUNCTION_PARSERS = {  # noqa: RUF012
        **SparkParser.FUNCTION_PARSERS,
        **{name: (lambda n: lambda self: self._parse_window_tvf(n))(name) for name in WINDOW_TVFS},
    }

    def _parse_window_tvf(self, name: str) -> exp.Expr:
        token = self._tokens[self._index - 2]  # the function name, before "("
        node = self.expression(
            exp.Anonymous(this=name, expressions=self._parse_csv(self._parse_tvf_argument))
        )
        node.meta.update(line=token.line, col=token.col)
        return node

    def _parse_tvf_argument(self) -> exp.Expr | None:
        if self._curr and self._next and self._next.token_type == TokenType.FARROW:
            key = exp.var(self._curr.text.strip("`").upper())
            self._advance(2)
            return self.expression(exp.Kwarg(this=key, expression=self._parse_tvf_value()))
        return self._parse_tvf_value()

    def _parse_tvf_value(self) -> exp.Expr | None:
        if self._match(TokenType.TABLE):
            table = self._parse_table_parts()
            assert table is not None  # only the fast path returns None
            if self._match(TokenType.PARTITION_BY) or self._match_text_seq("PARTITION", "BY"):
                table.meta["partition_by"] = (
                    self._parse_wrapped_csv(self._parse_column)
                    if self._curr and self._curr.token_type == TokenType.L_PAREN
                    else [self._parse_column()]
                )
            table.meta["table_argument"] = True
            return table
        return self._parse_assignment()

    def _parse_table_parts(
        self,
        schema: bool = False,
        is_db_reference: bool = False,
        wildcard: bool = False,
        fast: bool = False,
    ) -> exp.Table | exp.Dot | None:
        table = super()._parse_table_parts(schema, is_db_reference, wildcard, fast)
        if isinstance(table, exp.Table) and self._match(TokenType.HINT) and self._prev_comments:
            table.meta["options"] = self._parse_options_hint(self._prev_comments[0].strip())
        return table

    def _parse_options_hint(self, text: str) -> dict[str, str]:
        hint: exp.Expr | None
        try:
            hint = exp.maybe_parse(text, dialect="spark")
        except ParseError:
            hint = None
        pairs = hint.expressions if isinstance(hint, exp.Anonymous) else []
        if (
            not isinstance(hint, exp.Anonymous)
            or hint.name.upper() != "OPTIONS"
            or not all(
                isinstance(p, exp.EQ) and p.this.is_string and p.expression.is_string for p in pairs
            )
        ):
            self.raise_error(f"a table hint must be OPTIONS('key'='value', …), not /*+ {text} */")
            return {}
        return {p.this.name: p.expression.name for p in pairs}


class Streaming(Spark):
    """Flink-style streaming SQL (see the module documentation)."""

    # sqlglot's own tokenizer tables are plain class attributes; overriding them is the
    # extension point.
    class Tokenizer(Spark.Tokenizer):
        # Flink's string literals are SQL's: '' is a quote, a backslash is itself ('\d+' is a
        # regex, not 'd+'); Spark's tokenizer would read backslash escapes.
        STRING_ESCAPES = ["'"]  # noqa: RUF012

        # A hint may follow a table name or alias: FROM t /*+ OPTIONS(...) */
        TOKENS_PRECEDING_HINT = {  # noqa: RUF012
            *Spark.Tokenizer.TOKENS_PRECEDING_HINT,
            TokenType.VAR,
            TokenType.IDENTIFIER,
        }

    Parser = StreamingParser
