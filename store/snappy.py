"""Compiled decoder of snappy's raw block format (the codec of Parquet pages written with
SNAPPY), and a reader of bytes where they lie in a block's literals.

Every offset is checked against the bounds given; a corrupt block answers -1 and never reads or
writes outside its arrays. O(bytes of the block).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.store.pageheader import OK, _varint


@nb.njit(cache=True, nogil=True, inline="always")
def _snappy_element(src: np.ndarray, pos: int, end: int) -> tuple[int, int, int]:
    """The element of a raw snappy block at ``pos`` (its tag byte): ``(length, offset,
    position of what follows)`` - a literal's bytes follow it (offset -1), a back-reference
    copies ``length`` bytes from ``offset`` back (the caller checks the offset); length -1
    when the element runs past ``end``."""
    tag = src[pos]
    pos += 1
    kind = tag & 3
    if kind == 0:  # literal
        ln = (tag >> 2) + 1
        if ln > 60:
            nb_ = ln - 60
            if pos + nb_ > end:
                return -1, -1, pos
            ln = 0
            for k in range(nb_):
                ln |= np.int64(src[pos + k]) << (8 * k)
            ln += 1
            pos += nb_
        return (ln, -1, pos) if pos + ln <= end else (-1, -1, pos)
    if kind == 1:
        if pos >= end:
            return -1, 0, pos
        return (4 + ((tag >> 2) & 7), (np.int64(tag >> 5) << 8) | np.int64(src[pos]),
                pos + 1)
    if kind == 2:
        if pos + 2 > end:
            return -1, 0, pos
        return (tag >> 2) + 1, np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8), pos + 2
    if pos + 4 > end:
        return -1, 0, pos
    return ((tag >> 2) + 1, np.int64(src[pos]) | (np.int64(src[pos + 1]) << 8)
            | (np.int64(src[pos + 2]) << 16) | (np.int64(src[pos + 3]) << 24), pos + 4)


@nb.njit(cache=True, nogil=True, inline="always")
def _step(src: np.ndarray, pos: int, end: int, dst: np.ndarray, out: int) -> tuple[int, int]:
    """Decode the element at ``src[pos]`` (:func:`_snappy_element`) and copy its bytes to
    ``dst[out:]`` by single-byte loops (the elements of numeric pages are a few bytes long, so
    a call or a word view per element would cost more than the bytes it moves; an overlapping
    back-reference repeats the last ``offset`` bytes, as a forward byte loop does by itself):
    ``(position of the next element, bytes written)``, position -1 when the element is
    corrupt."""
    ln, off, pos = _snappy_element(src, pos, end)
    if ln < 0 or out + ln > dst.size:
        return -1, out
    if off < 0:  # a literal: its bytes follow
        for k in range(ln):
            dst[out + k] = src[pos + k]
        return pos + ln, out + ln
    if off == 0 or off > out:
        return -1, out
    back = out - off
    for k in range(ln):
        dst[out + k] = dst[back + k]
    return pos, out + ln


@nb.njit(cache=True, nogil=True)
def snappy_decompress(src: np.ndarray, pos: int, end: int, dst: np.ndarray) -> int:
    """Decompress the raw snappy block ``src[pos:end]`` into ``dst``; answers the number of
    bytes written, or -1 when the block is corrupt or its length is not ``len(dst)``
    (:func:`snappy_prefix` to the end). O(bytes of the block)."""
    st, n, pos = _varint(src, pos, end)
    if st != OK or n != dst.size:
        return -1
    pos, out = snappy_prefix(src, pos, end, dst, 0, n)
    return out if pos == end and out == n else -1


@nb.njit(cache=True, nogil=True)
def snappy_prefix(src: np.ndarray, pos: int, end: int, dst: np.ndarray, out: int,
                  upto: int) -> tuple[int, int]:
    """Go on decompressing a raw snappy block into ``dst`` (its full decompressed length)
    from the element at ``src[pos]`` with ``out`` bytes written, until at least ``upto`` bytes
    are written or the block ends: ``(position of the next element, bytes written)``,
    position -1 when the block is corrupt. Start at the position after the block's length
    varint with ``out`` 0; stop early to read a prefix of a page. One pass over the elements
    (:func:`_step`): O(bytes written)."""
    while out < upto and pos < end:
        pos, out = _step(src, pos, end, dst, out)
        if pos < 0:
            return -1, out
    return pos, out


@nb.njit(cache=True, nogil=True)
def _snappy_at(src: np.ndarray, pos: int, end: int, x: int, n: int) -> int:
    """Where bytes ``[x, x + n)`` of the raw snappy block ``src[pos:end]`` once decompressed
    lie in ``src``, when they lie in one literal; -1 when they do not (in a back-reference,
    across two elements, past the end, or a corrupt block). Walks the elements up to ``x``
    without copying anything: O(elements before ``x``)."""
    st, total, pos = _varint(src, pos, end)
    if st != OK or x < 0 or x + n > total:
        return -1
    out = 0
    while pos < end:
        ln, off, pos = _snappy_element(src, pos, end)
        if ln < 0:
            return -1
        if x < out + ln:  # in this element: readable only from a literal
            return pos + (x - out) if off < 0 and x + n <= out + ln else -1
        if off < 0:
            pos += ln
        out += ln
    return -1
