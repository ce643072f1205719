"""Compiled decoder of the first rows of a column chunk of fixed-width values: the rows a read
that keeps a few rows of a row group needs, and no more.

:func:`.pagecodec.read_kept_into` decodes a row group's time column whole (it says which rows
the intervals keep), then each other column up to the last kept row only. Pages before the
one holding that row are decoded whole; that page only as far as needed: its definition levels
(a few bytes at its start), then its values up to the row. A snappy page is decompressed only
that far (:func:`.snappy.snappy_prefix`), which is most of what a PLAIN float page costs. Rows
past the last one needed are left unwritten.

With every row wanted it is the whole chunk's decoder (:func:`.pagecodec._chunk`), and as
strict: every page is read to the chunk's end, the pages must hold exactly the chunk's rows, and
a snappy page must decompress to its stated length, ending where its bytes end.

Takes version-1 data pages, uncompressed or snappy, PLAIN or DELTA_BINARY_PACKED, levels none
or RLE of max level 1, and checks every offset: anything else answers UNSUPPORTED or CORRUPT.
O(bytes of the pages up to the row).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.store.deltapack import _delta
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
    _varint,
    page_header,
)
from replaydb.store.pagelevels import page_levels, present_buffer, spread_present
from replaydb.store.snappy import snappy_prefix
from replaydb.store.stringcodec import _le32


@nb.njit(cache=True, nogil=True, inline="always")
def _values(src: np.ndarray, p: int, e: int, m: int, present: int, enc: int, width: int,
            out: np.ndarray, valid: np.ndarray, at: int, vals: np.ndarray
            ) -> tuple[int, np.ndarray]:
    """The ``present`` values of a page's first ``m`` rows (``src[p:e]`` from the first value,
    levels already in ``valid[at:]``) into ``out[at:at + m]``: ``(status, vals)``."""
    dst, vals = present_buffer(out, at, m, present, vals)
    if enc == ENC_PLAIN:
        if p + present * width > e:
            return CORRUPT, vals
        if width == 8:
            dst[:] = src[p:p + 8 * present].view(np.uint64)
        else:
            dst[:] = src[p:p + 4 * present].view(np.uint32)
    elif enc == ENC_DELTA:
        if _delta(src, p, e, present, dst, 0) != OK:
            return CORRUPT, vals
    else:
        return UNSUPPORTED, vals
    if present != m:
        spread_present(out, valid, at, m, vals)
    return OK, vals


@nb.njit(cache=True, nogil=True, inline="always")
def _present(valid: np.ndarray, at: int, m: int) -> int:
    """How many of rows ``at..at+m`` hold a value."""
    k = 0
    for i in range(at, at + m):
        k += valid[i]
    return k


@nb.njit(cache=True, nogil=True)
def plain_page(src: np.ndarray, p: int, e: int, m: int, nvals: int, enc: int, denc: int,
               width: int, optional: bool, out: np.ndarray, valid: np.ndarray, at: int,
               vals: np.ndarray) -> tuple[int, np.ndarray]:
    """The first ``m`` of the ``nvals`` rows of the page ``src[p:e]`` (uncompressed, or
    decompressed by the caller) into ``out[at:at + m]`` / ``valid``; ``vals`` is a reusable
    buffer for the present values of a page with nulls. Answers ``(status, vals)``."""
    present = m
    if optional:
        st, whole, p = page_levels(src, p, e, nvals, denc, valid, at)
        if st != OK:
            return st, vals
        present = whole if m == nvals else _present(valid, at, m)
    return _values(src, p, e, m, present, enc, width, out, valid, at, vals)


@nb.njit(cache=True, nogil=True)
def _snappy_page(buf: np.ndarray, body: int, bend: int, usize: int, scratch: np.ndarray,
                 m: int, nvals: int, enc: int, denc: int, width: int, optional: bool,
                 out: np.ndarray, valid: np.ndarray, at: int, vals: np.ndarray
                 ) -> tuple[int, np.ndarray]:
    """The first ``m`` of the ``nvals`` rows of the snappy page ``buf[body:bend]``
    (``usize`` bytes decompressed), decompressing only the levels and the values up to row
    ``m`` for a PLAIN page of more rows (a delta-packed one, or one whose rows are all
    wanted, whole: its block must then end at ``bend`` with ``usize`` bytes)."""
    if usize > scratch.size:
        return UNSUPPORTED, vals
    st, n, q = _varint(buf, body, bend)
    if st != OK or n != usize:
        return CORRUPT, vals
    page = scratch[:usize]
    got = 0
    p = 0
    present = m
    if optional:
        if denc != ENC_RLE:
            return UNSUPPORTED, vals
        q, got = snappy_prefix(buf, q, bend, page, got, 4)
        if q < 0 or got < 4:
            return CORRUPT, vals
        ln = _le32(page, 0)
        q, got = snappy_prefix(buf, q, bend, page, got, 4 + ln)
        if q < 0 or got < 4 + ln:
            return CORRUPT, vals
        st, _, p = page_levels(page, 0, 4 + ln, nvals, denc, valid, at)
        if st != OK:
            return st, vals
        present = _present(valid, at, m)
    whole = m == nvals or enc != ENC_PLAIN
    upto = usize if whole else min(p + present * width, usize)
    q, got = snappy_prefix(buf, q, bend, page, got, upto)
    if q < 0 or got < upto or (whole and (q != bend or got != usize)):
        return CORRUPT, vals
    return _values(page, p, got, m, present, enc, width, out, valid, at, vals)


@nb.njit(cache=True, nogil=True)
def chunk_prefix(buf: np.ndarray, pos: int, end: int, rows: int, need: int, codec: int,
                 width: int, optional: bool, out: np.ndarray, valid: np.ndarray,
                 scratch: np.ndarray, vals: np.ndarray) -> tuple[int, np.ndarray]:
    """Decode rows ``0..need`` of one column chunk of fixed-width values (``buf[pos:end]``,
    ``rows`` values) into ``out[:need]`` and ``valid`` (module docstring; ``need == rows``:
    the whole chunk, strictly); ``scratch`` holds a decompressed page. Answers ``(status,
    vals)``."""
    if pos < 0 or end < pos or end > buf.size or need > rows or need > out.size:
        return CORRUPT, vals
    whole = need == rows
    at = 0
    while pos < end and (at < need or whole):
        st, hend, ptype, usize, csize, nvals, enc, denc = page_header(buf, pos, end)
        if st != OK:
            return st, vals
        bend = hend + csize
        if bend > end:
            return CORRUPT, vals
        pos = bend
        if ptype == _PAGE_INDEX:
            continue
        if ptype != _PAGE_DATA:
            return UNSUPPORTED, vals
        if nvals <= 0 or at + nvals > rows or at + nvals > valid.size:
            return CORRUPT, vals
        m = min(nvals, need - at)
        if codec == CODEC_SNAPPY:
            st, vals = _snappy_page(buf, hend, bend, usize, scratch, m, nvals, enc, denc,
                                    width, optional, out, valid, at, vals)
        elif codec == CODEC_NONE:
            if usize != csize:
                return CORRUPT, vals
            st, vals = plain_page(buf, hend, bend, m, nvals, enc, denc, width, optional, out,
                                  valid, at, vals)
        else:
            return UNSUPPORTED, vals
        if st != OK:
            return st, vals
        at += nvals
    return (OK if at == rows or (at >= need and not whole) else CORRUPT), vals
