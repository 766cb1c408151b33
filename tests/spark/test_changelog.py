"""sparkext.changelog / create_changelog_view on hand-worked histories.

Where Iceberg's own create_changelog_view runs (append-only and copy-on-write tables) ours must
equal it row for row; on merge-on-read tables (position deletes, v3 deletion vectors, key-only
equality deletes, ingest_cdc) the expected rows are worked out by hand from the statements.
"""

from __future__ import annotations

import uuid

import pytest

import sparkext
from sparkext.actions.history.changelog import CHANGE_COLUMNS
from sparkext.errors import NotAnIcebergTableError, ProcedureArgumentError
from tests.helpers.cdc_calls import events, ingest, land
from tests.helpers.iceberg import flink_commit, transient_commit

KEY = ("id", "v", "_change_type", "_change_ordinal")
MODES = ("write.delete.mode", "write.update.mode", "write.merge.mode")


def create(spark, name: str, version: int = 2, mode: str = "merge-on-read", key="INT") -> None:
    """(id, v); id is an INT by default so Java-API writers can fill it (py4j sends Integers)."""
    properties = {"format-version": str(version), **dict.fromkeys(MODES, mode)}
    tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(f"CREATE TABLE {name} (id {key}, v STRING) USING iceberg TBLPROPERTIES ({tblprops})")


def snapshots(spark, name: str) -> list[int]:
    """The current snapshot's ancestry, oldest first."""
    rows = spark.sql(
        f"SELECT snapshot_id FROM {name}.history WHERE is_current_ancestor ORDER BY made_current_at"
    ).collect()
    return [r.snapshot_id for r in rows]


def changes(sql: str, columns=KEY) -> list[tuple]:
    return sorted(tuple(r) for r in sparkext.sql(sql).select(*columns).collect())


def ours(name: str, args: str = "", columns=KEY) -> list[tuple]:
    extra = f", {args}" if args else ""
    return changes(f"SELECT * FROM sparkext.changelog(table => '{name}'{extra})", columns)


def view(spark, catalog: str, name: str, args: str = "", columns=KEY) -> list[tuple]:
    """Rows of ``CALL <catalog>.create_changelog_view`` (Iceberg's lake.system or sparkext)."""
    table = name if catalog == "sparkext" else name.removeprefix("lake.")
    view_name = f"v_{uuid.uuid4().hex[:8]}"
    extra = f", {args}" if args else ""
    call = f"CALL {catalog}.create_changelog_view(table => '{table}', changelog_view => "
    returned = sparkext.sql(f"{call}'{view_name}'{extra})").collect()
    assert [tuple(r) for r in returned] == [(view_name,)]
    rows = sorted(tuple(r) for r in spark.table(view_name).select(*columns).collect())
    spark.catalog.dropTempView(view_name)
    return rows


def both(spark, name: str, args: str = "") -> list[tuple]:
    columns = (*KEY, "_commit_snapshot_id")
    iceberg = view(spark, "lake.system", name, args, columns)
    assert view(spark, "sparkext", name, args, columns) == iceberg
    return iceberg


def test_append_only_equals_iceberg_row_for_row(spark, table_name):
    create(spark, table_name, mode="copy-on-write")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c'), (3, 'c')")
    spark.sql(f"INSERT INTO {table_name} VALUES (4, 'd')")
    s1, s2, s3 = snapshots(spark, table_name)
    assert [r[:4] for r in both(spark, table_name)] == [
        (1, "a", "INSERT", 0),
        (2, "b", "INSERT", 0),
        (3, "c", "INSERT", 1),
        (3, "c", "INSERT", 1),
        (4, "d", "INSERT", 2),
    ]
    ranged = f"options => map('start-snapshot-id', '{s1}', 'end-snapshot-id', '{s2}')"
    assert [r[:4] for r in both(spark, table_name, ranged)] == [
        (3, "c", "INSERT", 0),
        (3, "c", "INSERT", 0),
    ]
    both(spark, table_name, "net_changes => true")
    both(spark, table_name, "identifier_columns => array('id')")
    # the table function: the same rows, and the commit time of each snapshot
    times = dict(
        spark.sql(f"SELECT snapshot_id, committed_at FROM {table_name}.snapshots").collect()
    )
    found = ours(table_name, columns=("_commit_snapshot_id", "_commit_timestamp"))
    assert {(s, t) for s, t in found} == {(s, times[s]) for s in (s1, s2, s3)}
    assert ours(table_name, f"start => '{s1}', end => '{s2}'") == [
        (3, "c", "INSERT", 0),
        (3, "c", "INSERT", 0),
    ]


def test_copy_on_write_equals_iceberg_with_carry_overs_removed(spark, table_name):
    create(spark, table_name, mode="copy-on-write")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (3, 'c')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 2")  # rewrites the file: 1 and 3 carry over
    spark.sql(f"UPDATE {table_name} SET v = 'cc' WHERE id = 1")
    spark.sql(
        f"MERGE INTO {table_name} t USING (SELECT 4 AS id, 'd' AS v UNION ALL SELECT 1, 'x') s "
        "ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *"
    )
    assert [r[:4] for r in both(spark, table_name)] == [
        (1, "a", "DELETE", 2),
        (1, "a", "INSERT", 0),
        (1, "cc", "DELETE", 3),
        (1, "cc", "INSERT", 2),
        (2, "b", "DELETE", 1),
        (2, "b", "INSERT", 0),
        (3, "c", "INSERT", 0),
        (3, "c", "INSERT", 0),
        (4, "d", "INSERT", 3),
    ]
    assert [r[:4] for r in both(spark, table_name, "net_changes => true")] == [
        (3, "c", "INSERT", 0),
        (3, "c", "INSERT", 0),
        (4, "d", "INSERT", 3),
    ]
    updates = both(spark, table_name, "identifier_columns => array('id')")
    assert (1, "a", "UPDATE_BEFORE", 2) in [r[:4] for r in updates]
    assert (1, "cc", "UPDATE_AFTER", 2) in [r[:4] for r in updates]


EXPECTED_MOR = [
    (1, "a", "DELETE", 4),
    (1, "a", "INSERT", 0),
    (1, "aa", "INSERT", 4),
    (2, "b", "DELETE", 2),
    (2, "b", "INSERT", 0),
    (3, "c", "DELETE", 3),
    (3, "c", "INSERT", 0),
    (3, "cc", "DELETE", 5),
    (3, "cc", "INSERT", 3),
    (4, "d", "DELETE", 4),
    (4, "d", "INSERT", 1),
    (5, "e", "INSERT", 4),
]


@pytest.mark.parametrize("version", [2, 3])
def test_merge_on_read_delete_update_merge(spark, table_name, version):
    """Position deletes (v2) and deletion vectors (v3) written by Spark's row-level commands."""
    create(spark, table_name, version)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"INSERT INTO {table_name} VALUES (4, 'd')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 2")
    spark.sql(f"UPDATE {table_name} SET v = 'cc' WHERE id = 3")
    spark.sql(
        f"MERGE INTO {table_name} t USING (SELECT * FROM VALUES (1, 'aa'), (4, NULL), (5, 'e') "
        "AS s(id, v)) s ON t.id = s.id WHEN MATCHED AND s.v IS NULL THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"DELETE FROM {table_name} WHERE id = 3")  # a row of the UPDATE's new file
    kinds = spark.sql(f"SELECT content, file_format FROM {table_name}.delete_files").collect()
    assert {tuple(k) for k in kinds} == {(1, "PUFFIN" if version == 3 else "PARQUET")}
    assert ours(table_name) == EXPECTED_MOR
    assert view(spark, "sparkext", table_name, "identifier_columns => array('id')") == sorted(
        [
            (1, "a", "UPDATE_BEFORE", 4),
            (1, "a", "INSERT", 0),
            (1, "aa", "UPDATE_AFTER", 4),
            (2, "b", "DELETE", 2),
            (2, "b", "INSERT", 0),
            (3, "c", "UPDATE_BEFORE", 3),
            (3, "c", "INSERT", 0),
            (3, "cc", "DELETE", 5),
            (3, "cc", "UPDATE_AFTER", 3),
            (4, "d", "DELETE", 4),
            (4, "d", "INSERT", 1),
            (5, "e", "INSERT", 4),
        ]
    )
    # net changes of the whole history: the current table, inserted
    assert ours(table_name, "options => map('net-changes', 'true')") == [
        (1, "aa", "INSERT", 4),
        (5, "e", "INSERT", 4),
    ]
    # Iceberg's own view fails on this table; ours is a catalog-name change away
    with pytest.raises(Exception, match="Delete files are currently not supported"):
        view(spark, "lake.system", table_name)


def test_key_only_equality_deletes_find_rows_live_before(spark, table_name):
    """Flink-style commits (Java API): an equality delete holds only the key; the deleted rows
    are the ones live just before it, earlier deletes applied. A compaction between them is a
    REPLACE: no change, no ordinal."""
    create(spark, table_name)
    rows = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
    flink_commit(spark, table_name, ["id"], inserts=rows)
    flink_commit(spark, table_name, ["id"], [{"id": 1, "v": "a2"}], [{"id": 1}])
    flink_commit(spark, table_name, ["id"], deletes=[{"id": 2}, {"id": 9}])  # 9: no such row
    flink_commit(spark, table_name, ["id"], [{"id": 1, "v": "a3"}], [{"id": 1}])
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{table_name.removeprefix('lake.')}', "
        "options => map('min-input-files', '1', 'delete-file-threshold', '1'))"
    )
    flink_commit(spark, table_name, ["id"], deletes=[{"id": 3}])  # reaches the compacted file
    operations = spark.sql(
        f"SELECT operation FROM {table_name}.snapshots ORDER BY committed_at"
    ).collect()
    assert [r.operation for r in operations][-2:] == ["replace", "delete"]
    assert ours(table_name) == [
        (1, "a", "DELETE", 1),
        (1, "a", "INSERT", 0),
        (1, "a2", "DELETE", 3),  # not (1, 'a') again: deleted earlier
        (1, "a2", "INSERT", 1),
        (1, "a3", "INSERT", 3),
        (2, "b", "DELETE", 2),
        (2, "b", "INSERT", 0),
        (3, "c", "DELETE", 4),
        (3, "c", "INSERT", 0),
    ]
    replace = snapshots(spark, table_name)[-2]
    assert ours(table_name, f"start => '{replace}'") == [(3, "c", "DELETE", 0)]
    assert ours(table_name, f"end => '{replace}'", ("_commit_snapshot_id",)).count((replace,)) == 0


def test_a_row_inserted_and_deleted_in_one_snapshot(spark, table_name):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    transient_commit(spark, table_name, [{"id": 7, "v": "t"}, {"id": 8, "v": "k"}], [0])
    assert spark.table(table_name).count() == 2
    assert ours(table_name) == [
        (1, "a", "INSERT", 0),
        (7, "t", "DELETE", 1),  # both images: not a carry-over
        (7, "t", "INSERT", 1),
        (8, "k", "INSERT", 1),
    ]
    assert ours(table_name, "options => map('net-changes', 'true')") == [
        (1, "a", "INSERT", 0),
        (8, "k", "INSERT", 1),
    ]


CDC_COLUMNS = ("id", "name", "_cdc_op", "_change_type", "_change_ordinal")


def test_an_ingest_cdc_table(spark, tmp_path, table_name):
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a"), ("c", 2, 11, "b")))
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", events(("u", 1, 20, "a2"), ("d", 2, 21, None), ("c", 3, 22, "c")))
    ingest(table_name, landing, checkpoint)
    found = sparkext.sql(f"SELECT * FROM sparkext.changelog('{table_name}')")
    rows = [tuple(r) for r in found.select(*CDC_COLUMNS).collect()]
    assert rows == [  # ordered: ordinal, deletes before inserts, then source position
        (1, "a", "c", "INSERT", 0),
        (2, "b", "c", "INSERT", 0),
        (1, "a", "c", "DELETE", 1),
        (2, "b", "c", "DELETE", 1),
        (1, "a2", "u", "INSERT", 1),
        (3, "c", "c", "INSERT", 1),
    ]
    updates = sparkext.sql(
        f"SELECT id, name, _change_type FROM sparkext.changelog(table => '{table_name}', "
        "options => map('compute-updates', 'true')) WHERE _change_ordinal = 1"
    )  # ingest_cdc made id the table's identifier field
    assert sorted(tuple(r) for r in updates.collect()) == [
        (1, "a", "UPDATE_BEFORE"),
        (1, "a2", "UPDATE_AFTER"),
        (2, "b", "DELETE"),
        (3, "c", "INSERT"),
    ]
    # rewrite_equality_deletes is a REPLACE: no change; the next batch's deletes find their
    # rows through the position deletes it wrote
    sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{table_name}')").collect()
    land(landing, "3.json", events(("u", 3, 30, "c2")))
    ingest(table_name, landing, checkpoint)
    converted, last = snapshots(spark, table_name)[-2:]
    operation = f"SELECT operation FROM {table_name}.snapshots WHERE snapshot_id = {converted}"
    assert spark.sql(operation).first()[0] == "replace"
    second = snapshots(spark, table_name)[-3]
    later = sparkext.sql(f"SELECT * FROM sparkext.changelog('{table_name}', '{second}')")
    assert [tuple(r) for r in later.select(*CDC_COLUMNS, "_commit_snapshot_id").collect()] == [
        (3, "c", "c", "DELETE", 0, last),
        (3, "c2", "u", "INSERT", 0, last),
    ]


def test_ingest_cdc_delete_files_are_not_before_images(spark, tmp_path, table_name):
    """Why there is no "read the equality deletes only" fast path for ingest_cdc tables: its
    delete files hold one row per key the batch touched (new keys too) with the event's
    before-image and the new event's _cdc_* columns — not the rows live before the batch."""
    landing, checkpoint = tmp_path / "in", tmp_path / "ck"
    land(landing, "1.json", events(("c", 1, 10, "a")))
    ingest(table_name, landing, checkpoint)
    land(landing, "2.json", events(("u", 1, 20, "a2"), ("c", 3, 22, "c")))
    ingest(table_name, landing, checkpoint)
    before, batch = snapshots(spark, table_name)[-2:]
    paths = [
        r.path
        for r in spark.sql(
            f"SELECT data_file.file_path AS path FROM {table_name}.entries WHERE snapshot_id = "
            f"{batch} AND status = 1 AND data_file.content = 2"
        ).collect()
    ]
    columns = ("id", "name", "_cdc_op", "_cdc_position")
    images = sorted(tuple(r) for r in spark.read.parquet(*paths).select(*columns).collect())
    live = sorted(
        tuple(r)
        for r in spark.read.option("snapshot-id", before)
        .table(table_name)
        .select(*columns)
        .collect()
    )
    assert [r[:3] for r in images] == [(1, "old", "u"), (3, None, "c")]  # helper's before-image
    assert [r[:3] for r in live] == [(1, "a", "c")]
    assert set(images).isdisjoint(live)
    assert ours(table_name, f"start => '{before}'", ("id", "name", "_change_type")) == [
        (1, "a", "DELETE"),
        (1, "a2", "INSERT"),
        (3, "c", "INSERT"),
    ]


def test_ranges_by_tag_branch_time_and_options(spark, table_name):
    create(spark, table_name)
    for row in ("(1, 'a')", "(2, 'b')", "(3, 'c')"):
        spark.sql(f"INSERT INTO {table_name} VALUES {row}")
    s1, s2, s3 = snapshots(spark, table_name)
    spark.sql(f"ALTER TABLE {table_name} CREATE TAG v1 AS OF VERSION {s1}")
    spark.sql(f"ALTER TABLE {table_name} CREATE BRANCH b AS OF VERSION {s2}")
    spark.sql(f"INSERT INTO {table_name}.branch_b VALUES (9, 'z')")
    assert [r[0] for r in ours(table_name, "start => 'v1'")] == [2, 3]
    assert [r[0] for r in ours(table_name, f"start => '{s1}', end => 'b'")] == [2, 9]
    committed = spark.sql(
        f"SELECT unix_millis(committed_at) AS ms, CAST(committed_at AS STRING) AS text "
        f"FROM {table_name}.snapshots WHERE snapshot_id = {s2}"
    ).first()
    assert [r[0] for r in ours(table_name, f"start => '{committed.text}'")] == [3]
    by_options = (
        f"options => map('start-timestamp', '{committed.ms - 1}', 'end-snapshot-id', '{s2}')"
    )
    assert ours(table_name, by_options) == [(2, "b", "INSERT", 0)]
    assert ours(table_name, f"start => '{s3}'") == []


@pytest.fixture(scope="module")
def small(spark):
    name = f"lake.test.changelog_errors_{uuid.uuid4().hex[:6]}"
    create(spark, name)
    for row in ("(1, 'a')", "(2, 'b')", "(3, 'c')"):
        spark.sql(f"INSERT INTO {name} VALUES {row}")
    spark.sql(f"ALTER TABLE {name} CREATE BRANCH side AS OF VERSION {snapshots(spark, name)[0]}")
    spark.sql(f"INSERT INTO {name}.branch_side VALUES (8, 'x')")
    yield name
    spark.sql(f"DROP TABLE {name} PURGE")


def test_unknown_snapshot(small):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(f"SELECT * FROM sparkext.changelog('{small}', '123')")
    assert str(caught.value) == (
        f"Snapshot 123 (start => '123') is not a snapshot of {small}; list them with SELECT "
        f"snapshot_id, committed_at FROM {small}.snapshots."
    )


def test_start_not_an_ancestor_of_end(spark, small):
    side = spark.sql(f"SELECT snapshot_id FROM {small}.refs WHERE name = 'side'").first()[0]
    end = snapshots(spark, small)[-1]
    with pytest.raises(ProcedureArgumentError) as caught:
        options = f"map('start-snapshot-id', '{side}')"
        sparkext.sql(f"CALL sparkext.create_changelog_view('{small}', 'x', {options})")
    assert str(caught.value) == (
        f"Snapshot {side} (option 'start-snapshot-id' = '{side}') is not an ancestor of the "
        f"end snapshot {end} of {small}; choose a start on the end's history (SELECT * FROM "
        f"{small}.history)."
    )


def test_compute_updates_without_identifier_columns(small):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.create_changelog_view(table => '{small}', compute_updates => true)"
        )
    assert str(caught.value) == (
        f"Cannot compute updates of {small}: it has no identifier fields; give "
        "identifier_columns => array('id', ...) or set compute_updates => false."
    )


def test_net_changes_with_compute_updates(small):
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(
            f"CALL sparkext.create_changelog_view(table => '{small}', net_changes => true, "
            "identifier_columns => array('id'))"
        )
    assert str(caught.value) == (
        "net_changes and compute_updates cannot be combined (Iceberg refuses it too); set "
        "compute_updates => false, or net_changes => false."
    )


def test_a_non_iceberg_table(spark):
    spark.range(3).createOrReplaceTempView("plain_changes_source")
    with pytest.raises(NotAnIcebergTableError) as caught:
        sparkext.sql("SELECT * FROM sparkext.changelog('plain_changes_source')")
    assert str(caught.value) == (
        "Table 'plain_changes_source' is not an Iceberg table; sparkext works on tables of an "
        "Iceberg catalog such as 'lake'."
    )


def test_an_expired_snapshot(spark, table_name):
    create(spark, table_name)
    for row in ("(1, 'a')", "(2, 'b')", "(3, 'c')"):
        spark.sql(f"INSERT INTO {table_name} VALUES {row}")
    _, s2, _ = snapshots(spark, table_name)
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table_name.removeprefix('lake.')}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    with pytest.raises(ProcedureArgumentError) as caught:
        sparkext.sql(f"SELECT * FROM sparkext.changelog('{table_name}', '{s2}')")
    assert str(caught.value) == (
        f"Snapshot {s2} of {table_name} (start => '{s2}') has expired; choose a changelog start "
        f"among the retained snapshots (SELECT snapshot_id, committed_at FROM "
        f"{table_name}.snapshots)."
    )
    with pytest.raises(ProcedureArgumentError, match=r"before snapshot \d+ has expired"):
        sparkext.sql(f"SELECT * FROM sparkext.changelog('{table_name}')")


def test_a_bad_option_value(small):
    with pytest.raises(ProcedureArgumentError, match="start-snapshot-id"):
        sparkext.sql(
            f"SELECT * FROM sparkext.changelog(table => '{small}', "
            "options => map('start-snapshot-id', 'first'))"
        )


def test_the_default_view_name_and_an_empty_range_are_icebergs(spark, small):
    returned = sparkext.sql(f"CALL sparkext.create_changelog_view(table => '{small}')").collect()
    view_name = small.rsplit(".", 1)[1] + "_changes"
    assert [tuple(r) for r in returned] == [(f"`{view_name}`",)]  # as Iceberg: in backticks
    assert spark.table(view_name).count() == 3
    end = snapshots(spark, small)[-1]
    empty = sparkext.sql(f"SELECT * FROM sparkext.changelog('{small}', '{end}')")
    assert empty.columns == ["id", "v", *(n for n, _ in CHANGE_COLUMNS)]
    assert empty.collect() == []


def test_two_deletes_of_one_identifier_cannot_pair(spark, table_name):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c'), (3, 'c2')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 3")
    deleted = snapshots(spark, table_name)[-1]
    found = sparkext.sql(
        f"SELECT * FROM sparkext.changelog(table => '{table_name}', "
        "options => map('identifier-columns', 'id'))"
    )
    with pytest.raises(Exception) as caught:  # raised by the task that finds it
        found.collect()
    assert (
        f"Cannot compute updates of {table_name}: snapshot {deleted} deletes several rows with "
        "the same identifier (id); give identifier_columns that are unique, or "
        "compute_updates => false."
    ) in str(caught.value)
    assert len(ours(table_name)) == 4  # without update images: two inserts, two deletes
