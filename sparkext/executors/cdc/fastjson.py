"""JSON on the executors' hot path: orjson where it gives exactly the standard library's values,
the standard library everywhere else.

Decoding Debezium lines is most of a micro-batch's per-change cost, and most of that is parsing
and re-serialising JSON; orjson does both several times faster. It differs from ``json`` in three
places, so those lines take ``json``: the literals ``NaN``/``Infinity`` (orjson refuses them,
and would write a NaN back as ``null``), integers of 19 digits or more (orjson reads those
beyond 64 bits as floats) and anything orjson refuses (lone surrogates, say: ``json`` then
decides and words the error). Output is compact either way; orjson leaves non-ASCII text
unescaped, which is the same JSON value.

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # optional at run time: the standard library does everything then
    orjson = None  # type: ignore[assignment]  # None stands for "not installed" below

_DIGITS = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))  # digits -> "0"
_STR_DIGITS = str.maketrans(dict.fromkeys("0123456789", "0"))
_LONG_NUMBER = 19  # digits: from here an integer may pass 64 bits, which orjson reads as a float


def needs_stdlib(text: str | bytes) -> bool:
    """Whether ``text`` holds something orjson would read differently from ``json``
    (C-speed checks: a regular expression costs more than the parse it guards).

    >>> needs_stdlib('{"a": NaN}'), needs_stdlib(b'{"n": 123456789012345678901}')
    (True, True)
    >>> needs_stdlib(b'{"a": 1.5e30, "n": 123456789012345678}') == (orjson is None)
    True
    """
    if orjson is None:
        return True
    if isinstance(text, bytes):
        return (
            b"NaN" in text or b"Infinity" in text or b"0" * _LONG_NUMBER in text.translate(_DIGITS)
        )
    return "NaN" in text or "Infinity" in text or "0" * _LONG_NUMBER in text.translate(_STR_DIGITS)


def loads(text: str, stdlib: bool | None = None) -> Any:
    """``json.loads(text)``, faster; ``stdlib``: :func:`needs_stdlib` already asked."""
    if not (needs_stdlib(text) if stdlib is None else stdlib):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # json decides, and words the error
    return json.loads(text)


def dumps(value: Any, exact: bool = False) -> str:
    """Compact JSON of a value ``loads`` returned; ``exact``: the line needed the standard
    library (a NaN inside, say), so its values are written by it too."""
    if orjson is not None and not exact:
        try:
            return orjson.dumps(value).decode("utf-8")
        except TypeError:  # an integer beyond 64 bits, a lone surrogate
            pass
    return json.dumps(value, separators=(",", ":"))
