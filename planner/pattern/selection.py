"""Index selection strategies (dissertation 3.4.3 and 3.5.3).

The units of selection are the index-supported conditions of the rewritten pattern's basic
symbols (a symbol with range conditions on two indexed attributes offers two). A configuration
is a set of them; :class:`~.cost.CostModel` estimates each. Strategies:

* **all** - every index-supported condition;
* **greedy** - conditions in increasing selectivity; of the m prefixes (k = 1..m) the cheapest;
* **budget** - the earlier greedy-until-cost-exceeds-gain strategy: take the most selective
  condition, then add the next most selective one while the estimated total cost still drops
  (the gain in replay exceeds the added index cost); stop at the first that does not pay;
* **optimal** - Algorithm 3.2: inside one basic block (fixed seq distances) greedy by
  selectivity is optimal for every k, so each block contributes, per k, one configuration; the
  blocks are split in halves recursively and the Pareto frontiers over (C_PIO, C_SIO) of both
  halves are combined for every k = i + j (the cross product of ``L_i`` and ``R_j``), keeping
  only the frontier (Rosenman and Gero). The optimum is the cheapest configuration on any
  frontier. Worst case exponential, in practice O(u m^2 log m) for u blocks.

The forced strategies choose among configurations with at least one index (k >= 1); the planner's
``auto`` compares Optimal's choice with the plan without any index (full replay or the coarse
pattern map's regions) and falls back when that is cheaper.

Complexity: all O(m), greedy and budget O(m) estimates, optimal as above.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from replaydb.planner.pattern.cost import CondInfo, CostModel, Estimate


@dataclass
class Selection:
    """What a strategy chose, what it examined and how long it took."""

    strategy: str
    estimate: Estimate | None
    examined: int
    seconds: float
    frontiers: list[list[Estimate]] = field(default_factory=list)

    @property
    def config(self) -> frozenset[int]:
        return self.estimate.config if self.estimate is not None else frozenset()


def _by_selectivity(model: CostModel, conds: list[CondInfo]) -> list[CondInfo]:
    return sorted(conds, key=lambda c: (model.phi[c.id], c.id))


def select_all(model: CostModel, conds: list[CondInfo]) -> Selection:
    t0 = time.perf_counter()
    est = model.estimate(frozenset(c.id for c in conds)) if conds else None
    return Selection("all", est, 1 if conds else 0, time.perf_counter() - t0)


def select_greedy(model: CostModel, conds: list[CondInfo]) -> Selection:
    t0 = time.perf_counter()
    order = _by_selectivity(model, conds)
    best: Estimate | None = None
    cur: set[int] = set()
    for c in order:
        cur.add(c.id)
        est = model.estimate(frozenset(cur))
        if best is None or est.cost < best.cost:
            best = est
    return Selection("greedy", best, len(order), time.perf_counter() - t0)


def select_budget(model: CostModel, conds: list[CondInfo]) -> Selection:
    t0 = time.perf_counter()
    order = _by_selectivity(model, conds)
    if not order:
        return Selection("budget", None, 0, time.perf_counter() - t0)
    cur = {order[0].id}
    best = model.estimate(frozenset(cur))
    examined = 1
    for c in order[1:]:
        est = model.estimate(frozenset(cur | {c.id}))
        examined += 1
        if est.cost >= best.cost:
            break
        cur.add(c.id)
        best = est
    return Selection("budget", best, examined, time.perf_counter() - t0)


def pareto(points: list[Estimate]) -> list[Estimate]:
    """The non-dominated estimates over (C_PIO, C_SIO) (one of equal points kept).

    C_PIO is in bytes including the per-interval navigation (what ``f`` weighs).

    The sort term of ``g`` is computed from the lookups' result sizes, not from C_SIO alone, so
    dominance also asks for a sort term at most as large: a point is dropped only when another
    is no worse in C_PIO, C_SIO and sort. Then the cheapest configuration, whatever the weights,
    is never dropped. Sorting by C_PIO makes this a sweep over tiny frontiers.
    """
    out: list[Estimate] = []
    for e in sorted(points, key=lambda e: (e.pio_bytes, e.sio_pages, e.sort, e.cost)):
        if any(f.sio_pages <= e.sio_pages and f.sort <= e.sort for f in out):
            continue
        out.append(e)
    return out


class _Search:
    """Bookkeeping of one Algorithm 3.2 run: combinations examined, and the incumbent - the
    cheapest non-empty configuration estimated so far (every configuration is a valid plan)."""

    def __init__(self, model: CostModel, prune: bool = True) -> None:
        self.model = model
        self.n = 0
        self.best = math.inf
        self.prune = prune

    def seen(self, est: Estimate) -> Estimate:
        if self.prune and est.config and est.cost < self.best:
            self.best = est.cost
        return est

    def hopeless(self, est: Estimate) -> bool:
        """Whether no configuration containing ``est.config`` can beat the incumbent: the part
        of its index cost that every larger configuration pays too
        (:meth:`CostModel.index_cost`) already exceeds it."""
        return self.model.index_cost(est) > self.best


def _frontiers(model: CostModel, blocks: list[list[CondInfo]], search: _Search
               ) -> list[list[Estimate]]:
    """Algorithm 3.2 on ``blocks`` (each a list of conditions in selectivity order).

    Branch and bound (our addition; the text enumerates the frontiers whole): a combination
    whose two halves' index costs already add up to more than the incumbent is not estimated,
    and frontier entries with that property are dropped, since every configuration built on
    them costs more than a plan already found. The cheapest configuration is the same as
    without pruning (only strictly worse ones are cut; ties stay), and the frontiers shrink
    most where many indexes make a plan expensive (long patterns, many blocks)."""
    if len(blocks) == 1:
        blk = blocks[0]
        out = [[model.estimate(frozenset())]]
        for k in range(1, len(blk) + 1):
            search.n += 1
            est = search.seen(model.estimate(frozenset(c.id for c in blk[:k])))
            out.append([] if search.hopeless(est) else [est])
        return out
    mid = len(blocks) // 2
    left = _frontiers(model, blocks[:mid], search)
    right = _frontiers(model, blocks[mid:], search)
    res: list[list[Estimate]] = []
    bound = search.best
    for k in range(len(left) + len(right) - 1):
        cand: list[Estimate] = []
        for i in range(max(0, k - len(right) + 1), min(k, len(left) - 1) + 1):
            for lft in left[i]:
                lc = model.index_cost(lft)
                for rgt in right[k - i]:
                    if lc + model.index_cost(rgt) > search.best:
                        continue
                    search.n += 1
                    cand.append(search.seen(model.combine(lft, rgt)))
        res.append(pareto(cand))
    if search.best < bound:
        res = [[e for e in front if not search.hopeless(e)] for front in res]
    return res


def select_optimal(model: CostModel, conds: list[CondInfo], *, prune: bool = True
                   ) -> Selection:
    """Algorithm 3.2; the frontiers (index k = number of conditions) come back for EXPLAIN.
    ``prune=False`` enumerates the frontiers whole, as the text does (same choice, more
    combinations examined)."""
    t0 = time.perf_counter()
    if not conds:
        return Selection("optimal", None, 0, time.perf_counter() - t0)
    per_block: dict[int, list[CondInfo]] = {}
    syms = model.rp.symbols
    for c in _by_selectivity(model, conds):
        per_block.setdefault(syms[c.bs].block, []).append(c)
    blocks = [per_block[b] for b in sorted(per_block)]
    search = _Search(model, prune)
    fronts = _frontiers(model, blocks, search)
    best: Estimate | None = None
    for k, front in enumerate(fronts):
        if k == 0:
            continue
        for e in front:
            if best is None or e.cost < best.cost:
                best = e
    return Selection("optimal", best, search.n, time.perf_counter() - t0, fronts)


STRATEGIES = {"all": select_all, "greedy": select_greedy, "budget": select_budget,
              "optimal": select_optimal}
