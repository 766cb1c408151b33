"""Source positions: a string per change event that sorts like the change's place in the log.

Each connector family has its own position, comparable only within the family; a position is
``<family>:<fixed-width fields>`` so that string order is the family's order. The families and
what orders them (docs/reference/ingest_cdc.md, "Ordering of change events"):

- ``m`` MySQL / MariaDB: binlog file number, position, row in the event (``file/pos/row``);
- ``p`` PostgreSQL: ``sequence`` = [last commit LSN, change LSN], i.e. commit order, then the
  change inside its transaction (the change LSN alone interleaves concurrent transactions);
- ``pl`` PostgreSQL events without ``sequence`` (older Debezium): the change LSN only;
- ``s`` SQL Server, Db2: ``commit_lsn``, ``change_lsn``, ``event_serial_no``;
- ``o`` Oracle: ``commit_scn`` (else ``scn``), ``scn``, ``ssn``;
- ``g`` MongoDB: oplog time (``ts_ms``), ``ord``;
- ``t`` anything else: the source's commit time ``ts_ms``; ties are broken by arrival (the
  batch, then the record's place in it) and are never called duplicates.

Positions of different families never compare: a table holds one family, and an event of
another family is rejected with a sentence (see :func:`incomparable`).

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

_DIGITS = re.compile(r"(\d+)$")

NAMES = {
    "m": "MySQL binlog positions (file/pos/row)",
    "p": "PostgreSQL positions (sequence: commit LSN, change LSN)",
    "pl": "PostgreSQL LSNs without the sequence field",
    "s": "SQL Server / Db2 LSNs (commit_lsn, change_lsn, event_serial_no)",
    "o": "Oracle SCNs (commit_scn, scn)",
    "g": "MongoDB oplog positions (ts_ms, ord)",
    "t": "commit times only (ts_ms)",
}
TIME_FAMILY = "t"


def _int(value: Any) -> int:
    if type(value) is int:  # the usual case, at no cost
        return value
    return int(str(value).strip() or 0)


@lru_cache(maxsize=256)
def _binlog_number(file: str) -> int:
    """The number of a binlog file name, ``mysql-bin.000003`` -> 3 (asked once per file)."""
    match = _DIGITS.search(file)
    return int(match.group(1)) if match else 0


def _lsn_number(value: Any) -> int:
    """PostgreSQL LSNs arrive as numbers, or as text 'XXXXXXXX/XXXXXXXX'."""
    text = str(value).strip()
    if "/" in text:
        high, low = text.split("/", 1)
        return (int(high, 16) << 32) + int(low, 16)
    return int(text)


def _pg_sequence(value: Any) -> tuple[int, int] | None:
    """Debezium's ``sequence``: JSON text ["<last commit lsn>", "<lsn>"] (either may be null)."""
    try:
        pair = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    if not isinstance(pair, list) or len(pair) != 2 or pair[1] is None:
        return None
    change = _lsn_number(pair[1])
    # no commit before it: the first transaction a connector sends after starting without an
    # offset (on a new slot, or after a bootstrap); it lies after its own changes' LSNs, and
    # before the next transaction's, whose first field is this one's commit end
    return (_lsn_number(pair[0]) if pair[0] is not None else change, change)


def _sql_server_lsn(value: Any) -> str:
    """'00000027:00000758:0005' (hex parts) as fixed-width lower-case text."""
    parts = str(value or "0").lower().split(":")
    widths = (8, 8, 4)
    if len(parts) == 3:
        return ":".join(p.rjust(w, "0") for p, w in zip(parts, widths, strict=True))
    return str(value).lower().rjust(24, "0")  # Db2 and others: one hex/decimal string


def position(source: dict[str, Any], ts_ms: int | None) -> str:
    """A string that sorts like the change's place in the source log (see the module table).

    >>> position({"file": "mysql-bin.000003", "pos": 484, "row": 0}, None)
    'm:0000000003:00000000000000000484:0000000000'
    >>> position({"lsn": 24023128, "sequence": '["24023119","24023128"]'}, None)
    'p:00000000000024023119:00000000000024023128'
    >>> position({"lsn": 30679272, "sequence": '[null,"30679272"]'}, None)
    'p:00000000000030679272:00000000000030679272'
    >>> position({"lsn": 24023128}, None)
    'pl:00000000000024023128'
    >>> position({"connector": "sqlserver", "commit_lsn": "00000025:00000d08:0025",
    ...           "change_lsn": "00000025:00000d08:0002", "event_serial_no": 1}, None)
    's:00000025:00000d08:0025:00000025:00000d08:0002:0000000001'
    >>> position({"ts_ms": 1559033904863}, None)
    't:00000001559033904863'
    """
    file, pos = source.get("file"), source.get("pos")
    if file is not None and pos is not None:
        number = _binlog_number(str(file))
        return f"m:{number:010d}:{_int(pos):020d}:{_int(source.get('row') or 0):010d}"
    if source.get("commit_lsn") is not None or source.get("change_lsn") is not None:
        commit = _sql_server_lsn(source.get("commit_lsn") or source.get("change_lsn"))
        change = _sql_server_lsn(source.get("change_lsn") or source.get("commit_lsn"))
        serial = _int(source.get("event_serial_no") or 0)
        return f"s:{commit}:{change}:{serial:010d}"
    if source.get("lsn") is not None:
        sequence = _pg_sequence(source.get("sequence"))
        if sequence is not None:
            return f"p:{sequence[0]:020d}:{sequence[1]:020d}"
        return f"pl:{_lsn_number(source['lsn']):020d}"
    if source.get("scn") is not None:
        scn = _int(source["scn"])
        commit_scn = _int(source.get("commit_scn") or scn)
        return f"o:{commit_scn:020d}:{scn:020d}:{_int(source.get('ssn') or 0):010d}"
    if source.get("ord") is not None:
        when = source.get("ts_ms") or (source.get("ts_sec") or 0) * 1000 or ts_ms or 0
        return f"g:{_int(when):020d}:{_int(source['ord']):010d}"
    when = source.get("ts_ms") or ts_ms or 0
    return f"{TIME_FAMILY}:{_int(when):020d}"


def family(position: str | None) -> str | None:
    """The family tag of a position.

    >>> family("m:0000000003:00000000000000000484:0000000000"), family(None)
    ('m', None)
    """
    return None if position is None else position.split(":", 1)[0]


def incomparable(event_family: str, table_family: str) -> str:
    """The reject reason for an event whose position cannot be ordered against the table's."""
    return (
        f"source position of another kind: {NAMES.get(event_family, event_family)} cannot be "
        f"ordered against this table's {NAMES.get(table_family, table_family)}; ingest this "
        "source into its own table, or re-create the table from one connector"
    )


def _lsn_text(number: int) -> str:
    return f"{number >> 32:X}/{number & 0xFFFFFFFF:X}"


def readable(position: str | None) -> str | None:
    """A position as its connector writes it (PostgreSQL LSNs as ``X/X``, binlog file number and
    offset, ...), for people; ``None`` stays ``None``.

    >>> readable("p:00000000000024023119:00000000000024023128")
    'LSN 0/16E9058 (commit 0/16E904F)'
    >>> readable("m:0000000003:00000000000000000484:0000000002")
    'binlog file 3, position 484, row 2'
    >>> readable("t:00000001559033904863")
    'commit time 1559033904863 ms'
    """
    if position is None:
        return None
    tag, _, rest = position.partition(":")
    fields = rest.split(":")
    try:
        if tag == "p":
            return f"LSN {_lsn_text(int(fields[1]))} (commit {_lsn_text(int(fields[0]))})"
        if tag == "pl":
            return f"LSN {_lsn_text(int(fields[0]))}"
        if tag == "m":
            file, pos, row = (int(f) for f in fields)
            return f"binlog file {file}, position {pos}, row {row}"
        if tag == "s":
            return f"commit LSN {':'.join(fields[:3])}, change LSN {':'.join(fields[3:6])}"
        if tag == "o":
            return f"SCN {int(fields[1])} (commit SCN {int(fields[0])})"
        if tag == "g":
            return f"oplog time {int(fields[0])} ms, ord {int(fields[1])}"
        if tag == TIME_FAMILY:
            return f"commit time {int(fields[0])} ms"
    except (ValueError, IndexError):
        pass
    return position
