"""The index's own 64-bit hash and its bloom filters, vectorised with numpy.

The hash is defined here, on bytes, so that it never depends on PYTHONHASHSEED, a library's
version or the machine (all arithmetic is on unsigned 64-bit integers, wrapping)::

    fmix(x)   = MurmurHash3's 64-bit finaliser: x ^= x >> 33; x *= 0xff51afd7ed558ccd;
                x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53; x ^= x >> 33
    hash(b)   = fmix( sum over j of fmix(w_j ^ (j + 1) * 0x9e3779b97f4a7c15) + len(b) * C )

where ``w_j`` is the j-th 8-byte little-endian word of ``b`` padded with zero bytes and
``C = 0xff51afd7ed558ccd``. The int and float domains hash their 8 canonical little-endian
bytes (int64, float64 bits); strings their UTF-8 bytes; an n-gram its UTF-32LE bytes; a range
block (level, prefix) the 9 bytes ``prefix`` (8, little-endian) then ``level``.

A bloom filter is ``m = 64 * W`` bits in ``W`` little-endian 64-bit words (bytes: bit ``p`` is
bit ``p & 7`` of byte ``p >> 3``). A value with hash ``h`` sets, for ``t = 0..k-1``, bit
``64 * w + (g & 63)`` where ``g = h + t * h2`` and ``w = ((g >> 32) * W) >> 32`` (the high 32
bits of ``g`` mapped onto ``0..W-1`` by a multiply-shift, "fastrange": no modulo, no power of
two); ``h2 = fmix(h ^ 0xc4ceb9fe1a85ec53) | 1`` (double hashing; odd, so the k bits differ).

Sizing, for ``n`` distinct values and a false-positive probability ``fpp``: the optimal
``m* = -n ln(fpp) / (ln 2)^2`` bits, rounded up to whole words and then to the next *size
class*: ``W = ceil(2^(i/8))`` words for some integer ``i`` (classes 2^(1/8) apart, computed with
exact integer roots), so an entry is at most ~9% above ``m*`` (plus under one word) while files
of similar distinct counts share a size and are probed together (:class:`.BloomTable`). At
least 32 bytes; at most ``max_bytes`` rounded down to whole words (a file over it is *capped*).
``k = round(log2(1 / fpp))`` (the optimal ``m*/n * ln 2``), one per index so one size class is
one group; a capped entry, with fewer bits per value than ``fpp`` asks, takes the optimal
``k = round(m / n * ln 2)`` for its bits instead. Each entry records its ``k`` and size, so
probing never recomputes them.

Floor: planning (pure: no pyspark, no py4j).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

U64 = np.uint64
_M1 = U64(0xFF51AFD7ED558CCD)
_M2 = U64(0xC4CEB9FE1A85EC53)
_GOLD = U64(0x9E3779B97F4A7C15)
_GOLD2 = U64((2 * 0x9E3779B97F4A7C15) % (1 << 64))
_S33 = U64(33)
_S32 = U64(32)
_S6 = U64(6)
_LOW6 = U64(63)
MIN_BYTES = 32
MAX_K = 32


def fmix(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, element-wise (a new array)."""
    x = x ^ (x >> _S33)
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


def _finish(sums: np.ndarray, lengths: np.ndarray | int) -> np.ndarray:
    return fmix(sums + np.asarray(lengths, dtype=U64) * _M1)


def hash_words(words: np.ndarray) -> np.ndarray:
    """Hashes of 8-byte values given as uint64 (their little-endian bytes' hash)."""
    return _finish(fmix(words.astype(U64, copy=False) ^ _GOLD), 8)


def hash_fixed(data: np.ndarray) -> np.ndarray:
    """Hashes of equal-length byte strings, one per row of a 2-D uint8 array."""
    rows, width = data.shape
    nwords = (width + 7) // 8
    padded = np.zeros((rows, nwords * 8), np.uint8)
    padded[:, :width] = data
    words = padded.view("<u8")
    salts = (np.arange(1, nwords + 1, dtype=U64) * _GOLD)[None, :]
    sums = fmix(words ^ salts).sum(axis=1, dtype=U64)
    return _finish(sums, width)


def hash_binary(array: pa.Array) -> np.ndarray:
    """Hashes of the values of a (large_)binary or (large_)string Arrow array without nulls."""
    if len(array) == 0:
        return np.zeros(0, U64)
    kind = array.type
    plain = pa.types.is_binary(kind) or pa.types.is_string(kind)
    if not (plain or pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)):
        array = array.cast(pa.large_binary())
    buffers = array.buffers()
    wide = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)
    offsets = offsets[array.offset : array.offset + len(array) + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return hash_parts(offsets, data)


def binary_parts(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets counted from 0, data bytes) of a binary or string Arrow array's values, read
    from its buffers without copying (cast to large_binary first when it is not one)."""
    values = values.cast(pa.large_binary())
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[values.offset : values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets - offsets[0], data[offsets[0] : offsets[-1]]


def hash_parts(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Hashes of the byte strings ``data[offsets[i]:offsets[i + 1]]``."""
    lengths = np.diff(offsets)
    nwords = (lengths + 7) // 8
    word_end = np.cumsum(nwords)
    word_start = word_end - nwords
    total_words = int(word_end[-1]) if len(word_end) else 0
    padded = np.zeros(total_words * 8, np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first:
        shift = np.repeat(word_start * 8 - offsets[:-1], lengths)
        padded[np.arange(first, last) + shift] = data[first:last]
    words = padded.view("<u8")
    position = np.arange(total_words, dtype=np.int64) - np.repeat(word_start, nwords)
    mixed = fmix(words ^ ((position + 1).astype(U64) * _GOLD))
    running = np.concatenate([np.zeros(1, U64), np.cumsum(mixed, dtype=U64)])
    with np.errstate(over="ignore"):  # wrapping arithmetic is the hash's own
        sums = running[word_end] - running[word_start]
    return _finish(sums, lengths)


def hash_bytes(values: list[bytes]) -> np.ndarray:
    """Hashes of a few Python byte strings (the probe side)."""
    if not values:
        return np.zeros(0, U64)
    lengths = np.array([len(v) for v in values], np.int64)
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
    return hash_parts(offsets, np.frombuffer(b"".join(values) or b"\0", np.uint8))


def hash_blocks(levels: np.ndarray, prefixes: np.ndarray) -> np.ndarray:
    """Hashes of range blocks: the 9 bytes ``prefix`` (little-endian) then ``level``."""
    first = fmix(prefixes.astype(U64, copy=False) ^ _GOLD)
    second = fmix(levels.astype(U64) ^ _GOLD2)
    return _finish(first + second, 9)


# -- bloom filters -------------------------------------------------------------------------------


def bloom_k(fpp: float) -> int:
    """Probes per value for a false-positive probability (the optimal ``log2(1 / fpp)``)."""
    return max(1, min(MAX_K, round(-math.log2(fpp))))


def capped_k(distinct: int, nbytes: int, k: int) -> int:
    """Probes per value of a capped bitset: the optimal ``m / n * ln 2``, at most ``k``."""
    return max(1, min(k, round(nbytes * 8 / distinct * math.log(2))))


def size_class(words: int) -> int:
    """The smallest size class ``ceil(2^(i/8))`` (integer ``i``) of at least ``words`` words.

    >>> [size_class(w) for w in (4, 5, 6, 749, 790, 791)]
    [4, 5, 6, 790, 790, 862]
    """
    if words <= 1:
        return 1
    exponent = ((words - 1) ** 8).bit_length()  # the least i with 2^i > (words - 1)^8
    power = 1 << exponent
    root = math.isqrt(math.isqrt(math.isqrt(power)))  # floor(2^(i/8)), exactly
    return root if root**8 >= power else root + 1


def optimal_bits(distinct: int, fpp: float) -> float:
    """The optimal bitset size for ``distinct`` values: ``-n ln(fpp) / (ln 2)^2`` bits."""
    return -distinct * math.log(fpp) / math.log(2) ** 2


def bloom_bytes(distinct: int, fpp: float, max_bytes: int) -> int:
    """The bitset's size for ``distinct`` values: a size class of 64-bit words from 32 bytes to
    ``max_bytes`` rounded down to whole words (0 for no value)."""
    if distinct == 0:
        return 0
    words = max(MIN_BYTES // 8, math.ceil(optimal_bits(distinct, fpp) / 64))
    return 8 * min(size_class(words), max(max_bytes, MIN_BYTES) // 8)


def bloom_probes(hashes: np.ndarray, k: int) -> np.ndarray:
    """The k double-hashed probes ``g = h + t * h2`` of each hash, shape (len(hashes), k)."""
    h2 = fmix(hashes ^ _M2) | U64(1)
    steps = np.arange(k, dtype=U64)[None, :]
    return np.asarray(hashes[:, None] + steps * h2[:, None])


def probe_bits(probes: np.ndarray, words: np.ndarray | np.uint64) -> np.ndarray:
    """Bit positions of probes in bitsets of ``words`` 64-bit words (broadcast together): word
    ``((g >> 32) * words) >> 32``, bit ``g & 63`` of it."""
    word = ((probes >> _S32) * words) >> _S32  # < 2^32 * 2^27: no overflow up to 1GB
    return np.asarray((word << _S6) | (probes & _LOW6), np.int64)


def bloom_positions(hashes: np.ndarray, k: int, nbytes: int) -> np.ndarray:
    """Bit positions, shape (len(hashes), k), in a bitset of ``nbytes`` bytes (whole words)."""
    return probe_bits(bloom_probes(hashes, k), U64(nbytes // 8))


def bloom_build(hashes: np.ndarray, k: int, nbytes: int) -> bytes:
    """The bitset holding ``hashes``."""
    if nbytes == 0:
        return b""
    bits = np.zeros(nbytes * 8, bool)
    bits[bloom_positions(hashes, k, nbytes).reshape(-1)] = True
    return np.packbits(bits, bitorder="little").tobytes()


def expected_fpp(distinct: int, k: int, nbytes: int) -> float:
    """The false-positive probability of one probe of a bitset built from ``distinct`` values."""
    if nbytes == 0:
        return 0.0
    return float((1 - math.exp(-k * distinct / (nbytes * 8))) ** k)
