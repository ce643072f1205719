"""Temporal aggregations over seq ranges of a stored stream, from the TAB+-tree's node
aggregates plus the two partially covered boundary leaves read from the data (the building block
of the windowed aggregation's index paths, :mod:`replaydb.replay.tree_aggregates`).

:class:`TreeAggregator` merges, for many ranges at once, the highest covering inner nodes (one
``ufunc.reduceat`` per level and component) and the boundary-leaf pieces; :class:`LeafBuffer`
holds the boundary leaves read so far in an LRU buffer and counts every physical read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from replaydb.operators.window.aggregates import Layout, Partials, take


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
