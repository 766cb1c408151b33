"""rewrite_equality_deletes: stock Iceberg-Spark's reading BEFORE the conversion is the oracle.

Tables get equality deletes the way Flink writes them (tests/helpers/iceberg.py, Java API), from
our CDC writer, and position deletes / DVs from Spark's own DELETE. After the conversion every
snapshot still retained must read the same (time travel), no equality-delete file may be live,
and independent readers (pyiceberg, DuckDB) must read the same rows as Spark.
"""

from __future__ import annotations

import random

import pytest

import sparkext
from sparkext.errors import CommitConflictError, OptionError, ProcedureArgumentError
from sparkext.iceberg.catalog import refreshed_snapshot_id
from tests.helpers.changelog_area_union import snapshot_rows
from tests.helpers.iceberg import flink_commit
from tests.helpers.readers import duckdb_query, pyiceberg_table

COLUMNS = ("k1", "k2", "v", "p")


def create(spark, name: str, version: int, partitioned: bool) -> None:
    spark.sql(
        f"CREATE TABLE {name} (k1 string, k2 int, v int, p string) USING iceberg "
        + ("PARTITIONED BY (p) " if partitioned else "")
        + f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )


def rows(spark, name: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return sorted(
        (tuple(r) for r in reader.load(name).select(*COLUMNS).collect()),
        key=repr,
    )


def snapshots(spark, name: str) -> list[int]:
    return [r.snapshot_id for r in spark.table(f"{name}.snapshots").collect()]


def live_files(spark, name: str, content: int) -> int:
    return spark.table(f"{name}.files").where(f"content = {content}").count()


def call(name: str, extra: str = ""):
    return sparkext.sql(f"CALL sparkext.rewrite_equality_deletes(table => '{name}'{extra})").first()


def loaded(spark, name: str, seed: int, version: int = 2, partitioned: bool = False):
    """A table with a bulk load and one Flink-style upsert commit (equality deletes)."""
    create(spark, name, version, partitioned)
    work = Workload(spark, name, seed=seed)
    work.load()
    work.commit(1)
    return work


class Workload:
    """A seeded Flink-style upsert stream with a Python model of the table.

    Equality deletes are on ``equality`` (default k1, k2); a delete removes every older row whose
    equality columns match it null-safely, in its partition (or anywhere if unpartitioned).
    """

    def __init__(self, spark, name: str, seed: int, keys: int = 60, equality=("k1", "k2")):
        self.spark, self.name, self.random = spark, name, random.Random(seed)
        self.equality = list(equality)
        self.partitioned = bool(
            spark.sql(f"SELECT * FROM {name}.partitions").columns.count("partition")
        )
        self.keys = [self._key(i) for i in range(keys)]
        self.model: dict[tuple, tuple] = {}

    def _key(self, i: int) -> tuple:
        k1 = None if i % 13 == 0 else f"k{i}"  # null keys, null-safe equality
        k2 = None if i % 7 == 0 else i % 5
        return (k1, k2, "abc"[i % 3])  # the partition value is part of the key's identity

    def _row(self, key: tuple, v: int) -> dict:
        return {"k1": key[0], "k2": key[1], "v": v, "p": key[2]}

    def load(self) -> None:
        """A base written by Spark (data files only)."""
        values = []
        for i, key in enumerate(self.keys):
            if i % 4 != 3:
                self.model[key] = (key[0], key[1], i, key[2])
                values.append(self.model[key])
        self.spark.createDataFrame(values, "k1 string, k2 int, v int, p string").writeTo(
            self.name
        ).append()

    def commit(self, step: int) -> None:
        inserts, deletes = [], []
        for key in self.random.sample(self.keys, 12):
            action = self.random.random()
            deletes.append(self._row(key, 0))  # delete the key (Flink deletes before upserting)
            if action < 0.7:  # update / re-insert in the same commit: must stay visible
                v = step * 1000 + self.random.randrange(1000)
                inserts.append(self._row(key, v))
        deletes.append(self._row(("nobody", 99, "a"), 0))  # a delete that matches no row
        for d in deletes:
            for identity, row in list(self.model.items()):
                current = dict(zip(COLUMNS, row, strict=True))
                same = all(current[c] == d[c] for c in self.equality)  # None == None: null-safe
                if same and (not self.partitioned or current["p"] == d["p"]):
                    del self.model[identity]
        for row in inserts:
            self.model[(row["k1"], row["k2"], row["p"])] = tuple(row[c] for c in COLUMNS)
        flink_commit(self.spark, self.name, self.equality, inserts, deletes)

    def expected(self) -> list[tuple]:
        return sorted(self.model.values(), key=repr)


@pytest.mark.parametrize(
    "version,partitioned,equality,position_deletes",
    [
        (2, False, ("k1", "k2"), True),
        (2, True, ("k1", "k2"), True),
        (3, False, ("k1", "k2"), True),
        (3, True, ("k1", "k2"), True),
        # one key column and nothing to merge: matched and written in one job, no shuffle
        (2, True, ("k1",), False),
        (3, False, ("k1",), False),
    ],
)
@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(4, id="4-commits"),  # the default tier: every commit adds equality deletes
        pytest.param(6, id="6-commits", marks=pytest.mark.stress),
    ],
)
def test_randomized_tables_read_the_same_before_and_after(
    spark, table_name, version, partitioned, equality, position_deletes, steps
):
    create(spark, table_name, version, partitioned)
    work = Workload(spark, table_name, seed=version * 10 + partitioned, equality=equality)
    work.load()
    modelled = {}  # the snapshot of each step -> the model's rows after it
    for step in range(1, steps + 1):
        work.commit(step)
        if (
            step == 3 and position_deletes
        ):  # position deletes (v2) / DVs (v3) from Spark's own DELETE
            spark.sql(f"DELETE FROM {table_name} WHERE v % 5 = 0")
            work.model = {k: r for k, r in work.model.items() if r[2] % 5 != 0}
        modelled[refreshed_snapshot_id(spark, table_name)] = work.expected()
    # every snapshot read by stock time travel, in one Spark job
    before = snapshot_rows(spark, table_name, snapshots(spark, table_name), COLUMNS, key=repr)
    for step, (snapshot_id, expected) in enumerate(modelled.items(), start=1):
        assert before[snapshot_id] == expected, f"the workload itself, step {step}"
    assert live_files(spark, table_name, 2) >= steps  # at least one per commit

    result = call(table_name)

    assert result.equality_delete_files_removed >= steps
    assert result.commits == 1 and result.equality_delete_files_remaining == 0
    assert result.positions_deleted > 0 and result.bytes_added > 0
    if version == 3:
        assert result.deletion_vectors_added > 0 and result.position_delete_files_added == 0
    else:
        assert result.position_delete_files_added > 0 and result.deletion_vectors_added == 0
    assert live_files(spark, table_name, 2) == 0
    after = snapshot_rows(spark, table_name, [None, *before], COLUMNS, key=repr)
    assert after[None] == work.expected()
    for snapshot_id, expected in before.items():  # time travel is untouched
        assert after[snapshot_id] == expected, snapshot_id
    operation = spark.sql(
        f"SELECT operation FROM {table_name}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    assert operation == "replace"
    if version == 3:  # at most one DV per data file
        refs = spark.sql(
            f"SELECT referenced_data_file, count(*) n FROM {table_name}.files "
            "WHERE content = 1 GROUP BY 1 HAVING n > 1"
        ).collect()
        assert refs == []
    # independent readers
    arrow = pyiceberg_table(spark, table_name).scan().to_arrow()
    assert sorted((tuple(r[c] for c in COLUMNS) for r in arrow.to_pylist()), key=repr) == (
        work.expected()
    )
    duck = duckdb_query(spark, table_name, "SELECT k1, k2, v, p FROM {table}")
    assert sorted(duck, key=repr) == work.expected()
    # a second call finds nothing to convert and commits nothing
    again = call(table_name)
    assert again.commits == 0 and again.equality_delete_files_removed == 0


def test_pyiceberg_refuses_before_and_reads_after(spark, table_name):
    work = loaded(spark, table_name, seed=5)
    with pytest.raises(Exception, match=r"(?i)equality"):
        pyiceberg_table(spark, table_name).scan().to_arrow()
    call(table_name)
    assert pyiceberg_table(spark, table_name).scan().to_arrow().num_rows == len(work.model)


def test_dry_run_plans_and_commits_nothing(spark, table_name):
    work = loaded(spark, table_name, seed=8, partitioned=True)
    work.commit(2)
    count = len(snapshots(spark, table_name))
    plan = call(table_name, ", dry_run => true")
    assert plan.dry_run and plan.commits == 0 and plan.snapshot_id is None
    assert plan.equality_delete_files_removed == live_files(spark, table_name, 2) == 6
    assert plan.positions_deleted is None
    assert len(snapshots(spark, table_name)) == count


def test_where_converts_only_partitions_inside_it(spark, table_name):
    work = loaded(spark, table_name, seed=9, partitioned=True)
    result = call(table_name, ", where => \"p = 'a'\"")
    assert result.equality_delete_files_removed == 1
    left = spark.sql(
        f"SELECT DISTINCT partition.p FROM {table_name}.files WHERE content = 2"
    ).collect()
    assert sorted(r.p for r in left) == ["b", "c"]
    assert rows(spark, table_name) == work.expected()


def test_options_threshold_cap_and_partial_progress(spark, table_name):
    work = loaded(spark, table_name, seed=10, partitioned=True)
    work.commit(2)  # two equality-delete files per partition a, b, c
    none = call(table_name, ", options => map('min-equality-delete-files', '3')")
    assert none.equality_delete_files_removed == 0 and none.commits == 0
    capped = call(table_name, ", options => map('max-files-per-commit', '2')")
    assert capped.equality_delete_files_removed == 2 and capped.commits == 1
    assert capped.equality_delete_files_remaining == 4
    rest = call(
        table_name,
        ", options => map('max-files-per-commit', '2', 'partial-progress.enabled', 'true')",
    )
    assert rest.equality_delete_files_removed == 4 and rest.commits == 2
    assert rest.equality_delete_files_remaining == 0
    assert live_files(spark, table_name, 2) == 0
    assert rows(spark, table_name) == work.expected()


def test_small_position_delete_files_merge_and_dangling_ones_go(spark, table_name):
    create(spark, table_name, 2, False)
    # one position-delete file per DELETE (Spark's default "file" granularity maintains them)
    spark.sql(
        f"ALTER TABLE {table_name} SET TBLPROPERTIES ('write.delete.granularity'='partition')"
    )
    spark.range(0, 400).selectExpr(
        "CAST(id AS string) k1", "CAST(id % 5 AS int) k2", "CAST(id AS int) v", "'a' p"
    ).repartitionByRange(2, "v").writeTo(table_name).append()
    for v in (1, 2, 3, 300):
        spark.sql(f"DELETE FROM {table_name} WHERE v = {v}")
    assert live_files(spark, table_name, 1) == 4
    # the data file holding v >= 200 goes away (metadata-only): its delete becomes dangling
    low = spark.sql(
        f"SELECT min(v) FROM {table_name} WHERE _file IN "
        f"(SELECT _file FROM {table_name} WHERE v = 301)"
    ).first()[0]
    spark.sql(f"DELETE FROM {table_name} WHERE v >= {low}")
    expected = rows(spark, table_name)
    assert len(expected) == low - 3 and live_files(spark, table_name, 0) == 1
    result = call(table_name)
    assert result.position_delete_files_merged == 4
    assert result.dangling_positions_removed == 1
    assert result.position_delete_files_added == 1 and result.positions_deleted == 3
    assert live_files(spark, table_name, 1) == 1
    assert rows(spark, table_name) == expected


def test_cdc_commit_between_plan_and_commit_is_rebased(spark, table_name, monkeypatch):
    """A writer commits new data and equality deletes mid-conversion: both survive."""
    from sparkext.iceberg.delete_files import DeleteTable

    work = loaded(spark, table_name, seed=11)
    original = DeleteTable.commit

    def interfering(self, *args, **kwargs):
        work.commit(2)  # lands after the plan, before our commit
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeleteTable, "commit", interfering)
    result = call(table_name)
    assert result.commits == 1 and result.equality_delete_files_removed == 1
    assert live_files(spark, table_name, 2) == 1  # the concurrent writer's file is untouched
    assert rows(spark, table_name) == work.expected()


def test_conflicting_commit_is_reported_and_nothing_resurrects(spark, table_name, monkeypatch):
    """Another conversion removes the same files first: ours fails with one sentence."""
    from sparkext.iceberg.delete_files import DeleteTable

    work = loaded(spark, table_name, seed=12)
    original = DeleteTable.commit
    calls = []

    def racing(self, *args, **kwargs):
        if not calls:
            calls.append(1)
            call(table_name)  # the other conversion wins the race
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeleteTable, "commit", racing)
    with pytest.raises(CommitConflictError) as caught:
        call(table_name)
    message = str(caught.value)
    assert "\n" not in message and message.endswith("run the procedure again.")
    assert rows(spark, table_name) == work.expected()
    assert live_files(spark, table_name, 2) == 0


def test_a_cdc_table_new_user_flow(spark, tmp_path, table_name):
    """table_health shows equality deletes; the CALL converts them; none left; readers agree."""
    from tests.helpers.cdc_source import COLUMNS as CDC_COLUMNS
    from tests.helpers.cdc_source import Delivery, SourceTable

    source = SourceTable(seed=17, key_space=40)
    delivery = Delivery(tmp_path / "landing", seed=17, duplicate_rate=0.05, late_rate=0.1)
    for batch in range(3):
        delivery.deliver(source.run(60), final=batch == 2)
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{tmp_path}/landing', "
            f"checkpoint => '{tmp_path}/ck', primary_key => 'id', create => true)"
        )
    health = sparkext.sql(f"CALL sparkext.table_health('{table_name}')").first()
    assert health.equality_delete_files >= 2
    select = f"SELECT {', '.join(CDC_COLUMNS)} FROM {table_name}"
    before = sorted(tuple(r) for r in spark.sql(select).collect())
    call(table_name)
    health = sparkext.sql(f"CALL sparkext.table_health('{table_name}')").first()
    assert health.equality_delete_files == 0
    after = sorted(tuple(r) for r in spark.sql(select).collect())
    assert after == before
    assert {r[0]: dict(zip(CDC_COLUMNS, r, strict=True)) for r in after} == source.rows
    arrow = pyiceberg_table(spark, table_name).scan().to_arrow().select(list(CDC_COLUMNS))
    assert sorted(tuple(r.values()) for r in arrow.to_pylist()) == after


def test_bad_input_is_one_sentence_and_touches_nothing(spark, table_name):
    loaded(spark, table_name, seed=13, partitioned=True)
    count = len(snapshots(spark, table_name))
    with pytest.raises(ProcedureArgumentError, match="only partition source columns"):
        call(table_name, ", where => 'v > 3'")
    with pytest.raises(ProcedureArgumentError, match="Cannot use where"):
        call(table_name, ", where => 'nope = 1'")
    with pytest.raises(OptionError, match="min-equality-delete-files"):
        call(table_name, ", options => map('min-equality-deletes', '2')")
    with pytest.raises(OptionError):
        call(table_name, ", options => map('max-files-per-commit', '0')")
    assert len(snapshots(spark, table_name)) == count
    assert live_files(spark, table_name, 2) == 3


def test_format_v1_and_empty_tables_have_nothing_to_do(spark, table_name):
    spark.sql(
        f"CREATE TABLE {table_name} (id int) USING iceberg TBLPROPERTIES ('format-version'='1')"
    )
    assert call(table_name).commits == 0
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    result = call(table_name)
    assert result.commits == 0 and result.equality_delete_files_removed == 0


def test_spec_evolution_table_wide_deletes_before_partitioning(spark, table_name):
    """Table-wide deletes of the old spec and partition-scoped ones of the new spec convert.

    Iceberg applies a partition-scoped equality delete only to data files of the same spec, so
    commit 2's deletes leave old-spec rows visible: stock Iceberg-Spark's reading before the
    conversion is the oracle here, not the upsert model.
    """
    create(spark, table_name, 2, False)
    work = Workload(spark, table_name, seed=14)
    work.load()
    work.commit(1)  # table-wide equality deletes (unpartitioned spec)
    spark.sql(f"ALTER TABLE {table_name} ADD PARTITION FIELD p")
    work.commit(2)  # partition-scoped equality deletes, data files of the new spec
    expected = rows(spark, table_name)
    assert expected != work.expected()  # the spec rule above is exercised
    eq_files = live_files(spark, table_name, 2)
    result = call(table_name)
    assert result.equality_delete_files_removed == eq_files
    assert live_files(spark, table_name, 2) == 0
    assert rows(spark, table_name) == expected


def test_our_dv_reader_agrees_with_iceberg_on_a_spark_written_dv(spark, table_name):
    """Cross-check of the Puffin/DV layout: a DV written by Iceberg's Java writer."""
    from sparkext.executors.deletes.dv import deserialize_positions

    create(spark, table_name, 3, False)
    spark.range(0, 5000).selectExpr(
        "CAST(id AS string) k1", "1 k2", "CAST(id AS int) v", "'a' p"
    ).coalesce(1).writeTo(table_name).append()
    spark.sql(f"DELETE FROM {table_name} WHERE v % 3 = 0 OR v BETWEEN 4000 AND 4100")
    dv = spark.sql(
        f"SELECT file_path, content_offset, content_size_in_bytes FROM {table_name}.files "
        "WHERE content = 1"
    ).first()
    with open(dv.file_path.removeprefix("file:"), "rb") as handle:
        handle.seek(dv.content_offset)
        blob = handle.read(dv.content_size_in_bytes)
    ours = sorted(deserialize_positions(blob).tolist())
    theirs = sorted(r.pos for r in spark.table(f"{table_name}.position_deletes").collect())
    assert ours == theirs and len(ours) > 1600


def test_compaction_with_an_old_sequence_number_mid_conversion_is_a_conflict(
    spark, table_name, monkeypatch
):
    """A compaction that keeps an old data sequence number lands mid-conversion: an equality
    delete we are removing would still apply to its new file, so we must not commit."""
    from sparkext.iceberg.delete_files import DeleteTable
    from tests.helpers.iceberg import old_sequence_compaction

    work = loaded(spark, table_name, seed=15)
    original = DeleteTable.commit

    def compacting(self, *args, **kwargs):
        old_sequence_compaction(spark, table_name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeleteTable, "commit", compacting)
    before = live_files(spark, table_name, 2)
    with pytest.raises(CommitConflictError, match="rewrote data files"):
        call(table_name)
    assert live_files(spark, table_name, 2) == before
    assert rows(spark, table_name) == work.expected()


def test_non_parquet_data_files_use_icebergs_reader(spark, table_name):
    create(spark, table_name, 2, False)
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('write.format.default'='avro')")
    work = Workload(spark, table_name, seed=16)
    work.load()  # Avro data files written by Spark
    work.commit(1)  # Parquet equality deletes (and Parquet data) through the Java API
    expected = rows(spark, table_name)
    assert expected == work.expected()
    result = call(table_name)
    assert result.equality_delete_files_removed == 1 and result.positions_deleted > 0
    assert live_files(spark, table_name, 2) == 0
    assert rows(spark, table_name) == expected


def test_data_files_without_field_ids_fall_back_to_icebergs_reader(spark, table_name, tmp_path):
    """Files imported with add_files carry no Parquet field ids (a name mapping reads them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    create(spark, table_name, 2, False)
    source = tmp_path / "imported"
    source.mkdir()
    pq.write_table(
        pa.table(
            {
                "k1": [f"k{i}" for i in range(50)],
                "k2": pa.array([i % 5 for i in range(50)], pa.int32()),
                "v": pa.array(list(range(50)), pa.int32()),
                "p": ["a"] * 50,
            }
        ),
        source / "part-0.parquet",
    )
    spark.sql(
        f"CALL lake.system.add_files(table => '{table_name[5:]}', "
        f"source_table => '`parquet`.`{source}`')"
    )
    flink_commit(
        spark,
        table_name,
        ["k1", "k2"],
        deletes=[{"k1": "k3", "k2": 3, "v": 0, "p": "a"}, {"k1": "k7", "k2": 2, "v": 0, "p": "a"}],
    )
    expected = rows(spark, table_name)
    assert len(expected) == 48
    result = call(table_name)
    assert result.equality_delete_files_removed == 1 and result.positions_deleted == 2
    assert rows(spark, table_name) == expected
