"""The decoder on the real Debezium samples vendored in tests/fixtures/debezium (sources in its
README.md)."""

from __future__ import annotations

import json

import pytest

from sparkext.actions.cdc.types import connect_columns
from sparkext.executors.cdc.debezium import decode
from sparkext.planning.positions import position
from tests.helpers.fixtures import DEBEZIUM_SAMPLES

SAMPLES = DEBEZIUM_SAMPLES


def sample(name: str):
    if not SAMPLES.is_dir():
        pytest.fail(f"the Debezium samples are missing: expected {SAMPLES}")
    return json.loads((SAMPLES / name).read_text())


def line(obj) -> str:
    return json.dumps(obj)


def test_create_with_schema_wrapper():
    event = decode(line(sample("02_docs_create_with_schema.json")))
    assert event.op == "c" and event.reject is None
    assert event.after["id"] == 1004 and event.before is None
    assert (event.source_db, event.source_table) == ("inventory", "customers")
    columns = connect_columns(event.value_schema)
    assert columns[0] == ("id", "int", None)
    assert [c[0] for c in columns] == ["id", "first_name", "last_name", "email"]


def test_update_and_delete_payload_only():
    update = decode(line(sample("03_docs_update_payload_only.json")))
    delete = decode(line(sample("04_docs_delete_payload_only.json")))
    assert update.op == "u" and update.before["first_name"] == "Anne"
    assert update.after["first_name"] == "Anne Marie"
    assert delete.op == "d" and delete.after is None and delete.before["id"] == 1004
    assert update.position < delete.position  # binlog pos 484 < 805
    assert update.event_time_ms == 1465581029100  # source.ts_ms, not the connector's ts_ms


def test_delete_then_tombstone_with_keys():
    records = sample("05_tutorial_delete_then_tombstone.json")
    delete = decode(line({"key": records[0]["key"], "value": records[0]["value"]}))
    tombstone = decode(line({"key": records[1]["key"], "value": records[1]["value"]}))
    assert delete.op == "d" and delete.key == {"id": 1004}
    assert delete.event_time_ms == 1486501558000  # ts_sec when ts_ms is absent
    assert tombstone is None
    assert decode("null") is None and decode("   ") is None


def test_truncate():
    event = decode(line(sample("06_docs_truncate_payload_only.json")))
    assert event.op == "t" and event.before is None and event.after is None


def test_snapshot_read_and_serde_samples():
    read = decode(line(sample("09_tutorial_snapshot_read_with_schema.json")))
    assert read.op == "r" and read.after is not None
    wrapped = decode(line(sample("10_dbz_test_serde_create_with_schema.json")))
    bare = decode(line(sample("11_dbz_test_serde_create_without_schema.json")))
    assert wrapped.after == bare.after and wrapped.op == bare.op == "c"
    assert decode(line(sample("12_dbz_test_serde_update_without_schema.json"))).op == "u"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{oops", "malformed JSON"),
        (line({"id": 1004, "first_name": "Anne"}), "not a Debezium change event: op is None"),
        (line({"op": "u", "before": None, "after": None}), "op 'u' without an 'after' row"),
        (line({"op": "d", "before": None, "after": None}), "op 'd' without a 'before' row"),
        (line([1, 2]), "not a Debezium change event: the value is not a JSON object"),
    ],
)
def test_rejects_name_the_reason(text, reason):
    assert decode(text).reject.startswith(reason)


def test_flattened_and_schema_change_records_are_rejected_not_crashing():
    flat = decode(line(sample("13_dbz_test_serde_unwrapped_newrecordstate.json")))
    ddl = decode(line(sample("08_docs_schema_change_value.json")))
    assert flat.reject.startswith("not a Debezium change event")
    assert ddl.reject.startswith("not a Debezium change event")


def test_positions_sort_like_the_binlog():
    nine = position({"file": "mysql-bin.000009", "pos": 5, "row": 1}, None)
    ten = position({"file": "mysql-bin.000010", "pos": 4, "row": 0}, None)
    assert nine < ten
    assert position({"file": "b.000002", "pos": 1}, None) > position(
        {"file": "b.000001", "pos": 999999}, None
    )
    assert position({}, 5) == "t:00000000000000000005"
