"""Compiled decoder of DELTA_BINARY_PACKED values (Parquet's delta encoding of INT32 and INT64
columns): a run of values, or one value read where it lies.

Every offset is checked against the bounds given; a corrupt block answers
:data:`~replaydb.store.pageheader.CORRUPT` and never reads or writes outside its arrays.
O(bytes of the values decoded).
"""

from __future__ import annotations

import sys

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from replaydb.store.pageheader import CORRUPT, OK, _unzig, _varint

LITTLE_ENDIAN = sys.byteorder == "little"
"""Whether a word loaded from memory holds its bytes in Parquet's (little-endian) order; the
word-at-a-time unpacking below is used only then."""


@intrinsic
def _load_le64(typingctx: object, arr: types.Type, idx: types.Type) -> object:
    """The 8 bytes ``arr[idx:idx + 8]`` of a C-contiguous uint8 array as one uint64 word,
    loaded without alignment (the caller checks ``idx + 8 <= arr.size``)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1
            and arr.layout == "C" and isinstance(idx, types.Integer)):
        return None
    sig = types.uint64(arr, types.intp)

    def codegen(context: object, builder: object, signature: object, args: object) -> object:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return sig, codegen


@nb.njit(cache=True, nogil=True, inline="always")
def _unpack_deltas(src: np.ndarray, pos: int, take: int, w: int, mind: np.uint64,
                   cur: np.uint64, out: np.ndarray, at: int) -> np.uint64:
    """Add ``take`` deltas of ``w`` bits (1..56), bit-packed little-endian from ``src[pos]``
    (the caller checked that their bytes lie before the end), each plus ``mind``, to ``cur``
    one after another, writing the running values to ``out[at:at + take]``; answers the last.
    A bit buffer takes whole bytes as the next value needs them (it never holds more than 63
    bits, so widths up to 56), reading each packed byte once: O(take x w / 8). Where eight
    bytes can be loaded from the last value's first byte (the buffer goes on), each value is
    instead cut from one unaligned word load, with no dependence between loads."""
    mask = (np.uint64(1) << np.uint64(w)) - np.uint64(1)
    if LITTLE_ENDIAN and pos + ((take * w + 7) >> 3) + 8 <= src.size:
        for k in range(take):
            bit = k * w
            v = _load_le64(src, pos + (bit >> 3)) >> np.uint64(bit & 7)
            cur += mind + (v & mask)
            out[at + k] = cur
        return cur
    acc = np.uint64(0)
    have = 0
    p = pos
    for k in range(take):
        while have < w:
            acc |= np.uint64(src[p]) << np.uint64(have)
            p += 1
            have += 8
        cur += mind + (acc & mask)
        acc >>= np.uint64(w)
        have -= w
        out[at + k] = cur
    return cur


@nb.njit(cache=True, nogil=True, inline="always")
def _packed_value(src: np.ndarray, pos: int, k: int, w: int, end: int) -> np.uint64:
    """The ``k``-th value of ``w`` bits (1..64) bit-packed little-endian from ``src[pos]``;
    bytes at or past ``end`` read as zero. O(w / 8)."""
    bit = k * w
    b = pos + (bit >> 3)
    sh = bit & 7
    nbytes = (sh + w + 7) >> 3
    v = np.uint64(0)
    for q in range(min(nbytes, 8)):
        if b + q < end:
            v |= np.uint64(src[b + q]) << np.uint64(8 * q)
    v >>= np.uint64(sh)
    if nbytes > 8 and b + 8 < end:
        v |= np.uint64(src[b + 8]) << np.uint64(64 - sh)
    if w < 64:
        v &= (np.uint64(1) << np.uint64(w)) - np.uint64(1)
    return v


@nb.njit(cache=True, nogil=True, inline="always")
def _delta_header(src: np.ndarray, pos: int, end: int
                  ) -> tuple[int, int, int, int, np.uint64, int]:
    """The header of DELTA_BINARY_PACKED values at ``src[pos:end]``: ``(status, values per
    miniblock, miniblocks per block, total values, first value, position after it)``;
    CORRUPT for a header that does not parse or a block size the format forbids."""
    minis = total = raw = 0
    st, block, pos = _varint(src, pos, end)
    if st == OK:
        st, minis, pos = _varint(src, pos, end)
    if st == OK:
        st, total, pos = _varint(src, pos, end)
    if st == OK:
        st, raw, pos = _varint(src, pos, end)
    if (st != OK or block <= 0 or minis <= 0 or block % 128 != 0 or block % minis != 0
            or (block // minis) % 32 != 0):
        return CORRUPT, 0, 0, 0, np.uint64(0), pos
    return OK, block // minis, minis, total, np.uint64(_unzig(raw)), pos


@nb.njit(cache=True, nogil=True)
def _delta_value_at(src: np.ndarray, pos: int, end: int, r: int) -> tuple[int, np.uint64]:
    """Value ``r`` of the DELTA_BINARY_PACKED values at ``src[pos:end]`` (uint64 bits, as
    :func:`_delta` decodes them): ``(status, value)``, CORRUPT when the header is invalid,
    the values end before ``r`` or a miniblock runs past ``end``. The first value plus
    ``r`` deltas, added miniblock by miniblock (as :func:`_delta` decodes them, into a scratch
    of one miniblock): O(r x bit width / 8)."""
    st, per, minis, total, cur, pos = _delta_header(src, pos, end)
    if st != OK or r < 0 or r >= total:
        return CORRUPT, np.uint64(0)
    left = r  # deltas still to add
    scratch = np.empty(per, np.uint64)  # the running values of a miniblock, not kept
    while left > 0:
        st, raw, pos = _varint(src, pos, end)
        if st != OK or pos + minis > end:
            return CORRUPT, np.uint64(0)
        mind = np.uint64(_unzig(raw))
        widths = pos
        pos += minis
        for mb in range(minis):
            if left == 0:
                break
            w = np.int64(src[widths + mb])
            take = min(per, left)
            if w > 64 or pos + (take * w + 7) // 8 > end:
                return CORRUPT, np.uint64(0)
            if w == 0:
                cur += mind * np.uint64(take)
            elif w <= 56:
                cur = _unpack_deltas(src, pos, take, w, mind, cur, scratch, 0)
            else:
                for k in range(take):
                    cur += mind + _packed_value(src, pos, k, w, end)
            left -= take
            pos += per * w // 8
    return OK, cur


@nb.njit(cache=True, nogil=True)
def _delta(src: np.ndarray, pos: int, end: int, n: int, out: np.ndarray, at: int) -> int:
    """Decode ``n`` DELTA_BINARY_PACKED values into ``out[at:at + n]`` (uint64 bits; the
    caller narrows INT32); answers OK or CORRUPT. Sums wrap modulo 2^64 as the format wants."""
    st, per, minis, total, cur, pos = _delta_header(src, pos, end)
    if st != OK or total < n:
        return CORRUPT
    if n == 0:
        return OK
    out[at] = cur
    got = 1
    while got < n:
        st, raw, pos = _varint(src, pos, end)
        if st != OK or pos + minis > end:
            return CORRUPT
        mind = np.uint64(_unzig(raw))
        widths = pos
        pos += minis
        for mb in range(minis):
            if got >= n:
                break
            w = np.int64(src[widths + mb])
            if w > 64:
                return CORRUPT
            take = min(per, n - got)
            if w == 0:
                for k in range(take):
                    cur += mind
                    out[at + got + k] = cur
            elif w <= 56:
                if pos + (take * w + 7) // 8 > end:
                    return CORRUPT
                cur = _unpack_deltas(src, pos, take, w, mind, cur, out, at + got)
            else:
                if pos + (take * w + 7) // 8 > end:
                    return CORRUPT
                for k in range(take):
                    cur += mind + _packed_value(src, pos, k, w, end)
                    out[at + got + k] = cur
            pos += per * w // 8
            got += take
    return OK
