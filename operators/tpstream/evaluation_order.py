"""Evaluation orders of the matcher: cost model, statistics and adaptive re-planning (5.5.4).

For every situation stream ``i`` the matcher keeps one evaluation order - the order in which the
buffers are joined when a situation of ``i`` triggers ``performMatch`` (the trigger is pre-set at
step 0). Three modes:

* ``adaptive``: orders minimise the cost model (Eq. 5.2-5.5, :func:`.kernel.plan_dp`) over the
  current statistics: an exponential moving average (EMA, smoothing ``alpha``) of every buffer's
  size and of every constraint's observed selectivity (matching candidates / buffer size, one
  observation per constraint and trigger). The paper keeps one EMA per constraint; here each
  constraint has one per *direction* (which side is bound, which is searched), because the
  pre-set situation is always the newest one and the directions differ systematically: for
  ``B before C`` a new B never finds a C (every buffered C ended before it), a new C finds most
  B's - a single average hides exactly what the order should exploit. The plan keeps a snapshot of the statistics it was
  built from; when any statistic drifts more than ``threshold`` relative to the snapshot the
  orders are recomputed (inside the compiled matcher, without interrupting it). The EMAs are
  updated after every trigger; the comparison runs every 8th trigger, which halves the
  bookkeeping cost and delays a re-plan by at most 7 triggers. The papers leave the comparison open; here a buffer size counts as
  drifted when it moved by more than ``threshold * max(snapshot, 4)`` situations, and a
  selectivity when the expected number of candidates it implies (selectivity x buffer size, in
  either direction) moved by more than ``threshold * max(snapshot, 1)`` - without these floors a
  selectivity near zero (equals: 0.0006) or a buffer of one situation re-plans on almost every
  update. Migration is free: the matcher keeps no intermediate results.
Cost model: ``|Res_i| = |Res_{i-1}| * |Buf_i| * phi_i`` with ``phi_i`` the product over the
step's constraints of the sum of their relations' selectivities (Eq. 5.4, 5.5) and
``C_fM(Buf_i) = sum_C |C| * 4 * log2 |Buf_i|`` (Eq. 5.3). ``cost_model="paper"`` sums
``|Res_{i-1}| * |Res_i| + C_fM`` per step exactly as Eq. 5.2 is printed. The default
``"calls"`` sums ``|Res_{i-1}| * C_fM + |Res_i|``: Algorithm 5.3 calls findMatches once per partial
result of the previous step, and each new partial result is produced once. Eq. 5.2 charges the
range queries only once per step, which makes orders that start with a large join look cheap;
on the aggressive-drivers query it picks an order doing about 300 times more matcher steps than
the best one (see the benchmark), so the default deviates from the printed formula.

* ``static``: the initial cost-based plan, built from Table 5.3 selectivities and equal buffer
  sizes (``initial_buffer``), never re-planned.
* fixed priority (a permutation of the streams): for trigger ``i``, the order is ``i`` followed
  by, repeatedly, the first stream of the priority list that has a constraint to the streams
  already bound. This is the comparison baseline for "adaptive vs best fixed plan".

No order joins a buffer without an applicable constraint while a connected stream is left; a
pattern whose constraint graph is disconnected (e.g. ``A before B AND C overlaps D``, or a defined
situation the pattern never mentions) is evaluated component by component, joined by cross
products - the documented fallback (there is no constraint to restrict the join).

Planning cost: ``O(S * 2^S * S^2)`` per (re)plan in compiled code (S <= 16).
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.tpstream import kernel
from replaydb.operators.tpstream.relations import selectivity


def popcount(mask: int) -> int:
    return bin(mask).count("1") if mask > 0 else 0


class EvaluationPlanner:
    """Holds the current evaluation orders and the statistics they are based on."""

    def __init__(self, relm: np.ndarray, order: str | tuple[int, ...], alpha: float,
                 threshold: float, initial_buffer: float = 100.0,
                 cost_model: str = "calls") -> None:
        self.paper_cost = cost_model == "paper"
        self.S = relm.shape[0]
        self.relm = np.where(relm < 0, 0, relm).astype(np.int64)
        self.mode = order if isinstance(order, str) else "fixed"
        self.priority = tuple(order) if not isinstance(order, str) else None
        self.alpha = float(alpha)
        self.threshold = float(threshold)
        S = self.S
        self.nrel = np.array([[popcount(int(self.relm[a, b])) for b in range(S)]
                              for a in range(S)], dtype=np.int64)
        pairs = [(a, b) for a in range(S) for b in range(a + 1, S) if self.relm[a, b] != 0]
        self.cons_a = np.array([p[0] for p in pairs], dtype=np.int64)
        self.cons_b = np.array([p[1] for p in pairs], dtype=np.int64)
        self.cons_m = np.array([self.relm[a, b] for a, b in pairs], dtype=np.int64)
        self.init_sel = np.ones((S, S))
        for a in range(S):
            for b in range(S):
                if self.relm[a, b]:
                    self.init_sel[a, b] = selectivity(int(self.relm[a, b]))
        self.initial_buffer = float(initial_buffer)
        self.reset_stats()

    # ------------------------------------------------------------------ statistics
    def reset_stats(self) -> None:
        S = self.S
        self.ema_buf = np.full(S, self.initial_buffer)
        self.buf_seen = np.zeros(S, np.bool_)
        self.ema_sel = self.init_sel.copy()
        self.replans = 0
        self.plan()

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"

    def plan(self) -> None:
        """(Re)compute every stream's evaluation order and snapshot the statistics."""
        S = self.S
        orders = np.zeros((S, S), np.int64)
        costs = np.zeros(S)
        for i in range(S):
            if self.priority is not None:
                orders[i] = self._greedy(i, self.priority)
                costs[i] = np.nan
            else:
                buf = self.ema_buf if self.mode == "adaptive" else np.full(S, self.initial_buffer)
                sel = self.ema_sel if self.mode == "adaptive" else self.init_sel
                o, c = kernel.plan_dp(i, S, self.relm, self.nrel, np.asarray(buf, np.float64),
                                      np.asarray(sel, np.float64), self.paper_cost)
                orders[i] = o
                costs[i] = c
        self.orders = orders
        self.costs = costs
        self.snap_buf = self.ema_buf.copy()
        self.snap_sel = self.ema_sel.copy()
        self._build_appl()

    def _build_appl(self) -> None:
        """For every order and step, the earlier streams with a constraint to the step's one."""
        S = self.S
        self.appl = np.zeros((S, S, S), np.int64)
        self.appl_n = np.zeros((S, S), np.int64)
        kernel.build_appl(S, self.relm, self.orders, self.appl, self.appl_n)

    def replan(self) -> None:
        self.replans += 1
        self.plan()

    def _greedy(self, i: int, priority: tuple[int, ...]) -> list[int]:
        chosen = [i]
        rest = [s for s in priority if s != i]
        while rest:
            pick = next((s for s in rest if any(self.relm[b, s] for b in chosen)), rest[0])
            chosen.append(pick)
            rest.remove(pick)
        return chosen

    def cost_of(self, i: int, order: list[int], buf: np.ndarray | None = None,
                sel: np.ndarray | None = None) -> float:
        """Cost (Eq. 5.2) of one order for trigger stream ``i`` (pure Python, for tests)."""
        buf = self.ema_buf if buf is None else buf
        sel = self.ema_sel if sel is None else sel
        res_prev = 1.0
        cost = 0.0
        for k in range(1, len(order)):
            j = order[k]
            f = max(buf[j], 1.0)
            cfm = 0.0
            for b in order[:k]:
                if self.relm[b, j]:
                    f *= sel[b, j]
                    cfm += self.nrel[b, j] * 4.0 * np.log2(max(buf[j], 1.0, 2.0))
            res = res_prev * f
            cost += res_prev * res + cfm if self.paper_cost else res_prev * cfm + res
            res_prev = res
        return cost

    def describe(self, names: tuple[str, ...]) -> dict[str, list[str]]:
        return {names[i]: [names[j] for j in self.orders[i]] for i in range(self.S)}

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict:
        return {"ema_buf": self.ema_buf.copy(), "buf_seen": self.buf_seen.copy(),
                "ema_sel": self.ema_sel.copy(), "replans": self.replans,
                "orders": self.orders.copy(), "snap_buf": self.snap_buf.copy(),
                "snap_sel": self.snap_sel.copy()}

    def set_state(self, st: dict) -> None:
        self.ema_buf = st["ema_buf"].copy()
        self.buf_seen = st["buf_seen"].copy()
        self.ema_sel = st["ema_sel"].copy()
        self.replans = st["replans"]
        self.orders = st["orders"].copy()
        self.snap_buf = st["snap_buf"].copy()
        self.snap_sel = st["snap_sel"].copy()
        self._build_appl()
