"""sparkext.changelog_stream: micro-batches of a table's changelog, exactly once across restarts.

Oracles: the union of every delivered batch equals ONE ``sparkext.changelog`` call over the
whole range (ordinals aside: they restart in each call), and replaying the batches onto the
table as read at the start gives the table as read at the end (stock Iceberg time travel). A
restart is tested in-process (a consumer that fails; one killed by an exception nothing catches,
between delivery and commit) and, in the stress tier, with a real process killed there.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import sparkext
from sparkext.errors import ChangelogRangeLostError, OptionError
from sparkext.planning.changelog_stream import consumer_key
from tests.spark.test_changelog import create, snapshots

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv" / "bin" / "python")
USER = ("id", "v")
CHANGE = (*USER, "_change_type", "_commit_snapshot_id")


def rows(frame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.select(*CHANGE).collect())


def one_call(name: str, start: int | None, end: int) -> list[tuple]:
    options = f"'end-snapshot-id', '{end}'"
    if start is not None:
        options += f", 'start-snapshot-id', '{start}'"
    return rows(
        sparkext.sql(
            f"SELECT * FROM sparkext.changelog(table => '{name}', options => map({options}))"
        )
    )


def state(spark, name: str, snapshot_id: int | None) -> Counter:
    if snapshot_id is None:
        return Counter()
    frame = spark.read.option("snapshot-id", str(snapshot_id)).table(name)
    return Counter(tuple(r) for r in frame.select(*USER).collect())


def replay(start: Counter, changes: list[tuple]) -> Counter:
    result = Counter(start)
    for row in changes:
        image, kind = row[: len(USER)], row[len(USER)]
        if kind in ("INSERT", "UPDATE_AFTER"):
            result[image] += 1
        else:
            result[image] -= 1
    return +result


class Sink:
    """An idempotent sink: one entry per batch id, overwritten when a batch comes again."""

    def __init__(self, stream=None, fail_on: int | None = None):
        self.batches: dict[int, list[tuple]] = {}
        self.ranges: dict[int, tuple] = {}
        self.calls: list[int] = []
        self.stream = stream
        self.fail_on = fail_on

    def __call__(self, frame, batch_id: int) -> None:
        self.calls.append(batch_id)
        current = self.stream.current_batch
        self.ranges[batch_id] = (current.start_snapshot_id, current.end_snapshot_id)
        self.batches[batch_id] = rows(frame)
        if batch_id == self.fail_on:
            raise RuntimeError(f"consumer failed on batch {batch_id}")

    def union(self) -> list[tuple]:
        return sorted(r for b in self.batches.values() for r in b)


def attach(stream, fail_on: int | None = None) -> Sink:
    sink = Sink(stream, fail_on)
    stream.foreach_batch(sink)
    return sink


def history(spark, name: str) -> None:
    """Five commits of every kind that changes rows, and a compaction."""
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"UPDATE {name} SET v = 'bb' WHERE id = 2")  # position deletes
    spark.sql(f"INSERT INTO {name} VALUES (4, 'd')")
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{name}', options => "
        "map('rewrite-all', 'true', 'delete-file-threshold', '1'))"
    )  # REPLACE
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    spark.sql(
        f"MERGE INTO {name} t USING (SELECT 3 AS id, 'cc' AS v UNION ALL SELECT 5, 'e') s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )


def test_batches_equal_one_changelog_and_a_failed_consumer_gets_its_batch_again(
    spark, table_name, tmp_path
):
    create(spark, table_name)
    history(spark, table_name)
    ids = snapshots(spark, table_name)
    checkpoint = str(tmp_path / "ck")
    lines: list[str] = []
    options = {"max-snapshots-per-batch": "2"}
    first = sparkext.changelog_stream(table_name, checkpoint, options, progress=lines.append)
    assert repr(first) == (
        f"ChangelogStream(table='{table_name}', checkpoint='{checkpoint}', state='idle', "
        "consumed_snapshot_id=None, batches_delivered=0)"
    )
    failing = attach(first, fail_on=1)
    with pytest.raises(RuntimeError, match="consumer failed on batch 1"):
        first.process_available()
    assert failing.calls == [0, 1]
    assert first.consumed_snapshot_id == ids[1]  # batch 0 committed, batch 1 not

    second = sparkext.changelog_stream(table_name, checkpoint, options, progress=lines.append)
    sink = attach(second)
    done = second.process_available()
    assert [(b.batch_id, b.redelivered) for b in done][:1] == [(1, True)]
    assert sink.ranges[1] == failing.ranges[1]  # the same range again
    assert sink.batches[1] == failing.batches[1]
    sink.batches[0] = failing.batches[0]
    assert sorted(sink.ranges) == [1, 2]
    assert second.consumed_snapshot_id == ids[-1]
    assert any("again (planned before a restart)" in line for line in lines)
    # every batch together is one call over the whole range, and replays start to end
    assert sink.union() == one_call(table_name, None, ids[-1])
    assert replay(Counter(), sink.union()) == state(spark, table_name, ids[-1])
    # nothing new: nothing delivered; then new commits continue right after the last batch
    assert second.process_available() == []
    spark.sql(f"DELETE FROM {table_name} WHERE id = 5")
    spark.sql(f"INSERT INTO {table_name} VALUES (6, 'f')")
    more = second.process_available()
    assert [b.start_snapshot_id for b in more][:1] == [ids[-1]]
    end = snapshots(spark, table_name)[-1]
    assert sink.union() == one_call(table_name, None, end)
    assert replay(Counter(), sink.union()) == state(spark, table_name, end)


def test_a_compaction_only_range_is_committed_without_calling_the_consumer(
    spark, table_name, tmp_path
):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    spark.sql(f"INSERT INTO {table_name} VALUES (2, 'b')")
    stream = sparkext.changelog_stream(table_name, str(tmp_path / "ck"))
    sink = attach(stream)
    stream.process_available()
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{table_name}', "
              "options => map('rewrite-all', 'true'))")  # fmt: skip
    (info,) = stream.process_available()
    assert not info.delivered and sink.calls == [0]
    assert stream.consumed_snapshot_id == snapshots(spark, table_name)[-1]


def test_starting_latest_a_start_snapshot_and_a_branch(spark, table_name, tmp_path):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    spark.sql(f"INSERT INTO {table_name} VALUES (2, 'b')")
    s1, s2 = snapshots(spark, table_name)
    latest = sparkext.changelog_stream(table_name, str(tmp_path / "l"), {"starting": "latest"})
    late = attach(latest)
    assert latest.process_available() == []
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c')")
    latest.process_available()
    assert [r[:3] for r in late.union()] == [(3, "c", "INSERT")]
    given = sparkext.changelog_stream(
        table_name, str(tmp_path / "g"), {"start-snapshot-id": str(s1)}
    )
    from_s1 = attach(given)
    given.process_available()
    assert [r[:3] for r in from_s1.union()] == [(2, "b", "INSERT"), (3, "c", "INSERT")]
    # a branch: its own head, not the current snapshot
    spark.sql(f"ALTER TABLE {table_name} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {table_name}.branch_audit VALUES (9, 'z')")
    branch = sparkext.changelog_stream(
        table_name, str(tmp_path / "b"), {"branch": "audit", "start-snapshot-id": str(s2)}
    )
    on_branch = attach(branch)
    branch.process_available()
    assert [r[:3] for r in on_branch.union()] == [(3, "c", "INSERT"), (9, "z", "INSERT")]
    assert "branch='audit'" in repr(branch)
    with pytest.raises(OptionError, match=r"belongs to the changelog stream of .* branch audit"):
        sparkext.changelog_stream(table_name, str(tmp_path / "b"))
    with pytest.raises(OptionError, match=r"'nope' is not a branch of .*its branches: audit, main"):
        sparkext.changelog_stream(table_name, str(tmp_path / "n"), {"branch": "nope"})
    with pytest.raises(OptionError, match=r"Unknown option 'start-snapshot' .*did you mean"):
        sparkext.changelog_stream(table_name, str(tmp_path / "x"), {"start-snapshot": "1"})


def test_an_expired_range_is_one_sentence_naming_it(spark, table_name, tmp_path):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    checkpoint = str(tmp_path / "ck")
    stream = sparkext.changelog_stream(table_name, checkpoint)
    attach(stream)
    stream.process_available()
    (consumed,) = snapshots(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (2, 'b')")
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c')")
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table_name}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    (oldest,) = [
        r[0] for r in spark.sql(f"SELECT snapshot_id FROM {table_name}.snapshots").collect()
    ]
    with pytest.raises(ChangelogRangeLostError) as raised:
        stream.process_available()
    assert str(raised.value) == (
        f"The changes of {table_name} after snapshot {consumed} (the last one this stream "
        f"consumed, checkpoint {checkpoint}) through snapshot {oldest} (the oldest one retained "
        "on its history) are lost because the snapshots in between have expired; reload the "
        "table's current state and start a new checkpoint with "
        f"'start-snapshot-id'='{oldest}', and register the consumer (option 'consumer-name') so "
        "maintenance keeps the snapshots it still needs."
    )
    assert stream.consumed_snapshot_id == consumed  # nothing skipped


def test_a_registration_is_written_advances_ages_out_and_is_removed(spark, table_name, tmp_path):
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    (s1,) = snapshots(spark, table_name)
    checkpoint = str(tmp_path / "ck")
    stream = sparkext.changelog_stream(
        table_name, checkpoint, {"consumer-name": "to-es", "consumer-ttl": "1 h"}
    )
    key = consumer_key("to-es")

    def registration() -> dict:
        return json.loads(dict(spark.sql(f"SHOW TBLPROPERTIES {table_name}").collect())[key])

    first = registration()
    assert first == {
        "snapshot-id": None,
        "heartbeat": first["heartbeat"],
        "checkpoint": checkpoint,
        "ttl-ms": 3_600_000,
        "branch": None,
    }
    report = sparkext.changelog_consumers(table_name)
    assert report.needed.whole_history and report.needed.snapshot_id == s1
    attach(stream)
    stream.process_available()
    second = registration()
    assert second["snapshot-id"] == s1 and second["heartbeat"] >= first["heartbeat"]
    # a writer commits meanwhile: the stream's property updates never fail it
    spark.sql(f"INSERT INTO {table_name} VALUES (2, 'b')")
    stream.process_available()
    s2 = snapshots(spark, table_name)[-1]
    assert registration()["snapshot-id"] == s2
    # another consumer, further behind, and a stale one (its heartbeat older than its TTL)
    behind = sparkext.changelog_stream(
        table_name,
        str(tmp_path / "behind"),
        {"consumer-name": "audit", "start-snapshot-id": str(s1)},
    )
    stale = {"snapshot-id": None, "heartbeat": 0, "checkpoint": "/gone", "ttl-ms": 1000}
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ('{consumer_key('old')}' = "
              f"'{json.dumps(stale)}')")  # fmt: skip
    report = sparkext.changelog_consumers(table_name)
    assert [(c.registration.name, c.stale) for c in report.consumers] == [
        ("audit", False),
        ("old", True),
        ("to-es", False),
    ]
    assert (report.needed.snapshot_id, report.needed.consumer) == (s1, "audit")
    assert not report.needed.whole_history
    assert behind.unregister() is True
    assert sparkext.unregister_changelog_consumer(table_name, "old") is True
    assert sparkext.unregister_changelog_consumer(table_name, "old") is False
    report = sparkext.changelog_consumers(table_name)
    assert [c.registration.name for c in report.consumers] == ["to-es"]
    assert report.needed.snapshot_id == s2


CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    import sparkext
    warehouse, table, checkpoint, out, kill_on = sys.argv[1:6]
    spark = sparkext.session(master="local[1]", warehouse=warehouse, **{
        "spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1",
        "spark.driver.memory": "1g"})
    stream = sparkext.changelog_stream(table, checkpoint, {"max-snapshots-per-batch": "1"})

    def consume(frame, batch_id):
        batch = stream.current_batch
        rows = [list(r) for r in frame.select("id", "v", "_change_type",
                                               "_commit_snapshot_id").collect()]
        with open(os.path.join(out, f"batch-{batch_id}.json"), "w") as f:  # by batch id
            json.dump(rows, f)
        with open(os.path.join(out, f"range-{batch_id}-{os.getpid()}.json"), "w") as f:
            json.dump([batch.start_snapshot_id, batch.end_snapshot_id], f)
        if batch_id == int(kill_on):  # delivered, not committed: killed
            os.kill(os.getpid(), signal.SIGKILL)

    stream.foreach_batch(consume).process_available()
    """
)


class Killed(BaseException):
    """The in-process stand-in for SIGKILL: no ``except Exception`` on the way up catches it,
    and nothing after the raise runs in the stream that delivered the batch."""


def kill_a_process(warehouse, table_name: str, checkpoint, out, tmp_path) -> None:
    """CHILD in another Spark process, SIGKILLed after delivering batch 2."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.run(
        [PYTHON, str(script), str(warehouse), table_name, str(checkpoint), str(out), "2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == -9, child.stderr[-2000:]


def kill_in_process(warehouse, table_name: str, checkpoint, out, tmp_path) -> None:
    """CHILD's consumer on this session: the same files written, then ``Killed`` raised after
    delivering batch 2, before its commit; the stream is dropped."""
    stream = sparkext.changelog_stream(
        table_name, str(checkpoint), {"max-snapshots-per-batch": "1"}
    )

    def consume(frame, batch_id):
        batch = stream.current_batch
        found = [list(r) for r in frame.select(*CHANGE).collect()]
        (out / f"batch-{batch_id}.json").write_text(json.dumps(found))  # by batch id
        (out / f"range-{batch_id}-{os.getpid()}.json").write_text(
            json.dumps([batch.start_snapshot_id, batch.end_snapshot_id])
        )
        if batch_id == 2:  # delivered, not committed: killed
            raise Killed

    with pytest.raises(Killed):
        stream.foreach_batch(consume).process_available()


def killed_between_delivery_and_commit(spark, warehouse, table_name, tmp_path, kill) -> None:
    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"UPDATE {table_name} SET v = 'bb' WHERE id = 2")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c')")
    ids = snapshots(spark, table_name)
    checkpoint, out = tmp_path / "ck", tmp_path / "out"
    out.mkdir()
    kill(warehouse, table_name, checkpoint, out, tmp_path)
    killed = json.loads(next(out.glob("range-2-*.json")).read_text())
    assert sorted(p.name for p in out.glob("batch-*.json")) == [
        "batch-0.json", "batch-1.json", "batch-2.json"
    ]  # fmt: skip
    # the restart, here: batch 2 again with the same range, then the rest
    stream = sparkext.changelog_stream(
        table_name, str(checkpoint), {"max-snapshots-per-batch": "1"}
    )
    sink = attach(stream)
    done = stream.process_available()
    assert [(b.batch_id, b.redelivered) for b in done] == [(2, True), (3, False)]
    assert list(sink.ranges[2]) == killed == [ids[1], ids[2]]
    delivered = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("batch-*")}
    delivered.update({k: [list(r) for r in v] for k, v in sink.batches.items()})  # overwrites 2
    union = sorted(tuple(r) for b in delivered.values() for r in b)
    assert union == one_call(table_name, None, ids[-1])
    assert replay(Counter(), union) == state(spark, table_name, ids[-1])
    for k in range(len(ids)):  # and batch by batch, every intermediate state
        got = sorted(tuple(r) for b in range(k + 1) for r in delivered[b])
        assert replay(Counter(), got) == state(spark, table_name, ids[k])


def test_a_consumer_killed_between_delivery_and_commit_misses_and_repeats_nothing(
    spark, warehouse, table_name, tmp_path
):
    """The default tier's stand-in for the killed process: the same consumer, files and
    oracle, the kill an exception nothing catches, in this process."""
    killed_between_delivery_and_commit(spark, warehouse, table_name, tmp_path, kill_in_process)


@pytest.mark.stress
def test_a_process_killed_between_delivery_and_commit_misses_and_repeats_nothing(
    spark, warehouse, table_name, tmp_path
):
    killed_between_delivery_and_commit(spark, warehouse, table_name, tmp_path, kill_a_process)


def test_a_streaming_sql_job_reads_the_changelog_hint_exactly_once(spark, table_name, tmp_path):
    from sparkext.streaming import run_stream

    create(spark, table_name)
    sink = f"{table_name}_out"
    job = f"""
    CREATE TABLE {sink} (id INT, v STRING, change STRING, snapshot_id BIGINT);
    INSERT INTO {sink}
    SELECT id, UPPER(v) AS v, _change_type AS change, _commit_snapshot_id AS snapshot_id
    FROM {table_name} /*+ OPTIONS('changelog'='true', 'max-snapshots-per-batch'='1') */ AS o
    WHERE o.id <> 2;
    """
    checkpoint = tmp_path / "ck"
    lines: list[str] = []

    def run() -> None:
        stream = run_stream(spark, job, str(checkpoint), available_now=True, progress=lines.append)
        assert stream.sinks == [sink]
        stream.wait(poll_seconds=0.02)  # polled often: the default polls twice a second
        assert stream.state == "stopped"

    def held() -> list[tuple]:
        return sorted(tuple(r) for r in spark.table(sink).collect())

    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    run()
    (s1,) = snapshots(spark, table_name)
    assert held() == [(1, "A", "INSERT", s1), (3, "C", "INSERT", s1)]
    spark.sql(f"UPDATE {table_name} SET v = 'bb' WHERE id = 2")  # filtered out by the job
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")
    run()
    s2, s3 = snapshots(spark, table_name)[1:]
    expected = [(1, "A", "DELETE", s3), (1, "A", "INSERT", s1), (3, "C", "INSERT", s1)]
    assert held() == expected
    # a crash after the sink's commit and before the checkpoint's: the batch comes again and
    # the sink, which holds its mark, appends nothing twice
    progress = checkpoint / "changelog" / "changelog-stream.json"
    state_now = json.loads(progress.read_text())
    assert state_now["committed"] == {"batch-id": 2, "start": s2, "end": s3}
    state_now["committed"] = {"batch-id": 1, "start": s1, "end": s2}
    progress.write_text(json.dumps(state_now))
    run()
    assert held() == expected
    assert any("already holds it" in line for line in lines)
    assert json.loads(progress.read_text())["committed"]["batch-id"] == 2


def test_a_changelog_hint_refuses_state_a_primary_key_sink_and_backfills(spark, table_name):
    from sparkext.streaming import run_backfill, run_stream
    from sparkext.streaming.job import StreamingSqlError

    create(spark, table_name)
    hint = "/*+ OPTIONS('changelog'='true') */"
    counting = (
        f"INSERT INTO {table_name}_n SELECT v, count(*) AS n FROM {table_name} {hint} GROUP BY v"
    )
    with pytest.raises(StreamingSqlError, match=r"the aggregate COUNT\(\*\) keeps state across"):
        run_stream(spark, counting, "/tmp/unused-sparkext-ck")
    keyed = (
        f"CREATE TABLE {table_name}_k (id INT, v STRING, PRIMARY KEY (id) NOT ENFORCED);"
        f"INSERT INTO {table_name}_k SELECT id, v FROM {table_name} {hint}"
    )
    with pytest.raises(StreamingSqlError, match="has a primary key, and a changelog source's rows"):
        run_stream(spark, keyed, "/tmp/unused-sparkext-ck")
    with pytest.raises(StreamingSqlError, match="which only stream mode does"):
        run_backfill(spark, keyed, "2024-01-01", "2024-01-02")


def test_a_handle_misused_says_what_to_do(spark, table_name, tmp_path):
    """No consumer, a bad interval, a second start: one sentence each, nothing consumed."""
    import threading

    from sparkext.errors import SparkextError

    create(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a')")
    stream = sparkext.changelog_stream(table_name, str(tmp_path / "ck"))
    with pytest.raises(SparkextError, match=r"has no consumer; call foreach_batch\(function\)"):
        stream.process_available()
    assert stream.consumed_snapshot_id is None
    release = threading.Event()
    stream.foreach_batch(lambda frame, batch_id: release.wait(60))
    with pytest.raises(OptionError, match=r"interval 'often' is invalid"):
        stream.start("often")
    stream.start("1 second")
    try:
        with pytest.raises(SparkextError, match=r"is already started; stop\(\) it first\."):
            stream.start("1 second")
    finally:
        release.set()
        stream.stop()
    assert stream.consumed_snapshot_id == snapshots(spark, table_name)[-1]
