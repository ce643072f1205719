"""Candidate lookups shared by both frameworks: per-component indexes, NELT, spoilers.

:class:`ComponentIndex` lists, per pattern component, the buffered events meeting its single-event
conditions sorted by lower bound, with a suffix minimum of their upper bounds. On it:

* :func:`nelt` computes the Next Event's Latest Time of partial matches (paper 003, section 3):
  among the candidates of the next component that start after the last selected event ends
  (``c.lower > e_last.upper``), the smallest upper bound. A point of the next component later than
  it can never be the next event in any world, because that candidate surely precedes it;
* :func:`gather_spoilers` lists, per (match, gap), the unmatched candidates of the gap's component
  whose interval meets the gap's possible range ``(vlb_{g-1}, vub_g)``.

Complexity: building the index is O(n log n) (O(n) when the buffer is already ordered by lower
bound); NELT without cross conditions is O(log n) per row (binary search + suffix minimum),
otherwise proportional to the candidate pairs examined; spoilers likewise.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.imprecise.events import EventBuffer
from replaydb.operators.imprecise.predicates import PredicatePlan
from replaydb.operators.ranges import expand_ranges

BIG = np.int64(1) << 60


class ComponentIndex:
    """Per component: positions (sorted by lower bound), lower/upper bounds, suffix-min upper."""

    def __init__(self, buf: EventBuffer) -> None:
        self.pos: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.sufmin: list[np.ndarray] = []
        ordered = buf.lo.size < 2 or bool(np.all(buf.lo[1:] >= buf.lo[:-1]))
        for j in range(buf.length):
            p = np.flatnonzero(buf.comp[:, j])
            if not ordered and p.size:
                p = p[np.argsort(buf.lo[p], kind="stable")]
            lo, hi = buf.lo[p], buf.hi[p]
            self.pos.append(p)
            self.lo.append(lo)
            self.hi.append(hi)
            sm = np.minimum.accumulate(hi[::-1])[::-1] if hi.size else hi
            self.sufmin.append(np.concatenate([sm, [BIG]]))
        self.width_max = buf.width_max


def nelt(index: ComponentIndex, plan: PredicatePlan, attrs: dict[str, np.ndarray], j: int,
         prefix: np.ndarray, last_hi: np.ndarray, lo_cap: np.ndarray) -> np.ndarray:
    """NELT for component ``j`` of each partial match (row of ``prefix``, buffer positions of
    components ``0..j-1``); ``BIG`` when no candidate starts after the last event.

    Only candidates with ``lower <= lo_cap`` are examined: a larger NELT cannot reject any
    event the caller will test (their lower bounds are at most ``lo_cap``).
    """
    clo = index.lo[j]
    start = np.searchsorted(clo, last_hi, side="right")
    if not plan.cross[j]:
        return index.sufmin[j][start]
    end = np.searchsorted(clo, lo_cap, side="right")
    rows, ks = expand_ranges(start, end)
    out = np.full(prefix.shape[0], BIG, dtype=np.int64)
    if ks.size:
        cand = index.pos[j][ks]
        idx = {k: prefix[rows, k] for k in range(j)}
        idx[j] = cand
        ok = plan.cross_mask(j, attrs, idx, ks.size)
        np.minimum.at(out, rows[ok], index.hi[j][ks[ok]])
    return out


def gather_spoilers(index: ComponentIndex, plan: PredicatePlan, attrs: dict[str, np.ndarray],
                    match: np.ndarray, vlb: np.ndarray, vub: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spoilers of every gap of every match, as CSR over ``m * l + g``.

    Returns ``(gap_ptr, gap_ev, multi)``: ``gap_ev[gap_ptr[m*l+g] : gap_ptr[m*l+g+1]]`` are the
    buffer positions of the spoilers of gap ``g`` (between components ``g - 1`` and ``g``) of
    match ``m``; ``multi[m]`` is True when one event spoils several gaps of match ``m``.
    """
    m_count, l_ = match.shape
    keys_all = []
    evs_all = []
    for g in range(1, l_):
        clo = index.lo[g]
        lo_b = vlb[:, g - 1] + 1 - index.width_max
        hi_b = vub[:, g] - 1
        start = np.searchsorted(clo, lo_b, side="left")
        end = np.searchsorted(clo, hi_b, side="right")
        rows, ks = expand_ranges(start, end)
        if ks.size == 0:
            continue
        ok = index.hi[g][ks] > vlb[rows, g - 1]
        rows, ks = rows[ok], ks[ok]
        cand = index.pos[g][ks]
        ok = np.ones(cand.size, bool)
        for k in range(l_):
            ok &= match[rows, k] != cand
        rows, cand = rows[ok], cand[ok]
        if plan.cross[g] and cand.size:
            idx = {k: match[rows, k] for k in range(g)}
            idx[g] = cand
            ok = plan.cross_mask(g, attrs, idx, cand.size)
            rows, cand = rows[ok], cand[ok]
        keys_all.append(rows * l_ + g)
        evs_all.append(cand)
    if keys_all:
        keys = np.concatenate(keys_all)
        evs = np.concatenate(evs_all)
    else:
        keys = np.zeros(0, np.int64)
        evs = np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    keys, evs = keys[order], evs[order]
    gap_ptr = np.zeros(m_count * l_ + 1, np.int64)
    gap_ptr[1:] = np.cumsum(np.bincount(keys, minlength=m_count * l_))
    multi = np.zeros(m_count, bool)
    if evs.size:
        # an event listed twice for one match spoils several of its gaps
        span = int(evs.max()) + 1
        pair = np.sort(keys // l_ * span + evs)
        twice = pair[1:][pair[1:] == pair[:-1]]
        multi[twice // span] = True
    return gap_ptr, evs, multi


def spoilers_of(gap_ptr: np.ndarray, gap_ev: np.ndarray, sel: np.ndarray, l_: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The per-(match, gap) CSR of :func:`gather_spoilers` restricted to matches ``sel`` (row
    indices, in that order). O(matches kept x l + entries kept)."""
    starts = gap_ptr[sel * l_]
    ends = gap_ptr[sel * l_ + l_]
    lens = ends - starts
    idx = np.repeat(starts, lens) + (np.arange(int(lens.sum()))
                                     - np.repeat(np.cumsum(lens) - lens, lens))
    counts = np.diff(gap_ptr)[(sel[:, None] * l_ + np.arange(l_)[None, :]).ravel()]
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ptr, gap_ev[idx]
