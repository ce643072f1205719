"""Compiled decoders of Parquet data pages: RLE levels and DELTA_BINARY_PACKED / PLAIN values of
fixed-width columns, whole column chunks, and single values read where they lie.

:mod:`.directread` reads the store's data files with these instead of Arrow's generic reader,
whose fixed cost per call and per row group dominates the small reads an index plan makes.
Everything here works on the raw bytes of a file (a NumPy ``uint8`` view of a memory map) and
checks every offset against the bounds it was given: a corrupt or unexpected page never reads
or writes outside its arrays, it makes the decoder answer a status other than :data:`OK`, and
the caller reads that file through Arrow instead (which reports corruption properly).

What is decoded (anything else answers :data:`UNSUPPORTED`):

* pages: version-1 data pages (``PageHeader.type == DATA_PAGE``); index pages are skipped; a
  version-2 data page is unsupported, and so is a dictionary page, except in a byte-array
  column (strings and binary, :mod:`.stringcodec`, whose values travel as slots of a byte
  heap: ``width`` 0 in the calls below);
* codecs: uncompressed and snappy (the format's raw block format);
* definition levels: none (required column) or max level 1, RLE / bit-packed hybrid;
* values: PLAIN of 4- and 8-byte types, DELTA_BINARY_PACKED of INT32 and INT64.

The page header is read by :mod:`.pageheader` (Thrift's compact protocol, and the status codes
:data:`OK`, :data:`UNSUPPORTED`, :data:`CORRUPT`), snappy blocks are decompressed by
:mod:`.snappy`, delta-packed values by :mod:`.deltapack`, and the first rows of a chunk alone by
:mod:`.pageprefix`.

Complexity: every decoder is O(bytes of the page + values), one pass.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.store.deltapack import _delta_value_at
from replaydb.store.pageheader import (
    _PAGE_DATA,
    _PAGE_INDEX,
    CODEC_NONE,
    CODEC_SNAPPY,
    CORRUPT,
    ENC_DELTA,
    ENC_PLAIN,
    ENC_RLE,
    OK,
    UNSUPPORTED,
    _header_into,
    _varint,
)
from replaydb.store.pageprefix import chunk_prefix
from replaydb.store.snappy import _snappy_at
from replaydb.store.stringcodec import str_chunk


@nb.njit(cache=True, nogil=True)
def _chunk(buf: np.ndarray, pos: int, end: int, rows: int, codec: int, width: int,
           optional: bool, out: np.ndarray, valid: np.ndarray, at: int,
           scratch: np.ndarray, vals: np.ndarray) -> tuple[int, np.ndarray]:
    """Decode one column chunk (``buf[pos:end]``, ``rows`` values) into ``out[at:]`` and
    ``valid[at:]``: :func:`.pageprefix.chunk_prefix` with every row wanted (which reads to
    the chunk's end and wants exactly ``rows`` values); ``scratch`` holds a decompressed
    page. Answers ``(status, vals)``."""
    if at < 0 or at > out.size or at > valid.size:
        return CORRUPT, vals
    return chunk_prefix(buf, pos, end, rows, rows, codec, width, optional, out[at:],
                        valid[at:], scratch, vals)


NEED = 3
"""Status of :func:`read_columns`: a location is not filled in yet."""


@nb.njit(cache=True, nogil=True)
def _extent(groups: np.ndarray, cols: np.ndarray, rows: np.ndarray, start: np.ndarray,
            usize: np.ndarray, codec: np.ndarray) -> tuple[int, int, int]:
    """``(status, rows, largest compressed page bytes)`` of a read of row groups ``groups`` of
    columns ``cols``: :data:`NEED` when a location is not filled in yet, UNSUPPORTED when a
    chunk is not one this reader decodes, CORRUPT for a row group out of range. O(groups x
    columns)."""
    n = 0
    big = 0
    for g in groups:
        if g < 0 or g >= rows.size:
            return CORRUPT, 0, 0
        if rows[g] < 0:
            return NEED, 0, 0
        n += rows[g]
        for c in cols:
            if start[g, c] == -1:
                return NEED, 0, 0
            if start[g, c] < 0:
                return UNSUPPORTED, 0, 0
            if codec[g, c] != CODEC_NONE and usize[g, c] > big:
                big = usize[g, c]
    return OK, n, big


@nb.njit(cache=True, nogil=True)
def _any_chunk(buf: np.ndarray, s: int, e: int, rows: int, codec: int, width: int,
               optional: bool, out: np.ndarray, valid: np.ndarray, at: int,
               scratch: np.ndarray, vals: np.ndarray, heap: np.ndarray, hstate: np.ndarray
               ) -> tuple[int, np.ndarray, np.ndarray]:
    """One column chunk of fixed-width values (:func:`_chunk`) or, for ``width`` 0, of byte
    arrays as heap slots (:func:`.stringcodec.str_chunk`): ``(status, vals, heap)``."""
    if width == 0:
        return str_chunk(buf, s, e, rows, codec, optional, out, valid, at, scratch, vals,
                         heap, hstate)
    st, vals = _chunk(buf, s, e, rows, codec, width, optional, out, valid, at, scratch, vals)
    return st, vals, heap


@nb.njit(cache=True, nogil=True)
def _decode(buf: np.ndarray, groups: np.ndarray, cols: np.ndarray, rows: np.ndarray,
            start: np.ndarray, size: np.ndarray, codec: np.ndarray, width: np.ndarray,
            optional: np.ndarray, out: np.ndarray, valid: np.ndarray, at: int, big: int,
            heap: np.ndarray, hstate: np.ndarray) -> tuple[int, np.ndarray]:
    """Decode row groups ``groups`` of columns ``cols`` into ``out[k, at:]`` and
    ``valid[k, at:]`` (the locations checked by :func:`_extent`); byte-array columns'
    bytes go onto ``heap`` (``hstate[0]`` bytes used). Answers ``(status, heap)``."""
    scratch = np.empty(big, np.uint8)
    vals = np.empty(0, np.uint64)
    for k in range(cols.size):
        c = cols[k]
        pos = at
        o = out[k]
        v = valid[k]
        if width[k] == 0:  # byte arrays (a loop of its own: the fixed-width one stays lean)
            for g in groups:
                st, vals, heap = str_chunk(buf, start[g, c], start[g, c] + size[g, c], rows[g],
                                           codec[g, c], optional[k], o, v, pos, scratch, vals,
                                           heap, hstate)
                if st != OK:
                    return st, heap
                pos += rows[g]
            continue
        for g in groups:
            st, vals = _chunk(buf, start[g, c], start[g, c] + size[g, c], rows[g], codec[g, c],
                              width[k], optional[k], o, v, pos, scratch, vals)
            if st != OK:
                return st, heap
            pos += rows[g]
    return OK, heap


@nb.njit(cache=True, nogil=True)
def read_columns(buf: np.ndarray, groups: np.ndarray, cols: np.ndarray, rows: np.ndarray,
                 start: np.ndarray, size: np.ndarray, usize: np.ndarray, codec: np.ndarray,
                 width: np.ndarray, optional: np.ndarray, heap: np.ndarray,
                 hstate: np.ndarray
                 ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode row groups ``groups`` (in that order) of columns ``cols`` of the file ``buf``:
    ``(status, values, valid, nulls, heap)`` with ``values[k]`` the uint64 slots of column
    ``cols[k]`` (4-byte values in the low half; for a byte-array column, ``width[k]`` 0, the
    slots of its values on ``heap``, :mod:`.stringcodec`; 0 where null), ``valid[k]`` 1 where
    present (optional columns only) and ``nulls[k]`` the number of nulls. ``heap`` and
    ``hstate`` (``[bytes used]``) may start empty; the heap answered may be a larger one.

    ``rows[g]`` is row group g's row count; ``start/size/usize/codec[g, c]`` locate chunk
    (g, c) (offset of its first data page, bytes, uncompressed bytes, codec; start -1 = not
    located yet, -2 = a chunk this reader does not decode); ``width[k]`` and ``optional[k]``
    describe column ``cols[k]``. Status :data:`NEED` asks the caller to locate the chunks
    and call again. One call per read: O(bytes of the chunks)."""
    st, n, big = _extent(groups, cols, rows, start, usize, codec)
    if st != OK:
        return st, np.empty((0, 0), np.uint64), np.empty((0, 0), np.uint8), \
            np.empty(0, np.int64), heap
    out = np.empty((cols.size, n), np.uint64)
    valid = np.ones((cols.size, n), np.uint8)
    nulls = np.zeros(cols.size, np.int64)
    st, heap = _decode(buf, groups, cols, rows, start, size, codec, width, optional, out,
                       valid, 0, big, heap, hstate)
    if st != OK:
        return st, out, valid, nulls, heap
    for k in range(cols.size):
        if optional[k]:
            nulls[k] = n - np.count_nonzero(valid[k])
    return OK, out, valid, nulls, heap


@nb.njit(cache=True, nogil=True)
def read_columns_into(buf: np.ndarray, groups: np.ndarray, cols: np.ndarray,
                      rows: np.ndarray, start: np.ndarray, size: np.ndarray,
                      usize: np.ndarray, codec: np.ndarray, width: np.ndarray,
                      optional: np.ndarray, out: np.ndarray, valid: np.ndarray, at: int,
                      heap: np.ndarray, hstate: np.ndarray) -> tuple[int, int, np.ndarray]:
    """:func:`read_columns` into the caller's ``out[k, at:]`` and ``valid[k, at:]`` (every
    row of an optional column's ``valid`` is written, 1 or 0; the other columns' rows are
    left as they are; nulls are the caller's count), byte arrays onto the caller's heap:
    ``(status, rows decoded, heap)``. CORRUPT when the row groups hold more rows than
    ``out`` has room for. For a read that gathers row groups of several files into one
    table. O(bytes of the chunks)."""
    st, n, big = _extent(groups, cols, rows, start, usize, codec)
    if st != OK:
        return st, 0, heap
    if at < 0 or at + n > out.shape[1] or out.shape[0] != cols.size \
            or valid.shape[0] != cols.size or valid.shape[1] != out.shape[1]:
        return CORRUPT, 0, heap
    st, heap = _decode(buf, groups, cols, rows, start, size, codec, width, optional, out,
                       valid, at, big, heap, hstate)
    return st, n, heap


@nb.njit(cache=True, nogil=True)
def copy_parts(src: np.ndarray, offs: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out`` := ``src[offs[i]:offs[i] + rows[i]]`` one after another."""
    pos = 0
    for i in range(offs.size):
        o = offs[i]
        for j in range(rows[i]):
            out[pos + j] = src[o + j]
        pos += rows[i]


@nb.njit(cache=True, nogil=True, inline="always")
def _lower_bound(t: np.ndarray, n: int, x: int) -> int:
    """The first of ``t[:n]`` (uint64 slots of ascending int64 values) not below ``x``."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.int64(t[mid]) < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, nogil=True)
def read_kept_into(buf: np.ndarray, groups: np.ndarray, cols: np.ndarray, rows: np.ndarray,
                   start: np.ndarray, size: np.ndarray, usize: np.ndarray, codec: np.ndarray,
                   width: np.ndarray, optional: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   state: np.ndarray, out: np.ndarray, valid: np.ndarray,
                   part_k: np.ndarray, part_n: np.ndarray, heap: np.ndarray,
                   hstate: np.ndarray) -> tuple[int, np.ndarray]:
    """Decode row groups ``groups`` of columns ``cols`` (located as :func:`read_columns`
    takes them; ``cols[0]`` the time column, required int64, ascending over the groups) and
    write only the rows inside the half-open time intervals ``[lo[j], hi[j])`` (sorted,
    disjoint) to ``out[k, at:]`` / ``valid[k, at:]`` (optional columns only): the rows a
    replay of those intervals keeps, without the rest of their leaves.

    Each row group is decoded into a scratch of one group's rows (in cache) and its kept
    runs copied out, so the rows between intervals are never written to ``out`` nor copied
    again to drop them; its fixed-width columns other than time only up to the last kept row
    (:mod:`.pageprefix`). ``state`` = (first interval not yet passed, rows written, parts
    written) is read and, on success only, advanced, so a read of several files calls this
    once per file. Parts: ``part_k[p]`` the interval of part ``p``, ``part_n[p]`` its rows,
    one after the other in ``out`` (an interval over two groups is one part); room for
    ``len(lo) + len(groups)`` parts is enough. Byte-array columns' slots point into ``heap``
    (:func:`read_columns_into`; a skipped row's bytes stay there unreferenced). Answers
    ``(status, heap)`` (:data:`NEED`, UNSUPPORTED for a time column that is not required
    8-byte values, CORRUPT when ``out`` or the parts have no room). O(bytes of the chunks +
    rows kept + intervals)."""
    st, _, big = _extent(groups, cols, rows, start, usize, codec)
    if st != OK:
        return st, heap
    if cols.size == 0 or width[0] != 8 or optional[0]:
        return UNSUPPORTED, heap
    maxr = 1
    for g in groups:
        maxr = max(maxr, rows[g])
    scr = np.empty((cols.size, maxr), np.uint64)
    vscr = np.ones((cols.size, maxr), np.uint8)
    r0s = np.empty(maxr, np.int64)
    lens = np.empty(maxr, np.int64)
    rks = np.empty(maxr, np.int64)
    scratch = np.empty(big, np.uint8)
    vals = np.empty(0, np.uint64)
    n_iv = lo.size
    iv, at, npart = state[0], state[1], state[2]
    c0 = cols[0]
    for g in groups:
        n = rows[g]
        if n == 0:
            continue
        st, vals = _chunk(buf, start[g, c0], start[g, c0] + size[g, c0], n, codec[g, c0], 8,
                          False, scr[0], vscr[0], 0, scratch, vals)
        if st != OK:
            return st, heap
        t = scr[0]
        tf, tl = np.int64(t[0]), np.int64(t[n - 1])
        while iv < n_iv and hi[iv] <= tf:
            iv += 1
        nr = 0
        kept = 0
        j = iv
        while j < n_iv and lo[j] <= tl:
            r0 = _lower_bound(t, n, lo[j])
            r1 = _lower_bound(t, n, hi[j])
            if r1 > r0:
                r0s[nr], lens[nr], rks[nr] = r0, r1 - r0, j
                nr += 1
                kept += r1 - r0
            if hi[j] > tl:  # it goes on in the next group
                break
            j += 1
        iv = j
        if nr == 0:
            continue
        if at + kept > out.shape[1] or npart + nr > part_k.size:
            return CORRUPT, heap
        need = r0s[nr - 1] + lens[nr - 1]  # the rows up to the last one kept
        for k in range(cols.size):
            if k > 0:
                c = cols[k]
                if width[k] > 0:
                    st, vals = chunk_prefix(buf, start[g, c], start[g, c] + size[g, c], n,
                                            need, codec[g, c], width[k], optional[k], scr[k],
                                            vscr[k], scratch, vals)
                else:
                    st, vals, heap = _any_chunk(buf, start[g, c], start[g, c] + size[g, c], n,
                                                codec[g, c], width[k], optional[k], scr[k],
                                                vscr[k], 0, scratch, vals, heap, hstate)
                if st != OK:
                    return st, heap
            copy_parts(scr[k], r0s[:nr], lens[:nr], out[k, at:])
            if optional[k]:
                copy_parts(vscr[k], r0s[:nr], lens[:nr], valid[k, at:])
        for q in range(nr):
            if npart > 0 and part_k[npart - 1] == rks[q]:
                part_n[npart - 1] += lens[q]
            else:
                part_k[npart] = rks[q]
                part_n[npart] = lens[q]
                npart += 1
        at += kept
    state[0], state[1], state[2] = iv, at, npart
    return OK, heap


@nb.njit(cache=True, nogil=True, inline="always")
def _page_at(buf: np.ndarray, body: int, bend: int, codec: int, usize: int, x: int,
             n: int) -> int:
    """Where bytes ``[x, x + n)`` of a page (``buf[body:bend]``, ``usize`` bytes once
    decompressed) lie in ``buf`` without decompressing it; -1 when they cannot be read so."""
    if x < 0 or x + n > usize:
        return -1
    if codec == CODEC_NONE:
        return body + x if bend - body == usize else -1
    if codec == CODEC_SNAPPY:
        return _snappy_at(buf, body, bend, x, n)
    return -1


@nb.njit(cache=True, nogil=True)
def value_in_chunk(buf: np.ndarray, s: int, e: int, codec: int, width: int, optional: bool,
                   r: int, top: np.ndarray, dph: np.ndarray) -> tuple[int, np.uint64]:
    """The value at row ``r`` of the column chunk ``buf[s:e]`` (its first data page at
    ``s``) as a uint64 slot (4-byte values in the low half), read where it lies in its
    page: no page is decompressed, and a delta-packed page is decoded only up to the row
    without storing what comes before it (``top``/``dph``: scratch of 4 int64s each).
    Answers ``(status, slot)``: CORRUPT, or UNSUPPORTED for a value this way does not reach
    - a page neither PLAIN nor uncompressed DELTA_BINARY_PACKED, an optional column's page
    whose definition levels are not one run of present values (a page with nulls), a value
    not in a snappy literal. O(pages, and page elements or delta-packed bytes before the
    row)."""
    if s < 0 or e < s or e > buf.size or r < 0:
        return CORRUPT, np.uint64(0)
    pos = s
    while pos < e:
        st, hend, ptype, usize, csize, nvals, enc, denc = _header_into(buf, pos, e, top, dph)
        if st != OK:
            return st, np.uint64(0)
        bend = hend + csize
        if bend > e:
            return CORRUPT, np.uint64(0)
        pos = bend
        if ptype == _PAGE_INDEX:
            continue
        if ptype != _PAGE_DATA:
            return UNSUPPORTED, np.uint64(0)
        if r >= nvals:
            r -= nvals
            continue
        if enc != ENC_PLAIN and not (enc == ENC_DELTA and codec == CODEC_NONE):
            return UNSUPPORTED, np.uint64(0)
        x = 0
        if optional:
            if denc != ENC_RLE:
                return UNSUPPORTED, np.uint64(0)
            p = _page_at(buf, hend, bend, codec, usize, 0, 4)
            if p < 0:
                return UNSUPPORTED, np.uint64(0)
            ln = (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
                  | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24))
            p = _page_at(buf, hend, bend, codec, usize, 4, ln)
            if p < 0 or ln < 2:
                return UNSUPPORTED, np.uint64(0)
            st, head, q = _varint(buf, p, p + ln)
            # one RLE run (even header) of at least nvals levels of value 1: no nulls
            if st != OK or head & 1 or (head >> 1) < nvals or q >= p + ln or buf[q] != 1:
                return UNSUPPORTED, np.uint64(0)
            x = 4 + ln
        if enc == ENC_DELTA:
            if hend + x > bend:
                return CORRUPT, np.uint64(0)
            st, v = _delta_value_at(buf, hend + x, bend, r)
            if width == 4:
                v &= np.uint64(0xFFFFFFFF)
            return st, v
        at = _page_at(buf, hend, bend, codec, usize, x + r * width, width)
        if at < 0:
            return UNSUPPORTED, np.uint64(0)
        v = np.uint64(0)
        for b in range(width):
            v |= np.uint64(buf[at + b]) << np.uint64(8 * b)
        return OK, v
    return CORRUPT, np.uint64(0)  # the row is past the chunk's values
