"""Point-based evaluation framework (paper 003, section 3 and appendix B).

1. **Stream expansion.** Every event is expanded into *point events*, one per instant of its
   interval carrying that instant's probability. Points are released in time order once no unseen
   event can contribute a point at their instant (instants below the horizon, the paper's
   ``t_emit = now.lower - U_max``).
2. **Pattern matching.** An ordinary skip-till-any engine runs over the point stream: a run is a
   point partial match ``(e_1^{t_1}, ..., e_j^{t_j})``; a point ``e^t`` extends it when ``e``
   matches component ``j + 1`` (type, conditions), ``t > t_j``, ``t - t_1 < W`` and - the one
   change the paper makes to ``next()`` - ``e`` is not already in the run. For skip-till-next the
   engine additionally stops at the partial match's NELT: points later than it are not taken.
   Released points are processed a block of instants at a time: the runs and the block's points
   are joined component by component (new runs of the block take later points of the same block),
   which yields exactly the point matches an event-at-a-time engine would.
3. **Match collapsing.** Point matches are grouped by signature as they are produced and
   reported once final. Confidence by Eq. 1 (skip-till-any: the sum of the point matches'
   probabilities) or Eq. 2 (skip-till-next: each point match weighted by the probability that no
   spoiler - an unmatched candidate of a component - falls strictly inside a gap it is a
   candidate for). A point match's spoilers all start before its last point, so they are known
   when it is produced and its weight is computed then: for a spoiler of the gaps ``G_c`` it is
   the spoiler's mass outside those (disjoint) gaps. Exact mode keeps the point matches and
   evaluates Eq. 3 (one memoized factor per gap) and Eq. 4 (enumerating the points of events that
   spoil several gaps) in rationals. Time range over point matches of positive weight.

Complexity: the number of point runs, ``O((R W U)^l)`` in the paper's worst case - the reason the
event-based framework exists.
"""

from __future__ import annotations

import numpy as np

from replaydb.errors import StateCapExceeded
from replaydb.operators.imprecise.candidates import ComponentIndex, gather_spoilers
from replaydb.operators.imprecise.candidates import nelt as nelt_of
from replaydb.operators.imprecise.confidence import collapse_point_matches, fraction_text
from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.events import EventBuffer
from replaydb.operators.imprecise.finalize import Finalized
from replaydb.operators.imprecise.predicates import PredicatePlan
from replaydb.operators.ranges import expand_ranges

BLOCK = 1024
"""Instants released and joined together (fewer when intervals are wide: the point runs and
point matches of a block grow with the points per instant)."""


def _cdf(buf: EventBuffer, pos: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P[T_e <= x] for events at buffer positions ``pos`` (vectorized)."""
    lo, hi, woff = buf.lo[pos], buf.hi[pos], buf.woff[pos]
    n = hi - lo + 1
    xc = np.clip(x, lo - 1, hi)
    uni = (xc - lo + 1) / n
    if (woff >= 0).any():
        k = np.clip(woff + xc - lo, 0, max(buf.cflat.size - 1, 0))
        w = np.where(xc < lo, 0.0, buf.cflat[k] if buf.cflat.size else 0.0)
        w = np.where(xc >= hi, 1.0, w)
        return np.where(woff >= 0, w, uni)
    return uni


def _point_prob(buf: EventBuffer, pos: np.ndarray, t: np.ndarray) -> np.ndarray:
    lo, hi, woff = buf.lo[pos], buf.hi[pos], buf.woff[pos]
    uni = 1.0 / (hi - lo + 1)
    if (woff >= 0).any():
        k = np.clip(woff + t - lo, 0, max(buf.wflat.size - 1, 0))
        return np.where(woff >= 0, buf.wflat[k] if buf.wflat.size else 0.0, uni)
    return uni


class PointEngine:
    """Point runs per number of matched components, and the point matches not yet collapsed."""

    def __init__(self, config: ImpreciseConfig, plan: PredicatePlan) -> None:
        self.config = config
        self.plan = plan
        l_ = config.length
        self.next_instant: int | None = None
        self.runs_uid = [np.zeros((0, j + 1), np.int64) for j in range(l_ - 1)]
        self.runs_t = [np.zeros((0, j + 1), np.int64) for j in range(l_ - 1)]
        self.runs_p = [np.zeros(0) for _ in range(l_ - 1)]
        self.done_uid = np.zeros((0, l_), np.int64)
        self.done_t = np.zeros((0, l_), np.int64)
        self.done_p = np.zeros(0)
        self.done_key = np.zeros(0, np.int64)
        self.sig_uid = np.zeros((0, l_), np.int64)
        self.sig_w = np.zeros(0)
        self.sig_t0 = np.zeros(0, np.int64)
        self.sig_t1 = np.zeros(0, np.int64)
        self.sig_key = np.zeros(0, np.int64)
        self.points_released = 0

    @property
    def size(self) -> int:
        return int(sum(r.shape[0] for r in self.runs_uid) + self.done_uid.shape[0]
                   + self.sig_uid.shape[0])

    def referenced(self) -> np.ndarray:
        parts = [r.ravel() for r in self.runs_uid] + [self.done_uid.ravel(),
                                                      self.sig_uid.ravel()]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    # ------------------------------------------------------------------ expansion + matching
    def release(self, buf: EventBuffer, until: int, cap: int | None) -> None:
        """Process every instant below ``until`` not processed yet."""
        if len(buf) == 0:
            if self.next_instant is not None:
                self.next_instant = max(self.next_instant, until)
            return
        if self.next_instant is None:
            # unseen events start at or after ``until``: never skip past it
            self.next_instant = int(min(int(buf.lo.min()), until))
        index: ComponentIndex | None = None
        while self.next_instant < until:
            a = self.next_instant
            span = max(8, min(BLOCK, (8 * BLOCK) // (buf.width_max + 1)))
            b = int(min(until, a + span))
            sel = np.flatnonzero((buf.lo < b) & (buf.hi >= a))
            if sel.size:
                if index is None and self.config.skip_till_next:
                    index = ComponentIndex(buf)
                self._block(buf, index, sel, a, b, cap)
            else:
                # jump over empty stretches
                later = buf.lo[buf.lo >= b]
                if later.size:
                    b = int(min(until, max(b, int(later.min()))))
                else:
                    b = until
            self._expire(b)
            self.next_instant = b

    def _block(self, buf: EventBuffer, index: ComponentIndex | None, sel: np.ndarray, a: int,
               b: int, cap: int | None) -> None:
        cfg = self.config
        l_ = cfg.length
        w = cfg.window
        lo = np.maximum(buf.lo[sel], a)
        hi = np.minimum(buf.hi[sel], b - 1)
        rows, ks = expand_ranges(np.zeros(sel.size, np.int64), hi - lo + 1)
        ppos = sel[rows]
        pt = lo[rows] + ks
        order = np.argsort(pt, kind="stable")
        ppos, pt = ppos[order], pt[order]
        pp = _point_prob(buf, ppos, pt)
        live = pp > 0
        ppos, pt, pp = ppos[live], pt[live], pp[live]
        self.points_released += int(ppos.size)
        puid = buf.uid[ppos]
        pcomp = buf.comp[ppos]
        new_uid: list[np.ndarray] = [np.zeros((0, j + 1), np.int64) for j in range(l_)]
        new_t: list[np.ndarray] = [np.zeros((0, j + 1), np.int64) for j in range(l_)]
        new_p: list[np.ndarray] = [np.zeros(0) for _ in range(l_)]
        c0 = pcomp[:, 0]
        new_uid[0], new_t[0], new_p[0] = puid[c0, None], pt[c0, None], pp[c0]
        for j in range(0, l_ - 1):
            src_uid = np.concatenate([self.runs_uid[j], new_uid[j]])
            src_t = np.concatenate([self.runs_t[j], new_t[j]])
            src_p = np.concatenate([self.runs_p[j], new_p[j]])
            if src_uid.shape[0] == 0:
                continue
            cj = np.flatnonzero(pcomp[:, j + 1])
            if cj.size == 0:
                continue
            ct = pt[cj]
            last = src_t[:, j]
            first = src_t[:, 0]
            start = np.searchsorted(ct, last, side="right")
            end = np.searchsorted(ct, first + w - 1, side="right")
            if cfg.skip_till_next:
                assert index is not None
                src_pos = buf.positions(src_uid)
                nel = nelt_of(index, self.plan, buf.attrs, j + 1, src_pos,
                              buf.hi[src_pos[:, j]], np.full(src_pos.shape[0], b - 1))
                end = np.minimum(end, np.searchsorted(ct, nel, side="right"))
            r, k = expand_ranges(start, end)
            if k.size == 0:
                continue
            q = cj[k]
            ok = np.ones(k.size, bool)
            for c in range(j + 1):
                ok &= src_uid[r, c] != puid[q]
            r, q = r[ok], q[ok]
            if self.plan.cross[j + 1] and q.size:
                src_pos = buf.positions(src_uid[r])
                idx = {c: src_pos[:, c] for c in range(j + 1)}
                idx[j + 1] = ppos[q]
                ok = self.plan.cross_mask(j + 1, buf.attrs, idx, q.size)
                r, q = r[ok], q[ok]
            new_uid[j + 1] = np.concatenate([src_uid[r], puid[q, None]], axis=1)
            new_t[j + 1] = np.concatenate([src_t[r], pt[q, None]], axis=1)
            new_p[j + 1] = src_p[r] * pp[q]
            if cap is not None and j + 1 < l_ - 1 and new_uid[j + 1].shape[0] + self.size > cap:
                raise StateCapExceeded("imprecise pattern (point-based)", "point runs",
                                       new_uid[j + 1].shape[0] + self.size, cap, "state_cap")
        for j in range(l_ - 1):
            if new_uid[j].shape[0]:
                self.runs_uid[j] = np.concatenate([self.runs_uid[j], new_uid[j]])
                self.runs_t[j] = np.concatenate([self.runs_t[j], new_t[j]])
                self.runs_p[j] = np.concatenate([self.runs_p[j], new_p[j]])
        done = new_uid[l_ - 1]
        if done.shape[0] and not cfg.exact:
            self._aggregate(buf, index, done, new_t[l_ - 1], new_p[l_ - 1])
        elif done.shape[0]:
            anchor_hi = buf.hi[buf.positions(done[:, 0])]
            self.done_uid = np.concatenate([self.done_uid, done])
            self.done_t = np.concatenate([self.done_t, new_t[l_ - 1]])
            self.done_p = np.concatenate([self.done_p, new_p[l_ - 1]])
            self.done_key = np.concatenate([self.done_key, anchor_hi + w - 1])

    def _expire(self, b: int) -> None:
        """Drop runs that cannot complete with points at or after instant ``b``."""
        l_ = self.config.length
        for j in range(l_ - 1):
            if self.runs_t[j].shape[0] == 0:
                continue
            # remaining l-1-j points need instants >= b, the last one >= b + l - 2 - j
            ok = b + (l_ - 2 - j) - self.runs_t[j][:, 0] < self.config.window
            if not ok.all():
                self.runs_uid[j] = self.runs_uid[j][ok]
                self.runs_t[j] = self.runs_t[j][ok]
                self.runs_p[j] = self.runs_p[j][ok]

    # ------------------------------------------------------------------ collapsing
    def _aggregate(self, buf: EventBuffer, index: ComponentIndex | None, uid: np.ndarray,
                   tt: np.ndarray, pp: np.ndarray) -> None:
        """Fold new point matches into their signatures' groups (float mode).

        Skip-till-next weights each point match by Eq. 2 right away: every spoiler of its gaps
        starts before its last point, below the horizon, so it has been seen.
        """
        cfg = self.config
        l_ = cfg.length
        w = pp.copy()
        if cfg.skip_till_next:
            assert index is not None
            w *= self._no_spoiler(buf, index, uid, tt)
        keep = w > 0
        uid, tt, w = uid[keep], tt[keep], w[keep]
        if uid.shape[0] == 0:
            return
        key = buf.hi[buf.positions(uid[:, 0])] + cfg.window - 1
        su = np.concatenate([self.sig_uid, uid])
        sw = np.concatenate([self.sig_w, w])
        s0 = np.concatenate([self.sig_t0, tt[:, 0]])
        s1 = np.concatenate([self.sig_t1, tt[:, l_ - 1]])
        sk = np.concatenate([self.sig_key, key])
        order = np.lexsort(tuple(su[:, c] for c in range(l_ - 1, -1, -1)))
        su, sw, s0, s1, sk = su[order], sw[order], s0[order], s1[order], sk[order]
        brk = np.concatenate([[True], np.any(su[1:] != su[:-1], axis=1)])
        st = np.flatnonzero(brk)
        self.sig_uid = su[st]
        self.sig_w = np.add.reduceat(sw, st)
        self.sig_t0 = np.minimum.reduceat(s0, st)
        self.sig_t1 = np.maximum.reduceat(s1, st)
        self.sig_key = sk[st]

    def _no_spoiler(self, buf: EventBuffer, index: ComponentIndex, uid: np.ndarray,
                    tt: np.ndarray) -> np.ndarray:
        """``P[Theta(m) = empty]`` of each point match (Eq. 2), exact zeros kept exact.

        For a spoiler ``c`` of the gaps ``G_c`` of a point match, the factor is the mass of
        ``c`` outside those gaps, summed over the segments between them (each a difference of
        running sums, exactly 0 when the segment holds no positive weight).
        """
        l_ = self.config.length
        pos = buf.positions(uid)
        order = np.lexsort(tuple(uid[:, c] for c in range(l_ - 1, -1, -1)))
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        su = uid[order]
        brk = np.concatenate([[True], np.any(su[1:] != su[:-1], axis=1)])
        grp_sorted = np.cumsum(brk) - 1
        grp = grp_sorted[inv]
        st = np.flatnonzero(brk)
        sig_pos = pos[order][st]
        ts = tt[order]
        tmin = np.stack([np.minimum.reduceat(ts[:, c], st) for c in range(l_)], axis=1)
        tmax = np.stack([np.maximum.reduceat(ts[:, c], st) for c in range(l_)], axis=1)
        gap_ptr, gap_ev, _ = gather_spoilers(index, self.plan, buf.attrs, sig_pos, tmin, tmax)
        out = np.ones(uid.shape[0])
        if gap_ev.size == 0:
            return out
        keys = np.repeat(np.arange(gap_ptr.size - 1), np.diff(gap_ptr))
        s_of, g_of = keys // l_, keys % l_
        o = np.lexsort((gap_ev, s_of))
        s_of, g_of, cs = s_of[o], g_of[o], gap_ev[o]
        first = np.concatenate([[True], (s_of[1:] != s_of[:-1]) | (cs[1:] != cs[:-1])])
        pst = np.flatnonzero(first)
        pmask = np.bitwise_or.reduceat(np.int64(1) << g_of, pst)
        psig, pc = s_of[pst], cs[pst]
        sp_ptr = np.searchsorted(psig, np.arange(sig_pos.shape[0] + 1), side="left")
        r, k = expand_ranges(sp_ptr[grp], sp_ptr[grp + 1])
        if k.size == 0:
            return out
        c, m = pc[k], pmask[k]
        big = np.int64(1) << 60
        seg = np.full(k.size, -big, np.int64)
        outside = np.zeros(k.size)
        for g in range(1, l_):
            ing = ((m >> g) & 1) == 1
            if not ing.any():
                continue
            s_g, t_g = tt[r, g - 1], tt[r, g]
            part = _cdf(buf, c, s_g) - _cdf(buf, c, seg - 1)
            outside += np.where(ing, part, 0.0)
            seg = np.where(ing, t_g, seg)
        outside += 1.0 - _cdf(buf, c, seg - 1)
        np.multiply.at(out, r, np.clip(outside, 0.0, 1.0))
        return out

    def collapse(self, buf: EventBuffer, limit: float) -> Finalized:
        """Report the signatures that are final (first event's key < limit)."""
        cfg = self.config
        l_ = cfg.length
        if cfg.exact:
            return self._collapse_exact(buf, limit)
        ready = self.sig_key < limit
        if not ready.any():
            return Finalized.empty(l_, False)
        out = Finalized(buf.positions(self.sig_uid[ready]), self.sig_w[ready], None,
                        self.sig_t0[ready], self.sig_t1[ready])
        nr = ~ready
        self.sig_uid, self.sig_w = self.sig_uid[nr], self.sig_w[nr]
        self.sig_t0, self.sig_t1, self.sig_key = self.sig_t0[nr], self.sig_t1[nr], self.sig_key[nr]
        return out

    def _collapse_exact(self, buf: EventBuffer, limit: float) -> Finalized:
        """Exact mode: keep every point match and collapse by Eq. 1 / Eq. 3-4 in rationals."""
        cfg = self.config
        l_ = cfg.length
        ready = self.done_key < limit
        if not ready.any():
            return Finalized.empty(l_, True)
        uid, tt = self.done_uid[ready], self.done_t[ready]
        self.done_uid, self.done_t = self.done_uid[~ready], self.done_t[~ready]
        self.done_p, self.done_key = self.done_p[~ready], self.done_key[~ready]
        order = np.lexsort(tuple(uid[:, c] for c in range(l_ - 1, -1, -1)))
        uid, tt = uid[order], tt[order]
        brk = np.concatenate([[True], np.any(uid[1:] != uid[:-1], axis=1)])
        starts = np.flatnonzero(brk)
        ends = np.concatenate([starts[1:], [uid.shape[0]]])
        pos = buf.positions(uid[starts])
        gap_ptr = np.zeros(1, np.int64)
        gap_ev = np.zeros(0, np.int64)
        if cfg.skip_till_next:
            index = ComponentIndex(buf)
            tmin = np.stack([np.minimum.reduceat(tt[:, c], starts) for c in range(l_)], axis=1)
            tmax = np.stack([np.maximum.reduceat(tt[:, c], starts) for c in range(l_)], axis=1)
            gap_ptr, gap_ev, _ = gather_spoilers(index, self.plan, buf.attrs, pos, tmin, tmax)
        return self._collapse_reference(buf, pos, tt, starts, ends, gap_ptr, gap_ev)

    def _collapse_reference(self, buf: EventBuffer, pos: np.ndarray, tt: np.ndarray,
                            starts: np.ndarray, ends: np.ndarray, gap_ptr: np.ndarray,
                            gap_ev: np.ndarray) -> Finalized:
        cfg = self.config
        l_ = cfg.length
        pts_of = buf.exact_points
        conf, r0, r1, txt = [], [], [], []
        for m in range(pos.shape[0]):
            comp_prob = [dict(pts_of(int(p))) for p in pos[m]]
            spoilers = []
            if cfg.skip_till_next:
                gaps: dict[int, set[int]] = {}
                for g in range(1, l_):
                    for c in gap_ev[gap_ptr[m * l_ + g]: gap_ptr[m * l_ + g + 1]]:
                        gaps.setdefault(int(c), set()).add(g)
                spoilers = [(pts_of(c), frozenset(gs)) for c, gs in gaps.items()]
            times = [tuple(int(x) for x in row) for row in tt[starts[m]: ends[m]]]
            c, a, b = collapse_point_matches(times, comp_prob, spoilers, cfg.max_enumeration)
            conf.append(float(c))
            txt.append(fraction_text(c))
            r0.append(-1 if a is None else a)
            r1.append(-1 if b is None else b)
        conf_a = np.asarray(conf, dtype=float)
        keep = conf_a > 0
        return Finalized(pos[keep], conf_a[keep], [s for s, k in zip(txt, keep) if k],
                         np.asarray(r0, np.int64)[keep], np.asarray(r1, np.int64)[keep])

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict:
        return {"next_instant": self.next_instant, "runs_uid": self.runs_uid,
                "runs_t": self.runs_t, "runs_p": self.runs_p, "done_uid": self.done_uid,
                "done_t": self.done_t, "done_p": self.done_p, "done_key": self.done_key,
                "sig_uid": self.sig_uid, "sig_w": self.sig_w, "sig_t0": self.sig_t0,
                "sig_t1": self.sig_t1, "sig_key": self.sig_key,
                "points_released": self.points_released}

    def set_state(self, s: dict) -> None:
        for k, v in s.items():
            setattr(self, k, v)

    def _check(self) -> None:
        """Invariants: point runs have increasing times within the window, distinct events."""
        w = self.config.window
        for j in range(self.config.length - 1):
            t = self.runs_t[j]
            u = self.runs_uid[j]
            assert t.shape == u.shape and t.shape[0] == self.runs_p[j].shape[0]
            if t.shape[0]:
                assert (np.diff(t, axis=1) > 0).all()
                assert (t[:, -1] - t[:, 0] < w).all()
                assert (self.runs_p[j] > 0).all()
        assert self.sig_uid.shape[0] == self.sig_w.shape[0] == self.sig_key.shape[0]
        if self.sig_uid.shape[0]:
            assert (self.sig_w > 0).all() and (self.sig_t0 <= self.sig_t1).all()
            s = self.sig_uid
            order = np.lexsort(tuple(s[:, c] for c in range(s.shape[1] - 1, -1, -1)))
            assert np.any(s[order][1:] != s[order][:-1], axis=1).all()
        if self.done_t.shape[0]:
            assert (np.diff(self.done_t, axis=1) > 0).all()
            assert (self.done_t[:, -1] - self.done_t[:, 0] < w).all()
