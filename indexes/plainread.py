"""Direct reads of run files' fixed-width columns, without decoding through Arrow.

Run files are written by :mod:`.runfile` with uncompressed PLAIN pages and no dictionary for
numeric keys: the bytes of a row group's ``seq`` column *are* its int64 values, after one page
header. Arrow's ``read_row_groups`` pays a fixed cost per call and per row group (schema
resolution, page decoding, building a table) - about as much as copying the values. This
module locates, once per file and column chunk, where the values lie in the file, and then
hands out NumPy views of the memory-mapped file: a range read is one copy of the values read.

A column chunk is taken only when its one page is a version-1 data page, PLAIN, uncompressed,
holding every value of the row group, and the column is required (no definition levels);
anything else - another codec, a dictionary, several pages, data page v2 - answers None, and
the caller reads that file through Arrow (:func:`.reader.read_row_groups`), so any valid run
file is read correctly, only maybe slower.

The page header is Thrift's compact protocol (the Parquet format's ``PageHeader``); the parser
here reads the few fields it needs and skips the rest (statistics and the like) by type.
"""

from __future__ import annotations

import mmap
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numba as nb
import numpy as np
import pyarrow.parquet as pq

_PAGE_DATA = 0
_PLAIN = 0
_FIXED = {"INT64": np.dtype("<i8"), "DOUBLE": np.dtype("<f8"), "INT32": np.dtype("<i4"),
          "FLOAT": np.dtype("<f4")}


class HeaderError(ValueError):
    """A page header that is not valid Thrift compact protocol."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = 0
    out = 0
    while True:
        if i >= len(buf):
            raise HeaderError("truncated varint")
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
        shift += 7
        if shift > 63:
            raise HeaderError("varint too long")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _skip(buf: bytes, i: int, ctype: int) -> int:
    """Skip one value of compact type ``ctype`` starting at ``i``."""
    if ctype in (1, 2):  # booleans inside a struct carry no payload
        return i
    if ctype == 3:
        return i + 1
    if ctype in (4, 5, 6):
        return _varint(buf, i)[1]
    if ctype == 7:
        return i + 8
    if ctype == 8:
        n, i = _varint(buf, i)
        return i + n
    if ctype in (9, 10):
        if i >= len(buf):
            raise HeaderError("truncated list header")
        head = buf[i]
        i += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, i = _varint(buf, i)
        for _ in range(size):
            i = i + 1 if etype in (1, 2) else _skip(buf, i, etype)
        return i
    if ctype == 11:
        size, i = _varint(buf, i)
        if size:
            kv = buf[i]
            i += 1
            for _ in range(size):
                i = _skip(buf, i, kv >> 4)
                i = _skip(buf, i, kv & 0x0F)
        return i
    if ctype == 12:
        return _struct(buf, i)[1]
    raise HeaderError(f"unknown compact type {ctype}")


def _struct(buf: bytes, i: int) -> tuple[dict[int, object], int]:
    """One struct: its integer fields and nested structs by field id; other fields skipped."""
    out: dict[int, object] = {}
    fid = 0
    while True:
        if i >= len(buf):
            raise HeaderError("truncated struct")
        head = buf[i]
        i += 1
        if head == 0:
            return out, i
        ctype, delta = head & 0x0F, head >> 4
        if delta:
            fid += delta
        else:
            raw, i = _varint(buf, i)
            fid = _zigzag(raw)
        if ctype in (4, 5, 6):
            raw, i = _varint(buf, i)
            out[fid] = _zigzag(raw)
        elif ctype == 12:
            out[fid], i = _struct(buf, i)
        else:
            i = _skip(buf, i, ctype)


def page_header(buf: bytes) -> tuple[dict[int, object], int]:
    """The fields of the ``PageHeader`` at the start of ``buf`` and its length in bytes."""
    return _struct(buf, 0)


@dataclass(frozen=True)
class Spans:
    """Values of one fixed-width column that lie in runs of a memory-mapped file, not copied:
    ``counts[i]`` values of ``dtype`` from byte ``offsets[i]`` of ``buf``, in that order. What
    :meth:`PlainFile.spans` answers: a reader that only scans the values (the planner's
    bitmap of an index lookup's seqs, :func:`.bitsets.union_bits_of`) reads them in place,
    and :meth:`array` copies them into one array for the others. Valid while the file is
    open (its :class:`FileCache` keeps it)."""

    buf: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    dtype: np.dtype
    rank0: int = -1
    """The position in its file of the first value, when the values are consecutive
    positions of one file (a run file's range read); -1 when not known."""
    codes: Any = None
    """The file's :class:`.rankcodes.RankCodes` where it has them (with :attr:`rank0`)."""

    @cached_property
    def size(self) -> int:
        """The number of values (summed once: the spans never change)."""
        return int(self.counts.sum())

    def array(self) -> np.ndarray:
        """The values in one new array. O(values)."""
        out = np.empty(self.size, self.dtype)
        at = 0
        w = self.dtype.itemsize
        for o, c in zip(self.offsets.tolist(), self.counts.tolist()):
            out[at:at + c] = self.buf[o:o + c * w].view(self.dtype)
            at += c
        return out

    def cut(self, i0: int, i1: int) -> Spans:
        """The values ``[i0, i1)`` (positions over all spans; clipped to them). O(spans), one
        compiled pass (a range read cuts its spans once, where six NumPy calls would each pay
        their fixed cost)."""
        off, cnt = _cut_spans(self.offsets, self.counts, int(i0), int(i1),
                              int(self.dtype.itemsize))
        r0 = -1 if self.rank0 < 0 else self.rank0 + min(max(int(i0), 0), self.size)
        return Spans(self.buf, off, cnt, self.dtype, r0, self.codes)

    def placed(self, rank0: int, codes: Any) -> Spans:
        """These values as positions ``rank0 ..`` of their file, with its ``codes``."""
        return Spans(self.buf, self.offsets, self.counts, self.dtype, int(rank0), codes)


@nb.njit(cache=True, nogil=True)
def _cut_spans(offsets: np.ndarray, counts: np.ndarray, i0: int, i1: int, itemsize: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and counts of the values ``[i0, i1)`` of spans ``(offsets, counts)``: the
    spans that keep values, each cut to them (:meth:`Spans.cut`)."""
    off = np.empty(offsets.size, np.int64)
    cnt = np.empty(offsets.size, np.int64)
    k = 0
    start = 0
    for j in range(offsets.size):
        end = start + counts[j]
        lo = max(start, i0)
        hi = min(end, i1)
        if hi > lo:
            off[k] = offsets[j] + (lo - start) * itemsize
            cnt[k] = hi - lo
            k += 1
        start = end
    return off[:k].copy(), cnt[:k].copy()


def release_map(mm: mmap.mmap | None) -> None:
    """Close memory map ``mm`` (None: nothing), unless a view of it handed out is still
    alive: then the map goes with the last view."""
    if mm is None:
        return
    try:
        mm.close()
    except BufferError:
        pass


@dataclass(frozen=True)
class Chunk:
    """Where a column chunk's values lie: ``count`` values of ``dtype`` from ``offset``."""

    offset: int
    count: int
    dtype: np.dtype


class PlainFile:
    """Views of the fixed-width columns of one memory-mapped run file (see the module
    docstring; a run of a store on an object store is its fetched chunks' buffer instead,
    :mod:`replaydb.store.remotefile`). Chunks are located lazily, one page header each, and remembered; a chunk that
    is not plain makes :meth:`column` answer None. Thread-safe."""

    def __init__(self, path: str, pf: pq.ParquetFile) -> None:
        self.path = path
        md = pf.metadata
        self._md = md
        self._names = [md.schema.column(c).path for c in range(md.num_columns)]
        self._required = [md.schema.column(c).max_definition_level == 0
                          and md.schema.column(c).max_repetition_level == 0
                          for c in range(md.num_columns)]
        self._remote = getattr(pf, "remote", None)  # a run on an object store: by ranges
        if self._remote is not None:
            self._mm = None
            self._buf = self._remote.array
        else:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
            self._buf = (np.frombuffer(self._mm, np.uint8) if self._mm is not None
                         else np.empty(0, np.uint8))
        self._dtypes = [_FIXED.get(md.schema.column(c).physical_type)
                        for c in range(md.num_columns)]
        # per column: the byte offset of every row group's values (-1 not located yet, -2 not
        # plain) and their count
        self._where: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # per column: row groups not located yet, and located as not plain (while both are
        # 0 - a file read a few times - a read tests neither in its row groups)
        self._unlocated: dict[int, int] = {}
        self._not_plain: dict[int, int] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._buf = np.empty(0, np.uint8)
        self._where.clear()
        release_map(self._mm)
        self._mm = None

    def _locate(self, rg: int, col: int) -> Chunk | None:
        meta = self._md.row_group(rg).column(col)
        dtype = _FIXED.get(meta.physical_type)
        if (dtype is None or not self._required[col] or meta.compression != "UNCOMPRESSED"
                or meta.has_dictionary_page):
            return None
        start = meta.data_page_offset
        total = meta.total_compressed_size
        rows = self._md.row_group(rg).num_rows
        if start < 0 or start + total > self._buf.size:
            return None
        hdr = None
        for window in (512, 1 << 16):  # headers are small; statistics may make one longer
            try:
                hdr, hlen = page_header(bytes(self._buf[start:start + min(total, window)]))
                break
            except HeaderError:
                if window >= total:
                    break
        if hdr is None:
            return None
        dph = hdr.get(5)
        if (hdr.get(1) != _PAGE_DATA or not isinstance(dph, dict) or dph.get(1) != rows
                or dph.get(2) != _PLAIN or hdr.get(2) != hdr.get(3)
                or hdr.get(3) != rows * dtype.itemsize or hlen + rows * dtype.itemsize != total):
            return None
        return Chunk(start + hlen, rows, dtype)

    def _located(self, col: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Byte offsets and counts of column ``col``'s values in row groups ``[a, b)``
        (views; offset -2: not plain), locating those not located yet. A remote run's chunks
        are fetched first (its header and values lie inside the chunk)."""
        if self._remote is not None:
            self._remote.fetch(range(a, b), [self._names[col]])
        got = self._where.get(col)
        if got is None:
            n = self._md.num_row_groups
            with self._lock:
                if col not in self._where:
                    self._unlocated[col] = n
                    self._not_plain[col] = 0
                got = self._where.setdefault(col, (np.full(n, -1, np.int64),
                                                   np.zeros(n, np.int64)))
        off, cnt = got
        if self._unlocated[col] and (off[a:b] == -1).any():
            for g in np.flatnonzero(off[a:b] == -1).tolist():
                chunk = self._locate(a + g, col)
                with self._lock:  # the count before the offset that says it is there
                    if off[a + g] != -1:
                        continue  # another thread located it
                    cnt[a + g] = chunk.count if chunk is not None else 0
                    off[a + g] = chunk.offset if chunk is not None else -2
                    self._unlocated[col] -= 1
                    self._not_plain[col] += chunk is None
        return off[a:b], cnt[a:b]

    def check(self) -> None:
        """Raise AssertionError unless every column's counts of row groups not located and
        not plain are those of its offsets."""
        for col, (off, _) in self._where.items():
            assert self._unlocated[col] == int(np.count_nonzero(off == -1)), col
            assert self._not_plain[col] == int(np.count_nonzero(off == -2)), col

    def column(self, rg: int, name: str) -> np.ndarray | None:
        """The values of column ``name`` in row group ``rg`` (a read-only view of the file),
        or None when that chunk is not plain (read it through Arrow)."""
        col = self._names.index(name)
        dtype = self._dtypes[col]
        off, cnt = self._located(col, rg, rg + 1)
        start = int(off[0])
        if start < 0 or dtype is None:
            return None
        return self._buf[start:start + int(cnt[0]) * dtype.itemsize].view(dtype)

    def columns(self, a: int, b: int, name: str) -> np.ndarray | None:
        """Column ``name`` of row groups ``[a, b)`` in one new array, or None when one of the
        chunks is not plain. One copy of the values, O(rows)."""
        got = self.spans(a, b, name)
        return None if got is None else got.array()

    def spans(self, a: int, b: int, name: str) -> Spans | None:
        """Where column ``name`` of row groups ``[a, b)`` lies in the file (no copy), or None
        when ``b <= a`` or one of the chunks is not plain. O(b - a), vectorized once the
        chunks are located."""
        if b <= a:
            return None
        col = self._names.index(name)
        dtype = self._dtypes[col]
        if dtype is None:
            return None
        off, cnt = self._located(col, a, b)
        if (self._unlocated[col] or self._not_plain[col]) and (off < 0).any():
            return None
        return Spans(self._buf, off.copy(), cnt.copy(), dtype)
