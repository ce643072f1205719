"""Event-based query-order evaluation (paper 003, 4.1 and C.1, with the sorting of 4.3 / C.3).

Events of every component are buffered until it is safe to evaluate the matches that begin with a
given first-component event ``a`` (the *anchor*): once every event that can share a world-match
with ``a`` has arrived (``a.upper + W - 1 < horizon``, see the operator). Then the pattern is
evaluated from ``E_1`` to ``E_l`` over the buffered events - exactly the effect of sorting the
input into query order - extending partial matches with the one-pass incremental ``ext``:

    vlb' = max(vlb + 1, e.lower) <= e.upper                       (order)
    P'   = min(P, e.upper - j)        (P_j = min_k (hi_k - k), 1-based; rub_1 = P_l + 1)
    vlb' + (l - j) - P' <= W                                       (window, looking ahead)

plus distinct events, the cross conditions attached to the component and, for skip-till-next,
``e.lower <= NELT(partial match)``. Candidates of each step are found by binary search in the
component's lower-bound order (``vlb + 1 - U <= e.lower <= P + W - (l - j)``) and all anchors
ready at once are extended together, vectorized over (partial match, candidate) pairs.

Complexity: proportional to the candidate pairs examined per step, in NumPy.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.imprecise.candidates import ComponentIndex, nelt
from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.events import EventBuffer
from replaydb.operators.imprecise.predicates import PredicatePlan
from replaydb.operators.ranges import expand_ranges

CHUNK = 8192
"""Anchors extended together (bounds the pair arrays)."""


def query_order_matches(buf: EventBuffer, index: ComponentIndex, plan: PredicatePlan,
                        config: ImpreciseConfig, anchors: np.ndarray) -> np.ndarray:
    """Candidate matches (rows of buffer positions) beginning with the given anchor positions."""
    l_ = config.length
    w = config.window
    if anchors.size == 0 or l_ > w:
        return np.zeros((0, l_), np.int64)
    out = []
    for c0 in range(0, anchors.size, CHUNK):
        out.append(_extend(buf, index, plan, config, anchors[c0: c0 + CHUNK]))
    return np.concatenate(out) if len(out) > 1 else out[0]


def _extend(buf: EventBuffer, index: ComponentIndex, plan: PredicatePlan,
            config: ImpreciseConfig, anchors: np.ndarray) -> np.ndarray:
    l_ = config.length
    w = config.window
    rows = anchors[:, None].astype(np.int64)
    vlb = buf.lo[anchors].copy()
    p = buf.hi[anchors] - 1
    keep = vlb + (l_ - 1) - p <= w
    rows, vlb, p = rows[keep], vlb[keep], p[keep]
    nxt = config.skip_till_next
    for j in range(1, l_):
        need = l_ - 1 - j
        clo, chi, cpos = index.lo[j], index.hi[j], index.pos[j]
        lo_cap = p + w - need
        start = np.searchsorted(clo, vlb + 1 - index.width_max, side="left")
        end = np.searchsorted(clo, lo_cap, side="right")
        if nxt:
            n = nelt(index, plan, buf.attrs, j, rows, buf.hi[rows[:, j - 1]], lo_cap)
            end = np.minimum(end, np.searchsorted(clo, n, side="right"))
        r, k = expand_ranges(start, end)
        if k.size == 0:
            return np.zeros((0, l_), np.int64)
        e_hi = chi[k]
        ok = e_hi >= vlb[r] + 1
        r, k, e_hi = r[ok], k[ok], e_hi[ok]
        vlb_new = np.maximum(vlb[r] + 1, clo[k])
        p_new = np.minimum(p[r], e_hi - j - 1)
        ok = vlb_new + need - p_new <= w
        cand = cpos[k]
        for q in range(j):
            ok &= rows[r, q] != cand
        r, cand, vlb_new, p_new = r[ok], cand[ok], vlb_new[ok], p_new[ok]
        if plan.cross[j] and cand.size:
            idx = {q: rows[r, q] for q in range(j)}
            idx[j] = cand
            ok = plan.cross_mask(j, buf.attrs, idx, cand.size)
            r, cand, vlb_new, p_new = r[ok], cand[ok], vlb_new[ok], p_new[ok]
        rows = np.concatenate([rows[r], cand[:, None]], axis=1)
        vlb, p = vlb_new, p_new
        if rows.shape[0] == 0:
            return np.zeros((0, l_), np.int64)
    return rows
