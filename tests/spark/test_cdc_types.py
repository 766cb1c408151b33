"""ingest_cdc types Debezium values the way the MySQL and PostgreSQL connectors document them
(JSON converter, schemas.enable=true): read back in Spark and in DuckDB, compared with values
worked out by hand from Debezium's documentation."""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, timedelta, timezone
from decimal import Context, Decimal

import pytest

from sparkext.errors import SchemaChangeError
from tests.helpers import cdc_calls
from tests.helpers.cdc_calls import land
from tests.helpers.readers import duckdb_query
from tests.helpers.zones import session_zone

DECIMAL = "org.apache.kafka.connect.data.Decimal"


def unscaled(value: str, scale: int) -> str:
    """Debezium's precise decimal: base64 of the big-endian two's complement unscaled integer.

    >>> unscaled("12.34", 2)
    'BNI='
    """
    number = int(Decimal(value).scaleb(scale, Context(prec=100)))  # exact, not 28 digits
    size = max(1, (number.bit_length() + 8) // 8)  # room for the sign bit
    return base64.b64encode(number.to_bytes(size, "big", signed=True)).decode()


def decimal_field(name: str, precision: int, scale: int) -> dict:
    return {
        "field": name,
        "type": "bytes",
        "optional": True,
        "name": DECIMAL,
        "version": 1,
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
    }


def envelope(fields: list[dict], row: dict, pos: int, source: dict, op: str = "c") -> dict:
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": fields, "optional": True, "field": "before"},
            {"type": "struct", "fields": fields, "optional": True, "field": "after"},
        ],
    }
    payload = {"op": op, "before": None, "after": row, "ts_ms": pos, "source": source}
    return {"schema": schema, "payload": payload}


def mysql_source(pos: int) -> dict:
    return {
        "connector": "mysql",
        "file": "mysql-bin.000003",
        "pos": pos,
        "row": 0,
        "ts_ms": 1_700_000_000_000 + pos,
        "db": "shop",
        "table": "orders",
    }


def postgres_source(lsn: int) -> dict:
    return {
        "connector": "postgresql",
        "lsn": lsn,
        "sequence": json.dumps([str(lsn), str(lsn)]),
        "ts_ms": 1_700_000_000_000 + lsn,
        "db": "shop",
        "schema": "public",
        "table": "items",
    }


def ingest(table: str, landing, checkpoint, options: str = "") -> dict:
    return cdc_calls.ingest(table, landing, checkpoint, options=options)


def epoch_micros(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


def rejects(spark, checkpoint) -> list[str]:
    """The reasons of the rejected records (their column read by name: one job, no inference)."""
    frame = spark.read.schema("reject string").json(str(checkpoint / "rejected"))
    return sorted(r.reject for r in frame.collect())


# MySQL: DECIMAL(10,2), DECIMAL(38,0), DATETIME, DATETIME(6), TIMESTAMP(6), DATE, TIME(6), YEAR,
# JSON, ENUM; time.precision.mode=adaptive_time_microseconds, decimal.handling.mode=precise.
MYSQL_FIELDS = [
    {"field": "id", "type": "int64", "optional": False},
    decimal_field("money", 10, 2),
    decimal_field("big", 38, 0),
    {"field": "dt", "type": "int64", "optional": True, "name": "io.debezium.time.Timestamp"},
    {"field": "dt6", "type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp"},
    {"field": "ts", "type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "d", "type": "int32", "optional": True, "name": "io.debezium.time.Date"},
    {"field": "t", "type": "int64", "optional": True, "name": "io.debezium.time.MicroTime"},
    {"field": "y", "type": "int32", "optional": True, "name": "io.debezium.time.Year"},
    {"field": "doc", "type": "string", "optional": True, "name": "io.debezium.data.Json"},
    {"field": "e", "type": "string", "optional": True, "name": "io.debezium.data.Enum"},
    {"field": "qty", "type": "int64", "optional": True},
]
BIGGEST = "9" * 38
# Debezium's documentation: DATETIME '2018-06-20 06:37:03' becomes 1529476623000 and TIMESTAMP
# '2018-06-20 06:37:03' (server zone UTC-7) becomes "2018-06-20T13:37:03Z".
MYSQL_ROWS = [
    {
        "id": 1,
        "money": ("12.34", "BNI="),
        "big": (BIGGEST, None),
        "dt": (1529476623000, datetime(2018, 6, 20, 6, 37, 3)),
        "dt6": (1529476623123456, datetime(2018, 6, 20, 6, 37, 3, 123456)),
        "ts": ("2018-06-20T13:37:03Z", datetime(2018, 6, 20, 13, 37, 3, tzinfo=timezone.utc)),
        "d": (17702, date(2018, 6, 20)),
        "t": (49023500000, 49023500000),  # 13:37:03.5
        "y": (2018, 2018),
        "doc": ('{"a": [1, 2.5]}', '{"a": [1, 2.5]}'),
        "e": ("small", "small"),
    },
    {
        "id": 2,
        "money": ("-12.34", None),
        "big": ("-" + BIGGEST, None),
        # DATETIME '1000-01-01 00:00:00', MySQL's smallest, and TIMESTAMP with a fraction and
        # an offset
        "dt": (-30610224000000, datetime(1000, 1, 1)),
        "dt6": (-30610224000000000 + 1, datetime(1000, 1, 1, 0, 0, 0, 1)),
        "ts": (
            "2018-06-20T15:37:03.654321+02:00",
            datetime(2018, 6, 20, 13, 37, 3, 654321, tzinfo=timezone.utc),
        ),
        "d": (-354285, date(1000, 1, 1)),
        "t": (-1, -1),  # MySQL TIME is a duration: '-00:00:00.000001'
        "y": (1000, 1000),
        "doc": ("[]", "[]"),
        "e": ("large", "large"),
    },
    {
        "id": 3,
        "money": ("0", "AA=="),
        "big": ("0", None),
        "dt": (0, datetime(1970, 1, 1)),
        "dt6": (-1, datetime(1969, 12, 31, 23, 59, 59, 999999)),
        "ts": (
            "1969-12-31T23:59:59.999999Z",
            datetime(1969, 12, 31, 23, 59, 59, 999999, timezone.utc),
        ),
        "d": (-1, date(1969, 12, 31)),
        "t": (0, 0),
        "y": (2155, 2155),
        "doc": (None, None),
        "e": (None, None),
    },
    {"id": 4, "money": ("99999999.99", None), "big": ("1", None)},
    {"id": 5, "money": ("-0.01", None), "big": ("-1", None)},
]


def mysql_events() -> list[dict]:
    events = []
    for pos, spec in enumerate(MYSQL_ROWS, start=10):
        row = {"id": spec["id"], "qty": pos}
        for name, value in spec.items():
            if name == "id":
                continue
            raw = value[0]
            if name in ("money", "big"):
                raw = unscaled(raw, 2 if name == "money" else 0)
                if value[1] is not None:
                    assert raw == value[1]  # the hand-worked encoding
            row[name] = raw
        events.append(envelope(MYSQL_FIELDS, row, pos * 100, mysql_source(pos * 100)))
    return events


def expected_mysql() -> dict[int, dict]:
    out = {}
    for spec in MYSQL_ROWS:
        want = {"money": Decimal(spec["money"][0]), "big": Decimal(spec["big"][0])}
        for name in ("dt", "dt6", "ts", "d", "t", "y", "doc", "e"):
            want[name] = spec[name][1] if name in spec else None
        out[spec["id"]] = want
    return out


def test_mysql_types_are_exact_in_spark_and_duckdb(spark, tmp_path, table_name):
    land(tmp_path / "in", "1.json", mysql_events())
    with session_zone(spark, "America/Los_Angeles"):  # zone-less values must not move
        result = ingest(table_name, tmp_path / "in", tmp_path / "ck")
        assert (result["inserted"], result["rejected"]) == (5, 0)
        frame = spark.table(table_name)
        assert {c: t for c, t in frame.dtypes if not c.startswith("_cdc")} == {
            "id": "bigint",
            "money": "decimal(10,2)",
            "big": "decimal(38,0)",
            "dt": "timestamp_ntz",
            "dt6": "timestamp_ntz",
            "ts": "timestamp",
            "d": "date",
            "t": "bigint",
            "y": "int",
            "doc": "string",
            "e": "string",
            "qty": "bigint",
        }
        from pyspark.sql import functions as F

        rows = frame.select(
            "id", "money", "big", "dt", "dt6", F.unix_micros("ts").alias("ts"), "d", "t", "y",
            "doc", "e",
        ).collect()  # fmt: skip
    want = expected_mysql()
    micros = {k: epoch_micros(v["ts"]) for k, v in want.items()}
    got = {r.id: r.asDict() for r in rows}
    for key, row in want.items():
        assert {**row, "ts": micros[key]} == {c: got[key][c] for c in row}, key
    duck = duckdb_query(
        spark,
        table_name,
        "SELECT id, money, big, dt, dt6, epoch_us(ts), d, t, y, doc, e FROM {table}",
    )
    columns = ("money", "big", "dt", "dt6", "ts", "d", "t", "y", "doc", "e")
    assert {r[0]: dict(zip(columns, r[1:], strict=True)) for r in duck} == {
        k: {**v, "ts": micros[k]} for k, v in want.items()
    }


def test_values_of_the_wrong_type_are_rejected_with_the_column(spark, tmp_path, table_name):
    good = mysql_events()[0]
    bad_qty = json.loads(json.dumps(good))
    bad_qty["payload"]["after"].update(id=20, qty="abc")
    bad_money = json.loads(json.dumps(good))
    bad_money["payload"]["after"].update(id=21, money="12.34")
    bad_key = json.loads(json.dumps(good))
    bad_key["payload"]["after"].update(id="x")
    too_big = json.loads(json.dumps(good))
    too_big["payload"]["after"].update(id=22, money=unscaled("100000000.00", 2))
    land(tmp_path / "in", "1.json", [good, bad_qty, bad_money, bad_key, too_big])
    result = ingest(table_name, tmp_path / "in", tmp_path / "ck")
    assert (result["inserted"], result["rejected"]) == (1, 4)
    assert rejects(spark, tmp_path / "ck") == [
        "value '100000000.00' of column money does not fit decimal(10,2)",
        "value '12.34' of column money is not a decimal(10,2)",
        "value 'abc' of column qty is not a bigint",
        "value 'x' of column id is not a bigint",
    ]
    assert [r.id for r in spark.table(table_name).collect()] == [1]


def test_an_impossible_zoned_timestamp_is_a_reject_also_in_ansi_mode(spark, tmp_path, table_name):
    good = mysql_events()[0]
    bad = json.loads(json.dumps(good))
    bad["payload"]["after"].update(id=30, ts="2026-13-45T00:00:00Z")
    land(tmp_path / "in", "1.json", [good, bad])
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        result = ingest(table_name, tmp_path / "in", tmp_path / "ck")
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert (result["inserted"], result["rejected"]) == (1, 1)
    assert rejects(spark, tmp_path / "ck") == [
        "value '2026-13-45T00:00:00Z' of column ts is not a timestamp"
    ]


def test_decimal_precision_widens_and_a_scale_change_stops(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    key = {"field": "id", "type": "int64", "optional": False}

    def event(key_value: int, precision: int, scale: int, value: str) -> dict:
        fields = [key, decimal_field("amount", precision, scale)]
        row = {"id": key_value, "amount": unscaled(value, scale)}
        return envelope(fields, row, key_value, mysql_source(key_value))

    land(landing, "1.json", [event(1, 10, 2, "-99999999.99")])
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", [event(2, 12, 2, "9999999999.99"), event(3, 10, 2, "1.5")])
    ingest(table_name, landing, checkpoint)
    assert dict(spark.table(table_name).dtypes)["amount"] == "decimal(12,2)"
    got = {r.id: r.amount for r in spark.table(table_name).collect()}
    assert got == {1: Decimal("-99999999.99"), 2: Decimal("9999999999.99"), 3: Decimal("1.50")}
    snapshots = spark.table(f"{table_name}.snapshots").count()
    land(landing, "3.json", [event(4, 12, 3, "1.234")])
    with pytest.raises(SchemaChangeError) as caught:
        ingest(table_name, landing, checkpoint)
    assert str(caught.value).startswith(
        "Column 'amount' changed from decimal(12,2) to decimal(12,3) in the source and Iceberg "
        "widens a decimal's precision only at the same scale"
    )
    assert spark.table(f"{table_name}.snapshots").count() == snapshots


# PostgreSQL: numeric without precision (VariableScaleDecimal), timestamptz, timestamp(3),
# int[] and text[]; decimal.handling.mode=precise.
PG_FIELDS = [
    {"field": "id", "type": "int32", "optional": False},
    {
        "field": "amount",
        "type": "struct",
        "optional": True,
        "name": "io.debezium.data.VariableScaleDecimal",
        "version": 1,
        "doc": "Variable scaled decimal",
        "fields": [
            {"field": "scale", "type": "int32", "optional": False},
            {"field": "value", "type": "bytes", "optional": False},
        ],
    },
    {"field": "at", "type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "local", "type": "int64", "optional": True, "name": "io.debezium.time.Timestamp"},
    {"field": "ints", "type": "array", "optional": True, "items": {"type": "int32"}},
    {"field": "tags", "type": "array", "optional": True, "items": {"type": "string"}},
    {"field": "u", "type": "string", "optional": True, "name": "io.debezium.data.Uuid"},
    {"field": "geo", "type": "struct", "optional": True, "name": "io.debezium.data.geometry.Point",
     "fields": [{"field": "x", "type": "float64"}, {"field": "y", "type": "float64"}]},
]  # fmt: skip


def variable(value: str) -> dict:
    scale = max(0, -Decimal(value).as_tuple().exponent)
    return {"scale": scale, "value": unscaled(value, scale)}


def test_postgres_numeric_timestamptz_and_arrays(spark, tmp_path, table_name):
    rows = [
        {
            "id": 1,
            "amount": variable("12.345"),
            "at": "2021-03-04T05:06:07.654321Z",
            "local": 1614834367654,
            "ints": [1, -2, None, 2147483647],
            "tags": ["a", "b c", None],
            "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "geo": {"x": 1.5, "y": -2.0},
        },
        {"id": 2, "amount": variable("-0.0000000001"), "ints": [], "tags": []},
        {"id": 3, "amount": variable("1234567890123456789012345678")},  # 28 integer digits
        {"id": 4, "amount": variable("12345678901234567890123456789")},  # 29: does not fit
        {"id": 5, "amount": variable("0.00000000001")},  # 11 decimals: does not fit
    ]
    events = [envelope(PG_FIELDS, r, 100 + i, postgres_source(100 + i)) for i, r in enumerate(rows)]
    land(tmp_path / "in", "1.json", events)
    with session_zone(spark, "Asia/Kolkata"):
        result = ingest(table_name, tmp_path / "in", tmp_path / "ck")
        assert (result["inserted"], result["rejected"]) == (3, 2)
        frame = spark.table(table_name)
        types = dict(frame.dtypes)
        assert [types[c] for c in ("amount", "at", "local", "ints", "tags", "u", "geo")] == [
            "decimal(38,10)",
            "timestamp",
            "timestamp_ntz",
            "array<int>",
            "array<string>",
            "string",
            "string",
        ]
        from pyspark.sql import functions as F

        got = {
            r.id: r.asDict()
            for r in frame.select(
                "id", "amount", F.unix_micros("at").alias("at"), "local", "ints", "tags", "geo"
            ).collect()
        }
    assert got[1] == {
        "id": 1,
        "amount": Decimal("12.3450000000"),
        "at": epoch_micros(datetime(2021, 3, 4, 5, 6, 7, 654321, timezone.utc)),
        "local": datetime(2021, 3, 4, 5, 6, 7, 654000),
        "ints": [1, -2, None, 2147483647],
        "tags": ["a", "b c", None],
        "geo": '{"x":1.5,"y":-2.0}',
    }
    assert got[2]["amount"] == Decimal("-1E-10") and got[2]["ints"] == [] and got[2]["at"] is None
    assert got[3]["amount"] == Decimal("1234567890123456789012345678")
    assert rejects(spark, tmp_path / "ck") == [
        "value '0.00000000001' of column amount does not fit decimal(38,10)",
        "value '12345678901234567890123456789' of column amount does not fit decimal(38,10)",
    ]
    duck = duckdb_query(
        spark, table_name, 'SELECT id, amount, epoch_us("at"), ints, tags FROM {table} ORDER BY id'
    )
    assert duck == [
        (1, Decimal("12.3450000000"), got[1]["at"], [1, -2, None, 2147483647], ["a", "b c", None]),
        (2, Decimal("-0.0000000001"), None, [], []),
        (3, Decimal("1234567890123456789012345678.0000000000"), None, None, None),
    ]


def reference_text(number: int, scale: int) -> str:
    """Python's exact decimal text of number x 10^-scale, as decimal_text writes it."""
    if number == 0:
        return "0"
    digits = str(abs(number))
    if scale > 0:
        digits = digits.rjust(scale + 1, "0")
        digits = f"{digits[:-scale]}.{digits[-scale:]}"
    elif scale < 0:
        digits += "0" * -scale
    return ("-" if number < 0 else "") + digits


def test_decimal_digits_match_python_for_any_bytes(spark):
    """The Spark-expression decoder against int.from_bytes: edges and 300 random lengths."""
    import random

    from pyspark.sql import functions as F

    from sparkext.actions.cdc.types import decimal_text, unscaled_digits

    rng = random.Random(20261122)
    edges = [b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\x00\x80", b"\xff\x7f"]
    edges += [b"\x80" + b"\x00" * 15, b"\x7f" + b"\xff" * 15, b"\xff" * 16, b"\x80" + b"\x00" * 31]
    samples = edges + [rng.randbytes(rng.randint(1, 40)) for _ in range(300)]
    rows = [(bytearray(b), rng.randint(-3, 40)) for b in samples]
    frame = spark.createDataFrame(rows, "v binary, scale int")
    digits = frame.select("v", "scale", unscaled_digits(F.col("v")).alias("u"))
    texts = digits.select(
        "v", decimal_text(F.col("u.negative"), F.col("u.digits"), F.col("scale")).alias("t")
    ).collect()
    for (value, scale), row in zip(rows, texts, strict=True):
        number = int.from_bytes(value, "big", signed=True)
        assert row.t == reference_text(number, scale), (bytes(value).hex(), scale)


def test_numeric_without_precision_as_exact_text(spark, tmp_path, table_name):
    """option variable-scale-decimal = string: any PostgreSQL numeric, digit for digit."""
    fields = PG_FIELDS[:2]
    values = ["12345678901234567890123456789012345678901234.5678901234567", "-0.000001", "0"]
    events = [
        envelope(fields, {"id": i, "amount": variable(v)}, 100 + i, postgres_source(100 + i))
        for i, v in enumerate(values)
    ]
    land(tmp_path / "in", "1.json", events)
    result = ingest(
        table_name, tmp_path / "in", tmp_path / "ck", "'variable-scale-decimal', 'string'"
    )
    assert (result["inserted"], result["rejected"]) == (3, 0)
    assert dict(spark.table(table_name).dtypes)["amount"] == "string"
    got = {r.id: r.amount for r in spark.table(table_name).collect()}
    assert got == dict(enumerate(values))


def test_the_value_count_shortcut_rejects_exactly_what_the_full_check_rejects(spark):
    """typed_rows parses a raw image again only when the decoder's count of its values differs
    from what the conversion produced; on seeded random rows (wrong types, nulls, absent and
    unknown columns, nested values, deletes, truncates) it rejects exactly the rows, with the
    same reasons, as checking every row (a frame without the counts)."""
    import random

    import pyarrow as pa

    from sparkext.actions.cdc.types import typed_rows
    from sparkext.executors.cdc.decode import DECODED_DDL, decode_lines

    rng = random.Random(22)
    pools = {
        "id": [1, 2, -7, None, "x", 2.5],
        "qty": [0, 12, None, "abc", True, 1.5, {"n": 1}],
        "price": [0.5, 3, None, "cheap", [1, 2]],
        "ok": [True, False, None, "yes", 1],
        "name": ["a", "", None, 5, {"k": "v"}],
        "extra": [1, None, "z"],  # not a column of the table
    }

    def image() -> dict:
        return {c: rng.choice(v) for c, v in pools.items() if rng.random() < 0.85}

    lines = []
    for pos in range(600):
        op = rng.choice("ccuudt")
        event = {
            "op": op,
            "before": image() if op in "ud" else None,
            "after": image() if op in "cu" else None,
            "ts_ms": 1000 + pos,
            "source": {"file": "b.000001", "pos": pos, "row": 0, "ts_ms": 1000 + pos},
        }
        lines.append(json.dumps(event).encode())
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array(lines, pa.binary()), "source_file": ["f.json"] * len(lines)}
    )
    decoded = [b.to_pylist() for b in decode_lines(iter([batch]))]
    rows = [r for part in decoded for r in part if r["reject"] is None]
    valid = spark.createDataFrame(rows, DECODED_DDL)
    columns = {
        "id": "bigint",
        "qty": "bigint",
        "price": "double",
        "ok": "boolean",
        "name": "string",
    }

    def outcome(frame):
        typed, _ = typed_rows(frame, columns, {}, ["id"])
        got = typed.select("position", "type_reject", "missing_key").collect()
        return sorted((r.position, r.type_reject, r.missing_key) for r in got)

    shortcut = outcome(valid)
    full = outcome(valid.drop("after_values", "before_values"))
    assert shortcut == full
    reasons = [r for _, r, _ in shortcut if r]
    assert len(reasons) > 100 and len(shortcut) - len(reasons) > 100  # both kinds are there


def test_typing_built_without_ansi_is_not_reused_under_ansi(spark):
    """Spark fixes an operator's ANSI mode when the expression is built: typing expressions
    built (and reused) for a session without ANSI must not serve a batch under ANSI. A Debezium
    Timestamp (ms) so large that its microseconds overflow a bigint wraps silently without ANSI
    and fails the batch with it, as Spark's own arithmetic does."""
    from sparkext.actions.cdc.types import typed_rows
    from sparkext.executors.cdc.decode import DECODED_DDL

    row = {f.split(" ")[0]: None for f in DECODED_DDL.split(", ")}
    row.update(op="c", position="m:1", after_json='{"id": 1, "ts": 92233720368547758}')
    frame = spark.createDataFrame([row], DECODED_DDL)
    columns = {"id": "bigint", "ts": "timestamp_ntz"}
    logical = {"ts": "io.debezium.time.Timestamp"}

    def typed_ts():
        typed, _ = typed_rows(frame, columns, logical, ["id"])
        return typed.selectExpr("after.ts IS NOT NULL AS ts").collect()

    assert spark.conf.get("spark.sql.ansi.enabled") == "false"
    assert typed_ts()[0].ts  # wrapped around: Spark's non-ANSI arithmetic
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match=r"ARITHMETIC_OVERFLOW|overflow"):
            typed_ts()
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert typed_ts()[0].ts


def test_widened_columns_keep_every_later_batch_going(spark, tmp_path, table_name):
    """``ALTER TABLE … ALTER COLUMN qty TYPE bigint`` (and the key's) mid-stream: the table's
    older files (data, equality deletes, event logs, key cache) hold int32, the newer int64.
    Later batches read them all (a second writer's lookups read the equality deletes and event
    logs of both eras): before, every one failed with CANNOT_MERGE_SCHEMAS."""

    def event(key: int, qty: int, width: str, pos: int, op: str = "u") -> dict:
        fields = [
            {"field": "id", "type": width, "optional": False},
            {"field": "qty", "type": width, "optional": True},
        ]
        return envelope(fields, {"id": key, "qty": qty}, pos, postgres_source(pos), op)

    first, second = tmp_path / "in1", tmp_path / "in2"
    land(first, "1.json", [event(k, k, "int32", k, "c") for k in (1, 2, 3)])
    ingest(table_name, first, tmp_path / "ck1")
    land(first, "2.json", [event(k, 10 + k, "int32", 10 + k) for k in (1, 2, 3)])
    ingest(table_name, first, tmp_path / "ck1")
    land(first, "3.json", [event(1, 5_000_000_000, "int64", 21), event(2, 22, "int64", 22)])
    ingest(table_name, first, tmp_path / "ck1")
    assert dict(spark.table(table_name).dtypes)["qty"] == "bigint"
    # the same checkpoint again, and a second writer (its lookups read both eras' files)
    land(first, "4.json", [event(3, 33, "int64", 33), event(1, 41, "int64", 41)])
    assert ingest(table_name, first, tmp_path / "ck1")["rejected"] == 0
    land(second, "1.json", [event(2, 52, "int64", 52), event(3, 3, "int32", 3)])
    result = ingest(table_name, second, tmp_path / "ck2")
    assert (result["late"], result["rejected"]) == (1, 0)
    got = {r.id: r.qty for r in spark.table(table_name).collect()}
    assert got == {1: 41, 2: 52, 3: 33}
