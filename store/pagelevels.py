"""Definition levels of a flat optional column's data page (max level 1): the RLE / bit-packed
hybrid that says which rows hold a value. Shared by the fixed-width decoders
(:mod:`.pagecodec`) and the byte-array decoders (:mod:`.stringcodec`). O(rows)."""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.store.pageheader import CORRUPT, ENC_RLE, OK, UNSUPPORTED, _varint


@nb.njit(cache=True, nogil=True)
def _levels(src: np.ndarray, pos: int, end: int, n: int, valid: np.ndarray, at: int) -> int:
    """Decode ``n`` definition levels of bit width 1 (RLE / bit-packed hybrid) from
    ``src[pos:end]`` into ``valid[at:at + n]``; answers the number of non-null values or -1."""
    got = 0
    ones = 0
    while got < n:
        st, head, pos = _varint(src, pos, end)
        if st != OK or head < 0:
            return -1
        if head & 1:  # bit-packed: (head >> 1) groups of 8 values, one bit each
            cnt = (head >> 1) * 8
            if pos + (head >> 1) > end:
                return -1
            for k in range(min(cnt, n - got)):
                bit = (src[pos + (k >> 3)] >> (k & 7)) & 1
                valid[at + got + k] = bit
                ones += bit
            pos += head >> 1
            got += min(cnt, n - got)
        else:
            cnt = head >> 1
            if pos >= end:
                return -1
            v = src[pos] & 1
            if src[pos] > 1:
                return -1
            pos += 1
            take = min(cnt, n - got)
            valid[at + got:at + got + take] = v
            if v:
                ones += take
            got += take
    return ones


@nb.njit(cache=True, nogil=True)
def page_levels(src: np.ndarray, p: int, e: int, nvals: int, denc: int, valid: np.ndarray,
                at: int) -> tuple[int, int, int]:
    """The definition levels at the start of a version-1 data page body ``src[p:e]`` of an
    optional column (a 4-byte length, then the levels) into ``valid[at:at + nvals]``:
    ``(status, values present, position after the levels)``; UNSUPPORTED for a levels
    encoding other than RLE."""
    if denc != ENC_RLE:
        return UNSUPPORTED, 0, p
    if p + 4 > e:
        return CORRUPT, 0, p
    ln = (np.int64(src[p]) | (np.int64(src[p + 1]) << 8)
          | (np.int64(src[p + 2]) << 16) | (np.int64(src[p + 3]) << 24))
    p += 4
    if p + ln > e:
        return CORRUPT, 0, p
    present = _levels(src, p, p + ln, nvals, valid, at)
    if present < 0:
        return CORRUPT, 0, p
    return OK, present, p + ln


@nb.njit(cache=True, nogil=True, inline="always")
def present_buffer(out: np.ndarray, at: int, nvals: int, present: int, vals: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Where a page's ``present`` values are decoded: straight into ``out[at:at + nvals]``
    when no row is null, else into ``vals`` (grown when short, and answered for reuse):
    ``(destination, vals)``."""
    if present == nvals:
        return out[at:at + nvals], vals
    if vals.size < present:
        vals = np.empty(max(present, 2 * vals.size), np.uint64)
    return vals[:present], vals


@nb.njit(cache=True, nogil=True, inline="always")
def spread_present(out: np.ndarray, valid: np.ndarray, at: int, nvals: int,
                   vals: np.ndarray) -> None:
    """Move a page's present values (``vals``, in order) to their rows of ``out[at:at +
    nvals]`` as ``valid`` marks them; null rows get 0. O(nvals)."""
    j = 0
    for i in range(nvals):
        if valid[at + i]:
            out[at + i] = vals[j]
            j += 1
        else:
            out[at + i] = 0
