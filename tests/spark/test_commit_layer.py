"""The one commit layer (sparkext/iceberg/commit.py) under races, unknown states and failures.

The competing commits here land INSIDE our commit: after our checks ran and before the
catalog's compare-and-swap, which is the window an injected-before-commit test cannot see.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import sparkext
from sparkext.errors import CommitConflictError, CommitStateUnknownError, SparkextError
from tests.helpers.iceberg import old_sequence_compaction
from tests.spark.test_rewrite_equality_deletes import (
    Workload,
    call,
    create,
    live_files,
    loaded,
    rows,
)


def test_compaction_inside_the_commit_window_is_a_conflict(spark, table_name, monkeypatch):
    """The compaction lands after our checks passed: the swap fails, the next attempt's checks
    see it, and nothing resurrects (Iceberg's own retry would have committed on top of it)."""
    from sparkext.iceberg.delete_files import DeleteTable

    work = loaded(spark, table_name, seed=31)
    original = DeleteTable._check_no_new_dvs
    raced = []

    def check_then_race(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not raced:
            raced.append(1)
            old_sequence_compaction(spark, table_name)

    monkeypatch.setattr(DeleteTable, "_check_no_new_dvs", check_then_race)
    before = live_files(spark, table_name, 2)
    with pytest.raises(CommitConflictError, match="rewrote data files"):
        call(table_name)
    assert raced
    assert live_files(spark, table_name, 2) == before
    assert rows(spark, table_name) == work.expected()


def _unknown_state(spark):
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    cause = jvm.java.lang.RuntimeException("connection reset by the catalog")
    java = jvm.org.apache.iceberg.exceptions.CommitStateUnknownException(cause)
    error = Py4JJavaError("An error occurred while calling o1.commit.\n", java)
    return error


def _swap_then_unknown(spark, monkeypatch):
    """The catalog applies the commit, then the answer is lost."""
    import sparkext.iceberg.commit as layer

    real = layer._swap

    def swap(ops, base, staged):
        real(ops, base, staged)
        raise _unknown_state(spark)

    monkeypatch.setattr(layer, "_swap", swap)


def _missing_files(spark, table_name: str) -> list[str]:
    paths = [
        r.file_path for r in spark.table(f"{table_name}.all_files").select("file_path").collect()
    ]
    return [p for p in paths if not Path(p.removeprefix("file:")).exists()]


def test_unknown_commit_state_deletes_nothing_rewrite(spark, table_name, monkeypatch):
    work = loaded(spark, table_name, seed=32)
    _swap_then_unknown(spark, monkeypatch)
    with pytest.raises(CommitStateUnknownError) as caught:
        call(table_name)
    message = str(caught.value)
    assert "\n" not in message and "no file was deleted" in message
    assert "sparkext.run-id" in message
    # the commit did land: every file it references must still be there, rows unchanged
    assert _missing_files(spark, table_name) == []
    assert live_files(spark, table_name, 2) == 0
    assert rows(spark, table_name) == work.expected()


def test_unknown_commit_state_deletes_nothing_ingest(spark, table_name, tmp_path, monkeypatch):
    from tests.helpers.cdc_calls import events, land

    source = tmp_path / "landing"
    checkpoint = tmp_path / "checkpoint"
    land(source, "b0.json", events(("c", 1, 1, "a"), ("c", 2, 2, "b")))
    _swap_then_unknown(spark, monkeypatch)
    with pytest.raises(CommitStateUnknownError):
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{source}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
        )
    assert _missing_files(spark, table_name) == []
    got = sorted(tuple(r) for r in spark.table(table_name).select("id", "name").collect())
    assert got == [(1, "a"), (2, "b")]


def test_lost_race_retries_and_leaves_no_staged_metadata(spark, table_name, monkeypatch):
    """Another writer commits between our staging and our swap: the swap is refused, what the
    attempt staged is deleted, and the next attempt commits on the new state."""
    import sparkext.iceberg.commit as layer

    loaded(spark, table_name, seed=33)
    real = layer._swap
    attempts = []

    def swap(ops, base, staged):
        attempts.append(1)
        if len(attempts) == 1:  # an unrelated append wins the race
            spark.sql(f"INSERT INTO {table_name} VALUES ('zz', 999, 1, 'p9')")
        real(ops, base, staged)

    monkeypatch.setattr(layer, "_swap", swap)
    result = call(table_name)
    assert len(attempts) == 2 and result.equality_delete_files_removed == 1
    assert ("zz", 999, 1, "p9") in rows(spark, table_name)
    location = Path(
        spark.sql(f"DESCRIBE TABLE EXTENDED {table_name}")
        .where("col_name = 'Location'")
        .first()
        .data_type.removeprefix("file:")
    )
    referenced = {
        Path(r.path.removeprefix("file:")).name
        for r in spark.table(f"{table_name}.all_manifests").select("path").collect()
    } | {
        Path(r.manifest_list.removeprefix("file:")).name
        for r in spark.table(f"{table_name}.snapshots").select("manifest_list").collect()
    }
    on_disk = {p.name for p in (location / "metadata").iterdir() if p.suffix == ".avro"}
    assert on_disk == referenced  # the refused attempt's manifests are gone


def test_a_writer_that_always_wins_the_race_ends_in_one_sentence(spark, table_name, monkeypatch):
    """Retries are bounded: when every swap is lost, the conversion stops with one sentence and
    commits nothing."""
    import sparkext.iceberg.commit as layer

    loaded(spark, table_name, seed=35)
    real = layer._swap
    attempts = []

    def always_lost(ops, base, staged):
        attempts.append(1)
        spark.sql(f"INSERT INTO {table_name} VALUES ('zz{len(attempts)}', 1, 1, 'p9')")
        real(ops, base, staged)

    monkeypatch.setattr(layer, "_swap", always_lost)
    monkeypatch.setattr(layer, "_sleep", lambda attempt_number: None)
    with pytest.raises(CommitConflictError) as caught:
        call(table_name)
    message = str(caught.value)
    assert "\n" not in message and "kept committing" in message
    assert message.endswith("run the procedure again.")
    assert len(attempts) == layer.RETRIES_DEFAULT + 1
    assert live_files(spark, table_name, 2) == 1  # the equality deletes are all still there


def test_planned_snapshot_rolled_back_is_a_conflict(spark, table_name, monkeypatch):
    from sparkext.iceberg.delete_files import DeleteTable

    create(spark, table_name, 2, False)
    work = Workload(spark, table_name, seed=34)
    work.load()
    first_id = (  # compared in Spark: a collected TIMESTAMP is in the OS zone, not the session's
        spark.table(f"{table_name}.snapshots")
        .where(f"committed_at = (SELECT max(committed_at) FROM {table_name}.snapshots)")
        .first()
        .snapshot_id
    )
    work.commit(1)
    original = DeleteTable.commit

    def rolled_back(self, *args, **kwargs):
        catalog, *rest = table_name.split(".")
        spark.sql(f"CALL {catalog}.system.rollback_to_snapshot('{'.'.join(rest)}', {first_id})")
        spark.sql(f"INSERT INTO {table_name} VALUES ('new', 1, 1, 'p1')")  # a new branch of history
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DeleteTable, "commit", rolled_back)
    with pytest.raises(CommitConflictError, match="no longer an ancestor"):
        call(table_name)


def test_commit_to_a_cached_table_refreshes_the_cache(spark, table_name, tmp_path):
    from tests.helpers.cdc_calls import events, land

    source = tmp_path / "landing"
    checkpoint = tmp_path / "checkpoint"
    ingest = (
        f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{source}', "
        f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
    )
    land(source, "b0.json", events(("c", 1, 1, "a")))
    sparkext.sql(ingest)
    spark.sql(f"CACHE TABLE {table_name}")
    try:
        assert spark.table(table_name).count() == 1
        land(source, "b1.json", events(("c", 2, 2, "b"), ("u", 1, 3, "A")))
        sparkext.sql(ingest)
        query = f"SELECT id, name FROM {table_name}"
        assert sorted(tuple(r) for r in spark.sql(query).collect()) == [
            (1, "A"),
            (2, "b"),
        ]
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {table_name}")


def _tumble_job(spark, suffix: str, expression: str) -> tuple[str, str]:
    """A one-row source and a per-minute TUMBLE job into a fresh sink: (sink, job text)."""
    sink = f"lake.test.commit_layer_sink{suffix}"
    source = f"lake.test.commit_layer_source{suffix}"
    spark.sql(f"DROP TABLE IF EXISTS {sink}")
    spark.sql(f"DROP TABLE IF EXISTS {source}")
    spark.sql(
        f"CREATE TABLE {source} (id BIGINT, ts TIMESTAMP) USING iceberg "
        "TBLPROPERTIES ('sparkext.event-time-column'='ts')"
    )
    spark.sql(f"INSERT INTO {source} VALUES (1, TIMESTAMP '2026-01-01 00:00:30')")
    job = f"""
    CREATE TABLE {sink} (window_start TIMESTAMP, window_end TIMESTAMP, n BIGINT)
      WITH ('connector' = 'iceberg');
    INSERT INTO {sink}
    SELECT window_start, window_end, {expression}
    FROM TABLE(TUMBLE(TABLE {source}, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end;
    """
    return sink, job


def test_a_failing_job_is_not_reported_as_a_concurrent_writer(spark, tmp_path):
    """A user's function failing inside a backfill is that failure, with its cause chained."""
    from sparkext.streaming.backfill import run_backfill

    _, job = _tumble_job(spark, "", "count(*) + CAST('not a number' AS BIGINT)")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(SparkextError) as caught:
            run_backfill(spark, job, "2026-01-01 00:00:00", "2026-01-01 00:10:00")
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "false")
    assert not isinstance(caught.value, CommitConflictError)
    assert "another writer" not in str(caught.value).lower()
    assert caught.value.__cause__ is not None  # --verbose can show it


def test_backfill_reports_its_own_snapshot_not_the_next_writers(spark, monkeypatch):
    import sparkext.streaming.backfill as backfill

    sink, job = _tumble_job(spark, "2", "count(*)")
    real = backfill._write

    def write_then_someone_else(spark_, query, *args):
        real(spark_, query, *args)
        spark.sql(
            f"INSERT INTO {sink} VALUES (TIMESTAMP '2030-01-01 00:00:00', "
            "TIMESTAMP '2030-01-01 00:01:00', 7)"
        )

    monkeypatch.setattr(backfill, "_write", write_then_someone_else)
    _, results = backfill.run_backfill(spark, job, "2026-01-01 00:00:00", "2026-01-01 00:10:00")
    (result,) = results
    ours = (
        spark.table(f"{sink}.snapshots")
        .where(f"snapshot_id = {result.snapshot_id}")
        .select("summary")
        .first()
    )
    assert ours is not None and "sparkext.run-id" in ours.summary
    newest = spark.sql(
        f"SELECT snapshot_id FROM {sink}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()
    assert result.snapshot_id != newest.snapshot_id
    assert result.rows_added == 1


def test_cdc_progress_without_a_position_is_none_not_the_string(spark, table_name):
    """A commit of ours without a max position (e.g. a truncate-only batch) must not turn into
    the string 'None', which sorts below every real position."""
    from sparkext.iceberg.cdc_table import BATCH_ID, CHECKPOINT_ID, CdcTable
    from tests.helpers.iceberg import java_table

    spark.sql(f"CREATE TABLE {table_name} (id BIGINT NOT NULL, v STRING) USING iceberg")
    table = java_table(spark, table_name)
    table.newFastAppend().set(CHECKPOINT_ID, "ck").set(BATCH_ID, "0").commit()
    progress = CdcTable(spark, table_name).progress("ck")
    assert progress.max_position is None
    assert progress.batches == {"ck": 0}


def test_failed_cdc_write_job_leaves_no_files(spark, table_name, tmp_path, monkeypatch):
    """A batch whose writing job fails leaves none of its files (the tasks that finished and
    the task that failed)."""
    import sparkext.actions.cdc.ingest.write as ingest
    from tests.helpers.cdc_calls import events, land

    source = tmp_path / "landing"
    checkpoint = tmp_path / "checkpoint"
    land(source, "b0.json", events(*[("c", i, i, "x") for i in range(1, 50)]))
    real = ingest.file_writer

    def failing_writer(*args, **kwargs):
        write = real(*args, **kwargs)

        def run(batches):
            yield from write(batches)
            raise RuntimeError("disk full")  # after the task's files were closed and reported

        return run

    monkeypatch.setattr(ingest, "file_writer", failing_writer)
    with pytest.raises(Exception):  # noqa: B017 - any error: the point is what is left behind
        sparkext.sql(
            f"CALL sparkext.ingest_cdc(table => '{table_name}', source => '{source}', "
            f"checkpoint => '{checkpoint}', primary_key => 'id', create => true)"
        )
    data = [
        p
        for p in Path(str(spark.conf.get("spark.sql.catalog.lake.warehouse"))).rglob(
            "cdc-*.parquet"
        )
        if table_name.rsplit(".", 1)[-1] + "/" in str(p)
    ]
    assert data == []


@pytest.mark.parametrize("route", ["jvm", "py4j"])
def test_executor_metrics_equal_icebergs_footer_metrics(
    spark, table_name, tmp_path, monkeypatch, route
):
    """The metrics a writer task computes are the ones Iceberg would read from the footer, built
    by sparkext's jar in one call or, without the jar, entry by entry through py4j."""
    import sparkext.iceberg.data_files as data_files

    if route == "py4j":
        monkeypatch.setattr(data_files, "_file_metrics_class", lambda spark: None)
    else:
        assert data_files._file_metrics_class(spark) is not None
    import decimal
    from datetime import date, datetime, timezone

    import pyarrow as pa

    from sparkext.executors.cdc.files import DATA, KIND, file_writer
    from sparkext.iceberg.data_files import java_metrics
    from tests.helpers.iceberg import java_table

    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, i INT, s STRING, d DOUBLE, m DECIMAL(12, 2), "
        "day DATE, ts TIMESTAMP, b BOOLEAN, raw BINARY) USING iceberg "
        "TBLPROPERTIES ('write.metadata.metrics.column.s'='truncate(4)')"
    )
    table = java_table(spark, table_name)
    ids = {str(f.name()): int(f.fieldId()) for f in table.schema().columns()}
    arrow = pa.schema(
        [
            ("id", pa.int64()),
            ("i", pa.int32()),
            ("s", pa.string()),
            ("d", pa.float64()),
            ("m", pa.decimal128(12, 2)),
            ("day", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("b", pa.bool_()),
            ("raw", pa.binary()),
            (KIND, pa.int32()),
        ]
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "id": [3, -7, None],
            "i": [1, 2, 3],
            "s": ["user_000123456789", "ünïcode-long-value", None],
            "d": [1.5, float("nan"), -0.0],
            "m": [decimal.Decimal("12.34"), decimal.Decimal("-0.01"), None],
            "day": [date(1970, 1, 1), date(2026, 11, 21), None],
            "ts": [datetime(2026, 1, 1, tzinfo=timezone.utc), None, None],
            "b": [True, False, None],
            "raw": [b"\x00\xff", b"abc", None],
            KIND: [DATA] * 3,
        },
        schema=arrow,
    )
    properties = {k: v for k, v in table.properties().items() if k.startswith("write.metadata")}
    write = file_writer(str(tmp_path), ids, "metrics-test", (), properties)
    (out,) = list(write(iter([batch])))
    row = out.to_pylist()[0]
    assert row["metrics"] is not None
    ours = java_metrics(spark, table, row["path"], row["metrics"])
    theirs = java_metrics(spark, table, row["path"], None)  # Iceberg reads the footer
    assert ours.recordCount() == theirs.recordCount() == 3
    for name in (
        "columnSizes",
        "valueCounts",
        "nullValueCounts",
        "nanValueCounts",
        "lowerBounds",
        "upperBounds",
    ):
        # Map.equals: same keys, Long values (not Integer), equal ByteBuffer contents
        assert getattr(ours, name)().equals(getattr(theirs, name)()), (
            name,
            str(getattr(ours, name)()),
            str(getattr(theirs, name)()),
        )
