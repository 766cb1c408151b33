"""sparkext.fs: locations are local paths or URIs, handed to pyarrow (and Spark) as written."""

from __future__ import annotations

from pyarrow import fs as pafs

from sparkext.actions.cdc.checkpoint import batch_directories
from sparkext.fs import Location, normalize, pyarrow_uri, scheme
from sparkext.streaming.stream import STATE_FILE, StreamState


def test_uris_are_kept_and_local_paths_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize("rel/ck") == str(tmp_path / "rel" / "ck")
    for uri in ("file:///tmp/ck", "s3://bucket/ck", "s3a://bucket/a b", "hdfs://nn:8020/ck"):
        assert normalize(uri) == uri  # no Path.resolve() on a URI: s3:// stays s3://
        assert normalize(uri + "/") == uri
    assert scheme("/tmp/a:b") is None and scheme("C:/x") is None and scheme("gs://b") == "gs"
    assert pyarrow_uri("s3a://bucket/ck") == "s3://bucket/ck"


def test_file_uris_and_relative_paths_resolve_to_the_local_filesystem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"file://{tmp_path}/a b/ck"  # literal text, as Spark (Hadoop's Path) reads it
    by_uri = Location.of(uri)
    assert by_uri.uri == uri and by_uri.path == str(tmp_path / "a b" / "ck")
    assert Location.of(f"file://{tmp_path}/a%20b").path == f"{tmp_path}/a%20b"
    assert isinstance(by_uri.filesystem, pafs.LocalFileSystem)
    assert by_uri.child("offsets").uri == uri + "/offsets"
    relative = Location.of("rel/ck")
    assert relative.uri == relative.path == str(tmp_path / "rel" / "ck")
    for location in (by_uri, relative):
        location.make_dirs()
        state = location.child("state.json")
        assert state.read_text() is None
        state.write_text('{"a": 1}')
        state.write_text('{"a": 2}')  # replaced, nothing left beside it
        assert state.read_text() == '{"a": 2}'
    assert sorted(p.name for p in (tmp_path / "a b" / "ck").iterdir()) == ["state.json"]


def test_stream_state_goes_through_pyarrow_not_the_local_disk(tmp_path, monkeypatch):
    """A non-local filesystem (pyarrow's mock://, in memory) holds the stream's state."""
    monkeypatch.chdir(tmp_path)
    checkpoint = Location.of("mock:///bucket/ck")
    assert not isinstance(checkpoint.filesystem, pafs.LocalFileSystem)
    checkpoint.make_dirs()
    state_file = checkpoint.child(STATE_FILE)
    assert StreamState.load(state_file) == StreamState()
    state = StreamState({"lake.db.bids": "2020-04-16 12:00:00+00:00"}, {"1": "2020-04-16 11:59:00"})
    state.save(state_file)
    assert StreamState.load(state_file) == state
    assert list(tmp_path.iterdir()) == []


def test_cdc_checkpoint_helpers_take_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("batch=1", "batch=2", "other"):
        (tmp_path / "logs" / name).mkdir(parents=True)
    assert batch_directories("logs") == [str(tmp_path / "logs" / f"batch={n}") for n in (1, 2)]
    uri = (tmp_path / "logs").as_uri()
    assert batch_directories(uri + "/") == [f"{uri}/batch={n}" for n in (1, 2)]
