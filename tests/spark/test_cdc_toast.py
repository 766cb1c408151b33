"""PostgreSQL TOAST through ingest_cdc (issue 13 item 2).

With REPLICA IDENTITY DEFAULT (PostgreSQL's default) an UPDATE that does not touch a TOASTed
column carries Debezium's ``unavailable.value.placeholder`` instead of the value, and ``before``
is null. The table must keep the stored value. Events are built as the Debezium PostgreSQL
connector documents them (JSON converter, schemas.enable=true; bytea as base64, text[] as a
JSON array whose only element is the placeholder).
"""

from __future__ import annotations

import base64
import json

from tests.helpers.cdc_calls import ingest, land
from tests.helpers.readers import duckdb_query

PLACEHOLDER = "__debezium_unavailable_value"
SCHEMA_FIELDS = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "body", "type": "string", "optional": True},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": True},
]


def _pg(op: str, lsn: int, after: dict | None, before: dict | None = None) -> dict:
    row = {"type": "struct", "fields": SCHEMA_FIELDS, "optional": True}
    return {
        "schema": {
            "type": "struct",
            "fields": [
                {**row, "field": "before"},
                {**row, "field": "after"},
                {"field": "source", "type": "struct", "fields": []},
                {"field": "op", "type": "string"},
            ],
        },
        "payload": {
            "before": before,
            "after": after,
            "source": {
                "connector": "postgresql",
                "db": "shop",
                "schema": "public",
                "table": "docs",
                "lsn": lsn,
                "sequence": json.dumps([str(lsn - 1), str(lsn)]),
                "txId": lsn,
                "ts_ms": 1_700_000_000_000 + lsn,
            },
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        },
    }


def _row(key: int, name: str, body, blob, tags) -> dict:
    encoded = base64.b64encode(blob).decode() if isinstance(blob, bytes) else blob
    return {"id": key, "name": name, "body": body, "blob": encoded, "tags": tags}


TOASTED_BLOB = base64.b64encode(PLACEHOLDER.encode()).decode()


def _read(spark, table: str) -> dict[int, tuple]:
    return {
        r.id: (r.name, r.body, bytes(r.blob) if r.blob is not None else None, r.tags)
        for r in spark.table(table).collect()
    }


def test_unchanged_toasted_columns_keep_their_stored_values(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    big = "x" * 5000
    land(
        landing,
        "1.json",
        [
            _pg("c", 10, _row(1, "one", big, b"\x00\x01big", ["a", "b"])),
            _pg("c", 11, _row(2, "two", "b2", b"two", ["t"])),
        ],
    )
    ingest(table_name, landing, checkpoint)
    land(
        landing,
        "2.json",
        [
            # only name changed: every TOASTed column carries the placeholder
            _pg("u", 20, _row(1, "one, renamed", PLACEHOLDER, TOASTED_BLOB, [PLACEHOLDER])),
            # inserted and updated in the same batch: the insert supplies the value
            _pg("c", 21, _row(3, "three", "body3", b"3", ["x"])),
            _pg("u", 22, _row(3, "three, renamed", PLACEHOLDER, TOASTED_BLOB, [PLACEHOLDER])),
            # a placeholder update then a real one: the real one wins
            _pg("u", 23, _row(2, "two", PLACEHOLDER, TOASTED_BLOB, [PLACEHOLDER])),
            _pg("u", 24, _row(2, "two", "new body", b"new", None)),
        ],
    )
    ingest(table_name, landing, checkpoint)
    assert _read(spark, table_name) == {
        1: ("one, renamed", big, b"\x00\x01big", ["a", "b"]),
        2: ("two", "new body", b"new", None),
        3: ("three, renamed", "body3", b"3", ["x"]),
    }
    # a later batch, after the table holds the values: still kept
    land(
        landing,
        "3.json",
        [_pg("u", 30, _row(1, "one, again", PLACEHOLDER, TOASTED_BLOB, [PLACEHOLDER]))],
    )
    ingest(table_name, landing, checkpoint)
    assert _read(spark, table_name)[1] == ("one, again", big, b"\x00\x01big", ["a", "b"])
    # an independent reader agrees (DuckDB's iceberg extension, equality deletes applied)
    duck = duckdb_query(spark, table_name, "SELECT id, name, body, blob, tags FROM {table}")
    assert {r[0]: (r[1], r[2], bytes(r[3]) if r[3] is not None else None, r[4]) for r in duck} == {
        1: ("one, again", big, b"\x00\x01big", ["a", "b"]),
        2: ("two", "new body", b"new", None),
        3: ("three, renamed", "body3", b"3", ["x"]),
    }


def test_a_configured_placeholder_is_honoured(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    options = ", options => map('unavailable-value-placeholder', '<toast>')"
    land(landing, "1.json", [_pg("c", 10, _row(1, "one", "kept", b"k", ["k"]))])
    ingest(table_name, landing, checkpoint, options)
    land(landing, "2.json", [_pg("u", 20, _row(1, "renamed", "<toast>", b"k", ["k"]))])
    ingest(table_name, landing, checkpoint, options)
    assert _read(spark, table_name) == {1: ("renamed", "kept", b"k", ["k"])}


def test_a_redelivered_older_value_does_not_replace_the_stored_one(spark, tmp_path, table_name):
    """The table holds body Z at position 500; a batch re-delivers an older body X (position
    300, late) and then a placeholder update (600): the row keeps Z, the newer value."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(
        landing,
        "1.json",
        [
            _pg("c", 100, _row(1, "one", "A", b"a", ["a"])),
            _pg("u", 500, _row(1, "one", "Z", b"z", ["z"])),
        ],
    )
    ingest(table_name, landing, checkpoint)
    land(
        landing,
        "2.json",
        [
            _pg("u", 300, _row(1, "one", "X", b"x", ["x"])),
            _pg("u", 600, _row(1, "renamed", PLACEHOLDER, TOASTED_BLOB, [PLACEHOLDER])),
        ],
    )
    ingest(table_name, landing, checkpoint)
    assert _read(spark, table_name) == {1: ("renamed", "Z", b"z", ["z"])}


def test_a_batch_that_adds_a_column_still_fills_placeholders(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", [_pg("c", 10, _row(1, "one", "kept", b"k", ["k"]))])
    ingest(table_name, landing, checkpoint)
    event = _pg("u", 20, {**_row(1, "one", PLACEHOLDER, b"k", ["k"]), "note": "new column"})
    for image in event["schema"]["fields"][:2]:
        image["fields"] = [*SCHEMA_FIELDS, {"field": "note", "type": "string", "optional": True}]
    land(landing, "2.json", [event])
    ingest(table_name, landing, checkpoint)
    row = spark.table(table_name).first()
    assert (row.body, row.note) == ("kept", "new column")


def test_a_hex_placeholder_is_matched_as_debezium_decodes_it(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    options = ", options => map('unavailable-value-placeholder', 'hex:3c3f3e')"  # "<?>"
    land(landing, "1.json", [_pg("c", 10, _row(1, "one", "kept", b"k", ["k"]))])
    ingest(table_name, landing, checkpoint, options)
    land(landing, "2.json", [_pg("u", 20, _row(1, "renamed", "<?>", b"<?>", ["<?>"]))])
    ingest(table_name, landing, checkpoint, options)
    assert _read(spark, table_name) == {1: ("renamed", "kept", b"k", ["k"])}


def test_the_same_table_when_no_observed_figure_arrives(spark, tmp_path, table_name, monkeypatch):
    """Spark may drop an observing node (a plan it proves empty), and then no figure is ever
    reported: ``observed`` computes the figures instead. Every figure computed so (the guessed
    types' check of the second batch, the TOAST decision, the write's counts), the batches end
    exactly as when they are observed."""
    from sparkext.actions.cdc.ingest import figures as module  # where observed() asks Spark

    monkeypatch.setattr(module, "observed_metrics", lambda observation: {})
    test_unchanged_toasted_columns_keep_their_stored_values(spark, tmp_path, table_name)
