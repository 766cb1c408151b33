"""Flink's built-in functions as data: what each means in Flink and what sparkext does with it.

``same`` (Spark's function of that name means the same), ``translated`` (to what; the rule
:mod:`sparkext.streaming.rules.flink_functions` does it) or ``refused`` (why, and what to write
instead). :func:`markdown_table` renders the table docs/guides/streaming-dialect.md shows.

Floor: streaming.
"""

from __future__ import annotations

from dataclasses import dataclass

SAME, TRANSLATED, REFUSED = "same", "translated", "refused"


@dataclass(frozen=True)
class FlinkFunction:
    """One Flink built-in: its category, Flink's meaning, and what sparkext does with it."""

    category: str
    meaning: str
    kind: str  # SAME, TRANSLATED or REFUSED
    spark: str = ""  # TRANSLATED: the Spark form; REFUSED: what to write instead


def _same(category: str, meaning: str, note: str = "") -> FlinkFunction:
    return FlinkFunction(category, meaning, SAME, note)


def _to(category: str, meaning: str, spark: str) -> FlinkFunction:
    return FlinkFunction(category, meaning, TRANSLATED, spark)


def _no(category: str, meaning: str, suggestion: str) -> FlinkFunction:
    return FlinkFunction(category, meaning, REFUSED, suggestion)


S, T, A, C, J, H, L, G = (
    "string", "temporal", "arithmetic", "conditional", "json", "hashing", "collection", "aggregate"
)  # fmt: skip

FLINK_FUNCTIONS: dict[str, FlinkFunction] = {
    # string
    "REGEXP_EXTRACT": _to(
        S,
        "group (default 0) of the first match; NULL when nothing matches",
        "CASE WHEN s RLIKE r THEN regexp_extract(s, r, group) END (group 0 when omitted)",
    ),
    "REGEXP_REPLACE": _to(
        S,
        "replaces matches; the replacement is literal text",
        "regexp_replace with '\\' and '$' of the replacement escaped",
    ),
    "REGEXP": _to(
        S,
        "TRUE when a substring matches; FALSE for an empty regex",
        "CASE WHEN r = '' THEN FALSE ELSE s RLIKE r END",
    ),
    "SPLIT_INDEX": _to(
        S,
        "0-based field of s split by a literal separator; NULL out of range",
        "CASE WHEN i < 0 OR s = '' THEN NULL "
        "ELSE try_element_at(split(s, quoted sep, -1), i + 1) END",
    ),
    "SPLIT": _to(
        S, "array of s split by a literal (not regex) delimiter", "split(s, quoted delimiter, -1)"
    ),
    "STR_TO_MAP": _to(
        S,
        "map of 'k=v' pairs split by regexes ',' and '='; trailing empty pairs dropped",
        "str_to_map with Flink's defaults, an empty map for '' (duplicate keys fail in Spark, "
        "the last wins in Flink)",
    ),
    "SUBSTRING": _to(
        S,
        "1-based; 0 acts as 1; negative counts from the end; NULL for a negative length",
        "substring guarded: NULL for a negative length, '' before the start of s",
    ),
    "SUBSTR": _to(S, "same as SUBSTRING", "as SUBSTRING"),
    "LPAD": _to(
        S,
        "left-pads to n characters; NULL for n < 0 or an empty pad",
        "CASE WHEN n < 0 OR pad = '' THEN NULL ELSE lpad(s, n, pad) END",
    ),
    "RPAD": _to(
        S,
        "right-pads to n characters; NULL for n < 0 or an empty pad",
        "CASE WHEN n < 0 OR pad = '' THEN NULL ELSE rpad(s, n, pad) END",
    ),
    "LTRIM": _to(
        S, "LTRIM(str[, chars])", "TRIM(LEADING chars FROM str) (Spark's ltrim takes chars first)"
    ),
    "RTRIM": _to(S, "RTRIM(str[, chars])", "TRIM(TRAILING chars FROM str)"),
    "INITCAP": _to(
        S,
        "capitalises words of [A-Za-z0-9]; any other character ends a word",
        "array_join(transform(split at word boundaries, capitalise), '')",
    ),
    "OVERLAY": _to(
        S,
        "replaces len chars from pos; s unchanged when pos < 1 or pos > length",
        "overlay guarded for pos outside s and len <= 0",
    ),
    "TRIM": _same(S, "TRIM([BOTH|LEADING|TRAILING] chars FROM s)"),
    "BTRIM": _same(S, "btrim(s[, chars])"),
    "CHAR_LENGTH": _same(S, "number of characters"),
    "CHARACTER_LENGTH": _same(S, "number of characters"),
    "UPPER": _same(S, "upper case"),
    "LOWER": _same(S, "lower case"),
    "POSITION": _same(S, "1-based position of s1 in s2, 0 when absent"),
    "LOCATE": _same(S, "1-based position after pos, 0 when absent", "pos < 1 not verified"),
    "INSTR": _same(S, "1-based position of s2 in s1 (two arguments)"),
    "CONCAT": _same(S, "NULL when any argument is NULL"),
    "CONCAT_WS": _same(S, "skips NULL arguments; NULL separator gives NULL"),
    "REPEAT": _same(S, "s repeated n times"),
    "REPLACE": _same(S, "replaces every occurrence"),
    "REVERSE": _same(S, "reversed string"),
    "LEFT": _same(S, "leftmost n characters, '' for n < 0"),
    "RIGHT": _same(S, "rightmost n characters, '' for n < 0"),
    "ASCII": _same(S, "code of the first character"),
    "CHR": _same(S, "character of n & 255"),
    "TO_BASE64": _same(S, "base64 of the UTF-8 bytes", "as base64(s)"),
    "FROM_BASE64": _same(S, "decoded base64", "as unbase64(s)"),
    "DECODE": _same(S, "bytes → string in a charset"),
    "ENCODE": _same(S, "string → bytes in a charset"),
    "PARSE_URL": _same(S, "part of a URL"),
    "URL_ENCODE": _same(S, "application/x-www-form-urlencoded"),
    "URL_DECODE": _same(S, "decoded URL; NULL when malformed", "a malformed URL fails the query"),
    "TRANSLATE": _same(S, "character mapping"),
    "STARTSWITH": _same(S, "prefix test"),
    "ENDSWITH": _same(S, "suffix test"),
    "REGEXP_COUNT": _same(S, "number of matches"),
    "REGEXP_EXTRACT_ALL": _same(S, "all matches of a group (default 1)"),
    "REGEXP_INSTR": _same(S, "1-based position of the first match, 0 when none"),
    "REGEXP_SUBSTR": _same(S, "first match, NULL when none"),
    "PRINTF": _same(S, "java.util.Formatter"),
    "ELT": _same(S, "index-th argument, NULL out of range"),
    "JSON_QUOTE": _no(
        S,
        "string as a JSON string literal",
        "write to_json(named_struct('v', s)) and take the value, or a Python UDF",
    ),
    "JSON_UNQUOTE": _no(
        S,
        "JSON string literal → string",
        "write get_json_object(concat('{\"v\":', s, '}'), '$.v') or a Python UDF",
    ),
    # temporal
    "TO_TIMESTAMP": _to(
        T,
        "'yyyy-M-d[ H:m:s[.f]]' (or a format) → TIMESTAMP(3); NULL when unparseable",
        "one argument: CASE WHEN s RLIKE Flink's default form THEN "
        "date_trunc('MILLISECOND', CAST(s AS TIMESTAMP)) END; with a format: to_timestamp(s, fmt)",
    ),
    "UNIX_TIMESTAMP": _to(
        T,
        "seconds since the epoch; -9223372036854775808 when unparseable",
        "COALESCE(unix_timestamp(s, fmt), -9223372036854775808) for a non-NULL s",
    ),
    "TIMESTAMPDIFF": _to(
        T,
        "signed whole units from t1 to t2 (wall clock); months counted Flink's way",
        "timestampdiff on TIMESTAMP_NTZ; MONTH/QUARTER/YEAR by Flink's month arithmetic",
    ),
    "TO_TIMESTAMP_LTZ": _to(
        T,
        "epoch seconds (precision 0) or milliseconds (3) → TIMESTAMP_LTZ",
        "timestamp_seconds(n) / timestamp_millis(n)",
    ),
    "CONVERT_TZ": _to(
        T,
        "'yyyy-MM-dd HH:mm:ss' text from zone a to zone b",
        "date_format(from_utc_timestamp(to_utc_timestamp(s, a), b), 'yyyy-MM-dd HH:mm:ss')",
    ),
    "LOCALTIMESTAMP": _to(T, "the current wall clock (batch: query start)", "CURRENT_TIMESTAMP()"),
    "CURRENT_ROW_TIMESTAMP": _to(
        T, "the current time per row", "CURRENT_TIMESTAMP() (query start)"
    ),
    "WEEK": _to(T, "ISO week of the year", "weekofyear(d)"),
    "EXTRACT": _to(
        T,
        "field as BIGINT (SECOND without fraction)",
        "SECOND → second(ts); ISODOW → EXTRACT(DAYOFWEEK_ISO …); sub-second, EPOCH, DECADE, "
        "CENTURY, MILLENNIUM and ISOYEAR are refused",
    ),
    "FLOOR": _to(T, "FLOOR(ts TO unit): round down to the unit", "date_trunc(unit, ts)"),
    "CEIL": _to(
        T,
        "CEIL(ts TO unit): round up to the unit",
        "ts when on the unit, else date_trunc(unit, ts) + 1 unit",
    ),
    "CEILING": _to(T, "as CEIL", "as CEIL"),
    "DATE_FORMAT": _same(
        T, "formats with a Java pattern", "patterns Spark rejects (u, e, c, w, W, …) are refused"
    ),
    "TO_DATE": _same(T, "'yyyy-MM-dd' (or a format) → DATE"),
    "FROM_UNIXTIME": _same(T, "seconds → 'yyyy-MM-dd HH:mm:ss' in the session zone"),
    "TIMESTAMPADD": _same(T, "adds units; months clamp to the month's last day"),
    "CURRENT_TIMESTAMP": _same(T, "query start in batch mode"),
    "NOW": _same(T, "CURRENT_TIMESTAMP"),
    "CURRENT_DATE": _same(T, "query start date in batch mode"),
    "YEAR": _same(T, "year"),
    "QUARTER": _same(T, "quarter"),
    "MONTH": _same(T, "month"),
    "DAYOFYEAR": _same(T, "day of year"),
    "DAYOFMONTH": _same(T, "day of month"),
    "DAYOFWEEK": _same(T, "1 = Sunday … 7"),
    "HOUR": _same(T, "hour"),
    "MINUTE": _same(T, "minute"),
    "SECOND": _same(T, "second"),
    "LOCALTIME": _no(
        T,
        "the current TIME",
        "Spark has no TIME type; use date_format(CURRENT_TIMESTAMP, 'HH:mm:ss')",
    ),
    "CURRENT_TIME": _no(
        T,
        "the current TIME",
        "Spark has no TIME type; use date_format(CURRENT_TIMESTAMP, 'HH:mm:ss')",
    ),
    "CURRENT_WATERMARK": _no(
        T,
        "the operator's current watermark",
        "a backfill has no running watermark; filter late rows by the event time instead",
    ),
    # conditional and conversion
    "GREATEST": _to(
        C,
        "NULL when any argument is NULL",
        "CASE WHEN any argument IS NULL THEN NULL ELSE greatest(…) END",
    ),
    "LEAST": _to(
        C,
        "NULL when any argument is NULL",
        "CASE WHEN any argument IS NULL THEN NULL ELSE least(…) END",
    ),
    "IS_DIGIT": _to(
        C,
        "all characters are digits; FALSE for NULL or ''",
        "COALESCE(s RLIKE '^\\p{Nd}+$', FALSE)",
    ),
    "IS_ALPHA": _to(
        C,
        "all characters are letters; FALSE for NULL or ''",
        "COALESCE(s RLIKE '^\\p{L}+$', FALSE)",
    ),
    "IF": _same(C, "IF(c, a, b)"),
    "IFNULL": _same(C, "COALESCE(a, b)"),
    "NULLIF": _same(C, "NULL when equal"),
    "COALESCE": _same(C, "first non-NULL"),
    "CAST": _same(
        C, "fails the job on a bad value (1.15+)", "Spark (ANSI off) gives NULL instead of failing"
    ),
    "TRY_CAST": _same(C, "NULL on a bad value"),
    "IS_DECIMAL": _no(C, "parses as a Java number", "write TRY_CAST(s AS DOUBLE) IS NOT NULL"),
    "TYPEOF": _no(C, "Flink's type string", "Spark's type names differ; drop the call"),
    # arithmetic
    "/": _to(
        A,
        "integer / integer is integer division (truncates)",
        "a DIV b when both sides are known integers (literals, CASTs, integer columns of "
        "the job's CREATE TABLE, COUNT, SUM of integers)",
    ),
    "TRUNCATE": _to(
        A, "truncates towards zero to n decimals (default 0)", "IF(x < 0, ceil(x, n), floor(x, n))"
    ),
    "RAND_INTEGER": _to(A, "random integer in [0, n)", "CAST(floor(rand([seed]) * n) AS INT)"),
    "ROUND": _same(A, "HALF_UP"),
    "MOD": _same(A, "sign of the dividend"),
    "%": _same(A, "MOD"),
    "POWER": _same(A, "power"),
    "ABS": _same(A, "abs"),
    "SQRT": _same(A, "sqrt"),
    "LN": _same(A, "ln"),
    "LOG10": _same(A, "log10"),
    "LOG2": _same(A, "log2"),
    "LOG": _same(A, "ln / log(base, x)"),
    "EXP": _same(A, "exp"),
    "FLOOR(x)": _same(A, "floor"),
    "CEIL(x)": _same(A, "ceil"),
    "SIN": _same(A, "sin"),
    "SINH": _same(A, "sinh"),
    "COS": _same(A, "cos"),
    "COSH": _same(A, "cosh"),
    "TAN": _same(A, "tan"),
    "TANH": _same(A, "tanh"),
    "COT": _same(A, "cot"),
    "ASIN": _same(A, "asin"),
    "ACOS": _same(A, "acos"),
    "ATAN": _same(A, "atan"),
    "ATAN2": _same(A, "atan2"),
    "DEGREES": _same(A, "degrees"),
    "RADIANS": _same(A, "radians"),
    "SIGN": _same(A, "sign"),
    "PI": _same(A, "pi"),
    "E": _same(A, "e"),
    "RAND": _same(A, "random double", "another random sequence"),
    "UUID": _same(A, "random UUID"),
    "BIN": _same(A, "binary digits"),
    "HEX": _same(A, "upper-case hex"),
    "UNHEX": _same(A, "hex → bytes"),
    "PERCENTILE": _same(A, "exact percentile"),
    # hashing
    "SHA224": _to(H, "SHA-224 hex", "sha2(s, 224)"),
    "SHA256": _to(H, "SHA-256 hex", "sha2(s, 256)"),
    "SHA384": _to(H, "SHA-384 hex", "sha2(s, 384)"),
    "SHA512": _to(H, "SHA-512 hex", "sha2(s, 512)"),
    "MD5": _same(H, "MD5 hex"),
    "SHA1": _same(H, "SHA-1 hex"),
    "SHA2": _same(H, "SHA-2 hex"),
    # JSON
    "JSON_VALUE": _to(
        J,
        "scalar at a path as STRING; NULL when missing, not scalar or invalid",
        "get_json_object(j, path without 'lax'/'strict'), NULL unless a scalar",
    ),
    "JSON_QUERY": _to(
        J,
        "object or array at a path as JSON text; NULL for scalars",
        "get_json_object(j, path), NULL unless an object or array",
    ),
    "JSON_EXISTS": _to(
        J,
        "whether the path exists (FALSE ON ERROR)",
        "get_json_object(j, path) IS NOT NULL (a JSON null at the path counts as missing)",
    ),
    "IS JSON": _no(J, "validity test", "write json_tuple/from_json checks or a Python UDF"),
    "JSON_STRING": _no(J, "value → JSON text", "write to_json(named_struct(…))"),
    "JSON_OBJECT": _no(J, "builds a JSON object", "write to_json(named_struct('k', v, …))"),
    "JSON_ARRAY": _no(J, "builds a JSON array", "write to_json(array(…))"),
    "JSON_OBJECTAGG": _no(
        J, "aggregates a JSON object", "write to_json(map_from_entries(collect_list(struct(k, v))))"
    ),
    "JSON_ARRAYAGG": _no(J, "aggregates a JSON array", "write to_json(collect_list(v))"),
    # collection and value construction
    "CARDINALITY": _to(
        L, "number of elements; NULL for NULL", "CASE WHEN x IS NULL THEN NULL ELSE size(x) END"
    ),
    "ELEMENT": _to(
        L,
        "the sole element; NULL when empty; fails for more than one",
        "CASE WHEN size(a) > 1 THEN raise_error(…) ELSE try_element_at(a, 1) END",
    ),
    "array[i] / map[k]": _to(L, "1-based element / value of a key", "element_at(x, i)"),
    "MAP[k, v, …]": _to(L, "map constructor", "map(k, v, …)"),
    "ROW": _to(L, "row constructor", "struct(…)"),
    "ARRAY_CONTAINS": _to(
        L,
        "membership; a NULL element can be searched; never NULL for a non-NULL array",
        "exists(a, e -> e <=> x)",
    ),
    "ARRAY_REMOVE": _to(
        L, "removes elements equal to x (NULL removes NULLs)", "filter(a, e -> NOT e <=> x)"
    ),
    "ARRAY_SORT": _to(
        L,
        "ascending with NULLs first (descending: NULLs last)",
        "sort_array(a, ascending); a non-default null order is refused",
    ),
    "ARRAY_REVERSE": _to(L, "reversed array", "reverse(a)"),
    "MAP_UNION": _to(
        L,
        "merge; later maps win on equal keys",
        "map_concat(map_filter(m1, (k, v) -> NOT array_contains(map_keys(m2), k)), m2)",
    ),
    "ARRAY_SLICE": _no(
        L,
        "1-based inclusive slice, 0 and negative offsets",
        "write slice(a, start, length) with Spark's start and length",
    ),
    "ARRAY_APPEND": _same(L, "append"),
    "ARRAY_PREPEND": _same(L, "prepend"),
    "ARRAY_DISTINCT": _same(L, "distinct, order kept"),
    "ARRAY_POSITION": _same(L, "1-based, 0 when absent"),
    "ARRAY_UNION": _same(L, "union without duplicates"),
    "ARRAY_CONCAT": _same(L, "as concat(a, b)"),
    "ARRAY_EXCEPT": _same(L, "except"),
    "ARRAY_INTERSECT": _same(L, "intersect"),
    "ARRAY_MAX": _same(L, "max"),
    "ARRAY_MIN": _same(L, "min"),
    "ARRAY_JOIN": _same(L, "join"),
    "MAP_KEYS": _same(L, "keys"),
    "MAP_VALUES": _same(L, "values"),
    "MAP_ENTRIES": _same(L, "entries"),
    "MAP_FROM_ARRAYS": _same(L, "keys and values → map"),
    "ARRAY[…]": _same(L, "as array(…)"),
    # aggregate (COUNT, SUM, AVG, MIN, MAX, STDDEV_*, VAR_*, RANK, … are Spark's own and untouched)
    "LISTAGG": _to(
        G,
        "joins non-NULL values with ',' (or sep); NULL when there are none",
        "CASE WHEN COUNT(x) = 0 THEN NULL ELSE array_join(collect_list(x), sep) END",
    ),
    "ARRAY_AGG": _to(
        G,
        "array of the values, NULLs kept (IGNORE NULLS drops them)",
        "transform(collect_list(named_struct('v', x)), e -> e.v)",
    ),
    "FIRST_VALUE": _same(G, "first value"),
    "LAST_VALUE": _same(G, "last value"),
    "COLLECT": _no(G, "a MULTISET", "Spark has no MULTISET; write collect_list(x)"),
    "GROUP_ID": _no(G, "id of the grouping set", "write GROUPING_ID(…)"),
    "GROUPING": _same(G, "grouping bit"),
    "GROUPING_ID": _same(G, "grouping bits"),
    "CURRENT_DATABASE": _same(G, "current database"),
}


def markdown_table() -> str:
    """The table above as Markdown: function | Flink meaning | sparkext."""
    rows = ["| function | Flink meaning | sparkext |", "| --- | --- | --- |"]
    for name, entry in FLINK_FUNCTIONS.items():
        if entry.kind == REFUSED:
            what = f"refused: {refusal(name, entry)}"
        elif entry.kind == TRANSLATED:
            what = f"translated to `{entry.spark}`"
        else:
            what = "same" + (f" ({entry.spark})" if entry.spark else "")
        cells = [name, entry.meaning, what]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def refusal(name: str, entry: FlinkFunction | None = None, reason: str = "", fix: str = "") -> str:
    """The sentence a refused function gets: ``Flink's NAME(…) has no Spark translation in
    sparkext[ reason]; <what to write instead>.``"""
    entry = entry or FLINK_FUNCTIONS[name]
    call = name if name in _BARE else f"{name}(…)"
    return f"Flink's {call} has no Spark translation in sparkext{reason}; {fix or entry.spark}."


_BARE = {"IS JSON", "LOCALTIME", "CURRENT_TIME"}
