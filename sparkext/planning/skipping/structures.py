"""The decoded forms that answer a probe for many files at once.

:class:`BloomTable` keeps the bitsets of equal size and ``k`` in one 2-D uint8 array (all of
them views of one flat array), so one fancy-indexing gather tests every (file, value) pair of
every size class. :class:`ExactSets` keeps the exact value sets of many files as one vocabulary
(every distinct value once) and, per vocabulary entry, the files holding it: a test runs once
per distinct value, then maps to files.

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
    """The bloom filters of many files (rows), grouped by (size, k) into 2-D arrays that are
    views of one flat byte array, so one probe pass serves every size class at once."""

    def __init__(self, nrows: int, bitsets: Sequence[tuple[int, int, bytes]]):
        """``bitsets``: (row, k, bits) for each row that has a bitset."""
        groups: dict[tuple[int, int], list[tuple[int, bytes]]] = {}
        for row, k, bits in bitsets:
            if bits:
                groups.setdefault((len(bits), k), []).append((row, bits))
        ordered = sorted(groups.items())
        self.flat = np.frombuffer(
            b"".join(bits for _, members in ordered for _, bits in members), np.uint8
        )
        self.class_of = np.full(nrows, -1, np.int32)
        self.offset = np.zeros(nrows, np.int64)  # of the row's bitset in flat
        self.classes: list[tuple[int, int, np.ndarray]] = []  # (k, nbytes, matrix)
        at = 0
        for index, ((nbytes, k), members) in enumerate(ordered):
            rows = np.array([row for row, _ in members], np.int64)
            matrix = self.flat[at : at + nbytes * len(members)].reshape(len(members), nbytes)
            self.classes.append((k, nbytes, matrix))
            self.class_of[rows] = index
            self.offset[rows] = at + nbytes * np.arange(len(members))
            at += nbytes * len(members)
        self.class_words = np.array([nbytes // 8 for _, nbytes, _ in self.classes], np.uint64)
        self.class_k = np.array([k for k, _, _ in self.classes], np.int64)
        self.max_k = int(self.class_k.max()) if self.classes else 0

    @property
    def nbytes(self) -> int:
        return int(self.flat.nbytes + self.class_of.nbytes * 3)

    def probe(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool (len(rows), len(hashes)): may row r hold the value of hash h? (A row without a
        bitset holds no value.)"""
        out = np.zeros((len(rows), len(hashes)), bool)
        of = self.class_of[rows]
        live = np.nonzero(of >= 0)[0]
        if not len(hashes) or not len(live):
            return out
        # bounds the (rows, values) and (classes, values, k) temporaries to about a million cells
        chunk = max(1, _CELLS // max(len(live), len(self.classes) * self.max_k))
        for start in range(0, len(hashes), chunk):
            part = hashes[start : start + chunk]
            out[live, start : start + len(part)] = self._probe(part, rows[live], of[live])
        return out

    def _probe(self, hashes: np.ndarray, rows: np.ndarray, of: np.ndarray) -> np.ndarray:
        """bool (len(rows), len(hashes)) for rows that all have a bitset (class ``of``).

        A probe's byte and bit are computed once per (size class, value, t). The first probe of
        every (row, value) pair is one gather from the flat array; the next probes run only on
        the pairs still alive (about half after each probe), for all classes at once."""
        kmax, nvalues = self.max_k, len(hashes)
        bits = hashing.probe_bits(
            hashing.bloom_probes(hashes, kmax)[None, :, :], self.class_words[:, None, None]
        )
        over = np.arange(kmax)[None, :] >= self.class_k[:, None]  # (class, t): past its k
        if over.any():  # a class with fewer probes repeats its first (already tested) one
            bits = np.where(over[:, None, :], bits[:, :, :1], bits)
        byte, mask = bits >> 3, (1 << (bits & 7)).astype(np.uint8)  # [class, value, t]
        offset = self.offset[rows]
        if (of == of[0]).all():  # one size class: its first probes broadcast over the rows
            first_byte, first_mask = byte[of[0], None, :, 0], mask[of[0], None, :, 0]
        else:
            first_byte = np.take(byte[:, :, 0], of, axis=0)
            first_mask = np.take(mask[:, :, 0], of, axis=0)
        hit = (np.take(self.flat, offset[:, None] + first_byte) & first_mask) != 0
        cell = np.flatnonzero(hit)  # row * nvalues + value
        row = cell // nvalues
        base, pair = offset[row], of[row].astype(np.int64) * nvalues + (cell - row * nvalues)
        byte = byte.transpose(2, 0, 1).reshape(kmax, -1)  # [t, class * nvalues + value]
        mask = mask.transpose(2, 0, 1).reshape(kmax, -1)
        for t in range(1, kmax):
            if not len(cell):
                break
            got = np.take(self.flat, base + np.take(byte[t], pair)) & np.take(mask[t], pair)
            keep = got != 0
            cell, base, pair = cell[keep], base[keep], pair[keep]
        out = np.zeros(len(rows) * nvalues, bool)
        out[cell] = True
        return out.reshape(len(rows), nvalues)

    def probe_any(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool per row: may it hold one of the values?"""
        return np.asarray(self.probe(hashes, rows).any(axis=1))

    def probe_all(self, hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """bool per row: may it hold every one of the values?"""
        return np.asarray(self.probe(hashes, rows).all(axis=1))


_CELLS = 1 << 20


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
