"""Debezium / Connect field -> table type mapping, decimal rules and schema planning (no Spark)."""

from __future__ import annotations

import base64
import json
import warnings
from types import SimpleNamespace

import pytest

from sparkext.actions.cdc.model import Settings, batch_types
from sparkext.actions.cdc.options import variable_scale_decimal
from sparkext.actions.cdc.types import (
    UnknownLogicalTypeWarning,
    connect_column,
    connect_columns,
    decimal_column,
    logical_parts,
    merge_column,
)
from sparkext.errors import SchemaChangeError
from sparkext.planning.cdc_schema import plan_schema
from sparkext.spark.session import PARQUET_REBASE, build_conf

DECIMAL = "org.apache.kafka.connect.data.Decimal"
UUID, DATE = "io.debezium.data.Uuid", "io.debezium.time.Date"


def field(type_: str, name: str | None = None, **extra) -> dict:
    out = {"field": "c", "type": type_, **extra}
    if name:
        out["name"] = name
    return out


def decimal(precision: int | None, scale: int) -> dict:
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return field("bytes", DECIMAL, parameters=parameters)


VSD = field(
    "struct",
    "io.debezium.data.VariableScaleDecimal",
    fields=[{"field": "scale", "type": "int32"}, {"field": "value", "type": "bytes"}],
)

# (source column, Connect field as Debezium's MySQL / PostgreSQL connectors document it, table
# type). time.precision.mode adaptive(_time_microseconds), decimal.handling.mode precise unless
# said otherwise.
MAPPING = [
    ("MySQL TINYINT / SMALLINT", field("int16"), "int"),
    ("MySQL INT, PostgreSQL integer", field("int32"), "int"),
    ("MySQL BIGINT", field("int64"), "bigint"),
    ("MySQL FLOAT", field("float32"), "float"),
    ("MySQL DOUBLE", field("float64"), "double"),
    ("MySQL BOOLEAN, BIT(1)", field("boolean"), "boolean"),
    ("MySQL VARCHAR", field("string"), "string"),
    ("MySQL BLOB", field("bytes"), "binary"),
    ("MySQL BIT(>1)", field("bytes", "io.debezium.data.Bits"), "binary"),
    ("MySQL DECIMAL(10,2)", decimal(10, 2), "decimal(10,2)"),
    ("MySQL DECIMAL(38,0)", decimal(38, 0), "decimal(38,0)"),
    ("MySQL DECIMAL(65,30)", decimal(65, 30), "string"),
    ("Connect Decimal without precision", decimal(None, 4), "decimal(38,4)"),
    ("decimal.handling.mode=double", field("float64"), "double"),
    ("decimal.handling.mode=string", field("string"), "string"),
    ("PostgreSQL numeric", VSD, "decimal(38,10)"),
    ("MySQL DATE", field("int32", "io.debezium.time.Date"), "date"),
    ("MySQL DATETIME(0-3)", field("int64", "io.debezium.time.Timestamp"), "timestamp_ntz"),
    ("MySQL DATETIME(4-6)", field("int64", "io.debezium.time.MicroTimestamp"), "timestamp_ntz"),
    ("NanoTimestamp", field("int64", "io.debezium.time.NanoTimestamp"), "timestamp_ntz"),
    ("connect DT", field("int64", "org.apache.kafka.connect.data.Timestamp"), "timestamp_ntz"),
    ("TIMESTAMP, tstz", field("string", "io.debezium.time.ZonedTimestamp"), "timestamp"),
    ("PostgreSQL time(0-3)", field("int32", "io.debezium.time.Time"), "bigint"),
    ("MySQL TIME", field("int64", "io.debezium.time.MicroTime"), "bigint"),
    ("NanoTime", field("int64", "io.debezium.time.NanoTime"), "bigint"),
    ("connect mode TIME", field("int32", "org.apache.kafka.connect.data.Time"), "bigint"),
    ("connect mode DATE", field("int32", "org.apache.kafka.connect.data.Date"), "date"),
    ("PostgreSQL timetz", field("string", "io.debezium.time.ZonedTime"), "string"),
    ("MySQL YEAR", field("int32", "io.debezium.time.Year"), "int"),
    ("PostgreSQL interval", field("int64", "io.debezium.time.MicroDuration"), "bigint"),
    ("interval.handling.mode=string", field("string", "io.debezium.time.Interval"), "string"),
    ("MySQL JSON, PostgreSQL json(b)", field("string", "io.debezium.data.Json"), "string"),
    ("MySQL ENUM", field("string", "io.debezium.data.Enum"), "string"),
    ("MySQL SET", field("string", "io.debezium.data.EnumSet"), "string"),
    ("PostgreSQL uuid", field("string", "io.debezium.data.Uuid"), "string"),
    ("PostgreSQL int[]", field("array", items={"type": "int32"}), "array<int>"),
    ("PostgreSQL bigint[]", field("array", items={"type": "int64"}), "array<bigint>"),
    ("PostgreSQL text[]", field("array", items={"type": "string"}), "array<string>"),
    ("PostgreSQL uuid[]", field("array", items=field("string", UUID)), "array<string>"),
    ("PostgreSQL date[]", field("array", items=field("int32", DATE)), "array<date>"),
    ("PostgreSQL numeric[]", field("array", items=VSD), "string"),
    ("MySQL GEOMETRY", field("struct", "io.debezium.data.geometry.Geometry", fields=[]), "string"),
    ("PG hstore (map)", field("map", keys=field("string"), values=field("string")), "string"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "connect", "table_type"), MAPPING, ids=[m[0] for m in MAPPING])
def test_debezium_types_map_to_their_table_types(column, connect, table_type):
    assert connect_column(connect)[1] == table_type


def test_tags_carry_what_decoding_needs():
    assert connect_column(decimal(10, 2))[2] == f"{DECIMAL};scale=2;digits=10"
    assert logical_parts(connect_column(decimal(None, 3))[2]) == (
        DECIMAL,
        {"scale": "3", "digits": "38"},
    )
    date_list = field("array", items={"type": "int32", "name": "io.debezium.time.Date"})
    assert connect_column(date_list)[2] == "array;items=io.debezium.time.Date"
    assert connect_column(field("struct", fields=[]))[2] == "json"


def test_decimal_column_rules():
    assert decimal_column(38, 38) == "decimal(38,38)"
    assert decimal_column(39, 0) == "string"  # beyond Iceberg's 38 digits: exact text
    assert decimal_column(36, -2) == "decimal(38,0)"
    assert decimal_column(37, -2) == "string"
    assert decimal_column(2, 5) == "decimal(5,5)"  # PostgreSQL numeric(2,5)


def test_the_hand_worked_encoding_of_debezium_decimals():
    """12.34 at scale 2 is the unscaled 1234 = 0x04D2; -12.34 is its two's complement 0xFB2E."""
    assert base64.b64encode((1234).to_bytes(2, "big", signed=True)).decode() == "BNI="
    assert base64.b64encode((-1234).to_bytes(2, "big", signed=True)).decode() == "+y4="


def test_variable_scale_decimal_can_be_text():
    assert connect_column(VSD, "string")[1] == "string"
    assert connect_column(VSD, "decimal(20,4)")[1] == "decimal(20,4)"
    assert variable_scale_decimal(" String ") == "string"
    for bad in ("decimal(39,2)", "decimal(5,6)", "double", "decimal(0,0)"):
        with pytest.raises(ValueError, match="string or decimal"):
            variable_scale_decimal(bad)


def facts(*schemas) -> list:
    return [SimpleNamespace(value_schema=json.dumps(s), row_types=None) for s in schemas]


def test_batch_types_take_the_option_and_merge_schemas():
    key = {"field": "id", "type": "int64"}
    vsd = {**VSD, "field": "n"}
    settings = Settings(
        "t", "/ck", ("id",), True, None, False, 1, 1, variable_scale_decimal="string"
    )
    assert batch_types(facts({"fields": [key, vsd]}), settings)[0] == {
        "id": "bigint",
        "n": "string",
    }
    assert batch_types(facts({"fields": [key, vsd]}))[0]["n"] == "decimal(38,10)"
    narrow = {"fields": [key, {**decimal(10, 2), "field": "m"}]}
    wide = {"fields": [key, {**decimal(12, 2), "field": "m"}]}
    assert batch_types(facts(narrow, wide))[0]["m"] == "decimal(12,2)"
    assert batch_types(facts(wide, narrow))[0]["m"] == "decimal(12,2)"
    rescaled = {"fields": [key, {**decimal(12, 3), "field": "m"}]}
    with pytest.raises(SchemaChangeError, match=r"^Column 'm' changed from decimal\(12,2\) to"):
        batch_types(facts(wide, rescaled))
    assert merge_column("q", ("int", None), ("bigint", None)) == ("bigint", None)


def test_an_unknown_logical_type_keeps_its_base_type_and_is_said_once_per_column():
    schema = {
        "fields": [
            {"field": "id", "type": "int64"},
            {"field": "price", "type": "int64", "name": "com.example.Money"},
            {"field": "cost", "type": "int64", "name": "com.example.Money"},
        ]
    }
    heard: list[str] = []
    assert connect_columns(schema, notice=heard.append)[1] == (
        "price",
        "bigint",
        "com.example.Money",
    )
    assert heard == [
        "column price: unknown logical type com.example.Money, stored as its base type bigint",
        "column cost: unknown logical type com.example.Money, stored as its base type bigint",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):  # three batches: each column said once
            batch_types(facts(schema))
    said = [str(w.message) for w in caught if issubclass(w.category, UnknownLogicalTypeWarning)]
    assert said == heard


def test_plan_schema_for_decimals_and_times():
    table = {"m": "decimal(10,2)", "at": "timestamp", "local": "timestamp_ntz"}
    assert plan_schema(table, {"m": "decimal(12,2)"}, exact=True).widenings == (
        ("m", "decimal(12,2)"),
    )
    assert not plan_schema(table, {"m": "decimal(8,2)"}, exact=True).changes  # still fits
    with pytest.raises(SchemaChangeError) as caught:
        plan_schema(table, {"m": "decimal(10,3)"}, exact=True)
    assert str(caught.value) == (
        "Column 'm' changed from decimal(10,2) to decimal(10,3) in the source and Iceberg "
        "widens a decimal's precision only at the same scale; ingestion stopped and nothing of "
        "this batch was committed (add a new column in the source instead, or recreate the "
        "table)."
    )
    # a table created when DATETIME was stored as an instant keeps its column
    assert not plan_schema(table, {"at": "timestamp_ntz"}, exact=True).changes
    with pytest.raises(SchemaChangeError, match="from timestamp_ntz to timestamp"):
        plan_schema(table, {"local": "timestamp"}, exact=True)
    loose = {"m": "bigint", "local": "string", "tags": "string"}
    assert not plan_schema({**table, "tags": "array<string>"}, loose, exact=False).changes


def test_sessions_read_and_write_old_dates_as_they_are():
    conf = build_conf({})
    assert {k: conf[k] for k in PARQUET_REBASE} == dict.fromkeys(PARQUET_REBASE, "CORRECTED")
    assert conf["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"
    key = "spark.sql.parquet.datetimeRebaseModeInWrite"
    assert build_conf({key: "LEGACY"})[key] == "LEGACY"  # the user's choice wins
