"""Pure parts of the commit layer and the executor writers' clean-up (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkext.errors import CommitConflictError, CommitStateUnknownError
from sparkext.executors.cdc.files import DATA, EQUALITY_DELETES, KIND, file_writer, remove_written
from sparkext.iceberg.commit import _NotAnAncestor, ancestors_between, discard_unless_unknown


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


# --- the one commit policy: discard unless unknown, property compare-and-swap -------------------


class _JavaClass:
    def __init__(self, name: str):
        self._name = name

    def getName(self):
        return self._name

    def getSimpleName(self):
        return self._name.rsplit(".", 1)[-1]


class _JavaException:
    """A py4j JavaObject of a Java exception, as far as sparkext's classification reads it."""

    def __init__(self, name: str, cause: _JavaException | None = None):
        self._class, self._cause = _JavaClass(name), cause

    def getClass(self):
        return self._class

    def getCause(self):
        return self._cause

    def equals(self, other):
        return other is self


class _JavaError(Exception):
    """What py4j raises for a Java exception: the JavaObject is ``java_exception``."""

    def __init__(self, *names: str):
        super().__init__(names[0])
        cause = None
        for name in reversed(names):
            cause = _JavaException(f"org.apache.iceberg.exceptions.{name}", cause)
        self.java_exception = cause


def _written(tmp_path, count: int = 2) -> list:
    paths = [tmp_path / f"attempt-{i}.parquet" for i in range(count)]
    for path in paths:
        path.write_bytes(b"x")
    return paths


def _discard(paths: list) -> None:
    for path in paths:
        path.unlink()


def _fail(discard, error: BaseException) -> None:
    """One commit attempt that fails with ``error``."""
    with discard_unless_unknown(discard, "db.t", "this batch"):
        raise error


def test_a_commit_that_succeeds_keeps_its_files(tmp_path):
    paths = _written(tmp_path)
    with discard_unless_unknown(lambda: _discard(paths), "db.t", "this batch"):
        pass
    assert all(p.exists() for p in paths)


@pytest.mark.parametrize(
    "error",
    [
        lambda: CommitStateUnknownError("may have landed"),
        lambda: _JavaError("CommitStateUnknownException"),
        lambda: _JavaError("RuntimeIOException", "CommitStateUnknownException"),  # as a cause
        lambda: _JavaError("CommitFailedException", "CommitStateUnknownException"),
    ],
)
def test_a_commit_in_an_unknown_state_keeps_its_files_and_says_so(tmp_path, error):
    paths = _written(tmp_path)
    with pytest.raises(CommitStateUnknownError) as raised:
        _fail(lambda: _discard(paths), error())
    assert all(p.exists() for p in paths)
    assert "may have landed" in str(raised.value) or "no file was deleted" in str(raised.value)


@pytest.mark.parametrize(
    "error, kind",
    [
        (lambda: CommitConflictError("lost"), "Conflict"),
        (lambda: _JavaError("ValidationException"), "_JavaError"),
        (lambda: _JavaError("CommitFailedException"), "_JavaError"),
        (lambda: OSError("executor lost its disk"), "OSError"),
    ],
)
def test_a_commit_that_definitely_failed_deletes_its_files(tmp_path, error, kind):
    paths = _written(tmp_path)
    with pytest.raises(Exception) as raised:
        _fail(lambda: _discard(paths), error())
    assert kind in type(raised.value).__name__
    assert not any(p.exists() for p in paths)


def test_a_failing_discard_never_hides_the_commit_error():
    def discard():
        raise OSError("storage is gone too")

    with pytest.raises(ValueError, match="the real cause"):
        _fail(discard, ValueError("the real cause"))


def test_an_interrupt_mid_commit_deletes_nothing(tmp_path):
    paths = _written(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        _fail(lambda: _discard(paths), KeyboardInterrupt)
    assert all(p.exists() for p in paths)


def test_commit_failure_is_classified_in_one_place():
    from sparkext.iceberg import errors

    assert errors.commit_failure(_JavaError("CommitFailedException")) == errors.LOST_RACE
    assert errors.commit_failure(_JavaError("ValidationException")) == errors.VALIDATION
    unknown = _JavaError("CommitFailedException", "CommitStateUnknownException")
    assert errors.commit_failure(unknown) == errors.UNKNOWN_STATE
    assert errors.commit_failure(unknown, causes=False) == errors.LOST_RACE
    assert errors.commit_failure(ValueError("python")) == errors.OTHER
    assert errors.is_java(_JavaError("X", "AlreadyExistsException"), "AlreadyExistsException")
    assert not errors.is_java(ValueError("python"), "AlreadyExistsException")


class _Metadata2:
    """Table metadata as the property swap reads it: properties and a file location."""

    def __init__(self, properties: dict[str, str]):
        self._properties = dict(properties)

    def properties(self):
        return dict(self._properties)

    def metadataFileLocation(self):
        return "s3://bucket/t/metadata/v1.metadata.json"  # not a local Hadoop table: no lock


class _Ops:
    """TableOperations with a catalog's compare-and-swap; ``rivals`` writers win the next
    swaps, each setting the property to its own value first."""

    def __init__(self, properties: dict[str, str], rivals: list[str | None], key: str):
        self.current = _Metadata2(properties)
        self.rivals, self.key, self.swaps = list(rivals), key, 0

    def getClass(self):
        return _JavaClass("org.apache.iceberg.jdbc.JdbcTableOperations")

    def refresh(self):
        return self.current

    def commit(self, base, staged):
        self.swaps += 1
        if self.rivals:
            rival = self.rivals.pop(0)
            properties = self.current.properties()
            if rival is None:
                properties.pop(self.key, None)
            else:
                properties[self.key] = rival
            self.current = _Metadata2(properties)
        if base is not self.current:
            raise _JavaError("CommitFailedException")
        self.current = staged


class _Update:
    def __init__(self, txn):
        self._txn, self._set, self._removed = txn, {}, set()

    def set(self, key, value):
        self._set[key] = value
        return self

    def remove(self, key):
        self._removed.add(key)
        return self

    def commit(self):
        properties = self._txn.staged.properties()
        properties.update(self._set)
        for key in self._removed:
            properties.pop(key, None)
        self._txn.staged = _Metadata2(properties)


class _Transaction:
    def __init__(self, ops):
        self.base = self.staged = ops.current

    def startMetadata(self):
        return self.base

    def currentMetadata(self):
        return self.staged

    def updateProperties(self):
        return _Update(self)


class _Table:
    def __init__(self, ops):
        self._ops = ops

    def operations(self):
        return self._ops


@pytest.fixture()
def fake_jvm(monkeypatch):
    from types import SimpleNamespace

    from sparkext.iceberg import commit

    transactions = SimpleNamespace(newTransaction=lambda name, ops: _Transaction(ops))
    jvm = SimpleNamespace(
        org=SimpleNamespace(
            apache=SimpleNamespace(iceberg=SimpleNamespace(Transactions=transactions))
        )
    )
    monkeypatch.setattr(commit, "jvm_of", lambda spark: jvm)


def _increment(seen: list):
    from sparkext.iceberg.commit import PropertyChange

    def decide(current):
        seen.append(current)
        return PropertyChange(str(int(current or "0") + 1))

    return decide


def test_property_swap_decides_again_after_each_lost_race(fake_jvm):
    from sparkext.iceberg.commit import swap_property

    ops = _Ops({"n": "1"}, rivals=["5", "9"], key="n")
    seen: list = []
    result = swap_property(
        None,
        _Table(ops),
        "db.t",
        "n",
        _increment(seen),
        "counter n",
        "run again",
        pause_s=lambda n: 0,
    )
    assert seen == ["1", "5", "9"]  # re-read after each lost race, never re-applied blindly
    assert (result.previous, result.value, result.changed, result.attempts) == ("9", "10", True, 3)
    assert ops.current.properties()["n"] == "10"


def test_property_swap_leaves_the_property_when_the_decision_says_so(fake_jvm):
    from sparkext.iceberg.commit import swap_property

    ops = _Ops({"lease": "theirs"}, rivals=[], key="lease")
    result = swap_property(
        None, _Table(ops), "db.t", "lease", lambda current: None, "the lease", "run again"
    )
    assert (result.changed, result.previous, ops.swaps) == (False, "theirs", 0)


def test_property_swap_gives_up_after_its_rounds_in_one_sentence(fake_jvm):
    from sparkext.iceberg.commit import swap_property

    ops = _Ops({}, rivals=[str(i) for i in range(10)], key="n")
    with pytest.raises(CommitConflictError) as raised:
        swap_property(
            None,
            _Table(ops),
            "db.t",
            "n",
            _increment([]),
            "the optimisation lease",
            "run again",
            rounds=3,
            pause_s=lambda n: 0,
        )
    assert str(raised.value) == (
        "Could not update the optimisation lease of db.t: other commits kept winning the race "
        "3 times; run again."
    )
    assert ops.swaps == 3 and raised.value.__cause__ is None


def test_property_swap_raises_other_failures_at_once(fake_jvm):
    from sparkext.iceberg.commit import swap_property

    class _Broken(_Ops):
        def commit(self, base, staged):
            self.swaps += 1
            raise _JavaError("ValidationException")

    ops = _Broken({}, rivals=[], key="n")
    with pytest.raises(_JavaError):
        swap_property(None, _Table(ops), "db.t", "n", _increment([]), "n", "run again")
    assert ops.swaps == 1
