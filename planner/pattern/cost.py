"""The cost model of index-assisted pattern matching (dissertation 3.4.3, Eq. 3.1 and 3.5-3.7).

``C_query(S') = f(C_PIO(S')) + g(C_SIO(S'))`` with ``f(x) = w_PIO * x`` and
``g(x) = w_SIO * x + w_sort * sort(x)``.

Units (the paper says "pages" and multiplies by the blocking factor; the public reference
implementation counts bytes and ``n log2 n`` per index result, which its weights 1.13 / 2.53 /
12.73 were calibrated for - we follow it so those defaults keep their meaning):

* ``C_PIO``: bytes of primary-index leaves replayed (leaves x ``leaf_capacity x event_width``)
  plus a navigation cost per replay interval (``interval_events`` events' worth of bytes). The
  reference implementation adds the inner-node I/O of locating every interval; in replaydb one
  interval also costs a Parquet read call, an Arrow conversion and the operator's
  end-of-interval flush - fixed work that calibration measures and expresses as the number of
  events a replay processes in that time. The planner joins intervals whose gap is shorter than that cost
  (replaying the gap is cheaper than a new interval; joining is always correct), and the
  estimate models it by lengthening every interval by the join distance;
* ``C_SIO``: bytes of secondary-index pages read (8 KiB logical pages of the LSM page model),
  summed over the distinct range lookups of the selected conditions;
* ``sort``: ``n log2 n`` summed over the result sizes ``n`` of the lookups read in full (each
  result is sorted by seq on its own, then merged by Algorithm 3.1), plus ``n`` for each member
  of a tight block that the planner defers (:func:`deferred_lookups`: on a regular stream,
  every selected member of a block but its smallest): it is only tested against the block's
  last candidates, at most one pass over its seqs. Counted as a sort, the cheap plans with
  several deferred members would carry large sorts they never do, and calibration would fit a
  sort weight far too small, so that Optimal would add lookups that prune nothing; counted as
  nothing, a further member of a long block would look free, and Optimal would take every
  member of long blocks, each a lookup and a test that prunes nothing more.

Weights come from the store's calibration (``replaydb calibrate``) or the defaults, and so do
the costs of the member tests of tight blocks (:mod:`.membercosts`), which choose how a block's
candidates are tested (the same candidates either way) and never enter ``C_query``.

Estimating ``C_SIO`` is direct: the index's read plan gives the pages a range query reads (from
run metadata) and its count statistics the result size. ``C_PIO`` follows the covered fraction
``alpha`` of Algorithm 3.1's replay intervals:

* selected conditions group into the basic blocks (BB) of the rewritten pattern; block ``b``
  occurs with probability ``phi_b`` = product of its selected conditions' selectivities (Eq.
  3.2) at every event;
* candidates start at the occurrences of the first selected block: ``N * phi_1`` of them; their
  length is ``X = D + Hypo(lambda_2..lambda_u)``, ``lambda_b = phi_b / dt``, ``dt`` the mean gap
  between events and ``D = dt *`` (the seq spans inside tight blocks); the window, shortened by
  ``(p + q) gap_min`` (interval shortening), keeps ``N_I = N phi_1 P(X <= w')`` of them
  (Eq. 3.6), of mean length ``mu_c = E[X | X <= w']`` (Eq. 3.7);
* ``extend(mu_c)``, the replay interval per candidate, follows Interval(c, w): base case
  ``[c_k.t - w + q gap_min, c_1.t + w - p gap_min]``, i.e. ``2w - mu_c - (p + q) gap_min + 1``.
  (The text writes ``2(w - mu_c)``; Interval(c, w) gives ``2w - mu_c``, as does the reference
  implementation - we follow Interval(c, w).) The special cases S1-S3 (first/last BS selected)
  and their generalization with ``gap_max`` cut the start to ``c_1.t - o_1 gap_max`` and the end
  to the latest last-block occurrence plus ``o_k gap_max``; navigation (PREV/NEXT) widening adds
  its events;
* Cardenas' urn formula (Eq. 3.5): ``alpha = 1 - (1 - extend / T)^N_I``, and the number of merged
  intervals ``N_I (1 - extend / T)^(N_I - 1)`` (an interval starts a new run when no other starts
  in the ``extend`` before it);
* pages: covered time over the time one leaf spans, plus one boundary leaf per merged interval
  (replay reads whole leaves); intervals closer than the join distance count as one.

With a coarse pattern map (:mod:`.cpm`) ``N``, ``T``, ``dt`` and the selectivities are those of
the CPM's regions (the scope), and the candidates are spread over the regions in proportion to
their length, each region getting its own urn (as the reference implementation does); without
one the scope is the whole stream.

Complexity: one estimate is O(selected conditions + regions) plus one hypoexponential
evaluation (memoized).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from replaydb.indexes.membership import MemberTestCosts
from replaydb.planner.pattern.cpm import Scope
from replaydb.planner.pattern.hypo import hypo_window
from replaydb.planner.pattern.intervals import Geometry
from replaydb.planner.pattern.membercosts import (
    DEFAULT_MEMBER_COSTS,
    costs_config,
    costs_of_config,
)
from replaydb.planner.pattern.rewrite import RewrittenPattern

DEFAULT_WEIGHTS = {"w_pio": 1.13, "w_sio": 2.53, "w_sort": 12.73}
"""The paper's calibrated weights (3.5.3), used until ``replaydb calibrate`` stores others."""
DEFAULT_INTERVAL_EVENTS = 128.0
"""Navigation cost of one replay interval, in events replayed, until calibrated. Replay reads
many short intervals together and hands them to the pattern operator in one batch, so an
interval adds little beyond its boundary leaves, and calibration fits a cost near zero. 128
keeps a small margin for streams replayed one interval at a time (several streams in one
query)."""
PAGE_BYTES = 8192
Block = tuple[int, float, int, int]
"""A selected basic block: ``(block, product of its selected selectivities, first bs, last
bs)``."""


@dataclass(frozen=True)
class Weights:
    """``w_pio``, ``w_sio``: per byte; ``w_sort``: per ``n log2 n``; ``interval_events``: the
    navigation cost of one replay interval, in events (their bytes count into C_PIO).

    ``w_pio_interval``: per byte of leaves replayed through index-based intervals, when
    calibration measured it apart from full replay (None: ``w_pio``). Reading the same leaves
    through many short intervals costs more per leaf than one sweep of the stream (smaller
    reads and batches, the rows between intervals dropped by a copy, the operator's end of
    input per batch); with one weight for both, a plan covering most of the stream through
    hundreds of intervals would be estimated cheaper than full replay while running slower.

    ``member_costs``: the member tests' costs calibration measured on this machine (None: not
    measured, :data:`~.membercosts.DEFAULT_MEMBER_COSTS`); :attr:`member_tests` is what the
    planner uses."""

    w_pio: float = DEFAULT_WEIGHTS["w_pio"]
    w_sio: float = DEFAULT_WEIGHTS["w_sio"]
    w_sort: float = DEFAULT_WEIGHTS["w_sort"]
    source: str = "default"
    interval_events: float = DEFAULT_INTERVAL_EVENTS
    w_pio_interval: float | None = None
    member_costs: MemberTestCosts | None = None

    @property
    def member_tests(self) -> MemberTestCosts:
        """The costs a tight block's member tests are chosen by: the calibrated ones, else
        the defaults."""
        return self.member_costs if self.member_costs is not None else DEFAULT_MEMBER_COSTS

    def overridden(self, values: Mapping[str, float | None]) -> Weights:
        """These weights with ``values`` in place (any of
        :data:`~replaydb.planner.options.WEIGHT_NAMES`), source ``option``; the member
        tests' costs stay."""
        return replace(self, source="option",
                       **{k: None if v is None else float(v) for k, v in values.items()})

    def pio_weight(self, index_plan: bool) -> float:
        """The weight of a primary byte: of full replay (or the CPM's regions), or of an
        index plan's intervals."""
        if index_plan and self.w_pio_interval is not None:
            return self.w_pio_interval
        return self.w_pio

    def as_dict(self) -> dict[str, Any]:
        member = {**costs_config(self.member_tests),
                  "source": "calibrated" if self.member_costs is not None else "default"}
        return {"w_pio": self.w_pio, "w_pio_interval": self.w_pio_interval,
                "w_sio": self.w_sio, "w_sort": self.w_sort,
                "interval_events": self.interval_events, "source": self.source,
                "member_tests": member}


def load_weights(store: Any) -> Weights:
    """The store's calibrated weights (``calibration.pattern``), else the defaults; the
    member tests' costs where the calibration measured them (``member_tests``; one stored
    before they were measured has none: the defaults)."""
    cal = (getattr(store, "config", None) or {}).get("calibration") or {}
    pat = cal.get("pattern") if isinstance(cal, dict) else None
    if isinstance(pat, dict) and all(k in pat for k in ("w_pio", "w_sio", "w_sort")):
        wi = pat.get("w_pio_interval")
        return Weights(float(pat["w_pio"]), float(pat["w_sio"]), float(pat["w_sort"]),
                       "calibrated",
                       float(pat.get("interval_events", DEFAULT_INTERVAL_EVENTS)),
                       None if wi is None else float(wi),
                       costs_of_config(pat.get("member_tests")))
    return Weights()


def join_leaves(weights: Weights, leaf_capacity: float) -> float:
    """Gaps of at most this many leaves between replay intervals are replayed (joined)."""
    return max(0.0, weights.interval_events / max(leaf_capacity, 1.0))


@dataclass
class CondInfo:
    """One index-supported condition of one basic symbol (a unit of index selection)."""

    id: int
    bs: int
    condition: Any
    lookup: int  # id of the distinct index lookup (the same condition may serve several BSs)
    selectivity: float  # over the whole stream
    entries: float  # estimated result size
    pages: float  # pages the lookup reads


@dataclass
class Estimate:
    """Estimated costs of one index configuration."""

    config: frozenset[int]
    pio_leaves: float
    sio_pages: float
    sort: float
    cost: float
    alpha: float
    candidates: float
    intervals: float
    extend: float
    pio_bytes: float = 0.0
    sio_bytes: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    summary: tuple[tuple[Block, ...], frozenset[int]] | None = None
    """``(blocks, lookups)`` of the configuration (:meth:`CostModel.combine` builds on it)."""

    def key(self) -> tuple[float, float]:
        return (self.pio_leaves, self.sio_pages)

    def as_dict(self) -> dict[str, Any]:
        return {"pio_leaves": round(self.pio_leaves, 1), "pio_bytes": round(self.pio_bytes),
                "sio_pages": round(self.sio_pages, 1), "sio_bytes": round(self.sio_bytes),
                "sort_nlogn": round(self.sort), "cost": self.cost,
                "covered_fraction": self.alpha, "candidates": round(self.candidates, 1),
                "intervals": round(self.intervals, 1), "extend": round(self.extend, 1)}


def sort_term(n: float, deferred: bool) -> float:
    """A lookup's share of the model's ``sort`` term: ``n log2 n`` for a result of ``n`` seqs
    read in full and sorted, ``n`` (one pass at most) for a deferred member of a tight block
    (:func:`deferred_lookups`). The cost model and calibration's counts both use it."""
    if deferred:
        return max(n, 0.0)
    return n * math.log2(n) if n > 1 else 0.0


def deferred_lookups(items: Iterable[tuple[int, int, int]], entries: dict[int, float]
                     ) -> set[int]:
    """The lookups the planner leaves where their seqs lie in the index files until their
    tight block is merged (``run_lookup``'s ``defer``), given the selected conditions as
    ``(basic symbol, block, lookup)`` and each lookup's expected ``entries``: the only
    selected condition of its basic symbol, used by no other condition, in a block of
    several selected basic symbols, and not that block's smallest expected lookup (the
    anchor, read in full). A deferred member is only tested against the block's last
    candidates (its bitmap is never set, nothing of it sorted). On a regular stream without
    a semi-join mask (the planner's default there); elsewhere nothing is deferred. O(items)."""
    per_bs: dict[int, list[int]] = {}
    block_of: dict[int, int] = {}
    uses: dict[int, int] = {}
    for bs, block, lk in items:
        per_bs.setdefault(bs, []).append(lk)
        block_of[bs] = block
        uses[lk] = uses.get(lk, 0) + 1
    per_block: dict[int, list[int]] = {}
    for bs, block in block_of.items():
        per_block.setdefault(block, []).append(bs)
    out: set[int] = set()
    for bss in per_block.values():
        if len(bss) < 2:
            continue
        smallest = min(entries[lk] for bs in bss for lk in per_bs[bs])
        for bs in bss:
            lks = per_bs[bs]
            if len(lks) == 1 and uses[lks[0]] == 1 and entries[lks[0]] > smallest:
                out.add(lks[0])
    return out


class CostModel:
    """Estimates ``C_query`` for index configurations (sets of :class:`CondInfo` ids)."""

    def __init__(self, rp: RewrittenPattern, conds: list[CondInfo], geo: Geometry,
                 scope: Scope, weights: Weights, leaf_capacity: int, event_width: int, *,
                 before: int = 0,
                 after: int = 0, lookup_pages: dict[int, float] | None = None,
                 lookup_entries: dict[int, float] | None = None,
                 defer_members: bool | None = None) -> None:
        """``defer_members``: whether the planner defers tight blocks' members
        (:func:`deferred_lookups`); default: on a regular stream (``geo.regular``)."""
        self.rp = rp
        self.conds = {c.id: c for c in conds}
        self.geo = geo
        self.scope = scope
        self.weights = weights
        self.leaf_capacity = float(leaf_capacity)
        self.event_width = float(event_width)
        self.leaf_bytes = self.leaf_capacity * self.event_width
        self.interval_bytes = weights.interval_events * self.event_width
        self.nav = before + after
        self.lookup_pages = lookup_pages or {c.lookup: c.pages for c in conds}
        self.lookup_entries = lookup_entries or {c.lookup: c.entries for c in conds}
        self.evaluations = 0
        n = geo.n_events
        self.n_scope = max(scope.n_events, 1e-9)
        self.t_scope = max(float(scope.span), 1.0)
        self.dt = self.t_scope / self.n_scope if self.n_scope > 0 else 1.0
        # selectivity of each condition inside the scope
        self.phi = {}
        for c in conds:
            inside = c.selectivity * n * scope.cond_share(c.condition)
            self.phi[c.id] = min(1.0, inside / self.n_scope) if self.n_scope > 0 else 0.0
        self.region_t = (scope.regions[:, 1] - scope.regions[:, 0]).astype(np.float64) \
            if scope.regions.size else np.empty(0)
        self.region_leaves = scope.leaves.astype(np.float64)
        self.total_leaves = float(scope.n_leaves)
        self.join_leaves = join_leaves(weights, self.leaf_capacity)
        self._cache: dict[frozenset[int], Estimate] = {}
        self._info = {c.id: (c.bs, rp.symbols[c.bs].block, self.phi[c.id], c.lookup)
                      for c in conds}
        self._nlogn = {lk: sort_term(n, False) for lk, n in self.lookup_entries.items()}
        self.defer_members = bool(geo.regular) if defer_members is None else defer_members
        self._pass = {lk: sort_term(n, True) for lk, n in self.lookup_entries.items()}
        """A deferred member's term (:func:`sort_term`)."""
        self._block_min: dict[int, float] = {}  # block -> fewest expected entries of a lookup
        for c in conds:
            b = rp.symbols[c.bs].block
            e = self.lookup_entries[c.lookup]
            self._block_min[b] = min(self._block_min.get(b, math.inf), e)
        self._floor_cache: dict[frozenset[int], float] = {}

    def pio_bytes(self, leaves: float, intervals: float) -> float:
        return leaves * self.leaf_bytes + intervals * self.interval_bytes

    def cost(self, pio_leaves: float, sio_pages: float, sort: float,
             intervals: float = 0.0, *, index_plan: bool = True) -> float:
        """``C_query``; ``index_plan=False`` for full replay (or the CPM's regions), whose
        leaves take :attr:`Weights.w_pio`, the index plans' :meth:`Weights.pio_weight`."""
        w = self.weights
        return (w.pio_weight(index_plan) * self.pio_bytes(pio_leaves, intervals)
                + w.w_sio * sio_pages * PAGE_BYTES + w.w_sort * sort)

    def replay_estimate(self) -> Estimate:
        """No index: replay the scope (the whole stream, or the CPM's regions)."""
        leaves = self.total_leaves
        alpha = self.scope.span / max(self.geo.span, 1)
        runs = float(self.scope.regions.shape[0])
        return Estimate(frozenset(), leaves, 0.0, 0.0,
                        self.cost(leaves, 0, 0, runs, index_plan=False), alpha,
                        0.0, runs, 0.0, self.pio_bytes(leaves, runs), 0.0)

    def estimate(self, config: frozenset[int]) -> Estimate:
        got = self._cache.get(config)
        if got is not None:
            return got
        self.evaluations += 1
        est = self.replay_estimate() if not config else self._estimate(config)
        self._cache[config] = est
        return est

    def _estimate(self, config: frozenset[int]) -> Estimate:
        return self._from_summary(config, *self._summary(config))

    def _summary(self, config: frozenset[int]) -> tuple[tuple[Block, ...], frozenset[int]]:
        """Per selected block ``(block, phi product, first bs, last bs)`` in block order, and
        the distinct lookups of ``config``. O(|config|)."""
        info = self._info
        lookups = set()
        blk: dict[int, list[float]] = {}  # block -> [phi product, first bs, last bs]
        for i in config:
            bs, b, ph, lk = info[i]
            lookups.add(lk)
            e = blk.get(b)
            if e is None:
                blk[b] = [ph, bs, bs]
            else:
                e[0] *= ph
                if bs < e[1]:
                    e[1] = bs
                if bs > e[2]:
                    e[2] = bs
        blocks = tuple((b, e[0], int(e[1]), int(e[2])) for b, e in sorted(blk.items()))
        return blocks, frozenset(lookups)

    def combine(self, left: Estimate, right: Estimate) -> Estimate:
        """The estimate of ``left.config | right.config`` when every block of ``left`` precedes
        every block of ``right`` (the halves of Algorithm 3.2's split): the block summaries are
        concatenated instead of recomputed from the conditions, so one combination costs
        O(blocks) rather than O(|config|). Equal to :meth:`estimate` of the union up to
        floating-point rounding (products and sums associate differently); memoized in the
        same cache."""
        if not left.config:
            return self.estimate(right.config)
        if not right.config:
            return self.estimate(left.config)
        config = left.config | right.config
        got = self._cache.get(config)
        if got is not None:
            return got
        lb, rb = left.summary, right.summary
        if lb is None or rb is None or lb[0][-1][0] >= rb[0][0][0]:
            return self.estimate(config)
        self.evaluations += 1
        if lb[1].isdisjoint(rb[1]):  # the usual case: SIO and sort add up
            est = self._from_summary(config, lb[0] + rb[0], lb[1] | rb[1],
                                     left.sio_pages + right.sio_pages, left.sort + right.sort)
        else:
            est = self._from_summary(config, lb[0] + rb[0], lb[1] | rb[1])
        self._cache[config] = est
        return est

    def deferred(self, config: frozenset[int]) -> set[int]:
        """The lookups of ``config`` the planner defers (:func:`deferred_lookups`); none
        unless :attr:`defer_members`. O(|config|)."""
        if not self.defer_members:
            return set()
        info = self._info
        return deferred_lookups(((info[i][0], info[i][1], info[i][3]) for i in config),
                                self.lookup_entries)

    def index_cost(self, est: Estimate) -> float:
        """A lower bound of the cost of ``est.config`` and of every configuration containing
        it, from its index lookups (``g(C_SIO)``, for Algorithm 3.2's branch and bound): a
        larger configuration reads a superset of the lookups, and C_PIO is never negative. Its
        sort term counts only the lookups read in full that stay so in every larger
        configuration (:meth:`_sort_floor`): adding a smaller lookup to a tight block makes it
        the anchor and defers the one read in full before. O(|config|) the first time."""
        w = self.weights
        return w.w_sio * est.sio_pages * PAGE_BYTES + w.w_sort * self._sort_floor(est)

    def _sort_floor(self, est: Estimate) -> float:
        """``est.sort`` without the lookups a larger configuration could defer: those of a
        basic symbol with one selected condition, used by no other, whose block has a
        condition with fewer expected entries (it could become the anchor). Memoized."""
        if not self.defer_members:
            return est.sort
        got = self._floor_cache.get(est.config)
        if got is not None:
            return got
        info = self._info
        per_bs: dict[int, int] = {}
        uses: dict[int, int] = {}
        for i in est.config:
            bs, _, _, lk = info[i]
            per_bs[bs] = per_bs.get(bs, 0) + 1
            uses[lk] = uses.get(lk, 0) + 1
        deferred = self.deferred(est.config)
        floor = 0.0
        for i in est.config:
            bs, block, _, lk = info[i]
            if lk not in uses:
                continue
            if lk not in deferred and (per_bs[bs] > 1 or uses[lk] > 1
                                       or self.lookup_entries[lk] <= self._block_min[block]):
                floor += self._nlogn[lk]
            else:  # deferred here or in some larger configuration: its pass at the least
                floor += min(self._pass[lk], self._nlogn[lk])
            del uses[lk]  # each lookup once
        self._floor_cache[est.config] = floor
        return floor

    def _from_summary(self, config: frozenset[int], blocks: tuple[Block, ...],
                      lookups: frozenset[int], sio: float | None = None,
                      sort: float | None = None) -> Estimate:
        rp = self.rp
        syms = rp.symbols
        if sio is None or sort is None:
            sio = sort = 0.0
            deferred = self.deferred(config)
            for lk in lookups:
                sio += self.lookup_pages[lk]
                sort += self._pass[lk] if lk in deferred else self._nlogn[lk]
        dt = self.dt
        block_phi = [e[1] for e in blocks]
        span = 0
        if rp.tight:
            span = sum(syms[e[3]].offset - syms[e[2]].offset for e in blocks)
        d = span * dt
        first_bs, last_bs = blocks[0][2], blocks[-1][3]
        p, q = first_bs, rp.n - 1 - last_bs
        gmin = self.geo.gap_min
        gmax = self.geo.gap_max
        gstep = float(gmax) if gmax is not None else dt
        w = rp.window
        wp = math.inf if w is None else w - (p + q) * gmin
        rates = [ph / dt for ph in block_phi[1:]]
        if wp < d:
            prob, mean = 0.0, 0.0
        else:
            prob, mean = hypo_window(rates, wp - d)
        mu = d + mean
        n_i = self.n_scope * block_phi[0] * prob
        fb = syms[first_bs].block == 0 and not rp.lead_star
        lb = syms[last_bs].block == len(rp.blocks) - 1 and not rp.trail_star
        a_rel = (mu - w + q * gmin) if w is not None else -math.inf
        if fb:
            o1 = syms[first_bs].offset if rp.tight else 0
            a_rel = max(a_rel, -o1 * gstep)
        b_rel = (w - p * gmin) if w is not None else math.inf
        if lb:
            ok = (rp.block_len(syms[last_bs].block) - 1 - syms[last_bs].offset) if rp.tight \
                else 0
            if len(blocks) == 1 or not rates or rates[-1] <= 0 or math.isinf(wp):
                latest = mu
            else:
                lam = rates[-1]
                rest = max(wp - mu, 0.0)
                latest = max(mu, wp - (1.0 - math.exp(-lam * rest)) / lam)
            b_rel = min(b_rel, latest + ok * gstep)
        ext = b_rel - a_rel + 1.0 + self.nav * dt
        pio, covered, runs = self._urn(n_i, ext)
        alpha = covered / max(self.geo.span, 1)
        cost = self.cost(pio, sio, sort, runs)
        return Estimate(config, pio, sio, sort, cost, alpha, n_i, runs,
                        ext if math.isfinite(ext) else float(self.t_scope),
                        self.pio_bytes(pio, runs), sio * PAGE_BYTES,
                        {"p_window": prob, "mu_c": mu, "rates": rates},
                        (blocks, lookups))

    def _urn(self, n_i: float, ext: float) -> tuple[float, float, float]:
        """(leaves, covered time, merged intervals) of ``n_i`` intervals of length ``ext``
        spread over the scope's regions in proportion to their length.

        Per region of length ``T`` with ``n`` intervals: the covered time is Cardenas'
        ``T (1 - (1 - ext/T)^n)``; an interval is followed by a gap longer than ``x`` with
        probability ``q(x) = exp(-rho x)``, ``rho = (n - 1) / T`` (the next start is uniform), so
        after joining gaps of up to ``J`` (the join distance in time) there are ``n q(ext + J)``
        runs, and the joined gaps add ``n ((q(ext) - q(ext + J)) / rho - J q(ext + J))``.
        Leaves: covered time over one leaf's time span, plus one boundary leaf per run.
        """
        if n_i <= 0 or self.region_t.size == 0:
            return 0.0, 0.0, 0.0
        if self.region_t.size == 1:
            return _urn_region(n_i, ext, float(self.region_t[0]), float(self.region_leaves[0]),
                               self.join_leaves)
        total = self.region_t.sum()
        leaves = covered = runs = 0.0
        for tr, lv in zip(self.region_t.tolist(), self.region_leaves.tolist()):
            a, b, c = _urn_region(n_i * tr / total, ext, tr, lv, self.join_leaves)
            leaves, covered, runs = leaves + a, covered + b, runs + c
        return leaves, covered, runs


def _urn_region(ni: float, ext: float, tr: float, region_leaves: float, join: float
                ) -> tuple[float, float, float]:
    """:meth:`CostModel._urn` for one region (scalar math)."""
    if ni <= 0 or tr <= 0:
        return 0.0, 0.0, 0.0
    per_leaf = tr / max(region_leaves, 1.0)
    if not math.isfinite(ext) or ext >= tr:
        alpha = min(1.0, ni)
        covered, runs = tr * alpha, min(1.0, ni)
    else:
        # the planner joins two intervals when at most ``join`` whole leaves lie between their
        # boundary leaves; a time gap g has about g / per_leaf - 1 of them, so gaps up to
        # (join + 1) leaves' time are joined
        j = (join + 1.0) * per_leaf
        alpha = 1.0 - (1.0 - ext / tr) ** ni
        rho = max(ni - 1.0, 0.0) / tr
        if rho > 0:
            q_e = math.exp(-rho * ext)
            q_ej = math.exp(-rho * (ext + j))
            gaps = max(0.0, (q_e - q_ej) / rho - j * q_ej)
            runs = max(ni * q_ej, min(1.0, ni)) if ni > 1.0 else min(1.0, ni)
        else:
            gaps, runs = 0.0, min(1.0, ni)
        covered = min(tr, alpha * tr + ni * gaps)
    leaves = min(region_leaves, covered / per_leaf + runs)
    return leaves, covered, runs
