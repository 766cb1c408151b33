"""Time, written once: conversions between Spark values, Python datetimes and SQL literals.

Two kinds of Python datetime cross sparkext's code:

* an **instant** is an aware datetime (or epoch micro/milliseconds): a point in time;
* a **wall clock** is a naive datetime read in the Spark session's time zone
  (``spark.sql.session.timeZone``), as Spark reads ``TIMESTAMP '2026-11-21 00:00:00'``. The
  streaming planner's range bounds and the user's ``--from``/``--to`` are wall clocks.

Nothing here depends on the OS time zone of the Python process, except :func:`collected`, which
undoes PySpark's own use of it (collecting a TIMESTAMP gives a naive datetime in the OS zone).
Where possible avoid even that: compute in Spark as epoch numbers (``unix_micros``) or collect
``CAST(t AS TIMESTAMP_NTZ)`` (:func:`wall_clock_frame`), and give Spark instants as
``timestamp_micros`` (:func:`lit`).

This module imports no pyspark at import time (planners and rules use it).

Floor: util.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from sparkext.errors import EnvironmentSetupError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
SESSION_ZONE_KEY = "spark.sql.session.timeZone"
_OFFSET = re.compile(r"^(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$", re.I)


@lru_cache(maxsize=64)
def zone(name: str) -> dt.tzinfo:
    """The tzinfo of a Spark time zone id: a region ('Asia/Shanghai'), 'UTC'/'Z', or an offset
    ('+08:00', 'GMT+8', 'UTC-05:30').

    >>> [str(zone(n)) for n in ("Asia/Shanghai", "+08:00", "GMT-5", "UTC+05:30", "Z")]
    ['Asia/Shanghai', 'UTC+08:00', 'UTC-05:00', 'UTC+05:30', 'UTC']
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    text = name.strip()
    if text.upper() in ("UTC", "Z", "GMT", "UT", "ZULU"):
        return UTC
    match = _OFFSET.match(text)
    if match:
        sign, hours, minutes, seconds = match.groups()
        offset = dt.timedelta(
            hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0)
        )
        return dt.timezone(-offset if sign == "-" else offset) if offset else UTC
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise EnvironmentSetupError(
            f"Unknown time zone '{name}': use a region such as 'Asia/Shanghai' or an offset "
            "such as '+08:00' (regions need the tz database: pip install tzdata)."
        ) from None


def session_zone(spark: SparkSession) -> dt.tzinfo:
    """The session time zone (``spark.sql.session.timeZone``) as a tzinfo."""
    return zone(spark.conf.get(SESSION_ZONE_KEY))


def instant(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> dt.datetime:
    """``value`` as an aware UTC datetime; a naive ``value`` is a wall clock in ``tz``.

    >>> instant(dt.datetime(2026, 11, 21, 8), "Asia/Shanghai")
    datetime.datetime(2026, 11, 21, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone(tz) if isinstance(tz, str) else tz)
    return value.astimezone(UTC)


def wall_clock(value: dt.datetime, tz: dt.tzinfo | str) -> dt.datetime:
    """The naive wall clock of ``value`` in ``tz`` (a naive ``value`` already is one).

    The result keeps ``fold`` (1 for the second of a repeated hour), which
    :func:`wall_clock_text` uses to stay exact across a DST change.

    >>> wall_clock(dt.datetime(2026, 11, 21, tzinfo=UTC), "America/Los_Angeles")
    datetime.datetime(2026, 11, 20, 16, 0)
    """
    if value.tzinfo is None:
        return value
    return value.astimezone(zone(tz) if isinstance(tz, str) else tz).replace(tzinfo=None)


def from_micros(micros: int) -> dt.datetime:
    """Epoch microseconds as an aware UTC datetime (exact)."""
    return EPOCH + dt.timedelta(microseconds=micros)


def from_millis(millis: int) -> dt.datetime:
    """Epoch milliseconds as an aware UTC datetime (exact)."""
    return EPOCH + dt.timedelta(milliseconds=millis)


def to_micros(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> int:
    """Epoch microseconds of ``value`` (naive: a wall clock in ``tz``), exact.

    >>> to_micros(dt.datetime(1970, 1, 1, 0, 0, 1, 5))
    1000005
    """
    delta = instant(value, tz) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_millis(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> int:
    """Floor of ``value`` in epoch milliseconds (naive: a wall clock in ``tz``)."""
    return to_micros(value, tz) // 1000


def collected(value: dt.datetime) -> dt.datetime:
    """A TIMESTAMP value as PySpark's ``collect()`` returns it (naive, in the Python process's
    OS time zone) as the aware UTC instant it stands for. Prefer not collecting instants."""
    # A naive value is read in the OS zone by astimezone, as PySpark wrote it (fold included).
    return value.astimezone(UTC)


def wall_clock_text(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> str:
    """A wall clock as Spark prints it, ``2026-11-21 08:00:00[.5]`` (fraction without trailing
    zeros); an aware ``value`` is shown in ``tz``. A time that the zone repeats (DST ends) gets
    its offset so Spark reads the right one.

    >>> wall_clock_text(dt.datetime(2026, 11, 21, 8, 0, 0, 500000))
    '2026-11-21 08:00:00.5'
    >>> wall_clock_text(dt.datetime(2026, 11, 1, 1, 30, fold=1), "America/Los_Angeles")
    '2026-11-01 01:30:00-08:00'
    """
    local = wall_clock(value, tz)
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if local.year < 1000:  # strftime does not pad years below 1000 on every platform
        text = f"{local.year:04d}" + text[text.index("-") :]
    if local.microsecond:
        text += f".{local.microsecond:06d}".rstrip("0")
    tzinfo = zone(tz) if isinstance(tz, str) else tz
    first = local.replace(tzinfo=tzinfo, fold=0).utcoffset()
    second = local.replace(tzinfo=tzinfo, fold=1).utcoffset()
    if first != second:  # repeated (or skipped) in this zone: say which
        offset = local.replace(tzinfo=tzinfo).utcoffset() or dt.timedelta(0)
        sign = "-" if offset < dt.timedelta(0) else "+"
        minutes = abs(int(offset.total_seconds())) // 60
        text += f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return text


def instant_text(value: dt.datetime) -> str:
    """An instant as text that says its zone, for checkpoints and snapshot summaries.

    >>> instant_text(dt.datetime(2026, 11, 21, 8, tzinfo=zone("+08:00")))
    '2026-11-21 00:00:00+00:00'
    """
    if value.tzinfo is None:
        raise TypeError(f"instant_text needs an aware datetime, got {value!r}")
    return value.astimezone(UTC).isoformat(sep=" ")


def parse_instant(text: str, tz: dt.tzinfo | str = UTC) -> dt.datetime:
    """The instant of ISO text with an offset; text without one is a wall clock in ``tz`` (what
    older checkpoints wrote).

    >>> parse_instant("2026-11-21 00:00:00", "Asia/Shanghai")
    datetime.datetime(2026, 11, 20, 16, 0, tzinfo=datetime.timezone.utc)
    """
    return instant(dt.datetime.fromisoformat(text.strip()), tz)


def sql_literal(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> str:
    """A Spark SQL TIMESTAMP literal for ``value``: an aware one with its offset (exact in any
    session zone), a naive one as the wall clock Spark reads in the session zone.

    >>> sql_literal(dt.datetime(2026, 11, 21, tzinfo=UTC))
    "TIMESTAMP '2026-11-21 00:00:00+00:00'"
    >>> sql_literal(dt.datetime(2026, 11, 21))
    "TIMESTAMP '2026-11-21 00:00:00'"
    """
    if value.tzinfo is not None:
        return f"TIMESTAMP '{instant_text(value)}'"
    return f"TIMESTAMP '{wall_clock_text(value, tz)}'"


def lit(value: dt.datetime, tz: dt.tzinfo | str = UTC) -> Column:
    """A Spark TIMESTAMP column holding ``value`` (naive: a wall clock in ``tz``), built from
    epoch microseconds: unlike ``F.lit(datetime)`` it never reads the OS zone."""
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.lit(to_micros(value, tz)))


def wall_clock_frame(frame: DataFrame) -> DataFrame:
    """``frame`` with every TIMESTAMP (nested ones too) as TIMESTAMP_NTZ in the session zone,
    so collecting it gives the wall clocks Spark prints, whatever the OS zone. Unchanged when it
    has no TIMESTAMP."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        DataType,
        MapType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    def swap(data_type: DataType) -> DataType:
        if isinstance(data_type, TimestampType):
            return TimestampNTZType()
        if isinstance(data_type, StructType):
            return StructType(
                [StructField(f.name, swap(f.dataType), f.nullable) for f in data_type.fields]
            )
        if isinstance(data_type, ArrayType):
            return ArrayType(swap(data_type.elementType), data_type.containsNull)
        if isinstance(data_type, MapType):
            return MapType(
                swap(data_type.keyType), swap(data_type.valueType), data_type.valueContainsNull
            )
        return data_type

    fields = frame.schema.fields
    swapped = [swap(f.dataType) for f in fields]
    if all(new == f.dataType for new, f in zip(swapped, fields, strict=True)):
        return frame
    columns = frame.columns  # positions, not names: result columns may repeat a name
    return frame.toDF(*[f"_c{i}" for i in range(len(columns))]).select(
        *[
            (F.col(f"_c{i}") if new == f.dataType else F.col(f"_c{i}").cast(new)).alias(name)
            for i, (name, new, f) in enumerate(zip(columns, swapped, fields, strict=True))
        ]
    )
