"""Small file operations on the checkpoint directory (local, HDFS or object store, via pyarrow)."""

from __future__ import annotations

import re
from collections.abc import Callable

_BATCH = re.compile(r"batch=(\d+)$")


def _fs(path: str):
    """pyarrow's filesystem and path for ``path`` (a local path, relative ones too, or a URI)."""
    from sparkext.fs import Location

    location = Location.of(path)
    return location.filesystem, location.path


def read_or_create_id(checkpoint: str, make: Callable[[], str]) -> str:
    """The checkpoint's id (a UUID kept in ``<checkpoint>/id``), created on first use."""
    filesystem, base = _fs(checkpoint)
    path = f"{base.rstrip('/')}/id"
    filesystem.create_dir(base, recursive=True)
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read().decode().strip()
    except (FileNotFoundError, OSError):
        value = make()
        with filesystem.open_output_stream(path) as stream:
            stream.write(value.encode())
        return value


def remove_batches_before(directory: str, first_kept: int) -> int:
    """Delete ``batch=N`` sub-directories with N < first_kept; return how many went."""
    from pyarrow import fs

    filesystem, base = _fs(directory)
    try:
        entries = filesystem.get_file_info(fs.FileSelector(base, allow_not_found=True))
    except FileNotFoundError:
        return 0
    removed = 0
    for entry in entries:
        match = _BATCH.search(entry.path)
        if match and int(match.group(1)) < first_kept and entry.type == fs.FileType.Directory:
            filesystem.delete_dir(entry.path)
            removed += 1
    return removed


def remove_tree(directory: str) -> None:
    """Delete ``directory`` and everything under it; nothing when it does not exist."""
    from pyarrow import fs

    filesystem, base = _fs(directory)
    if filesystem.get_file_info(base).type != fs.FileType.NotFound:
        filesystem.delete_dir(base)


def tree_size(directory: str) -> tuple[int, int]:
    """Number and bytes of the data files under ``directory`` (0, 0 when it does not exist)."""
    from pyarrow import fs

    filesystem, base = _fs(directory)
    try:
        entries = filesystem.get_file_info(
            fs.FileSelector(base, recursive=True, allow_not_found=True)
        )
    except FileNotFoundError:
        return 0, 0
    files = [
        e for e in entries if e.type == fs.FileType.File and not e.base_name.startswith(("_", "."))
    ]
    return len(files), sum(e.size for e in files)


def missing(location: str) -> bool:
    """Whether ``location`` (a path or URI, no glob) surely names nothing at all; False when
    it cannot be told here (a scheme pyarrow does not reach: Spark's own read then decides)."""
    from pyarrow import fs

    try:
        filesystem, base = _fs(location)
        return filesystem.get_file_info(base).type == fs.FileType.NotFound
    except Exception:
        return False


def batch_directories(root: str) -> list[str]:
    """The ``batch=N`` directories under ``root``, as URIs or paths like ``root`` itself."""
    from pyarrow import fs

    from sparkext.fs import Location

    location = Location.of(root)
    try:
        entries = location.filesystem.get_file_info(
            fs.FileSelector(location.path, allow_not_found=True)
        )
    except FileNotFoundError:
        return []
    return sorted(
        location.child(e.base_name).uri
        for e in entries
        if e.type == fs.FileType.Directory and _BATCH.search(e.path)
    )
