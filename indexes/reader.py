"""Reading key ranges from run files: only the row groups that overlap [lo, hi].

For a file, the sparse row-group index (first and last key of every row group, in the footer)
gives by binary search the row groups a..b-1 that may hold keys in [lo, hi]; only those are read
(Parquet ``read_row_groups``), and a binary search on the key column cuts the exact slice. Cost:
O(log G) for G row groups plus the row groups read, which is at most the answer's size plus two
row groups per file (one per boundary). String keys are cut with vectorized Arrow comparisons on
the rows read (they are sorted, so the count of keys below a bound is the cut position).

:func:`read_file_seq_pieces` reads the same entries' seqs (and times) without the keys: located
in the memory-mapped file where its layout is plain (:mod:`.plainread`), keys only of the two
boundary row groups; through Arrow otherwise.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replaydb.indexes.bounds import KeyRange
from replaydb.indexes.entries import Entries
from replaydb.indexes.plainread import PlainFile, Spans
from replaydb.indexes.rankcodes import RankCodes, open_codes
from replaydb.indexes.results import CostCounters
from replaydb.indexes.runfile import RunFileMeta
from replaydb.indexes.sketch import search
from replaydb.store.remotefile import RemoteParquetFile, open_remote


class FileCache:
    """Open ``ParquetFile`` handles by absolute path (LRU, bounded), and the direct-read
    layouts of :mod:`.plainread` beside them. Thread-safe."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._files: OrderedDict[str, pq.ParquetFile] = OrderedDict()
        self._plain: dict[str, PlainFile] = {}
        self._codes: dict[str, RankCodes | None] = {}
        self._lock = threading.Lock()

    def plain(self, path: str) -> PlainFile:
        """The :class:`PlainFile` of ``path`` (opened with its ``ParquetFile``, dropped with
        it)."""
        pf = self.get(path)
        with self._lock:
            got = self._plain.get(path)
        if got is not None:
            return got
        got = PlainFile(path, pf)
        with self._lock:
            old = self._plain.get(path)
            if old is not None:
                got.close()
                return old
            self._plain[path] = got
        return got

    def rank_codes(self, directory: str, meta: RunFileMeta) -> RankCodes | None:
        """The :mod:`.rankcodes` of run file ``meta``, opened once (with the file, if it is
        not open) and kept while the file is (None: it has none usable). O(1)."""
        path = os.path.join(directory, meta.name)
        with self._lock:
            if path in self._codes:
                return self._codes[path]
        self.get(path)
        got = open_codes(directory, meta)
        with self._lock:
            if path in self._codes or path not in self._files:  # raced, or evicted meanwhile
                if got is not None:
                    got.close()
                return self._codes.get(path)
            self._codes[path] = got
        return got

    def get(self, path: str) -> pq.ParquetFile:
        with self._lock:
            pf = self._files.get(path)
            if pf is not None:
                self._files.move_to_end(path)
                return pf
        # pre_buffer (Arrow's default) hands every column chunk to an I/O thread and waits for
        # it: two context switches per chunk, which lookups of a few row groups each pay for
        # nothing (the file is memory-mapped, there is no I/O to overlap)
        remote = open_remote(path)  # a run of a store on an object store: read by ranges
        pf = (remote.parquet if remote is not None
              else pq.ParquetFile(path, memory_map=True, pre_buffer=False))
        with self._lock:
            self._files[path] = pf
            while len(self._files) > self.capacity:
                name, old = self._files.popitem(last=False)
                old.close()
                dropped = self._plain.pop(name, None)
                if dropped is not None:
                    dropped.close()
                codes = self._codes.pop(name, None)
                if codes is not None:
                    codes.close()
        return pf

    def close(self) -> None:
        with self._lock:
            for pf in self._files.values():
                pf.close()
            self._files.clear()
            for plain in self._plain.values():
                plain.close()
            self._plain.clear()
            for codes in self._codes.values():
                if codes is not None:
                    codes.close()
            self._codes.clear()


def row_group_span(meta: RunFileMeta, kr: KeyRange) -> tuple[int, int]:
    """Row groups [a, b) of ``meta`` that may contain keys in ``kr``. O(log G)."""
    g = meta.num_row_groups
    a = 0 if kr.lo is None else search(meta.rg_max, kr.lo, "left" if kr.lo_inclusive else "right")
    b = g if kr.hi is None else search(meta.rg_min, kr.hi, "right" if kr.hi_inclusive else "left")
    return a, max(a, b)


def _cut(keys: Any, x: Any, side: str) -> int:
    """Position of x in sorted ``keys`` (NumPy or Arrow strings), like searchsorted."""
    if isinstance(keys, np.ndarray):
        return int(np.searchsorted(keys, x, side=side))
    scalar = pa.scalar(x, type=pa.string())
    mask = pc.less(keys, scalar) if side == "left" else pc.less_equal(keys, scalar)
    return int(pc.sum(mask).as_py() or 0)


def read_row_groups(
    directory: str,
    meta: RunFileMeta,
    a: int,
    b: int,
    files: FileCache,
    counters: CostCounters,
    epp: int,
    columns: tuple[str, ...] = ("key", "seq", "t"),
) -> pa.Table:
    """Read row groups [a, b) of a run file, counting the I/O."""
    pf = files.get(os.path.abspath(os.path.join(directory, meta.name)))
    if isinstance(pf, RemoteParquetFile):
        pf.remote.fetch(range(a, b), columns)
    table = pf.read_row_groups(list(range(a, b)), columns=list(columns), use_threads=False)
    count_row_groups(meta, a, b, epp, counters, columns)
    return table


def count_row_groups(meta: RunFileMeta, a: int, b: int, epp: int, counters: CostCounters,
                     columns: tuple[str, ...]) -> None:
    """Count row groups ``[a, b)`` of ``columns`` as read: row groups, entries, pages and
    the compressed bytes of those columns."""
    entries, pages, nbytes = _rg_counts(meta.rg_rows, meta.rg_bytes, a, b, epp,
                                        "key" in columns, "seq" in columns, "t" in columns)
    counters.row_groups_read += b - a
    counters.entries_read += int(entries)
    counters.pages_read += int(pages)
    counters.bytes_read += int(nbytes)


@nb.njit(cache=True, nogil=True)
def _rg_counts(rg_rows: np.ndarray, rg_bytes: np.ndarray, a: int, b: int, epp: int,
               key: bool, seq: bool, t: bool) -> tuple[int, int, int]:
    """Entries, pages (:meth:`RunFileMeta.pages_of`) and the compressed bytes of the columns
    flagged of row groups ``[a, b)``: one pass instead of four NumPy reductions, whose fixed
    costs per call would dominate a range read of a few row groups."""
    entries = 0
    pages = 0
    nbytes = 0
    for g in range(a, b):
        r = rg_rows[g]
        entries += r
        pages += (r + epp - 1) // epp
        if key:
            nbytes += rg_bytes[g, 0]
        if seq:
            nbytes += rg_bytes[g, 1]
        if t:
            nbytes += rg_bytes[g, 2]
    return entries, pages, nbytes


def read_file_range(
    directory: str, meta: RunFileMeta, kr: KeyRange, files: FileCache, counters: CostCounters,
    epp: int,
) -> Entries:
    """Entries of one file with key in ``kr``, sorted by (key, seq)."""
    a, b = row_group_span(meta, kr)
    counters.row_groups_skipped += meta.num_row_groups - (b - a)
    if b <= a:
        return Entries.empty(meta.key_type)
    counters.files_read += 1
    table = read_row_groups(directory, meta, a, b, files, counters, epp)
    ent = Entries.from_table(table, meta.key_type)
    i0 = 0 if kr.lo is None else _cut(ent.key, kr.lo, "left" if kr.lo_inclusive else "right")
    i1 = len(ent) if kr.hi is None else _cut(ent.key, kr.hi,
                                             "right" if kr.hi_inclusive else "left")
    if i0 == 0 and i1 == len(ent):
        return ent
    return ent.slice(i0, max(i0, i1))


Piece = np.ndarray | Spans
"""Values of a column read from a run file: an array, or where they lie in the file."""


def as_array(piece: Piece) -> np.ndarray:
    """The values of ``piece`` as an array (a copy when it is :class:`.plainread.Spans`)."""
    return piece.array() if isinstance(piece, Spans) else piece


def join_pieces(pieces: list[Piece]) -> np.ndarray:
    """The values of ``pieces`` in one array (int64 when there are none); a lone array piece
    is answered as it is."""
    if not pieces:
        return np.empty(0, np.int64)
    if len(pieces) == 1:
        return as_array(pieces[0])
    return np.concatenate([as_array(p) for p in pieces])


def _plain_of(files: Any, directory: str, meta: Any) -> PlainFile:
    """The plain reader of run file ``meta`` of the index in ``directory`` (the open files'
    cache ``files`` keeps it)."""
    return files.plain(os.path.abspath(os.path.join(directory, meta.name)))


def read_file_seq_pieces(
    directory: str, meta: RunFileMeta, kr: KeyRange, files: FileCache, counters: CostCounters,
    epp: int, with_t: bool,
) -> tuple[Piece, Piece | None]:
    """Seqs (and times, ``with_t``) of the entries of one file with key in ``kr``, in the
    file's (key, seq) order - :func:`read_file_range` without the keys. A plain file's are
    left in the file: :class:`.plainread.Spans` of the memory-mapped file, not arrays.

    Numeric files in the plain layout (:mod:`.plainread`) are read directly: the keys only of
    the two boundary row groups (to cut the range), and the seqs (times) not at all - they are
    located. Other files go through :func:`read_file_range`. The counters count the same row
    groups, entries and pages either way; ``bytes_read`` counts the columns actually read.
    O(log G + row groups read), plus the entries of the row groups read for a file that is
    not plain."""
    a, b = row_group_span(meta, kr)
    if b <= a:
        counters.row_groups_skipped += meta.num_row_groups
        return np.empty(0, np.int64), (np.empty(0, np.int64) if with_t else None)
    if meta.key_type != "string":
        plain = _plain_of(files, directory, meta)
        got = _plain_range(plain, meta, a, b, kr, with_t, files.rank_codes(directory, meta))
        if got is not None:
            seq, t, key_groups = got
            counters.row_groups_skipped += meta.num_row_groups - (b - a)
            counters.files_read += 1
            count_row_groups(meta, a, b, epp, counters, ("seq", "t") if with_t else ("seq",))
            counters.bytes_read += sum(int(meta.rg_bytes[g, 0]) for g in key_groups)
            return seq, t
    ent = read_file_range(directory, meta, kr, files, counters, epp)
    return ent.seq, (ent.t if with_t else None)


def _plain_range(plain: PlainFile, meta: RunFileMeta, a: int, b: int, kr: KeyRange,
                 with_t: bool, codes: RankCodes | None = None
                 ) -> tuple[Spans, Spans | None, list[int]] | None:
    """Where the seqs (times) of row groups ``[a, b)`` cut to the key range lie (None: not
    plain); the seqs' spans know their positions in the file and its rank ``codes``
    (:meth:`.plainread.Spans.placed`). Every key of row groups after ``a`` is >= ``lo`` and
    every key before ``b - 1`` is <= ``hi`` (keys are sorted across row groups), so only
    those two row groups' keys are read."""
    seq = plain.spans(a, b, "seq")
    t = plain.spans(a, b, "t") if with_t else None
    if seq is None or (with_t and t is None):
        return None
    seq = seq.placed(int(meta.rg_start[a]), codes)
    key_groups: list[int] = []
    i0 = 0
    if kr.lo is not None:
        keys = plain.column(a, "key")
        if keys is None:
            return None
        key_groups.append(a)
        i0 = int(keys.searchsorted(kr.lo, side="left" if kr.lo_inclusive else "right"))
    n = seq.size
    i1 = n
    if kr.hi is not None:
        keys = plain.column(b - 1, "key")
        if keys is None:
            return None
        if b - 1 not in key_groups:
            key_groups.append(b - 1)
        first = n - int(meta.rg_rows[b - 1])
        i1 = first + int(keys.searchsorted(kr.hi, side="right" if kr.hi_inclusive else "left"))
    i1 = max(i0, i1)
    if i0 == 0 and i1 == n:
        return seq, t, key_groups
    return seq.cut(i0, i1), (None if t is None else t.cut(i0, i1)), key_groups


def exact_rank(
    directory: str,
    meta: RunFileMeta,
    x: Any,
    strict: bool,
    files: FileCache,
    counters: CostCounters,
    epp: int,
) -> int:
    """Exact number of entries with key < x (strict) or <= x: reads at most one row group's keys.

    A numeric file in the plain layout gives that row group's keys where they lie in the
    memory-mapped file (:meth:`.plainread.PlainFile.column`), counted as the same read,
    sparing an Arrow read of the key column (a fixed cost per call) on every narrow range
    condition the planner counts."""
    if meta.n == 0:
        return 0
    g = search(meta.rg_max, x, "left" if strict else "right")  # row groups wholly below x
    if g >= meta.num_row_groups:
        return meta.n
    before = int(meta.rg_rows[:g].sum())
    first = meta.rg_min[g]
    if (strict and not first < x) or (not strict and not first <= x):
        return before
    side = "left" if strict else "right"
    if meta.key_type != "string":
        keys = _plain_of(files, directory, meta).column(g, "key")
        if keys is not None:
            count_row_groups(meta, g, g + 1, epp, counters, ("key",))
            return before + int(np.searchsorted(keys, x, side=side))
    table = read_row_groups(directory, meta, g, g + 1, files, counters, epp, columns=("key",))
    col = table.column("key")
    keys: Any = col.combine_chunks() if meta.key_type == "string" else col.to_numpy()
    return before + _cut(keys, x, side)
