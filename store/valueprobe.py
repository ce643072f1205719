"""Values of one column at scattered events, read where they lie: :class:`ColumnProbe`.

The planner tests the few candidates a tight block has left against a member's condition.
Testing them against the member's index lookup means one pass over all of the lookup's seqs
(often hundreds of thousands of them); decoding the candidates' leaves means a page each. A value in a PLAIN page (uncompressed, or in a snappy literal - what a page of doubles
under snappy is) lies at a known offset: the page's header tells where its values start, and
the value is read there, nothing decompressed or decoded around it. That costs a couple of
cache misses per event, against a streaming read per seq for the pass, so it pays only while
the candidates are a small fraction of the lookup's seqs.

:class:`ColumnProbe` keeps, per leaf of one snapshot, where the column's chunk lies (filled
from the data files' footers the first time a leaf is probed) and the files' memory maps, so
that one compiled call reads the values of events in any number of files. A page it cannot
read so (not PLAIN, with nulls, a value in a snappy back-reference, or a file the direct
reader does not take) makes :meth:`ColumnProbe.values` answer None: the caller tests
otherwise.
"""

from __future__ import annotations

import threading
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa
from numba.typed import List

from replaydb.store import pagecodec

_UNKNOWN = -1
_NO = -2
_START, _SIZE, _CODEC, _SLOT = 0, 1, 2, 3
"""Columns of :attr:`ColumnProbe.loc` (one 32-byte row per leaf, so a probe reads one cache
line of it): the chunk's offset, size, codec (with 256 x the optional flag) and map slot."""


@nb.njit(cache=True, nogil=True)
def _probe(bufs: Any, loc: np.ndarray, width: int, leaf: np.ndarray, rows: np.ndarray,
           out: np.ndarray, k0: int) -> tuple[int, int]:
    """Read ``out[k]`` for ``k >= k0`` (:func:`.pagecodec.value_in_chunk` of the chunk of
    ``leaf[k]``, row ``rows[k]``, located by ``loc[leaf[k]]``): ``(status, k)`` - OK with
    ``k`` the count, :data:`NEED` at the first leaf not located yet, or the status of the
    value that failed."""
    top = np.empty(4, np.int64)
    dph = np.empty(4, np.int64)
    for k in range(k0, leaf.size):
        row = loc[leaf[k]]
        s = row[_START]
        if s == _UNKNOWN:
            return pagecodec.NEED, k
        if s < 0:
            return pagecodec.UNSUPPORTED, k
        buf = bufs[row[_SLOT]]
        st, v = pagecodec.value_in_chunk(buf, s, s + row[_SIZE], row[_CODEC] & 0xFF, width,
                                         (row[_CODEC] >> 8) != 0, rows[k], top, dph)
        if st != pagecodec.OK:
            return st, k
        out[k] = v
    return pagecodec.OK, leaf.size


class ColumnProbe:
    """Values of ``column`` of snapshot ``snap`` at any events (see the module docstring).

    Per leaf (a row of :attr:`loc`): its chunk's offset (-1 not located yet, -2 not
    readable this way), size, codec and optional flag, and the slot of its file's map in
    :attr:`bufs`. Invariant (:meth:`check`): a located chunk lies inside its file's map.
    Thread-safe: one probe at a time (the compiled read runs without the GIL while another
    thread's locating may grow :attr:`bufs`)."""

    def __init__(self, snap: Any, column: str) -> None:
        self.snap = snap
        self.column = column
        f = (snap.arrow_schema.field(column) if column in snap.arrow_schema.names else None)
        self.dtype: np.dtype | None = None
        if f is not None and pa.types.is_float64(f.type):
            self.dtype = np.dtype(np.float64)
        elif f is not None and (pa.types.is_int64(f.type) or pa.types.is_timestamp(f.type)):
            self.dtype = np.dtype(np.int64)
        n = snap.tree.leaves.n
        self.loc = np.zeros((n, 4), np.int64)
        self.loc[:, _START] = _UNKNOWN
        self.bufs: Any = List.empty_list(nb.types.Array(nb.types.uint8, 1, "C", readonly=True))
        self._slots: dict[str, int] = {}
        self._lock = threading.Lock()

    def values(self, seqs: np.ndarray) -> np.ndarray | None:
        """The column's values at events ``seqs`` (integers in ``[0, n_events)``, any order),
        or None when the column or one of their pages cannot be read so. ValueError for a
        seq that is not an event of the snapshot. O(events x page elements before them)."""
        if self.dtype is None:
            return None
        seqs = np.ascontiguousarray(seqs, np.int64)
        out = np.empty(seqs.size, np.uint64)
        if seqs.size == 0:
            return out.view(self.dtype)
        lv = self.snap.tree.leaves
        if lv.n != self.loc.shape[0]:
            return None  # the snapshot's leaves changed under the probe (not immutable)
        first = lv.col("seq_min")
        leaf = np.searchsorted(first, seqs, side="right") - 1
        lf = np.maximum(leaf, 0)
        if int(leaf.min()) < 0 or bool((seqs - first[lf] >= lv.col("count")[lf]).any()):
            raise ValueError(f"values: seqs must be events of the stream (0 .. "
                             f"{int(first[-1] + lv.col('count')[-1]) - 1})")
        rows = seqs - first[leaf]
        with self._lock:
            return self._read(leaf, rows, out)

    def _read(self, leaf: np.ndarray, rows: np.ndarray, out: np.ndarray) -> np.ndarray | None:
        """:meth:`values` of the rows ``rows`` of leaves ``leaf`` into ``out`` (under the
        lock), locating the chunks it meets first."""
        k = 0
        while True:
            st, k = _probe(self.bufs, self.loc, 8, leaf, rows, out, k)
            if st == pagecodec.OK:
                return out.view(self.dtype)
            if st != pagecodec.NEED:
                return None
            rest = leaf[k:]
            self._locate(np.unique(rest[self.loc[rest, _START] == _UNKNOWN]))

    def _locate(self, leaves: np.ndarray) -> None:
        """Locate the column's chunk of every leaf of ``leaves`` (not located yet) from its
        data file's footer, through the store's direct reader."""
        snap = self.snap
        lv = snap.tree.leaves
        fids = lv.col("file_id")[leaves]
        rgs = lv.col("rg")[leaves]
        cache = snap._cache
        for fid in np.unique(fids).tolist():
            mine = fids == fid
            ids, groups = leaves[mine], rgs[mine]
            path = snap._path_of(int(fid), int(ids[0]))
            pf = cache.get(path, snap.counters)
            cache.fetch(path, pf, groups, [self.column])
            d = cache.direct_file(path, pf)
            got = None if d is None else d.chunks(groups, self.column)
            if got is None or got[3] != 8:
                self.loc[ids, _START] = _NO
                continue
            start, size, codec, _, optional = got
            slot = self._slots.get(path)
            if slot is None:
                slot = self._slots[path] = len(self.bufs)
                self.bufs.append(d.buffer)
            self.loc[ids, _SIZE] = size
            self.loc[ids, _CODEC] = codec | (256 * int(optional))
            self.loc[ids, _SLOT] = slot
            self.loc[ids, _START] = start  # last: a located leaf is complete

    def check(self) -> None:
        """Raise AssertionError unless every located chunk lies inside its file's map."""
        loc = self.loc[self.loc[:, _START] >= 0]
        sizes = np.array([b.size for b in self.bufs], np.int64)
        if loc.size:
            assert (loc[:, _SLOT] < len(self.bufs)).all()
            assert (loc[:, _START] + loc[:, _SIZE] <= sizes[loc[:, _SLOT]]).all()
