"""table_health against independent readers: pyiceberg's manifests and DuckDB's row counts."""

from __future__ import annotations

import json

import pytest

import sparkext
from sparkext.planning.health import PartitionLoad, partition_score, table_score
from tests.helpers.iceberg import add_equality_deletes
from tests.helpers.readers import duckdb_query, pyiceberg_file_stats

COUNTED = (
    "data_files",
    "data_bytes",
    "small_files",
    "position_delete_files",
    "position_delete_records",
    "equality_delete_files",
    "equality_delete_records",
    "deletion_vectors",
    "deletion_vector_records",
    "data_records",
)


def health(name: str, options: str = "") -> dict:
    extra = f", options => map({options})" if options else ""
    rows = sparkext.sql(f"CALL sparkext.table_health(table => '{name}'{extra})").collect()
    return {r.partition: r.asDict() for r in rows}


def check_against_pyiceberg(spark, name: str, threshold: int) -> dict:
    ours = health(name)
    oracle = pyiceberg_file_stats(spark, name, threshold)
    assert set(ours) == set(oracle)
    for partition, row in ours.items():
        for column in COUNTED:
            assert row[column] == oracle[partition].get(column, 0), (partition, column)
    return ours


def make_table(spark, name: str, version: int, partitioned: bool = True, **props) -> None:
    properties = {
        "format-version": str(version),
        "write.delete.mode": "merge-on-read",
        "write.update.mode": "merge-on-read",
        **props,
    }
    tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    partition = "PARTITIONED BY (d)" if partitioned else ""
    spark.sql(
        f"CREATE TABLE {name} (id BIGINT, d STRING, v STRING) USING iceberg {partition} "
        f"TBLPROPERTIES ({tblprops})"
    )


@pytest.mark.parametrize("version", [2, 3])
def test_counts_match_pyiceberg_and_live_rows_match_duckdb(spark, table_name, version):
    make_table(spark, table_name, version, **{"write.target-file-size-bytes": "100000"})
    for batch in range(3):
        values = ", ".join(f"({batch * 10 + i}, '{'ab'[i % 2]}', 'x')" for i in range(6))
        spark.sql(f"INSERT INTO {table_name} VALUES {values}")
    spark.sql(f"DELETE FROM {table_name} WHERE id IN (0, 2, 13)")
    spark.sql(f"UPDATE {table_name} SET v = 'y' WHERE id = 21")
    ours = check_against_pyiceberg(spark, table_name, threshold=75000)
    deletes = "deletion_vectors" if version == 3 else "position_delete_files"
    assert sum(r[deletes] for r in ours.values()) > 0  # the scenario really has deletes
    live = dict(duckdb_query(spark, table_name, "SELECT d, count(*) FROM {table} GROUP BY d"))
    assert {json.loads(p)["d"]: r["live_rows"] for p, r in ours.items()} == live


def test_equality_deletes_are_counted(spark, table_name):
    make_table(spark, table_name, 2, partitioned=False)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x1'), (2, 'a', 'x2'), (3, 'b', 'x3')")
    add_equality_deletes(spark, table_name, ["v"], [("x1",), ("x3",)])
    add_equality_deletes(spark, table_name, ["v"], [("x2",)])
    ours = check_against_pyiceberg(spark, table_name, threshold=1 << 30)
    (row,) = ours.values()
    assert (row["equality_delete_files"], row["equality_delete_records"]) == (2, 3)
    assert spark.table(table_name).count() == 0  # Spark applies them: the files are real
    assert row["live_rows"] == 3  # documented: equality deletes are not subtracted
    # two small data files (one removable by compaction: 40 * 1/2) and two equality-delete files
    assert row["data_files"] == row["small_files"] == 2
    assert row["health_score"] == 100 - 20 - 6


def test_small_file_threshold_follows_target_size_and_option(spark, table_name):
    make_table(spark, table_name, 2, **{"write.target-file-size-bytes": "1000000"})
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x')")
    spark.sql(f"INSERT INTO {table_name} VALUES (2, 'a', 'x')")
    assert health(table_name)['{"d":"a"}']["small_files"] == 2
    tiny = health(table_name, "'small-file-threshold-bytes', '10'")
    assert tiny['{"d":"a"}']["small_files"] == 0


def test_scores_and_last_commit_time(spark, table_name):
    make_table(spark, table_name, 2, **{"write.target-file-size-bytes": "100000"})
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'b', 'x')")
    for i in range(3, 8):
        spark.sql(f"INSERT INTO {table_name} VALUES ({i}, 'a', 'x')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 3")
    ours = health(table_name)
    snapshots = spark.sql(
        f"SELECT committed_at FROM {table_name}.snapshots ORDER BY committed_at"
    ).collect()
    a, b = ours['{"d":"a"}'], ours['{"d":"b"}']
    assert b["last_commit_time"] == snapshots[0].committed_at
    assert a["last_commit_time"] == snapshots[-1].committed_at
    oracle = pyiceberg_file_stats(spark, table_name, 75000)['{"d":"a"}']
    expected_a = partition_score(
        PartitionLoad(
            data_files=oracle["data_files"],
            data_bytes=oracle["data_bytes"],
            data_records=oracle["data_records"],
            small_files=oracle["small_files"],
            small_bytes=oracle["small_bytes"],
            position_delete_files=oracle.get("position_delete_files", 0),
            deleted_records=oracle.get("position_delete_records", 0),
            equality_delete_files=0,
        ),
        100000,
    )
    assert a["health_score"] == expected_a < b["health_score"] == 100
    expected_table = table_score(
        [(a["health_score"], a["data_bytes"]), (100, b["data_bytes"])], len(snapshots)
    )
    assert a["table_health_score"] == b["table_health_score"] == expected_table
    assert a["snapshot_count"] == len(snapshots) == 7


def test_empty_tables(spark, table_name):
    make_table(spark, table_name, 2, partitioned=False)
    (row,) = health(table_name).values()
    assert row["partition"] is None and row["data_files"] == 0 and row["health_score"] == 100
    partitioned = table_name + "_p"
    make_table(spark, partitioned, 2)
    assert health(partitioned) == {}


def test_table_health_reads_no_data_files(spark, table_name):
    """Metadata only: deleting every data file must not change the answer."""
    import os

    make_table(spark, table_name, 2)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'b', 'y')")
    before = health(table_name)
    paths = [r.file_path for r in spark.table(f"{table_name}.files").collect()]
    for path in paths:
        os.remove(path.removeprefix("file:"))
    assert health(table_name) == before


def test_a_table_whose_partitioning_changed(spark, table_name):
    """Files of the old spec keep their tuple (the new field NULL), new files carry it; counts
    agree with stock Iceberg's ``files`` table. (table_health once failed here: Iceberg's
    ``partitions`` table cannot read such a table.)"""
    make_table(spark, table_name, 2)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'a', 'x'), (3, 'b', 'x')")
    spark.sql(f"ALTER TABLE {table_name} ADD PARTITION FIELD bucket(2, id)")
    spark.sql(f"INSERT INTO {table_name} VALUES (4, 'a', 'y')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")  # a position delete, old spec
    stock = spark.sql(
        "SELECT to_json(partition) AS p, sum(if(content = 0, 1, 0)) AS data_files, "
        "sum(if(content = 0, record_count, 0)) AS data_records, "
        f"sum(if(content = 1, 1, 0)) AS position_delete_files FROM {table_name}.files GROUP BY 1"
    ).collect()
    ours = health(table_name)
    assert {p: (r["data_files"], r["data_records"], r["position_delete_files"])
            for p, r in ours.items()} == {r.p: tuple(r)[1:] for r in stock}  # fmt: skip
    assert len(ours) == 3 and sum(r["position_delete_files"] for r in ours.values()) == 1
    assert ours['{"d":"a"}']["live_rows"] == 1
