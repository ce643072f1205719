"""The separable sums of skip-till-any confidence under a binding window
(:mod:`replaydb.operators.imprecise.window_sums`) against the exact reference: wide intervals,
long patterns, weighted instants, and a confidence below the precision bound."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.imprecise.confidence import chain_confidence
from replaydb.operators.imprecise.intervals import valid_intervals
from replaydb.operators.imprecise.kernels import confidence_many
from replaydb.operators.imprecise.window_sums import (
    axis_probs,
    exact_range,
    scratch,
    separable_confidence,
)

NO_GAPS = (np.zeros(1, np.int64), np.zeros(0, np.int64))


def _events(bounds: list[tuple[int, int]], weights: list[list[float]] | None):
    """(lo, hi, woff, wflat, cflat, exact points per event)."""
    lo = np.array([a for a, _ in bounds], np.int64)
    hi = np.array([b for _, b in bounds], np.int64)
    woff = np.full(lo.size, -1, np.int64)
    wflat, cflat, pts = np.zeros(0), np.zeros(0), []
    for e, (a, b) in enumerate(bounds):
        n = b - a + 1
        if weights is None:
            pts.append([(t, Fraction(1, n)) for t in range(a, b + 1)])
            continue
        raw = [Fraction(w) for w in weights[e]]
        total = sum(raw)
        w = np.array([float(x / total) for x in raw])
        woff[e] = wflat.size
        wflat = np.concatenate([wflat, w])
        cflat = np.concatenate([cflat, np.cumsum(w)])
        pts.append([(a + i, x / total) for i, x in enumerate(raw) if x > 0])
    return lo, hi, woff, wflat, cflat, pts


def _check(bounds, weights, window: int) -> tuple[float, Fraction]:
    lo, hi, woff, wflat, cflat, pts = _events(bounds, weights)
    length = len(bounds)
    ev = np.arange(length, dtype=np.int64)[None, :]
    vlb, _, vub, ok = valid_intervals(lo[ev], hi[ev], window)
    conf, r0, r1 = confidence_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window, False,
                                   *NO_GAPS)
    if not ok[0]:
        assert conf[0] == 0
        return 0.0, Fraction(0)
    comp = [[(t, p) for t, p in pts[j] if vlb[0, j] <= t <= vub[0, j]] for j in range(length)]
    want, a, b = chain_confidence(comp, window)
    assert conf[0] == pytest.approx(float(want), rel=1e-9, abs=1e-300)
    if want > 0:
        assert (r0[0], r1[0]) == (a, b)
    else:
        assert conf[0] == 0
    return float(conf[0]), want


@settings(max_examples=120, deadline=None)
@given(st.integers(2, 6), st.integers(1, 30), st.booleans(), st.data())
def test_binding_window_confidence_equals_the_exact_one(length, window, weighted, data):
    starts = sorted(data.draw(st.integers(0, 30)) for _ in range(length))
    widths = [data.draw(st.integers(0, 20)) for _ in range(length)]
    bounds = [(s - w // 2, s - w // 2 + w) for s, w in zip(starts, widths)]
    weights = None
    if weighted:
        weights = [[1] + [data.draw(st.integers(0, 3)) for _ in range(b - a - 1)] + [1]
                   if b > a else [1] for a, b in bounds]
    _check(bounds, weights, window)


def test_a_confidence_below_the_precision_bound_is_recomputed_exactly():
    """The start instants within the window of the later events weigh 1e-9 each: the
    separable sums decline, and the per-start passes give the exact value."""
    a_w = [1.0] * 37 + [1e-9] * 4
    bounds = [(0, 40), (39, 45), (40, 46)]
    weights = [a_w, [1.0] * 7, [1.0] * 7]
    lo, hi, woff, wflat, cflat, _ = _events(bounds, weights)
    ev = np.arange(3, dtype=np.int64)[None, :]
    window = 4
    vlb, _, vub, ok = valid_intervals(lo[ev], hi[ev], window)
    assert ok[0] and vub[0, 2] - vlb[0, 0] >= window  # a binding window
    pax, u, v, w, nxt, prv = scratch(3, 64)
    probs = np.zeros((3, 64))
    for j in range(3):
        for k in range(vub[0, j] - vlb[0, j] + 1):
            t = vlb[0, j] + k
            probs[j, k] = wflat[woff[j] + t - lo[j]]
    n = axis_probs(0, 3, vlb, vub, probs, pax)
    first, last = exact_range(pax, n, 3, window, nxt, prv)
    assert (vlb[0, 0] + first, vlb[0, 0] + last) == (37, 43)
    assert separable_confidence(pax, n, vub[0, 0] - vlb[0, 0] + 1, 3, window, u, v, w) == -1.0
    got, want = _check(bounds, weights, window)
    assert 0 < want < Fraction(1, 10**9)
    assert got == pytest.approx(float(want), rel=1e-12)


def test_no_chain_inside_the_window_is_exactly_zero():
    """Each event alone can take points within the window of the others, but no increasing
    chain of all three fits: confidence 0, not a rounding residue."""
    bounds = [(0, 3), (2, 5), (4, 6)]
    got, want = _check(bounds, [[1, 0, 0, 1], [1, 0, 0, 1], [1, 0, 1]], 3)
    assert want == 0 and got == 0.0
