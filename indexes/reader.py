"""Reading key ranges from run files: only the row groups that overlap [lo, hi].

For a file, the sparse row-group index (first and last key of every row group, in the footer)
gives by binary search the row groups a..b-1 that may hold keys in [lo, hi]; only those are read
(Parquet ``read_row_groups``), and a binary search on the key column cuts the exact slice. Cost:
O(log G) for G row groups plus the row groups read, which is at most the answer's size plus two
row groups per file (one per boundary). String keys are cut with vectorized Arrow comparisons on
the rows read (they are sorted, so the count of keys below a bound is the cut position).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replaydb.indexes.entries import Entries
from replaydb.indexes.results import CostCounters
from replaydb.indexes.runfile import RunFileMeta
from replaydb.indexes.sketch import search


class FileCache:
    """Open ``ParquetFile`` handles by absolute path (LRU, bounded). Thread-safe."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._files: OrderedDict[str, pq.ParquetFile] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str) -> pq.ParquetFile:
        with self._lock:
            pf = self._files.get(path)
            if pf is not None:
                self._files.move_to_end(path)
                return pf
        pf = pq.ParquetFile(path, memory_map=True)
        with self._lock:
            self._files[path] = pf
            while len(self._files) > self.capacity:
                _, old = self._files.popitem(last=False)
                old.close()
        return pf

    def close(self) -> None:
        with self._lock:
            for pf in self._files.values():
                pf.close()
            self._files.clear()


def row_group_span(
    meta: RunFileMeta, lo: Any, hi: Any, lo_inclusive: bool, hi_inclusive: bool
) -> tuple[int, int]:
    """Row groups [a, b) of ``meta`` that may contain keys in the range. O(log G)."""
    g = meta.num_row_groups
    a = 0 if lo is None else search(meta.rg_max, lo, "left" if lo_inclusive else "right")
    b = g if hi is None else search(meta.rg_min, hi, "right" if hi_inclusive else "left")
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
    table = pf.read_row_groups(list(range(a, b)), columns=list(columns), use_threads=False)
    rows = meta.rg_rows[a:b]
    counters.row_groups_read += b - a
    counters.entries_read += int(rows.sum())
    counters.pages_read += meta.pages_of(a, b, epp)
    cols = [("key", "seq", "t").index(c) for c in columns]
    counters.bytes_read += int(meta.rg_bytes[a:b][:, cols].sum())
    return table


def read_file_range(
    directory: str,
    meta: RunFileMeta,
    lo: Any,
    hi: Any,
    lo_inclusive: bool,
    hi_inclusive: bool,
    files: FileCache,
    counters: CostCounters,
    epp: int,
) -> Entries:
    """Entries of one file with key in the range, sorted by (key, seq)."""
    a, b = row_group_span(meta, lo, hi, lo_inclusive, hi_inclusive)
    counters.row_groups_skipped += meta.num_row_groups - (b - a)
    if b <= a:
        return Entries.empty(meta.key_type)
    counters.files_read += 1
    table = read_row_groups(directory, meta, a, b, files, counters, epp)
    ent = Entries.from_table(table, meta.key_type)
    i0 = 0 if lo is None else _cut(ent.key, lo, "left" if lo_inclusive else "right")
    i1 = len(ent) if hi is None else _cut(ent.key, hi, "right" if hi_inclusive else "left")
    if i0 == 0 and i1 == len(ent):
        return ent
    return ent.slice(i0, max(i0, i1))


def exact_rank(
    directory: str,
    meta: RunFileMeta,
    x: Any,
    strict: bool,
    files: FileCache,
    counters: CostCounters,
    epp: int,
) -> int:
    """Exact number of entries with key < x (strict) or <= x: reads at most one row group's keys."""
    if meta.n == 0:
        return 0
    g = search(meta.rg_max, x, "left" if strict else "right")  # row groups wholly below x
    if g >= meta.num_row_groups:
        return meta.n
    before = int(meta.rg_rows[:g].sum())
    first = meta.rg_min[g]
    if (strict and not first < x) or (not strict and not first <= x):
        return before
    table = read_row_groups(directory, meta, g, g + 1, files, counters, epp, columns=("key",))
    col = table.column("key")
    keys: Any = col.combine_chunks() if meta.key_type == "string" else col.to_numpy()
    return before + _cut(keys, x, "left" if strict else "right")
