"""Event-based "any state" evaluation and the selectivity-order optimization (paper 003, 4.2-4.3,
C.2).

**Any state.** Events are taken in arrival order. A *run* assigns events to some of the pattern
components (not necessarily a prefix). An event matching component ``j`` starts a new run holding
only itself at ``j`` and is tried on every existing run whose ``j`` is free: if it satisfies the
ordering constraints with the run's events (valid intervals with the free components
unconstrained, :func:`~.intervals.feasible_partial`), the window, and the cross conditions that
become fully bound, the run is cloned and the clone takes it (skip-till-any keeps the original).
Runs are pruned when they can no longer complete: the events that may still fill their free
components all start at or after the *future lower bound* (the horizon, see the operator), and the
run is infeasible even with its free components so constrained - this covers both of the paper's
rules (time to live ``min vub + W`` and an unmatched prefix). Complete runs wait until their first
event's matches are final and are then finalized like every candidate (skip-till-next applies NELT
there, when every candidate event is known).

**Selectivity order.** The same engine, fed from one buffer per component: events wait until every
component has a waiting event and are then fed, events of the most selective component (fewest
events seen so far) first, so fewer runs start from frequent components. While some buffer is
empty, a waiting event that can no longer meet any partner for some other component - none
waiting, none in a live run close enough, none able to come in the future - is dropped. A waiting
event whose window has passed (``upper + W - 1 < horizon``) is fed at once: waiting cannot reorder
it further.

Complexity: per event, O(runs * l) - compiled (:mod:`.any_state_kernels`) when the query has no
cross-event conditions, NumPy work per event otherwise; the number of runs is what the method
costs (the paper's worst case is exponential in the events per window).
"""

from __future__ import annotations

import numpy as np

from replaydb.errors import StateCapExceeded
from replaydb.operators.imprecise.any_state_kernels import feed_runs
from replaydb.operators.imprecise.config import ImpreciseConfig
from replaydb.operators.imprecise.events import EventBuffer
from replaydb.operators.imprecise.intervals import feasible_partial
from replaydb.operators.imprecise.predicates import PredicatePlan

PRUNE_EVERY = 256


class AnyStateEngine:
    """Runs (uids per component, -1 when free) and complete runs awaiting finalization."""

    def __init__(self, config: ImpreciseConfig, plan: PredicatePlan) -> None:
        self.config = config
        self.plan = plan
        l_ = config.length
        self.uid = np.zeros((0, l_), np.int64)
        self.lo = np.zeros((0, l_), np.int64)
        self.hi = np.zeros((0, l_), np.int64)
        self.done_uid = np.zeros((0, l_), np.int64)
        self.done_key = np.zeros(0, np.int64)
        self._bits = (np.int64(1) << np.arange(l_, dtype=np.int64))

    @property
    def size(self) -> int:
        return int(self.uid.shape[0] + self.done_uid.shape[0])

    # ------------------------------------------------------------------ feeding
    def feed(self, buf: EventBuffer, positions: np.ndarray, future_lower: np.ndarray,
             cap: int | None) -> None:
        """Feed the events at ``positions`` (buffer positions) in that order.

        ``future_lower[i]`` bounds from below the lower bound of every event fed after the
        ``i``-th one (used to prune runs every few events). Without cross-event conditions the
        compiled loop of :mod:`.any_state_kernels` runs; otherwise this Python loop.
        """
        if positions.size == 0:
            return
        if not any(self.plan.cross):
            self._feed_compiled(buf, positions, future_lower, cap)
            return
        since = 0
        last_size = max(self.uid.shape[0], 64)
        for i, p in enumerate(positions):
            self._feed_one(buf, int(p))
            since += 1
            if since >= PRUNE_EVERY or self.uid.shape[0] > 2 * last_size:
                self.prune(int(future_lower[i]))
                since = 0
                last_size = max(self.uid.shape[0], 64)
            if cap is not None and self.size > cap:
                raise StateCapExceeded("imprecise pattern (any state)", "runs", self.size, cap,
                                       "state_cap")

    def _feed_compiled(self, buf: EventBuffer, positions: np.ndarray, future_lower: np.ndarray,
                       cap: int | None) -> None:
        c = np.ascontiguousarray
        out = feed_runs(c(self.uid), c(self.lo), c(self.hi), self.uid.shape[0],
                        c(self.done_uid), c(self.done_key), self.done_uid.shape[0],
                        c(buf.uid[positions]), c(buf.lo[positions]), c(buf.hi[positions]),
                        c(buf.comp[positions]), c(np.asarray(future_lower, np.int64)),
                        int(self.config.window), PRUNE_EVERY, -1 if cap is None else int(cap))
        uid, lo, hi, n, done, key, nd, status = out
        self.uid, self.lo, self.hi = uid[:n].copy(), lo[:n].copy(), hi[:n].copy()
        self.done_uid, self.done_key = done[:nd].copy(), key[:nd].copy()
        if status:
            raise StateCapExceeded("imprecise pattern (any state)", "runs", self.size,
                                   int(cap or 0), "state_cap")

    def _feed_one(self, buf: EventBuffer, p: int) -> None:
        cfg = self.config
        l_ = cfg.length
        e_uid = int(buf.uid[p])
        e_lo, e_hi = int(buf.lo[p]), int(buf.hi[p])
        comps = np.flatnonzero(buf.comp[p])
        new_u, new_lo, new_hi = [], [], []
        has_e = None
        for j in comps:
            j = int(j)
            if self.uid.shape[0]:
                if has_e is None:
                    has_e = (self.uid == e_uid).any(axis=1)
                ci = np.flatnonzero((self.uid[:, j] < 0) & ~has_e)
            else:
                ci = np.zeros(0, np.int64)
            if ci.size:
                u2 = self.uid[ci].copy()
                lo2 = self.lo[ci].copy()
                hi2 = self.hi[ci].copy()
                before = u2 >= 0
                u2[:, j], lo2[:, j], hi2[:, j] = e_uid, e_lo, e_hi
                ok = feasible_partial(lo2, hi2, u2 >= 0, cfg.window)
                if ok.any() and any(self.plan.cross):
                    ok &= self._cross_ok(buf, j, p, u2, before)
                new_u.append(u2[ok])
                new_lo.append(lo2[ok])
                new_hi.append(hi2[ok])
            u1 = np.full((1, l_), -1, np.int64)
            lo1 = np.zeros((1, l_), np.int64)
            hi1 = np.zeros((1, l_), np.int64)
            u1[0, j], lo1[0, j], hi1[0, j] = e_uid, e_lo, e_hi
            if feasible_partial(lo1, hi1, u1 >= 0, cfg.window)[0]:
                new_u.append(u1)
                new_lo.append(lo1)
                new_hi.append(hi1)
        if not new_u:
            return
        u = np.concatenate(new_u)
        lo = np.concatenate(new_lo)
        hi = np.concatenate(new_hi)
        full = (u >= 0).all(axis=1)
        if full.any():
            uf = u[full]
            key = hi[full, 0] + cfg.window - 1
            self.done_uid = np.concatenate([self.done_uid, uf])
            self.done_key = np.concatenate([self.done_key, key])
        part = ~full
        if part.any():
            self.uid = np.concatenate([self.uid, u[part]])
            self.lo = np.concatenate([self.lo, lo[part]])
            self.hi = np.concatenate([self.hi, hi[part]])

    def _cross_ok(self, buf: EventBuffer, j: int, p: int, u2: np.ndarray, before: np.ndarray
                  ) -> np.ndarray:
        n = u2.shape[0]
        ok = np.ones(n, bool)
        masks = before.astype(np.int64) @ self._bits
        for b in np.unique(masks):
            sel = np.flatnonzero(masks == b)
            assigned = frozenset(k for k in range(self.config.length) if (int(b) >> k) & 1)
            idx = {k: buf.positions(u2[sel, k]) for k in assigned}
            idx[j] = np.full(sel.size, p, np.int64)
            ok[sel] = self.plan.cross_mask(j, buf.attrs, idx, sel.size, assigned=assigned)
        return ok

    # ------------------------------------------------------------------ pruning and output
    def prune(self, future_lower: int) -> None:
        """Drop runs that cannot complete with events starting at or after ``future_lower``."""
        if self.uid.shape[0] == 0:
            return
        ok = feasible_partial(self.lo, self.hi, self.uid >= 0, self.config.window,
                              future_lower=future_lower)
        if not ok.all():
            self.uid, self.lo, self.hi = self.uid[ok], self.lo[ok], self.hi[ok]

    def take_ready(self, limit: float) -> np.ndarray:
        """Complete runs whose first event's key is below ``limit`` (removed from the engine)."""
        ready = self.done_key < limit
        out = self.done_uid[ready]
        if ready.any():
            self.done_uid = self.done_uid[~ready]
            self.done_key = self.done_key[~ready]
        return out

    def referenced(self) -> np.ndarray:
        u = np.concatenate([self.uid.ravel(), self.done_uid.ravel()])
        return np.unique(u[u >= 0])

    def slot_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per component: min lower and max upper over the runs' events at that component."""
        l_ = self.config.length
        big = np.int64(1) << 60
        mn = np.full(l_, big, np.int64)
        mx = np.full(l_, -big, np.int64)
        if self.uid.shape[0]:
            a = self.uid >= 0
            mn = np.where(a, self.lo, big).min(axis=0)
            mx = np.where(a, self.hi, -big).max(axis=0)
        return mn, mx

    def get_state(self) -> dict:
        return {"uid": self.uid, "lo": self.lo, "hi": self.hi, "done_uid": self.done_uid,
                "done_key": self.done_key}

    def set_state(self, s: dict) -> None:
        self.uid, self.lo, self.hi = s["uid"], s["lo"], s["hi"]
        self.done_uid, self.done_key = s["done_uid"], s["done_key"]

    def _check(self) -> None:
        """Invariants: no run is complete, no event twice in a run, runs are feasible."""
        if self.uid.shape[0]:
            a = self.uid >= 0
            assert not a.all(axis=1).any()
            assert a.any(axis=1).all()
            assert feasible_partial(self.lo, self.hi, a, self.config.window).all()
            s = np.sort(np.where(a, self.uid, -1 - np.arange(self.uid.shape[1])), axis=1)
            assert (s[:, 1:] != s[:, :-1]).all()
        assert self.done_uid.shape[0] == self.done_key.shape[0]
        assert (self.done_uid >= 0).all()


class SelectivityFeeder:
    """Per-component waiting buffers in front of an :class:`AnyStateEngine`."""

    def __init__(self, config: ImpreciseConfig) -> None:
        self.config = config
        self.waiting = np.zeros(0, np.int64)  # uids, arrival order
        self.seen = np.zeros(config.length, np.int64)

    def add(self, buf: EventBuffer, uids: np.ndarray) -> None:
        if uids.size:
            self.seen += buf.comp[buf.positions(uids)].sum(axis=0)
            self.waiting = np.concatenate([self.waiting, uids])

    def future_lower(self, buf: EventBuffer, horizon: float) -> float:
        if self.waiting.size == 0:
            return horizon
        return min(horizon, float(buf.lo[buf.positions(self.waiting)].min()))

    def step(self, engine: AnyStateEngine, buf: EventBuffer, horizon: float, flush: bool,
             cap: int | None) -> None:
        """Feed what may be fed now (everything on trigger or flush), drop stale events."""
        if self.waiting.size == 0:
            return
        pos = buf.positions(self.waiting)
        comp = buf.comp[pos]
        w = self.config.window
        if flush or comp.any(axis=0).all():
            self._feed(engine, buf, pos, horizon, cap)
            self.waiting = np.zeros(0, np.int64)
            return
        lo, hi = buf.lo[pos], buf.hi[pos]
        keep = ~self._stale(engine, comp, lo, hi, horizon)
        old = keep & (hi + w - 1 < horizon)
        stay = keep & ~old
        if old.any():
            rest = float(lo[stay].min()) if stay.any() else horizon
            self._feed(engine, buf, pos[old], min(horizon, rest), cap)
        self.waiting = self.waiting[stay]

    def _feed(self, engine: AnyStateEngine, buf: EventBuffer, pos: np.ndarray,
              bound: float, cap: int | None) -> None:
        """Feed ``pos`` in selectivity order; ``bound`` bounds the lower bounds of every event
        fed later (still waiting or unseen)."""
        rank = np.empty(self.config.length, np.int64)
        rank[np.argsort(self.seen, kind="stable")] = np.arange(self.config.length)
        comp = buf.comp[pos]
        group = np.where(comp, rank[None, :], self.config.length).min(axis=1)
        order = np.argsort(group, kind="stable")
        pos = pos[order]
        suffix = np.minimum.accumulate(buf.lo[pos][::-1])[::-1]
        big = 1 << 60
        b = int(min(bound, big))
        nxt = np.concatenate([suffix[1:], [big]])
        engine.feed(buf, pos, np.minimum(nxt, b), cap)

    def _stale(self, engine: AnyStateEngine, comp: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               horizon: float) -> np.ndarray:
        l_ = self.config.length
        w = self.config.window
        counts = comp.sum(axis=0)
        run_lo, run_hi = engine.slot_bounds()
        possible_any = np.zeros(lo.size, bool)
        for j in range(l_):
            at_j = comp[:, j].copy()
            for k in range(l_):
                if k == j:
                    continue
                waiting_k = (counts[k] - comp[:, k]) > 0
                if k > j:
                    fed_k = run_hi[k] > lo
                    future_k = horizon <= hi + w - 1
                else:
                    fed_k = run_lo[k] < hi
                    future_k = horizon <= hi - 1
                at_j &= waiting_k | fed_k | future_k
            possible_any |= at_j
        return ~possible_any

    def _check(self) -> None:
        """Invariants: waiting events are distinct and in arrival order."""
        assert (np.diff(self.waiting) > 0).all()
        assert (self.seen >= 0).all()

    def get_state(self) -> dict:
        return {"waiting": self.waiting, "seen": self.seen}

    def set_state(self, s: dict) -> None:
        self.waiting, self.seen = s["waiting"], s["seen"]
