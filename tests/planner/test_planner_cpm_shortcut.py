"""The coarse pattern map's shortcut: when every condition meets every bucket
(:func:`hits_everywhere`), the full matching over the buckets keeps every bucket and every
event with share 1, so the whole-stream scope that :func:`build_cpm` answers instead is the
same scope (property test over random histograms and patterns)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from replaydb.planner.pattern.conditions import Condition, Range
from replaydb.planner.pattern.cpm import build_cpm, hits_everywhere, scan_buckets
from replaydb.planner.pattern.intervals import Geometry
from replaydb.planner.pattern.rewrite import BasicSymbol, RewrittenPattern


def _stream(rng: np.random.Generator, m: int, leaf: int, spread: float):
    """A regular stream of ``m`` buckets of ``leaf`` events; column ``a`` per bucket spans a
    random sub-range of [0, 1] whose width is about ``spread``."""
    n = m * leaf
    t = np.arange(1, n + 1, dtype=np.int64)
    starts = np.arange(0, n, leaf)
    counts = np.full(m, leaf, np.int64)
    geo = Geometry(n, 1, n, 1, 1, starts.astype(np.int64), counts, t[starts],
                   t[starts + counts - 1])
    centre = rng.random(m)
    half = spread * rng.random(m) / 2
    cols = {"t_min": t[starts], "t_max": t[starts + counts - 1], "count": counts,
            "a.min": np.clip(centre - half, 0, 1), "a.max": np.clip(centre + half, 0, 1),
            "a.n": counts.copy()}
    if rng.random() < 0.2:
        cols["a.n"][rng.integers(0, m)] = 0  # a bucket without a value of a
    return geo, cols


def _pattern(rng: np.random.Generator, n: int, window: int | None) -> RewrittenPattern:
    syms = []
    for i in range(n):
        ranges = []
        for _ in range(int(rng.integers(1, 3))):
            lo, hi = np.sort(rng.random(2))
            if rng.random() < 0.2:
                lo = 0.0 if rng.random() < 0.5 else None
            if rng.random() < 0.2:
                hi = 1.0 if rng.random() < 0.5 else None
            ranges.append(Range(lo, hi, bool(rng.random() < 0.7), bool(rng.random() < 0.7)))
        syms.append(BasicSymbol(i, i, 0, f"S{i}", (Condition("a", tuple(ranges)),)))
    return RewrittenPattern(tuple(syms), tuple((i,) for i in range(n)), bool(rng.random() < .3),
                            bool(rng.random() < .3), True, window)


@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 60), n=st.integers(1, 5),
       spread=st.sampled_from([0.05, 0.5, 0.98, 1.0]),
       window=st.sampled_from([None, 0, 50, 5000]))
def test_shortcut_answers_what_the_full_matching_answers(seed, m, n, spread, window):
    rng = np.random.default_rng(seed)
    geo, cols = _stream(rng, m, 32, spread)
    rp = _pattern(rng, n, window)
    full = scan_buckets(rp, geo, cols, 1, 0.0)
    if hits_everywhere(rp, cols):
        assert full.buckets_kept == m
        assert full.events.sum() == geo.n_events
        assert all(abs(v - 1.0) < 1e-12 for v in full.share.values())
        quick = build_cpm(rp, geo, cols, 1)
        assert quick.regions.shape[0] == 1
        assert quick.events.sum() == geo.n_events and quick.buckets_kept == m
        for sym in rp.symbols:
            for c in sym.conditions:
                assert quick.cond_share(c) == 1.0


def test_uniform_buckets_take_the_shortcut_skewed_ones_do_not():
    rng = np.random.default_rng(1)
    m = 200
    geo, cols = _stream(rng, m, 64, 1.0)
    cols["a.min"][:] = rng.random(m) * 1e-3  # every bucket spans about [0, 1]
    cols["a.max"][:] = 1 - rng.random(m) * 1e-3
    narrow = RewrittenPattern((BasicSymbol(0, 0, 0, "S0", (Condition("a", (Range(.3, .31),)),)),
                               BasicSymbol(1, 1, 0, "S1", (Condition("a", (Range(.7, .7),)),))),
                              ((0,), (1,)), False, False, True, 0)
    assert hits_everywhere(narrow, cols)
    cols["a.max"][5] = 0.2  # one bucket that S0 and S1 miss
    assert not hits_everywhere(narrow, cols)
    assert build_cpm(narrow, geo, cols, 1).buckets_kept < m
