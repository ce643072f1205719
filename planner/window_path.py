"""The index path of windowed aggregation on the TAB+-tree (dissertation 3.3.1, Fig. 3.4).

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
materializes (COUNT, SUM, AVG, MIN, MAX of numeric attributes). Otherwise the planner replays.

Complexity per slice (optimized): O(h) runs of O(D) nodes, plus the events of at most two
partially covered leaves (each leaf read once overall); per window (naive): the same over the
whole window.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.operators.expr import Column, columns
from replaydb.operators.window import WindowAggregate, WindowConfig
from replaydb.operators.window.aggregates import INDEXABLE_FUNCS, Layout, Partials, take
from replaydb.planner.window_calibrate import weights_of
from replaydb.planner.window_cost import PathChoice, TreeStats, choose_path

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


# --------------------------------------------------------------------------- leaf buffer
class LeafBuffer:
    """Boundary leaves read from the data, kept in an LRU buffer of ``capacity`` leaves.

    :meth:`fetch` takes leaf requests in access order, reads the misses (duplicates included:
    a leaf evicted and requested again is read again) in as few calls as the files allow, and
    returns the data of the requested leaves. Every physical read is counted.
    """

    def __init__(self, snap: Any, columns: list[str], capacity: int) -> None:
        self.snap = snap
        self.columns = columns
        self.capacity = max(1, capacity)
        self.cache: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self.reads = 0
        self._specs = {s.name: s for s in snap.specs}

    def fetch(self, requests: Sequence[int] | np.ndarray) -> dict[int, dict[str, np.ndarray]]:
        req = [int(x) for x in requests]
        misses: list[int] = []
        sim: OrderedDict[int, None] = OrderedDict((k, None) for k in self.cache)
        for leaf in req:
            if leaf in sim:
                sim.move_to_end(leaf)
            else:
                misses.append(leaf)
                sim[leaf] = None
                if len(sim) > self.capacity:
                    sim.popitem(last=False)
        got: dict[int, dict[str, np.ndarray]] = {}
        if misses:
            got = self._read(misses)
        out: dict[int, dict[str, np.ndarray]] = {}
        for leaf in req:
            data = self.cache.get(leaf)
            if data is None:
                data = got[leaf]
                self.cache[leaf] = data
                if len(self.cache) > self.capacity:
                    self.cache.popitem(last=False)
            else:
                self.cache.move_to_end(leaf)
            out[leaf] = data
        return out

    def _read(self, leaves: list[int]) -> dict[int, dict[str, np.ndarray]]:
        """Read ``leaves`` (in order, duplicates re-read), grouped by data file."""
        from replaydb.store.snapshot import values_of

        lv = self.snap.tree.leaves
        fids = lv.col("file_id")[leaves]
        out: dict[int, dict[str, np.ndarray]] = {}
        cut = np.flatnonzero(fids[1:] != fids[:-1]) + 1
        for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, len(leaves)].tolist()):
            group = leaves[a:b]
            tbl = self.snap._read_leaf_set(group, self.columns)
            self.reads += len(group)
            counts = lv.col("count")[group]
            offs = np.r_[0, np.cumsum(counts)]
            t = tbl.column("t").to_numpy()
            vals = {}
            for c in self.columns[1:]:
                arr, valid = values_of(tbl.column(c), self._specs[c])
                vals[c] = (arr, valid)
            for i, leaf in enumerate(group):
                lo, hi = int(offs[i]), int(offs[i + 1])
                d = {"t": t[lo:hi]}
                for c, (arr, valid) in vals.items():
                    d[c] = arr[lo:hi]
                    d[c + "#valid"] = valid[lo:hi] if valid is not None else None  # type: ignore[assignment]
                out[leaf] = d
        return out


# --------------------------------------------------------------------------- range aggregation
def _range_reduce(padded: np.ndarray, a: np.ndarray, b: np.ndarray, ufunc: np.ufunc,
                  identity: Any) -> np.ndarray:
    """``ufunc.reduce(padded[a_i:b_i])`` for every i (``identity`` where ``a_i >= b_i``).

    ``padded`` carries one spare element after the data (so ``b_i`` may equal the data length):
    one ``reduceat`` over the interleaved bounds, O(total range length).
    """
    n = len(a)
    if n == 0:
        return np.zeros(0, padded.dtype)
    empty = a >= b
    idx = np.empty(2 * n, np.int64)
    idx[0::2] = np.where(empty, 0, a)
    idx[1::2] = np.where(empty, 1, b)
    res = ufunc.reduceat(padded, idx)[0::2]
    if empty.any():
        res[empty] = identity
    return res


class TreeAggregator:
    """Temporal aggregations over seq ranges ``[lo, hi)`` of a stream, vectorized over ranges.

    Full leaves come from the TAB+-tree (highest covering nodes), the two partially covered
    boundary leaves from the data through a :class:`LeafBuffer`. Produces partials with the
    components of ``layout`` (n, nn, sum, min, max, tmin, tmax).
    """

    _TREE_COL = {"nn": "n", "sum": "sum", "min": "min", "max": "max"}

    def __init__(self, snap: Any, layout: Layout, buffer_leaves: int = 2) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.layout = layout
        lv = self.tree.leaves
        self.seq_min = lv.col("seq_min")
        self.count = lv.col("count")
        self.t_min = lv.col("t_min")
        self.t_max = lv.col("t_max")
        self.n_leaves = len(self.seq_min)
        self.n_events = self.tree.n_events
        self.slot_cols = [s.name for s in layout.slots]  # type: ignore[attr-defined]
        cols = ["t", *dict.fromkeys(self.slot_cols)]  # positions come from seq_min, not seq
        self.buffer = LeafBuffer(snap, cols, buffer_leaves)
        self.nodes_merged = 0
        self.piece_events = 0
        self._padded: dict[tuple[int, str], np.ndarray] = {}
        # (component, tree column suffix, ufunc, identity) per layout component
        self._comp: list[tuple[str, str, np.ufunc, Any]] = []
        for c in layout.components:
            if c.name == "n":
                self._comp.append((c.name, "count", np.add, 0))
            elif c.name in ("tmin", "tmax"):
                self._comp.append((c.name, "t_min" if c.name == "tmin" else "t_max",
                                   np.minimum if c.name == "tmin" else np.maximum, c.identity))
            else:
                pre = c.name.rstrip("0123456789")
                slot = int(c.name[len(pre):])
                col = f"{self.slot_cols[slot]}.{self._TREE_COL[pre]}"
                fn = {"add": np.add, "min": np.minimum, "max": np.maximum}[c.kind]
                self._comp.append((c.name, col, fn, c.identity))

    # ------------------------------------------------------------------ positions
    def leaf_of(self, seq: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.seq_min, seq, side="right") - 1

    def boundary_leaves(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each time ``T``: the first leaf holding an event ``>= T``, and whether ``T``
        falls strictly inside it (then its data is needed to place the boundary)."""
        leaf = np.searchsorted(self.t_max, times, side="left")
        inside = leaf < self.n_leaves
        inside[inside] = self.t_min[leaf[inside]] < times[inside]
        return leaf, inside

    def fetch(self, requests: np.ndarray, data: dict | None = None) -> dict:
        """Data of the requested leaves (in request order through the buffer), added to ``data``."""
        data = {} if data is None else data
        missing = [int(x) for x in requests if int(x) not in data]
        if missing:
            data.update(self.buffer.fetch(missing))
        return data

    def positions(self, times: np.ndarray, data: dict) -> np.ndarray:
        """``tau(T)`` for sorted times: the number of events with ``t < T`` (Def 2.6).

        Leaf-aligned boundaries need no data; the others use their leaf's times from ``data``
        (fetched when missing).
        """
        leaf, need = self.boundary_leaves(times)
        pos = np.full(len(times), self.n_events, dtype=np.int64)
        ok = leaf < self.n_leaves
        pos[ok] = self.seq_min[leaf[ok]]
        if need.any():
            leaves = np.unique(leaf[need])
            data = self.fetch(leaves, data)
            cat = np.concatenate([data[int(x)]["t"] for x in leaves])
            base = np.r_[0, np.cumsum(self.count[leaves])[:-1]]
            k = np.searchsorted(leaves, leaf[need])
            off = np.searchsorted(cat, times[need], side="left") - base[k]
            pos[need] = self.seq_min[leaf[need]] + off
        return pos

    def time_of(self, seq: int) -> int:
        """Time of the event at position ``seq``."""
        leaf = int(self.leaf_of(np.array([seq]))[0])
        if seq == int(self.seq_min[leaf]):
            return int(self.t_min[leaf])
        if seq == int(self.seq_min[leaf] + self.count[leaf] - 1):
            return int(self.t_max[leaf])
        d = self.fetch(np.array([leaf]))[leaf]
        return int(d["t"][seq - int(self.seq_min[leaf])])

    # ------------------------------------------------------------------ aggregation
    def partials(self, lo: np.ndarray, hi: np.ndarray, data: dict | None = None, *,
                 order: str = "sorted") -> Partials:
        """Partial aggregates of the seq ranges ``[lo_i, hi_i)``.

        Boundary leaves not in ``data`` are fetched: ``order="sorted"`` once each in leaf order
        (forward scan), ``order="per_range"`` left then right leaf of every range in range order
        (the naive path's access pattern).
        """
        lay = self.layout
        n = len(lo)
        acc = lay.identity(n)
        nonempty = lo < hi
        if not nonempty.any():
            return acc
        li = np.where(nonempty, self.leaf_of(lo), 0)
        lj = np.where(nonempty, self.leaf_of(np.maximum(hi - 1, 0)), 0)
        start, end = self.seq_min, self.seq_min + self.count
        left_part = nonempty & (lo > start[li])
        right_part = nonempty & (hi < end[lj])
        same = nonempty & (li == lj)
        diff = nonempty & ~same
        same_full = same & ~left_part & ~right_part
        # pieces read from the data: [a, b) positions inside one leaf
        p1 = (same & ~same_full) | (diff & left_part)
        p1_b = np.where(same, hi, end[li])
        p2 = diff & right_part
        # full leaves [fa, fb)
        fa = np.where(same_full, li, np.where(diff, np.where(left_part, li + 1, li), 0))
        fb = np.where(same_full, li + 1, np.where(diff, np.where(right_part, lj, lj + 1), 0))
        pieces = [(p1, li, lo, p1_b), (p2, lj, start[lj], hi)]
        if p1.any() or p2.any():
            if order == "per_range":
                key = np.concatenate([np.flatnonzero(p1) * 2, np.flatnonzero(p2) * 2 + 1])
                req = np.concatenate([li[p1], lj[p2]])[np.argsort(key, kind="stable")]
            else:
                req = np.unique(np.concatenate([li[p1], lj[p2]]))
            data = self.fetch(req, data)
            self._merge_pieces(acc, pieces, data)
        self._merge_cover(acc, fa, fb)
        return acc

    def _level_col(self, k: int, col: str, identity: Any) -> np.ndarray:
        """Column ``col`` of tree level ``k`` with one spare element (cached)."""
        key = (k, col)
        arr = self._padded.get(key)
        if arr is None:
            data = self.tree.levels[k].col(col)
            arr = self._padded[key] = np.append(data, np.asarray(identity, dtype=data.dtype))
        return arr

    def _merge_cover(self, acc: Partials, lo: np.ndarray, hi: np.ndarray) -> None:
        """Fold leaves ``[lo, hi)`` from the highest covering nodes, level by level."""
        lay = self.layout
        d = self.tree.fanout
        top = len(self.tree.levels) - 1
        lo, hi = lo.copy(), hi.copy()
        for k in range(len(self.tree.levels)):
            active = lo < hi
            if not active.any():
                break
            if k == top:
                runs = [(lo, hi)]
            else:
                left_end = np.minimum(hi, -(-lo // d) * d)
                right_start = np.maximum(left_end, (hi // d) * d)
                runs = [(lo, np.where(active, left_end, lo)),
                        (np.where(active, right_start, hi), hi)]
                lo, hi = left_end // d, right_start // d
                lo, hi = np.where(active, lo, 0), np.where(active, hi, 0)
            for a, b in runs:
                sel = a < b
                if not sel.any():
                    continue
                self.nodes_merged += int((b - a)[sel].sum())
                part = {}
                for name, col, fn, ident in self._comp:
                    part[name] = _range_reduce(self._level_col(k, col, ident), a, b, fn, ident)
                acc.update(lay.combine(acc, part))
            if k == top:
                break

    def _merge_pieces(self, acc: Partials, pieces: list[tuple[np.ndarray, ...]],
                      data: dict) -> None:
        lay = self.layout
        sel_pieces = [(m, leaf[m], a[m], b[m]) for m, leaf, a, b in pieces if m.any()]
        needed = np.unique(np.concatenate([p[1] for p in sel_pieces]))
        data = {int(x): data[int(x)] for x in needed}
        leaves = np.array(sorted(data), dtype=np.int64)
        counts = self.count[leaves]
        base = np.r_[0, np.cumsum(counts)[:-1]]
        # the boundary leaves' data, concatenated with one spare element (see _range_reduce)
        cat: dict[str, np.ndarray] = {"t": np.concatenate([data[int(x)]["t"] for x in leaves])}
        okmask: dict[str, np.ndarray] = {}
        for c in dict.fromkeys(self.slot_cols):
            vals = [data[int(x)][c] for x in leaves]
            cat[c] = np.concatenate(vals + [np.zeros(1, vals[0].dtype)])
            ok = ~np.isnan(cat[c]) if cat[c].dtype.kind == "f" else np.ones(len(cat[c]), bool)
            valids = [data[int(x)][c + "#valid"] for x in leaves]
            if any(v is not None for v in valids):
                ok[:-1] &= np.concatenate(
                    [v if v is not None else np.ones(len(data[int(x)]["t"]), bool)
                     for v, x in zip(valids, leaves)])
            okmask[c] = ok
        nn_cache: dict[str, np.ndarray] = {}
        for m, leaf, a, b in sel_pieces:
            k = np.searchsorted(leaves, leaf)
            ga = base[k] + (a - self.seq_min[leaf])
            gb = base[k] + (b - self.seq_min[leaf])
            self.piece_events += int((gb - ga).sum())
            part: Partials = {}
            for c in lay.components:
                if c.name == "n":
                    part["n"] = (gb - ga).astype(np.int64)
                elif c.name == "tmin":
                    part["tmin"] = cat["t"][ga]
                elif c.name == "tmax":
                    part["tmax"] = cat["t"][gb - 1]
                else:
                    pre = c.name.rstrip("0123456789")
                    col = self.slot_cols[int(c.name[len(pre):])]
                    ok = okmask[col]
                    if pre == "nn":
                        if col not in nn_cache:
                            nn_cache[col] = ok.astype(np.int64)
                        part[c.name] = _range_reduce(nn_cache[col], ga, gb, np.add, 0)
                        continue
                    v = cat[col].astype(c.dtype, copy=False)
                    ident = c.identity
                    vv = v if ok.all() else np.where(ok, v, 0 if pre == "sum" else ident)
                    fn = {"sum": np.add, "min": np.minimum, "max": np.maximum}[pre]
                    part[c.name] = _range_reduce(vv, ga, gb, fn, 0 if pre == "sum" else ident)
            idx = np.flatnonzero(m)
            merged = lay.combine(take(acc, idx), part)
            for name, v in merged.items():
                acc[name][idx] = v


# --------------------------------------------------------------------------- the paths
@dataclass(frozen=True)
class _Span:
    """The events a query covers: seq positions ``[p0, p1)`` and their first/last times."""

    p0: int
    p1: int
    t_first: int
    t_last: int


def _span(agg: TreeAggregator, t0: int | None, t1: int | None) -> _Span | None:
    bounds = np.array([t0 if t0 is not None else np.iinfo(np.int64).min,
                       t1 if t1 is not None else np.iinfo(np.int64).max], dtype=np.int64)
    if agg.n_events == 0:
        return None
    p = agg.positions(bounds, {})
    p0 = 0 if t0 is None else int(p[0])
    p1 = agg.n_events if t1 is None else int(p[1])
    if p1 <= p0:
        return None
    return _Span(p0, p1, agg.time_of(p0), agg.time_of(p1 - 1))


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
    t_start = time.perf_counter()
    io0 = snap.counters.as_dict()
    op, agg = _prepare(snap, cfg, buffer_leaves=2)
    out = _Collector(op, sink)
    stats = PathStats(path="index")
    span = _span(agg, t0, t1)
    c = op.cfg
    geom = op.geom
    if span is not None:
        if c.kind == "time":
            if anchor is None:
                anchor = c.offset if c.align == "epoch" else span.t_first
            op.open_partials(anchor, span.t_first)
            st = op.groups[0]
            k_last = geom.last_window_starting_by(span.t_last - anchor)
            s_lo, s_hi = st.next_slice, k_last * geom.p + geom.W
        else:
            anchor = 0
            op.open_partials(0, 0)
            st = op.groups[0]
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
    return _finish(out, agg, stats, io0, t_start, snap), stats


def run_naive(snap: Any, cfg: WindowConfig, *, t0: int | None = None, t1: int | None = None,
              chunk: int = CHUNK, buffer_leaves: int = NAIVE_BUFFER_LEAVES,
              anchor: int | None = None, sink: Sink | None = None
              ) -> tuple[pa.Table, PathStats]:
    """The naive index path: one temporal aggregation per window (no slide tree)."""
    t_start = time.perf_counter()
    io0 = snap.counters.as_dict()
    op, agg = _prepare(snap, cfg, buffer_leaves=buffer_leaves)
    out = _Collector(op, sink)
    stats = PathStats(path="naive")
    span = _span(agg, t0, t1)
    c = op.cfg
    geom = op.geom
    if span is not None:
        if c.kind == "time":
            if anchor is None:
                anchor = c.offset if c.align == "epoch" else span.t_first
            k_first = geom.first_window_ending_after(span.t_first - anchor)
            if c.align == "first":
                k_first = max(k_first, 0)
            k_last = geom.last_window_starting_by(span.t_last - anchor)
        else:
            anchor = 0
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
    return _finish(out, agg, stats, io0, t_start, snap), stats


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


def plan(snap: Any, cfg: WindowConfig, plan: str = "auto",
         weights: tuple[float, float] | None = None) -> PathChoice:
    """The cost-based choice (3.3.2) for ``cfg`` over ``snap``, with every estimate; ``weights``
    ``(w_merge, w_slice)`` from :mod:`replaydb.planner.window_calibrate` (None: uncalibrated)."""
    ok, why = index_applicable(cfg, snap)
    st = TreeStats.of_snapshot(snap)
    if cfg.kind == "count":
        st = TreeStats(r=1.0, h=st.h, B=st.B, D=st.D)
    st = st.weighted(weights)
    return choose_path(int(cfg.size), int(cfg.slide), st, plan=plan,  # type: ignore[arg-type]
                       index_ok=ok, why_not=why)


def run(snap: Any, cfg: WindowConfig, plan_name: str = "auto", *, t0: int | None = None,
        t1: int | None = None) -> tuple[pa.Table, PathChoice, PathStats]:
    """Plan and execute: the result table, the choice (for EXPLAIN) and what was done."""
    choice = plan(snap, cfg, plan_name)
    runner = {"replay": run_replay, "index": run_index, "naive": run_naive}[choice.path]
    out, stats = runner(snap, cfg, t0=t0, t1=t1)
    return out, choice, stats


# --------------------------------------------------------------------------- query hub
def time_bounds(where: Any) -> tuple[int | None, int | None, Any]:
    """Split WHERE into a time range on ``t`` and the rest.

    Top-level AND conjuncts ``t >= a``, ``t > a``, ``t < b``, ``t <= b``, ``t BETWEEN a AND b``
    (integer literals, stream units; either side order) become the half-open range
    ``[t0, t1)``; everything else stays as the residual predicate (None when nothing is left).
    Filtering by time before windowing equals replaying only that range, except that events
    outside it would still advance time - which matters only for ``EMPTY => 'EMIT'`` (the caller
    keeps the filter then).
    """
    from replaydb.operators.expr import Between, Binary, Literal, and_all, conjuncts

    t0: int | None = None
    t1: int | None = None
    rest = []

    def lit(e: Any) -> int | None:
        if isinstance(e, Literal) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return int(e.value)
        return None

    def is_t(e: Any) -> bool:
        return isinstance(e, Column) and e.name == "t" and e.index is None

    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    for c in conjuncts(where):
        lo = hi = None
        if isinstance(c, Binary) and c.op in flip:
            op, val = None, None
            if is_t(c.left) and lit(c.right) is not None:
                op, val = c.op, lit(c.right)
            elif is_t(c.right) and lit(c.left) is not None:
                op, val = flip[c.op], lit(c.left)
            if op is not None:
                assert val is not None
                lo = val if op == ">=" else val + 1 if op == ">" else None
                hi = val if op == "<" else val + 1 if op == "<=" else None
            else:
                rest.append(c)
                continue
        elif isinstance(c, Between) and not c.negated and is_t(c.operand) \
                and lit(c.low) is not None and lit(c.high) is not None:
            lo, hi = lit(c.low), lit(c.high) + 1  # type: ignore[operator]
        else:
            rest.append(c)
            continue
        if lo is not None:
            t0 = lo if t0 is None else max(t0, lo)
        if hi is not None:
            t1 = hi if t1 is None else min(t1, hi)
    return t0, t1, (and_all(rest) if rest else None)


def plan_query(ctx: Any) -> Any:
    """The window-aggregate planner of the query hub (``replaydb.planner.query``).

    Chooses replay, the optimized index path or the naive one by the cost model (3.3.2), or
    follows ``--plan replay|index|naive``; WHERE conjuncts that only bound ``t`` become the time
    range to read. EXPLAIN shows both estimates, the break-even slide and the tree's shape;
    EXPLAIN ANALYZE adds what the index path did.
    """
    from replaydb.planner.lang.window_sql import to_config
    from replaydb.planner.query import Plan

    opts = ctx.options
    plan_name = opts.plan if opts.plan in ("auto", "replay", "index", "naive") else None
    if plan_name is None:
        raise UsageError(f"--plan {opts.plan} does not apply to windowed aggregation",
                         hint="use auto, replay, index or naive")
    cfg = to_config(ctx.query, ctx.schema, ctx.time_unit, aliases=ctx.aliases)
    t0 = t1 = None
    if cfg.where is not None and cfg.empty == "skip":
        t0, t1, rest = time_bounds(cfg.where)
        cfg = replace(cfg, where=rest)
    intervals = None if t0 is None and t1 is None else [
        (t0 if t0 is not None else np.iinfo(np.int64).min,
         t1 if t1 is not None else np.iinfo(np.int64).max)]
    if len(ctx.snapshots) != 1:
        multi = Plan(ctx, strategy="replay", intervals=intervals)
        multi.details["window_path"] = ["replay: the query reads several streams"]
        multi.make_operator = lambda: WindowAggregate(replace(cfg, schema=ctx.schema),
                                                      state_cap=opts.state_cap)
        return multi
    snap = ctx.snapshots[0]
    choice = plan(snap, cfg, plan_name, weights_of(ctx.store, snap.name))
    est = {"merges_per_slide_replay": choice.c_replay, "merges_per_slide_index": choice.c_index,
           "merges_per_slide_naive": choice.c_naive, "break_even_slide": choice.break_even,
           "tree": {"h": choice.stats.h, "B": choice.stats.B, "D": choice.stats.D,
                    "r": choice.stats.r},
           "weights": {"w_merge": choice.stats.w_merge, "w_slice": choice.stats.w_slice,
                       "calibrated": choice.stats.calibrated}}
    out = Plan(ctx, strategy=f"window-{choice.path}", intervals=intervals, estimates=est)
    out.details["window_path"] = choice.explain(ctx.time_unit)
    if t0 is not None or t1 is not None:
        out.details["time_range"] = [t0, t1]
    if choice.path == "replay":
        out.make_operator = lambda: WindowAggregate(replace(cfg, schema=ctx.schema),
                                                    state_cap=opts.state_cap)
        return out
    runner = run_index if choice.path == "index" else run_naive

    def execute(p: Any) -> pa.Table:
        table, stats = runner(snap, cfg, t0=t0, t1=t1)
        p.details["index_path"] = stats.as_dict()
        return table

    out.execute = execute
    return out
