"""Open Parquet files of a store, and what reading them costs.

A :class:`ParquetCache` keeps ``ParquetFile`` handles (and their direct readers,
:class:`.directread.DirectFile`) of the immutable data files, LRU-bounded by count and footer
bytes, and reads row groups of one or several files into one table. :class:`IOCounters` counts
what reads cost; a :class:`.snapshot.StreamSnapshot` keeps one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import CorruptionError
from replaydb.store.directread import DirectFile, Heap, table_of
from replaydb.store.remotefile import RemoteDataFile, RemoteFiles, RemoteParquetFile


@dataclass
class IOCounters:
    """What reads cost: logical leaves and physical row groups, events and bytes, files opened,
    tree nodes consulted by aggregations."""

    leaves: int = 0
    row_groups: int = 0
    events: int = 0
    bytes: int = 0
    files_opened: int = 0
    nodes: int = 0
    reads: int = 0

    def reset(self) -> None:
        for k in self.as_dict():
            setattr(self, k, 0)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in
                ("leaves", "row_groups", "events", "bytes", "files_opened", "nodes", "reads")}

    def __sub__(self, other: IOCounters) -> IOCounters:
        return IOCounters(**{k: v - getattr(other, k) for k, v in self.as_dict().items()})

    def copy(self) -> IOCounters:
        return IOCounters(**self.as_dict())


class ParquetCache:
    """Open ``ParquetFile`` handles keyed by path (files are immutable), LRU-bounded by both a
    number of files and the bytes of their footers (the parsed metadata is what a handle keeps in
    memory). A stream sweeping more files than the bound reopens each file (one footer read)
    per sweep, so the bound is generous: ``capacity`` files and ``footer_budget`` bytes.

    ``rg_bytes`` results are cached per file and column set and leave with their file.
    :meth:`read_row_groups` decodes through a :class:`.directread.DirectFile` per file (kept
    and evicted with the handle) where it can, else through Arrow; ``direct = False`` reads
    everything through Arrow.
    Invariant (:meth:`check`): the footer byte total equals the sum over open files, and both
    bounds hold after every ``get``.
    """

    def __init__(self, capacity: int = 4096, footer_budget: int = 256 << 20,
                 direct: bool = True, remote: RemoteFiles | None = None) -> None:
        self.capacity = capacity
        self.remote = remote
        self._remote: dict[str, RemoteDataFile] = {}
        self._planned: dict[str, tuple[np.ndarray, frozenset[str]]] = {}
        self.footer_budget = footer_budget
        self.direct = direct
        self._files: OrderedDict[str, pq.ParquetFile] = OrderedDict()
        self._footer: dict[str, int] = {}
        self._footer_total = 0
        self._rg_bytes: dict[str, dict[str, np.ndarray]] = {}
        self._direct: dict[str, DirectFile] = {}
        self._prefetcher: ThreadPoolExecutor | None = None

    def get(self, path: str, counters: IOCounters) -> pq.ParquetFile:
        pf = self._files.get(path)
        if pf is None:
            pf = self._open(path)
            counters.files_opened += 1
            self._files[path] = pf
            size = int(pf.metadata.serialized_size)
            self._footer[path] = size
            self._footer_total += size
            self._evict()
        else:
            self._files.move_to_end(path)
        return pf

    def _open(self, path: str) -> pq.ParquetFile:
        if self.remote is not None:
            rf = self._remote[path] = self.remote.open(path)
            return rf.parquet
        try:
            return pq.ParquetFile(path, memory_map=False, pre_buffer=False)
        except (FileNotFoundError, OSError) as exc:
            raise CorruptionError(f"data file {Path(path).name} is missing or unreadable: "
                                  f"{exc}") from exc

    def _held(self) -> int:
        """Bytes the open files hold: their footers, and the chunks fetched of remote ones."""
        return self._footer_total + sum(r.fetched for r in self._remote.values())

    def _evict(self) -> None:
        """Close the least recently used files until both bounds hold (one file stays)."""
        while len(self._files) > 1 and (len(self._files) > self.capacity
                                        or self._held() > self.footer_budget):
            old, _ = self._files.popitem(last=False)
            self._footer_total -= self._footer.pop(old)
            self._rg_bytes.pop(old, None)
            self._direct.pop(old, None)
            self._remote.pop(old, None)
            self._planned.pop(old, None)

    def plan_fetches(self, path: str, groups: np.ndarray, columns: Sequence[str]) -> None:
        """Say that a read will take row groups ``groups`` of ``columns`` of data file
        ``path`` (in that order): for a remote file, fetches then read ahead through the
        planned row groups in windows of :data:`.remotefile.READ_AHEAD` bytes
        (:meth:`.remotefile.RemoteDataFile.windows`), so a replay reading leaf after leaf
        makes one request per short run of planned leaves, not one per read, and a long run
        is fetched while it is decoded. Replaces the file's earlier plan; a no-op for a local
        store."""
        if self.remote is not None:
            self._planned[path] = (np.unique(np.asarray(groups, np.int64)),
                                   frozenset(columns))

    def prefetch(self, paths: Sequence[str], counters: IOCounters) -> None:
        """Start fetching, on background threads, the first planned chunks of the remote
        files ``paths`` (planned by :meth:`plan_fetches`; in the order a replay reads them):
        per file the windows a read of its first planned row group would fetch
        (:meth:`.remotefile.RemoteDataFile.windows`), files in order while
        :data:`PREFETCH_BYTES` lasts (a file's windows one after the other, so its first
        arrives first).
        The files are opened here (their footers, as the reads would). The chunks are
        claimed here, so a read of chunks in flight waits for them instead of fetching them
        again; a prefetch that fails is dropped (the read's own fetch reports the error). So a
        replay over several files fetches them at once rather than one after the other; the
        requests and chunks are the ones its reads would make. A no-op for a local store."""
        if self.remote is None:
            return
        budget = PREFETCH_BYTES
        jobs = []
        for path in paths:
            plan = self._planned.get(path)
            if plan is None or not plan[0].size:
                continue
            self.get(path, counters)
            rf = self._remote[path]
            now, later = rf.windows(plan[0][:1], plan[0], sorted(plan[1]))
            size = rf.missing_bytes(now, plan[1])
            more = rf.missing_bytes(later, plan[1])
            if size + more > budget:
                break
            budget -= size + more
            jobs.append((rf, (now, later), plan[1]))
        for rf, windows, columns in jobs:
            self._in_background(rf, windows, columns)

    def _in_background(self, rf: RemoteDataFile, windows: Sequence[np.ndarray],
                       columns: frozenset[str] | Sequence[str]) -> None:
        """Fetch ``windows`` (row groups each) x ``columns`` of ``rf`` on a background
        thread, one window after the other, all claimed here (so a read of them waits for
        that fetch instead of repeating it; a failure is dropped there: the read that needs
        the chunks then fetches them and reports what goes wrong)."""
        cols = sorted(columns)
        claimed = [c for c in (rf.claim(w, cols) for w in windows) if c[0].size]
        if not claimed:
            return
        if self._prefetcher is None:
            self._prefetcher = ThreadPoolExecutor(PREFETCH_THREADS,
                                                  thread_name_prefix="replaydb-prefetch")
        try:
            self._prefetcher.submit(_fetch_quietly, rf, claimed)
        except RuntimeError:  # shut down (interpreter exit): the reads fetch them themselves
            for cells in claimed:
                rf.release(cells)

    def fetch(self, path: str, pf: pq.ParquetFile, groups: np.ndarray | Sequence[int],
              columns: Sequence[str]) -> None:
        """Make the chunks of ``groups`` x ``columns`` of the file ``pf`` readable: a no-op
        for a local file; for a remote one, the chunks not fetched yet are fetched, with
        the planned row groups that follow them in windows, the next one in the background
        (:meth:`plan_fetches`)."""
        if not isinstance(pf, RemoteParquetFile):
            return
        plan = self._planned.get(path)
        later = None
        if plan is not None and plan[1].issuperset(columns) and len(groups):
            groups, later = pf.remote.windows(np.asarray(groups, np.int64), plan[0], columns)
        pf.remote.fetch(groups, columns)
        if later is not None and later.size:
            self._in_background(pf.remote, [later], columns)

    def read_row_groups(self, path: str, pf: pq.ParquetFile, groups: np.ndarray,
                        columns: list[str]) -> pa.Table:
        """Row groups ``groups`` of ``columns`` of the file ``pf`` opened by :meth:`get`:
        decoded directly where the file's layout allows (:mod:`.directread`), else by Arrow;
        the same table either way."""
        self.fetch(path, pf, groups, columns)
        d = self._direct_file(path, pf) if self.direct else None
        if d is not None:
            tbl = d.read(groups, columns)
            if tbl is not None:
                return tbl
        return pf.read_row_groups(groups.tolist(), columns=columns, use_threads=False)

    def direct_file(self, path: str, pf: pq.ParquetFile) -> DirectFile | None:
        """The direct reader of an open file (None when direct reads are off)."""
        return self._direct_file(path, pf) if self.direct else None

    def _direct_file(self, path: str, pf: pq.ParquetFile) -> DirectFile | None:
        """The direct reader of an open file (made the first time it is asked for; None
        when the file is not open in this cache)."""
        d = self._direct.get(path)
        if d is None and path in self._files:
            rf = self._remote.get(path)
            d = self._direct[path] = DirectFile(path, pf, None if rf is None else rf.array)
        return d

    def read_files(self, pieces: list[tuple[str, pq.ParquetFile, np.ndarray]],
                   columns: tuple[str, ...], rows: int) -> pa.Table | None:
        """Row groups of several files (``(path, handle, groups)`` each, in that order) of
        ``columns`` as one table, decoded straight into one set of column buffers: what
        ``concat_tables`` of their :meth:`read_row_groups` tables holds (with the first
        file's schema), without a table per file. ``rows``: their total row count. None
        when the direct reader is off or declines one of them, or the counts disagree
        (the caller reads file by file then). O(bytes of the chunks read)."""
        if not self.direct or not pieces:
            return None
        out = np.empty((len(columns), rows), np.uint64)
        valid = np.empty((len(columns), rows), np.uint8)  # written for optional columns
        heap = Heap()
        at = 0
        plan: tuple[np.ndarray, np.ndarray, pa.Schema] | None = None
        for path, pf, groups in pieces:
            self.fetch(path, pf, groups, columns)
            d = self._direct_file(path, pf)
            got = None if d is None else d.read_into(groups, columns, out, valid, at, heap)
            if got is None:
                return None
            plan = _one_layout(plan, got[1:])
            if plan is None:
                return None
            at += got[0]
        if at != rows or plan is None:
            return None
        return _decoded_table(plan, out, valid, rows, heap)

    def read_files_kept(self, pieces: list[tuple[str, pq.ParquetFile, np.ndarray]],
                        columns: tuple[str, ...], rows: int, lo: np.ndarray, hi: np.ndarray
                        ) -> tuple[pa.Table, np.ndarray, np.ndarray] | None:
        """:meth:`read_files` keeping only the rows inside the time intervals ``[lo, hi)``
        (sorted, disjoint; ``columns[0]`` the time column): ``(table, interval of each part,
        rows of each part)``, the parts one after the other in the table, an interval's rows
        in one part (:func:`.pagecodec.read_kept_into`). ``rows``: the row groups' total row
        count. None when the direct reader is off or declines one of them (the caller reads
        the whole row groups then). O(bytes of the chunks + rows kept)."""
        if not self.direct or not pieces:
            return None
        out = np.empty((len(columns), rows), np.uint64)  # pages past the kept rows: untouched
        valid = np.empty((len(columns), rows), np.uint8)
        n_groups = sum(len(g) for _, _, g in pieces)
        part_k = np.empty(len(lo) + n_groups, np.int64)
        part_n = np.empty(len(lo) + n_groups, np.int64)
        state = np.zeros(3, np.int64)
        heap = Heap()
        plan: tuple[np.ndarray, np.ndarray, pa.Schema] | None = None
        for path, pf, groups in pieces:
            self.fetch(path, pf, groups, columns)
            d = self._direct_file(path, pf)
            got = None if d is None else d.read_kept_into(groups, columns, lo, hi, state, out,
                                                          valid, part_k, part_n, heap)
            plan = None if got is None else _one_layout(plan, got)
            if plan is None:
                return None
        assert plan is not None
        kept, n_parts = int(state[1]), int(state[2])
        table = _decoded_table(plan, out[:, :kept], valid[:, :kept], kept, heap)
        return None if table is None else (table, part_k[:n_parts], part_n[:n_parts])

    def rg_bytes(self, path: str, pf: pq.ParquetFile, columns: Sequence[str]) -> np.ndarray:
        """Compressed bytes per row group for ``columns`` (cached per file and column set)."""
        per_file = self._rg_bytes.get(path)
        key = ",".join(columns)
        got = per_file.get(key) if per_file is not None else None
        if got is None:
            md = pf.metadata
            names = pf.schema_arrow.names
            idx = [names.index(c) for c in columns]
            got = np.array([sum(md.row_group(r).column(i).total_compressed_size for i in idx)
                            for r in range(md.num_row_groups)], dtype=np.int64)
            if path in self._files:  # cached only while the file is open (leaves with it)
                self._rg_bytes.setdefault(path, {})[key] = got
        return got

    def check(self) -> None:
        """Raise AssertionError unless the cache's invariants hold."""
        assert set(self._footer) == set(self._files)
        assert set(self._remote) <= set(self._files)
        assert self._footer_total == sum(self._footer.values())
        assert len(self._files) <= max(1, self.capacity)
        assert len(self._files) == 1 or self._footer_total <= self.footer_budget
        assert set(self._rg_bytes) <= set(self._files)  # entries leave with their file
        assert set(self._direct) <= set(self._files)
        for d in self._direct.values():
            d.check()

PREFETCH_BYTES = 32 << 20
"""Bytes of planned chunks a replay on an object store starts fetching across its files before
its first read (:meth:`ParquetCache.prefetch`)."""
PREFETCH_THREADS = 4
"""Files fetched at once by :meth:`ParquetCache.prefetch`."""


def _fetch_quietly(rf: RemoteDataFile, claimed: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """``rf.fetch_claimed`` of each of ``claimed`` in order, failures dropped (the chunks are
    released: the read that needs them fetches them itself and reports what goes wrong)."""
    for cells in claimed:
        try:
            rf.fetch_claimed(cells)
        except Exception:  # an optimization: the read repeats the fetch and raises
            pass


def _one_layout(plan: tuple[np.ndarray, np.ndarray, pa.Schema] | None,
                got: tuple[np.ndarray, np.ndarray, pa.Schema]
                ) -> tuple[np.ndarray, np.ndarray, pa.Schema] | None:
    """The layout (column widths, optional flags, schema) of a read of several files: the
    first file's, or None when ``got`` (another file's) differs from ``plan``."""
    if plan is None or got[2] is plan[2]:
        return plan or got
    same = (got[2].equals(plan[2], check_metadata=False) and np.array_equal(got[0], plan[0])
            and np.array_equal(got[1], plan[1]))
    return plan if same else None


def _decoded_table(plan: tuple[np.ndarray, np.ndarray, pa.Schema], out: np.ndarray,
                   valid: np.ndarray, rows: int, heap: Heap) -> pa.Table | None:
    """The table of ``rows`` decoded rows (``out``/``valid`` as the direct reader fills them,
    byte arrays on ``heap``) with the nulls of the optional columns counted; None when
    :func:`.directread.table_of` declines it."""
    width, optional, schema = plan
    nulls = np.zeros(len(width), np.int64)
    for k in np.flatnonzero(optional).tolist():
        nulls[k] = rows - np.count_nonzero(valid[k])
    return table_of(width, schema, out, valid, nulls, heap)
