"""Pure parts of the commit layer and the executor writers' clean-up (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkext.executors.cdc.files import DATA, EQUALITY_DELETES, KIND, file_writer, remove_written
from sparkext.iceberg.commit import _NotAnAncestor, ancestors_between


class _Snapshot:
    def __init__(self, snapshot_id: int, parent: int | None):
        self._id, self._parent = snapshot_id, parent

    def snapshotId(self):
        return self._id

    def parentId(self):
        return self._parent


class _Metadata:
    """A table history: 1 <- 2 <- 3 (main) and 1 <- 4 (a rolled-back / other branch)."""

    def __init__(self):
        self._snapshots = {1: _Snapshot(1, None), 2: _Snapshot(2, 1), 3: _Snapshot(3, 2)}
        self._snapshots[4] = _Snapshot(4, 1)

    def snapshot(self, snapshot_id):
        return self._snapshots.get(snapshot_id)


def test_ancestry_walk_returns_the_snapshots_after_the_plan():
    chain = ancestors_between(_Metadata(), 3, 1)
    assert [s.snapshotId() for s in chain] == [3, 2]
    assert ancestors_between(_Metadata(), 3, 3) == []
    assert [s.snapshotId() for s in ancestors_between(_Metadata(), 3, None)] == [3, 2, 1]


def test_ancestry_walk_raises_when_the_plan_is_not_an_ancestor():
    with pytest.raises(_NotAnAncestor):
        ancestors_between(_Metadata(), 3, 4)  # 4 is on another line of history
    with pytest.raises(_NotAnAncestor):
        ancestors_between(_Metadata(), 4, 2)  # rolled back past the planned snapshot
    with pytest.raises(_NotAnAncestor):
        ancestors_between(_Metadata(), 3, 99)  # expired or unknown


def _batch(ids: list[int], kind: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"id": ids, "v": [f"v{i}" for i in ids], KIND: [kind] * len(ids)},
        schema=pa.schema([("id", pa.int64()), ("v", pa.string()), (KIND, pa.int32())]),
    )


def test_a_failing_writer_task_deletes_the_files_it_wrote(tmp_path):
    write = file_writer(str(tmp_path), {"id": 1, "v": 2}, "cdc-test")

    def batches():
        yield _batch([1, 2], DATA)
        yield _batch([3], EQUALITY_DELETES)
        raise OSError("executor lost its disk")

    with pytest.raises(OSError):
        list(write(batches()))
    assert list(tmp_path.iterdir()) == []


def test_a_writer_task_reports_metrics_computed_from_its_footer(tmp_path):
    import base64
    import json

    write = file_writer(str(tmp_path), {"id": 1, "v": 2}, "cdc-test")
    (out,) = list(write(iter([_batch([5, -3, 9], DATA)])))
    row = out.to_pylist()[0]
    metrics = json.loads(row["metrics"])
    assert metrics["record_count"] == 3
    assert metrics["value_counts"] == {"1": 3, "2": 3}
    assert metrics["null_value_counts"] == {"1": 0, "2": 0}
    lower = int.from_bytes(base64.b64decode(metrics["lower_bounds"]["1"]), "little", signed=True)
    upper = int.from_bytes(base64.b64decode(metrics["upper_bounds"]["1"]), "little", signed=True)
    assert (lower, upper) == (-3, 9)


def test_remove_written_deletes_only_the_attempts_files(tmp_path):
    (tmp_path / "cdc-a1-data-1.parquet").write_bytes(b"x")
    (tmp_path / "cdc-a1-eq-deletes-2.parquet").write_bytes(b"x")
    (tmp_path / "cdc-b2-data-1.parquet").write_bytes(b"x")  # another attempt: kept
    assert remove_written(str(tmp_path), "cdc-a1-") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdc-b2-data-1.parquet"]
    assert remove_written(str(tmp_path / "missing"), "cdc-") == 0


def test_event_log_rows_stream_into_one_file_moved_into_place_whole(tmp_path):
    import pyarrow.parquet as pq

    from sparkext.executors.cdc.files import EVENT_LOG, EventLog

    data, events = tmp_path / "data", tmp_path / "events"
    write = file_writer(
        str(data), {"id": 1, "v": 2}, "cdc-test", event_log=EventLog(str(events), "3.5.9")
    )
    out = pa.Table.from_batches(
        list(write(iter([_batch([1, 2], EVENT_LOG), _batch([7], DATA), _batch([3], EVENT_LOG)])))
    ).to_pylist()
    logged = [r for r in out if r["kind"] == EVENT_LOG]
    assert [r["kind"] for r in out if r["kind"] != EVENT_LOG] == [DATA]
    assert len(logged) == 1 and logged[0]["records"] == 3
    (file,) = events.iterdir()  # no hidden file left beside it
    assert file.name.startswith("part-") and logged[0]["path"].endswith(file.name)
    table = pq.read_table(file)
    assert table.column("id").to_pylist() == [1, 2, 3] and KIND not in table.column_names
    assert pq.read_metadata(file).metadata[b"org.apache.spark.version"] == b"3.5.9"


def test_a_failing_task_leaves_no_event_log_file(tmp_path):
    from sparkext.executors.cdc.files import EVENT_LOG, EventLog

    events = tmp_path / "events"
    write = file_writer(
        str(tmp_path / "data"), {"id": 1, "v": 2}, "cdc-test", event_log=EventLog(str(events), "3")
    )

    def batches():
        yield _batch([1, 2], EVENT_LOG)
        raise OSError("executor lost its disk")

    with pytest.raises(OSError):
        list(write(batches()))
    assert list(events.iterdir()) == []
