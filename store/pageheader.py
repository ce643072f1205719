"""Compiled reader of a Parquet ``PageHeader``: Thrift's compact protocol, and the status codes
every page decoder answers.

:func:`page_header` reads the fields a data page reader needs (page type, sizes, and the
version-1 ``DataPageHeader``'s values and encodings) and skips the rest (statistics and the
like) with an explicit stack, no recursion. Every offset is checked against the bounds given: a
corrupt header answers :data:`CORRUPT`, never reads outside ``buf``. O(bytes of the header).
"""

from __future__ import annotations

import numba as nb
import numpy as np

OK = 0
UNSUPPORTED = 1
CORRUPT = 2

_PAGE_DATA = 0
_PAGE_INDEX = 1
_PAGE_DICT = 2
_PAGE_DATA_V2 = 3

CODEC_NONE = 0
CODEC_SNAPPY = 1
"""The codecs the page decoders take (the reader's own numbering)."""

ENC_PLAIN = 0
ENC_PLAIN_DICT = 2
ENC_RLE = 3
ENC_DELTA = 5
ENC_RLE_DICT = 8
"""Parquet's ``Encoding`` values the page decoders read."""

_MAX_DEPTH = 32

@nb.njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int, int]:
    """``(status, value as uint64 bits in an int64, next position)`` of a ULEB128 varint."""
    out = np.uint64(0)
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return CORRUPT, 0, pos
        b = np.uint64(buf[pos])
        pos += 1
        out |= (b & np.uint64(0x7F)) << np.uint64(shift)
        if not (b & np.uint64(0x80)):
            return OK, np.int64(out), pos
        shift += 7


@nb.njit(cache=True, nogil=True)
def _unzig(raw: int) -> int:
    u = np.uint64(raw)
    return np.int64((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1))))


_NESTED = -2
"""Status of :func:`_skip_flat`: a container inside (the caller walks it with a stack)."""


@nb.njit(cache=True, nogil=True, inline="always")
def _skip_scalar(buf: np.ndarray, pos: int, end: int, t: int) -> tuple[int, int]:
    """Skip one scalar of compact type ``t``: ``(status, next position)``; :data:`_NESTED`
    for a container type."""
    if t == 1 or t == 2:
        return OK, pos
    if t == 3:
        return (OK, pos + 1) if pos + 1 <= end else (CORRUPT, pos)
    if t == 4 or t == 5 or t == 6:
        st, _, pos = _varint(buf, pos, end)
        return st, pos
    if t == 7:
        return (OK, pos + 8) if pos + 8 <= end else (CORRUPT, pos)
    if t == 8:
        st, n, pos = _varint(buf, pos, end)
        if st != OK or n < 0 or pos + n > end:
            return CORRUPT, pos
        return OK, pos + n
    if 9 <= t <= 12:
        return _NESTED, pos
    return CORRUPT, pos


@nb.njit(cache=True, nogil=True)
def _skip_flat(buf: np.ndarray, pos: int, end: int, ctype: int) -> tuple[int, int]:
    """Skip a scalar, or a struct whose fields are all scalars, of type ``ctype``:
    ``(status, next position)``; :data:`_NESTED` (and the starting position) when a
    container lies inside."""
    if ctype != 12:
        return _skip_scalar(buf, pos, end, ctype)
    p = pos
    while True:
        if p >= end:
            return CORRUPT, p
        head = buf[p]
        p += 1
        if head == 0:
            return OK, p
        if (head >> 4) == 0:
            st, _, p = _varint(buf, p, end)
            if st != OK:
                return st, p
        st, p = _skip_scalar(buf, p, end, head & 0x0F)
        if st == _NESTED:
            return _NESTED, pos
        if st != OK:
            return st, p


@nb.njit(cache=True, nogil=True)
def _skip(buf: np.ndarray, pos: int, end: int, ctype: int) -> tuple[int, int]:
    """Skip one compact-protocol value of type ``ctype``: ``(status, next position)``.
    Containers are walked with an explicit stack: per level, values left to skip (-1 for a
    struct, which ends at its stop byte) and their type (a map alternates key and value).
    A scalar, or a struct of scalars only (a page's statistics), is skipped without the
    stack (:func:`_skip_flat`): allocating it cost more than parsing a page header."""
    st, end_flat = _skip_flat(buf, pos, end, ctype)
    if st != _NESTED:
        return st, end_flat
    left = np.zeros(_MAX_DEPTH, np.int64)
    kind = np.zeros(_MAX_DEPTH, np.int64)  # element type (a map's value type)
    ktype = np.zeros(_MAX_DEPTH, np.int64)  # a map's key type; -1 for a list
    nth = np.zeros(_MAX_DEPTH, np.int64)
    depth = 0
    pending = ctype
    while True:
        # skip one value of type `pending` (scalars here, containers push a level)
        t = pending
        if t == 1 or t == 2:
            pass
        elif t == 3:
            if pos + 1 > end:
                return CORRUPT, pos
            pos += 1
        elif t == 4 or t == 5 or t == 6:
            st, _, pos = _varint(buf, pos, end)
            if st != OK:
                return st, pos
        elif t == 7:
            if pos + 8 > end:
                return CORRUPT, pos
            pos += 8
        elif t == 8:
            st, n, pos = _varint(buf, pos, end)
            if st != OK or n < 0 or pos + n > end:
                return CORRUPT, pos
            pos += n
        elif t == 9 or t == 10 or t == 11 or t == 12:
            if depth >= _MAX_DEPTH:
                return CORRUPT, pos
            if t == 12:
                left[depth] = -1
            elif t == 11:
                st, n, pos = _varint(buf, pos, end)
                if st != OK or n < 0:
                    return CORRUPT, pos
                if n > 0:
                    if pos >= end:
                        return CORRUPT, pos
                    ktype[depth] = buf[pos] >> 4
                    kind[depth] = buf[pos] & 0x0F
                    pos += 1
                left[depth] = 2 * n
            else:
                if pos >= end:
                    return CORRUPT, pos
                head = buf[pos]
                pos += 1
                n = head >> 4
                kind[depth] = head & 0x0F
                if n == 15:
                    st, n, pos = _varint(buf, pos, end)
                    if st != OK or n < 0:
                        return CORRUPT, pos
                left[depth] = n
                ktype[depth] = -1
            nth[depth] = 0
            depth += 1
        else:
            return CORRUPT, pos
        # find the next value to skip, popping finished levels
        while True:
            if depth == 0:
                return OK, pos
            d = depth - 1
            if left[d] == -1:  # struct: next field header or stop
                if pos >= end:
                    return CORRUPT, pos
                head = buf[pos]
                pos += 1
                if head == 0:
                    depth -= 1
                    continue
                if (head >> 4) == 0:
                    st, _, pos = _varint(buf, pos, end)
                    if st != OK:
                        return st, pos
                pending = head & 0x0F
                break
            if left[d] == 0:
                depth -= 1
                continue
            left[d] -= 1
            if ktype[d] >= 0:  # map: keys and values alternate
                pending = ktype[d] if nth[d] % 2 == 0 else kind[d]
                nth[d] += 1
            else:
                pending = kind[d]
            if pending == 1 or pending == 2:  # a boolean element takes one byte
                if pos >= end:
                    return CORRUPT, pos
                pos += 1
                continue
            break


_AT_NESTED = -1
"""Status of :func:`_fields`: stopped at the nested struct's first field."""


@nb.njit(cache=True, nogil=True)
def _fields(buf: np.ndarray, pos: int, end: int, fid: int, ints: np.ndarray,
            nested: int, nested_too: int) -> tuple[int, int, int]:
    """Read the fields of a struct from ``pos`` (``fid``: the last field id read, 0 at the
    start) up to its stop byte: i32 fields ``1 <= id < len(ints)`` go to ``ints[id]``,
    other fields are skipped. A struct field with id ``nested`` or ``nested_too`` stops the
    read there, with status :data:`_AT_NESTED` and ``pos`` at its first field, so that the
    caller reads it and then resumes this struct with the ``fid`` answered. Answers
    ``(status, pos, fid)``."""
    while True:
        if pos >= end:
            return CORRUPT, pos, fid
        head = buf[pos]
        pos += 1
        if head == 0:
            return OK, pos, fid
        ctype = head & 0x0F
        if head >> 4:
            fid += head >> 4
        else:
            st, raw, pos = _varint(buf, pos, end)
            if st != OK:
                return CORRUPT, pos, fid
            fid = _unzig(raw)
        if ctype == 5 and 1 <= fid < ints.size:  # i32
            st, raw, pos = _varint(buf, pos, end)
            if st != OK:
                return CORRUPT, pos, fid
            ints[fid] = _unzig(raw)
        elif ctype == 12 and (fid == nested or fid == nested_too):
            return _AT_NESTED, pos, fid
        else:
            st, pos = _skip(buf, pos, end, ctype)
            if st != OK:
                return CORRUPT, pos, fid


@nb.njit(cache=True, nogil=True)
def page_header(buf: np.ndarray, pos: int, end: int) -> tuple[int, int, int, int, int, int,
                                                              int, int]:
    """The ``PageHeader`` at ``pos``: ``(status, header end, page type, uncompressed size,
    compressed size, values, encoding, definition-level encoding)``; the last three are
    those of a version-1 data page (field 5, ``DataPageHeader``), or the values and encoding
    of a dictionary page (field 7, ``DictionaryPageHeader``); -1 otherwise."""
    top = np.empty(4, np.int64)  # type, uncompressed size, compressed size
    dph = np.empty(4, np.int64)  # values, encoding, definition-level encoding
    return _header_into(buf, pos, end, top, dph)


@nb.njit(cache=True, nogil=True, inline="always")
def _header_into(buf: np.ndarray, pos: int, end: int, top: np.ndarray, dph: np.ndarray
                 ) -> tuple[int, int, int, int, int, int, int, int]:
    """:func:`page_header` with the caller's scratch for the fields read (no allocation: a
    caller reading many headers, :func:`.pagecodec.value_in_chunk`)."""
    top[:] = -1
    dph[:] = -1
    fid = 0
    while True:
        st, pos, fid = _fields(buf, pos, end, fid, top, 5, 7)
        if st != _AT_NESTED:
            break
        st, pos, _ = _fields(buf, pos, end, 0, dph, -1, -1)
        if st != OK:
            break
    if st == OK and (top[1] < 0 or top[2] < 0 or top[3] < 0):
        st = CORRUPT
    return st, pos, top[1], top[2], top[3], dph[1], dph[2], dph[3]
