"""tiered_optimize: the oracle is the table itself before the run, read by stock Iceberg-Spark.

After every run the table reads exactly the rows it read before (and DuckDB reads them too),
every snapshot retained before the run reads as it did, deletes stay applied (position deletes,
v3 DVs, equality deletes — also those committed while the run was rewriting), each group is one
REPLACE snapshot whose summary carries its level, and a group that conflicts fails alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import sparkext
from sparkext.errors import OptionError, ProcedureArgumentError
from tests.helpers.changelog_area_union import snapshot_rows
from tests.helpers.iceberg import flink_commit
from tests.helpers.readers import duckdb_query

PREFIX = "user_0000000"  # 12 bytes every name shares: Iceberg's zorder sees one value
# the first 2 of the ingest_cdc history's 6 batches (an L2, then an automatic run: the last one
# of a prefix must convert the equality deletes, as the whole history's last one does)
BATCHES_DEFAULT = 2


def create(spark, name: str, version: int = 2, partitioned: bool = True, props: str = "") -> None:
    spark.sql(
        f"CREATE TABLE {name} (k int, name string, v int, p string) USING iceberg "
        + ("PARTITIONED BY (p) " if partitioned else "")
        + f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        f"'write.update.mode'='merge-on-read'{props})"
    )


def insert(spark, name: str, start: int, count: int, parts: str = "ab") -> None:
    values = ", ".join(
        f"({k}, '{PREFIX}{(k * 7919) % 10_000:05d}', {k % 97}, '{parts[k % len(parts)]}')"
        for k in range(start, start + count)
    )
    spark.sql(f"INSERT INTO {name} VALUES {values}")


def rows(spark, name: str, snapshot_id: int | None = None) -> list[tuple]:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    return sorted(tuple(r) for r in reader.load(name).collect())


def snapshot_ids(spark, name: str) -> list[int]:
    return [
        r.snapshot_id
        for r in spark.sql(
            f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at"
        ).collect()
    ]


def before_run(spark, name: str) -> tuple[dict[int, list[tuple]], list[tuple]]:
    """(every snapshot's rows, the current rows), read by stock Iceberg-Spark in one job."""
    read = snapshot_rows(spark, name, [*snapshot_ids(spark, name), None])
    return {s: r for s, r in read.items() if s is not None}, read[None]


def optimize(name: str, arguments: str = "") -> list[dict]:
    return [
        r.asDict()
        for r in sparkext.sql(
            f"CALL sparkext.tiered_optimize(table => '{name}'{arguments})"
        ).collect()
    ]


def health(name: str) -> dict:
    return {
        r.partition: r
        for r in sparkext.sql(f"CALL sparkext.table_health(table => '{name}')").collect()
    }


def live_files(spark, name: str) -> list:
    return spark.sql(f"SELECT * FROM {name}.files").collect()


def assert_same_everywhere(spark, name: str, before_history, before_rows) -> None:
    spark.catalog.refreshTable(name)
    read = snapshot_rows(spark, name, [None, *before_history])  # one job: every read at once
    assert read[None] == before_rows
    for snapshot_id, expected in before_history.items():
        assert read[snapshot_id] == expected, snapshot_id
    data = live_files(spark, name)
    live = {f.file_path for f in data if f.content == 0}
    for f in data:  # no DV or file-scoped delete names a data file that is gone
        if f.content == 1 and f.referenced_data_file is not None:
            assert f.referenced_data_file in live


def level_summaries(spark, name: str) -> list[tuple[str, str]]:
    return [
        (r.level, r.partition)
        for r in spark.sql(
            f"SELECT summary['sparkext.optimize.level'] AS level, "
            f"summary['sparkext.optimize.partition'] AS partition FROM {name}.snapshots "
            "WHERE operation = 'replace' ORDER BY committed_at"
        ).collect()
    ]


def test_levels_follow_their_triggers_and_rows_never_change(spark, table_name):
    """L0 after enough small commits, L1 once enough level-0 bytes accumulated, L2 after N L1
    runs; levels are read back from the REPLACE summaries on every call (no state elsewhere)."""
    create(
        spark,
        table_name,
        props=", 'sparkext.optimize.cluster-by'='name,k', 'sparkext.optimize.l0.min-files'='3', "
        "'sparkext.optimize.l1.min-bytes'='1GB', 'sparkext.optimize.l2.every-l1-runs'='2'",
    )
    for i in range(3):
        insert(spark, table_name, i * 40, 40, parts="a")
    insert(spark, table_name, 1000, 10, parts="b")  # one small file: no trigger in b
    assert health(table_name)['{"p":"a"}'].optimized_share == 0.0
    before = before_run(spark, table_name)
    out = optimize(table_name)
    assert [(r["partition"], r["level"], r["input_files"], r["error"]) for r in out] == [
        ('{"p":"a"}', 0, 3, None)
    ]
    assert out[0]["output_files"] == 1 and out[0]["snapshot_id"] is not None
    assert_same_everywhere(spark, table_name, *before)
    assert optimize(table_name) == []  # one file at level 0: nothing is due

    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('sparkext.optimize.l1.min-bytes'='1')")
    insert(spark, table_name, 2000, 30, parts="a")
    before = before_run(spark, table_name)
    out = optimize(table_name)
    assert sorted((r["partition"], r["level"], r["input_files"]) for r in out) == [
        ('{"p":"a"}', 1, 2),  # the L0 output and the new file: clustered together
        ('{"p":"b"}', 1, 1),
    ]
    assert_same_everywhere(spark, table_name, *before)

    insert(spark, table_name, 3000, 30, parts="a")
    out = optimize(table_name)
    assert [(r["partition"], r["level"]) for r in out] == [('{"p":"a"}', 1)]
    before = before_run(spark, table_name)
    out = optimize(table_name)  # a holds files of two L1 runs: L2 re-clusters all of them
    assert [(r["partition"], r["level"], r["input_files"]) for r in out] == [('{"p":"a"}', 2, 2)]
    assert "2 L1 runs" in out[0]["reason"]
    assert_same_everywhere(spark, table_name, *before)
    assert level_summaries(spark, table_name) == [
        ("0", '0:{"p":"a"}'),
        *sorted([("1", '0:{"p":"a"}'), ("1", '0:{"p":"b"}')], key=lambda x: x[1]),
        ("1", '0:{"p":"a"}'),
        ("2", '0:{"p":"a"}'),
    ]
    a = health(table_name)['{"p":"a"}']
    assert (a.level0_bytes, a.level1_bytes, a.optimized_share) == (0, 0, 1.0)
    assert a.level2_bytes > 0 and a.clustering_depth is None  # one file: nothing to measure
    assert duckdb_query(spark, table_name, "SELECT count(*), sum(k) FROM {table}") == [
        (len(before[1]), sum(r[0] for r in before[1]))
    ]


@pytest.mark.parametrize(
    ("version", "evolve"), [(2, False), (3, False), (2, True)], ids=["v2", "v3-dv", "spec-evolved"]
)
def test_deleted_rows_stay_deleted(spark, table_name, version, evolve):
    """Spark's MOR DELETE/UPDATE/MERGE (position deletes in v2, DVs in v3) and Flink-style
    equality deletes, partitioned, with a spec change half way: forced L0 and L2 keep every
    deleted row deleted, drop the DVs and file-scoped deletes of rewritten files, and keep
    every earlier snapshot readable as before."""
    create(spark, table_name, version=version)
    for i in range(4):
        insert(spark, table_name, i * 50, 50)
    spark.sql(f"DELETE FROM {table_name} WHERE k % 7 = 0")
    spark.sql(f"UPDATE {table_name} SET v = -1 WHERE k % 11 = 0")
    if evolve:
        spark.sql(f"ALTER TABLE {table_name} ADD PARTITION FIELD bucket(2, k)")
    insert(spark, table_name, 500, 50)
    spark.sql(
        f"MERGE INTO {table_name} t USING (SELECT id AS k FROM range(0, 600, 13)) s "
        "ON t.k = s.k WHEN MATCHED THEN DELETE"
    )
    if version == 2:
        flink_commit(
            spark,
            table_name,
            ["k"],
            deletes=[{"k": k, "name": None, "v": None, "p": "ab"[k % 2]} for k in (3, 5, 501)],
        )
    before = before_run(spark, table_name)
    out = optimize(table_name, ", levels => 'l0'")
    assert out and all(r["error"] is None for r in out)
    assert_same_everywhere(spark, table_name, *before)
    assert not [f for f in live_files(spark, table_name) if f.content == 2]  # converted
    out = optimize(table_name, ", levels => 'l2', cluster_by => 'name,k', curve => 'zorder'")
    assert out and all(r["level"] == 2 and r["error"] is None for r in out)
    assert_same_everywhere(spark, table_name, *before)
    if version == 2:
        assert sorted(duckdb_query(spark, table_name, "SELECT * FROM {table}")) == before[1]


def test_equality_deletes_committed_while_rewriting_still_apply(spark, table_name, monkeypatch):
    """A CDC writer's equality delete committed after the plan read the files: the rewrite
    keeps the planned data sequence number, so the delete still removes the rewritten row."""
    from sparkext.iceberg import optimize_table

    create(spark, table_name)
    for i in range(3):
        insert(spark, table_name, i * 10, 10, parts="a")
    original = optimize_table.OptimizeTable.write_staged

    def write_then_delete(self, *args, **kwargs):
        written = original(self, *args, **kwargs)
        flink_commit(spark, table_name, ["k"], deletes=[{"k": 4, "name": None, "v": 0, "p": "a"}])
        return written

    monkeypatch.setattr(optimize_table.OptimizeTable, "write_staged", write_then_delete)
    out = optimize(table_name, ", levels => 'l0'")
    assert [(r["input_files"], r["error"]) for r in out] == [(3, None)]
    spark.catalog.refreshTable(table_name)
    assert sorted(r.k for r in spark.table(table_name).collect()) == [
        k for k in range(30) if k != 4
    ]


def test_a_conflicting_position_delete_fails_only_its_group(spark, table_name, monkeypatch):
    """A position delete committed meanwhile on a file being rewritten fails that group with
    one sentence and removes what it wrote; the other partition's group commits."""
    from sparkext.iceberg import optimize_table

    create(spark, table_name)
    for i in range(3):
        insert(spark, table_name, i * 10, 10)
    original = optimize_table.OptimizeTable.write_staged
    written_paths = []

    def write_then_conflict(self, group_id, frame, *args, **kwargs):
        written = original(self, group_id, frame, *args, **kwargs)
        written_paths.extend(written.paths)
        if len(written_paths) == written.files:  # the first group only: partition a
            spark.sql(f"DELETE FROM {table_name} WHERE k = 2")
        return written

    monkeypatch.setattr(optimize_table.OptimizeTable, "write_staged", write_then_conflict)
    out = {r["partition"]: r for r in optimize(table_name, ", levels => 'l0'")}
    assert out['{"p":"b"}']["error"] is None and out['{"p":"b"}']["snapshot_id"]
    failed = out['{"p":"a"}']
    assert failed["snapshot_id"] is None and failed["output_files"] == 0
    assert "conflicts with the optimisation of" in failed["error"]
    assert "nothing was committed: run tiered_optimize again." in failed["error"]
    assert "\n" not in failed["error"] and "at org.apache" not in failed["error"]
    first = written_paths[0]
    assert not os.path.exists(first.removeprefix("file:"))  # nothing of the failed group stays
    spark.catalog.refreshTable(table_name)
    assert sorted(r.k for r in spark.table(table_name).collect()) == [
        k for k in range(30) if k != 2
    ]


def test_dry_run_plans_without_writing(spark, table_name):
    create(spark, table_name, props=", 'sparkext.optimize.l0.min-files'='2'")
    for i in range(2):
        insert(spark, table_name, i * 10, 10, parts="a")
    snapshots = snapshot_ids(spark, table_name)
    out = optimize(table_name, ", dry_run => true")
    assert [(r["level"], r["input_files"], r["output_files"], r["snapshot_id"]) for r in out] == [
        (0, 2, None, None)
    ]
    assert snapshot_ids(spark, table_name) == snapshots


def test_clustering_narrows_files_on_prefixed_strings(spark, table_name):
    """Names share a 12-byte prefix: after L2 Hilbert clustering on (name, k) into several
    files, a point lookup on name can skip most files (their [min, max] exclude it), where the
    writers' files each span almost every name."""
    create(spark, table_name, partitioned=False)
    for i in range(8):
        insert(spark, table_name, i * 250, 250, parts="a")
    size = sum(f.file_size_in_bytes for f in live_files(spark, table_name))
    optimize(
        table_name,
        f", levels => 'l2', cluster_by => 'name,k', options => map('target-file-size-bytes', "
        f"'{size // 8}')",
    )
    files = live_files(spark, table_name)
    assert len(files) >= 6
    probes = [f"{PREFIX}{v:05d}" for v in range(0, 10_000, 397)]

    def mean_hits() -> float:
        total = 0
        for probe in probes:
            total += sum(
                1
                for f in files
                if f.readable_metrics.name.lower_bound
                <= probe
                <= f.readable_metrics.name.upper_bound
            )
        return total / len(probes)

    assert mean_hits() <= len(files) / 2  # unclustered, every one of the 8 files would match
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('sparkext.optimize.cluster-by'='name')")
    depth = health(table_name)[None].clustering_depth  # the same measure, from metadata
    assert depth is not None and 1.0 <= depth <= len(files) / 2


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (", levels => 'l3'", ProcedureArgumentError, "names an unknown level 'l3'"),
        (", levels => 'l2'", ProcedureArgumentError, "no cluster columns are set"),
        (", cluster_by => 'nmae'", ProcedureArgumentError, "did you mean 'name'"),
        (", cluster_by => 'name,k', curve => 'peano'", ProcedureArgumentError, "Unknown curve"),
        (", where => \"p = 'a'\"", ProcedureArgumentError, "is unpartitioned"),
        (", options => map('l0.min-files', '0')", OptionError, "expects a positive whole"),
    ],
)
def test_bad_input_is_one_sentence_and_changes_nothing(
    spark, table_name, arguments, error, message
):
    create(spark, table_name, partitioned=False)
    insert(spark, table_name, 0, 5)
    insert(spark, table_name, 5, 5)
    snapshots = snapshot_ids(spark, table_name)
    with pytest.raises(error) as raised:
        optimize(table_name, arguments)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert snapshot_ids(spark, table_name) == snapshots


def test_a_bad_table_property_names_the_property(spark, table_name):
    create(spark, table_name, props=", 'sparkext.optimize.l2.max-depth-ratio'='half'")
    insert(spark, table_name, 0, 5)
    with pytest.raises(OptionError, match=r"property sparkext\.optimize\.l2\.max-depth"):
        optimize(table_name)


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    import sparkext
    spark = sparkext.session(master="local[1]", warehouse=sys.argv[1],
                             **{"spark.sql.shuffle.partitions": "2"})
    row = sparkext.sql(
        f"CALL sparkext.ingest_cdc(table => '{sys.argv[2]}', source => '{sys.argv[3]}', "
        f"checkpoint => '{sys.argv[4]}', primary_key => 'id', "
        "options => map('max-files-per-batch', '1'))"
    ).first()
    print("COMMITS", row.commits)
    """
)


class WriterProcess:
    """ingest_cdc in a process of its own (WRITER_SCRIPT)."""

    def __init__(self, tmp_path, warehouse, table: str, zone, checkpoint):
        script = tmp_path / "writer.py"
        script.write_text(WRITER_SCRIPT)
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(warehouse), table, str(zone), str(checkpoint)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def result(self) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=900)
        return self.process.returncode, out, err


class WriterThread:
    """The same ingest_cdc call on a thread of this process (the shared session): the writer's
    commits race the optimisations' as another process's do."""

    def __init__(self, tmp_path, warehouse, table: str, zone, checkpoint):
        import threading
        import traceback

        self.out = self.err = ""

        def write() -> None:
            try:
                row = sparkext.sql(
                    f"CALL sparkext.ingest_cdc(table => '{table}', source => '{zone}', "
                    f"checkpoint => '{checkpoint}', primary_key => 'id', "
                    "options => map('max-files-per-batch', '1'))"
                ).first()
                self.out = f"COMMITS {row.commits}\n"
            except BaseException:
                self.err = traceback.format_exc()

        self.thread = threading.Thread(target=write, name="cdc-writer", daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread.is_alive()

    def result(self) -> tuple[int, str, str]:
        self.thread.join(900)
        return (1 if self.err or self.thread.is_alive() else 0), self.out, self.err


@pytest.mark.slow
@pytest.mark.parametrize(
    "writer_kind",
    [pytest.param(WriterThread, id="thread"),
     pytest.param(WriterProcess, id="process", marks=pytest.mark.stress)],
)  # fmt: skip
def test_a_cdc_writer_in_another_process_never_fails_while_optimising(
    spark, tmp_path, warehouse, writer_kind
):
    """ingest_cdc commits batch after batch from its own process (the default tier: its own
    thread) while this one runs tiered_optimize in a loop on the same table: every batch
    commits, and the table equals the replay of the source."""
    from tests.helpers.cdc_calls import ingest, land, table_rows
    from tests.helpers.cdc_source import SourceTable, expected

    table = f"lake.test.optimized_while_written_{writer_kind.__name__.lower()}"
    source = SourceTable(seed=1818, key_space=40)
    changes = [e for e in source.run(240) if e["op"] != "t"]
    zone, checkpoint = tmp_path / "zone", tmp_path / "checkpoint"
    land(zone, "0000.json", changes[:40])
    ingest(table, zone, checkpoint)  # creates the table; the writer goes on from here
    for index in range(1, 6):
        land(zone, f"{index:04d}.json", changes[index * 40 : (index + 1) * 40])
    writer = writer_kind(tmp_path, warehouse, table, zone, checkpoint)
    runs = committed = 0
    while writer.running() or runs == 0:
        for row in optimize(table, ", options => map('l0.min-files', '2')"):
            committed += row["error"] is None and row["input_files"] > 0
        runs += 1
    returncode, out, err = writer.result()
    assert returncode == 0, err[-3000:]
    assert "COMMITS 5" in out, out + err[-2000:]  # every batch of the writer committed
    optimize(table, ", options => map('l0.min-files', '2')")
    spark.catalog.refreshTable(table)
    assert table_rows(spark, table) == expected(changes)
    operations = [
        r.operation
        for r in spark.sql(
            f"SELECT operation FROM {table}.snapshots ORDER BY committed_at"
        ).collect()
    ]
    writes = [i for i, operation in enumerate(operations) if operation != "replace"]
    between = [
        i for i, operation in enumerate(operations)
        if operation == "replace" and writes[0] < i < writes[-1]
    ]  # fmt: skip
    assert between, operations  # optimisation commits landed between the writer's batches


def test_where_leaves_other_partitions_untouched(spark, table_name):
    create(spark, table_name)
    for i in range(3):
        insert(spark, table_name, i * 10, 10)

    def paths(part: str) -> set[str]:
        spark.catalog.refreshTable(table_name)
        return {f.file_path for f in live_files(spark, table_name) if f.partition.p == part}

    b_before = paths("b")
    out = optimize(table_name, ", where => \"p = 'a'\", levels => 'l0'")
    assert [(r["partition"], r["input_files"]) for r in out] == [('{"p":"a"}', 3)]
    assert paths("b") == b_before and len(b_before) == 3
    assert len(paths("a")) == 1


@pytest.mark.parametrize(
    ("seed", "steps"),
    [pytest.param(2032, 10, id="short"), pytest.param(2026, 18, marks=pytest.mark.stress)],
)  # seed 2032's 10 steps: every kind of step, an L0 and an automatic run before the last L2
def test_a_random_history_of_dml_deletes_and_optimisations_matches_the_model(
    spark, table_name, seed, steps
):
    """Fixed seed: inserts, Spark MOR DELETE / UPDATE / MERGE, Flink-style upserts with
    equality deletes and tiered_optimize runs with random levels and curves, interleaved; after
    every optimisation the table equals a Python model that shares no code with sparkext. The
    default tier runs a shorter history."""
    import random

    pick = random.Random(seed)
    create(
        spark,
        table_name,
        props=", 'sparkext.optimize.cluster-by'='name,k', 'sparkext.optimize.l0.min-files'='2', "
        "'sparkext.optimize.l1.min-bytes'='6KB', 'sparkext.optimize.l2.every-l1-runs'='2'",
    )
    model: dict[int, tuple] = {}

    def row(k: int, v: int) -> tuple:
        return (k, f"{PREFIX}{(k * 7919) % 10_000:05d}", v, "ab"[k % 2])

    next_key = 0
    optimisations = 0
    for _step in range(steps):
        action = pick.choice(["insert", "insert", "delete", "update", "merge", "upsert", "opt"])
        if action == "insert" or not model:
            count = pick.randint(5, 40)
            insert(spark, table_name, next_key, count)
            model.update({k: row(k, k % 97) for k in range(next_key, next_key + count)})
            next_key += count
        elif action == "delete":
            m, r = pick.randint(3, 9), pick.randint(0, 2)
            spark.sql(f"DELETE FROM {table_name} WHERE k % {m} = {r}")
            model = {k: v for k, v in model.items() if k % m != r}
        elif action == "update":
            m, value = pick.randint(2, 7), pick.randint(100, 200)
            spark.sql(f"UPDATE {table_name} SET v = {value} WHERE k % {m} = 1")
            model.update({k: row(k, value) for k in model if k % m == 1})
        elif action == "merge":
            keys = pick.sample(range(next_key + 10), 8)
            source = ", ".join(f"({k})" for k in keys)
            spark.sql(
                f"MERGE INTO {table_name} t USING (SELECT col1 AS k FROM VALUES {source}) s "
                "ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = t.v + 1000 "
                f"WHEN NOT MATCHED THEN INSERT (k, name, v, p) VALUES (s.k, "
                f"concat('{PREFIX}', lpad(cast((s.k * 7919) % 10000 AS string), 5, '0')), "
                "-7, IF(s.k % 2 = 0, 'a', 'b'))"
            )
            for k in keys:
                model[k] = row(k, model[k][2] + 1000) if k in model else row(k, -7)
            next_key = max(next_key, max(keys) + 1)
        elif action == "upsert":
            keys = pick.sample(sorted(model), min(4, len(model)))
            new = [dict(zip(("k", "name", "v", "p"), row(k, 500 + k), strict=True)) for k in keys]
            flink_commit(spark, table_name, ["k"], inserts=new, deletes=new)
            model.update({k: row(k, 500 + k) for k in keys})
        else:
            levels = pick.choice(["", ", levels => 'l0'", ", levels => 'l1'", ", levels => 'l2'"])
            curve = pick.choice(["", ", curve => 'zorder'", ", curve => 'linear'"])
            out = optimize(table_name, levels + curve)
            assert all(r["error"] is None for r in out), out
            optimisations += 1
            spark.catalog.refreshTable(table_name)
            assert rows(spark, table_name) == sorted(model.values())
    out = optimize(table_name, ", levels => 'l2'")
    assert all(r["error"] is None for r in out)
    spark.catalog.refreshTable(table_name)
    assert rows(spark, table_name) == sorted(model.values())
    assert optimisations >= 2


@pytest.mark.parametrize(
    "batches",
    [pytest.param(BATCHES_DEFAULT, id="short"), pytest.param(6, marks=pytest.mark.stress)],
)
def test_ingest_cdc_batches_and_optimisations_match_the_source(
    spark, tmp_path, table_name, batches
):
    """Fixed seed: ingest_cdc batches (duplicates, late events, deletes) alternate with
    tiered_optimize runs; the table always equals the replay of the delivered events. The
    default tier runs the first batches of the stress tier's history."""
    import random

    from tests.helpers.cdc_calls import ingest, land, table_rows
    from tests.helpers.cdc_source import SourceTable, expected

    pick = random.Random(99)
    source = SourceTable(seed=4242, key_space=30)
    zone, checkpoint = tmp_path / "zone", tmp_path / "checkpoint"
    delivered: list[dict] = []
    for batch in range(batches):
        events = [e for e in source.run(50) if e["op"] != "t"]
        late = pick.sample(delivered, min(5, len(delivered)))  # re-delivered: duplicates
        delivered += events
        land(zone, f"{batch:04d}.json", events + late)
        ingest(table_name, zone, checkpoint)
        if batch == 0:
            spark.sql(
                f"ALTER TABLE {table_name} SET TBLPROPERTIES ("
                "'sparkext.optimize.cluster-by'='name,id', 'sparkext.optimize.l0.min-files'='2', "
                "'sparkext.optimize.l1.min-bytes'='8KB')"
            )
        levels = pick.choice(["", "", ", levels => 'l0'", ", levels => 'l2'"])
        out = optimize(table_name, levels)
        assert all(r["error"] is None for r in out), out
        spark.catalog.refreshTable(table_name)
        assert table_rows(spark, table_name) == expected(delivered)
    assert not [f for f in live_files(spark, table_name) if f.content == 2]  # all converted


@pytest.mark.parametrize(
    "batches", [pytest.param(2, id="short"), pytest.param(3, marks=pytest.mark.stress)]
)
def test_ingest_cdc_optimize_every_runs_l0_between_its_batches(
    spark, tmp_path, table_name, batches
):
    """Bilibili's writer-side L0: with optimize-every, ingest_cdc merges small files and
    converts equality deletes between its own batches, in its own process."""
    from tests.helpers.cdc_calls import ingest, land, table_rows
    from tests.helpers.cdc_source import SourceTable, expected

    source = SourceTable(seed=77, key_space=20)
    changes = [e for e in source.run(120) if e["op"] != "t"]
    zone, checkpoint = tmp_path / "zone", tmp_path / "checkpoint"
    land(zone, "0000.json", changes[:30])
    ingest(table_name, zone, checkpoint)
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('sparkext.optimize.l0.min-files'='2')")
    for index in range(1, 1 + batches):
        land(zone, f"{index:04d}.json", changes[index * 30 : (index + 1) * 30])
    ingest(
        table_name, zone, checkpoint, options="'max-files-per-batch', '1', 'optimize-every', '1 ms'"
    )
    spark.catalog.refreshTable(table_name)
    assert table_rows(spark, table_name) == expected(changes[: (1 + batches) * 30])
    operations = [
        (r.operation, r.level)
        for r in spark.sql(
            f"SELECT operation, summary['sparkext.optimize.level'] AS level, "
            f"summary['sparkext.operation'] AS op FROM {table_name}.snapshots "
            "ORDER BY committed_at"
        ).collect()
    ]
    assert ("replace", "0") in operations[1:]  # L0 commits after the writer's batches
    assert operations[-1][0] == "replace"  # the last batch was followed by its L0
    assert not [f for f in live_files(spark, table_name) if f.content == 2]


def test_optimize_every_is_checked_like_every_option(spark, tmp_path, table_name):
    from tests.helpers.cdc_calls import ingest, land

    land(tmp_path / "zone", "0.json", [])
    with pytest.raises(OptionError, match="expects a duration such as '6 hours'"):
        ingest(table_name, tmp_path / "zone", tmp_path / "cp", options="'optimize-every', 'soon'")


def test_an_unknown_commit_state_deletes_nothing_and_stops_the_run(spark, table_name, monkeypatch):
    """The catalog applied the first group's commit, then the answer was lost: its files stay
    (the table references them), the row says so in one sentence, no other group runs."""
    from pathlib import Path

    import sparkext.iceberg.commit as layer
    from tests.spark.test_commit_layer import _unknown_state

    create(spark, table_name)
    for i in range(3):
        insert(spark, table_name, i * 10, 10)
    before = rows(spark, table_name)
    real = layer._swap

    def swap(ops, base, staged):
        real(ops, base, staged)
        raise _unknown_state(spark)

    monkeypatch.setattr(layer, "_swap", swap)
    out = optimize(table_name, ", levels => 'l0'")
    assert len(out) == 1  # the second partition's group did not run
    assert out[0]["error"].startswith("The catalog could not say whether the optimisation")
    assert "no file was deleted" in out[0]["error"] and out[0]["snapshot_id"] is None
    monkeypatch.undo()
    spark.catalog.refreshTable(table_name)
    paths = [r.file_path for r in spark.table(f"{table_name}.all_files").collect()]
    assert [p for p in paths if not Path(p.removeprefix("file:")).exists()] == []
    assert rows(spark, table_name) == before


def test_a_failed_spark_job_fails_only_its_group(spark, table_name, monkeypatch):
    """An executor-side failure in one group (here its clustering) is that group's error row,
    in one sentence; the other partition's group still commits."""
    from sparkext.actions import cluster as clustering

    create(spark, table_name)
    for i in range(3):
        insert(spark, table_name, i * 10, 10)
    before = rows(spark, table_name)
    real = clustering.cluster
    calls = []

    def failing_first(frame, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            return frame.where("raise_error('disk full on executor 3') IS NULL")
        return real(frame, *args, **kwargs)

    monkeypatch.setattr(clustering, "cluster", failing_first)
    out = {r["partition"]: r for r in optimize(table_name, ", levels => 'l1', cluster_by => 'k'")}
    failed, done = out['{"p":"a"}'], out['{"p":"b"}']
    assert done["error"] is None and done["snapshot_id"] is not None
    assert failed["snapshot_id"] is None and "disk full on executor 3" in failed["error"]
    assert failed["error"].startswith('L1 of {"p":"a"} failed (')
    assert "\n" not in failed["error"] and "at org.apache" not in failed["error"]
    spark.catalog.refreshTable(table_name)
    assert rows(spark, table_name) == before
