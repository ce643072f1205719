"""A read-only view of one stream at one Delta version.

A :class:`StreamSnapshot` pins the events table's version, the manifest of that version, the
TAB+-tree loaded from the manifest's segment chain, and the side tables (indexes) at the versions
the manifest names. Everything read through it is consistent, whatever writers commit meanwhile.

Reads touch only the leaves (Parquet row groups) that overlap the requested range; every read is
counted in :attr:`StreamSnapshot.counters` (leaves, row groups, events and bytes read, files
opened), which tests and EXPLAIN ANALYZE use.

Time ranges are half-open ``[t0, t1)`` in the stream's time unit; ``None`` means unbounded.
Seq ranges are half-open ``[s0, s1)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import CorruptionError, SchemaError
from replaydb.store.interval_list import _covered_leaves, as_rows
from replaydb.store.manifest import FileInfo, Manifest
from replaydb.store.parquetcache import IOCounters, ParquetCache
from replaydb.store.readpacking import covered_fractions, packed_reads
from replaydb.store.rowparts import keep_parts
from replaydb.store.schema import StreamSchema
from replaydb.store.tree import AggSpec, Partial, TABTree
from replaydb.store.treeio import load_tree
from replaydb.store.valueprobe import ColumnProbe

if TYPE_CHECKING:
    from replaydb.store.store import Store

DEFAULT_BATCH_LEAVES = 64


class StreamSnapshot:
    """Read-only stream at a pinned version (see the module docstring)."""

    def __init__(self, store: Store, name: str, version: int, manifest: Manifest,
                 manifest_version: int, *, tree: TABTree | None = None,
                 files: dict[int, FileInfo] | None = None) -> None:
        self.store = store
        self.name = name
        self.version = version
        self.manifest = manifest
        self.manifest_version = manifest_version
        self.schema: StreamSchema = manifest.schema
        self.dir: Path = store.stream_dir(name)
        self.events_dir: Path = self.dir / "events"
        self.specs = [AggSpec(a.name, a.kind) for a in self.schema.numeric]
        if tree is None:
            tree = TABTree(self.specs, self.schema.fanout, self.schema.leaf_capacity)
            files = load_tree(self.dir, manifest.tree_head, tree)
        self.tree = tree
        self.files: dict[int, FileInfo] = dict(files or {})
        self.counters = IOCounters()
        self._cache: ParquetCache = store.parquet_cache
        self._new_caches()

    def _new_caches(self) -> None:
        """Empty the per-snapshot caches (filled as reads need them)."""
        self._sides: dict[str, Any] = {}
        self._paths: dict[int, str] = {}  # data file id -> path, as built on first read
        self._leaf_bytes: dict[tuple[str, ...], np.ndarray] = {}  # see _count_leaves
        self._probes: dict[str, ColumnProbe] = {}  # see values_at
        # replay output schemas of this stream, kept by Replay (its _memo_schema)
        self.replay_schemas: dict[tuple, pa.Schema] = {}

    # ------------------------------------------------------------------ basics
    @property
    def n_events(self) -> int:
        return self.manifest.n_events

    @property
    def t_range(self) -> tuple[int, int] | None:
        return self.tree.t_range

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.schema.arrow_schema

    def _columns(self, columns: Sequence[str] | None, *, seq: bool = True) -> list[str]:
        """The physical columns to read: ``t``, ``seq`` (unless ``seq`` is False), then the
        requested ones (all of the stream's when ``columns`` is None)."""
        if columns is None:
            names = self.arrow_schema.names
            return names if seq else [c for c in names if c != "seq"]
        out = ["t", "seq"] if seq else ["t"]
        for c in columns:
            if c == self.schema.time_column and c != "t":
                continue
            if not self.schema.has(c):
                raise SchemaError(f"stream {self.name!r} has no column {c!r}", column=c)
            if c not in out:
                out.append(c)
        return out

    # ------------------------------------------------------------------ leaf reads
    def read_leaves(self, i: int, j: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Events of leaves ``[i, j)`` (whole leaves), in (t, seq) order."""
        cols = self._columns(columns)
        parts = list(self._iter_leaf_tables(i, j, cols, max_leaves=max(1, j - i)))
        if not parts:
            return self.arrow_schema.empty_table().select(cols)
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _iter_leaf_tables(self, i: int, j: int, cols: list[str],
                          max_leaves: int = DEFAULT_BATCH_LEAVES) -> Iterator[pa.Table]:
        if j <= i:
            return
        yield from self._iter_leaf_ids(np.arange(i, j), cols, max_leaves)

    def _leaf_chunks(self, ids: np.ndarray, max_leaves: int) -> list[tuple[int, int]]:
        """How :meth:`_iter_leaf_ids` reads ``ids`` (sorted, distinct): ``[s, e)`` positions in
        ``ids``, one per ``read_row_groups`` call - a run of leaves in one data file, cut every
        ``max_leaves`` leaves from the run's start. O(len(ids))."""
        file_ids = self.tree.leaves.col("file_id")[ids]
        cut = np.nonzero(file_ids[1:] != file_ids[:-1])[0] + 1
        bounds = [0, *cut.tolist(), len(ids)]
        return [(s, min(b, s + max_leaves)) for a, b in zip(bounds[:-1], bounds[1:])
                for s in range(a, b, max_leaves)]

    def _read_leaf_chunk(self, ids: np.ndarray, cols: list[str]) -> pa.Table:
        """Whole leaves ``ids`` (sorted, distinct, not empty, all in one data file) in one
        ``read_row_groups`` call; counted as leaves, row groups, events and bytes (not as a
        read: the caller counts those)."""
        lv = self.tree.leaves
        path = self._path_of(int(lv.col("file_id")[ids[0]]), int(ids[0]))
        pf = self._cache.get(path, self.counters)
        groups = lv.col("rg")[ids]
        tbl = self._cache.read_row_groups(path, pf, groups, cols)
        self._count_leaves(ids, cols)
        self.counters.events += tbl.num_rows
        return tbl

    def values_at(self, column: str, seqs: np.ndarray) -> np.ndarray | None:
        """Values of ``column`` at the events ``seqs`` (integers in ``[0, n_events)``), each
        read where it lies in its data file's page (:class:`.valueprobe.ColumnProbe`, kept
        per column): float64 or int64, or None when the column or a page is not one that
        way reads (the caller reads otherwise). Not counted as a read."""
        probe = self._probes.get(column)
        if probe is None:
            probe = self._probes[column] = ColumnProbe(self, column)
        return probe.values(seqs)

    def _path_of(self, fid: int, leaf: int) -> str:
        """Path of data file ``fid`` (which leaf ``leaf`` points to)."""
        path = self._paths.get(fid)
        if path is None:
            info = self.files.get(fid)
            if info is None:
                raise CorruptionError(f"leaf {leaf} points to unknown data file id {fid}")
            path = self._paths[fid] = str(self.events_dir / info.path)
        return path

    def _plan_fetches(self, ids: np.ndarray, cols: list[str]) -> None:
        """Tell the open-file cache which leaves a read will take (a store on an object store
        fetches the planned leaves ahead, :meth:`ParquetCache.plan_fetches`, and starts on
        the first ones of every file at once, :meth:`ParquetCache.prefetch`)."""
        if self._cache.remote is None:
            return
        lv = self.tree.leaves
        fids, rgs = lv.col("file_id")[ids], lv.col("rg")[ids]
        uniq, first = np.unique(fids, return_index=True)
        paths = []
        for fid in uniq[np.argsort(first)].tolist():  # files in the order the reads reach them
            sel = fids == fid
            path = self._path_of(int(fid), int(ids[sel][0]))
            self._cache.plan_fetches(path, rgs[sel], cols)
            paths.append(path)
        self._cache.prefetch(paths, self.counters)

    def _count_leaves(self, ids: np.ndarray, cols: list[str]) -> None:
        """Count leaves ``ids`` (read in full, of ``cols``) as leaves, row groups and bytes
        read: their compressed bytes come from a per-leaf array for each column set, filled
        from the files' footers the first time a leaf is counted: O(leaves) per read, with no
        per-file work once the leaves have been counted."""
        key = tuple(cols)
        lb = self._leaf_bytes.get(key)
        n = self.tree.leaves.n
        if lb is None or lb.size < n:
            old = lb
            lb = self._leaf_bytes[key] = np.full(n, -1, np.int64)
            if old is not None:
                lb[:old.size] = old
        got = lb[ids]
        if bool((got < 0).any()):
            lv = self.tree.leaves
            miss = ids[got < 0]
            fids = lv.col("file_id")[miss]
            for fid in np.unique(fids).tolist():
                leaves = miss[fids == fid]
                path = self._path_of(int(fid), int(leaves[0]))
                pf = self._cache.get(path, self.counters)
                lb[leaves] = self._cache.rg_bytes(path, pf, cols)[lv.col("rg")[leaves]]
            got = lb[ids]
        self.counters.leaves += len(ids)
        self.counters.row_groups += len(ids)
        self.counters.bytes += int(got.sum())

    def _read_leaf_pieces(self, ids: np.ndarray, pieces: list[tuple[int, int]],
                          cols: list[str]) -> pa.Table:
        """The leaves ``ids[p:q]`` of every piece (each in one data file; consecutive) as one
        table: decoded straight into one table where the direct reader takes every piece
        (:meth:`ParquetCache.read_files`), else :meth:`_read_leaf_chunk` per piece and
        ``concat_tables``. Counted as :meth:`_read_leaf_chunk` counts. O(bytes read).

        The direct reader decodes the leaves of consecutive pieces in one data file in one
        call (a call takes any row groups of its file): the pieces of a sparse plan are
        runs of one or two leaves, and a call per piece would pay the call's fixed dispatch
        cost, larger than decoding such a piece, once per piece."""
        if len(pieces) > 1 and self._cache.direct:
            sel = ids[pieces[0][0]:pieces[-1][1]]
            parts, rows = self._file_runs(sel)
            tbl = self._cache.read_files(parts, tuple(cols), rows)
            if tbl is not None:
                self._count_leaves(sel, cols)
                self.counters.events += tbl.num_rows
                return tbl
        tables = [self._read_leaf_chunk(ids[p:q], cols) for p, q in pieces]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _file_runs(self, sel: np.ndarray
                   ) -> tuple[list[tuple[str, pq.ParquetFile, np.ndarray]], int]:
        """Leaves ``sel`` (sorted) as the direct reader takes them: ``(path, handle, row
        groups)`` per data file, one run each, and their total row count."""
        lv = self.tree.leaves
        fids, rgs = lv.col("file_id"), lv.col("rg")
        parts = []
        for a, b in self._leaf_chunks(sel, len(sel)):  # one run per data file
            path = self._path_of(int(fids[sel[a]]), int(sel[a]))
            parts.append((path, self._cache.get(path, self.counters), rgs[sel[a:b]]))
        return parts, int(lv.col("count")[sel].sum())

    def _iter_leaf_ids(self, ids: np.ndarray, cols: list[str],
                       max_leaves: int) -> Iterator[pa.Table]:
        """Whole leaves ``ids`` (sorted, distinct, not empty) in leaf order: one
        ``read_row_groups`` call per run of leaves in the same data file, at most ``max_leaves``
        leaves each (:meth:`_leaf_chunks`); one read in the counters."""
        self.counters.reads += 1
        if len(ids) > max_leaves:
            self._plan_fetches(ids, cols)
        for s, e in self._leaf_chunks(ids, max_leaves):
            yield self._read_leaf_chunk(ids[s:e], cols)

    # ------------------------------------------------------------------ range reads
    def iter_batches(
        self,
        t0: int | None = None,
        t1: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        max_leaves: int = DEFAULT_BATCH_LEAVES,
        seq: bool = True,
    ) -> Iterator[pa.Table]:
        """Events with ``t0 <= t < t1`` as a sequence of tables (at most ``max_leaves`` leaves of
        data each), in (t, seq) order. Only overlapping leaves are read. ``seq=False`` leaves the
        ``seq`` column out of the read (and the tables) unless ``columns`` names it: for readers
        that take the order from the row position alone."""
        i, j = self.tree.leaf_range_for_time(t0, t1)
        cols = self._columns(columns, seq=seq or (columns is not None and "seq" in columns))
        if j <= i:
            return
        first_partial = t0 is not None and self.tree.leaves.col("t_min")[i] < t0
        last_partial = t1 is not None and self.tree.leaves.col("t_max")[j - 1] >= t1
        for tbl in self._iter_leaf_tables(i, j, cols, max_leaves):
            if first_partial or last_partial:
                t = tbl.column("t").to_numpy()
                lo = 0 if t0 is None else int(np.searchsorted(t, t0, side="left"))
                hi = len(t) if t1 is None else int(np.searchsorted(t, t1, side="left"))
                if lo > 0 or hi < len(t):
                    tbl = tbl.slice(lo, max(0, hi - lo))
            if tbl.num_rows:
                yield tbl

    def read(self, t0: int | None = None, t1: int | None = None,
             columns: Sequence[str] | None = None) -> pa.Table:
        """Events with ``t0 <= t < t1`` as one table."""
        cols = self._columns(columns)
        parts = list(self.iter_batches(t0, t1, cols, max_leaves=1 << 30))
        if not parts:
            return self.arrow_schema.empty_table().select(cols)
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def read_seq(self, s0: int, s1: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Events with ``s0 <= seq < s1``."""
        s0, s1 = max(0, s0), min(self.n_events, s1)
        cols = self._columns(columns)
        i, j = self.tree.leaf_range_for_seq(s0, s1)
        if j <= i:
            return self.arrow_schema.empty_table().select(cols)
        tbl = self.read_leaves(i, j, cols)
        first = int(self.tree.leaves.col("seq_min")[i])
        return tbl.slice(s0 - first, s1 - s0)

    def read_interval_groups(
        self,
        intervals: Sequence[tuple[int | None, int | None]],
        columns: Sequence[str] | None = None,
        *,
        max_leaves: int = DEFAULT_BATCH_LEAVES,
        seq: bool = True,
        kept_only: bool = False,
        with_last: bool = False,
    ) -> Iterator[Any]:
        """Events of disjoint, sorted half-open time intervals, read together: yields
        ``(table, [(interval index, row offset, rows), ...])`` where the events of the listed
        intervals that the table holds are ``table.slice(offset, rows)``, in interval order.

        The distinct leaves of all intervals are read as full replay reads a stream: one
        ``read_row_groups`` call per run of at most ``max_leaves`` of them in one data file
        (:meth:`_leaf_chunks`). So many short intervals cost a few reads instead of one each,
        a leaf holding the end of one interval and the start of the next is read once, and an
        interval plan that keeps most leaves makes as many (and as full) reads as full replay.
        An interval whose leaves span two reads is listed in both, its first events in the
        first; the table of one read holds whole leaves, so rows between intervals that a
        shared leaf holds are in it but in no part. Intervals without events are left out.

        ``kept_only``: the table holds the listed parts' rows only, one part after the other
        (offsets 0, then each where the one before ends), and reads are packed by the rows
        they are expected to keep (:mod:`.readpacking`). Where an interval of the read
        starts or ends inside a leaf, the direct reader decodes each leaf into a scratch and
        copies out only its rows inside the intervals (:meth:`ParquetCache.read_files_kept`);
        where the intervals hold its leaves whole (full replay), or the direct reader
        declines, the whole leaves' table is read (and cut down where needed:
        :func:`.rowparts.keep_parts`). Events and bytes are counted as for whole leaves
        (what was decoded).

        ``with_last``: ``(table, parts, last)``, ``last`` True for the read of the last
        covered leaves (no read follows; known before the read is made, so a caller can
        push its last rows as the end of input without reading ahead). A last read whose
        intervals hold no event is not yielded, and then no read is marked.
        O(leaves read + intervals + leaf span of the intervals)."""
        cols = self._columns(columns, seq=seq or (columns is not None and "seq" in columns))
        lv = self.tree.leaves
        n = len(intervals)
        if n == 0 or lv.n == 0:
            return
        a, b = as_rows(intervals)
        lo, hi = self.tree.leaf_ranges_for_times(a, b)
        ids = _covered_leaves(lo, hi)
        if len(ids) == 0:
            return
        self.counters.reads += 1
        self._plan_fetches(ids, cols)
        for s, e, pieces in (packed_reads(lv.col("file_id")[ids], covered_fractions(
                lv.col("t_min")[ids], lv.col("t_max")[ids], a, b), max_leaves) if kept_only
                else self._packed_chunks(ids, max_leaves)):
            first, last = int(ids[s]), int(ids[e - 1])
            # intervals with a leaf in [first, last]: lo and hi never decrease with k
            k0 = int(np.searchsorted(hi, first, side="right"))
            k1 = int(np.searchsorted(lo, last, side="right"))
            got = (self._read_kept_pieces(ids, pieces, cols, a[k0:k1], b[k0:k1])
                   if kept_only and _cuts_a_leaf(lv, lo[k0:k1], hi[k0:k1], a[k0:k1],
                                                 b[k0:k1]) else None)
            if got is not None:
                tbl, part_k, part_n = got
                offs = np.cumsum(part_n) - part_n
                parts = list(zip((part_k + k0).tolist(), offs.tolist(), part_n.tolist()))
            else:
                tbl = self._read_leaf_pieces(ids, pieces, cols)
                t = tbl.column("t").to_numpy()
                r0 = np.searchsorted(t, a[k0:k1], side="left")
                r1 = np.searchsorted(t, b[k0:k1], side="left")
                parts = [(x, p, q - p) for x, p, q in
                         zip(range(k0, k1), r0.tolist(), r1.tolist()) if q > p]
                if kept_only and parts:
                    tbl, parts = keep_parts(tbl, parts)
            if parts:
                yield (tbl, parts, e == len(ids)) if with_last else (tbl, parts)

    def _read_kept_pieces(self, ids: np.ndarray, pieces: list[tuple[int, int]],
                          cols: list[str], a: np.ndarray, b: np.ndarray
                          ) -> tuple[pa.Table, np.ndarray, np.ndarray] | None:
        """The rows inside the intervals ``[a, b)`` of the leaves ``ids[p:q]`` of every piece,
        decoded by the direct reader (one call per data file; :meth:`read_interval_groups`
        with ``kept_only``), or None when it declines (the caller reads whole leaves).
        Counted as :meth:`_read_leaf_pieces` counts a read of the whole leaves."""
        if not self._cache.direct or not cols or cols[0] != "t":
            return None
        sel = ids[pieces[0][0]:pieces[-1][1]]
        parts, rows = self._file_runs(sel)
        got = self._cache.read_files_kept(parts, tuple(cols), rows, a, b)
        if got is not None:
            self._count_leaves(sel, cols)
            self.counters.events += rows
        return got

    def _packed_chunks(self, ids: np.ndarray, max_leaves: int
                       ) -> list[tuple[int, int, list[tuple[int, int]]]]:
        """:meth:`_leaf_chunks` of ``ids`` packed into reads of at most ``max_leaves`` leaves:
        ``(s, e, chunks)``, consecutive chunks covering ``ids[s:e]`` (one ``read_row_groups``
        call each). A chunk that does not fit closes a read that is at least three quarters
        full, else it is split to fill it. So a plan that keeps most leaves reads as full
        replay does (a file's runs of ``max_leaves``; a file's last run, if short, is topped up
        from the next file), and the few leaves a sparse plan keeps in each of many files share
        reads at least three quarters full. O(chunks)."""
        out: list[tuple[int, int, list[tuple[int, int]]]] = []
        cur: list[tuple[int, int]] = []
        size = 0
        for s, e in self._leaf_chunks(ids, max_leaves):
            while s < e:
                room = max_leaves - size
                if e - s <= room:
                    cur.append((s, e))
                    size += e - s
                    s = e
                    continue
                if 4 * size < 3 * max_leaves:  # split the chunk to fill this read
                    cur.append((s, s + room))
                    s += room
                out.append((cur[0][0], cur[-1][1], cur))
                cur, size = [], 0
        if cur:
            out.append((cur[0][0], cur[-1][1], cur))
        return out

    def read_intervals(self, intervals: Sequence[tuple[int, int]],
                       columns: Sequence[str] | None = None,
                       max_leaves: int = DEFAULT_BATCH_LEAVES) -> Iterator[tuple[int, pa.Table]]:
        """For disjoint, sorted half-open time intervals, yield ``(interval index, table)``."""
        for k, (a, b) in enumerate(intervals):
            for tbl in self.iter_batches(a, b, columns, max_leaves=max_leaves):
                yield k, tbl

    # ------------------------------------------------------------------ aggregation
    def aggregate(self, t0: int | None = None, t1: int | None = None,
                  attributes: Sequence[str] | None = None) -> dict[str, Any]:
        """Temporal aggregation over ``[t0, t1)``: count, time range and, per numeric attribute,
        min, max, sum, avg and non-null count.

        Answered from inner nodes in O(h * D) plus at most two partial leaves read from the data
        (dissertation 3.2.1). ``attributes`` restricts the result (default: every numeric one).
        """
        specs = self.specs if attributes is None else [self._spec(a) for a in attributes]
        acc = Partial.empty(specs)
        i, j = self.tree.leaf_range_for_time(t0, t1)
        if j > i:
            lv = self.tree.leaves
            tmin, tmax = lv.col("t_min"), lv.col("t_max")
            lo_partial = t0 is not None and tmin[i] < t0
            hi_partial = t1 is not None and tmax[j - 1] >= t1
            full_lo = i + int(lo_partial)
            full_hi = j - int(hi_partial)
            partial_leaves = {i} if lo_partial else set()
            if hi_partial:
                partial_leaves.add(j - 1)
            if full_lo < full_hi:
                _, touched = self.tree.aggregate_leaves(full_lo, full_hi, acc, specs)
                self.counters.nodes += touched
            if partial_leaves:
                self._aggregate_partial_leaves(sorted(partial_leaves), t0, t1, specs, acc)
        return acc.result(specs)

    def _spec(self, name: str) -> AggSpec:
        for s in self.specs:
            if s.name == name:
                return s
        raise SchemaError(f"stream {self.name!r} has no numeric column {name!r}", column=name)

    def _aggregate_partial_leaves(self, leaves: list[int], t0: int | None, t1: int | None,
                                  specs: list[AggSpec], acc: Partial) -> None:
        """Fold the events of boundary leaves that fall in ``[t0, t1)`` (one read call when
        both leaves are in the same file). ``seq`` is not read: nothing here uses it."""
        cols = self._columns([s.name for s in specs], seq=False)
        lv = self.tree.leaves
        if len(leaves) == 2 and lv.col("file_id")[leaves[0]] != lv.col("file_id")[leaves[1]]:
            groups = [[leaves[0]], [leaves[1]]]
        else:
            groups = [leaves]
        for group in groups:
            tbl = self._read_leaf_set(group, cols)
            t = tbl.column("t").to_numpy()
            lo = 0 if t0 is None else int(np.searchsorted(t, t0, side="left"))
            hi = len(t) if t1 is None else int(np.searchsorted(t, t1, side="left"))
            if len(group) == 2 and t0 is not None and t1 is not None:
                # two leaves: the range covers the end of the first and the start of the second
                n0 = int(lv.col("count")[group[0]])
                sel = np.r_[int(np.searchsorted(t[:n0], t0)):n0,
                            n0:n0 + int(np.searchsorted(t[n0:], t1))]
            else:
                sel = np.arange(lo, max(lo, hi))
            if len(sel) == 0:
                continue
            vals = {}
            for s in specs:
                arr, valid = values_of(tbl.column(s.name), s)
                vals[s.name] = (arr[sel], None if valid is None else valid[sel])
            acc.merge_values(t[sel], vals, specs)

    def _read_leaf_set(self, leaves: list[int], cols: list[str]) -> pa.Table:
        """Whole leaves (all in one file, in the order given; a repeated leaf is read again) in
        one read call, counted as one read (:meth:`_read_leaf_chunk`)."""
        self.counters.reads += 1
        return self._read_leaf_chunk(np.asarray(leaves, dtype=np.int64), cols)

    def histogram(self, level: int | None = None, max_buckets: int | None = None) -> pa.Table:
        """A tree level as a temporal histogram: per bucket its time range, first seq, count and
        per-attribute min/max/sum/n. Choose ``level`` directly or the lowest level with at most
        ``max_buckets`` buckets."""
        if self.tree.n_leaves == 0:
            return pa.table({"t_min": pa.array([], pa.int64())})
        if level is None:
            level = self.tree.level_for_buckets(max_buckets or 1000)
        cols = self.tree.histogram(level)
        cols.pop("file_id", None)
        cols.pop("rg", None)
        return pa.table({k: pa.array(np.array(v, copy=True)) for k, v in cols.items()})

    # ------------------------------------------------------------------ side tables
    def side(self, name: str) -> Any:
        """The side table ``name`` (e.g. ``index/price``) opened at its pinned version."""
        got = self._sides.get(name)
        if got is None:
            ref = self.manifest.side_table(name)
            if ref is None:
                raise SchemaError(f"stream {self.name!r} has no {name}")
            from replaydb.store.sides import open_side

            self.store.sync_stream(self.name, ref.path, f"v{ref.version}")
            got = open_side(self.dir, ref)
            self._sides[name] = got
        return got

    def indexes(self) -> dict[str, Any]:
        """Secondary indexes by column name, opened at their pinned versions."""
        return {ref.options.get("column", ref.name): self.side(ref.name)
                for ref in self.manifest.side if ref.kind == "lsm"}

    def stats(self) -> dict[str, Any]:
        """Size and shape of the stream (for ``replaydb stats``)."""
        size = sum(f.size for f in self.files.values())
        tr = self.t_range
        return {
            "stream": self.name,
            "version": self.version,
            "events": self.n_events,
            "t_min": tr[0] if tr else None,
            "t_max": tr[1] if tr else None,
            "time_unit": self.schema.time_unit,
            "time_column": self.schema.time_column,
            "lateness": self.schema.lateness,
            "columns": {a.name: a.kind for a in self.schema.attributes},
            "tree_height": self.tree.height,
            "fanout": self.schema.fanout,
            "leaf_capacity": self.schema.leaf_capacity,
            "leaves": self.tree.n_leaves,
            "data_files": len(self.files),
            "data_bytes": size,
            "tree_segments_chain": self.manifest.chain,
            "side_tables": {s.name: {"kind": s.kind, "version": s.version, **s.options,
                                     **self._side_summary(s.name)}
                            for s in self.manifest.side},
        }

    def _side_summary(self, name: str) -> dict[str, Any]:
        """Size figures of a side table that reports them (indexes do)."""
        try:
            st = self.side(name).stats()
        except AttributeError:
            return {}
        return {k: st[k] for k in ("entries", "runs", "size_bytes", "pages") if k in st}


def _values(col: pa.ChunkedArray | pa.Array, spec: AggSpec) -> tuple[np.ndarray, np.ndarray | None]:
    """NumPy values and validity mask (None if no nulls) of a numeric column."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    valid = None
    if col.null_count:
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if pa.types.is_boolean(col.type):
            col = col.fill_null(False)
        else:
            col = col.fill_null(pa.scalar(0.0 if spec.is_float else 0, col.type))
    if spec.kind == "bool":
        arr = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        arr = col.to_numpy(zero_copy_only=False)
    return arr, valid


values_of = _values

def _cuts_a_leaf(lv: Any, lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray
                 ) -> bool:
    """Whether one of the intervals ``[a, b)`` (leaves ``lo .. hi - 1`` each) starts or ends
    inside one of its leaves, leaving rows of it out. O(intervals)."""
    has = hi > lo
    if not has.any():
        return False
    if not has.all():
        lo, hi, a, b = lo[has], hi[has], a[has], b[has]
    return bool((lv.col("t_min")[lo] < a).any() or (lv.col("t_max")[hi - 1] >= b).any())
