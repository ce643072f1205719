"""Turn candidate signatures of the event-based framework into reported matches.

For each candidate (a row of buffer positions in pattern order): valid intervals (three passes),
the NELT test of skip-till-next (when the matcher has not applied it already), the spoilers of
each gap, then the confidence and tightest time range - compiled float kernels for the common
case, once per match shape (:mod:`.memo`), the exact reference (:mod:`.confidence`) in exact
mode; when one event spoils several gaps of a
skip-till-next match, the point matches inside the valid intervals are enumerated (compiled) and
weighted by Eq. 2, as the paper proposes for event-based skip-till-next.
Candidates of confidence 0 (no world returns them) are dropped.

Complexity: O(M * l) vectorized for the intervals and NELT, plus the confidence DP per match
(see :mod:`.kernels`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from replaydb.operators.imprecise.candidates import (
    ComponentIndex,
    gather_spoilers,
    nelt,
    spoilers_of,
)
from replaydb.operators.imprecise.confidence import (
    chain_confidence,
    fraction_text,
    next_confidence,
    restrict,
)
from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.events import EventBuffer
from replaydb.operators.imprecise.intervals import valid_intervals
from replaydb.operators.imprecise.kernels import confidence_enumerate_many
from replaydb.operators.imprecise.memo import confidence_shared
from replaydb.operators.imprecise.predicates import PredicatePlan


@dataclass
class Finalized:
    """Reported matches: buffer positions, confidence, exact text (or None), range."""

    pos: np.ndarray  # (M, l)
    confidence: np.ndarray
    exact: list[str] | None
    t_start: np.ndarray
    t_end: np.ndarray

    @staticmethod
    def empty(l_: int, exact: bool) -> Finalized:
        z = np.zeros(0, np.int64)
        return Finalized(np.zeros((0, l_), np.int64), np.zeros(0), [] if exact else None, z, z)


def nelt_filter(buf: EventBuffer, index: ComponentIndex, plan: PredicatePlan,
                match: np.ndarray) -> np.ndarray:
    """Mask of the candidates passing the NELT test at every step (skip-till-next)."""
    ok = np.ones(match.shape[0], bool)
    for j in range(1, match.shape[1]):
        lo_j = buf.lo[match[:, j]]
        n = nelt(index, plan, buf.attrs, j, match[:, :j], buf.hi[match[:, j - 1]], lo_j)
        ok &= lo_j <= n
    return ok


def finalize(buf: EventBuffer, index: ComponentIndex, plan: PredicatePlan,
             config: ImpreciseConfig, match: np.ndarray, *, nelt_done: bool) -> Finalized:
    """Confidence and range of candidate matches; drops those of confidence 0."""
    l_ = config.length
    if match.shape[0] == 0:
        return Finalized.empty(l_, config.exact)
    vlb, _, vub, ok = valid_intervals(buf.lo[match], buf.hi[match], config.window)
    nxt = config.skip_till_next
    if nxt and not nelt_done:
        ok &= nelt_filter(buf, index, plan, match)
    match, vlb, vub = match[ok], vlb[ok], vub[ok]
    m_count = match.shape[0]
    if nxt:
        gap_ptr, gap_ev, multi = gather_spoilers(index, plan, buf.attrs, match, vlb, vub)
    else:
        gap_ptr, gap_ev, multi = (np.zeros(1, np.int64), np.zeros(0, np.int64),
                                  np.zeros(m_count, bool))
    exact_txt: list[str] | None = None
    if config.exact:
        conf = np.zeros(m_count)
        r0 = np.full(m_count, -1, np.int64)
        r1 = np.full(m_count, -1, np.int64)
        exact_txt = []
        for m in range(m_count):
            c, a, b = _exact(buf, config, match[m], vlb[m], vub[m], gap_ptr, gap_ev, m)
            conf[m] = float(c)
            exact_txt.append(fraction_text(c))
            if a is not None:
                r0[m], r1[m] = a, b
    else:
        single = ~multi
        if multi.all():
            conf, r0, r1 = (np.zeros(m_count), np.zeros(m_count, np.int64),
                            np.zeros(m_count, np.int64))
        else:
            sub_ptr, sub_ev = (spoilers_of(gap_ptr, gap_ev, np.flatnonzero(single), l_)
                               if multi.any() else (gap_ptr, gap_ev))
            c1, a1, b1 = confidence_shared(match[single], vlb[single], vub[single], buf.lo,
                                           buf.hi, buf.woff, buf.wflat, buf.cflat,
                                           config.window, nxt, sub_ptr, sub_ev)
            conf, r0, r1 = (np.zeros(m_count), np.zeros(m_count, np.int64),
                            np.zeros(m_count, np.int64))
            conf[single], r0[single], r1[single] = c1, a1, b1
        if multi.any():
            # one event spoils several gaps: enumerate the point matches (compiled)
            sub_ptr, sub_ev = spoilers_of(gap_ptr, gap_ev, np.flatnonzero(multi), l_)
            c2, a2, b2 = confidence_enumerate_many(match[multi], vlb[multi], vub[multi], buf.lo,
                                                   buf.hi, buf.woff, buf.wflat, buf.cflat,
                                                   config.window, sub_ptr, sub_ev)
            conf[multi], r0[multi], r1[multi] = c2, a2, b2
    keep = conf > 0
    if exact_txt is not None:
        exact_txt = [s for s, k in zip(exact_txt, keep) if k]
    return Finalized(match[keep], conf[keep], exact_txt, r0[keep], r1[keep])


def _exact(buf: EventBuffer, config: ImpreciseConfig, row: np.ndarray, vlb: np.ndarray,
           vub: np.ndarray, gap_ptr: np.ndarray, gap_ev: np.ndarray, m: int
           ) -> tuple[Fraction, int | None, int | None]:
    """Exact rational confidence and range of one match (the reference implementation)."""
    pts_of = buf.exact_points
    comp_pts = [restrict(pts_of(int(p)), int(a), int(b)) for p, a, b in zip(row, vlb, vub)]
    if any(not pts for pts in comp_pts):
        return Fraction(0), None, None
    if not config.skip_till_next:
        return chain_confidence(comp_pts, config.window)
    l_ = config.length
    gaps: dict[int, set[int]] = {}
    for g in range(1, l_):
        for c in gap_ev[gap_ptr[m * l_ + g]: gap_ptr[m * l_ + g + 1]]:
            gaps.setdefault(int(c), set()).add(g)
    spoilers = [(pts_of(c), frozenset(gs)) for c, gs in gaps.items()]
    return next_confidence(comp_pts, config.window, spoilers, config.max_enumeration)
