"""The changelog planner: range rules, what each snapshot reads, packing reads (pure, no Spark)."""

from __future__ import annotations

import datetime as dt

import pytest

from sparkext.errors import ProcedureArgumentError
from sparkext.planning.changelog import (
    Bound,
    Change,
    FileRead,
    History,
    Lane,
    Needs,
    RangeRequest,
    Ref,
    Role,
    SnapshotFiles,
    SnapshotMeta,
    bounds,
    change_options,
    file_reads,
    needs,
    pack,
    parse_bound,
    resolve_range,
)

pytestmark = pytest.mark.pure
UTC = dt.timezone.utc
TOTALS = {"total-data-files": "1", "total-delete-files": "0"}


def snap(sid, parent, ts, op="append", **summary):
    return SnapshotMeta(sid, parent, ts, op, {**TOTALS, **summary})


# main: 1 <- 2 <- 3 (replace) <- 4 <- 5 ; branch b: 2 <- 6 ; tag v2 at 2
MAIN = [
    snap(1, None, 100),
    snap(2, 1, 200, "overwrite"),
    snap(3, 2, 300, "replace"),
    snap(4, 3, 400, "delete"),
    snap(5, 4, 500),
    snap(6, 2, 600),
]
HISTORY = History(
    "lake.db.t",
    {s.snapshot_id: s for s in MAIN},
    {"v2": Ref("v2", 2, False), "b": Ref("b", 6, True), "main": Ref("main", 5, True)},
    current_snapshot_id=5,
)


def ids(found):
    return [c.snapshot.snapshot_id for c in found.changes]


def by_id(sid, what="start"):
    return Bound(f"{what} => '{sid}'", snapshot_id=sid)


def at(ms, what="start"):
    return Bound(f"{what} time", timestamp_ms=ms)


def test_whole_history_by_default_with_ordinals_skipping_replace():
    found = resolve_range(HISTORY, None, None)
    assert [s.snapshot_id for s in found.snapshots] == [1, 2, 3, 4, 5]
    assert [(c.ordinal, c.snapshot.snapshot_id) for c in found.changes] == [
        (0, 1),
        (1, 2),
        (2, 4),
        (3, 5),
    ]
    assert found.changes[0].parent is None and found.changes[2].parent.snapshot_id == 3


def test_start_is_exclusive_and_end_inclusive():
    found = resolve_range(HISTORY, by_id(2), by_id(4, "end"))
    assert ids(found) == [4]
    assert found.changes[0].ordinal == 0  # ordinals count within the range, as Iceberg's
    assert resolve_range(HISTORY, by_id(4), by_id(4, "end")).changes == ()


def test_the_range_follows_the_end_ancestry_not_time():
    # branch b's head 6 (committed after 5) has ancestry 6 <- 2 <- 1
    assert ids(resolve_range(HISTORY, by_id(1), Bound("end", ref="b"))) == [2, 6]
    assert ids(resolve_range(HISTORY, Bound("s", ref="v2"), Bound("e", ref="b"))) == [6]


def test_timestamps_pick_the_snapshot_current_then():
    # Iceberg: start-timestamp -> newest ancestor committed at or before it (exclusive)
    assert ids(resolve_range(HISTORY, at(200), None)) == [4, 5]  # exactly at 2's commit
    assert ids(resolve_range(HISTORY, at(250), None)) == [4, 5]
    assert ids(resolve_range(HISTORY, at(99), None)) == [1, 2, 4, 5]  # before the first
    assert ids(resolve_range(HISTORY, None, at(450, "end"))) == [1, 2, 4]
    assert resolve_range(HISTORY, None, at(50, "end")).changes == ()  # before the first
    assert resolve_range(HISTORY, at(900), None).changes == ()  # after the current one


def test_start_time_must_be_before_end_time():
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(HISTORY, at(400), at(300, "end"))
    assert str(caught.value) == (
        "The changelog start (start time) is not before its end (end time); give a start time "
        "earlier than the end time."
    )


def test_unknown_snapshot():
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(HISTORY, by_id(77), None)
    assert str(caught.value) == (
        "Snapshot 77 (start => '77') is not a snapshot of lake.db.t; list them with SELECT "
        "snapshot_id, committed_at FROM lake.db.t.snapshots."
    )


def test_start_not_an_ancestor_of_end():
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(HISTORY, by_id(6), None)  # 6 is on branch b, not on main
    assert str(caught.value) == (
        "Snapshot 6 (start => '6') is not an ancestor of the end snapshot 5 of lake.db.t; "
        "choose a start on the end's history (SELECT * FROM lake.db.t.history)."
    )


EXPIRED = History(
    "lake.db.t",
    {s.snapshot_id: s for s in MAIN if s.snapshot_id >= 4},
    current_snapshot_id=5,
)


def test_an_expired_start():
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(EXPIRED, by_id(3), None)
    assert str(caught.value) == (
        "Snapshot 3 of lake.db.t (start => '3') has expired; choose a changelog start among "
        "the retained snapshots (SELECT snapshot_id, committed_at FROM lake.db.t.snapshots)."
    )


def test_from_the_beginning_needs_the_whole_history():
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(EXPIRED, None, None)
    assert str(caught.value) == (
        "The history of lake.db.t before snapshot 4 has expired, so a changelog from the "
        "beginning cannot be read; give a start at or after snapshot 4."
    )
    assert ids(resolve_range(EXPIRED, by_id(4), None)) == [5]
    with pytest.raises(ProcedureArgumentError, match="current at start time have expired"):
        resolve_range(EXPIRED, at(150), None)


def test_a_start_behind_expired_history():
    broken = History(
        "lake.db.t", {s.snapshot_id: s for s in MAIN if s.snapshot_id != 3}, current_snapshot_id=5
    )
    with pytest.raises(ProcedureArgumentError) as caught:
        resolve_range(broken, by_id(1), None)
    assert str(caught.value) == (
        "Snapshot 1 (start => '1') is not a retained ancestor of the end snapshot 5 of "
        "lake.db.t: the end's history is retained back to snapshot 4 only; start at or after it."
    )


def test_an_empty_table_has_an_empty_range():
    found = resolve_range(History("lake.db.t", {}), None, None)
    assert found.end_id is None and found.changes == ()


def test_bounds_from_text_refs_and_iceberg_options():
    refs = HISTORY.refs
    assert parse_bound("5", "end", refs, UTC).snapshot_id == 5
    assert parse_bound("v2", "start", refs, UTC).ref == "v2"
    shanghai = dt.timezone(dt.timedelta(hours=8))
    assert parse_bound("1970-01-01 08:00:01", "end", refs, shanghai).timestamp_ms == 1000
    assert parse_bound("1970-01-01T00:00:01+00:00", "end", refs, shanghai).timestamp_ms == 1000
    start, end = bounds(RangeRequest(start_timestamp_ms=5, end_snapshot_id=4), refs, UTC)
    assert (start.timestamp_ms, end.snapshot_id) == (5, 4)
    with pytest.raises(ProcedureArgumentError) as caught:
        parse_bound("yesterday", "start", refs, UTC)
    assert str(caught.value) == (
        "The changelog start 'yesterday' is neither a snapshot id, a tag or branch (this table "
        "has: b, main, v2) nor a time; write a snapshot id such as 5837411, a ref name, or a "
        "time such as '2026-11-21 08:00:00'."
    )


def test_a_bound_given_twice():
    with pytest.raises(ProcedureArgumentError) as caught:
        bounds(RangeRequest(start="2", start_snapshot_id=3), HISTORY.refs, UTC)
    assert str(caught.value) == (
        "The changelog start is given twice (start => '2' and option 'start-snapshot-id' = '3'); "
        "keep one."
    )
    with pytest.raises(ProcedureArgumentError, match="end is given twice"):
        bounds(RangeRequest(end_snapshot_id=3, end_timestamp_ms=9), HISTORY.refs, UTC)


def test_needs_reads_the_summary_and_treats_missing_totals_as_unknown():
    parent = snap(1, None, 0, **{"total-delete-files": "2"})
    appended = snap(2, 1, 0, **{"added-data-files": "1"})
    assert needs(Change(0, appended, parent)) == Needs(
        added=True, removed=False, deletes=False, parent_deletes=True
    )
    deleting = snap(3, 1, 0, "delete", **{"added-delete-files": "1"})
    assert needs(Change(0, deleting, None)).deletes
    unknown = SnapshotMeta(4, 1, 0, "overwrite", {})  # a writer that left no summary
    found = needs(Change(0, unknown, SnapshotMeta(1, None, 0, "append", {})))
    assert found.added and found.removed and found.deletes and found.parent_deletes


def change(sid=5, parent=4, ordinal=0):
    return Change(ordinal, snap(sid, parent, sid * 10), snap(parent, None, parent * 10))


def roles(reads):
    return [(r.path, r.role, r.deletes_at, r.checked) for r in reads]


def test_append_reads_added_files_as_written():
    reads = file_reads(change(), SnapshotFiles(added=("a", "b")), parent_deletes=True)
    assert roles(reads) == [("a", Role.ADDED, None, False), ("b", Role.ADDED, None, False)]


def test_copy_on_write_reads_removed_files_live_at_the_parent():
    files = SnapshotFiles(added=("new",), removed=("old",))
    assert roles(file_reads(change(), files, parent_deletes=False)) == [
        ("new", Role.ADDED, None, False),
        ("old", Role.BEFORE, None, False),  # no deletes at the parent: as written
    ]
    assert roles(file_reads(change(), files, parent_deletes=True))[1] == (
        "old",
        Role.BEFORE,
        4,
        False,
    )


def test_new_deletes_read_affected_files_before_and_after():
    files = SnapshotFiles(added=("n1", "n2"), affected=("f",), added_with_deletes=("n2",))
    assert roles(file_reads(change(), files, parent_deletes=True)) == [
        ("n1", Role.ADDED, None, False),
        ("n2", Role.ADDED, None, True),  # some rows may not survive their own snapshot
        ("f", Role.BEFORE, 4, False),
        ("f", Role.AFTER, 5, False),
        ("n2", Role.AFTER, 5, False),
    ]


def test_pack_puts_each_file_once_per_scan():
    def read(path, role, ordinal):
        return FileRead(path, role, ordinal, ordinal, 0, None)

    sets = pack(
        [
            read("a", Role.ADDED, 0),
            read("b", Role.ADDED, 0),
            read("a", Role.BEFORE, 1),
            read("a", Role.AFTER, 1),
            read("a", Role.BEFORE, 2),
            read("c", Role.BEFORE, 2),
            read("a", Role.AFTER, 2),
        ]
    )
    layout = [(s.lane, s.index, [(r.path, r.ordinal) for r in s.reads]) for s in sets]
    assert layout == [
        (Lane.ROWS, 0, [("a", 0), ("b", 0), ("c", 2)]),
        (Lane.ROWS, 1, [("a", 1)]),
        (Lane.ROWS, 2, [("a", 2)]),
        (Lane.POSITIONS, 3, [("a", 1)]),
        (Lane.POSITIONS, 4, [("a", 2)]),
    ]
    assert pack([]) == ()


def test_change_options_follow_iceberg():
    columns = ["id", "v"]
    # compute_updates defaults to "identifier columns were given", not "the table has some"
    assert not change_options("t", columns, ["id"], None, None, False).compute_updates
    assert change_options("t", columns, [], None, ["id"], False).compute_updates
    chosen = change_options("t", columns, ["id"], True, None, False)
    assert chosen.compute_updates and chosen.identifier_columns == ("id",)
    assert not change_options("t", columns, [], False, ["id"], True).compute_updates


@pytest.mark.parametrize(
    ("identifiers", "compute", "given", "net", "message"),
    [
        (
            [],
            True,
            None,
            False,
            "Cannot compute updates of t: it has no identifier fields; give identifier_columns "
            "=> array('id', ...) or set compute_updates => false.",
        ),
        (
            ["id"],
            True,
            None,
            True,
            "net_changes and compute_updates cannot be combined (Iceberg refuses it too); set "
            "compute_updates => false, or net_changes => false.",
        ),
        (
            [],
            None,
            ["id"],
            True,  # given identifier columns turn updates on, as in Iceberg
            "net_changes and compute_updates cannot be combined (Iceberg refuses it too); set "
            "compute_updates => false, or net_changes => false.",
        ),
        (
            [],
            None,
            ["nope"],
            False,
            "Identifier column 'nope' is not a column of t; columns: id, v.",
        ),
    ],
)
def test_change_option_errors(identifiers, compute, given, net, message):
    with pytest.raises(ProcedureArgumentError) as caught:
        change_options("t", ["id", "v"], identifiers, compute, given, net)
    assert str(caught.value) == message
