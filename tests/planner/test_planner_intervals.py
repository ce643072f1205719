"""Algorithm 3.1 (vectorized sweep) against brute-force candidate enumeration.

The sweep never enumerates candidates: per first event it keeps the earliest reachable and the
latest in-window last event. Here every candidate of random small inputs is enumerated, its
Interval(c, w) computed with the same formula (base case, S1-S3, interval shortening with the
stream's min/max gap), and the union must equal the sweep's intervals exactly. Also unit tests of
the interval helpers (merge, intersection, navigation widening, leaf joining).
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.planner.pattern.intervals import (
    Geometry,
    SymbolResult,
    block_occurrences,
    coalesce_by_leaves,
    intersect_intervals,
    merge_closed,
    merge_halfopen,
    replay_intervals,
    widen_for_navigation,
)
from replaydb.planner.pattern.rewrite import BasicSymbol, RewrittenPattern

NEG, POS = -(10**12), 10**12


def geometry(t: np.ndarray, leaf: int) -> Geometry:
    n = t.size
    starts = np.arange(0, n, leaf)
    counts = np.minimum(leaf, n - starts)
    gaps = np.diff(t)
    return Geometry(n, int(t[0]), int(t[-1]), int(gaps.min()) if gaps.size else 0,
                    int(gaps.max()) if gaps.size else None, starts.astype(np.int64),
                    counts.astype(np.int64), t[starts].astype(np.int64),
                    t[starts + counts - 1].astype(np.int64))


def pattern(block_sizes: list[int], lead: bool, trail: bool, tight: bool,
            window: int | None) -> RewrittenPattern:
    syms, blocks, idx = [], [], 0
    for b, size in enumerate(block_sizes):
        blk = []
        for o in range(size):
            syms.append(BasicSymbol(idx, b, o, f"S{idx}"))
            blk.append(idx)
            idx += 1
        blocks.append(tuple(blk))
    return RewrittenPattern(tuple(syms), tuple(blocks), lead, trail, tight, window)


def brute(rp: RewrittenPattern, sel: dict[int, np.ndarray], t: np.ndarray,
          geo: Geometry) -> np.ndarray:
    idxs = sorted(sel)
    p, q = idxs[0], rp.n - 1 - idxs[-1]
    gmin, gmax, w = geo.gap_min, geo.gap_max, rp.window
    syms = rp.symbols
    fb = syms[idxs[0]].block == 0 and not rp.lead_star
    lb = syms[idxs[-1]].block == len(rp.blocks) - 1 and not rp.trail_star
    a_s, b_s = [], []
    for cand in itertools.product(*[np.flatnonzero(sel[i]) for i in idxs]):
        ok = True
        for j in range(1, len(idxs)):
            d = idxs[j] - idxs[j - 1]
            same = rp.tight and syms[idxs[j]].block == syms[idxs[j - 1]].block
            gap = cand[j] - cand[j - 1]
            if (same and gap != d) or (not same and gap < d):
                ok = False
                break
        if not ok:
            continue
        t1, tk = int(t[cand[0]]), int(t[cand[-1]])
        if w is not None and tk - t1 > w - (p + q) * gmin:
            continue
        a = tk - w + q * gmin if w is not None else NEG
        b = t1 + w - p * gmin if w is not None else POS
        if fb:
            o = syms[idxs[0]].offset if rp.tight else 0
            fa = int(geo.t_lo_of_seq(np.array([cand[0] - o]))[0])
            if gmax is not None:
                fa = max(fa, t1 - o * gmax)
            a = max(a, min(fa, t1))
        if lb:
            o = (rp.block_len(syms[idxs[-1]].block) - 1 - syms[idxs[-1]].offset) \
                if rp.tight else 0
            fbd = int(geo.t_hi_of_seq(np.array([cand[-1] + o]))[0])
            if gmax is not None:
                fbd = min(fbd, tk + o * gmax)
            b = min(b, max(fbd, tk))
        a_s.append(a)
        b_s.append(b)
    return merge_closed(np.array(a_s, np.int64), np.array(b_s, np.int64), geo)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 18))
    t = np.cumsum(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))).astype(np.int64)
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    tight = draw(st.booleans())
    if not tight:
        sizes = [1] * sum(sizes)
    rp = pattern(sizes, draw(st.booleans()), draw(st.booleans()), tight,
                 draw(st.one_of(st.none(), st.integers(0, 12))))
    chosen = draw(st.lists(st.integers(0, rp.n - 1), min_size=1, max_size=min(rp.n, 3),
                           unique=True))
    sel = {i: np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
           for i in chosen}
    leaf = draw(st.integers(1, 5))
    return rp, sel, t, geometry(t, leaf)


def _run(rp, sel, t, geo):
    results = {i: SymbolResult(np.flatnonzero(m).astype(np.int64), t[np.flatnonzero(m)])
               for i, m in sel.items()}
    got, _ = replay_intervals(rp, results, geo)
    want = brute(rp, sel, t, geo)
    assert got.tolist() == want.tolist(), (got.tolist(), want.tolist())


@settings(max_examples=400, deadline=None)
@given(cases())
def test_sweep_equals_union_of_candidate_intervals(case) -> None:
    _run(*case)


def test_sweep_equals_brute_force_thousands() -> None:
    """Seeded random cases (fast; a deterministic complement of the hypothesis test)."""
    rng = np.random.default_rng(7)
    for _ in range(1500):
        n = int(rng.integers(1, 16))
        t = np.cumsum(rng.integers(0, 4, n)).astype(np.int64)
        tight = bool(rng.integers(0, 2))
        sizes = list(rng.integers(1, 4, int(rng.integers(1, 4))))
        if not tight:
            sizes = [1] * int(sum(sizes))
        w = None if rng.random() < 0.2 else int(rng.integers(0, 12))
        rp = pattern([int(s) for s in sizes], bool(rng.integers(0, 2)),
                     bool(rng.integers(0, 2)), tight, w)
        k = int(rng.integers(1, min(rp.n, 3) + 1))
        chosen = rng.choice(rp.n, k, replace=False)
        sel = {int(i): rng.random(n) < 0.4 for i in chosen}
        _run(rp, sel, t, geometry(t, int(rng.integers(1, 6))))


def test_interval_special_cases_by_hand() -> None:
    # events at t = 0, 10, 20, ..., one per leaf; pattern A B C* D, window 25
    t = np.arange(0, 100, 10, dtype=np.int64)
    geo = geometry(t, 1)
    rp = pattern([2, 1], False, False, True, 25)
    a = SymbolResult(np.array([2]), np.array([20]))
    b = SymbolResult(np.array([3]), np.array([30]))
    d = SymbolResult(np.array([4, 5]), np.array([40, 50]))
    # S1 (A selected, first symbol): [c1.t, c1.t + w]
    iv, _ = replay_intervals(rp, {0: a}, geo)
    assert iv.tolist() == [[20, 20 + 25 - 0 + 1]]
    # S2 (A and D): [c1.t, ck.t] - D at 40 (and 50, outside the window 20 + 25 = 45)
    iv, _ = replay_intervals(rp, {0: a, 2: d}, geo)
    assert iv.tolist() == [[20, 41]]
    # S3 (B and D, B not first): start = ck.t - w, end = ck.t; shortening by gap_min = 10:
    # p = 1 BS before B, q = 0: window check 40 - 30 <= 25 - 10 holds
    iv, _ = replay_intervals(rp, {1: b, 2: d}, geo)
    # A = max(40 - 25 + 0, FB: t_lo(seq 3 - 1) = 20 and 30 - 1 * gap_max(10) = 20) = 20
    assert iv.tolist() == [[20, 41]]
    # base case: B only, no gap_max knowledge beyond FB -> [ck.t - w + q*gmin, c1.t + w - p*gmin]
    rp2 = pattern([2, 1], True, True, True, 25)  # leading and trailing stars: no S1-S3
    iv, _ = replay_intervals(rp2, {1: b}, geo)
    assert iv.tolist() == [[30 - 25 + 10, 30 + 25 - 10 + 1]]


def _disjoint(points: list[int]) -> np.ndarray:
    """Sorted disjoint half-open intervals from distinct points, paired in order."""
    pts = sorted(set(points))
    pts = pts[: len(pts) // 2 * 2]
    return np.array(pts, np.int64).reshape(-1, 2)


@settings(max_examples=300)
@given(st.lists(st.integers(0, 300), max_size=30), st.lists(st.integers(0, 300), max_size=30))
def test_intersect_intervals_equals_pairwise_overlaps(xs: list[int], ys: list[int]) -> None:
    """Every overlap of an x interval with a y interval, in order, and nothing else (brute
    force over all pairs)."""
    x, y = _disjoint(xs), _disjoint(ys)
    want = sorted((max(a, c), min(b, d)) for a, b in x.tolist() for c, d in y.tolist()
                  if min(b, d) > max(a, c))
    got = intersect_intervals(x, y)
    assert got.dtype == np.int64 and got.reshape(-1, 2).tolist() == [list(w) for w in want]


def test_merge_intersect_widen_join() -> None:
    assert merge_halfopen(np.array([5, 0, 3, 10]), np.array([7, 2, 5, 11])).tolist() == \
        [[0, 2], [3, 7], [10, 11]]
    x = np.array([[0, 10], [20, 30]])
    y = np.array([[5, 25], [28, 40]])
    assert intersect_intervals(x, y).tolist() == [[5, 10], [20, 25], [28, 30]]
    assert intersect_intervals(x, np.empty((0, 2), np.int64)).size == 0
    t = np.arange(0, 40, dtype=np.int64)  # one event per time unit, 4 per leaf
    geo = geometry(t, 4)
    # PREV 2: first event of [10, 12) is seq 10 in leaf 2 (seq 8..11): seq 8 - 2 = 6 -> leaf 1
    # starts at t 4; gap_max 1 bounds it by 10 - 2 = 8
    assert widen_for_navigation(np.array([[10, 12]]), geo, 2, 0).tolist() == [[8, 12]]
    assert widen_for_navigation(np.array([[10, 12]]), geo, 0, 3).tolist() == [[10, 15]]
    # [1, 2) and [3, 4) share leaf 0; [9, 10) is in leaf 2
    assert coalesce_by_leaves(np.array([[1, 2], [3, 4], [9, 10]]), geo).tolist() == \
        [[1, 4], [9, 10]]


def test_coalesce_by_leaves_equals_a_leaf_by_leaf_oracle() -> None:
    """Seeded stress against an oracle that finds each interval's first and last leaf by
    testing every leaf: intervals before, inside and after the leaves, gaps of 0-3 leaves,
    fractional limits."""
    import types

    rng = np.random.default_rng(5)
    for _ in range(2000):
        nl = int(rng.integers(1, 40))
        tmin = np.sort(rng.integers(0, 1000, nl))
        tmax = np.maximum.accumulate(tmin + rng.integers(0, 30, nl))
        geo = types.SimpleNamespace(leaf_t_min=tmin, leaf_t_max=tmax)
        n = int(rng.integers(0, 20))
        a = rng.integers(-50, 1100, n)
        iv = merge_halfopen(a, a + rng.integers(1, 60, n)) if n else np.empty((0, 2), np.int64)
        gap = float(rng.choice([0.0, 0.5, 1.0, 2.0, 3.7]))
        want: list[list[int]] = []
        prev_last = None
        for s, e in iv.tolist():
            first = next((k for k in range(nl) if tmax[k] >= s), nl)  # may hold t >= s
            last = max((k for k in range(nl) if tmin[k] <= e - 1), default=-1)  # t < e
            if want and first - prev_last - 1 <= gap:
                want[-1][1] = e
            else:
                want.append([s, e])
            prev_last = last
        assert coalesce_by_leaves(iv, geo, gap).tolist() == want


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True), st.integers(0, 2**16),
       st.integers(0, 400))
def test_block_occurrences_equal_a_set_join(offsets: list[int], seed: int, n: int) -> None:
    """Occurrences of a tight block (every symbol's event at its fixed seq distance) equal a
    brute-force join of the symbols' seq sets, with the first and last symbol's times."""
    offsets = sorted(offsets)
    rng = np.random.default_rng(seed)
    results = []
    for _ in offsets:
        seq = np.unique(rng.integers(0, max(n, 1) * 2, n))
        results.append(SymbolResult(seq.astype(np.int64), seq.astype(np.int64) * 10 + 7))
    occ = block_occurrences(offsets, results)
    sets = [set(r.seq.tolist()) for r in results]
    want = sorted(b for b in range(-4, 2 * max(n, 1) + 4)
                  if all(b + o in s for o, s in zip(offsets, sets)))
    assert occ.first_seq.tolist() == [b + offsets[0] for b in want]
    assert occ.last_seq.tolist() == [b + offsets[-1] for b in want]
    assert occ.first_t.tolist() == [(b + offsets[0]) * 10 + 7 for b in want]
    assert occ.last_t.tolist() == [(b + offsets[-1]) * 10 + 7 for b in want]
