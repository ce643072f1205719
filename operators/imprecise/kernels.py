"""Compiled (Numba) float kernels: confidence and time range of many matches at once.

Same semantics as :mod:`.confidence` (the reference, tested against these), for the common cases:
skip-till-any, and skip-till-next where every spoiler is a candidate of one gap only (Eq. 3).
Per match the DP runs over the valid intervals ``[vlb_j, vub_j]``; when the window cannot bind
(``vub_l - vlb_1 < W``) one forward pass gives the confidence and the range end and one backward
pass the range start; otherwise it runs once per start point - except skip-till-any (no
spoilers) of up to :data:`MAX_SEPARABLE` components, whose binding-window confidence is a sum of
separable terms over all start points at once (:mod:`.window_sums`, ``O(2^l * N)`` for an axis
of ``N`` instants, its range decided exactly on the instants). Without spoilers a transition is
a prefix sum (``O(l * n)`` per pass); with spoilers it is ``O(n^2)`` per gap, the spoiler factor
of each (s, t) computed from the spoilers' cumulative distributions.

pmf access: ``woff[e] < 0`` is uniform over ``[lo[e], hi[e]]``; otherwise ``wflat``/``cflat``
hold the normalized weights and their running sums from ``woff[e]`` on.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from replaydb.operators.imprecise.window_sums import (
    axis_probs,
    exact_range,
    scratch,
    separable_confidence,
)


@nb.njit(cache=True, inline="always")
def _prob(e: int, t: int, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
          wflat: np.ndarray) -> float:
    o = woff[e]
    if o < 0:
        return 1.0 / (hi[e] - lo[e] + 1)
    return wflat[o + t - lo[e]]


@nb.njit(cache=True, inline="always")
def _cdf_run(e: int, x0: int, n: int, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
             cflat: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = P[T_e <= x0 + i]`` for ``i < n``: 0 below the event's interval, 1 from its
    upper bound on, the uniform distribution's or the table's running sum inside (the event's
    bounds and table read once per run of points, not once per point). O(n)."""
    a, b, o = lo[e], hi[e], woff[e]
    den = float(b - a + 1)
    for i in range(n):
        x = x0 + i
        if x < a:
            out[i] = 0.0
        elif x >= b:
            out[i] = 1.0
        elif o < 0:
            out[i] = float(x - a + 1) / den
        else:
            out[i] = cflat[o + x - a]


@nb.njit(cache=True)
def _gap_weights(m: int, g: int, vlb: np.ndarray, vub: np.ndarray, gap_ptr: np.ndarray,
                 gap_ev: np.ndarray, lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
                 cflat: np.ndarray, out: np.ndarray, fs: np.ndarray, ft: np.ndarray) -> None:
    """``out[a, b]``: probability that no spoiler of gap ``g`` falls strictly between
    ``s = vlb[m, g-1] + a`` and ``t = vlb[m, g] + b``: the product over the spoilers, in their
    order, of ``1 - (P[T <= t - 1] - P[T <= s])`` where ``t > s`` (1 elsewhere). Each spoiler's
    distribution is read once per point (``fs``, ``ft``: scratch of at least ``ns`` / ``nt``
    entries); only the pairs with ``s < upper`` and ``t > lower`` of the spoiler are
    multiplied (elsewhere its factor is exactly 1), so a spoiler that cannot fall between any
    two of the points is skipped. O(ns * nt) per spoiler that can, at most."""
    l_ = vlb.shape[1]
    s0 = vlb[m, g - 1]
    t0 = vlb[m, g]
    ns = vub[m, g - 1] - s0 + 1
    nt = vub[m, g] - t0 + 1
    k0 = gap_ptr[m * l_ + g]
    k1 = gap_ptr[m * l_ + g + 1]
    for a in range(ns):
        for b in range(nt):
            out[a, b] = 1.0
    t_last = t0 + nt - 1
    for k in range(k0, k1):
        c = gap_ev[k]
        if hi[c] <= s0 or lo[c] >= t_last:
            continue
        _cdf_run(c, s0, ns, lo, hi, woff, cflat, fs)
        _cdf_run(c, t0 - 1, nt, lo, hi, woff, cflat, ft)
        # the factor is 1 unless s < hi[c] and t > lo[c] (else T cannot fall between them)
        a_end = min(ns, hi[c] - s0)
        b_first = max(0, lo[c] - t0 + 1)
        for a in range(a_end):
            first = max(s0 + a - t0 + 1, b_first)  # the first b with t > s that matters
            f = fs[a]
            row = out[a, first:nt]
            src = ft[first:nt]
            for j in range(row.shape[0]):
                v = 1.0 - (src[j] - f)
                row[j] *= v if v > 0.0 else 0.0


MAX_SEPARABLE = 8
"""Most components whose binding-window confidence uses the separable sums
(:mod:`.window_sums`: ``2^(l-1)`` tables per match); longer patterns run one pass per start."""

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
    none = np.iinfo(np.int64).min
    r0 = np.full(m_count, none)
    r1 = np.full(m_count, none)
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
    fs = np.zeros(maxn)
    ft = np.zeros(maxn)
    cum = np.zeros((maxn, maxn)) if use_gaps else np.zeros((1, 1))
    # the separable sums (skip-till-any under a binding window, window_sums): their scratch
    separable = not use_gaps and 2 <= l_ <= MAX_SEPARABLE
    axis = 1
    if separable:
        for m in range(m_count):
            axis = max(axis, vub[m, l_ - 1] - vlb[m, 0] + 1)
    pax, su, sv, sw, nxt, prv = scratch(l_ if separable else 1, axis)
    lastpos = np.zeros((maxn, maxn), np.int64) if use_gaps else np.zeros((1, 1), np.int64)
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
                _gap_weights(m, g, vlb, vub, gap_ptr, gap_ev, lo, hi, woff, cflat, gw[g], fs,
                             ft)
        binding = vub[m, l_ - 1] - vlb[m, 0] >= window
        if binding and separable:
            n_axis = axis_probs(m, l_, vlb, vub, probs, pax)
            a, b = exact_range(pax, n_axis, l_, window, nxt, prv)
            if a > b:
                continue  # no chain inside the window: confidence 0
            c = separable_confidence(pax, n_axis, vub[m, 0] - vlb[m, 0] + 1, l_, window, su,
                                     sv, sw)
            if c >= 0.0:
                conf[m] = c
                r0[m] = vlb[m, 0] + a
                r1[m] = vlb[m, 0] + b
                continue
        n0 = vub[m, 0] - vlb[m, 0] + 1
        total = 0.0
        best0 = none
        best1 = none
        nstarts = n0 if binding else 1
        # With spoilers and a binding window, the last transition is read from a cumulative
        # table (cum[a, b]: mass of the last step from point a of component l-2 to points
        # <= b of component l-1), so each start costs O(n^2) less: the final component is not
        # recomputed per start.
        use_cum = binding and use_gaps and l_ >= 2
        steps = l_ - 1 if use_cum else l_
        nlc = vub[m, l_ - 1] - vlb[m, l_ - 1] + 1
        if use_cum:
            npc = vub[m, l_ - 2] - vlb[m, l_ - 2] + 1
            for a in range(npc):
                s = vlb[m, l_ - 2] + a
                run = 0.0
                lastb = -1
                for b in range(nlc):
                    t = vlb[m, l_ - 1] + b
                    if t > s:
                        term = gw[l_ - 1, a, b] * probs[l_ - 1, b]
                        if term > 0.0:
                            run += term
                            lastb = b
                    cum[a, b] = run
                    lastpos[a, b] = lastb
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
            for j in range(1, steps):
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
                elif binding and j == 1:
                    # the start is one point: the first transition is a single row
                    for b in range(nt):
                        t = t0 + b
                        nf[b] = 0.0
                        if s0 + si < t <= limit:
                            nf[b] = probs[j, b] * f[si] * gw[j, si, b]
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
            sub = 0.0
            last = none
            if use_cum:
                bi = limit - vlb[m, l_ - 1]
                if bi < 0:
                    continue
                if bi >= nlc:
                    bi = nlc - 1
                npc = vub[m, l_ - 2] - vlb[m, l_ - 2] + 1
                for a in range(npc):
                    if f[a] > 0.0 and cum[a, bi] > 0.0:
                        sub += f[a] * cum[a, bi]
                        cand = vlb[m, l_ - 1] + lastpos[a, bi]
                        if cand > last:
                            last = cand
            else:
                for b in range(nlc):
                    if f[b] > 0.0:
                        sub += f[b]
                        last = vlb[m, l_ - 1] + b
            if sub > 0.0:
                total += sub
                if binding and best0 == none:
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


_SIG_ENUM = (nb.types.Tuple((nb.float64[::1], nb.int64[::1], nb.int64[::1]))(
    nb.int64[:, ::1], nb.int64[:, ::1], nb.int64[:, ::1], nb.int64[::1], nb.int64[::1],
    nb.int64[::1], nb.float64[::1], nb.float64[::1], nb.int64, nb.int64[::1], nb.int64[::1],
    nb.int64[::1], nb.int64[::1], nb.int64[::1]))


@nb.njit(_SIG_ENUM, cache=True)
def confidence_enumerate(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray, woff: np.ndarray, wflat: np.ndarray,
                         cflat: np.ndarray, window: int, gap_ptr: np.ndarray,
                         gap_ev: np.ndarray, multi_ptr: np.ndarray, multi_ev: np.ndarray,
                         multi_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Skip-till-next confidence by enumerating the point matches in the valid intervals.

    The paper's event-based skip-till-next method (enumerate the points of the valid intervals,
    then the point-based confidence): each point match is weighted by Eq. 2 directly. Spoilers
    of one gap (``gap_ptr``/``gap_ev``, CSR over ``m * l + g``) enter through per-gap factor
    tables; a spoiler of several gaps (``multi_ptr``/``multi_ev`` CSR over matches,
    ``multi_mask`` bit ``g`` set per gap) contributes its mass outside all of them, which the
    point match's instants fix - no enumeration of the spoiler's points (Eq. 4) is needed; each
    such spoiler's distribution is tabulated at the match's points once.
    Cost per match: its point matches times its spoilers of several gaps.
    """
    m_count, l_ = ev.shape
    conf = np.zeros(m_count)
    none = np.iinfo(np.int64).min
    r0 = np.full(m_count, none)
    r1 = np.full(m_count, none)
    maxn = 1
    for m in range(m_count):
        for j in range(l_):
            n = vub[m, j] - vlb[m, j] + 1
            if n > maxn:
                maxn = n
    probs = np.zeros((l_, maxn))
    gw = np.ones((l_, maxn, maxn))
    fs = np.zeros(maxn)
    ft = np.zeros(maxn)
    idx = np.zeros(l_, np.int64)
    tt = np.zeros(l_, np.int64)
    acc = np.zeros(l_ + 1)
    kmax = 1
    for m in range(m_count):
        kmax = max(kmax, multi_ptr[m + 1] - multi_ptr[m])
    pre = np.zeros(kmax)
    lastgap = np.zeros(kmax, np.int64)
    # per multi spoiler k and component j: P[T <= point i of j] and P[T <= point i of j, - 1]
    cat = np.zeros((kmax, l_, maxn))
    cbe = np.zeros((kmax, l_, maxn))
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
        for g in range(1, l_):
            _gap_weights(m, g, vlb, vub, gap_ptr, gap_ev, lo, hi, woff, cflat, gw[g], fs, ft)
        k0 = multi_ptr[m]
        k1 = multi_ptr[m + 1]
        total = 0.0
        best0 = none
        best1 = none
        if l_ == 1:
            for k in range(vub[m, 0] - vlb[m, 0] + 1):
                if probs[0, k] > 0.0:
                    total += probs[0, k]
                    if best0 == none:
                        best0 = vlb[m, 0] + k
                    best1 = vlb[m, 0] + k
            conf[m] = total
            r0[m] = best0
            r1[m] = best1
            continue
        # depth-first enumeration of increasing point chains over components 0..l-2; the last
        # component is an inner loop, with the spoilers' mass outside the fixed gaps
        # precomputed per prefix
        last = l_ - 1
        nlast = vub[m, last] - vlb[m, last] + 1
        for k in range(k0, k1):
            for jj in range(l_):
                nj = vub[m, jj] - vlb[m, jj] + 1
                _cdf_run(multi_ev[k], vlb[m, jj], nj, lo, hi, woff, cflat, cat[k - k0, jj])
                _cdf_run(multi_ev[k], vlb[m, jj] - 1, nj, lo, hi, woff, cflat, cbe[k - k0, jj])
        j = 0
        idx[0] = -1
        acc[0] = 1.0
        while j >= 0:
            idx[j] += 1
            n = vub[m, j] - vlb[m, j] + 1
            if idx[j] >= n:
                j -= 1
                continue
            t = vlb[m, j] + idx[j]
            if j > 0:
                if t - tt[0] >= window:
                    j -= 1  # later instants only move further out of the window
                    continue
                if t <= tt[j - 1]:
                    continue
            p = probs[j, idx[j]]
            if p <= 0.0:
                continue
            w = acc[j] * p
            if j > 0:
                w *= gw[j, tt[j - 1] - vlb[m, j - 1], idx[j]]
            if w <= 0.0:
                continue
            tt[j] = t
            if j < last - 1:
                acc[j + 1] = w
                j += 1
                idx[j] = -1
                continue
            # j == l - 2: fixed prefix; per multi spoiler, the outside mass before the last gap
            # (tables cat/cbe: P[T <= tt[g]] and P[T <= tt[g] - 1] of the prefix's instants;
            # the open start's P[T <= -inf] is 0)
            for k in range(k0, k1):
                kk = k - k0
                mask = multi_mask[k]
                outside = 0.0
                before = 0.0
                for g in range(1, last):
                    if (mask >> g) & 1:
                        outside += (cat[kk, g - 1, tt[g - 1] - vlb[m, g - 1]] - before)
                        before = cbe[kk, g, tt[g] - vlb[m, g]]
                if (mask >> last) & 1:
                    outside += (cat[kk, last - 1, tt[last - 1] - vlb[m, last - 1]] - before)
                    pre[kk] = outside
                    lastgap[kk] = 1
                else:
                    pre[kk] = outside + 1.0 - before
                    lastgap[kk] = 0
            a = tt[last - 1] - vlb[m, last - 1]
            for b in range(nlast):
                tl = vlb[m, last] + b
                if tl <= tt[last - 1]:
                    continue
                if tl - tt[0] >= window:
                    break
                w2 = w * probs[last, b] * gw[last, a, b]
                if w2 <= 0.0:
                    continue
                for k in range(k0, k1):
                    o = pre[k - k0]
                    if lastgap[k - k0] == 1:
                        o += 1.0 - cbe[k - k0, last, b]
                    if o <= 0.0:
                        w2 = 0.0
                        break
                    w2 *= o
                if w2 > 0.0:
                    total += w2
                    if best0 == none or tt[0] < best0:
                        best0 = tt[0]
                    if tl > best1:
                        best1 = tl
        conf[m] = total
        r0[m] = best0
        r1[m] = best1
    return conf, r0, r1


def split_multi(gap_ptr: np.ndarray, gap_ev: np.ndarray, m_count: int, l_: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Separate spoilers of several gaps from the per-gap CSR.

    Returns ``(gap_ptr, gap_ev)`` without them and ``(multi_ptr, multi_ev, multi_mask)``, a CSR
    over matches of the events spoiling several gaps with their gap bitmask.
    """
    keys = np.repeat(np.arange(gap_ptr.size - 1), np.diff(gap_ptr))
    mrow, g = keys // l_, keys % l_
    o = np.lexsort((gap_ev, mrow))
    mrow_s, ev_s, g_s = mrow[o], gap_ev[o], g[o]
    first = np.concatenate([[True], (mrow_s[1:] != mrow_s[:-1]) | (ev_s[1:] != ev_s[:-1])])
    st = np.flatnonzero(first)
    counts = np.diff(np.concatenate([st, [mrow_s.size]]))
    mask = np.bitwise_or.reduceat(np.int64(1) << g_s, st) if st.size else np.zeros(0, np.int64)
    is_multi = counts > 1
    multi_m = mrow_s[st][is_multi]
    multi_ev = ev_s[st][is_multi]
    multi_mask = mask[is_multi]
    multi_ptr = np.searchsorted(multi_m, np.arange(m_count + 1), side="left").astype(np.int64)
    # drop every (match, event) pair that is multi from the per-gap lists
    pair_multi = np.repeat(is_multi, counts)
    keep_sorted = ~pair_multi
    keep = np.empty_like(keep_sorted)
    keep[o] = keep_sorted
    k2 = keys[keep]
    ev2 = gap_ev[keep]
    ptr2 = np.zeros(gap_ptr.size, np.int64)
    np.add.at(ptr2, k2 + 1, 1)
    return (np.cumsum(ptr2), ev2, multi_ptr, multi_ev.astype(np.int64),
            multi_mask.astype(np.int64))


def confidence_enumerate_many(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray,
                              lo: np.ndarray, hi: np.ndarray, woff: np.ndarray,
                              wflat: np.ndarray, cflat: np.ndarray, window: int,
                              gap_ptr: np.ndarray, gap_ev: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`confidence_enumerate` from a per-gap spoiler CSR (multi-gap ones split off)."""
    c = np.ascontiguousarray
    m_count, l_ = ev.shape
    gp, ge, mp, me, mm = split_multi(gap_ptr, gap_ev, m_count, l_)
    return confidence_enumerate(
        c(ev, np.int64), c(vlb, np.int64), c(vub, np.int64), c(lo, np.int64), c(hi, np.int64),
        c(woff, np.int64), c(wflat, np.float64), c(cflat, np.float64), int(window),
        c(gp, np.int64), c(ge, np.int64), c(mp, np.int64), c(me, np.int64), c(mm, np.int64))
