"""Filesystems, written once: every file sparkext itself reads or writes goes through pyarrow.

A *location* is what the user wrote: a local path (relative ones are made absolute) or a URI
(``file:///…``, ``s3://…``, ``s3a://…``, ``gs://…``, ``hdfs://…``, ``abfs://…``). The URI is kept as
written for Spark (which has its own Hadoop filesystems, ``s3a://`` included) and for
recording in snapshot summaries; pyarrow gets the same place under the scheme it knows. Like
Hadoop's ``Path``, the text is literal (``a b`` and ``a%20b`` are two different directories), so
pyarrow and Spark always meet in the same place.

>>> Location.of("file:///tmp/ck").uri, Location.of("file:///tmp/ck").path
('file:///tmp/ck', '/tmp/ck')
>>> Location.of("file:///tmp/ck").child("offsets").uri
'file:///tmp/ck/offsets'

Floor: util.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from sparkext.errors import EnvironmentSetupError

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # 2+ letters: not a drive letter
# Hadoop's names for filesystems pyarrow knows under another scheme.
_PYARROW_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def scheme(location: str) -> str | None:
    """The URI scheme of ``location``, or None for a plain local path.

    >>> scheme("s3a://bucket/ck"), scheme("file:/tmp/x"), scheme("ck/x"), scheme("/tmp/a:b")
    ('s3a', 'file', None, None)
    """
    match = _SCHEME.match(location)
    return match.group(1).lower() if match else None


_DEFAULT_FS: list[str] = []  # Hadoop's fs.defaultFS when it is not the local file system


def set_default_filesystem(uri: str | None) -> None:
    """Record the application's Hadoop ``fs.defaultFS`` (the driver does, when it attaches): on
    a cluster whose default is ``hdfs://nn:8020`` (or ``abfs://…``), Spark reads a plain path
    ``/data/ck`` there, so sparkext must too — not on the driver's local disk."""
    _DEFAULT_FS.clear()
    if uri and scheme(uri) not in (None, "file"):
        _DEFAULT_FS.append(uri.rstrip("/"))


def on_default_filesystem(path: str) -> str | None:
    """A plain path as the URI Spark reads it when the default file system is remote (None: it
    is local). A relative one is refused: Hadoop resolves it against a working directory.

    >>> set_default_filesystem("hdfs://nn:8020/"); on_default_filesystem("/data/ck")
    'hdfs://nn:8020/data/ck'
    >>> set_default_filesystem("file:///"); on_default_filesystem("/data/ck") is None
    True
    """
    if not _DEFAULT_FS or scheme(path) is not None:
        return None
    if not path.startswith("/"):
        raise EnvironmentSetupError(
            f"'{path}' is a relative path but the default file system is {_DEFAULT_FS[0]}; "
            f"write it in full (e.g. {_DEFAULT_FS[0]}/data/{path}) or as a /absolute/path."
        )
    return _DEFAULT_FS[0] + path


def absolute(path: str) -> str:
    """A URI as written; a plain path on the remote default file system, else absolute here."""
    return path if "://" in path else on_default_filesystem(path) or os.path.abspath(path)


def normalize(location: str) -> str:
    """A URI unchanged (less a trailing ``/``); a local path absolute, symlinks resolved (on a
    remote default file system: that file system's URI, see :func:`on_default_filesystem`).

    >>> normalize("s3://bucket/ck/"), normalize("/tmp/../tmp/ck")
    ('s3://bucket/ck', '/tmp/ck')
    """
    text = str(location).strip()
    if scheme(text) is None:
        remote = on_default_filesystem(text)
        if remote is not None:
            return remote.rstrip("/")
        return str(Path(text).expanduser().resolve())
    stripped = text.rstrip("/")
    return text if stripped.endswith(":") else stripped


def pyarrow_uri(location: str) -> str:
    """The URI ``location`` as pyarrow must get it to reach the place Hadoop's ``Path`` reads
    there: under pyarrow's scheme name (``s3a`` → ``s3``), the text percent-encoded (pyarrow
    decodes it; Hadoop takes it literally). A ``?query`` (pyarrow's options) is kept.

    >>> pyarrow_uri("s3a://bucket/ck"), pyarrow_uri("file:///tmp/a b/50%")
    ('s3://bucket/ck', 'file:///tmp/a%20b/50%25')
    """
    found = scheme(location)
    if found in _PYARROW_SCHEMES:
        location = _PYARROW_SCHEMES[found] + location[len(found) :]
    head, mark, query = location.partition("?")
    return quote(head, safe=":/@!$&'()*+,;=~[]") + mark + query


def filesystem(location: str) -> tuple[FileSystem, str]:
    """pyarrow's file system and path for ``location`` as Hadoop and Iceberg write it — on the
    driver or in a task: ``s3a://`` under pyarrow's ``s3``, ``file:/x`` and plain paths local,
    the text literal (see :func:`pyarrow_uri`). The one place sparkext asks pyarrow for one.

    >>> filesystem("file:/tmp/x.parquet")[1], filesystem("/tmp/x.parquet")[1]
    ('/tmp/x.parquet', '/tmp/x.parquet')
    >>> filesystem("file:///tmp/a b/50%")[1]
    '/tmp/a b/50%'
    >>> type(filesystem("s3a://bucket/wh/t/data?region=us-east-1")[0]).__name__
    'S3FileSystem'
    """
    from pyarrow import fs

    if scheme(location) is None:
        return fs.LocalFileSystem(), location
    found, path = fs.FileSystem.from_uri(pyarrow_uri(location))
    return found, path


@dataclass(frozen=True)
class Location:
    """A place on some filesystem: ``uri`` as written (for Spark and for people), and
    pyarrow's ``filesystem`` and ``path`` for it. Children share the filesystem object."""

    uri: str
    filesystem: FileSystem
    path: str

    @classmethod
    def of(cls, location: str) -> Location:
        """Resolve ``location`` once (for ``s3://`` pyarrow may ask the bucket's region)."""
        from pyarrow import fs

        uri = normalize(location)
        if scheme(uri) is None:
            return cls(uri, fs.LocalFileSystem(), uri)
        found, path = filesystem(uri)
        return cls(uri, found, path)

    def child(self, *names: str) -> Location:
        """The location ``names`` below this one."""
        suffix = "/".join(n.strip("/") for n in names)
        return Location(
            f"{self.uri.rstrip('/')}/{suffix}",
            self.filesystem,
            f"{self.path.rstrip('/')}/{suffix}" if self.path else suffix,
        )

    def make_dirs(self) -> None:
        """Create this directory and its parents (nothing to do on object stores)."""
        self.filesystem.create_dir(self.path, recursive=True)

    def exists(self) -> bool:
        from pyarrow import fs

        found: bool = self.filesystem.get_file_info(self.path).type != fs.FileType.NotFound
        return found

    def read_text(self) -> str | None:
        """The file's text (UTF-8), or None when there is no such file."""
        if not self.exists():
            return None
        with self.filesystem.open_input_stream(self.path) as stream:
            text: str = stream.read().decode("utf-8")
            return text

    def write_text(self, text: str) -> None:
        """Replace the file's content: written beside it, then moved over it (atomic where the
        filesystem renames atomically; an object store shows a whole object or the old one)."""
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with self.filesystem.open_output_stream(temporary) as stream:
            stream.write(text.encode("utf-8"))
        self.filesystem.move(temporary, self.path)
