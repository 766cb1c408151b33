"""``python -m benchmarks.run`` writes its results where git does not track them."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import run

REPO = Path(run.__file__).resolve().parent.parent
NOW = dt.datetime(2026, 11, 23, 10, 15, 0, tzinfo=dt.timezone.utc)


def test_the_default_output_is_a_new_file_under_the_local_directory():
    args = run.parse_args(["routing_overhead"])
    assert args.out.parent == run.LOCAL_RESULTS
    assert args.out.name.startswith("routing_overhead-") and args.out.suffix == ".json"
    assert run.default_out([], NOW).name == "all-20261123T101500Z.json"
    assert run.default_out(["cdc_ingest", "stream_backfill"], NOW).name == (
        "cdc_ingest+stream_backfill-20261123T101500Z.json"
    )


def test_out_names_the_file_and_json_is_its_old_name(tmp_path):
    assert run.parse_args(["--out", str(tmp_path / "a.json")]).out == tmp_path / "a.json"
    assert run.parse_args(["--json", str(tmp_path / "b.json")]).out == tmp_path / "b.json"


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)
def test_git_ignores_the_default_output_and_tracks_no_file_there():
    path = run.default_out(["stream_backfill"], NOW).relative_to(REPO)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO, check=False)
    assert ignored.returncode == 0, f"{path} is not ignored by git"
    tracked = subprocess.run(
        ["git", "ls-files", str(run.LOCAL_RESULTS.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert tracked.stdout == ""


def test_a_bad_sustained_shape_is_one_sentence_naming_the_variable():
    from benchmarks.cdc_ingest import sustained_shape

    assert sustained_shape("200000x10") == (200_000, 10)
    assert sustained_shape("0") is None
    for bad in ("0x0", "200000x0", "10000x4", "lots", "200000", "2\u00b2x4"):
        with pytest.raises(ValueError, match="SPARKEXT_BENCH_SUSTAINED must be 0 or"):
            sustained_shape(bad)


def test_bad_table_sizes_are_one_sentence_naming_the_variable():
    from benchmarks.cdc_ingest import table_sizes

    assert table_sizes("1000000, 16000000") == [1_000_000, 16_000_000]
    for bad in ("", "1M", "16000000,1000000", "1000000,1000000", "64000000", "0,10"):
        with pytest.raises(ValueError, match="SPARKEXT_BENCH_SIZES must list increasing"):
            table_sizes(bad)
