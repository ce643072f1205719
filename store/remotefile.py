"""Data files and index runs of a store on an object store, read by the byte ranges a plan needs.

A :class:`RemoteDataFile` holds one such Parquet file as a buffer of the file's size (from
Arrow's memory pool, so memory freed by an earlier file is used again rather than faulted in
afresh; the pool maps a large buffer lazily, so only pages written take memory) that is filled
with the ranges fetched so far, read straight into it: first the footer (one request for the
tail of the file, a second only when the footer is longer than the tail), then, before each
read, the column chunks of the row groups the read touches (:meth:`RemoteDataFile.fetch`).
Arrow's Parquet reader, the direct reader (:mod:`.directread`) and the index runs' plain
reader then read that buffer as they read a local file, so every read path stays the same;
nothing outside the fetched chunks is ever read from the buffer (its other bytes are
undefined), because the readers read only the chunks of the row groups and columns asked for
(and the footer). With a cache directory, the footer, the file's size and the fetched
chunks are kept there for later processes (:mod:`.pagestore`).

Chunks not yet fetched are fetched together: sorted by offset, touching ones joined into one
request (a run of consecutive leaves, the unit of a replay interval, is one request), as are
neighbours at most :data:`HOLE` bytes apart (the columns a read skips inside a leaf), and
neighbours less than :data:`GAP` bytes apart while the bytes between them stay within
:data:`SLACK` of the bytes needed (:func:`_coalesce`); the requests are issued concurrently.

A replay reading a long run of planned leaves streams it: :meth:`RemoteDataFile.windows` splits
a read into the chunks fetched before the read returns (the ones it needs, and with them the
next :data:`FIRST_WINDOW` bytes of planned chunks when none of those is fetched or being
fetched: one request for a short interval) and a window of the next :data:`READ_AHEAD` bytes
fetched in the background while the read decodes, taken when the read finds nothing ahead of it
or less than :data:`READ_AHEAD` bytes fetched or pending ahead. So the fetch of a long run
overlaps its decoding, and at most about two windows are fetched ahead of the reader.

Thread-safe: fetches of one file run at once; a chunk is fetched by one of them (its cell is
*pending* meanwhile, under the file's lock), and a fetch that needs a pending chunk waits for
it; the network requests run outside the lock.
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

FIRST_WINDOW = 1 << 20
"""Bytes of planned chunks fetched with a read that finds nothing fetched ahead of it (see the
module docstring): a run of planned leaves up to this size is one request."""

READ_AHEAD = 4 << 20
"""Bytes of planned chunks in one window of background read-ahead (see the module
docstring)."""

CHUNKS = ".chunks"
"""Suffix of the cache file keeping a data file's chunk offsets (:func:`_chunk_ranges_kept`)."""

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
        self.buffer = pa.allocate_buffer(size)
        self.array = np.frombuffer(self.buffer, np.uint8)  # only fetched ranges are read
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
        self._start, self._end = _chunk_ranges_kept(md, stem)
        self._have = np.zeros(self._start.shape, np.bool_)
        self._pending = np.zeros(self._start.shape, np.bool_)
        self._done = threading.Condition(self._lock)
        schema = md.schema
        self._names = {schema.column(c).path: c for c in range(md.num_columns)}
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
        self._read_into(self.size - n, self.size)
        if bytes(self.array[-4:]) != b"PAR1":
            raise CorruptionError(f"data file {self.location.uri_of(self.rel)} is not a "
                                  "Parquet file")
        footer = int.from_bytes(bytes(self.array[-8:-4]), "little") + 8
        start = max(0, self.size - footer)
        if footer > n:
            self._read_into(start, self.size - n)
        return self.array[start:].tobytes()

    def _read_into(self, a: int, b: int) -> None:
        """Fetch bytes ``[a, b)`` into the buffer (one GET)."""
        self.location.read_ranges_into(self._handle(), self.rel, [(a, b)], self.array)
        self.fetched += b - a

    def _put(self, at: int, data: bytes | pa.Buffer) -> None:
        view = np.frombuffer(data, np.uint8)
        self.array[at:at + view.size] = view
        self.fetched += view.size

    def windows(self, groups: np.ndarray, planned: np.ndarray, columns: Sequence[str],
                first: int = FIRST_WINDOW, ahead: int = READ_AHEAD
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(now, later)`` for a read of row groups ``groups`` of ``columns`` in a replay
        that reads ``planned`` (sorted): the row groups to fetch before the read, and those
        to fetch in the background (empty: none); see the module docstring (``first`` and
        ``ahead``: the window sizes). O(planned row groups after ``groups``, at most
        4,096)."""
        none = np.empty(0, np.int64)
        nxt = planned[np.searchsorted(planned, int(groups.max()), side="right"):][:4096] \
            if len(groups) else none
        sub = self._cells(nxt, columns)
        if sub is None:  # no read, none of the columns in the file, or nothing planned after
            return groups, none
        size = self._end[sub] - self._start[sub]
        with self._lock:
            open_ = ~(self._have[sub] | self._pending[sub])
        claimed = ~open_.any(axis=1)
        lead = int(np.argmin(claimed)) if not claimed.all() else claimed.size
        missing = np.cumsum((size * open_).sum(axis=1)[lead:])
        if lead == 0:  # nothing ahead yet: the read and a first window in one request, the
            k = int(np.searchsorted(missing, first, side="right"))  # next one behind it
            more = int(np.searchsorted(missing, first + ahead, side="right"))
            return np.concatenate([groups, nxt[:k]]), nxt[k:more]
        if lead == claimed.size or size[:lead].sum() >= ahead:
            return groups, none
        return groups, nxt[lead:lead + int(np.searchsorted(missing, ahead, side="right"))]

    def missing_bytes(self, groups: np.ndarray, columns: Sequence[str]) -> int:
        """Bytes of the chunks of ``groups`` x ``columns`` neither fetched nor being fetched."""
        sub = self._cells(groups, columns)
        if sub is None:
            return 0
        with self._lock:
            open_ = ~(self._have[sub] | self._pending[sub])
        return int(((self._end[sub] - self._start[sub]) * open_).sum())

    def fetch(self, groups: np.ndarray | Sequence[int], columns: Sequence[str]) -> None:
        """Make the chunks of row groups ``groups`` x ``columns`` readable: the ones neither
        fetched nor pending are fetched here (in few requests; see the module docstring),
        then the ones another fetch has pending are waited for (and fetched here when that
        fetch failed). A column the file does not have is skipped (the reader reports it).
        O(chunks asked for) plus the requests."""
        sub = self._cells(groups, columns)
        if sub is None:
            return
        while True:
            self.fetch_claimed(self.claim(groups, columns))
            with self._done:
                while (~self._have[sub] & self._pending[sub]).any():
                    self._done.wait()
                if self._have[sub].all():
                    return
            # a chunk another fetch had pending failed there: fetch it here

    def _cells(self, groups: np.ndarray | Sequence[int], columns: Sequence[str]
               ) -> tuple[np.ndarray, np.ndarray] | None:
        """The open-mesh index of ``groups`` x ``columns`` (the file's columns among them),
        None when there is none."""
        cols = [self._names[c] for c in columns if c in self._names]
        if not cols or not len(groups):
            return None
        return np.ix_(np.asarray(groups, np.int64), np.asarray(cols, np.int64))

    def claim(self, groups: np.ndarray | Sequence[int], columns: Sequence[str]
              ) -> tuple[np.ndarray, np.ndarray]:
        """Mark the chunks of ``groups`` x ``columns`` neither fetched nor pending as pending,
        and return them as ``(row groups, columns)`` index arrays: the caller must pass them
        to :meth:`fetch_claimed` (on any thread), which fetches them."""
        sub = self._cells(groups, columns)
        if sub is None:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        with self._lock:
            i, j = np.nonzero(~(self._have[sub] | self._pending[sub]))
            rows, cells = sub[0][i, 0], sub[1][0, j]
            self._pending[rows, cells] = True
        return rows, cells

    def release(self, claimed: tuple[np.ndarray, np.ndarray]) -> None:
        """Give back chunks :meth:`claim` returned without fetching them (pending no more;
        a fetch waiting for them fetches them itself)."""
        with self._done:
            self._pending[claimed[0], claimed[1]] = False
            self._done.notify_all()

    def fetch_claimed(self, claimed: tuple[np.ndarray, np.ndarray]) -> None:
        """Fetch the chunks :meth:`claim` returned: requests outside the lock, the bytes put
        and marked fetched under it; pending no more either way (waiting fetches woken)."""
        rows, cells = claimed
        try:
            if rows.size:
                self._fetch_cells(rows, cells)
        finally:
            self.release(claimed)

    def _fetch_cells(self, rows: np.ndarray, cells: np.ndarray) -> None:
        ranges = _coalesce(self._start[rows, cells], self._end[rows, cells], GAP)
        with self._lock:
            handle = self._handle()
        self.location.read_ranges_into(handle, self.rel, ranges, self.array)
        if self._pages is not None and self._cache is not None:
            for a, b in ranges:  # concurrent stores of one file are safe (.pagestore)
                if self._cache.accepting():
                    self._pages.store(a, memoryview(self.array[a:b]))
                    self._cache.note_stored(b - a)
        with self._lock:
            self.fetched += sum(b - a for a, b in ranges)
            self._have[rows, cells] = True


class RemoteParquetFile(pq.ParquetFile):
    """Arrow's reader of a :class:`RemoteDataFile`'s buffer, which knows its file (so a read
    fetches the chunks it needs first, :meth:`.parquetcache.ParquetCache.fetch`)."""

    def __init__(self, remote: RemoteDataFile) -> None:
        super().__init__(pa.BufferReader(remote.buffer), memory_map=False,
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


def _chunk_ranges_kept(md: pq.FileMetaData, stem: Path | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_chunk_ranges` of a file whose footer the cache keeps under ``stem`` (None: no
    cache): read from ``<stem>.chunks`` when that holds the file's shape, else computed and
    kept there (the footer walk visits every chunk's metadata in Python; the file is
    immutable, so what is kept stays true)."""
    shape = (2, md.num_row_groups, md.num_columns)
    kept = None if stem is None else stem.with_name(stem.name + CHUNKS)
    if kept is not None:
        try:
            raw = kept.read_bytes()
        except FileNotFoundError:
            raw = b""
        if len(raw) == 8 * shape[0] * shape[1] * shape[2]:
            both = np.frombuffer(raw, "<i8").reshape(shape)
            return both[0].copy(), both[1].copy()
    start, end = _chunk_ranges(md)
    if kept is not None:
        write_atomic(kept, np.stack([start, end]).astype("<i8").tobytes())
    return start, end


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
