"""The coarse pattern map (CPM): pattern matching over a TAB+-tree level (dissertation 3.4.3,
"Adaption to Non-Uniform Data").

A level of the TAB+-tree is a temporal histogram: every node (bucket) knows its time range, its
event count and, per numeric attribute, the min and max of its events (and how many are not
null). A basic symbol (BS) whose range conditions miss a bucket's ``[min, max]`` cannot occur in
it. Matching the rewritten pattern over the buckets then finds the parts of the stream where a
match is possible at all:

* ``hit[i, j]``: BS ``i`` may occur in bucket ``j`` (every one of its numeric conditions
  intersects the bucket's ``[min, max]`` and the attribute has a value there; string conditions
  cannot prune: strings carry no aggregates);
* a match needs its BS events in buckets ``j_1 <= j_2 <= .. <= j_n`` with ``hit[i, j_i]`` and
  ``t_min[j_n] - t_max[j_1] <= w`` (the last BS event is at least at ``t_min[j_n]``, the first at
  most at ``t_max[j_1]``). For every start bucket ``j_1`` the earliest chain is found greedily
  (next hit of each following BS at or after the previous bucket: ``O(n M)`` with a
  next-hit table), and the latest possible ``j_n`` inside the window from a previous-hit table;
* the region of ``j_1`` is ``[t_min[j_1], t_max[j_n_latest]]``, extended by the window before
  (after) it when the rewritten pattern starts (ends) with ``true*`` - the match may begin before
  its first BS. Regions are merged into disjoint half-open intervals.

Every match of the rewritten pattern (hence of the query) lies inside one region, so the regions
alone are a valid replay plan (the histogram-only strategy) and intersecting index-based replay
intervals with them keeps every match.

For the cost model the CPM also re-estimates the parameters inside the regions: the number of
events and the time they span (so the mean gap between events ``dt``), and per condition the
expected number of satisfying events there, from each bucket's count times the fraction of its
``[min, max]`` the condition's ranges cover (uniform inside a bucket; a point range counts as
one value of an integer range, or 1% of a continuous one). That fraction of the condition's
estimated events falling inside the regions rescales the index's exact-ish count.

Complexity: ``O(n M)`` for n BSs and M buckets, vectorized; the level is chosen as the lowest one
with at most ``max_buckets`` nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.planner.pattern.conditions import Condition
from replaydb.planner.pattern.intervals import I64, Geometry, merge_halfopen
from replaydb.planner.pattern.rewrite import RewrittenPattern

DEFAULT_MAX_BUCKETS = 4096


@dataclass
class Scope:
    """Where matches can be: disjoint half-open regions with their sizes (for the cost model).

    Without a CPM the scope is the whole stream (one region).
    """

    regions: np.ndarray  # rows [a, b)
    events: np.ndarray  # events per region (estimated from buckets)
    leaves: np.ndarray  # leaves overlapping each region
    share: dict[Condition, float] = field(default_factory=dict)
    level: int | None = None
    buckets: int = 0
    buckets_kept: int = 0
    seconds: float = 0.0

    @property
    def span(self) -> int:
        return int((self.regions[:, 1] - self.regions[:, 0]).sum()) if self.regions.size else 0

    @property
    def n_events(self) -> float:
        return float(self.events.sum())

    @property
    def n_leaves(self) -> int:
        return int(self.leaves.sum())

    def _check(self) -> None:
        """Invariants: regions sorted, disjoint, non-empty; one size per region; shares in
        [0, 1]."""
        r = self.regions
        assert r.ndim == 2 and (r.shape[0] == 0 or r.shape[1] == 2)
        assert np.all(r[:, 1] > r[:, 0]), "empty region"
        assert np.all(r[1:, 0] > r[:-1, 1]), "regions overlap or touch"
        assert self.events.shape[0] == r.shape[0] == self.leaves.shape[0]
        assert all(0.0 <= v <= 1.0 + 1e-9 for v in self.share.values())

    def cond_share(self, c: Condition) -> float:
        """Fraction of the condition's events that fall inside the scope."""
        return self.share.get(c, 1.0)


def whole_stream(geo: Geometry) -> Scope:
    if geo.n_events == 0:
        return Scope(np.empty((0, 2), I64), np.empty(0), np.empty(0, I64))
    return Scope(np.array([[geo.t_min, geo.t_max + 1]], I64), np.array([float(geo.n_events)]),
                 np.array([geo.n_leaves], I64))


def _overlap(mn: np.ndarray, mx: np.ndarray, has: np.ndarray, lo: Any, hi: Any, lo_in: Any,
             hi_in: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per bucket (columns) and range (rows, or one range as scalars): whether the range meets
    the bucket's ``[min, max]`` (and the attribute has a value there), and the fraction of
    that span the range covers (1 for a one-value bucket)."""
    ok = has & ((mx > lo) | ((mx == lo) & lo_in)) & ((mn < hi) | ((mn == hi) & hi_in))
    width = mx - mn
    with np.errstate(invalid="ignore", divide="ignore"):
        ov = np.minimum(hi, mx) - np.maximum(lo, mn)
        f = np.where(width > 0, np.clip(ov / np.where(width > 0, width, 1.0), 0, 1), 1.0)
    return ok, f


def _valid(nn: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Fraction of each bucket's events with a value of the attribute."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, nn / np.maximum(count, 1), 0.0)


def _bounds(r: Any) -> tuple[float, float]:
    return (-np.inf if r.lo is None else float(r.lo)), (np.inf if r.hi is None else float(r.hi))


def _local_selectivity(c: Condition, cols: dict[str, np.ndarray], count: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(may occur, expected fraction of events satisfying ``c``) per bucket."""
    m = count.size
    mn, mx, nn = cols.get(f"{c.column}.min"), cols.get(f"{c.column}.max"), cols.get(
        f"{c.column}.n")
    if mn is None or c.kind != "numeric":
        return np.ones(m, bool), np.full(m, np.nan)
    mn = mn.astype(np.float64)
    mx = mx.astype(np.float64)
    has = nn > 0
    hit = np.zeros(m, bool)
    frac = np.zeros(m)
    width = mx - mn
    integral = bool(np.all(np.mod(mn[has], 1.0) == 0) and np.all(np.mod(mx[has], 1.0) == 0))
    for r in c.ranges:
        lo, hi = _bounds(r)
        ok, f = _overlap(mn, mx, has, lo, hi, r.lo_inclusive, r.hi_inclusive)
        hit |= ok
        if lo == hi:
            f = np.where(width > 0, 1.0 / (width + 1.0) if integral else 0.01, 1.0)
        frac += np.where(ok, f, 0.0)
    return hit, np.clip(frac, 0.0, 1.0) * _valid(nn, count)


@dataclass
class _Local:
    """:func:`_local_selectivity` of every distinct condition of a pattern, stacked: row
    ``row[c]`` of ``hit`` / ``frac`` (conditions x buckets) is condition ``c``'s."""

    row: dict[Condition, int]
    hit: np.ndarray
    frac: np.ndarray


def _local_all(rp: RewrittenPattern, cols: dict[str, np.ndarray], count: np.ndarray) -> _Local:
    """:func:`_local_selectivity` of every condition of the pattern, as one matrix. Conditions
    with one non-point range on a numeric column are computed together per column (one
    broadcast of :func:`_overlap` over conditions x buckets, the column's min/max/validity
    converted once); the others one by one. Same values as :func:`_local_selectivity`."""
    row: dict[Condition, int] = {}
    simple: dict[str, list[Condition]] = {}
    other: list[Condition] = []
    for sym in rp.symbols:
        for c in sym.conditions:
            if c in row:
                continue
            row[c] = -1
            r = c.ranges[0] if len(c.ranges) == 1 else None
            if (c.kind == "numeric" and r is not None and f"{c.column}.min" in cols
                    and not (r.lo is not None and r.hi is not None and r.lo == r.hi)):
                simple.setdefault(c.column, []).append(c)
            else:
                other.append(c)
    hit = np.empty((len(row), count.size), bool)
    frac = np.empty((len(row), count.size))
    k = 0
    for col, conds in simple.items():
        nn = cols[f"{col}.n"]
        rs = [c.ranges[0] for c in conds]
        lo, hi = (np.array(x)[:, None] for x in zip(*(_bounds(r) for r in rs)))
        ok, f = _overlap(cols[f"{col}.min"].astype(np.float64),
                         cols[f"{col}.max"].astype(np.float64), nn > 0, lo, hi,
                         np.array([r.lo_inclusive for r in rs])[:, None],
                         np.array([r.hi_inclusive for r in rs])[:, None])
        hit[k:k + len(conds)] = ok
        frac[k:k + len(conds)] = np.clip(np.where(ok, f, 0.0), 0.0, 1.0) * _valid(nn, count)
        for c in conds:
            row[c] = k
            k += 1
    for c in other:
        hit[k], frac[k] = _local_selectivity(c, cols, count)
        row[c] = k
        k += 1
    return _Local(row, hit, frac)


def build_cpm(rp: RewrittenPattern, geo: Geometry, cols: dict[str, np.ndarray],
              level: int | None = None) -> Scope:
    """The CPM's regions and re-estimated parameters (see the module docstring).

    ``cols``: one TAB+-tree level as columns (``tree.histogram(level)``).
    """
    t0 = time.perf_counter()
    if geo.n_events == 0 or not cols or cols["count"].size == 0:
        s = whole_stream(geo)
        s.seconds = time.perf_counter() - t0
        return s
    if hits_everywhere(rp, cols):
        # every bucket starts a region, so the regions hold every event and every share is 1:
        # the whole stream, without the O(n M) matching (a tenth of a selective plan's time
        # on uniform data, where no bucket is ever pruned)
        s = whole_stream(geo)
        s.level, s.buckets, s.buckets_kept = level, int(cols["count"].size), int(
            cols["count"].size)
        s.seconds = time.perf_counter() - t0
        return s
    return scan_buckets(rp, geo, cols, level, t0)


def hits_everywhere(rp: RewrittenPattern, cols: dict[str, np.ndarray]) -> bool:
    """Whether every condition of every basic symbol meets every bucket (``hit`` all true in
    :func:`scan_buckets`): then nothing can be pruned. Decided from two extremes per column of
    the level - a range meets every bucket's ``[min, max]`` when it reaches up to the smallest
    bucket max and down to the largest bucket min - and the column having a value in every
    bucket. Sufficient, not necessary (a condition of several ranges must have one range that
    meets every bucket). O(buckets) per column named, O(1) per condition."""
    ext: dict[str, tuple[float, float]] = {}
    for sym in rp.symbols:
        for c in sym.conditions:
            mn = cols.get(f"{c.column}.min")
            if mn is None or c.kind != "numeric":
                continue  # meets every bucket (see _local_selectivity)
            e = ext.get(c.column)
            if e is None:
                if not bool((cols[f"{c.column}.n"] > 0).all()):
                    return False
                e = ext[c.column] = (float(cols[f"{c.column}.max"].min()), float(mn.max()))
            low_max, high_min = e
            if not any(_meets_all(r, low_max, high_min) for r in c.ranges):
                return False
    return True


def _meets_all(r: Any, low_max: float, high_min: float) -> bool:
    """Whether range ``r`` meets every bucket, given the smallest bucket max and the largest
    bucket min (the bucket test of :func:`_overlap`, at its hardest bucket)."""
    lo, hi = _bounds(r)
    up = low_max > lo or (low_max == lo and bool(r.lo_inclusive))
    down = high_min < hi or (high_min == hi and bool(r.hi_inclusive))
    return up and down


def scan_buckets(rp: RewrittenPattern, geo: Geometry, cols: dict[str, np.ndarray],
                 level: int | None, t0: float) -> Scope:
    """:func:`build_cpm`'s matching over the buckets (``t0``: when the build started)."""
    tmin, tmax = cols["t_min"].astype(I64), cols["t_max"].astype(I64)
    count = cols["count"].astype(np.float64)
    m = tmin.size
    n = rp.n
    w = rp.window
    hits = np.ones((max(n, 1), m), bool)
    local = _local_all(rp, cols, count)
    for sym in rp.symbols:
        if sym.conditions:
            rows = [local.row[c] for c in sym.conditions]
            hits[sym.index] = local.hit[rows[0]] if len(rows) == 1 else \
                local.hit[rows].all(axis=0)
    if n == 0:
        regions = np.array([[geo.t_min, geo.t_max + 1]], I64)
    else:
        ar = np.arange(m, dtype=I64)
        start = np.flatnonzero(hits[0])
        b = start.copy()
        ok = np.ones(start.size, bool)
        if n > 1:
            # next-hit table of every BS at once: nxt[i, j] = first bucket >= j where BS i may
            # occur (m: none), with a column m that stays m
            nxt = np.full((n, m + 1), m, I64)
            idx = np.where(hits[:, ::-1], ar[::-1], m)
            nxt[:, :m] = np.minimum.accumulate(idx, axis=1)[:, ::-1]
            for i in range(1, n):
                b = nxt[i, b]
                ok &= b < m
        last = np.flatnonzero(hits[n - 1])
        start, b = start[ok], b[ok]
        if start.size == 0 or last.size == 0:
            regions = np.empty((0, 2), I64)
        else:
            prv = np.maximum.accumulate(np.where(hits[n - 1], ar, -1))
            if w is not None:
                win = tmin[b] - tmax[start] <= w
                start, b = start[win], b[win]
                lim = np.searchsorted(tmin, tmax[start] + w, side="right") - 1
                jn = prv[np.clip(lim, 0, m - 1)]
                jn = np.maximum(jn, b)
                a = tmin[start].copy()
                e = tmax[jn].copy()
                if rp.lead_star:
                    a = np.minimum(a, tmin[b] - w)
                if rp.trail_star:
                    e = np.maximum(e, tmax[start] + w)
            else:
                a = tmin[start].copy() if not rp.lead_star else np.full(start.size, geo.t_min)
                e = np.full(start.size, tmax[last[-1]] if not rp.trail_star else geo.t_max)
            a = np.maximum(a, geo.t_min)
            e = np.minimum(e, geo.t_max) + 1
            regions = merge_halfopen(a, e) if a.size else np.empty((0, 2), I64)
    # statistics of the regions
    if regions.shape[0]:
        ri_lo = np.searchsorted(regions[:, 1], tmin, side="right")  # first region ending after
        inside = (ri_lo < regions.shape[0])
        inside[inside] = regions[ri_lo[inside], 0] <= tmax[inside]
        rid = np.where(inside, ri_lo, -1)
        events = np.bincount(rid[inside], weights=count[inside], minlength=regions.shape[0])
        first = geo.first_leaf(regions[:, 0])
        lastl = geo.last_leaf(regions[:, 1])
        leaves = np.maximum(lastl - first + 1, 0).astype(I64)
        # share of each condition's estimated events inside the regions, all conditions at
        # once (a condition without bucket estimates - NaN - keeps the index's count)
        fc = local.frac * count
        tot = fc.sum(axis=1)
        ins = fc[:, inside].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            sh = np.where(tot > 0, ins / np.where(tot > 0, tot, 1.0), 0.0)
        share = {c: float(sh[k]) for c, k in local.row.items() if not np.isnan(tot[k])}
        kept = int(inside.sum())
    else:
        events, leaves, share, kept = np.empty(0), np.empty(0, I64), {
            c: 0.0 for c in local.row}, 0
    return Scope(regions, events, leaves, share, level, m, kept, time.perf_counter() - t0)
