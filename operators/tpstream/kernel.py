"""Numba-compiled core of the matcher: range-query ``findMatches`` and ``performMatch``.

The situations a batch can match against form one *table*: for every (partition, situation
stream) a segment of rows sorted by ``ts`` (= sorted by ``te``: situations of one stream are
disjoint). Rows are addressed logically (table index), as in the dissertation's ring buffer with
logical addressing: a trigger at time ``tau`` sees, per stream, the rows finished by ``tau``
(``te <= tau``) whose start lies inside the window (``ts >= tau - window``) - two binary searches
- instead of a mutable buffer. This makes the kernel a pure function of (table, triggers, plan),
which is what lets batches be matched in parallel.

``findMatches`` (Section 5.5.2): for a bound situation ``A`` and a relation ``R``, the candidates
``B`` with ``A R B`` are the intersection of one range over ``B.ts`` and one over ``B.te`` (at
most 4 binary searches); a constraint is the union of its relations' ranges (disjoint, since the
relations are exclusive), a step with several constraints intersects the unions. Ranges are
index intervals of the sorted segment.

``performMatch`` (Alg. 5.3) is an iterative depth-first search over the steps of the evaluation
order of the trigger's stream; the trigger situation is pre-set at step 0 (so every result
contains it). In low-latency mode a step may also bind the stream's one *ongoing* situation
(started, end unknown: its ``te`` is treated as later than anything, two ongoing situations are
related by their prefix group), and a result is only published if it was not already certain one
time step earlier (exactly-once, at the earliest time).

Complexity per trigger: ``O(S log n)`` for the visibility bounds plus, per partial result at a
step, ``O(sum_C |C| * 4 log n)`` for the range queries and ``O(#candidates)`` to enumerate them.
Every function here releases the GIL (``nogil``), so worker threads match concurrently.
"""

from __future__ import annotations

import numba as nb
import numpy as np

INF = np.iinfo(np.int64).max
NEG = np.iinfo(np.int64).min

GROUP_EQ = (1 << 6) | (1 << 12) | (1 << 7)
GROUP_LT = (1 << 4) | (1 << 10) | (1 << 9)
GROUP_GT = (1 << 5) | (1 << 11) | (1 << 8)

BUF_FLOOR = 4.0
"""Re-planning ignores buffer-size drift below this many situations."""
CAND_FLOOR = 1.0
"""Re-planning ignores selectivity drift worth less than one expected candidate."""

DRIFT_EVERY = 8
"""The statistics are compared with the plan's snapshot every this many triggers (a power of
two); the EMAs themselves are updated on every trigger."""

# counters layout
C_TRIGGERS, C_STEPS, C_QUERIES, C_CANDIDATES, C_RESULTS, C_DUPLICATES, C_REPLANS = range(7)
N_COUNTERS = 7


@nb.njit(cache=True, nogil=True, inline="always")
def lower_bound(a, lo, hi, v):  # noqa: ANN001, ANN201
    """First index in ``[lo, hi)`` with ``a[i] >= v`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, nogil=True, inline="always")
def upper_bound(a, lo, hi, v):  # noqa: ANN001, ANN201
    """First index in ``[lo, hi)`` with ``a[i] > v`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, nogil=True)
def classify(a_ts, a_te, b_ts, b_te):  # noqa: ANN001, ANN201
    """Relation id of ``A R B`` (ids as in :mod:`.relations`)."""
    if a_te < b_ts:
        return 0
    if a_te == b_ts:
        return 2
    if b_te < a_ts:
        return 1
    if b_te == a_ts:
        return 3
    if a_ts == b_ts:
        if a_te == b_te:
            return 12
        return 6 if a_te < b_te else 7
    if a_ts < b_ts:
        if a_te == b_te:
            return 10
        return 4 if a_te < b_te else 9
    if a_te == b_te:
        return 11
    return 8 if a_te < b_te else 5


@nb.njit(cache=True, nogil=True)
def pair_ok(mask, a_ts, a_te, a_ong, b_ts, b_te, b_ong):  # noqa: ANN001, ANN201
    """Is ``A mask B`` certain? Ongoing ends are passed as INF; two ongoing situations are
    related by their prefix group, which must lie entirely inside ``mask``."""
    if a_ong and b_ong:
        if a_ts == b_ts:
            g = GROUP_EQ
        elif a_ts < b_ts:
            g = GROUP_LT
        else:
            g = GROUP_GT
        return (g & ~mask) == 0
    r = classify(a_ts, a_te, b_ts, b_te)
    return ((mask >> r) & 1) == 1


@nb.njit(cache=True, nogil=True)
def rel_range(r, a_ts, a_te, ts, te, lo, hi):  # noqa: ANN001, ANN201
    """Index range ``[x1, x2)`` of candidates ``B`` in ``[lo, hi)`` with ``A r B``.

    One range on ``B.ts`` and one on ``B.te`` (at most 4 binary searches), intersected.
    """
    s1, s2, e1, e2 = lo, hi, lo, hi
    if r == 0:      # before: B.ts > A.te
        s1 = upper_bound(ts, lo, hi, a_te)
    elif r == 1:    # after: B.te < A.ts
        e2 = lower_bound(te, lo, hi, a_ts)
    elif r == 2:    # meets: B.ts = A.te
        s1 = lower_bound(ts, lo, hi, a_te)
        s2 = upper_bound(ts, lo, hi, a_te)
    elif r == 3:    # met-by: B.te = A.ts
        e1 = lower_bound(te, lo, hi, a_ts)
        e2 = upper_bound(te, lo, hi, a_ts)
    elif r == 4:    # overlaps: A.ts < B.ts < A.te < B.te
        s1 = upper_bound(ts, lo, hi, a_ts)
        s2 = lower_bound(ts, lo, hi, a_te)
        e1 = upper_bound(te, lo, hi, a_te)
    elif r == 5:    # overlapped-by: B.ts < A.ts < B.te < A.te
        s2 = lower_bound(ts, lo, hi, a_ts)
        e1 = upper_bound(te, lo, hi, a_ts)
        e2 = lower_bound(te, lo, hi, a_te)
    elif r == 6:    # starts: A.ts = B.ts, A.te < B.te
        s1 = lower_bound(ts, lo, hi, a_ts)
        s2 = upper_bound(ts, lo, hi, a_ts)
        e1 = upper_bound(te, lo, hi, a_te)
    elif r == 7:    # started-by: A.ts = B.ts, B.te < A.te
        s1 = lower_bound(ts, lo, hi, a_ts)
        s2 = upper_bound(ts, lo, hi, a_ts)
        e2 = lower_bound(te, lo, hi, a_te)
    elif r == 8:    # during: B.ts < A.ts, A.te < B.te
        s2 = lower_bound(ts, lo, hi, a_ts)
        e1 = upper_bound(te, lo, hi, a_te)
    elif r == 9:    # contains: A.ts < B.ts, B.te < A.te
        s1 = upper_bound(ts, lo, hi, a_ts)
        e2 = lower_bound(te, lo, hi, a_te)
    elif r == 10:   # finishes (documents): A.ts < B.ts < A.te = B.te
        s1 = upper_bound(ts, lo, hi, a_ts)
        s2 = lower_bound(ts, lo, hi, a_te)
        e1 = lower_bound(te, lo, hi, a_te)
        e2 = upper_bound(te, lo, hi, a_te)
    elif r == 11:   # finished-by: B.ts < A.ts < A.te = B.te
        s2 = lower_bound(ts, lo, hi, a_ts)
        e1 = lower_bound(te, lo, hi, a_te)
        e2 = upper_bound(te, lo, hi, a_te)
    else:           # equals
        s1 = lower_bound(ts, lo, hi, a_ts)
        s2 = upper_bound(ts, lo, hi, a_ts)
        e1 = lower_bound(te, lo, hi, a_te)
        e2 = upper_bound(te, lo, hi, a_te)
    x1 = max(s1, e1)
    x2 = min(s2, e2)
    if x2 < x1:
        x2 = x1
    return x1, x2


@nb.njit(cache=True, nogil=True)
def _prepare(k, i, orders, appl, appl_n, relm, b_ts, b_te, vis_lo, vis_hi, ts, te, rng, nr,
             tmp1, tmp2, sel_hit, sel_seen, counters):  # noqa: ANN001, ANN201
    """Candidate ranges of step ``k``: union per constraint, intersection across constraints."""
    j = orders[i, k]
    lo = vis_lo[j]
    hi = vis_hi[j]
    napp = appl_n[i, k]
    if hi <= lo:
        nr[k] = 0
        return
    if napp == 0:               # no constraint to the bound streams: cross product (fallback)
        rng[k, 0, 0] = lo
        rng[k, 0, 1] = hi
        nr[k] = 1
        return
    for a in range(napp):
        b = appl[i, k, a]
        mask = relm[b, j]
        m = 0
        hits = 0
        for r in range(13):
            if (mask >> r) & 1:
                x1, x2 = rel_range(r, b_ts[b], b_te[b], ts, te, lo, hi)
                counters[C_QUERIES] += 1
                if x2 > x1:
                    # insertion by start (ranges of exclusive relations are disjoint)
                    p = m
                    while p > 0 and tmp1[p - 1, 0] > x1:
                        tmp1[p, 0] = tmp1[p - 1, 0]
                        tmp1[p, 1] = tmp1[p - 1, 1]
                        p -= 1
                    tmp1[p, 0] = x1
                    tmp1[p, 1] = x2
                    m += 1
                    hits += x2 - x1
        sel_hit[b, j] += hits
        sel_seen[b, j] += hi - lo
        if a == 0:
            for q in range(m):
                rng[k, q, 0] = tmp1[q, 0]
                rng[k, q, 1] = tmp1[q, 1]
            nr[k] = m
        else:
            # intersect rng[k, :nr[k]] with tmp1[:m]
            p1 = 0
            p2 = 0
            c = 0
            n1 = nr[k]
            while p1 < n1 and p2 < m:
                x1 = max(rng[k, p1, 0], tmp1[p2, 0])
                x2 = min(rng[k, p1, 1], tmp1[p2, 1])
                if x2 > x1:
                    tmp2[c, 0] = x1
                    tmp2[c, 1] = x2
                    c += 1
                if rng[k, p1, 1] < tmp1[p2, 1]:
                    p1 += 1
                else:
                    p2 += 1
            for q in range(c):
                rng[k, q, 0] = tmp2[q, 0]
                rng[k, q, 1] = tmp2[q, 1]
            nr[k] = c
        if nr[k] == 0:
            return


@nb.njit(cache=True, nogil=True)
def _established_before(tau, S, rec, ts, te, known, cons_a, cons_b, cons_m):  # noqa: ANN001, ANN201
    """Was this configuration already certain at time ``tau - 1``?"""
    tp = tau - 1
    for j in range(S):
        if known[rec[j]] > tp:
            return False
    for c in range(len(cons_a)):
        ra = rec[cons_a[c]]
        rb = rec[cons_b[c]]
        a_ong = te[ra] > tp
        b_ong = te[rb] > tp
        ae = INF if a_ong else te[ra]
        be = INF if b_ong else te[rb]
        if not pair_ok(cons_m[c], ts[ra], ae, a_ong, ts[rb], be, b_ong):
            return False
    return True


@nb.njit(cache=True, nogil=True)
def match_kernel(ts, te, known, seg_lo, seg_hi, S,
                 tr_tau, tr_p, tr_stream, tr_rec, tr_kind, start,
                 relm, orders, appl, appl_n, cons_a, cons_b, cons_m,
                 window, ll,
                 ema_buf, buf_seen, ema_sel, snap_buf, snap_sel, alpha, threshold, adaptive,
                 nrel, paper, out_idx, out_tr, n_out, max_out, counters):  # noqa: ANN001, ANN201
    """Process triggers ``start..`` (sorted by tau, partition, kind, stream).

    With ``adaptive``, a drift of the statistics past the threshold re-plans on the spot
    (:func:`replan`: ``orders``, ``appl``, ``appl_n`` and the snapshots are updated in place).
    Returns ``(next_trigger, out_idx, out_tr, n_out, status)``; status 0 = all done,
    2 = ``max_out`` results reached.
    """
    ntr = len(tr_tau)
    MAXR = 13 * S + 2
    rec = np.full(S, -1, np.int64)
    b_ts = np.zeros(S, np.int64)
    b_te = np.zeros(S, np.int64)
    b_ong = np.zeros(S, np.bool_)
    vis_lo = np.zeros(S, np.int64)
    vis_hi = np.zeros(S, np.int64)
    ong_rec = np.full(S, -1, np.int64)
    excl_fin = np.zeros(S, np.bool_)
    excl_ong = np.zeros(S, np.bool_)
    rng = np.zeros((S, MAXR, 2), np.int64)
    nr = np.zeros(S, np.int64)
    cur_r = np.zeros(S, np.int64)
    cur_x = np.zeros(S, np.int64)
    ong_pend = np.zeros(S, np.bool_)
    tmp1 = np.zeros((MAXR, 2), np.int64)
    tmp2 = np.zeros((MAXR, 2), np.int64)
    sel_hit = np.zeros((S, S), np.float64)
    sel_seen = np.zeros((S, S), np.float64)
    prev_tau = NEG
    prev_p = -1
    if start > 0:
        # resuming after a re-plan: restore the exclusions of the current time step
        prev_tau = tr_tau[start - 1]
        prev_p = tr_p[start - 1]
        q = start - 1
        while q >= 0 and tr_tau[q] == prev_tau and tr_p[q] == prev_p:
            if tr_kind[q] == 0:
                excl_fin[tr_stream[q]] = True
            else:
                excl_ong[tr_stream[q]] = True
            q -= 1
    for ti in range(start, ntr):
        tau = tr_tau[ti]
        p = tr_p[ti]
        i = tr_stream[ti]
        x = tr_rec[ti]
        kind = tr_kind[ti]
        if tau != prev_tau or p != prev_p:
            excl_fin[:] = False
            excl_ong[:] = False
            prev_tau = tau
            prev_p = p
        counters[C_TRIGGERS] += 1
        lowts = tau - window if tau > NEG + window else NEG
        base = p * S
        for j in range(S):
            lo = seg_lo[base + j]
            hi = seg_hi[base + j]
            v_lo = lower_bound(ts, lo, hi, lowts)
            h = upper_bound(te, lo, hi, tau)
            vh = h
            if excl_fin[j] and vh > v_lo and te[vh - 1] == tau:
                vh -= 1
            vis_lo[j] = v_lo
            vis_hi[j] = vh if vh > v_lo else v_lo
            ong_rec[j] = -1
            if ll and h < hi and not excl_ong[j]:
                if known[h] <= tau and ts[h] >= lowts:
                    ong_rec[j] = h
            # EMA of the (windowed) buffer size
            size = vis_hi[j] - vis_lo[j]
            if buf_seen[j]:
                ema_buf[j] = alpha * size + (1.0 - alpha) * ema_buf[j]
            else:
                ema_buf[j] = size
                buf_seen[j] = True
        if ts[x] >= lowts:
            x_ong = te[x] > tau
            rec[:] = -1
            rec[i] = x
            b_ts[i] = ts[x]
            b_te[i] = INF if x_ong else te[x]
            b_ong[i] = x_ong
            sel_hit[:, :] = 0.0
            sel_seen[:, :] = 0.0
            level = 1
            if S > 1:
                _prepare(1, i, orders, appl, appl_n, relm, b_ts, b_te, vis_lo, vis_hi, ts, te,
                         rng, nr, tmp1, tmp2, sel_hit, sel_seen, counters)
                cur_r[1] = 0
                cur_x[1] = rng[1, 0, 0] if nr[1] > 0 else 0
                ong_pend[1] = ll and ong_rec[orders[i, 1]] >= 0
            while True:
                if level == S:
                    # publish
                    dup = False
                    if ll:
                        dup = _established_before(tau, S, rec, ts, te, known, cons_a, cons_b,
                                                  cons_m)
                    if dup:
                        counters[C_DUPLICATES] += 1
                    else:
                        if n_out >= out_idx.shape[0]:
                            grown = np.empty((out_idx.shape[0] * 2 + 16, S), np.int64)
                            grown[:n_out] = out_idx[:n_out]
                            out_idx = grown
                            grown_t = np.empty(out_idx.shape[0], np.int64)
                            grown_t[:n_out] = out_tr[:n_out]
                            out_tr = grown_t
                        for j in range(S):
                            out_idx[n_out, j] = rec[j]
                        out_tr[n_out] = ti
                        n_out += 1
                        counters[C_RESULTS] += 1
                    level -= 1
                    if level == 0:
                        break
                    continue
                # next candidate at this level
                j = orders[i, level]
                cand = -1
                cand_ong = False
                while cur_r[level] < nr[level]:
                    if cur_x[level] < rng[level, cur_r[level], 1]:
                        cand = cur_x[level]
                        cur_x[level] += 1
                        break
                    cur_r[level] += 1
                    if cur_r[level] < nr[level]:
                        cur_x[level] = rng[level, cur_r[level], 0]
                if cand < 0 and ong_pend[level]:
                    ong_pend[level] = False
                    o = ong_rec[j]
                    ok = True
                    for a in range(appl_n[i, level]):
                        b = appl[i, level, a]
                        if not pair_ok(relm[b, j], b_ts[b], b_te[b], b_ong[b], ts[o], INF, True):
                            ok = False
                            break
                    if ok:
                        cand = o
                        cand_ong = True
                if cand < 0:
                    rec[j] = -1
                    level -= 1
                    if level == 0:
                        break
                    continue
                counters[C_CANDIDATES] += 1
                rec[j] = cand
                b_ts[j] = ts[cand]
                b_te[j] = INF if cand_ong else te[cand]
                b_ong[j] = cand_ong
                level += 1
                if level < S:
                    counters[C_STEPS] += 1
                    _prepare(level, i, orders, appl, appl_n, relm, b_ts, b_te, vis_lo, vis_hi,
                             ts, te, rng, nr, tmp1, tmp2, sel_hit, sel_seen, counters)
                    cur_r[level] = 0
                    cur_x[level] = rng[level, 0, 0] if nr[level] > 0 else 0
                    ong_pend[level] = ll and ong_rec[orders[i, level]] >= 0
                if n_out >= max_out:
                    break
            # per-constraint selectivity EMA (one observation per constraint and trigger)
            for a in range(S):
                for b in range(S):
                    if sel_seen[a, b] > 0:
                        obs = sel_hit[a, b] / sel_seen[a, b]
                        ema_sel[a, b] = alpha * obs + (1.0 - alpha) * ema_sel[a, b]
        # this trigger's change is now processed: later triggers of the same step exclude it
        if kind == 0:
            excl_fin[i] = True
        else:
            excl_ong[i] = True
        if n_out >= max_out:
            return ti + 1, out_idx, out_tr, n_out, 2
        if adaptive and (counters[C_TRIGGERS] & (DRIFT_EVERY - 1)) == 0:
            drift = False
            for j in range(S):
                if abs(ema_buf[j] - snap_buf[j]) > threshold * max(snap_buf[j], BUF_FLOOR):
                    drift = True
            for c in range(len(cons_a)):
                a = cons_a[c]
                b = cons_b[c]
                # the selectivity's effect: expected candidates, in both directions
                for d in range(2):
                    x = a if d == 0 else b      # bound stream
                    y = b if d == 0 else a      # candidate stream
                    cur = ema_sel[x, y] * ema_buf[y]
                    old = snap_sel[x, y] * snap_buf[y]
                    if abs(cur - old) > threshold * max(old, CAND_FLOOR):
                        drift = True
            if drift:
                replan(S, relm, nrel, ema_buf, ema_sel, paper, orders, appl, appl_n)
                snap_buf[:] = ema_buf
                snap_sel[:, :] = ema_sel
                counters[C_REPLANS] += 1
    return ntr, out_idx, out_tr, n_out, 0


@nb.njit(cache=True, nogil=True)
def plan_dp(i, S, relm, nrel, buf, sel, paper):  # noqa: ANN001, ANN201
    """Cheapest evaluation order for trigger stream ``i`` (Eq. 5.2-5.5), exact DP over subsets.

    ``|Res|`` of a set of bound streams is ``prod(|Buf_j|) * prod(sel of constraints inside)``
    (the pre-set trigger counts 1) and ``C_fM = sum over applicable constraints of
    |C| * 4 * log2 |Buf|``. A step costs ``|Res_prev| * |Res_new| + C_fM`` with ``paper`` (Eq.
    5.2 as printed), else ``|Res_prev| * C_fM + |Res_new|`` (findMatches runs once per partial
    result of the previous step, each new partial result is produced once). Only streams with a
    constraint to the bound set may be added (no cross products); when none is left but streams
    remain (disconnected pattern), any stream may be added (cross-product fallback).
    Returns ``(order, cost)``.
    """
    full = (1 << S) - 1
    n = 1 << S
    dp = np.full(n, np.inf)
    res = np.zeros(n)
    parent = np.full(n, -1, np.int64)
    start = 1 << i
    dp[start] = 0.0
    res[start] = 1.0
    # iterate masks in increasing popcount order (increasing numeric order works: supersets larger)
    for mask in range(n):
        if dp[mask] == np.inf or (mask & start) == 0:
            continue
        # connected extensions available?
        any_conn = False
        for j in range(S):
            if (mask >> j) & 1:
                continue
            for b in range(S):
                if (mask >> b) & 1 and relm[b, j] != 0:
                    any_conn = True
                    break
            if any_conn:
                break
        for j in range(S):
            if (mask >> j) & 1:
                continue
            conn = False
            f = buf[j] if buf[j] > 1.0 else 1.0
            cfm = 0.0
            lg = np.log2(f if f > 2.0 else 2.0)
            for b in range(S):
                if (mask >> b) & 1 and relm[b, j] != 0:
                    conn = True
                    f *= sel[b, j]
                    cfm += nrel[b, j] * 4.0 * lg
            if any_conn and not conn:
                continue
            nm = mask | (1 << j)
            r_new = res[mask] * f
            if paper:
                cost = dp[mask] + res[mask] * r_new + cfm
            else:
                cost = dp[mask] + res[mask] * cfm + r_new
            if cost < dp[nm]:
                dp[nm] = cost
                res[nm] = r_new
                parent[nm] = j
    order = np.empty(S, np.int64)
    mask = full
    for k in range(S - 1, 0, -1):
        j = parent[mask]
        order[k] = j
        mask &= ~(1 << j)
    order[0] = i
    return order, dp[full]


@nb.njit(cache=True, nogil=True)
def build_appl(S, relm, orders, appl, appl_n):  # noqa: ANN001, ANN201
    """For every order and step, the earlier streams with a constraint to the step's stream."""
    for i in range(S):
        for k in range(S):
            j = orders[i, k]
            n = 0
            for q in range(k):
                b = orders[i, q]
                if relm[b, j] != 0:
                    appl[i, k, n] = b
                    n += 1
            appl_n[i, k] = n


@nb.njit(cache=True, nogil=True)
def replan(S, relm, nrel, buf, sel, paper, orders, appl, appl_n):  # noqa: ANN001, ANN201
    """Recompute every stream's evaluation order from the statistics (in place)."""
    for i in range(S):
        o, _ = plan_dp(i, S, relm, nrel, buf, sel, paper)
        orders[i, :] = o
    build_appl(S, relm, orders, appl, appl_n)


@nb.njit(cache=True, nogil=True)
def counting_order(pid, lo, span):  # noqa: ANN001, ANN201
    """Stable counting sort of events by partition id (ids in ``[lo, lo + span)``).

    Returns ``(order, group_starts, group_ids)``: the sorted permutation, where each present
    partition's events start in it, and those partitions' ids. O(n + span), two passes.
    """
    n = len(pid)
    counts = np.zeros(span, np.int64)
    for i in range(n):
        counts[pid[i] - lo] += 1
    offs = np.empty(span, np.int64)
    present = 0
    run = 0
    for k in range(span):
        offs[k] = run
        run += counts[k]
        if counts[k]:
            present += 1
    starts = np.empty(present, np.int64)
    ids = np.empty(present, np.int64)
    q = 0
    for k in range(span):
        if counts[k]:
            starts[q] = offs[k]
            ids[q] = k + lo
            q += 1
    order = np.empty(n, np.int64)
    for i in range(n):
        k = pid[i] - lo
        order[offs[k]] = i
        offs[k] += 1
    return order, starts, ids


@nb.njit(cache=True, nogil=True)
def partial_positions(t_sorted, first_pos, last_pos, tau):  # noqa: ANN001, ANN201
    """For each (run, tau): one past the last position in ``[first, last]`` with ``t <= tau``."""
    n = len(first_pos)
    out = np.empty(n, np.int64)
    for q in range(n):
        f = first_pos[q]
        if f < 0:
            out[q] = -1
            continue
        out[q] = upper_bound(t_sorted, f, last_pos[q] + 1, tau[q])
    return out


@nb.njit(cache=True, nogil=True)
def range_prims(v, lo, hi, func, seed):  # noqa: ANN001, ANN201
    """Primitives of ``v[lo:hi]`` per row: func 0 count, 1 sum, 2 min, 3 max (nulls = NaN).

    Sums are strictly sequential, left to right, starting from ``seed[q]`` (the sum of the
    situation's earlier events, 0.0 for none): ``((seed + v[lo]) + v[lo+1]) + ...``. A float
    sum then depends only on the situation's events, never on where the input batches end -
    a run split over two batches gets the same bits as one seen whole (pairwise summation,
    as in ``np.add.reduce``, would not)."""
    n = len(lo)
    a = np.zeros(n, np.float64)
    b = np.zeros(n, np.int64)
    for q in range(n):
        cnt = 0
        acc = seed[q]
        mn = np.inf
        mx = -np.inf
        for x in range(lo[q], hi[q]):
            val = v[x]
            if val != val:
                continue
            cnt += 1
            acc += val
            if val < mn:
                mn = val
            if val > mx:
                mx = val
        b[q] = cnt
        if func == 0:
            a[q] = cnt
        elif func == 1:
            a[q] = acc
        elif func == 2:
            a[q] = mn if cnt else np.nan
        else:
            a[q] = mx if cnt else np.nan
    return a, b
