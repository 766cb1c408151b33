"""sparkext.times: the one module for time. Nothing may depend on the OS zone of the process."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql.types import TimestampType

from sparkext import times
from sparkext.errors import EnvironmentSetupError
from sparkext.streaming.context import StaticCatalog
from sparkext.streaming.rewrite import parse_time, to_batch
from tests.helpers.zones import host_zone

UTC = dt.timezone.utc
LA = "America/Los_Angeles"
HOSTS = ["UTC", "Asia/Shanghai", LA]


def test_spark_zone_ids():
    assert times.zone("Asia/Shanghai").utcoffset(dt.datetime(2026, 1, 1)) == dt.timedelta(hours=8)
    assert times.zone("+08:00") == dt.timezone(dt.timedelta(hours=8))
    assert times.zone("GMT-5") == times.zone("UTC-05:00") == dt.timezone(dt.timedelta(hours=-5))
    assert times.zone("Z") is times.zone("UTC") is UTC
    with pytest.raises(EnvironmentSetupError) as error:
        times.zone("Mars/Olympus")
    assert str(error.value) == (
        "Unknown time zone 'Mars/Olympus': use a region such as 'Asia/Shanghai' or an offset "
        "such as '+08:00' (regions need the tz database: pip install tzdata)."
    )


@pytest.mark.parametrize("host", HOSTS)
def test_collected_timestamps_become_the_instant_whatever_the_host(host):
    """PySpark's collect() turns epoch micros into a naive OS-local datetime (TimestampType's
    fromInternal); ``collected`` gives back the exact instant on any host."""
    micros = [0, 1_763_712_000_123_456, -86_400_000_001, 1_793_523_600_000_000]  # last: DST
    with host_zone(host):
        values = [times.collected(TimestampType().fromInternal(m)) for m in micros]
    assert values == [times.from_micros(m) for m in micros]
    assert [times.to_micros(v) for v in values] == micros


@pytest.mark.parametrize("host", HOSTS)
def test_instants_and_wall_clocks_never_read_the_host_zone(host):
    with host_zone(host):
        wall = dt.datetime(2026, 11, 21, 8, 0)
        assert times.instant(wall, "Asia/Shanghai") == dt.datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
        assert times.instant(wall) == dt.datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
        moment = dt.datetime(2026, 11, 21, tzinfo=UTC)
        assert times.wall_clock(moment, LA) == dt.datetime(2026, 11, 20, 16, 0)
        assert times.wall_clock(wall, LA) is wall  # already a wall clock
        assert times.to_millis(dt.datetime(1970, 1, 1, 0, 0, 0, 1999)) == 1
        assert times.to_millis(dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1  # floor
        assert times.from_millis(1) == dt.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)


def test_the_repeated_hour_of_a_dst_change_stays_exact():
    """2026-11-01 01:30 happens twice in Los Angeles; the wall clock keeps which (fold), and its
    text says the offset so Spark reads the same instant back."""
    first = dt.datetime(2026, 11, 1, 8, 30, tzinfo=UTC)  # 01:30 PDT
    second = first + dt.timedelta(hours=1)  # 01:30 PST
    walls = [times.wall_clock(m, LA) for m in (first, second)]
    assert walls[0] == walls[1] == dt.datetime(2026, 11, 1, 1, 30)
    assert [times.instant(w, LA) for w in walls] == [first, second]
    assert [times.wall_clock_text(w, LA) for w in walls] == [
        "2026-11-01 01:30:00-07:00",
        "2026-11-01 01:30:00-08:00",
    ]
    assert times.wall_clock_text(dt.datetime(2026, 11, 1, 3, 0), LA) == "2026-11-01 03:00:00"


def test_text_forms():
    assert times.wall_clock_text(dt.datetime(2026, 1, 2, 3, 4, 5, 120000)) == (
        "2026-01-02 03:04:05.12"
    )
    assert times.wall_clock_text(dt.datetime(2026, 1, 2, tzinfo=UTC), "+08:00") == (
        "2026-01-02 08:00:00"
    )
    assert times.wall_clock_text(dt.datetime(1, 1, 1)) == "0001-01-01 00:00:00"
    shanghai = dt.datetime(2026, 11, 21, 8, tzinfo=times.zone("Asia/Shanghai"))
    assert times.instant_text(shanghai) == "2026-11-21 00:00:00+00:00"
    assert times.parse_instant("2026-11-21 00:00:00+00:00", LA) == shanghai
    assert times.parse_instant("2026-11-21 08:00:00", "Asia/Shanghai") == shanghai  # old text
    assert times.sql_literal(shanghai) == "TIMESTAMP '2026-11-21 00:00:00+00:00'"
    assert times.sql_literal(dt.datetime(2026, 11, 21, 8)) == "TIMESTAMP '2026-11-21 08:00:00'"
    with pytest.raises(TypeError):
        times.instant_text(dt.datetime(2026, 11, 21))


def test_backfill_bounds_are_session_wall_clocks():
    """Text and naive datetimes are wall clocks in the session zone; aware datetimes and text
    with an offset are instants, converted to it."""
    zone = "Asia/Shanghai"
    expected = dt.datetime(2026, 11, 21, 8, 0)
    assert parse_time("2026-11-21 08:00:00", "start", zone) == expected
    assert parse_time(expected, "start", zone) == expected
    assert parse_time(dt.datetime(2026, 11, 21, tzinfo=UTC), "start", zone) == expected
    assert parse_time("2026-11-21T00:00:00+00:00", "start", zone) == expected
    job = """
    CREATE TABLE lake.db.bids (bidtime TIMESTAMP, price DOUBLE,
      WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE);
    CREATE TABLE lake.db.out (window_start TIMESTAMP, window_end TIMESTAMP, total DOUBLE);
    INSERT INTO lake.db.out SELECT window_start, window_end, SUM(price)
    FROM TABLE(TUMBLE(TABLE lake.db.bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """
    catalog = StaticCatalog(time_zone=zone)
    aware = to_batch(job, dt.datetime(2026, 11, 21, tzinfo=UTC), "2026-11-21 09:00:00", catalog)
    text = to_batch(job, "2026-11-21 08:00:00", "2026-11-21 09:00:00", catalog)
    assert aware == text and "'2026-11-21 08:00:00'" in text
