"""Data files and index runs of a store on an object store, read by the byte ranges a plan needs.

A :class:`RemoteDataFile` holds one such Parquet file as a buffer of the file's size that starts out
zero (NumPy allocates it lazily: only pages written take memory) and is filled with the ranges
fetched so far: first the footer (one request for the tail of the file, a second only when the
footer is longer than the tail), then, before each read, the column chunks of the row groups
the read touches (:meth:`RemoteDataFile.fetch`). Arrow's Parquet reader, the direct reader
(:mod:`.directread`) and the index runs' plain reader then read that buffer as they read a
local file, so every read path stays the same; nothing outside the fetched chunks is ever read
from the buffer, because the readers read only the chunks of the row groups and columns asked
for (and the footer). With a cache directory, the footer, the file's size and the fetched
chunks are kept there for later processes (:mod:`.pagestore`).

Chunks not yet fetched are fetched together: sorted by offset, touching ones joined into one
request (a run of consecutive leaves, the unit of a replay interval, is one request), as are
neighbours at most :data:`HOLE` bytes apart (the columns a read skips inside a leaf), and
neighbours less than :data:`GAP` bytes apart while the bytes between them stay within
:data:`SLACK` of the bytes needed (:func:`_coalesce`); the requests are issued concurrently.

Thread-safe: :meth:`RemoteDataFile.fetch` runs under the file's lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import CorruptionError
from replaydb.store.location import RemoteLocation
from replaydb.store.mirror import StoreMirror, mirror_of, write_atomic
from replaydb.store.pagestore import PageStore

GAP = 1 << 20
"""Chunks at least this many bytes apart are never fetched in one request."""

HOLE = 8 << 10
"""Chunks at most this many bytes apart are always fetched in one request (a request's fixed
cost on an object store exceeds the cost of the bytes between them; Arrow's default hole
size for coalesced reads)."""

SLACK = 0.25
"""Beyond :data:`HOLE`, bytes between chunks fetched to save requests: at most this fraction
of the bytes needed."""

READ_AHEAD = 8 << 20
"""Bytes of planned row groups a fetch takes beyond the ones it needs (a run of planned
leaves up to this size is one request)."""

TAIL = 64 << 10
"""Bytes fetched from the end of a file to read its footer in one request."""


class RemoteDataFile:
    """One data file on an object store (see the module docstring). ``fetched`` counts the
    bytes held (footer and chunks)."""

    def __init__(self, location: RemoteLocation, rel: str, cache: StoreMirror | None = None
                 ) -> None:
        self.location = location
        self.rel = rel
        self._cache = cache
        footers = None if cache is None else cache.footers
        self._file: Any = None
        known = None if footers is None else footers / f"{rel.replace('/', '~')}.size"
        size = _read_size(known)
        if size is None:  # first time in this cache: ask the object store (a HEAD)
            size = self._handle().size()
            if known is not None:
                write_atomic(known, str(size).encode())
        if size < 12:
            raise CorruptionError(f"data file {location.uri_of(rel)} is not a Parquet file")
        self.size = size
        self.array = np.zeros(size, np.uint8)
        self.fetched = 0
        self._lock = threading.Lock()
        stem = None if footers is None else footers / f"{rel.replace('/', '~')}.{size}"
        if stem is not None and stem.is_file():
            tail = stem.read_bytes()
            self._put(size - len(tail), tail)
        else:
            tail = self._fetch_footer()
            if stem is not None:
                write_atomic(stem, tail)
        self.parquet = RemoteParquetFile(self)
        md = self.parquet.metadata
        self._start, self._end = _chunk_ranges(md)
        self._have = np.zeros(self._start.shape, np.bool_)
        self._names = {md.schema.column(c).path: c for c in range(md.num_columns)}
        self._pages = None if stem is None else PageStore(stem, size)
        if self._pages is not None:
            for a, b in self._pages.load(self.array):
                self._have |= (self._start >= a) & (self._end <= b)
                self.fetched += b - a

    def _handle(self) -> Any:
        """The object opened for ranged reads (opened on first use: one HEAD request)."""
        if self._file is None:
            try:
                self._file = self.location.open_file(self.rel)
            except FileNotFoundError:
                raise CorruptionError(
                    f"data file {self.location.uri_of(self.rel)} is missing") from None
        return self._file

    def _fetch_footer(self) -> bytes:
        """Fetch the file's footer (its last :data:`TAIL` bytes, more when the footer is
        longer); returns the bytes from the footer's start to the end of the file."""
        n = min(self.size, TAIL)
        (tail,) = self.location.read_ranges(self._handle(), self.rel, [(self.size - n, self.size)])
        self._put(self.size - n, tail)
        if bytes(tail[-4:]) != b"PAR1":
            raise CorruptionError(f"data file {self.location.uri_of(self.rel)} is not a "
                                  "Parquet file")
        footer = int.from_bytes(bytes(tail[-8:-4]), "little") + 8
        start = max(0, self.size - footer)
        if footer > n:
            (rest,) = self.location.read_ranges(self._handle(), self.rel, [(start, self.size - n)])
            self._put(start, rest)
        return self.array[start:].tobytes()

    def _put(self, at: int, data: bytes | pa.Buffer) -> None:
        view = np.frombuffer(data, np.uint8)
        self.array[at:at + view.size] = view
        self.fetched += view.size

    def ahead(self, groups: np.ndarray, planned: np.ndarray, columns: Sequence[str]
              ) -> np.ndarray:
        """``groups`` and the row groups of ``planned`` (sorted) after the last of them, as
        many as fit :data:`READ_AHEAD` bytes of ``columns``' chunks (the ones already
        fetched count nothing)."""
        cols = [self._names[c] for c in columns if c in self._names]
        nxt = planned[np.searchsorted(planned, int(groups.max()), side="right"):]
        if not cols or nxt.size == 0:
            return groups
        nxt = nxt[:4096]
        size = _chunk_bytes(self, nxt, cols) * ~self._have[np.ix_(nxt, cols)].all(axis=1)
        take = int(np.searchsorted(np.cumsum(size), READ_AHEAD, side="right"))
        return np.concatenate([groups, nxt[:take]]) if take else groups

    def missing_bytes(self, groups: np.ndarray, columns: Sequence[str]) -> int:
        """Bytes of the chunks of ``groups`` x ``columns`` not fetched yet."""
        cols = [self._names[c] for c in columns if c in self._names]
        if not cols or not len(groups):
            return 0
        sub = np.ix_(np.asarray(groups, np.int64), np.asarray(cols, np.int64))
        with self._lock:
            return int(((self._end[sub] - self._start[sub]) * ~self._have[sub]).sum())

    def fetch(self, groups: np.ndarray | Sequence[int], columns: Sequence[str]) -> None:
        """Make the chunks of row groups ``groups`` x ``columns`` readable (the ones not
        fetched yet, in few requests; see the module docstring). A column the file does not
        have is skipped (the reader reports it). O(chunks asked for) plus the requests."""
        cols = [self._names[c] for c in columns if c in self._names]
        if not cols:
            return
        g = np.asarray(groups, np.int64)
        with self._lock:
            sub = np.ix_(g, np.asarray(cols, np.int64))
            need = ~self._have[sub]
            if not need.any():
                return
            starts = self._start[sub][need]
            ends = self._end[sub][need]
            ranges = _coalesce(starts, ends, GAP)
            got = self.location.read_ranges(self._handle(), self.rel, ranges)
            for (a, _), data in zip(ranges, got, strict=True):
                self._put(a, data)
                if self._pages is not None and self._cache is not None \
                        and self._cache.accepting():
                    self._pages.store(a, data)
                    self._cache.note_stored(len(data))
            self._have[sub] = True


class RemoteParquetFile(pq.ParquetFile):
    """Arrow's reader of a :class:`RemoteDataFile`'s buffer, which knows its file (so a read
    fetches the chunks it needs first, :meth:`.parquetcache.ParquetCache.fetch`)."""

    def __init__(self, remote: RemoteDataFile) -> None:
        super().__init__(pa.BufferReader(pa.py_buffer(remote.array)), memory_map=False,
                         pre_buffer=False)
        self.remote = remote


def _read_size(path: Path | None) -> int | None:
    """The size a cache file records for an immutable remote file (None: not recorded)."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _chunk_bytes(rf: RemoteDataFile, groups: np.ndarray, cols: list[int]) -> np.ndarray:
    """Bytes of the chunks of ``cols`` per row group of ``groups``."""
    sub = np.ix_(groups, np.asarray(cols, np.int64))
    return (rf._end[sub] - rf._start[sub]).sum(axis=1)


def _chunk_ranges(md: pq.FileMetaData) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` byte offsets of every column chunk, shaped (row groups, columns): from
    the dictionary page when there is one, to the end of the chunk's compressed pages."""
    n_rg, n_col = md.num_row_groups, md.num_columns
    start = np.zeros((n_rg, n_col), np.int64)
    end = np.zeros((n_rg, n_col), np.int64)
    for g in range(n_rg):
        rg = md.row_group(g)
        for c in range(n_col):
            cm = rg.column(c)
            a = cm.data_page_offset
            if cm.has_dictionary_page and cm.dictionary_page_offset is not None:
                a = min(a, cm.dictionary_page_offset)
            start[g, c] = a
            end[g, c] = a + cm.total_compressed_size
    return start, end


def _coalesce(starts: np.ndarray, ends: np.ndarray, gap: int, slack: float = SLACK,
              hole: int = HOLE) -> list[tuple[int, int]]:
    """Byte ranges covering ``[starts[i], ends[i])``, sorted: overlapping ranges and
    neighbours at most ``hole`` bytes apart joined, then the neighbours with the smallest
    larger gaps between them (each less than ``gap``) as long as the bytes of those gaps stay
    within ``slack`` times the bytes asked for. O(n log n)."""
    order = np.argsort(starts, kind="stable")
    runs: list[list[int]] = []
    for a, b in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        if runs and a - runs[-1][1] <= hole:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    useful = sum(b - a for a, b in runs)
    gaps = sorted((runs[i + 1][0] - runs[i][1], i) for i in range(len(runs) - 1))
    budget = slack * useful
    join = set()
    for g, i in gaps:
        if g >= gap or g > budget:
            break
        budget -= g
        join.add(i)
    out: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(runs):
        if i - 1 in join:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


class RemoteFiles:
    """Opens the data files of a store on an object store by their local names: the store's
    mirror directory stands for the store's root (:mod:`.mirror`), so a data file's local name
    under it gives its path on the object store. With ``cache`` (the store's mirror), each data file's footer and the chunks fetched of it are kept there
    (:mod:`.pagestore`; files are immutable and the names carry their sizes), so a later
    process fetches only chunks no process has fetched before."""

    def __init__(self, location: RemoteLocation, root: Path, cache: StoreMirror | None = None
                 ) -> None:
        self.location = location
        self.root = str(root).rstrip("/") + "/"
        self.cache = cache

    def open(self, path: str) -> RemoteDataFile:
        if not path.startswith(self.root):
            raise CorruptionError(f"data file {path} lies outside the store")
        return RemoteDataFile(self.location, path[len(self.root):], self.cache)


def open_remote(path: str) -> RemoteDataFile | None:
    """The file of a store on an object store that ``path`` names in the store's mirror, read
    by ranges, when the mirror does not hold it (an index run the read path did not mirror);
    None for a local file or one the mirror holds (read it from disk)."""
    if os.path.exists(path):
        return None
    got = mirror_of(path)
    if got is None:
        return None
    mirror, rel = got
    return RemoteDataFile(mirror.location, rel, mirror)
