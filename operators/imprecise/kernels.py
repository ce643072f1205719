"""Compiled (Numba) float kernels: confidence and time range of many matches at once.

Same semantics as :mod:`.confidence` (the reference, tested against these), for the common cases:
skip-till-any, and skip-till-next where every spoiler is a candidate of one gap only (Eq. 3).
Per match the DP runs over the valid intervals ``[vlb_j, vub_j]``; when the window cannot bind
(``vub_l - vlb_1 < W``) one forward pass gives the confidence and the range end and one backward
pass the range start; otherwise it runs once per start point. Without spoilers a transition is a
prefix sum (``O(l * n)`` per pass); with spoilers it is ``O(n^2)`` per gap, the spoiler factor of
each (s, t) computed from the spoilers' cumulative distributions.

pmf access: ``woff[e] < 0`` is uniform over ``[lo[e], hi[e]]``; otherwise ``wflat``/``cflat``
hold the normalized weights and their running sums from ``woff[e]`` on.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def _prob(e: int, t: int, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
          wflat: np.ndarray) -> float:
    o = woff[e]
    if o < 0:
        return 1.0 / (hi[e] - lo[e] + 1)
    return wflat[o + t - lo[e]]


@nb.njit(cache=True, inline="always")
def _cdf(e: int, x: int, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
         cflat: np.ndarray) -> float:
    """P[T_e <= x]."""
    if x < lo[e]:
        return 0.0
    if x >= hi[e]:
        return 1.0
    o = woff[e]
    if o < 0:
        return (x - lo[e] + 1) / (hi[e] - lo[e] + 1)
    return cflat[o + x - lo[e]]


@nb.njit(cache=True)
def _gap_weights(m: int, g: int, vlb: np.ndarray, vub: np.ndarray, gap_ptr: np.ndarray,
                 gap_ev: np.ndarray, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
                 cflat: np.ndarray, out: np.ndarray) -> None:
    """``out[a, b]``: probability that no spoiler of gap ``g`` falls strictly between
    ``vlb[m, g-1] + a`` and ``vlb[m, g] + b``."""
    l_ = vlb.shape[1]
    s0 = vlb[m, g - 1]
    t0 = vlb[m, g]
    ns = vub[m, g - 1] - s0 + 1
    nt = vub[m, g] - t0 + 1
    k0 = gap_ptr[m * l_ + g]
    k1 = gap_ptr[m * l_ + g + 1]
    for a in range(ns):
        s = s0 + a
        for b in range(nt):
            t = t0 + b
            w = 1.0
            if t > s:
                for k in range(k0, k1):
                    c = gap_ev[k]
                    if lo[c] > s and hi[c] < t:
                        w = 0.0
                        break
                    inside = _cdf(c, t - 1, lo, hi, woff, cflat) - _cdf(c, s, lo, hi, woff, cflat)
                    q = 1.0 - inside
                    if q < 0.0:
                        q = 0.0
                    w *= q
            out[a, b] = w


_SIG = (nb.types.Tuple((nb.float64[::1], nb.int64[::1], nb.int64[::1]))(
    nb.int64[:, ::1], nb.int64[:, ::1], nb.int64[:, ::1], nb.int64[::1], nb.int64[::1],
    nb.int64[::1], nb.float64[::1], nb.float64[::1], nb.int64, nb.boolean, nb.int64[::1],
    nb.int64[::1]))


@nb.njit(_SIG, cache=True)
def confidence_batch(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                     hi: np.ndarray, woff: np.ndarray, wflat: np.ndarray, cflat: np.ndarray,
                     window: int, use_gaps: bool, gap_ptr: np.ndarray, gap_ev: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Confidence, range start and range end of each match (row of ``ev``, buffer positions).

    ``gap_ptr``/``gap_ev`` (CSR over ``m * l + g``) list the spoilers of gap ``g`` of match
    ``m`` when ``use_gaps``; each must be a spoiler of that gap only.
    """
    m_count, l_ = ev.shape
    conf = np.zeros(m_count)
    r0 = np.full(m_count, np.int64(-1))
    r1 = np.full(m_count, np.int64(-1))
    maxn = 1
    for m in range(m_count):
        for j in range(l_):
            n = vub[m, j] - vlb[m, j] + 1
            if n > maxn:
                maxn = n
    probs = np.zeros((l_, maxn))
    f = np.zeros(maxn)
    nf = np.zeros(maxn)
    back = np.zeros(maxn)
    nback = np.zeros(maxn)
    gw = np.ones((l_, maxn, maxn)) if use_gaps else np.ones((1, 1, 1))
    for m in range(m_count):
        feasible = True
        for j in range(l_):
            if vub[m, j] < vlb[m, j]:
                feasible = False
        if not feasible:
            continue
        for j in range(l_):
            e = ev[m, j]
            for k in range(vub[m, j] - vlb[m, j] + 1):
                probs[j, k] = _prob(e, vlb[m, j] + k, lo, hi, woff, wflat)
        if use_gaps:
            for g in range(1, l_):
                _gap_weights(m, g, vlb, vub, gap_ptr, gap_ev, lo, hi, woff, cflat, gw[g])
        binding = vub[m, l_ - 1] - vlb[m, 0] >= window
        n0 = vub[m, 0] - vlb[m, 0] + 1
        total = 0.0
        best0 = np.int64(-1)
        best1 = np.int64(-1)
        nstarts = n0 if binding else 1
        for si in range(nstarts):
            # f over component 0: one start point (binding) or all of them
            for k in range(n0):
                f[k] = 0.0
            if binding:
                if probs[0, si] <= 0.0:
                    continue
                f[si] = probs[0, si]
                limit = vlb[m, 0] + si + window - 1
            else:
                for k in range(n0):
                    f[k] = probs[0, k]
                limit = vub[m, l_ - 1]
            alive = True
            for j in range(1, l_):
                ns = vub[m, j - 1] - vlb[m, j - 1] + 1
                nt = vub[m, j] - vlb[m, j] + 1
                s0 = vlb[m, j - 1]
                t0 = vlb[m, j]
                anyv = False
                if not use_gaps:
                    # prefix sums: nf[b] = p_j(t) * sum_{s < t} f[s]
                    acc = 0.0
                    a = 0
                    for b in range(nt):
                        t = t0 + b
                        while a < ns and s0 + a < t:
                            acc += f[a]
                            a += 1
                        if t > limit:
                            nf[b] = 0.0
                        else:
                            nf[b] = probs[j, b] * acc
                            if nf[b] > 0.0:
                                anyv = True
                else:
                    for b in range(nt):
                        t = t0 + b
                        acc = 0.0
                        if t <= limit:
                            for a in range(ns):
                                if s0 + a >= t:
                                    break
                                if f[a] > 0.0:
                                    acc += f[a] * gw[j, a, b]
                        nf[b] = probs[j, b] * acc
                        if nf[b] > 0.0:
                            anyv = True
                for b in range(nt):
                    f[b] = nf[b]
                if not anyv:
                    alive = False
                    break
            if not alive:
                continue
            nl = vub[m, l_ - 1] - vlb[m, l_ - 1] + 1
            sub = 0.0
            last = np.int64(-1)
            for b in range(nl):
                if f[b] > 0.0:
                    sub += f[b]
                    last = vlb[m, l_ - 1] + b
            if sub > 0.0:
                total += sub
                if binding and best0 < 0:
                    best0 = vlb[m, 0] + si
                if last > best1:
                    best1 = last
        if total > 0.0 and not binding:
            # range start: smallest first point with a positive continuation (backward pass)
            nl = vub[m, l_ - 1] - vlb[m, l_ - 1] + 1
            for b in range(nl):
                back[b] = 1.0 if probs[l_ - 1, b] > 0.0 else 0.0
            for j in range(l_ - 2, -1, -1):
                ns = vub[m, j] - vlb[m, j] + 1
                nt = vub[m, j + 1] - vlb[m, j + 1] + 1
                s0 = vlb[m, j]
                t0 = vlb[m, j + 1]
                for a in range(ns):
                    s = s0 + a
                    ok = 0.0
                    if probs[j, a] > 0.0:
                        for b in range(nt):
                            if t0 + b > s and back[b] > 0.0:
                                if not use_gaps or gw[j + 1, a, b] > 0.0:
                                    ok = 1.0
                                    break
                    nback[a] = ok
                for a in range(ns):
                    back[a] = nback[a]
            for a in range(n0):
                if back[a] > 0.0:
                    best0 = vlb[m, 0] + a
                    break
        conf[m] = total
        r0[m] = best0
        r1[m] = best1
    return conf, r0, r1


def confidence_many(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                    hi: np.ndarray, woff: np.ndarray, wflat: np.ndarray, cflat: np.ndarray,
                    window: int, use_gaps: bool, gap_ptr: np.ndarray, gap_ev: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`confidence_batch` with its arguments made contiguous and typed."""
    c = np.ascontiguousarray
    return confidence_batch(
        c(ev, np.int64), c(vlb, np.int64), c(vub, np.int64), c(lo, np.int64), c(hi, np.int64),
        c(woff, np.int64), c(wflat, np.float64), c(cflat, np.float64), int(window),
        bool(use_gaps), c(gap_ptr, np.int64), c(gap_ev, np.int64))
