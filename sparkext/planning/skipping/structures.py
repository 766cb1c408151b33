"""The decoded forms that answer a probe for many files at once.

:class:`BloomTable` keeps the bitsets of equal size and ``k`` in one 2-D uint8 array, so one
fancy-indexing gather tests every (file, value) pair. :class:`ExactSets` keeps the exact value
sets of many files as one vocabulary (every distinct value once) and, per vocabulary entry, the
files holding it: a test runs once per distinct value, then maps to files.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkext.planning.skipping import hashing


class BloomTable:
    """The bloom filters of many files (rows), grouped by (size, k)."""

    def __init__(self, nrows: int, bitsets: Sequence[tuple[int, int, bytes]]):
        """``bitsets``: (row, k, bits) for each row that has a bitset."""
        groups: dict[tuple[int, int], list[tuple[int, bytes]]] = {}
        for row, k, bits in bitsets:
            if bits:
                groups.setdefault((len(bits), k), []).append((row, bits))
        self.class_of = np.full(nrows, -1, np.int32)
        self.position = np.zeros(nrows, np.int64)
        self.classes: list[tuple[int, int, np.ndarray]] = []  # (k, nbytes, matrix)
        for index, ((nbytes, k), members) in enumerate(sorted(groups.items())):
            rows = np.array([row for row, _ in members], np.int64)
            matrix = np.frombuffer(b"".join(bits for _, bits in members), np.uint8)
            self.classes.append((k, nbytes, matrix.reshape(len(members), nbytes)))
            self.class_of[rows] = index
            self.position[rows] = np.arange(len(members))

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for _, _, m in self.classes) + self.class_of.nbytes * 3

    def probe(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool (len(rows), len(hashes)): may row r hold the value of hash h? (A row without a
        bitset holds no value.)"""
        out = np.zeros((len(rows), len(hashes)), bool)
        if not len(hashes) or not len(rows):
            return out
        of = self.class_of[rows]
        for index, (k, nbytes, matrix) in enumerate(self.classes):
            chosen = np.nonzero(of == index)[0]
            if not len(chosen):
                continue
            positions = hashing.bloom_positions(hashes, k, nbytes).reshape(-1)
            which = self.position[rows[chosen]]
            out[chosen] = _test(matrix, which, positions, k)
        return out

    def probe_any(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool per row: may it hold one of the values?"""
        return np.asarray(self.probe(hashes, rows).any(axis=1))

    def probe_all(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool per row: may it hold every one of the values?"""
        return np.asarray(self.probe(hashes, rows).all(axis=1))


def _test(matrix: np.ndarray, which: np.ndarray, positions: np.ndarray, k: int) -> np.ndarray:
    """(len(which), len(positions) // k): are all k bits of each value set in each bitset?

    The first probe of every (file, value) pair is one gather along the bitsets' columns; the
    next probes run only on the pairs still alive (about half after each probe)."""
    per_value = positions.reshape(-1, k)
    byte, mask = per_value >> 3, (1 << (per_value & 7)).astype(np.uint8)
    rows = matrix if len(which) == len(matrix) and (which == np.arange(len(which))).all() else None
    if rows is None:
        rows = matrix[which]
    first = np.take(rows, byte[:, 0], axis=1) & mask[:, 0]
    alive_file, alive_value = np.nonzero(first)
    flat = rows.reshape(-1)
    base = alive_file * matrix.shape[1]
    for probe in range(1, k):
        if not len(alive_file):
            break
        keep = (flat[base + byte[alive_value, probe]] & mask[alive_value, probe]) != 0
        alive_file, alive_value, base = alive_file[keep], alive_value[keep], base[keep]
    out = np.zeros((len(which), len(per_value)), bool)
    out[alive_file, alive_value] = True
    return out


class ExactSets:
    """The exact distinct-value sets of many files: a vocabulary and, per entry, its files."""

    def __init__(self, domain: str, nrows: int, sets: Sequence[tuple[int, Any]]):
        """``sets``: (row, values) per row with a set; values are uint64 order keys (int and float
        domains) or a large_binary Arrow array (bytes domain)."""
        self.domain = domain
        self.nrows = nrows
        rows = np.array([row for row, _ in sets], np.int64)
        sizes = np.array([len(values) for _, values in sets], np.int64)
        self.counts = np.zeros(nrows, np.int64)
        self.counts[rows] = sizes
        pair_rows = np.repeat(rows, sizes).astype(np.int32)
        self.vocab_hash: np.ndarray | None = None
        if domain == "bytes":
            joined = (
                pa.concat_arrays([v for _, v in sets]) if sets else pa.array([], pa.large_binary())
            )
            encoded = pc.dictionary_encode(joined)
            vocab = encoded.dictionary
            hashes = hashing.hash_binary(vocab)
            order = np.argsort(hashes, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            self.vocab: Any = vocab.take(pa.array(order))
            self.vocab_hash = hashes[order]
            pair_ids = rank[encoded.indices.to_numpy(zero_copy_only=False)]
        else:
            joined_keys = np.concatenate([v for _, v in sets]) if sets else np.zeros(0, np.uint64)
            self.vocab, pair_ids = np.unique(joined_keys, return_inverse=True)
        order = np.argsort(pair_ids, kind="stable")
        self.pair_rows = pair_rows[order]
        self.starts = np.concatenate(
            [np.zeros(1, np.int64), np.cumsum(np.bincount(pair_ids, minlength=len(self.vocab)))]
        )
        self._strings: dict[str, list[str] | pa.Array] = {}

    @property
    def nbytes(self) -> int:
        vocab = self.vocab.nbytes
        extra = self.vocab_hash.nbytes if self.vocab_hash is not None else 0
        return int(vocab + extra + self.pair_rows.nbytes + self.starts.nbytes + self.counts.nbytes)

    def __len__(self) -> int:
        return len(self.vocab)

    def ids(self, probes: Sequence[Any]) -> np.ndarray:
        """Vocabulary ids of probe values (order keys or bytes); -1 where absent."""
        if self.domain != "bytes":
            keys = np.array(probes, np.uint64)
            at = np.searchsorted(self.vocab, keys)
            found = (at < len(self.vocab)) & (
                self.vocab[np.minimum(at, len(self.vocab) - 1)] == keys
            )
            return np.where(found, at, -1)
        assert self.vocab_hash is not None
        hashes = hashing.hash_bytes(list(probes))
        out = np.full(len(probes), -1, np.int64)
        for i, (probe, h) in enumerate(zip(probes, hashes, strict=True)):
            place = int(np.searchsorted(self.vocab_hash, h))
            while place < len(self.vocab_hash) and self.vocab_hash[place] == h:
                if self.vocab[place].as_py() == probe:
                    out[i] = place
                    break
                place += 1
        return out

    def rows_with_ids(self, ids: np.ndarray) -> np.ndarray:
        """bool per row: does it hold one of these vocabulary entries?"""
        out = np.zeros(self.nrows, bool)
        for at in ids[ids >= 0]:
            out[self.pair_rows[self.starts[at] : self.starts[at + 1]]] = True
        return out

    def count_ids(self, ids: np.ndarray) -> np.ndarray:
        """Per row: how many of these (distinct) vocabulary entries it holds."""
        out = np.zeros(self.nrows, np.int64)
        for at in np.unique(ids[ids >= 0]):
            out[self.pair_rows[self.starts[at] : self.starts[at + 1]]] += 1
        return out

    def rows_with_mask(self, mask: np.ndarray) -> np.ndarray:
        """bool per row: does it hold an entry where ``mask`` is true?"""
        out = np.zeros(self.nrows, bool)
        out[self.pair_rows[np.repeat(mask, np.diff(self.starts))]] = True
        return out

    def strings(self, fold: str | None = None) -> pa.Array:
        """The vocabulary as a large_string array (lower- or upper-cased by Python for fold)."""
        key = fold or ""
        if key not in self._strings:
            plain = self.vocab.cast(pa.large_string())
            if fold is None:
                self._strings[key] = plain
            else:
                texts = plain.to_pylist()
                change = str.lower if fold == "lower" else str.upper
                self._strings[key] = pa.array([change(t) for t in texts], pa.large_string())
        value = self._strings[key]
        assert isinstance(value, pa.Array)
        return value
