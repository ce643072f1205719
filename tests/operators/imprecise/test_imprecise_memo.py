"""Confidences computed once per match shape (operators/imprecise/memo.py) equal the kernel run
on every match, bit for bit: random streams with regular stretches (shapes repeat) and random
ones, uniform and weighted events, with and without skip-till-next spoilers, both window
bindings, and matches whose hashes collide on purpose."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.imprecise import memo
from replaydb.operators.imprecise.intervals import valid_intervals
from replaydb.operators.imprecise.kernels import confidence_many


def _events(rng: np.random.Generator, n: int, delta: int, weighted: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` events one instant apart (every fifth stretch jittered), uncertainty up to
    ``delta`` on each side, a share ``weighted`` of them with a weight table."""
    t = np.arange(n, dtype=np.int64) * 2
    jitter = rng.random(n) < 0.2
    t[jitter] += rng.integers(-1, 2, int(jitter.sum()))
    t = np.sort(t)
    d = np.where(rng.random(n) < 0.8, delta, rng.integers(0, delta + 1, n))
    lo, hi = t - d, t + d
    woff = np.full(n, -1, np.int64)
    wflat, cflat = [], []
    for i in np.flatnonzero(rng.random(n) < weighted):
        w = rng.random(int(hi[i] - lo[i] + 1)) + 0.1
        w /= w.sum()
        woff[i] = len(wflat)
        wflat.extend(w)
        cflat.extend(np.cumsum(w))
    return lo, hi, woff, np.array(wflat + [0.0]), np.array(cflat + [0.0])


def _matches(rng: np.random.Generator, n: int, l_: int, count: int) -> np.ndarray:
    """Rows of ``l_`` increasing event positions: repeated offset patterns at many starts
    (shapes that repeat) and random ones."""
    pats = [np.cumsum(rng.integers(1, 4, l_)) - 1 for _ in range(3)]
    rows = []
    for _ in range(count):
        p = pats[int(rng.integers(0, 3))] if rng.random() < 0.8 else \
            np.sort(rng.choice(12, l_, replace=False))
        s = int(rng.integers(0, n - 13))
        rows.append(s + p)
    return np.array(rows, np.int64).reshape(count, l_)


def _spoilers(rng: np.random.Generator, ev: np.ndarray, n: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """A CSR over ``m * l + g``: for each gap, the events strictly between the gap's two
    events that the match does not use (in order), or a random subset of them."""
    m_count, l_ = ev.shape
    ptr, out = [0], []
    for m in range(m_count):
        for g in range(l_):
            if g > 0:
                between = [e for e in range(int(ev[m, g - 1]) + 1, int(ev[m, g]))
                           if e not in ev[m]]
                if rng.random() < 0.3:
                    between = [e for e in between if rng.random() < 0.5]
                out.extend(between)
            ptr.append(len(out))
    return np.array(ptr, np.int64), np.array(out, np.int64)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), l_=st.integers(1, 4), window=st.integers(2, 30),
       delta=st.integers(0, 4), weighted=st.sampled_from([0.0, 0.1]), nxt=st.booleans(),
       count=st.integers(1, 120))
def test_shared_confidences_equal_each_matchs_own(seed, l_, window, delta, weighted, nxt, count):
    rng = np.random.default_rng(seed)
    n = 80
    lo, hi, woff, wflat, cflat = _events(rng, n, delta, weighted)
    ev = _matches(rng, n, l_, count)
    vlb, _, vub, ok = valid_intervals(lo[ev], hi[ev], window)
    ev, vlb, vub = ev[ok], vlb[ok], vub[ok]
    if nxt:
        ptr, gev = _spoilers(rng, ev, n)
    else:
        ptr, gev = np.zeros(1, np.int64), np.zeros(0, np.int64)
    args = (ev, vlb, vub, lo, hi, woff, wflat, cflat, window, nxt, ptr, gev)
    want = confidence_many(*args)
    got = memo.confidence_shared(*args)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_colliding_hashes_are_told_apart():
    """Matches with one hash share a representative only when their shapes are equal, both
    fixed parts and spoiler entries, and every event is uniform."""
    h = np.zeros(6, np.uint64)
    fixed = np.array([[0, 1, 1], [0, 1, 1], [0, 2, 1], [0, 1, 1], [0, 1, 1], [0, 1, 1]],
                     np.int64)
    uniform = np.array([True, True, True, True, False, True])
    # one spoiler entry each, but match 3's differs from match 0's and match 5 has two
    first = np.array([0, 1, 2, 3, 4, 5], np.int64)
    end = np.array([1, 2, 3, 4, 5, 7], np.int64)
    rel = np.array([[1, 3], [1, 3], [1, 3], [2, 3], [1, 3], [1, 3], [1, 3]], np.int64)
    rep = memo.representatives(h, fixed, first, end, rel, uniform)
    assert rep.tolist() == [0, 0, 2, 3, 4, 5]
    none = np.zeros(6, np.int64)
    assert memo.representatives(h, fixed, none, none, rel[:0], uniform).tolist() == \
        [0, 0, 2, 0, 4, 0]
    # equal shapes hash alike, different ones (almost surely) not
    hs = memo.shape_hashes(fixed, first, end, rel)
    assert hs[0] == hs[1] == hs[4] and len({int(x) for x in hs[[0, 2, 3, 5]]}) == 4
