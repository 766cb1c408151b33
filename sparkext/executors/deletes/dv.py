"""Iceberg v3 deletion vectors and the Puffin files that hold them, in pure Python.

A deletion vector (Puffin blob type ``deletion-vector-v1``) is: 4-byte big-endian length of
magic + vector, the magic ``D1 D3 39 64``, the positions as a 64-bit Roaring bitmap in the
"portable" layout (8-byte little-endian count of 32-bit bitmaps, then per bitmap a 4-byte key and
a 32-bit portable Roaring bitmap), and a big-endian CRC-32 of magic + vector. The table metadata
points at the whole blob (offset and length include the length prefix and the CRC).

Floor: executors (runs inside Spark's tasks; no JVM).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = bytes.fromhex("d1d33964")
DV_BLOB_TYPE = "deletion-vector-v1"
ROW_POSITION_FIELD_ID = 2147483645  # Iceberg's MetadataColumns.ROW_POSITION


def serialize_positions(positions: Iterable[int] | np.ndarray) -> bytes:
    """Serialize sorted or unsorted row positions as a deletion-vector blob.

    >>> blob = serialize_positions([3, 1, 2**32 + 5])
    >>> sorted(deserialize_positions(blob).tolist())
    [1, 3, 4294967301]
    """
    from pyroaring import BitMap

    array = np.unique(np.asarray(positions, dtype=np.int64))
    if array.size and array[0] < 0:
        raise ValueError("row positions must not be negative")
    keys = (array >> 32).astype(np.int64)
    parts = [struct.pack("<q", int(np.unique(keys).size))]
    for key in np.unique(keys):
        low = (array[keys == key] & 0xFFFFFFFF).astype(np.uint32)
        bitmap = BitMap(low)
        bitmap.run_optimize()
        parts.append(struct.pack("<I", int(key)))
        parts.append(bitmap.serialize())
    vector = DV_MAGIC + b"".join(parts)
    return struct.pack(">i", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))


def deserialize_positions(blob: bytes) -> np.ndarray:
    """Read the positions of a deletion-vector blob (checks length, magic and CRC)."""
    from pyroaring import BitMap

    (length,) = struct.unpack(">i", blob[:4])
    vector = blob[4 : 4 + length]
    if vector[:4] != DV_MAGIC:
        raise ValueError("not a deletion vector: bad magic")
    (crc,) = struct.unpack(">I", blob[4 + length : 8 + length])
    if crc != zlib.crc32(vector):
        raise ValueError("deletion vector checksum mismatch")
    (count,) = struct.unpack("<q", vector[4:12])
    offset, out = 12, []
    for _ in range(count):
        (key,) = struct.unpack("<I", vector[offset : offset + 4])
        offset += 4
        bitmap = BitMap.deserialize(vector[offset:])
        offset += len(bitmap.serialize())
        out.append(np.asarray(bitmap.to_array(), dtype=np.int64) + (key << 32))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class BlobEntry:
    """Where one DV sits in a Puffin file, as the manifest entry needs it."""

    referenced_data_file: str
    offset: int
    length: int
    cardinality: int


class PuffinWriter:
    """Append DV blobs to a binary stream and finish it with a Puffin footer.

    >>> import io
    >>> out = io.BytesIO()
    >>> writer = PuffinWriter(out)
    >>> entry = writer.add("/d/f.parquet", [0, 7])
    >>> size = writer.close()
    >>> data = out.getvalue()
    >>> data[:4], entry.offset, entry.cardinality, size == len(data)
    (b'PFA1', 4, 2, True)
    >>> sorted(deserialize_positions(data[entry.offset:entry.offset + entry.length]).tolist())
    [0, 7]
    """

    def __init__(self, stream, created_by: str = "sparkext"):
        self._stream = stream
        self._blobs: list[dict] = []
        self._offset = 0
        self._created_by = created_by
        self._write(PUFFIN_MAGIC)

    def _write(self, data: bytes) -> None:
        self._stream.write(data)
        self._offset += len(data)

    @property
    def size(self) -> int:
        return self._offset

    def add(self, referenced_data_file: str, positions: Iterable[int] | np.ndarray) -> BlobEntry:
        array = np.unique(np.asarray(positions, dtype=np.int64))
        blob = serialize_positions(array)
        entry = BlobEntry(referenced_data_file, self._offset, len(blob), int(array.size))
        self._write(blob)
        self._blobs.append(
            {
                "type": DV_BLOB_TYPE,
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": entry.offset,
                "length": entry.length,
                "properties": {
                    "referenced-data-file": referenced_data_file,
                    "cardinality": str(entry.cardinality),
                },
            }
        )
        return entry

    def close(self) -> int:
        """Write the footer and return the file size; the caller closes the stream."""
        payload = json.dumps(
            {"blobs": self._blobs, "properties": {"created-by": self._created_by}},
            separators=(",", ":"),
        ).encode()
        self._write(PUFFIN_MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4))
        self._write(PUFFIN_MAGIC)
        return self._offset
