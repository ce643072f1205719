"""The windowed aggregation answered from the TAB+-tree (dissertation 3.3.1, Fig. 3.4): the
execution of a plan whose source is :class:`~replaydb.replay.plan.TreeAggregates`.

Three ways to answer a windowed aggregation over a stored stream, all producing exactly what the
online operator produces on a full replay (sums within floating-point reassociation):

* **replay** - read every event in the range and push it into
  :class:`~replaydb.operators.window.WindowAggregate` (the baseline; :func:`run_replay`).
* **optimized index path** (Fig. 3.4 right; :func:`run_index`) - one temporal aggregation per
  *slice* of the window (per slide, or per ``slide1``/``slide2`` piece for arbitrary slides),
  inserted into the operator's own slide tree (:meth:`WindowAggregate.push_partials`). The slices
  are contiguous and visited in time order, so the queries form one **forward scan**: the slice
  boundaries are located in the leaf level with a single merge-like ``searchsorted`` over the
  sorted boundaries; each boundary leaf is read from the data at most once, in increasing order,
  and kept in a two-leaf buffer (the left boundary leaf of slice ``i`` is the right one of slice
  ``i-1``); the full leaves between two boundaries are merged from the highest covering inner
  nodes (at most two runs of fewer than ``D`` nodes per level). No root-to-leaf search is
  repeated per slice.
* **naive index path** (Fig. 3.4 left; :func:`run_naive`) - one temporal aggregation per
  *window*, no slide tree: overlapping windows repeat the merges, and the two boundary leaves of
  every window are fetched through a small LRU leaf buffer (50 leaves by default, as the paper's
  page cache), so they are re-read whenever the window spans more leaves than the buffer holds.

Both index paths compute many temporal aggregations at once, vectorized over ranges: one
``ufunc.reduceat`` per tree level and component merges the node runs of all ranges of a chunk,
and one per component merges the boundary-leaf pieces. Count windows work the same way on seq
positions: the leaf level's ``seq_min``/``count`` (the tree's materialized event counts) place
the slide boundaries without reading any data (3.3.3).

Applicability (:func:`index_applicable`): no GROUP BY, no WHERE, and only aggregates the tree
materializes (COUNT, SUM, AVG, MIN, MAX of numeric attributes). Otherwise the planner replays
(:mod:`replaydb.planner.window_path` chooses among the three by cost).

Complexity per slice (optimized): O(h) runs of O(D) nodes, plus the events of at most two
partially covered leaves (each leaf read once overall); per window (naive): the same over the
whole window.
"""


from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.operators.expr import Column, columns
from replaydb.operators.window import WindowAggregate, WindowConfig
from replaydb.operators.window.aggregates import INDEXABLE_FUNCS, take
from replaydb.replay.tree_reader import TreeAggregator, _span

CHUNK = 1 << 17
"""Ranges (slices or windows) aggregated per vectorized step, at most."""

STEP_EVENTS = 1 << 20
"""Boundary-leaf events the optimized path aims to hold per vectorized step. A step reads (at
most) one boundary leaf per slice, so a step of ``CHUNK`` slices of a leaf or more each would
decode up to ``CHUNK * B`` events at once (hundreds of MB for a week of events): the arrays fall
out of the CPU caches and the per-event cost of the boundary leaves doubles. Bounding the step by
events keeps it near the small-stream cost; small slides (many slices per leaf) keep whole
``CHUNK`` steps."""

MIN_CHUNK = 256
"""Fewest slices per step (bounds the per-step Python overhead)."""


def slices_per_step(events: int, slices: int, leaf_capacity: int) -> int:
    """Slices per vectorized step of the optimized path: about ``STEP_EVENTS`` boundary-leaf
    events, with ``events / slices`` events per slice on average and at most one boundary leaf
    (``leaf_capacity`` events) read per slice; within ``[MIN_CHUNK, CHUNK]``. O(1)."""
    per_slice = min(max(1.0, events / max(1, slices)), float(leaf_capacity))
    return int(min(CHUNK, max(MIN_CHUNK, STEP_EVENTS // per_slice)))

NAIVE_BUFFER_LEAVES = 50
"""Leaf buffer of the naive path (the paper limits the page cache to 50 pages)."""


@dataclass
class PathStats:
    """What an index path did: ranges aggregated, tree nodes merged, leaves read, seconds."""

    path: str = ""
    ranges: int = 0
    windows: int = 0
    nodes_merged: int = 0
    leaf_reads: int = 0
    piece_events: int = 0
    seconds: float = 0.0
    io: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ranges": self.ranges, "windows": self.windows,
                "nodes_merged": self.nodes_merged, "leaf_reads": self.leaf_reads,
                "piece_events": self.piece_events, "seconds": self.seconds, **self.io}


# --------------------------------------------------------------------------- applicability
def index_applicable(cfg: WindowConfig, snap: Any) -> tuple[bool, str]:
    """Can the TAB+-tree answer ``cfg``? Returns ``(ok, reason if not)``."""
    if cfg.group_by:
        return False, "GROUP BY needs per-key aggregates the tree does not keep"
    if cfg.where is not None:
        return False, "a WHERE filter changes which events count; node aggregates cover all"
    numeric = {s.name for s in snap.specs}
    for a in cfg.aggregates:
        if a.func not in INDEXABLE_FUNCS:
            return False, f"{a.func} is not materialized in the tree (only COUNT/SUM/AVG/MIN/MAX)"
        if a.arg is None:
            continue
        if not isinstance(a.arg, Column) or a.arg.name not in numeric:
            return False, f"{a.alias}: the tree aggregates plain numeric attributes only"
    return True, ""


def _config_for(cfg: WindowConfig, snap: Any) -> WindowConfig:
    """``cfg`` with the stream's schema (fixes the partial layout to the tree's dtypes)."""
    if cfg.schema is not None and cfg.schema.equals(snap.arrow_schema):
        return cfg
    return replace(cfg, schema=snap.arrow_schema)



def _prepare(snap: Any, cfg: WindowConfig, buffer_leaves: int
             ) -> tuple[WindowAggregate, TreeAggregator]:
    ok, why = index_applicable(cfg, snap)
    if not ok:
        raise UsageError(f"the index path cannot answer this query: {why}")
    op = WindowAggregate(_config_for(cfg, snap), state_cap=None)
    assert op.layout is not None
    return op, TreeAggregator(snap, op.layout, buffer_leaves)


Sink = Callable[[pa.Table], None]
"""Receives result tables as they are produced (instead of collecting them)."""


class _Collector:
    """Drains an operator's results into a sink (or a list) and counts the rows."""

    def __init__(self, op: WindowAggregate, sink: Sink | None) -> None:
        self.op = op
        self.sink = sink
        self.parts: list[pa.Table] = []
        self.rows = 0

    def drain(self) -> None:
        if self.op.has_results():
            self.put(self.op.results())

    def put(self, tbl: pa.Table) -> None:
        self.rows += tbl.num_rows
        if self.sink is not None:
            self.sink(tbl)
        elif tbl.num_rows:
            self.parts.append(tbl)

    def table(self) -> pa.Table:
        self.drain()
        if not self.parts:
            return self.op.output_schema.empty_table()
        return pa.concat_tables(self.parts)


def _finish(out: _Collector, agg: TreeAggregator, stats: PathStats, io0: dict[str, int],
            t_start: float, snap: Any) -> pa.Table:
    tbl = out.table()
    stats.nodes_merged = agg.nodes_merged
    stats.leaf_reads = agg.buffer.reads
    stats.piece_events = agg.piece_events
    stats.io = {f"io_{k}": v - io0.get(k, 0) for k, v in snap.counters.as_dict().items()}
    stats.seconds = time.perf_counter() - t_start
    stats.windows = out.rows
    return tbl


@dataclass
class _PathRun:
    """One index path's run: its operator and tree aggregator, collector, record, the span of
    events it covers, and the clock and I/O counters it started from."""

    op: WindowAggregate
    agg: TreeAggregator
    out: _Collector
    stats: PathStats
    span: Any
    anchor: int
    t_start: float
    io0: dict[str, int]


def _start(snap: Any, cfg: WindowConfig, path: str, buffer_leaves: int, t0: int | None,
           t1: int | None, sink: Sink | None, anchor: int | None) -> _PathRun:
    """Prepare a path's run. Its anchor: ``anchor`` when given, else the epoch offset or the
    span's first event for time windows (by the config's alignment); 0 for count windows."""
    t_start = time.perf_counter()
    io0 = snap.counters.as_dict()
    op, agg = _prepare(snap, cfg, buffer_leaves=buffer_leaves)
    span = _span(agg, t0, t1)
    c = op.cfg
    if c.kind != "time":
        anchor = 0
    elif anchor is None:
        anchor = c.offset if c.align == "epoch" or span is None else span.t_first
    return _PathRun(op, agg, _Collector(op, sink), PathStats(path=path), span, anchor,
                    t_start, io0)


def run_index(snap: Any, cfg: WindowConfig, *, t0: int | None = None, t1: int | None = None,
              chunk: int | None = None, anchor: int | None = None, sink: Sink | None = None
              ) -> tuple[pa.Table, PathStats]:
    """The optimized index path: one temporal aggregation per slice, into the slide tree.

    ``[t0, t1)`` restricts the stream (None: unbounded), like replaying that interval.
    ``anchor`` overrides the anchor of first-event-aligned time windows (several streams share
    the first event of their merge). ``chunk`` is the number of slices per vectorized step
    (default :func:`slices_per_step`; results do not depend on it). Returns the operator's result
    table and what the path did.
    """
    r = _start(snap, cfg, "index", 2, t0, t1, sink, anchor)
    op, agg, out, stats, span, anchor = r.op, r.agg, r.out, r.stats, r.span, r.anchor
    c, geom = op.cfg, op.geom
    if span is not None:
        op.open_partials(anchor, span.t_first if c.kind == "time" else 0)
        st = op.groups[0]
        if c.kind == "time":
            k_last = geom.last_window_starting_by(span.t_last - anchor)
            s_lo, s_hi = st.next_slice, k_last * geom.p + geom.W
        else:
            n = span.p1 - span.p0
            s_lo, s_hi = st.next_slice, int(geom.slice_of(n))
            s_lo = max(s_lo, 0)
        if chunk is None:
            chunk = slices_per_step(span.p1 - span.p0, s_hi - s_lo, snap.tree.leaf_capacity)
        for c0 in range(s_lo, s_hi, chunk):
            c1 = min(s_hi, c0 + chunk)
            sl = np.arange(c0, c1 + 1, dtype=np.int64)
            rel = geom.slice_start(sl)
            data: dict = {}
            if c.kind == "time":
                times = anchor + rel
                leaf, inside = agg.boundary_leaves(times)
                data = agg.fetch(np.unique(leaf[inside]))  # forward scan: each leaf once
                pos = agg.positions(times, data)
            else:
                pos = span.p0 + rel
            pos = np.clip(pos, span.p0, span.p1)
            parts = agg.partials(pos[:-1], pos[1:], data)
            stats.ranges += c1 - c0
            nz = parts["n"] > 0
            op.push_partials(sl[:-1][nz], take(parts, nz), c1)
            out.drain()
        last = (span.t_last - anchor) if c.kind == "time" else (span.p1 - span.p0 - 1)
        op.close_partials(last, span.t_last)
    return _finish(out, agg, stats, r.io0, r.t_start, snap), stats


def run_naive(snap: Any, cfg: WindowConfig, *, t0: int | None = None, t1: int | None = None,
              chunk: int = CHUNK, buffer_leaves: int = NAIVE_BUFFER_LEAVES,
              anchor: int | None = None, sink: Sink | None = None
              ) -> tuple[pa.Table, PathStats]:
    """The naive index path: one temporal aggregation per window (no slide tree)."""
    r = _start(snap, cfg, "naive", buffer_leaves, t0, t1, sink, anchor)
    op, agg, out, stats, span, anchor = r.op, r.agg, r.out, r.stats, r.span, r.anchor
    c, geom = op.cfg, op.geom
    if span is not None:
        if c.kind == "time":
            k_first = geom.first_window_ending_after(span.t_first - anchor)
            if c.align == "first":
                k_first = max(k_first, 0)
            k_last = geom.last_window_starting_by(span.t_last - anchor)
        else:
            n = span.p1 - span.p0
            k_first, k_last = 0, (n - c.size) // c.slide if n >= c.size else -1
        for k0 in range(k_first, k_last + 1, chunk):
            ks = np.arange(k0, min(k_last + 1, k0 + chunk), dtype=np.int64)
            ws = geom.window_start(ks)
            data: dict = {}
            if c.kind == "time":
                ta, tb = anchor + ws, anchor + ws + c.size
                la, ia = agg.boundary_leaves(ta)
                lb, ib = agg.boundary_leaves(tb)
                # window by window: its left boundary leaf, then its right one (LRU buffer)
                req = np.stack([np.where(ia, la, -1), np.where(ib, lb, -1)], axis=1).ravel()
                data = agg.fetch(req[req >= 0])
                lo, hi = agg.positions(ta, data), agg.positions(tb, data)
            else:
                lo, hi = span.p0 + ws, span.p0 + ws + c.size
            lo, hi = np.clip(lo, span.p0, span.p1), np.clip(hi, span.p0, span.p1)
            parts = agg.partials(lo, hi, data, order="per_range")
            stats.ranges += len(ks)
            keep = parts["n"] > 0 if c.empty == "skip" else np.ones(len(ks), bool)
            if not keep.all():
                ks, ws, parts = ks[keep], ws[keep], take(parts, keep)
            if len(ks):
                if c.kind == "time":
                    start, end = anchor + ws, anchor + ws + c.size
                else:
                    start, end = parts["tmin"], parts["tmax"]
                out.put(pa.Table.from_batches(
                    [op.build_batch(np.zeros(len(ks), np.int64), start, end, parts)]))
    return _finish(out, agg, stats, r.io0, r.t_start, snap), stats


def run_replay(snap: Any, cfg: WindowConfig, *, t0: int | None = None, t1: int | None = None,
               batch_rows: int = 1 << 18, sink: Sink | None = None
               ) -> tuple[pa.Table, PathStats]:
    """Full replay of ``[t0, t1)`` into the online operator (the baseline)."""
    from replaydb.replay.replay import Replay

    t_start = time.perf_counter()
    io0 = snap.counters.as_dict()
    cfg = _config_for(cfg, snap)
    op = WindowAggregate(cfg, state_cap=None)
    intervals = None if t0 is None and t1 is None else [
        (t0 if t0 is not None else np.iinfo(np.int64).min,
         t1 if t1 is not None else np.iinfo(np.int64).max)]
    # only the columns the query needs; seq only for FIRST/LAST (a single stream's order is its
    # row order, so time and count windows need no seq)
    rp = Replay([snap], intervals, columns=op.input_columns, batch_rows=batch_rows,
                seq=op.requires_seq)
    out = _Collector(op, sink)
    for tbl in rp.results(op):
        out.put(tbl)
    res = out.table()
    stats = PathStats(path="replay", ranges=rp.stats.events, windows=out.rows)
    stats.io = {f"io_{k}": v - io0.get(k, 0) for k, v in snap.counters.as_dict().items()}
    stats.seconds = time.perf_counter() - t_start
    return res, stats


def run_index_grouped(snaps: Sequence[Any], cfg: WindowConfig, *, variant: str = "index",
                      t0: int | None = None, t1: int | None = None
                      ) -> tuple[pa.Table, list[PathStats]]:
    """GROUP BY the event type when the store holds one stream per type.

    The replay layer merges such streams by ``(t, seq)`` and fills the type column
    (``cfg.group_by[0]``) with each stream's name; every stream has its own TAB+-tree, so the
    index path answers each group from its stream's tree and the results are merged by
    ``window_end``, then group. ``variant`` ``replay`` runs that merged replay (the twin the tests
    compare with). First-event alignment uses the first event of the merge, as replay does.
    """
    if len(cfg.group_by) != 1:
        raise UsageError("grouping across streams needs exactly one GROUP BY column (the type)")
    key = cfg.group_by[0]
    if variant == "replay":
        from replaydb.replay.replay import Replay

        t_start = time.perf_counter()
        needed = {"t", "seq"}
        for a in cfg.aggregates:
            needed.update(col.name for col in columns(a.arg))
        cols = [n for n in snaps[0].arrow_schema.names if n in needed]
        intervals = None if t0 is None and t1 is None else [
            (t0 if t0 is not None else np.iinfo(np.int64).min,
             t1 if t1 is not None else np.iinfo(np.int64).max)]
        seq = WindowAggregate(replace(cfg, schema=None), state_cap=None).requires_seq
        # the merge reads seq to break ties between streams; the operator gets it for FIRST/LAST
        rp = Replay(list(snaps), intervals, columns=cols, type_column=key, seq=seq)
        op = WindowAggregate(replace(cfg, schema=rp.schema), state_cap=None)
        out = rp.run(op)
        return out, [PathStats(path="replay", ranges=rp.stats.events, windows=out.num_rows,
                               seconds=time.perf_counter() - t_start)]
    if variant not in ("index", "naive"):
        raise UsageError(f"unknown variant {variant!r}")
    runner = run_index if variant == "index" else run_naive
    base = replace(cfg, group_by=())
    anchor = None
    if cfg.kind == "time" and cfg.align == "first":
        firsts = []
        for snap in snaps:
            agg = TreeAggregator(snap, WindowAggregate(_config_for(base, snap)).layout, 2)
            sp = _span(agg, t0, t1)
            if sp is not None:
                firsts.append(sp.t_first)
        anchor = min(firsts) if firsts else None
    parts, stats = [], []
    for snap in snaps:
        out, st_ = runner(snap, base, t0=t0, t1=t1, anchor=anchor)
        stats.append(st_)
        if out.num_rows:
            parts.append(out.add_column(2, pa.field(key, pa.string()),
                                        pa.array([snap.name] * out.num_rows, pa.string())))
    if not parts:
        schema = WindowAggregate(replace(cfg, schema=None)).output_schema
        return schema.empty_table(), stats
    tbl = pa.concat_tables(parts)
    order = np.lexsort((np.array(tbl.column(key).to_pylist(), dtype=object).astype(str),
                        tbl.column("window_end").to_numpy()))
    return tbl.take(pa.array(order)), stats
