"""Partition keys: deterministic hashing into Spark partitions, and dense key codes.

Partition-parallel execution sends every event to the Spark partition that owns its key
(:func:`key_targets`). The hash must give the same answer in every task of every executor, so it
never uses Python's randomized ``hash()``: integers, booleans and timestamps hash their int64
value, floats their IEEE bits (``-0.0`` is folded onto ``0.0`` and every NaN onto one NaN, so
keys that the operators treat as equal meet in one partition), strings and other values a
BLAKE2b digest of their UTF-8 text, nulls a constant; the column hashes are combined with the
SplitMix64 finalizer. Complexity: O(n) vectorized per column plus one digest per distinct
non-numeric value.

:func:`spark_partition_of` is Spark's own ``pmod(hash(int), n)`` (Murmur3, seed 42) so that the
driver can choose slot values that Spark's hash repartitioning maps one to one onto partitions
(:func:`bijective_slots`).

:func:`key_codes` factorizes key columns of several tables jointly into dense int64 codes (equal
keys, equal codes; null is a value of its own).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_NULL_HASH = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer over uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _digest(value: object) -> int:
    text = value if isinstance(value, str) else repr(value)
    data = value if isinstance(value, bytes) else text.encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def column_hash(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Deterministic uint64 hash of every value of ``col`` (see the module docstring)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    n = len(col)
    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = col.type
    valid = None if col.null_count == 0 else np.asarray(
        col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_floating(typ):
        v = col.fill_null(0).cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
        v = v + 0.0  # -0.0 -> 0.0
        v[np.isnan(v)] = np.nan
        h = _splitmix(v.view(np.uint64))
    elif (pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_temporal(typ)):
        if pa.types.is_boolean(typ):
            v = col.fill_null(False).cast(pa.int64())
        elif pa.types.is_temporal(typ):
            v = col.cast(pa.int64()).fill_null(0)
        else:
            v = col.fill_null(0).cast(pa.int64())
        h = _splitmix(v.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64))
    else:
        enc = pc.dictionary_encode(col)
        words = np.array([_digest(x) for x in enc.dictionary.to_pylist()] or [0],
                         dtype=np.uint64)
        idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        h = _splitmix(words[idx]) if n else np.zeros(0, np.uint64)
    if valid is not None:
        h = np.where(valid, h, _NULL_HASH)
    return h


LUT_MIN_SPAN = 1 << 16
"""An integer key whose values span at most ``max(LUT_MIN_SPAN, rows)`` is hashed through a
lookup table over its range (see :func:`key_targets`)."""


def _small_int_range(col: pa.Array | pa.ChunkedArray, n: int
                     ) -> tuple[np.ndarray, int, int] | None:
    """``(values as int64, min, max)`` of an integer column without nulls whose range is small
    enough for a lookup table, else None (uint64 never: its values need not fit an int64)."""
    typ = col.type
    if not pa.types.is_integer(typ) or typ == pa.uint64() or col.null_count or n == 0:
        return None
    v = col.to_numpy() if isinstance(col, pa.Array) else \
        np.concatenate([c.to_numpy() for c in col.chunks]) if col.num_chunks else None
    if v is None:
        return None
    v = v.astype(np.int64, copy=False)
    lo, hi = int(v.min()), int(v.max())
    if hi - lo > max(LUT_MIN_SPAN, n):
        return None
    return v, lo, hi


def key_targets(table: pa.Table, keys: Sequence[str], n_targets: int) -> np.ndarray:
    """Target partition (0 .. n_targets-1) of every row of ``table`` by its ``keys`` values.

    One integer key without nulls whose values span a small range (at most
    ``max(LUT_MIN_SPAN, rows)``) takes a fast path with the same answer: the hash runs once per
    value of the range and the rows gather from that table - O(n + span) with one pass over the
    rows instead of the hash's eight."""
    n = table.num_rows
    if not keys or n_targets <= 1:
        return np.zeros(n, dtype=np.int64)
    if len(keys) == 1:
        small = _small_int_range(table.column(keys[0]), n)
        if small is not None:
            v, lo, hi = small
            span = pa.table({"v": np.arange(lo, hi + 1, dtype=np.int64)})
            lut = _hashed_targets(span, ["v"], n_targets)
            return lut[v - lo]
    return _hashed_targets(table, keys, n_targets)


def _hashed_targets(table: pa.Table, keys: Sequence[str], n_targets: int) -> np.ndarray:
    n = table.num_rows
    h = np.zeros(n, dtype=np.uint64)
    for k in keys:
        with np.errstate(over="ignore"):
            h = _splitmix(h * np.uint64(31) ^ column_hash(table.column(k)))
    return (h % np.uint64(n_targets)).astype(np.int64)


# --------------------------------------------------------------------------- Spark's hash
def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of an IntegerType value (Murmur3 x86_32 ``hashInt``), signed."""
    k1 = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k1 = _rotl32(k1, 15)
    k1 = k1 * 0x1B873593 & 0xFFFFFFFF
    h1 = (seed & 0xFFFFFFFF) ^ k1
    h1 = _rotl32(h1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def spark_partition_of(value: int, n_partitions: int) -> int:
    """The partition ``DataFrame.repartition(n, col)`` sends an int ``value`` to."""
    return spark_hash_int(value) % n_partitions  # Python's % is Spark's pmod for n > 0


def bijective_slots(n_partitions: int) -> list[int]:
    """Slot values ``s[p]`` (one per target p) that Spark's hash repartitioning into
    ``n_partitions`` sends to partition ``p``: target p lands in Spark partition p."""
    slots: list[int | None] = [None] * n_partitions
    missing = n_partitions
    v = 0
    while missing:
        p = spark_partition_of(v, n_partitions)
        if slots[p] is None:
            slots[p] = v
            missing -= 1
        v += 1
    return [int(s) for s in slots]  # type: ignore[arg-type]


# --------------------------------------------------------------------------- dense codes
def key_codes(tables: Sequence[pa.Table], keys: Sequence[str]) -> list[np.ndarray]:
    """Dense int64 codes of the ``keys`` tuples of every row of every table, factorized jointly
    (equal tuples get equal codes across tables; null is a value). ``keys`` empty: all 0."""
    sizes = [t.num_rows for t in tables]
    total = sum(sizes)
    if not keys:
        return [np.zeros(s, dtype=np.int64) for s in sizes]
    combo = np.zeros(total, dtype=np.int64)
    for k in keys:
        chunks = []
        for t in tables:
            c = t.column(k)
            chunks.extend(c.chunks if isinstance(c, pa.ChunkedArray) else [c])
        typ = chunks[0].type if chunks else pa.null()
        col = pa.chunked_array([c.cast(typ) for c in chunks], type=typ).combine_chunks() \
            if chunks else pa.array([], pa.null())
        if pa.types.is_floating(col.type):
            col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 -> 0.0
        enc = pc.dictionary_encode(col)
        width = len(enc.dictionary) + 1
        idx = enc.indices.fill_null(width - 1).to_numpy(zero_copy_only=False).astype(np.int64)
        combo = combo * width + idx
        # keep codes small: refactorize after every column
        _, combo = np.unique(combo, return_inverse=True)
        combo = combo.astype(np.int64).reshape(-1)
    out, pos = [], 0
    for s in sizes:
        out.append(combo[pos:pos + s])
        pos += s
    return out
