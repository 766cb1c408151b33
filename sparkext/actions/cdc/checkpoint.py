"""Small file operations on the checkpoint directory (local, HDFS or object store, via pyarrow).

Floor: actions (the work, typed results).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sparkext.errors import IngestError
from sparkext.fs import Location

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem  # untyped (no stubs): Any

_BATCH = re.compile(r"batch=(\d+)$")


def _fs(path: str) -> tuple[FileSystem, str]:
    """pyarrow's filesystem and path for ``path`` (a local path, relative ones too, or a URI)."""

    location = Location.of(path)
    return location.filesystem, location.path


def read_or_create_id(checkpoint: str, make: Callable[[], str]) -> str:
    """The checkpoint's id (a UUID kept in ``<checkpoint>/id``), created on first use."""
    filesystem, base = _fs(checkpoint)
    path = f"{base.rstrip('/')}/id"
    filesystem.create_dir(base, recursive=True)
    try:
        with filesystem.open_input_stream(path) as stream:
            found: str = stream.read().decode().strip()
            return found
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
        gone: bool = filesystem.get_file_info(base).type == fs.FileType.NotFound
        return gone
    except Exception:
        return False


def batch_directories(root: str) -> list[str]:
    """The ``batch=N`` directories under ``root``, as URIs or paths like ``root`` itself."""
    from pyarrow import fs

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


LOCK_NAME = "_in_use.json"
LOCK_TTL_S = 60.0  # a holder renews every third of it; a crashed holder's lock lapses after it


def _lock_text(owner: dict[str, Any]) -> bytes:
    import json

    return json.dumps(owner, sort_keys=True).encode()


def _read_lock(filesystem: FileSystem, path: str) -> dict[str, Any] | None:
    import json

    try:
        with filesystem.open_input_stream(path) as stream:
            holder: dict[str, Any] = json.loads(stream.read().decode())
            return holder
    except (FileNotFoundError, OSError, ValueError):
        return None


def _create_exclusive(filesystem: FileSystem, path: str, text: bytes) -> bool:
    """Create ``path`` unless it exists. Atomic on a local disk (``O_EXCL``); elsewhere a
    check, a write and a read-back (the last writer wins and the others see it)."""
    import os
    import time

    from pyarrow import fs

    if isinstance(filesystem, fs.LocalFileSystem):
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(handle, "wb") as out:
            out.write(text)
        return True
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        return False
    with filesystem.open_output_stream(path) as stream:
        stream.write(text)
    time.sleep(0.5)  # another writer's file, written meanwhile, is the one read back
    with filesystem.open_input_stream(path) as stream:
        same: bool = stream.read() == text
        return same


def _live(holder: dict[str, Any], host: str) -> bool:
    """Whether a lock's holder may still be writing: it renewed within the TTL and, on this
    host, its process is alive (a crash on this host lets go at once, not after the TTL)."""
    import os
    import time

    if float(holder.get("expires", 0)) <= time.time():
        return False
    if holder.get("host") == host and isinstance(holder.get("pid"), int):
        try:
            os.kill(holder["pid"], 0)
        except ProcessLookupError:
            return False
        except OSError:  # alive, another user's
            return True
    return True


def busy_sentence(checkpoint: str, holder: dict[str, Any]) -> str:
    """Who holds a checkpoint, in one sentence.

    >>> print(busy_sentence("/ck", {"what": "ingest_cdc into lake.db.t", "host": "h",
    ...     "pid": 7, "since": "2026-11-21 08:00:00 UTC"}))  # doctest: +NORMALIZE_WHITESPACE
    Checkpoint '/ck' is in use by ingest_cdc into lake.db.t on host h (process 7) since
    2026-11-21 08:00:00 UTC; one writer at a time may use a checkpoint: wait for it to end, or
    stop it (a holder that crashed lets go within a minute).
    """
    return (
        f"Checkpoint '{checkpoint}' is in use by {holder.get('what', 'another writer')} on host "
        f"{holder.get('host', '?')} (process {holder.get('pid', '?')}) since "
        f"{holder.get('since', '?')}; one writer at a time may use a checkpoint: wait for it to "
        "end, or stop it (a holder that crashed lets go within a minute)."
    )


def hold(checkpoint: str, what: str, ttl_s: float = LOCK_TTL_S) -> AbstractContextManager[None]:
    """Hold ``checkpoint`` for one writer while the block runs (renewed on a daemon thread,
    released at the end); another live holder is :class:`~sparkext.errors.IngestError` naming
    it. A lock whose holder stopped renewing it for ``ttl_s`` is taken over."""
    import contextlib
    import datetime as dt
    import os
    import socket
    import threading
    import time
    import uuid

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        filesystem, base = _fs(checkpoint)
        filesystem.create_dir(base, recursive=True)
        path = f"{base.rstrip('/')}/{LOCK_NAME}"
        token = uuid.uuid4().hex
        since = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        owner: dict[str, Any] = {"what": what, "host": socket.gethostname(), "pid": os.getpid()}
        owner.update(since=since, token=token)

        def text() -> bytes:
            return _lock_text({**owner, "expires": time.time() + ttl_s})

        for _ in range(3):
            if _create_exclusive(filesystem, path, text()):
                break
            holder = _read_lock(filesystem, path)
            if holder is not None and _live(holder, owner["host"]):
                raise IngestError(busy_sentence(checkpoint, holder))
            with contextlib.suppress(OSError):  # lapsed (or unreadable): take it over
                filesystem.delete_file(path)
        else:
            raise IngestError(busy_sentence(checkpoint, _read_lock(filesystem, path) or {}))
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(ttl_s / 3):
                with contextlib.suppress(OSError):
                    current = _read_lock(filesystem, path)
                    if current is None or current.get("token") != token:
                        return  # taken over after a long stall: never overwrite the new holder
                    with filesystem.open_output_stream(path) as stream:
                        stream.write(text())

        renewer = threading.Thread(target=renew, name="sparkext-checkpoint-lock", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            with contextlib.suppress(OSError):
                current = _read_lock(filesystem, path)
                if current is not None and current.get("token") == token:
                    filesystem.delete_file(path)

    return held()
