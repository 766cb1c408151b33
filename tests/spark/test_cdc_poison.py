"""Poison input in the landing zone: the bad records are rejected with their reasons, the rest of
the batch commits, and the next run goes on."""

from __future__ import annotations

import json

import sparkext
from sparkext.executors.cdc.debezium import MAX_DEPTH
from sparkext.routing.router import execute
from sparkext.routing.tokens import split_statements

BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\xe0\x00\x10JFIF\n\x1f\x8b\x08\x00"


def event(op: str, key: int, pos: int, **after) -> dict:
    """A schema-less MySQL event (no Connect ``schema`` wrapper): types come from the values."""
    return {
        "op": op,
        "before": None if op == "c" else {"id": key},
        "after": {"id": key, **after},
        "source": {"file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": pos * 1000},
        "ts_ms": pos * 1000 + 5,
    }


def line(item: dict) -> bytes:
    return json.dumps(item, ensure_ascii=False).encode("utf-8")


def call(spark, table: str, landing, checkpoint, progress=lambda message: None) -> dict:
    sql = (
        f"CALL sparkext.ingest_cdc(table => '{table}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
    )
    return execute(spark, split_statements(sql)[0], progress).first().asDict()


def rows(spark, table: str) -> dict[int, dict]:
    """User columns by key (the system columns are checked by test_ingest_cdc)."""
    frame = spark.table(table)
    return {
        r.id: r.asDict()
        for r in frame.select(*(c for c in frame.columns if not c.startswith("_cdc"))).collect()
    }


def rejects(spark, checkpoint) -> list:
    return spark.read.json(str(checkpoint / "rejected")).collect()


def test_poison_input_is_rejected_line_by_line_and_the_rest_commits(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    landing.mkdir()
    latin1 = line(event("c", 3, 12, name="x", n=None)).replace(b'"x"', b'"caf\xe9"')
    deep = line(event("c", 4, 13, name="y")).replace(b'"y"', b"[" * 1500 + b"]" * 1500)
    (landing / "1.json").write_bytes(
        b"\n".join(
            [
                line(event("c", 1, 10, name="café", n=None)),
                latin1,
                deep,
                line(event("c", 2, 11, name="ünï", n=None)),
            ]
        )
        + b"\n"
    )
    (landing / "blob.bin").write_bytes(BINARY)
    (landing / "gone.json").write_bytes(line(event("c", 9, 14, name="gone")) + b"\n")

    def delete_planned_file(message: str) -> None:
        # the batch has planned its files; one disappears before it is read
        if message.startswith("batch 0:"):
            (landing / "gone.json").unlink(missing_ok=True)

    first = call(spark, table_name, landing, checkpoint, delete_planned_file)
    assert rows(spark, table_name) == {1: {"id": 1, "name": "café"}, 2: {"id": 2, "name": "ünï"}}
    assert "n" not in spark.table(table_name).columns  # only NULLs so far: no type to give it
    found = rejects(spark, checkpoint)
    by_file: dict[str, list] = {}
    for r in found:
        by_file.setdefault(r.source_file.rsplit("/", 1)[-1], []).append(r)
    reasons = sorted(r.reject for r in by_file["1.json"])
    assert reasons == [
        f"nested deeper than {MAX_DEPTH} levels",
        f"not UTF-8 at byte offset {latin1.index(0xE9)} (0xe9)",
    ]
    assert any("caf\\xe9" in r.raw for r in by_file["1.json"])
    assert by_file["blob.bin"] and all(
        r.reject.startswith(("not UTF-8", "malformed JSON")) for r in by_file["blob.bin"]
    )
    assert [r.reject for r in by_file["gone.json"]] == ["file vanished before it was read"]
    assert first["files_missing"] == 1
    assert first["rejected"] == len(found) and first["inserted"] == 2 and first["commits"] == 1

    # the next run goes on: the column that was NULL gets its type from its first value
    (landing / "2.json").write_bytes(
        line(event("u", 1, 20, name="café", n=7)) + b"\n" + line(event("c", 5, 21, n=42)) + b"\n"
    )
    second = call(spark, table_name, landing, checkpoint)
    assert (second["inserted"], second["updated"], second["rejected"]) == (1, 1, 0)
    assert second["files_missing"] == 0
    assert dict(spark.table(table_name).dtypes)["n"] == "bigint"
    got = {k: (v["name"], v["n"]) for k, v in rows(spark, table_name).items()}
    assert got == {1: ("café", 7), 2: ("ünï", None), 5: (None, 42)}


def test_null_only_column_stays_null_once_the_table_has_it(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    landing.mkdir()
    (landing / "1.json").write_bytes(line(event("c", 1, 10, n=5)) + b"\n")
    call(spark, table_name, landing, checkpoint)
    (landing / "2.json").write_bytes(line(event("c", 2, 11, n=None)) + b"\n")
    second = call(spark, table_name, landing, checkpoint)
    assert second["rejected"] == 0
    assert {r.id: r.n for r in spark.table(table_name).collect()} == {1: 5, 2: None}


def test_json_files_poison_documents_are_rejected_whole(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    landing.mkdir()
    (landing / "good.json").write_text(json.dumps([event("c", 1, 10, name="a")], indent=2))
    (landing / "blob.json").write_bytes(BINARY)
    (landing / "deep.json").write_text("[" * 1500 + "]" * 1500)
    result = sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{landing}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true, "
        "options => map('input-format', 'json-files'))"
    ).first()
    assert (result.inserted, result.rejected) == (1, 2)
    reasons = {r.source_file.rsplit("/", 1)[-1]: r.reject for r in rejects(spark, checkpoint)}
    assert reasons == {
        "blob.json": "not UTF-8 at byte offset 0 (0x89)",
        "deep.json": f"nested deeper than {MAX_DEPTH} levels",
    }


def test_a_file_deleted_while_the_batch_reads_is_rejected_not_skipped(spark, tmp_path, table_name):
    """Deleted after the batch checked its files, before Spark read it: the batch stops before
    committing anything and runs again, rejecting the file."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    landing.mkdir()
    (landing / "1.json").write_bytes(line(event("c", 1, 10, name="a")) + b"\n")
    (landing / "2.json").write_bytes(line(event("c", 2, 11, name="b")) + b"\n")

    def delete_while_reading(message: str) -> None:
        if message == "batch 0: decoding":
            (landing / "2.json").unlink(missing_ok=True)

    result = call(spark, table_name, landing, checkpoint, delete_while_reading)
    assert (result["inserted"], result["rejected"], result["files_missing"]) == (1, 1, 1)
    assert rows(spark, table_name) == {1: {"id": 1, "name": "a"}}
    assert [(r.reject, r.source_file.rsplit("/", 1)[-1]) for r in rejects(spark, checkpoint)] == [
        ("file vanished before it was read", "2.json")
    ]
