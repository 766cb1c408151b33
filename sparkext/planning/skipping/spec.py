"""What an index is: its type, its one column and its options, as declared on a table.

A declaration lives in the table property ``sparkext.index.<name>`` as JSON
``{"type": "bloom_filter", "column": "request_id", "options": {"fpp": "0.01", ...}}``; options
are strings, complete (every default filled in), normalised (``fpp = 0.010`` is stored ``0.01``).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sparkext.declarations import Expected, parse_boolean, parse_bytes
from sparkext.errors import UsageError
from sparkext.planning.skipping.values import ColumnType, column_type

BLOOM_FILTER = "bloom_filter"
BITMAP = "bitmap"
BLOOM_RANGE_FILTER = "bloom_range_filter"
TOKEN_BLOOM_FILTER = "token_bloom_filter"
TOKEN_BITMAP = "token_bitmap"
NGRAM_BLOOM_FILTER = "ngram_bloom_filter"
NGRAM_BITMAP = "ngram_bitmap"

INDEX_TYPES: tuple[str, ...] = (
    BLOOM_FILTER,
    BITMAP,
    BLOOM_RANGE_FILTER,
    TOKEN_BLOOM_FILTER,
    TOKEN_BITMAP,
    NGRAM_BLOOM_FILTER,
    NGRAM_BITMAP,
)
BLOOMS = frozenset({BLOOM_FILTER, BLOOM_RANGE_FILTER, TOKEN_BLOOM_FILTER, NGRAM_BLOOM_FILTER})
TEXT_TYPES = frozenset({TOKEN_BLOOM_FILTER, TOKEN_BITMAP, NGRAM_BLOOM_FILTER, NGRAM_BITMAP})

FPP = "fpp"
FPP_DEFAULT = "0.01"
MAX_BYTES = "max_bytes"
MAX_BYTES_DEFAULT = "1048576"
MAX_DISTINCT = "max_distinct"
MAX_DISTINCT_DEFAULT = "1024"  # bitmap
TEXT_MAX_DISTINCT_DEFAULT = "65536"  # token_bitmap, ngram_bitmap
STEP = "step"
STEP_DEFAULT = "4"
CASE_SENSITIVE = "case_sensitive"
CASE_SENSITIVE_DEFAULT = "false"
N = "n"
N_DEFAULT = "3"

MIN_BLOOM_BYTES = 32
MAX_BLOOM_BYTES = 1 << 30

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class _Option:
    default: str
    meaning: str
    normalise: Callable[[str], str]  # raises Expected(range sentence) on a bad value


def _fpp(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 0.5:
        raise Expected("a number above 0 and below 0.5, such as 0.01")
    return repr(value)


def _whole(low: int, high: int) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = int(text.strip()) if re.fullmatch(r"\s*\d+\s*", text) else -1
        if not low <= value <= high:
            raise Expected(f"a whole number from {low} to {high}")
        return str(value)

    return parse


def _max_bytes(text: str) -> str:
    sentence = (
        f"a byte size from {MIN_BLOOM_BYTES} to {MAX_BLOOM_BYTES} (1GB), such as 1048576 or 1MB"
    )
    try:
        value = parse_bytes(text.strip())
    except Expected:
        raise Expected(sentence) from None
    if not MIN_BLOOM_BYTES <= value <= MAX_BLOOM_BYTES:
        raise Expected(sentence)
    return str(value)


def _boolean(text: str) -> str:
    return "true" if parse_boolean(text) else "false"


_FPP_OPTION = _Option(FPP_DEFAULT, "the false-positive probability of one probe", _fpp)
_MAX_BYTES_OPTION = _Option(
    MAX_BYTES_DEFAULT,
    "the largest bloom filter of one data file, in bytes (rounded down to a multiple of 8); a "
    "file with more distinct values gets this size and a higher false-positive probability",
    _max_bytes,
)
_CASE_OPTION = _Option(
    CASE_SENSITIVE_DEFAULT,
    "false: the index holds lower-cased text and also answers lower(column) and ILIKE",
    _boolean,
)
_N_OPTION = _Option(N_DEFAULT, "the n-gram length in characters (2 to 8)", _whole(2, 8))


def _max_distinct(default: str, high: int) -> _Option:
    return _Option(
        default,
        "the most distinct values one data file's entry holds; a file with more is not indexed "
        "(it is always read)",
        _whole(1, high),
    )


OPTIONS: dict[str, dict[str, _Option]] = {
    BLOOM_FILTER: {FPP: _FPP_OPTION, MAX_BYTES: _MAX_BYTES_OPTION},
    BITMAP: {MAX_DISTINCT: _max_distinct(MAX_DISTINCT_DEFAULT, 65536)},
    BLOOM_RANGE_FILTER: {
        STEP: _Option(
            STEP_DEFAULT,
            "bits of the value per level of the range tree (1 to 8); smaller answers wide ranges "
            "with fewer false positives, larger is smaller on disk",
            _whole(1, 8),
        ),
        FPP: _FPP_OPTION,
        MAX_BYTES: _MAX_BYTES_OPTION,
    },
    TOKEN_BLOOM_FILTER: {
        CASE_SENSITIVE: _CASE_OPTION,
        FPP: _FPP_OPTION,
        MAX_BYTES: _MAX_BYTES_OPTION,
    },
    TOKEN_BITMAP: {
        CASE_SENSITIVE: _CASE_OPTION,
        MAX_DISTINCT: _max_distinct(TEXT_MAX_DISTINCT_DEFAULT, 1 << 20),
    },
    NGRAM_BLOOM_FILTER: {
        N: _N_OPTION,
        CASE_SENSITIVE: _CASE_OPTION,
        FPP: _FPP_OPTION,
        MAX_BYTES: _MAX_BYTES_OPTION,
    },
    NGRAM_BITMAP: {
        N: _N_OPTION,
        CASE_SENSITIVE: _CASE_OPTION,
        MAX_DISTINCT: _max_distinct(TEXT_MAX_DISTINCT_DEFAULT, 1 << 20),
    },
}

_ATOMIC = (
    "tinyint, smallint, int, bigint, float, double, decimal, string, binary, boolean, date, "
    "timestamp and timestamp_ntz"
)
TAKES: dict[str, str] = {
    BLOOM_FILTER: _ATOMIC,
    BITMAP: _ATOMIC,
    BLOOM_RANGE_FILTER: (
        "tinyint, smallint, int, bigint, float, double, decimal with a precision up to 18, date, "
        "timestamp and timestamp_ntz"
    ),
    TOKEN_BLOOM_FILTER: "string",
    TOKEN_BITMAP: "string",
    NGRAM_BLOOM_FILTER: "string",
    NGRAM_BITMAP: "string",
}


TYPE_DOCS: dict[str, str] = {
    BLOOM_FILTER: (
        "A bloom filter of the file's distinct values: answers =, <=>, IN (a file whose filter "
        "lacks every value is skipped; false positives at about fpp per value)."
    ),
    BITMAP: (
        "The file's exact set of distinct values (up to max_distinct; a file with more is "
        "always read): answers =, <=>, IN, <>, NOT IN, <, <=, >, >=, and for strings "
        "starts_with, ends_with, contains, LIKE, RLIKE (a simple Java regex), also on "
        "lower(col)/upper(col), with no false positive."
    ),
    BLOOM_RANGE_FILTER: (
        "The file's min and max and a bloom filter of the aligned blocks holding its values "
        "(step bits per level): answers =, IN and ranges (<, <=, >, >=, BETWEEN), skipping "
        "files whose values straddle the range without a value in it."
    ),
    TOKEN_BLOOM_FILTER: (
        "A bloom filter of the words (runs of letters and digits) of the file's text: answers "
        "=, IN, LIKE, RLIKE, starts_with, ends_with, contains whose literal text holds whole "
        "words (LIKE '% timeout %', 'ERROR:%'); lower-cased unless case_sensitive."
    ),
    TOKEN_BITMAP: (
        "The exact set of words of the file's text (up to max_distinct): answers what "
        "token_bloom_filter answers with no false positive, and also parts of words "
        "(LIKE '%meout%': some word contains 'meout')."
    ),
    NGRAM_BLOOM_FILTER: (
        "A bloom filter of the n-grams (n consecutive characters) of the file's text: answers "
        "=, IN, LIKE, RLIKE, starts_with, ends_with, contains whose literal parts have at least "
        "n characters; lower-cased unless case_sensitive."
    ),
    NGRAM_BITMAP: (
        "The exact set of n-grams of the file's text (up to max_distinct): answers what "
        "ngram_bloom_filter answers with no false positive of the n-grams themselves."
    ),
}


def takes(index_type: str, column: ColumnType) -> bool:
    """Whether an index of ``index_type`` can cover a column of this type."""
    if index_type in TEXT_TYPES:
        return column.kind == "string"
    if index_type == BLOOM_RANGE_FILTER:
        return column.domain in ("int", "float") and column.kind != "boolean"
    return True


@dataclass(frozen=True)
class IndexSpec:
    """One declared index: ``options`` complete (defaults filled) and normalised."""

    name: str
    type: str
    column: str
    options: Mapping[str, str] = field(default_factory=dict)

    def to_property(self) -> str:
        """The JSON of the table property ``sparkext.index.<name>``.

        >>> IndexSpec("ix", "bitmap", "status", {"max_distinct": "1024"}).to_property()
        '{"type": "bitmap", "column": "status", "options": {"max_distinct": "1024"}}'
        """
        options = {key: self.options[key] for key in sorted(self.options)}
        return json.dumps({"type": self.type, "column": self.column, "options": options})

    @classmethod
    def from_property(cls, name: str, text: str) -> IndexSpec:
        """The spec a table property declares (missing options get their defaults).

        >>> IndexSpec.from_property("IX", '{"type": "bitmap", "column": "status"}')
        IndexSpec(name='ix', type='bitmap', column='status', options={'max_distinct': '1024'})

        Raises:
            UsageError: the text is no declaration this version understands.
        """
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not (
            isinstance(data, dict)
            and isinstance(data.get("type"), str)
            and isinstance(data.get("column"), str)
            and isinstance(data.get("options", {}), dict)
        ):
            raise UsageError(
                f"The table property sparkext.index.{name} holds {text!r}, which is no index "
                'declaration: it takes JSON such as {"type": "bloom_filter", "column": "c", '
                '"options": {}}; drop the index and create it again.'
            )
        options = {str(k): str(v) for k, v in data.get("options", {}).items()}
        return cls(
            _check_name(name),
            _check_type(data["type"]),
            data["column"],
            _options(data["type"], options),
        )

    def option(self, key: str) -> str:
        """One option's value (its default when the spec was made without it)."""
        return self.options.get(key) or OPTIONS[self.type][key].default

    @property
    def label(self) -> str:
        """How EXPLAIN and ``Pruned.used`` name it: ``"bloom_filter, request_id"``."""
        return f"{self.type}, {self.column}"


def validate_spec(
    name: str,
    type: str,
    columns: Sequence[str],
    options: Mapping[str, str],
    column_types: Mapping[str, str],
) -> IndexSpec:
    """The spec of ``CREATE INDEX name ON t USING type (columns) OPTIONS (options)``.

    ``column_types`` maps the table's top-level columns to their Spark type names. The column is
    found case-insensitively and stored as the schema spells it; the name is stored lower-case.

    >>> validate_spec("Ix", "BLOOM_FILTER", ["ID"], {"FPP": "0.05"}, {"id": "bigint"})
    IndexSpec(name='ix', type='bloom_filter', column='id', options={'fpp': '0.05', 'max_bytes': \
'1048576'})

    Raises:
        UsageError: one sentence naming the bad input and the valid choices.
    """
    name, type = _check_name(name), _check_type(type)
    if len(columns) != 1:
        listed = ", ".join(columns) if columns else "none"
        raise UsageError(
            f"An index covers one column, not {len(columns)} ({listed}): create one index per "
            "column."
        )
    column = _resolve_column(columns[0], column_types)
    kind = column_types[column]
    try:
        parsed = column_type(kind)
    except ValueError:
        parsed = None
    if parsed is None or not takes(type, parsed):
        raise UsageError(
            f"A {type} index cannot cover column {column!r} of type {kind}: it takes "
            f"{TAKES[type]} columns."
        )
    return IndexSpec(name, type, column, _options(type, options))


def options_doc() -> Mapping[str, Sequence[tuple[str, str, str]]]:
    """Per index type: its options as (option, default, meaning), for the docs (what each type
    answers: :data:`TYPE_DOCS`; the column types it takes: :data:`TAKES`)."""
    return {
        index_type: [(key, option.default, option.meaning) for key, option in options.items()]
        for index_type, options in OPTIONS.items()
    }


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"Index name {name!r} is not a plain identifier: use letters, digits and underscores, "
            "not starting with a digit."
        )
    return name.lower()


def _check_type(type: str) -> str:
    if type.lower() not in INDEX_TYPES:
        raise UsageError(f"Index type {type!r} is unknown: use one of {', '.join(INDEX_TYPES)}.")
    return type.lower()


def _resolve_column(column: str, column_types: Mapping[str, str]) -> str:
    if column in column_types:
        return column
    folded = [c for c in column_types if c.lower() == column.lower()]
    if len(folded) == 1:
        return folded[0]
    raise UsageError(
        f"Column {column!r} is not a top-level column of the table: use one of "
        f"{', '.join(column_types)}."
    )


def _options(type: str, given: Mapping[str, str]) -> dict[str, str]:
    known = OPTIONS[type]
    result = {key: option.default for key, option in known.items()}
    for raw_key, value in given.items():
        key = raw_key.strip().lower()
        if key not in known:
            raise UsageError(
                f"Option {raw_key!r} is unknown for a {type} index: use {_or_list(list(known))}."
            )
        try:
            result[key] = known[key].normalise(str(value))
        except Expected as error:
            raise UsageError(
                f"Option {key} = {str(value)!r} is out of range for a {type} index: use {error}."
            ) from None
    return result


def _or_list(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
