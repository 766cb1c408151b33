"""Source positions: a string per change event that sorts like the change's place in the log."""

from __future__ import annotations

import re
from typing import Any

_DIGITS = re.compile(r"(\d+)$")


def position(source: dict[str, Any], ts_ms: int | None) -> str:
    """A string that sorts like the change's place in the source log.

    MySQL: binlog file number, position, row. PostgreSQL: LSN. Otherwise the commit time.

    >>> position({"file": "mysql-bin.000003", "pos": 484, "row": 0}, None)
    'm:0000000003:00000000000000000484:0000000000'
    >>> position({"lsn": 24023128}, None)
    'p:00000000000024023128'
    """
    file, pos = source.get("file"), source.get("pos")
    if file is not None and pos is not None:
        match = _DIGITS.search(str(file))
        number = int(match.group(1)) if match else 0
        return f"m:{number:010d}:{int(pos):020d}:{int(source.get('row') or 0):010d}"
    if source.get("lsn") is not None:
        return f"p:{int(source['lsn']):020d}"
    when = source.get("ts_ms") or ts_ms or 0
    return f"t:{int(when):020d}"
