"""Executor-side pieces of rewrite_equality_deletes that need no Spark: key sets and DVs."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from sparkext.executors.deletes.dv import PuffinWriter, deserialize_positions, serialize_positions
from sparkext.executors.deletes.writers import _KeySet


@pytest.mark.parametrize("arrow_type", [pa.int32(), pa.int64(), pa.string()])
def test_key_set_membership_is_null_safe(arrow_type):
    def cast(values):
        return pa.array([None if v is None else v for v in values]).cast(arrow_type)

    keys = _KeySet(cast([5, None, 2, 9]))
    assert keys.contains(cast([1, 2, None, 9, 10])).to_pylist() == [
        False,
        True,
        True,
        True,
        False,
    ]
    no_null = _KeySet(cast([5, 2]))
    assert no_null.contains(cast([None, 2, 3])).to_pylist() == [False, True, False]


def test_empty_key_set_matches_nothing():
    assert _KeySet(pa.array([], pa.int64())).contains(pa.array([1, None])).to_pylist() == [
        False,
        False,
    ]


def test_deletion_vector_round_trip_across_32_bit_keys():
    rng = np.random.default_rng(1)
    positions = np.unique(
        np.concatenate([rng.integers(0, 2**20, 5000), rng.integers(2**32, 2**32 + 99, 50)])
    )
    blob = serialize_positions(positions)
    assert np.array_equal(np.sort(deserialize_positions(blob)), positions)
    corrupt = bytearray(blob)
    corrupt[20] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        deserialize_positions(bytes(corrupt))


def test_puffin_footer_names_every_blob():
    import json
    import struct

    out = io.BytesIO()
    writer = PuffinWriter(out)
    writer.add("/d/a.parquet", [1, 2])
    writer.add("/d/b.parquet", [0])
    size = writer.close()
    data = out.getvalue()
    assert size == len(data) and data[:4] == data[-4:] == b"PFA1"
    (length,) = struct.unpack("<i", data[-12:-8])
    footer = json.loads(data[-12 - length : -12])
    refs = [b["properties"]["referenced-data-file"] for b in footer["blobs"]]
    assert refs == ["/d/a.parquet", "/d/b.parquet"]
    assert [b["properties"]["cardinality"] for b in footer["blobs"]] == ["2", "1"]
