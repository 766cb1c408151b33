"""The changelog stream's planner: batches, re-delivery, lost ranges, registrations (no Spark)."""

from __future__ import annotations

import json

import pytest

from sparkext.actions.history.changelog_stream import ROUTINE
from sparkext.declarations import bind_options
from sparkext.durations import parse_ms as parse_duration_ms
from sparkext.errors import ChangelogRangeLostError, OptionError
from sparkext.planning.changelog import History, Ref, SnapshotMeta
from sparkext.planning.changelog_stream import (
    PlannedBatch,
    Progress,
    Registration,
    consumer_key,
    consumer_report,
    next_step,
    oldest_needed,
    registrations,
    start_position,
)

DAY = 86_400_000


def chain(*ids: int, start: int = 0, replace: tuple[int, ...] = (), parent=None) -> History:
    """Snapshots ``ids`` in a line, 10 ms apart; the first one's parent is ``parent``."""
    snapshots = {}
    previous = parent
    for n, sid in enumerate(ids):
        operation = "replace" if sid in replace else "append"
        snapshots[sid] = SnapshotMeta(sid, previous, start + 10 * n, operation)
        previous = sid
    return History("lake.db.t", snapshots, {"main": Ref("main", ids[-1], True)}, ids[-1])


def test_batches_cover_the_range_in_order_and_respect_the_limit():
    history = chain(1, 2, 3, 4, 5)
    progress = Progress("lake.db.t", None, None)
    seen = []
    while True:
        step = next_step(history, progress, max_snapshots=2)
        if step.batch is None:
            break
        seen.append((step.batch, [s.snapshot_id for s in step.snapshots]))
        progress = progress.plan(step.batch).commit(step.batch)
    assert seen == [
        (PlannedBatch(0, None, 2), [1, 2]),
        (PlannedBatch(1, 2, 4), [3, 4]),
        (PlannedBatch(2, 4, 5), [5]),
    ]
    assert progress.consumed == 5


def test_a_planned_uncommitted_batch_is_delivered_again_with_the_same_id_and_range():
    history = chain(1, 2, 3)
    planned = Progress("lake.db.t", None, 1).plan(PlannedBatch(4, 1, 2))
    step = next_step(history, planned)  # the head moved on to 3: the range stays (1, 2]
    assert (step.batch, step.again) == (PlannedBatch(4, 1, 2), True)
    after = planned.commit(step.batch)
    follow = next_step(history, after)
    assert (follow.batch, follow.again) == (PlannedBatch(5, 2, 3), False)


def test_progress_survives_its_text():
    progress = Progress("lake.db.t", "audit", 7).plan(PlannedBatch(3, 7, 9))
    assert Progress.from_text(progress.to_text()) == progress
    assert json.loads(progress.to_text())["planned"] == {"batch-id": 3, "start": 7, "end": 9}


def test_until_keeps_available_now_at_the_head_it_saw_first():
    history = chain(1, 2, 3)
    step = next_step(history, Progress("lake.db.t", None, None), until=2)
    assert step.batch == PlannedBatch(0, None, 2)


def test_a_replace_only_range_changes_no_row():
    history = chain(1, 2, 3, replace=(2, 3))
    assert not next_step(history, Progress("lake.db.t", None, 1)).changes_rows
    assert next_step(history, Progress("lake.db.t", None, None)).changes_rows


def test_an_expired_range_is_one_sentence_naming_the_range_and_the_fix():
    history = chain(5, 6, parent=4)  # 1..4 expired
    with pytest.raises(ChangelogRangeLostError) as raised:
        next_step(history, Progress("lake.db.t", None, 2), checkpoint="/ck/t")
    assert str(raised.value) == (
        "The changes of lake.db.t after snapshot 2 (the last one this stream consumed, "
        "checkpoint /ck/t) through snapshot 5 (the oldest one retained on its history) are "
        "lost because the snapshots in between have expired; reload the table's current state "
        "and start a new checkpoint with 'start-snapshot-id'='5', and register the consumer "
        "(option 'consumer-name') so maintenance keeps the snapshots it still needs."
    )
    with pytest.raises(ChangelogRangeLostError, match="from its first snapshot through snapshot 5"):
        next_step(history, Progress("lake.db.t", None, None))
    # a re-delivery whose start expired meanwhile says the same
    pending = Progress("lake.db.t", None, 2).plan(PlannedBatch(0, 2, 6))
    with pytest.raises(ChangelogRangeLostError, match="after snapshot 2 "):
        next_step(history, pending)


def test_a_rollback_past_the_position_is_its_own_sentence():
    history = chain(1, 2, 3)
    rolled = History(
        "lake.db.t",
        {**history.snapshots, 9: SnapshotMeta(9, 1, 50, "append")},
        {"main": Ref("main", 9, True)},
        9,
    )
    with pytest.raises(ChangelogRangeLostError) as raised:
        next_step(rolled, Progress("lake.db.t", None, 3))
    assert str(raised.value) == (
        "The changes of lake.db.t after snapshot 3 cannot be read: snapshot 3, the last one this "
        "stream consumed, is no longer an ancestor of snapshot 9 (the table was rolled back or "
        "the branch replaced); start a new checkpoint with 'start-snapshot-id' set to a snapshot "
        "of the current history."
    )


def test_start_positions_and_their_errors():
    history = chain(1, 2)
    assert start_position(history, None, "earliest", None) is None
    assert start_position(history, None, "latest", None) == 2
    assert start_position(history, "main", "earliest", 1) == 1
    with pytest.raises(OptionError, match=r"'start-snapshot-id'='7' is not a retained snapshot"):
        start_position(history, None, "earliest", 7)
    with pytest.raises(OptionError) as raised:
        start_position(history, "dev", "earliest", None)
    assert str(raised.value) == (
        "'dev' is not a branch of lake.db.t (its branches: main); give 'branch' as one of them, "
        "or leave it out to follow the current snapshot."
    )


def test_options_are_checked_with_the_usual_sentences():
    bound = bind_options(ROUTINE, {"consumer-ttl": "2 d", "max-snapshots-per-batch": "3"})
    assert (bound["consumer-ttl"], bound["max-snapshots-per-batch"]) == (2 * DAY, 3)
    assert bound["starting"] == "earliest" and bound["consumer-name"] == ""
    with pytest.raises(OptionError, match=r"Unknown option 'consumer' .*valid options: branch"):
        bind_options(ROUTINE, {"consumer": "x"})
    with pytest.raises(OptionError, match=r"Option 'starting' .* expects one of earliest, latest"):
        bind_options(ROUTINE, {"starting": "now"})
    with pytest.raises(OptionError, match=r"Option 'consumer-name' .* expects a name of letters"):
        bind_options(ROUTINE, {"consumer-name": "a b"})
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration_ms("soon")


def test_registrations_are_read_stale_ones_age_out_and_the_oldest_need_wins():
    history = chain(1, 2, 3, start=1000)
    now = 10 * DAY
    properties = {
        consumer_key("es"): Registration("es", 3, now - DAY, "/ck/es").to_text(),
        consumer_key("audit"): Registration("audit", 2, now - 6 * DAY).to_text(),
        consumer_key("old"): Registration("old", 1, now - 8 * DAY).to_text(),  # 7-day TTL
        consumer_key("short"): Registration("short", 1, now - 2000, ttl_ms=1000).to_text(),
        consumer_key("broken"): "{not json",
        "write.format.default": "parquet",
    }
    found = registrations(properties)
    assert [r.name for r in found] == ["audit", "es", "old", "short"]  # broken one left out
    report = consumer_report(history, properties, now)
    assert [(c.registration.name, c.stale) for c in report.consumers] == [
        ("audit", False),
        ("es", False),
        ("old", True),
        ("short", True),
    ]
    assert (report.needed.snapshot_id, report.needed.timestamp_ms) == (2, 1010)
    assert report.needed.consumer == "audit"
    # the stale ones would have needed snapshot 1; once "audit" ages out, "es" decides
    assert oldest_needed(history, found, now + 2 * DAY).snapshot_id == 3
    # a consumer whose snapshot already expired needs nothing (its stream reports the loss)
    assert oldest_needed(history, [Registration("x", 99, now)], now).snapshot_id is None
    # one from before the first snapshot needs the whole history
    whole = oldest_needed(history, [Registration("y", None, now)], now)
    assert (whole.whole_history, whole.snapshot_id, whole.timestamp_ms) == (True, 1, 1000)


def test_a_registration_is_json_maintenance_can_read_without_sparkext():
    text = Registration("es", 42, 1_700_000_000_000, "s3://b/ck", 3_600_000, "audit").to_text()
    assert json.loads(text) == {
        "snapshot-id": 42,
        "heartbeat": 1_700_000_000_000,
        "checkpoint": "s3://b/ck",
        "ttl-ms": 3_600_000,
        "branch": "audit",
    }
