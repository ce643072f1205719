"""Sets of seqs as bitmaps: building them from arrays or from values lying in index files, and
reading them back in order.

A set of distinct integers in ``[0, bound)`` is a bitmap of ``ceil(bound / 64)`` uint64 words:
setting it is one read-modify-write per value, membership one bit read, and its values come
out sorted by one scan of the words. The planner holds index lookups this way when they are
dense enough (:func:`~replaydb.indexes.kernels.bits_pay`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from replaydb.indexes.kernels import _dense_enough, _popcount, _scratch_arena, bits_pay


@nb.njit(cache=True, nogil=True)
def _set_bits(values: np.ndarray, bound: int, bits: np.ndarray) -> int:
    """``bits`` (``ceil(bound / 64)`` words, any content) := the set of ``values``: 0, or 1 on
    a repeated value, 2 on a value outside ``[0, bound)`` (``bits`` undefined then)."""
    bits[:] = 0
    return _add_bits(values, bound, bits)


@nb.njit(cache=True, nogil=True, inline="always")
def _add_bits(values: np.ndarray, bound: int, bits: np.ndarray) -> int:
    """Set the bits of ``values`` in ``bits``: 0, or 1 when one is set already (a repeated
    value), 2 on a value outside ``[0, bound)``."""
    one = np.uint64(1)
    for i in range(values.size):
        v = values[i]
        if v < 0 or v >= bound:
            return 2
        w = v >> 6
        bit = one << np.uint64(v & 63)
        x = bits[w]
        if x & bit:
            return 1
        bits[w] = x | bit
    return 0


@nb.njit(cache=True, nogil=True)
def _or_bits(values: np.ndarray, bound: int, bits: np.ndarray) -> int:
    """Set the bits of ``values`` in ``bits`` (a value already there stays set): 0, or 2 on a
    value outside ``[0, bound)`` (then some bits of the values before it are set).

    One unsigned comparison checks both ends of the range, and no test of the word's old
    bit: a read-modify-write per value and nothing else, where :func:`_add_bits` must also
    test for a repeat."""
    one = np.uint64(1)
    ub = np.uint64(bound)
    six = np.uint64(6)
    low = np.uint64(63)
    for i in range(values.size):
        v = np.uint64(values[i])
        if v >= ub:
            return 2
        bits[v >> six] |= one << (v & low)
    return 0


@nb.njit(cache=True, nogil=True, inline="always")
def _span(buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray, k: int
          ) -> tuple[bool, np.ndarray]:
    """Span ``k`` of int64 values lying in ``buf`` (bytes): ``counts[k]`` of them from byte
    ``offsets[k]``, as a view; False (and no values) when it lies outside ``buf``."""
    o = offsets[k]
    if o < 0 or o + 8 * counts[k] > buf.size:
        return False, buf[:0].view(np.int64)
    return True, buf[o:o + 8 * counts[k]].view(np.int64)


@nb.njit(cache=True, nogil=True)
def _or_span_bits(buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray, bound: int,
                  bits: np.ndarray) -> int:
    """:func:`_or_bits` of the int64 values lying in ``buf`` (bytes): ``counts[i]`` of them
    from byte ``offsets[i]``."""
    for k in range(offsets.size):
        ok, vals = _span(buf, offsets, counts, k)
        if not ok:
            return 2
        st = _or_bits(vals, bound, bits)
        if st != 0:
            return st
    return 0


@nb.njit(cache=True, nogil=True)
def _scan_bits(bits: np.ndarray, keys: np.ndarray, n: int, unroll: int) -> int:
    """The set bits' positions, ascending, into ``keys`` (``n + 64`` long at least); returns
    how many, or -1 when there are more than ``n``.

    Each word writes ``unroll`` positions unconditionally (those past its set bits are
    overwritten by the next word's), and only a word with more bits than that loops: a loop
    per word ending at a data-dependent count mispredicts about once a word, which costs more
    than the word's few set bits. ``unroll`` near the mean bits per word keeps both the
    wasted writes and the loops of crowded words few (:func:`_unroll_for`)."""
    one = np.uint64(1)
    k = 0
    for j in range(bits.size):
        if k > n:
            return -1
        x = bits[j]
        base = np.int64(j) << 6
        c = np.int64(_popcount(x))
        for u in range(unroll):
            keys[k + u] = base + np.int64(trailing_zeros(x))
            x &= x - one
        if c > unroll:
            kk = k + unroll
            while x:
                keys[kk] = base + np.int64(trailing_zeros(x))
                kk += 1
                x &= x - one
        k += c
    return k if k <= n else -1


def _unroll_for(n: int, words: int) -> int:
    """:func:`_scan_bits`' unroll for ``n`` set bits in ``words`` words."""
    per_word = n / max(words, 1)
    for u in (1, 2, 4, 8):
        if per_word < 0.6 * u:
            return u
    return 16


def sort_unique(values: np.ndarray, bound: int, alloc: Any = None) -> np.ndarray | None:
    """Distinct integers ``0 <= values < bound`` sorted, or None when a value repeats or the
    values are too sparse in ``[0, bound)`` (``bound > 256 n``; then sort another way).

    No payload to carry, so no buckets: every value sets its bit in one bitmap of ``bound``
    bits (``bound / 8`` bytes, in cache for tens of millions), and one scan of the bitmap
    writes the values out in order. O(n + bound / 64), with neither the buckets nor the
    payload of :func:`~replaydb.indexes.kernels.sort_unique_with_payload`. The planner sorts
    this way the lookups whose event times Algorithm 3.1 does not read. Raises ValueError for values
    outside ``[0, bound)``; ``alloc`` as in :func:`~replaydb.indexes.kernels.sort_unique_with_payload`."""
    values = np.asarray(values)
    bits = _unique_bits(values, bound, _scratch_arena().take, "sort_unique")
    return None if bits is None else keys_of_bits(bits, values.size, alloc)


def unique_bits(values: np.ndarray, bound: int, alloc: Any = None) -> np.ndarray | None:
    """The set of distinct integers ``0 <= values < bound`` as a bitmap (``ceil(bound / 64)``
    uint64 words, bit ``v`` set for every value ``v``; made by ``alloc(n, dtype)``, default
    ``np.empty``): a membership test in O(1) (:func:`member_bits`), and the values sorted by
    one scan (:func:`keys_of_bits`) - the two halves of :func:`sort_unique`, for callers that
    may need only the first. None when a value repeats or the values are too sparse (as
    :func:`sort_unique`); ValueError for values outside ``[0, bound)``. O(n + bound / 64)."""
    return _unique_bits(np.asarray(values), bound, alloc or np.empty, "unique_bits")


def _unique_bits(values: np.ndarray, bound: int, alloc: Any, who: str) -> np.ndarray | None:
    """:func:`unique_bits` with the bitmap from ``alloc``; ``who`` names the caller in
    errors."""
    if not _dense_enough(values, bound, who):
        return None
    bits = alloc((bound + 63) >> 6, np.dtype(np.uint64))
    status = _set_bits(np.ascontiguousarray(values, dtype=np.int64), int(bound), bits)
    if status == 2:
        raise ValueError(f"{who}: values must be integers in [0, bound)")
    return bits if status == 0 else None


def union_bits_of(pieces: Sequence[Any], bound: int, alloc: Any = None
                  ) -> np.ndarray | None:
    """The set of the values of several ``pieces`` together as a bitmap (as
    :func:`unique_bits` makes; a value in several pieces, or twice in one, is one member):
    arrays, or where int64 values lie in a file's bytes (objects with ``buf``, ``offsets``,
    ``counts`` and ``dtype``, as :class:`.plainread.Spans`), whose bits are set where they
    lie - no copy into one array first. None when the values are too sparse for a bitmap
    (as :func:`unique_bits`, for their total count ``n``); ValueError for values outside
    ``[0, bound)``. The bitmap holds at most ``n`` members: :func:`keys_of_bits` with
    ``at_most=True`` reads them. O(n + bound / 64)."""
    n = 0
    for p in pieces:
        if p.dtype.kind not in "iu":
            raise ValueError("union_bits_of: values must be integers in [0, bound)")
        n += p.size
    if not bits_pay(n, bound):
        for p in pieces:
            v = _values_of(p)
            if v.size and (int(v.min()) < 0 or int(v.max()) >= bound):
                raise ValueError("union_bits_of: values must be integers in [0, bound)")
        return None
    bits = (alloc or np.empty)((bound + 63) >> 6, np.dtype(np.uint64))
    bits[:] = 0
    b = int(bound)
    _each_piece(pieces, "union_bits_of", lambda v: _or_bits(v, b, bits),
                lambda buf, offs, cnts: _or_span_bits(buf, offs, cnts, b, bits))
    return bits


def _values_of(piece: Any) -> np.ndarray:
    """An array of ``piece``'s values (:func:`union_bits_of`)."""
    return piece if isinstance(piece, np.ndarray) else piece.array()


def _each_piece(pieces: Sequence[Any], who: str, on_values: Any, on_spans: Any) -> None:
    """Hand each piece to a kernel where its values lie: ``on_spans(buf, offsets, counts)``
    for int64 values in a file's bytes (:class:`.plainread.Spans`), ``on_values(array)``
    for the others (as a contiguous int64 array). A kernel answers 0, or 2 for a value
    outside ``[0, bound)``; ValueError (naming ``who``) for that and for non-integers."""
    for p in pieces:
        if p.dtype.kind not in "iu":
            raise ValueError(f"{who}: values must be integers in [0, bound)")
        if isinstance(p, np.ndarray) or p.dtype != np.dtype("<i8"):
            status = on_values(np.ascontiguousarray(_values_of(p), dtype=np.int64))
        else:
            status = on_spans(p.buf, p.offsets, p.counts)
        if status == 2:
            raise ValueError(f"{who}: values must be integers in [0, bound)")


def keys_of_bits(bits: np.ndarray, n: int, alloc: Any = None, *,
                 at_most: bool = False) -> np.ndarray:
    """The ``n`` set bits' positions of ``bits``, ascending (``alloc`` as in
    :func:`unique_bits`); with ``at_most``, ``n`` bounds their count (the bitmap of a union,
    :func:`union_bits_of`) and the result holds as many as are set. ValueError when the
    bitmap holds more than ``n``, or (without ``at_most``) fewer. O(len(bits) + n)."""
    keys = (alloc or np.empty)(n + 64, np.dtype(np.int64))
    got = _scan_bits(bits, keys, n, _unroll_for(n, bits.size))
    if got < 0 or (got != n and not at_most):
        held = "more" if got < 0 else got
        raise ValueError(f"keys_of_bits: the bitmap holds {held} values, not {n}")
    return keys[:got]


@nb.njit(cache=True, nogil=True)
def member_bits(base: np.ndarray, off: int, bits: np.ndarray, bound: int) -> np.ndarray:
    """The ``b`` of ``base`` (order kept) with bit ``b + off`` set in ``bits`` (a bitmap of
    ``bound`` bits, as :func:`unique_bits` returns). O(len(base)), one bitmap read per
    element and no data-dependent branch."""
    out = np.empty(base.size, np.int64)
    k = 0
    one = np.uint64(1)
    for i in range(base.size):
        x = base[i] + off
        if x >= 0 and x < bound:
            out[k] = base[i]
            k += np.int64((bits[x >> 6] >> np.uint64(x & 63)) & one)
    return out[:k]
