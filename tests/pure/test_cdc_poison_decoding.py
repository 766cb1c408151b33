"""Poison input for the CDC decoder: each bad line is one reject with its reason, never a crash."""

from __future__ import annotations

import json

import pyarrow as pa

from sparkext.executors.cdc.debezium import MAX_DEPTH, decode
from sparkext.executors.cdc.decode import INPUT_REJECT, decode_documents, decode_lines, merge_types

EVENT = {
    "op": "c",
    "before": None,
    "after": {"id": 1, "name": "café"},
    "source": {"file": "mysql-bin.000001", "pos": 10, "row": 0, "ts_ms": 1000},
    "ts_ms": 1005,
}
DEEP = '{"op": "c", "after": {"id": 2, "n": ' + "[" * 1500 + "]" * 1500 + "}}"


def run(decoder, values: list, files: list[str], unread: list | None = None) -> list[dict]:
    columns = {"value": pa.array(values, pa.binary()), "source_file": pa.array(files)}
    if unread is not None:
        columns[INPUT_REJECT] = pa.array(unread, pa.string())
    batches = list(decoder(iter([pa.RecordBatch.from_pydict(columns)])))
    return [row for batch in batches for row in batch.to_pylist()]


def test_a_latin1_byte_rejects_only_its_line():
    good = json.dumps(EVENT, ensure_ascii=False).encode()
    latin1 = good.replace("café".encode(), "caf\xe9".encode("latin-1"))
    rows = run(decode_lines, [good, latin1, good], ["f.json"] * 3)
    assert [r["reject"] for r in rows] == [
        None,
        f"not UTF-8 at byte offset {latin1.index(0xE9)} (0xe9)",
        None,
    ]
    assert json.loads(rows[0]["after_json"]) == {"id": 1, "name": "café"}  # stored exactly
    assert "caf\\xe9" in rows[1]["raw"] and rows[1]["source_file"] == "f.json"


def test_a_string_column_with_invalid_utf8_does_not_crash_the_task():
    """Spark's text source hands over invalid UTF-8 in a string column; Arrow only checks it
    when converting to Python."""
    good = json.dumps(EVENT).encode()
    bad = pa.array([good, b"\xff\xfe{"], pa.binary()).cast(pa.string(), safe=False)
    batch = pa.RecordBatch.from_pydict({"value": bad, "source_file": pa.array(["f", "f"])})
    rows = [r for b in decode_lines(iter([batch])) for r in b.to_pylist()]
    assert [r["reject"] for r in rows] == [None, "not UTF-8 at byte offset 0 (0xff)"]


def test_binary_lines_are_rejected_one_by_one():
    lines = [b"\x89PNG\r", b"\x00\x01\x02\xff", b"\x1f\x8b\x08\x00"]
    rows = run(decode_lines, lines, ["img.png"] * 3)
    assert len(rows) == 3 and all(r["reject"] for r in rows)
    assert {r["reject"].split(" at ")[0].split(":")[0] for r in rows} <= {
        "not UTF-8",
        "malformed JSON",
    }


def test_a_deeply_nested_line_is_rejected_not_a_recursion_error():
    rows = run(decode_lines, [DEEP.encode(), json.dumps(EVENT).encode()], ["f"] * 2)
    assert rows[0]["reject"] == f"nested deeper than {MAX_DEPTH} levels"
    assert rows[0]["raw"] == DEEP and rows[1]["reject"] is None


def test_nesting_just_under_the_limit_is_kept():
    inner = "[" * (MAX_DEPTH - 5) + "]" * (MAX_DEPTH - 5)
    event = decode('{"op": "c", "after": {"id": 1, "n": ' + inner + "}}")
    assert event.reject is None and event.after["id"] == 1


def test_brackets_inside_strings_do_not_count_as_nesting():
    event = dict(EVENT, after={"id": 1, "name": "[" * 2000})
    assert decode(json.dumps(event)).reject is None


def test_documents_deep_or_not_utf8_are_rejected_whole():
    deep_document = ("[" + DEEP + "]").encode()
    latin1 = json.dumps([EVENT]).replace("caf\\u00e9", "caf\xe9").encode("latin-1")
    good = json.dumps([EVENT, EVENT]).encode()
    rows = run(decode_documents, [deep_document, latin1, good], ["a", "b", "c"])
    assert [r["reject"] for r in rows] == [
        f"nested deeper than {MAX_DEPTH} levels",
        f"not UTF-8 at byte offset {latin1.index(0xE9)} (0xe9)",
        None,
        None,
    ]


def test_an_input_the_driver_could_not_read_becomes_a_reject_naming_it():
    good = json.dumps(EVENT).encode()
    rows = run(decode_lines, [good, None], ["a", "gone.json"], [None, "file vanished"])
    assert rows[1]["reject"] == "file vanished" and rows[1]["source_file"] == "gone.json"
    assert rows[0]["reject"] is None


def test_a_column_seen_only_as_null_gets_no_type():
    assert merge_types([{"id": "bigint", "n": None}, {"id": "bigint", "n": None}]) == {
        "id": "bigint"
    }
    assert merge_types([{"id": "bigint", "n": None}, {"n": "bigint"}]) == {
        "id": "bigint",
        "n": "bigint",
    }


def test_the_files_a_batch_planned_and_which_of_them_vanished(tmp_path):
    """Spark's file-source log: ``sources/0/<batch>`` or, every 10th batch, ``<batch>.compact``
    holding the earlier batches too; paths percent-encoded."""
    from urllib.parse import quote

    from sparkext.actions.cdc.stream import planned_files, vanished

    landing = tmp_path / "in dir"
    landing.mkdir()
    (landing / "a b.json").write_text("{}\n")
    log = tmp_path / "ck" / "sources" / "0"
    log.mkdir(parents=True)
    uri = "file://" + quote(str(landing))

    def entry(name: str, batch: int) -> str:
        return json.dumps({"path": f"{uri}/{quote(name)}", "timestamp": 1, "batchId": batch})

    (log / "3").write_text("v1\n" + entry("a b.json", 3) + "\n" + entry("gone.json", 3))
    (log / "9.compact").write_text("v1\n" + entry("old.json", 8) + "\n" + entry("a b.json", 9))
    planned = planned_files(str(tmp_path / "ck"), 3)
    assert planned == [f"{uri}/a%20b.json", f"{uri}/gone.json"]
    assert vanished(planned) == [f"{uri}/gone.json"]
    assert planned_files(str(tmp_path / "ck"), 9) == [f"{uri}/a%20b.json"]
    assert planned_files(str(tmp_path / "ck"), 4) == []


def test_a_byte_order_mark_opening_a_file_is_not_a_reject():
    from sparkext.executors.cdc.debezium import decode

    line = '\ufeff{"op": "c", "after": {"id": 1}, "source": {"file": "b.1", "pos": 4}}'
    event = decode(line.encode("utf-8"))
    assert event is not None and event.reject is None and event.after == {"id": 1}
