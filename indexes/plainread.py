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
class Chunk:
    """Where a column chunk's values lie: ``count`` values of ``dtype`` from ``offset``."""

    offset: int
    count: int
    dtype: np.dtype


class PlainFile:
    """Views of the fixed-width columns of one memory-mapped run file (see the module
    docstring). Chunks are located lazily, one page header each, and remembered; a chunk that
    is not plain makes :meth:`column` answer None. Thread-safe."""

    def __init__(self, path: str, pf: pq.ParquetFile) -> None:
        self.path = path
        md = pf.metadata
        self._md = md
        self._names = [md.schema.column(c).path for c in range(md.num_columns)]
        self._required = [md.schema.column(c).max_definition_level == 0
                          and md.schema.column(c).max_repetition_level == 0
                          for c in range(md.num_columns)]
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self._buf = (np.frombuffer(self._mm, np.uint8) if self._mm is not None
                     else np.empty(0, np.uint8))
        self._chunks: dict[tuple[int, int], Chunk | None] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._buf = np.empty(0, np.uint8)
        self._chunks.clear()
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a view handed out is still alive; the map goes with it
                pass
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

    def column(self, rg: int, name: str) -> np.ndarray | None:
        """The values of column ``name`` in row group ``rg`` (a read-only view of the file),
        or None when that chunk is not plain (read it through Arrow)."""
        col = self._names.index(name)
        key = (rg, col)
        chunk = self._chunks.get(key, False)
        if chunk is False:
            chunk = self._locate(rg, col)
            with self._lock:
                self._chunks[key] = chunk
        if chunk is None:
            return None
        nbytes = chunk.count * chunk.dtype.itemsize
        return self._buf[chunk.offset:chunk.offset + nbytes].view(chunk.dtype)

    def columns(self, a: int, b: int, name: str) -> np.ndarray | None:
        """Column ``name`` of row groups ``[a, b)`` in one new array, or None when one of the
        chunks is not plain. One copy of the values, O(rows)."""
        views = []
        for g in range(a, b):
            v = self.column(g, name)
            if v is None:
                return None
            views.append(v)
        if not views:
            return None
        return np.concatenate(views) if len(views) > 1 else views[0].copy()
