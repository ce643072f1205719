"""Compiled decoders of Parquet BYTE_ARRAY column chunks (strings and binary) into *slots*.

A decoded value is one uint64 slot, ``start << LEN_BITS | length``: its bytes are
``heap[start:start + length]`` of a byte heap that one read owns and only appends to. A slot
is as wide as a fixed-width value's, so every read of :mod:`.pagecodec` (several row groups,
several files gathered into one set of buffers, only the rows inside time intervals) moves a
string column's slots exactly as it moves other columns' values, and :func:`gather` builds
Arrow's offsets and bytes once at the end. A dictionary's strings are copied to the heap once
per column chunk and every row coded with the dictionary takes the slot of its entry, so the
bytes of a repeated string are not copied until the gather.

What is decoded (anything else answers UNSUPPORTED, and the caller reads through Arrow): a
dictionary page of PLAIN byte arrays, then version-1 data pages coded RLE_DICTIONARY or
PLAIN_DICTIONARY, or PLAIN (a writer falls back to PLAIN when the dictionary grows too large);
uncompressed or snappy pages; definition levels as :mod:`.pagelevels` reads them; values of
at most ``MAX_LEN`` bytes and a heap of at most ``MAX_HEAP`` bytes. Every offset is checked
against its bounds, as in :mod:`.pagecodec`: a corrupt page answers CORRUPT, never reads or
writes outside its arrays.

Complexity: O(bytes of the pages + values) to decode; O(rows + bytes) to gather.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.store.pageheader import (
    _PAGE_DATA,
    _PAGE_DICT,
    _PAGE_INDEX,
    CODEC_NONE,
    CODEC_SNAPPY,
    CORRUPT,
    ENC_PLAIN,
    ENC_PLAIN_DICT,
    ENC_RLE_DICT,
    OK,
    UNSUPPORTED,
    _varint,
    page_header,
)
from replaydb.store.pagelevels import page_levels, present_buffer, spread_present
from replaydb.store.snappy import snappy_decompress

LEN_BITS = 24
MAX_LEN = (1 << LEN_BITS) - 1
MAX_HEAP = 1 << 39
MAX_ARROW_BYTES = (1 << 31) - 1
"""Bytes of one gathered column at most (Arrow's ``string`` has 32-bit offsets)."""


@nb.njit(cache=True, nogil=True)
def reserve(heap: np.ndarray, used: int, need: int) -> np.ndarray:
    """``heap``, or a copy of its first ``used`` bytes with room for ``need`` more."""
    if used + need <= heap.size:
        return heap
    grown = np.empty(max(2 * heap.size, used + need, 1 << 16), np.uint8)
    grown[:used] = heap[:used]
    return grown


@nb.njit(cache=True, nogil=True, inline="always")
def _le32(src: np.ndarray, q: int) -> int:
    return (np.int64(src[q]) | (np.int64(src[q + 1]) << 8) | (np.int64(src[q + 2]) << 16)
            | (np.int64(src[q + 3]) << 24))


@nb.njit(cache=True, nogil=True)
def _byte_arrays(src: np.ndarray, p: int, e: int, n: int, heap: np.ndarray,
                 hstate: np.ndarray, slots: np.ndarray) -> tuple[int, np.ndarray]:
    """``n`` PLAIN byte arrays at ``src[p:e]`` (each a 4-byte length, then its bytes): the
    region is copied to the heap at ``hstate[0]`` (advanced past it) and each value's slot
    written to ``slots[:n]``. Answers ``(status, heap)``."""
    used = hstate[0]
    if used + (e - p) > MAX_HEAP:
        return UNSUPPORTED, heap
    q = p
    for i in range(n):
        if q + 4 > e:
            return CORRUPT, heap
        ln = _le32(src, q)
        q += 4
        if q + ln > e:
            return CORRUPT, heap
        if ln > MAX_LEN:
            return UNSUPPORTED, heap
        slots[i] = (np.uint64(used + q - p) << np.uint64(LEN_BITS)) | np.uint64(ln)
        q += ln
    heap = reserve(heap, used, q - p)
    heap[used:used + (q - p)] = src[p:q]
    hstate[0] = used + (q - p)
    return OK, heap


@nb.njit(cache=True, nogil=True)
def _dict_ids(src: np.ndarray, p: int, e: int, n: int, w: int, ids: np.ndarray) -> int:
    """``n`` dictionary indices of ``w`` bits (0..32; RLE / bit-packed hybrid, no length
    prefix) at ``src[p:e]`` into ``ids[:n]``; answers the status."""
    nbytes = (w + 7) >> 3
    mask = (np.int64(1) << w) - 1
    got = 0
    while got < n:
        st, head, p = _varint(src, p, e)
        if st != OK or head < 0:
            return CORRUPT
        if head & 1:  # bit-packed: (head >> 1) groups of 8 values
            groups = head >> 1
            if p + groups * w > e:
                return CORRUPT
            take = min(groups * 8, n - got)
            for k in range(take):
                bit = k * w
                b = p + (bit >> 3)
                sh = bit & 7
                v = np.int64(0)
                for q in range((sh + w + 7) >> 3):
                    v |= np.int64(src[b + q]) << (8 * q)
                ids[got + k] = (v >> sh) & mask
            p += groups * w
            got += take
        else:  # a run of one value in nbytes little-endian bytes
            if p + nbytes > e:
                return CORRUPT
            v = np.int64(0)
            for q in range(nbytes):
                v |= np.int64(src[p + q]) << (8 * q)
            p += nbytes
            take = min(head >> 1, n - got)
            ids[got:got + take] = v
            got += take
    return OK


@nb.njit(cache=True, nogil=True)
def _str_page(src: np.ndarray, p: int, e: int, nvals: int, enc: int, denc: int,
              optional: bool, dslots: np.ndarray, has_dict: bool, out: np.ndarray,
              valid: np.ndarray, at: int, vals: np.ndarray, heap: np.ndarray,
              hstate: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """One data page (``src[p:e]``, decompressed) into the slots ``out[at:at + nvals]`` and
    ``valid``; null rows get slot 0 (no bytes). ``vals`` is a reusable buffer for the present
    values of a page with nulls. Answers ``(status, vals, heap)``."""
    present = nvals
    if optional:
        st, present, p = page_levels(src, p, e, nvals, denc, valid, at)
        if st != OK:
            return st, vals, heap
    dst, vals = present_buffer(out, at, nvals, present, vals)
    if enc == ENC_RLE_DICT or enc == ENC_PLAIN_DICT:
        if present > 0:
            if not has_dict or p >= e or src[p] > 32:
                return CORRUPT, vals, heap
            ids = np.empty(present, np.int64)
            if _dict_ids(src, p + 1, e, present, np.int64(src[p]), ids) != OK:
                return CORRUPT, vals, heap
            for i in range(present):
                if ids[i] >= dslots.size:
                    return CORRUPT, vals, heap
                dst[i] = dslots[ids[i]]
    elif enc == ENC_PLAIN:
        st, heap = _byte_arrays(src, p, e, present, heap, hstate, dst)
        if st != OK:
            return st, vals, heap
    else:
        return UNSUPPORTED, vals, heap
    if present != nvals:
        spread_present(out, valid, at, nvals, vals)
    return OK, vals, heap


@nb.njit(cache=True, nogil=True)
def str_chunk(buf: np.ndarray, pos: int, end: int, rows: int, codec: int, optional: bool,
              out: np.ndarray, valid: np.ndarray, at: int, scratch: np.ndarray,
              vals: np.ndarray, heap: np.ndarray, hstate: np.ndarray
              ) -> tuple[int, np.ndarray, np.ndarray]:
    """Decode one BYTE_ARRAY column chunk (``buf[pos:end]`` from its dictionary page or its
    first data page, ``rows`` values) into the slots ``out[at:]`` and ``valid[at:]``, its
    bytes onto the heap (``hstate[0]``: bytes used); ``scratch`` holds a decompressed page.
    Answers ``(status, vals, heap)``."""
    if pos < 0 or end < pos or end > buf.size:
        return CORRUPT, vals, heap
    left = rows
    dslots = np.empty(0, np.uint64)
    has_dict = False
    while pos < end:
        st, hend, ptype, usize, csize, nvals, enc, denc = page_header(buf, pos, end)
        if st != OK:
            return st, vals, heap
        bend = hend + csize
        if bend > end:
            return CORRUPT, vals, heap
        pos = bend
        if ptype == _PAGE_INDEX:
            continue
        if ptype != _PAGE_DATA and ptype != _PAGE_DICT:
            return UNSUPPORTED, vals, heap
        if ptype == _PAGE_DICT:
            if has_dict or nvals < 0 or (enc != ENC_PLAIN and enc != ENC_PLAIN_DICT):
                return CORRUPT, vals, heap
            dslots = np.empty(nvals, np.uint64)
            has_dict = True
        elif nvals <= 0 or nvals > left or at + nvals > out.size:
            return CORRUPT, vals, heap
        # the page's bytes: decompressed into scratch, or where they lie (two calls each, as
        # the file's bytes may be read-only and scratch is not)
        if codec == CODEC_SNAPPY:
            if usize > scratch.size:
                return UNSUPPORTED, vals, heap
            page = scratch[:usize]
            if snappy_decompress(buf, hend, bend, page) != usize:
                return CORRUPT, vals, heap
            if ptype == _PAGE_DICT:
                st, heap = _byte_arrays(page, 0, usize, nvals, heap, hstate, dslots)
            else:
                st, vals, heap = _str_page(page, 0, usize, nvals, enc, denc, optional, dslots,
                                           has_dict, out, valid, at, vals, heap, hstate)
        elif codec == CODEC_NONE:
            if usize != csize:
                return CORRUPT, vals, heap
            if ptype == _PAGE_DICT:
                st, heap = _byte_arrays(buf, hend, bend, nvals, heap, hstate, dslots)
            else:
                st, vals, heap = _str_page(buf, hend, bend, nvals, enc, denc, optional, dslots,
                                           has_dict, out, valid, at, vals, heap, hstate)
        else:
            return UNSUPPORTED, vals, heap
        if st != OK:
            return st, vals, heap
        if ptype == _PAGE_DATA:
            at += nvals
            left -= nvals
    return (OK if left == 0 else CORRUPT), vals, heap


@nb.njit(cache=True, nogil=True)
def gather(heap: np.ndarray, slots: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Arrow's layout of the values ``slots`` (null rows hold slot 0): ``(status, offsets
    (int32, one more than the rows), bytes)``; UNSUPPORTED when they hold more than
    :data:`MAX_ARROW_BYTES` bytes, CORRUPT for a slot outside the heap. O(rows + bytes)."""
    n = slots.size
    mask = np.uint64(MAX_LEN)
    total = 0
    for i in range(n):
        total += np.int64(slots[i] & mask)
    offsets = np.empty(n + 1, np.int32)
    if total > MAX_ARROW_BYTES:
        return UNSUPPORTED, offsets, np.empty(0, np.uint8)
    data = np.empty(total, np.uint8)
    offsets[0] = 0
    pos = 0
    for i in range(n):
        s = np.int64(slots[i] >> np.uint64(LEN_BITS))
        ln = np.int64(slots[i] & mask)
        if s + ln > heap.size:
            return CORRUPT, offsets, data
        data[pos:pos + ln] = heap[s:s + ln]
        pos += ln
        offsets[i + 1] = pos
    return OK, offsets, data
