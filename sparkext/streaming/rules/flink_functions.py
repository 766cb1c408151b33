"""Flink built-in functions → Spark expressions with Flink's meaning.

The job is Flink SQL, but the Streaming dialect parses it with Spark's grammar, so a Flink
built-in whose Spark namesake means something else would run with Spark's meaning:
``REGEXP_EXTRACT`` returns '' instead of NULL when nothing matches, ``SUBSTRING(s, 1, -1)`` ''
instead of NULL, ``5 / 2`` 2.5 instead of 2, and ``SPLIT_INDEX`` does not exist in Spark (the
query failed only after the sink table had been created). This rule runs first and rewrites
every call whose meaning differs into Spark expressions that give Flink's result; a Flink
built-in without a faithful translation is refused by name, before anything is created.

:data:`FLINK_FUNCTIONS` is the table, as data: every built-in of Flink's function list
(string, temporal, conditional, JSON, hashing, collection, arithmetic, aggregate) with what
sparkext does with it: ``same`` (Spark's function of that name means the same), ``translated``
(to what) or ``refused`` (why, and what to write instead). Window functions (TUMBLE, HOP,
SESSION, CUMULATE, PROCTIME, …) belong to other rules and are left alone here, and so is a call
to a function the job declares itself (``CREATE FUNCTION``).

Flink's meanings are read from its documentation (``docs/data/sql_functions.yml``) and, where
the documentation is silent (REGEXP_EXTRACT's default group, SUBSTRING at negative positions,
LPAD with a negative length, TIMESTAMPDIFF's months), from its runtime functions.

Floor: streaming rules (pure; no pyspark).

It is longer than the other rules (about 770 lines) and kept whole on purpose: the table of
what each built-in becomes is already data in :mod:`sparkext.streaming.flink_builtins`; what is
left here is one small translation per built-in and the dispatch tables that name them, which
are read side by side when a translation is checked against Flink's runtime.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any, cast

import sqlglot
from sqlglot import exp

from sparkext.streaming.analysis import Analysis, Step
from sparkext.streaming.context import RewriteContext
from sparkext.streaming.dialect import Streaming
from sparkext.streaming.flink_builtins import (
    FLINK_FUNCTIONS,
    REFUSED,
    refusal,
)
from sparkext.streaming.job import Job, error_at, table_key
from sparkext.streaming.sqltools import window_tvf


def _refuse(node: exp.Expr, name: str, reason: str = "", fix: str = "") -> None:
    raise error_at(node, refusal(name, reason=reason, fix=fix))


# ---------------------------------------------------------------------------------------------
# building blocks


@cache
def _parsed(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


def _build(sql: str, **values: exp.Expr) -> exp.Expr:
    """``sql`` (Spark) with each ``:name`` replaced by a copy of ``values[name]``."""

    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in values:
            value = values[node.name].copy()
            if isinstance(node.parent, exp.Binary | exp.Unary) and isinstance(value, exp.Binary):
                value = exp.Paren(this=value)
            return value
        return node

    return _parsed(sql).copy().transform(fill)


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=[a.copy() for a in args])


def _int_literal(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.name)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_int:
        return -int(node.this.name)
    return None


def _string_literal(node: exp.Expr | None) -> str | None:
    return node.name if isinstance(node, exp.Literal) and node.is_string else None


def _parsed_default(node: exp.Expr | None) -> bool:
    """Whether the parser put ``node`` there as a default (it has no position in the text)."""
    return node is not None and "start" not in node.meta


def _literal_pattern(separator: exp.Expr) -> exp.Expr:
    """A Java regex matching ``separator`` literally."""
    text = _string_literal(separator)
    if text is not None:
        return exp.Literal.string(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", text))
    code = _int_literal(separator)
    if code is not None and 0 < code < 256:  # SPLIT_INDEX(s, 44, i): a character code
        return exp.Literal.string(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", chr(code)))
    return _build("concat('\\\\Q', :s, '\\\\E')", s=separator)


# Spark's LTRIM/RTRIM take the characters first; the dialect keeps Spark's argument order.
_TRIM_REVERSED = isinstance(
    sqlglot.parse_one("SELECT LTRIM(s, 'x')", read=Streaming).expressions[0].this, exp.Literal
)
_FLINK_DEFAULT_TIMESTAMP = (
    "^[0-9]{4,}-[0-9]{1,2}-[0-9]{1,2}( [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}([.][0-9]{0,9})?)?$"
)
_SPARK_PATTERN_LETTERS = set("GyDMLdQqEFahKkHmsSVzOXxZ")
_INTEGER_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
}
_EXTRACT_REFUSED = {
    "MILLISECOND", "MICROSECOND", "NANOSECOND", "EPOCH", "DECADE", "CENTURY", "MILLENNIUM",
    "ISOYEAR",
}  # fmt: skip
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"}


# ---------------------------------------------------------------------------------------------
# translations of typed nodes (what the Spark parser made of a Flink call)


def _regexp_extract(node: exp.RegexpExtract) -> exp.Expr:
    group = node.args.get("group")
    if group is None or _parsed_default(group):  # Flink's default group is 0, Spark's 1
        group = exp.Literal.number(0)
    call = exp.RegexpExtract(this=node.this.copy(), expression=node.expression.copy(), group=group)
    return _build("CASE WHEN :s RLIKE :r THEN :call END", s=node.this, r=node.expression, call=call)


def _regexp_replace(node: exp.RegexpReplace) -> exp.Expr:
    replacement = node.args["replacement"]
    text = _string_literal(replacement)
    if text is not None:
        quoted: exp.Expr = exp.Literal.string(text.replace("\\", "\\\\").replace("$", "\\$"))
    else:
        quoted = _build("replace(replace(:r, '\\\\', '\\\\\\\\'), '$', '\\\\$')", r=replacement)
    return exp.RegexpReplace(
        this=node.this.copy(), expression=node.expression.copy(), replacement=quoted
    )


def _str_to_map(node: exp.StrToMap) -> exp.Expr:
    # the parser fills the defaults in (without a position) when the user wrote none
    pairs = cast(exp.Expr, node.args.get("pair_delim"))
    pairs = exp.Literal.string(",") if _parsed_default(pairs) else pairs
    kv = cast(exp.Expr, node.args.get("key_value_delim"))
    kv = exp.Literal.string("=") if _parsed_default(kv) else kv
    # Java's String.split drops trailing empty strings: 'a=1,,' has one pair, ',,' none.
    text = _build("regexp_replace(:s, concat('(', :d, ')+$'), '')", s=node.this, d=pairs)
    call = exp.StrToMap(this=text, pair_delim=pairs.copy(), key_value_delim=kv.copy())
    return _build(
        "CASE WHEN :t = '' THEN CAST(map() AS MAP<STRING, STRING>) ELSE :call END",
        t=text,
        call=call,
    )


def _substring(node: exp.Substring) -> exp.Expr:
    start, length = node.args.get("start"), node.args.get("length")
    start_value, length_value = _int_literal(start), _int_literal(length)
    call = node.copy()
    branches = []
    if length is not None and (length_value is None or length_value < 0):
        branches.append(("CAST(NULL AS STRING)", _build(":n < 0", n=length)))
    if start is not None and (start_value is None or start_value < 0):
        branches.append(("''", _build(":p < -char_length(:s)", p=start, s=node.this)))
    if not branches:
        return call
    case = exp.Case(
        ifs=[exp.If(this=cond, true=_parsed(value).copy()) for value, cond in branches],
        default=call,
    )
    return case


def _pad(node: exp.Pad) -> exp.Expr:
    length, fill = node.expression, node.args.get("fill_pattern")
    length_value, fill_text = _int_literal(length), _string_literal(fill)
    if length_value is not None and length_value >= 0 and fill_text:
        return node.copy()
    return _build(
        "CASE WHEN :n < 0 OR :p = '' THEN CAST(NULL AS STRING) ELSE :call END",
        n=length,
        p=fill if fill is not None else exp.Literal.string(" "),
        call=node,
    )


def _trim(node: exp.Trim) -> exp.Expr:
    if _TRIM_REVERSED and "line" in node.meta and node.expression is not None:
        # LTRIM(str, chars) / RTRIM(str, chars) parsed in Spark's order (chars, str)
        return exp.Trim(
            this=node.expression.copy(),
            expression=node.this.copy(),
            position=node.args.get("position"),
        )
    return node


def _initcap(node: exp.Initcap) -> exp.Expr:
    return _build(
        "array_join(transform(split(:s, '(?<=[^A-Za-z0-9])|(?=[^A-Za-z0-9])', -1), "
        "_w -> CASE WHEN _w RLIKE '^[A-Za-z0-9]' "
        "THEN concat(upper(substring(_w, 1, 1)), lower(substring(_w, 2))) ELSE _w END), '')",
        s=node.this,
    )


def _overlay(node: exp.Overlay) -> exp.Expr:
    s, r, pos = node.this, node.expression, node.args["from_"]
    length = node.args.get("for_")
    if length is None:
        length = _build("char_length(:r)", r=r)
    return _build(
        "CASE WHEN :pos <= 0 OR :pos > char_length(:s) THEN :s "
        "WHEN :len <= 0 THEN concat(substring(:s, 1, :pos - 1), :r) "
        "ELSE overlay(:s PLACING :r FROM :pos FOR :len) END",
        s=s,
        r=r,
        pos=pos,
        len=length,
    )


def _regexp_split(node: exp.RegexpSplit) -> exp.Expr:
    return exp.RegexpSplit(
        this=node.this.copy(),
        expression=_literal_pattern(node.expression),
        limit=exp.Literal.number(-1),
    )


def _trunc(node: exp.Trunc) -> exp.Expr:
    digits = node.args.get("decimals")
    if digits is not None and _int_literal(digits) is None:
        _refuse(node, "TRUNCATE", " with a digit count that is not a literal", "write a number")
    digits = digits if digits is not None else exp.Literal.number(0)
    return _build("IF(:x < 0, ceil(:x, :n), floor(:x, :n))", x=node.this, n=digits)


def _extract(node: exp.Extract) -> exp.Expr:
    unit = node.name.upper()
    if unit in _EXTRACT_REFUSED:
        raise error_at(
            node,
            f"Flink's EXTRACT({unit} FROM …) has no Spark translation in sparkext; "
            "extract SECOND and compute the rest, or use unix_millis/unix_micros.",
        )
    if unit == "SECOND":
        return exp.Second(this=node.expression.copy())
    if unit == "ISODOW":
        return exp.Extract(this=exp.var("DAYOFWEEK_ISO"), expression=node.expression.copy())
    return node


def _floor_ceil(node: exp.Floor | exp.Ceil) -> exp.Expr:
    unit_node = node.args.get("to")
    if unit_node is None:
        return node
    unit = unit_node.name.upper()
    name = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
    if unit not in _TRUNC_UNITS:
        raise error_at(
            node,
            f"Flink's {name}(… TO {unit}) has no Spark translation in sparkext; "
            "write date_trunc with one of YEAR, QUARTER, MONTH, DAY, HOUR, MINUTE, SECOND.",
        )
    floor = exp.TimestampTrunc(this=node.this.copy(), unit=exp.Literal.string(unit))
    if isinstance(node, exp.Floor):
        return floor
    return _build(
        "CASE WHEN :f = :ts THEN :f ELSE :f + :step END",
        f=floor,
        ts=node.this,
        step=exp.Interval(this=exp.Literal.string("1"), unit=exp.var(unit)),
    )


def _greatest_least(node: exp.Greatest | exp.Least) -> exp.Expr:
    args = [node.this, *node.expressions]
    if all(isinstance(a, exp.Literal) for a in args):
        return node
    any_null = exp.or_(*[exp.Is(this=a.copy(), expression=exp.null()) for a in args])
    plain = type(node)(this=node.this.copy(), expressions=[e.copy() for e in node.expressions])
    return exp.Case(ifs=[exp.If(this=any_null, true=exp.null())], default=plain)


def _timestamp_diff(node: exp.TimestampDiff) -> exp.Expr:
    unit = node.text("unit").upper() or "DAY"
    start, end = node.expression, node.this  # TIMESTAMPDIFF(unit, start, end)
    if unit in ("MONTH", "QUARTER", "YEAR"):
        months = _flink_months(start, end)
        if unit == "MONTH":
            return months
        return exp.IntDiv(
            this=exp.Paren(this=months),
            expression=exp.Literal.number(3 if unit == "QUARTER" else 12),
        )
    ntz = exp.DataType.build("TIMESTAMP_NTZ")
    return exp.TimestampDiff(
        this=exp.cast(end.copy(), ntz), expression=exp.cast(start.copy(), ntz), unit=exp.var(unit)
    )


def _flink_months(start: exp.Expr, end: exp.Expr) -> exp.Expr:
    """Flink's month count from ``start`` to ``end`` (DateTimeUtils.subtractMonths).

    Forwards it is the most months ``m`` with start + m months <= end (the day clamped to the
    month's end, the time of day kept). Backwards it is minus the most months ``n`` with
    date(end) + n months <= date(start), one more when date(start) - n months is end's date
    and end's time of day is earlier than start's."""
    d1, d2 = exp.cast(start.copy(), "DATE"), exp.cast(end.copy(), "DATE")
    calendar = "CAST(months_between(trunc(:hi, 'MM'), trunc(:lo, 'MM')) AS INT)"
    forward = _build(
        ":m - IF(timestampadd(MONTH, :m, :t1) > :t2, 1, 0)",
        m=_build(calendar, lo=start, hi=end),
        t1=start,
        t2=end,
    )
    back = _build(
        ":m - IF(add_months(:d2, :m) > :d1, 1, 0)",
        m=_build(calendar, lo=end, hi=start),
        d1=d1,
        d2=d2,
    )
    backward = _build(
        "-:n - IF(add_months(:d1, -:n) = :d2 "
        "AND date_format(:t2, 'HH:mm:ss.SSSSSS') < date_format(:t1, 'HH:mm:ss.SSSSSS'), 1, 0)",
        n=back,
        d1=d1,
        d2=d2,
        t1=start,
        t2=end,
    )
    return _build(
        "CASE WHEN :d2 >= :d1 THEN :forward ELSE :backward END",
        d1=d1,
        d2=d2,
        forward=forward,
        backward=backward,
    )


def _str_to_unix(node: exp.StrToUnix) -> exp.Expr:
    if isinstance(node.this, exp.CurrentTimestamp):  # UNIX_TIMESTAMP(): now
        return node
    args = [node.this, node.args.get("format")]
    args = [a for a in args if a is not None and not isinstance(a, exp.Literal)]
    if not args:
        return _build("COALESCE(:call, CAST('-9223372036854775808' AS BIGINT))", call=node)
    conditions = exp.or_(*[exp.Is(this=a.copy(), expression=exp.null()) for a in args])
    return _build(
        "CASE WHEN :missing THEN CAST(NULL AS BIGINT) "
        "ELSE COALESCE(:call, CAST('-9223372036854775808' AS BIGINT)) END",
        missing=conditions,
        call=node,
    )


def _to_timestamp(node: exp.Cast) -> exp.Expr:
    # TO_TIMESTAMP(s): Flink's default form only, truncated to milliseconds (TIMESTAMP(3))
    return _build(
        "CASE WHEN :s RLIKE :form THEN date_trunc('MILLISECOND', CAST(:s AS TIMESTAMP)) END",
        s=node.this,
        form=exp.Literal.string(_FLINK_DEFAULT_TIMESTAMP),
    )


def _date_format(node: exp.TimeToStr) -> exp.Expr:
    from sqlglot.dialects.spark import Spark

    if _string_literal(node.args.get("format")) is None:
        return node
    pattern = (Spark().generator().format_time(node) or "''")[1:-1]
    outside_quotes = re.sub(r"'[^']*'", "", pattern)
    bad = sorted({c for c in outside_quotes if c.isalpha()} - _SPARK_PATTERN_LETTERS)
    if bad:
        raise error_at(
            node,
            f"Flink's DATE_FORMAT(…, '{pattern}') has no Spark translation in sparkext: Spark's "
            f"patterns have no letter {', '.join(bad)}; use y, M, d, H, m, s, S, E, a, z, X.",
        )
    return node


def _bracket(node: exp.Bracket) -> exp.Expr:
    target = node.this
    if (
        isinstance(target, exp.Column)
        and not target.table
        and not target.this.quoted
        and target.name.upper() == "MAP"
    ):
        return exp.Anonymous(this="map", expressions=[e.copy() for e in node.expressions])
    if len(node.expressions) != 1:
        return node
    return _fn("element_at", target, node.expressions[0])


def _array_contains(node: exp.ArrayContains) -> exp.Expr:
    return _build("exists(:a, _e -> _e <=> :x)", a=node.this, x=node.expression)


def _array_remove(node: exp.ArrayRemove) -> exp.Expr:
    return _build("filter(:a, _e -> NOT _e <=> :x)", a=node.this, x=node.expression)


def _array_sort(node: exp.ArraySort) -> exp.Expr:
    # Flink: ascending puts NULLs first, descending last, as Spark's sort_array does. (The
    # parser keeps two arguments only, so a third, null_first, argument cannot be seen here.)
    ascending = node.expression if node.expression is not None else exp.true()
    if not isinstance(ascending, exp.Boolean):
        _refuse(
            node, "ARRAY_SORT", " with an order that is not TRUE or FALSE", "write TRUE or FALSE"
        )
    return _fn("sort_array", node.this, ascending)


def _group_concat(node: exp.GroupConcat) -> exp.Expr:
    value = node.this
    distinct = isinstance(value, exp.Distinct)
    if distinct:
        value = value.expressions[0]
    separator = node.args.get("separator") or exp.Literal.string(",")
    collected = _fn("collect_set" if distinct else "collect_list", value)
    return _build(
        "CASE WHEN COUNT(:x) = 0 THEN CAST(NULL AS STRING) ELSE array_join(:c, :sep) END",
        x=value,
        c=collected,
        sep=separator,
    )


def _array_agg(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.IgnoreNulls):
        return _fn("collect_list", node.this.this)
    if isinstance(node.parent, exp.IgnoreNulls):
        return node
    if isinstance(node.this, exp.Distinct):
        _refuse(node, "ARRAY_AGG", " with DISTINCT", "write array_distinct(ARRAY_AGG(x))")
    return _build("transform(collect_list(named_struct('v', :x)), _e -> _e.v)", x=node.this)


def _column(node: exp.Column) -> exp.Expr:
    if node.table or node.this.quoted:
        return node
    name = node.name.upper()
    if name == "LOCALTIMESTAMP":
        return exp.CurrentTimestamp()
    if name in ("LOCALTIME", "CURRENT_TIME"):
        _refuse(node, name)
    return node


def _json_is(node: exp.Is) -> exp.Expr:
    if isinstance(node.expression, exp.JSON):
        _refuse(node, "IS JSON")
    return node


def _refused_node(name: str) -> Callable[[exp.Expr], exp.Expr]:
    def refuse(node: exp.Expr) -> exp.Expr:
        _refuse(node, name)
        return node

    return refuse


# ---------------------------------------------------------------------------------------------
# translations of calls the Spark parser does not know (exp.Anonymous), by upper-case name


def _json_path(path: exp.Expr) -> exp.Expr:
    text = _string_literal(path)
    if text is None:
        return path
    # Flink's path modes: lax (missing → empty → NULL) and strict (missing → error → NULL)
    return exp.Literal.string(re.sub(r"^\s*(lax|strict)\s+", "", text, flags=re.I))


def _json_value(node: exp.Anonymous) -> exp.Expr:
    j, path = _two(node)
    value = _fn("get_json_object", j, _json_path(path))
    return _build(
        "CASE WHEN json_array_length(:v) IS NULL AND json_object_keys(:v) IS NULL THEN :v END",
        v=value,
    )


def _json_query(node: exp.Anonymous) -> exp.Expr:
    j, path = _two(node)
    value = _fn("get_json_object", j, _json_path(path))
    return _build(
        "CASE WHEN json_array_length(:v) IS NOT NULL OR json_object_keys(:v) IS NOT NULL "
        "THEN :v END",
        v=value,
    )


def _json_exists(node: exp.Anonymous) -> exp.Expr:
    j, path = _two(node)
    return _build(
        "CASE WHEN :j IS NULL THEN CAST(NULL AS BOOLEAN) ELSE :v IS NOT NULL END",
        j=j,
        v=_fn("get_json_object", j, _json_path(path)),
    )


def _two(node: exp.Anonymous) -> tuple[exp.Expr, exp.Expr]:
    if len(node.expressions) != 2:
        _refuse(node, node.name.upper(), " with these arguments", "pass a JSON string and a path")
    return node.expressions[0], node.expressions[1]


def _split_index(node: exp.Anonymous) -> exp.Expr:
    if len(node.expressions) != 3:
        raise error_at(node, "SPLIT_INDEX takes (string, separator, index).")
    s, separator, index = node.expressions
    code = _int_literal(separator)
    if code is not None and not 0 < code < 256:
        _refuse(node, "SPLIT_INDEX", f" for the character code {code}", "use a code in 1..255")
    parts = _fn("split", s, _literal_pattern(separator), exp.Literal.number(-1))
    return _build(
        "CASE WHEN :i < 0 OR :s = '' THEN CAST(NULL AS STRING) "
        "ELSE try_element_at(:parts, :i + 1) END",
        i=index,
        s=s,
        parts=parts,
    )


def _regexp(node: exp.Anonymous) -> exp.Expr:
    s, regex = node.expressions
    if _string_literal(regex):
        return exp.RegexpLike(this=s.copy(), expression=regex.copy())
    return _build("CASE WHEN :r = '' THEN FALSE ELSE :s RLIKE :r END", s=s, r=regex)


def _sha(bits: int) -> Callable[[exp.Anonymous], exp.Expr]:
    return lambda node: exp.SHA2(this=node.expressions[0].copy(), length=exp.Literal.number(bits))


def _cardinality(node: exp.Anonymous) -> exp.Expr:
    return _build("CASE WHEN :x IS NULL THEN NULL ELSE size(:x) END", x=node.expressions[0])


def _element(node: exp.Anonymous) -> exp.Expr:
    return _build(
        "CASE WHEN size(:a) > 1 THEN raise_error('ELEMENT: the array has more than one element') "
        "ELSE try_element_at(:a, 1) END",
        a=node.expressions[0],
    )


def _map_union(node: exp.Anonymous) -> exp.Expr:
    merged: exp.Expr = node.expressions[0].copy()
    for later in node.expressions[1:]:
        merged = _build(
            "map_concat(map_filter(:m, (_k, _v) -> NOT array_contains(map_keys(:n), _k)), :n)",
            m=merged,
            n=later,
        )
    return merged


def _is_class(regex: str) -> Callable[[exp.Anonymous], exp.Expr]:
    return lambda node: _build(
        "COALESCE(:s RLIKE :r, FALSE)", s=node.expressions[0], r=exp.Literal.string(regex)
    )


def _convert_tz(node: exp.Anonymous) -> exp.Expr:
    s, source, target = node.expressions
    return _build(
        "date_format(from_utc_timestamp(to_utc_timestamp(:s, :a), :b), 'yyyy-MM-dd HH:mm:ss')",
        s=s,
        a=source,
        b=target,
    )


def _to_timestamp_ltz(node: exp.Anonymous) -> exp.Expr:
    value, *rest = node.expressions
    precision = _int_literal(rest[0]) if rest else 3
    if precision not in (0, 3):
        _refuse(node, "TO_TIMESTAMP_LTZ", " for a precision other than 0 or 3", "use 0 or 3")
    return _fn("timestamp_seconds" if precision == 0 else "timestamp_millis", value)


def _rand_integer(node: exp.Anonymous) -> exp.Expr:
    *seed, bound = node.expressions
    return _build("CAST(floor(:r * :n) AS INT)", r=_fn("rand", *seed), n=bound)


_ANONYMOUS: dict[str, Callable[[exp.Anonymous], exp.Expr]] = {
    "SPLIT_INDEX": _split_index,
    "JSON_VALUE": _json_value,
    "JSON_QUERY": _json_query,
    "JSON_EXISTS": _json_exists,
    "REGEXP": _regexp,
    "SHA224": _sha(224),
    "SHA256": _sha(256),
    "SHA384": _sha(384),
    "SHA512": _sha(512),
    "CARDINALITY": _cardinality,
    "ELEMENT": _element,
    "ROW": lambda node: _fn("struct", *node.expressions),
    "MAP_UNION": _map_union,
    "IS_DIGIT": _is_class("^\\p{Nd}+$"),
    "IS_ALPHA": _is_class("^\\p{L}+$"),
    "CONVERT_TZ": _convert_tz,
    "TO_TIMESTAMP_LTZ": _to_timestamp_ltz,
    "CURRENT_ROW_TIMESTAMP": lambda node: exp.CurrentTimestamp(),
    "RAND_INTEGER": _rand_integer,
}

# each translation takes its own node class (Callable[[Any], …]: the key says which)
_TYPED: dict[type[exp.Expr], tuple[str, Callable[[Any], exp.Expr]]] = {
    exp.RegexpExtract: ("REGEXP_EXTRACT", _regexp_extract),
    exp.RegexpReplace: ("REGEXP_REPLACE", _regexp_replace),
    exp.StrToMap: ("STR_TO_MAP", _str_to_map),
    exp.Substring: ("SUBSTRING", _substring),
    exp.Pad: ("LPAD", _pad),
    exp.Trim: ("LTRIM", _trim),
    exp.Initcap: ("INITCAP", _initcap),
    exp.Overlay: ("OVERLAY", _overlay),
    exp.RegexpSplit: ("SPLIT", _regexp_split),
    exp.Trunc: ("TRUNCATE", _trunc),
    exp.Week: ("WEEK", lambda node: exp.WeekOfYear(this=node.this.copy())),
    exp.Extract: ("EXTRACT", _extract),
    exp.Floor: ("FLOOR", _floor_ceil),
    exp.Ceil: ("CEIL", _floor_ceil),
    exp.Greatest: ("GREATEST", _greatest_least),
    exp.Least: ("LEAST", _greatest_least),
    exp.TimestampDiff: ("TIMESTAMPDIFF", _timestamp_diff),
    exp.StrToUnix: ("UNIX_TIMESTAMP", _str_to_unix),
    exp.TimeToStr: ("DATE_FORMAT", _date_format),
    exp.Bracket: ("array[i] / map[k]", _bracket),
    exp.ArrayContains: ("ARRAY_CONTAINS", _array_contains),
    exp.ArrayRemove: ("ARRAY_REMOVE", _array_remove),
    exp.ArraySort: ("ARRAY_SORT", _array_sort),
    exp.ArrayReverse: ("ARRAY_REVERSE", lambda node: _fn("reverse", node.this)),
    exp.GroupConcat: ("LISTAGG", _group_concat),
    exp.ArrayAgg: ("ARRAY_AGG", _array_agg),
    exp.IgnoreNulls: ("ARRAY_AGG", lambda n: _array_agg(n) if isinstance(n.this, exp.ArrayAgg) else n),  # noqa: E501
    exp.Column: ("LOCALTIMESTAMP", _column),
    exp.Is: ("IS JSON", _json_is),
    exp.JSONObject: ("JSON_OBJECT", _refused_node("JSON_OBJECT")),
    exp.JSONObjectAgg: ("JSON_OBJECTAGG", _refused_node("JSON_OBJECTAGG")),
    exp.ArraySlice: ("ARRAY_SLICE", _refused_node("ARRAY_SLICE")),
    exp.Typeof: ("TYPEOF", _refused_node("TYPEOF")),
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# integer division


def _column_types(select: exp.Select, job: Job) -> tuple[dict[str, dict[str, exp.DataType]], bool]:
    """Declared column types of the tables ``select`` reads, by alias; and whether every table
    it reads is declared (so an unqualified column can be found)."""
    by_alias: dict[str, dict[str, exp.DataType]] = {}
    complete = True
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    for source in sources:
        table = source.this if source is not None else None
        tvf = window_tvf(table) if table is not None else None
        if tvf is not None and table is not None:  # FROM TABLE(TUMBLE(TABLE t, …)): t's columns
            data = tvf.expressions[0] if tvf.expressions else None
            data = data.expression if isinstance(data, exp.Kwarg) else data
            alias = table.alias_or_name
            table = data if isinstance(data, exp.Table) else None
            if table is not None:
                table = table.copy()
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias or table.name)))
        decl = job.tables.get(table_key(table)) if isinstance(table, exp.Table) else None
        if decl is None or table is None:
            complete = False
            continue
        by_alias[table.alias_or_name.lower()] = {
            c.name.lower(): c.args["kind"] for c in decl.physical if c.args.get("kind")
        }
    return by_alias, complete


def _is_integer(node: exp.Expr, job: Job) -> bool:
    if isinstance(node, exp.Paren | exp.Neg):
        return _is_integer(node.this, job)
    if isinstance(node, exp.Literal):
        return node.is_int
    if isinstance(node, exp.Cast):  # CAST and TRY_CAST
        return node.to.this in _INTEGER_TYPES
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.IntDiv):
        return _is_integer(node.this, job) and _is_integer(node.expression, job)
    if isinstance(node, exp.Count):
        return True
    if isinstance(node, exp.Sum | exp.Min | exp.Max):
        return _is_integer(node.this, job)
    if isinstance(node, exp.Column):
        select = node.find_ancestor(exp.Select)
        if select is None:
            return False
        types, complete = _column_types(select, job)
        if node.table:
            kind = types.get(node.table.lower(), {}).get(node.name.lower())
        else:
            found = [t[node.name.lower()] for t in types.values() if node.name.lower() in t]
            kind = found[0] if complete and len(found) == 1 else None
        return kind is not None and kind.this in _INTEGER_TYPES
    return False


def _division(node: exp.Div, job: Job) -> exp.Expr:
    if _is_integer(node.this, job) and _is_integer(node.expression, job):
        return exp.IntDiv(this=node.this.copy(), expression=node.expression.copy())
    return node


# ---------------------------------------------------------------------------------------------
# the rule


def _name_of(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    entry = _TYPED.get(type(node))
    return entry[0] if entry else None


def translate_node(node: exp.Expr, job: Job) -> exp.Expr:
    """The Spark form of one Flink call (``node`` itself when nothing changes)."""
    name = _name_of(node)
    if name is None:
        if isinstance(node, exp.Div):
            return _division(node, job)
        if type(node) is exp.Cast and "line" in node.meta and node.to.is_type("timestamp"):
            return _to_timestamp(node)  # TO_TIMESTAMP(s); CAST(…) parses as a TryCast
        return node
    if name.lower() in job.functions:  # the job's own function of that name
        return node
    if isinstance(node, exp.Anonymous):
        if name in _ANONYMOUS:
            return _ANONYMOUS[name](node)
        entry = FLINK_FUNCTIONS.get(name)
        if entry is not None and entry.kind == REFUSED:
            _refuse(node, name)
        return node
    return _TYPED[type(node)][1](node)


def translate(expression: exp.Expr, job: Job) -> exp.Expr:
    """``expression`` with every Flink built-in call in Flink's meaning (innermost first)."""
    result = expression
    for node in reversed(list(expression.walk())):  # children before their parents
        new = translate_node(node, job)
        if new is node:
            continue
        if node is expression:
            result = new
        else:
            node.replace(new)
    return result


def flink_functions_rule(expression: exp.Expr, context: RewriteContext, analysis: Analysis) -> Step:
    return Step(translate(expression, context.job), analysis)
