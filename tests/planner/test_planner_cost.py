"""The cost model and the index selection strategies, on synthetic statistics (no store).

* the hypoexponential window probability and conditional mean against Monte Carlo, and the two
  evaluation paths (closed form, phase type) against each other;
* the covered fraction estimate against simulation of Algorithm 3.1 on uniform random data;
* the dissertation's greedy counterexample (A B* C D, 1% / 2% / 3%, window 100): two indexes on
  the adjacent C D beat greedy's A C, and Optimal finds them;
* Algorithm 3.2 is exact over its search space: its choice costs as little as the exhaustive
  minimum over every combination of per-block greedy prefixes, and never more than All, Greedy
  or Budget;
* Pareto frontiers keep exactly the non-dominated points.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.planner.pattern.conditions import Condition, Range
from replaydb.planner.pattern.cost import CondInfo, CostModel, Estimate, Weights
from replaydb.planner.pattern.cpm import whole_stream
from replaydb.planner.pattern.hypo import _closed_form, _phase_type, hypo_window
from replaydb.planner.pattern.intervals import (
    Geometry,
    SymbolResult,
    coalesce_by_leaves,
    replay_intervals,
)
from replaydb.planner.pattern.rewrite import BasicSymbol, RewrittenPattern
from replaydb.planner.pattern.selection import (
    pareto,
    select_all,
    select_budget,
    select_greedy,
    select_optimal,
)


def uniform_geometry(n: int, leaf: int = 64) -> Geometry:
    t = np.arange(1, n + 1, dtype=np.int64)
    starts = np.arange(0, n, leaf)
    counts = np.minimum(leaf, n - starts)
    return Geometry(n, 1, n, 1, 1, starts.astype(np.int64), counts.astype(np.int64),
                    t[starts], t[starts + counts - 1])


def pattern(block_sizes: list[int], window: int | None, lead=False, trail=False):
    syms, blocks, idx = [], [], 0
    for b, size in enumerate(block_sizes):
        blk = []
        for o in range(size):
            syms.append(BasicSymbol(idx, b, o, f"S{idx}",
                                    (Condition("a", (Range(float(idx), float(idx))),),)))
            blk.append(idx)
            idx += 1
        blocks.append(tuple(blk))
    return RewrittenPattern(tuple(syms), tuple(blocks), lead, trail, True, window)


def model(rp: RewrittenPattern, phis: list[float], n: int = 1_000_000,
          weights: Weights | None = None) -> tuple[CostModel, list[CondInfo]]:
    geo = uniform_geometry(n)
    conds = [CondInfo(i, i, rp.symbols[i].conditions[0], i, phi, phi * n,
                      max(1.0, phi * n / 341)) for i, phi in enumerate(phis)]
    return CostModel(rp, conds, geo, whole_stream(geo), weights or Weights(), 64, 128), conds


# --------------------------------------------------------------------------- hypoexponential
@pytest.mark.parametrize("rates,x", [((0.1,), 10.0), ((0.1, 0.2), 15.0),
                                     ((0.05, 0.05, 0.05), 40.0), ((0.3, 0.30001, 0.1), 8.0),
                                     ((0.02, 0.5, 0.01, 0.2), 120.0)])
def test_hypo_window_matches_monte_carlo(rates, x) -> None:
    rng = np.random.default_rng(3)
    s = sum(rng.exponential(1 / r, 400_000) for r in rates)
    p, mu = hypo_window(rates, x)
    assert p == pytest.approx((s <= x).mean(), abs=0.005)
    assert mu == pytest.approx(s[s <= x].mean(), rel=0.02)


def test_hypo_closed_form_and_phase_type_agree() -> None:
    for rates, x in [((0.1, 0.2, 0.3), 5.0), ((0.001, 0.3, 0.02), 300.0),
                     ((0.5, 0.25, 0.3, 0.01), 1000.0)]:
        s1, i1 = _closed_form(rates, x)
        s2, i2 = _phase_type(rates, x)
        assert s1 == pytest.approx(s2, rel=1e-9, abs=1e-300)
        assert i1 == pytest.approx(i2, rel=1e-9)
    assert hypo_window((), 5.0) == (1.0, 0.0)
    assert hypo_window((0.0, 1.0), 5.0)[0] == 0.0
    assert hypo_window((0.5,), math.inf) == (1.0, 2.0)


# --------------------------------------------------------------------------- covered fraction
@pytest.mark.parametrize("join", [0, 4, 16])
@pytest.mark.parametrize("sizes,phis,window", [
    ([1, 1], [0.002, 0.01], 300),
    ([2, 1], [0.05, 0.05, 0.02], 300),
    ([1, 1, 1], [0.003, 0.02, 0.05], 200),
    ([1], [0.0005], 300),
])
def test_covered_fraction_estimate_matches_simulation(sizes, phis, window, join) -> None:
    """Estimated leaves replayed within 8% of Algorithm 3.1 on uniform random data (with
    intervals joined across gaps of up to ``join`` leaves, as the planner does; measured: at most
    6.2%)."""
    n = 400_000
    rp = pattern(sizes, window, lead=True, trail=True)
    m, conds = model(rp, phis, n, Weights(interval_events=join * 64))
    est = m.estimate(frozenset(c.id for c in conds))
    rng = np.random.default_rng(11)
    geo = m.geo
    sel = {}
    for i, phi in enumerate(phis):
        seq = np.flatnonzero(rng.random(n) < phi).astype(np.int64)
        sel[i] = SymbolResult(seq, seq + 1)
    iv, _ = replay_intervals(rp, sel, geo)
    iv = coalesce_by_leaves(iv, geo, join)
    first = np.searchsorted(geo.leaf_t_max, iv[:, 0])
    last = np.searchsorted(geo.leaf_t_min, iv[:, 1] - 1, side="right") - 1
    leaves = float((last - first + 1).sum())
    assert est.pio_leaves == pytest.approx(leaves, rel=0.08), (est.as_dict(), leaves)


# --------------------------------------------------------------------------- selection
def test_greedy_counterexample_of_the_dissertation() -> None:
    """PQ = (A, B*, C, D), window 100 events, phi A/C/D = 1% / 2% / 3% (3.4.3)."""
    rp = pattern([1, 2], 100, lead=False, trail=False)  # A true* C D
    m, conds = model(rp, [0.01, 0.02, 0.03])
    a, c, d = (frozenset({i}) for i in range(3))
    ac, cd = m.estimate(a | c), m.estimate(c | d)
    assert cd.candidates < ac.candidates / 5
    assert cd.pio_leaves < ac.pio_leaves
    opt = select_optimal(m, conds)
    two = opt.frontiers[2]
    assert any(e.config == cd.config for e in two)
    # A C reads fewer index pages, so it stays on the frontier, but costs more in all
    assert cd.cost < ac.cost
    assert min(two, key=lambda e: e.cost).config == cd.config
    # greedy's two-index configuration is A C (the two most selective)
    g2 = sorted(conds, key=lambda c: m.phi[c.id])[:2]
    assert frozenset(c.id for c in g2) == ac.config


@st.composite
def instances(draw):
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    rp = pattern(sizes, draw(st.sampled_from([50, 300, 1000])),
                 draw(st.booleans()), draw(st.booleans()))
    phis = [draw(st.floats(0.0005, 0.3)) for _ in range(rp.n)]
    w = Weights(draw(st.floats(0.1, 3)), draw(st.floats(0.1, 5)), draw(st.floats(0.0, 30)))
    return rp, phis, w


def _exhaustive(m, conds, rp) -> float:
    """Cheapest configuration over Algorithm 3.2's search space (per-block greedy prefixes)."""
    per_block: dict[int, list[int]] = {}
    for c in sorted(conds, key=lambda c: (m.phi[c.id], c.id)):
        per_block.setdefault(rp.symbols[c.bs].block, []).append(c.id)
    best = math.inf
    for ks in itertools.product(*[range(len(v) + 1) for v in per_block.values()]):
        cfg = frozenset(i for k, v in zip(ks, per_block.values()) for i in v[:k])
        if cfg:
            best = min(best, m.estimate(cfg).cost)
    return best


class AdditiveModel:
    """Costs that add up over conditions: there Pareto composition is exact."""

    def __init__(self, rp, a, b, c) -> None:
        self.rp = rp
        self.a, self.b, self.c = a, b, c
        self.phi = {i: a[i] for i in range(len(a))}

    def estimate(self, cfg):
        p = sum(self.a[i] for i in cfg) if cfg else 100.0
        sio = sum(self.b[i] for i in cfg)
        so = sum(self.c[i] for i in cfg)
        return Estimate(frozenset(cfg), p, sio, so, p + 2 * sio + 3 * so, 0, 0, 0, 0, p)

    def combine(self, left, right):
        return self.estimate(left.config | right.config)

    def index_cost(self, est):
        return 2 * est.sio_pages + 3 * est.sort


@settings(max_examples=150, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_algorithm_3_2_is_exact_for_decomposable_costs(inst, rnd) -> None:
    """Pareto composition (Rosenman and Gero) is exact when the objectives add up over the
    blocks; then Algorithm 3.2 finds the cheapest configuration of its search space."""
    rp = inst[0]
    n = rp.n
    a = [rnd.uniform(0, 10) for _ in range(n)]
    am = AdditiveModel(rp, a, [rnd.uniform(0, 5) for _ in range(n)],
                       [rnd.uniform(0, 1) for _ in range(n)])
    conds = [CondInfo(i, i, None, i, a[i], 1, 1) for i in range(n)]
    opt = select_optimal(am, conds)
    assert opt.estimate.cost == pytest.approx(_exhaustive(am, conds, rp), rel=1e-12)


def _random_instance(rng: np.random.Generator, max_blocks: int
                     ) -> tuple[RewrittenPattern, list[float], Weights]:
    """A random pattern (1 to ``max_blocks`` blocks of 1-3 symbols), selectivities, weights."""
    sizes = [int(x) for x in rng.integers(1, 4, int(rng.integers(1, max_blocks + 1)))]
    rp = pattern(sizes, int(rng.choice([50, 300, 1000])), bool(rng.integers(0, 2)),
                 bool(rng.integers(0, 2)))
    phis = list(rng.uniform(0.0005, 0.3, rp.n))
    w = Weights(float(rng.uniform(0.1, 3)), float(rng.uniform(0.1, 5)),
                float(rng.uniform(0, 30)))
    return rp, phis, w


def test_optimal_against_exhaustive_and_baselines() -> None:
    """With the real (non-decomposable) cost model Algorithm 3.2 is a heuristic: the C_PIO of
    a union is not a function of the parts' C_PIO, so a pruned partial configuration can
    combine better. On these 300 seeded random instances Optimal finds the exhaustive optimum
    of its search space in 298 (the worst other costs 1.12x), and costs on average 2.7% less
    than Greedy, 11% less than Budget and 2.9x less than All (never more than any of them).
    The assertions leave some room: at least 95% exact, at most 1.25x, never worse on
    average."""
    rng = np.random.default_rng(21)
    exact = 0
    ratios, vs = [], {"all": [], "greedy": [], "budget": []}
    for _ in range(300):
        rp, phis, w = _random_instance(rng, 4)
        m, conds = model(rp, phis, 500_000, w)
        opt = select_optimal(m, conds).estimate.cost
        best = _exhaustive(m, conds, rp)
        exact += opt <= best * (1 + 1e-12)
        ratios.append(opt / best)
        for name, fn in (("all", select_all), ("greedy", select_greedy),
                         ("budget", select_budget)):
            vs[name].append(fn(m, conds).estimate.cost / opt)
    assert exact >= 0.95 * 300, exact
    assert max(ratios) <= 1.25, max(ratios)
    for name, r in vs.items():
        assert np.mean(r) >= 1.0, (name, np.mean(r))


def test_pruned_optimal_chooses_as_the_whole_enumeration() -> None:
    """Branch and bound in Algorithm 3.2 (cutting combinations whose index cost alone exceeds
    the cheapest plan found) changes what is examined, never what is chosen; and combining
    two halves' summaries (:meth:`CostModel.combine`) estimates what :meth:`estimate` does."""
    rng = np.random.default_rng(5)
    fewer = 0
    for _ in range(200):
        rp, phis, w = _random_instance(rng, 6)
        m, conds = model(rp, phis, 500_000, w)
        whole = select_optimal(m, conds, prune=False)
        m2, conds2 = model(rp, phis, 500_000, w)
        cut = select_optimal(m2, conds2)
        assert cut.config == whole.config
        assert cut.estimate.cost == pytest.approx(whole.estimate.cost, rel=1e-9)
        assert cut.examined <= whole.examined
        fewer += cut.examined < whole.examined
        direct = model(rp, phis, 500_000, w)[0]  # estimates from the conditions, no combine
        for front in whole.frontiers[1:]:
            for e in front:
                fresh = direct.estimate(e.config)
                # products of selectivities associate differently: rounding only (the
                # urn formula's 1 - (1 - x)^n amplifies it for tiny covered fractions)
                assert fresh.cost == pytest.approx(e.cost, rel=1e-6)
                assert fresh.pio_leaves == pytest.approx(e.pio_leaves, rel=1e-6, abs=1e-9)
    assert fewer > 0


def test_pareto_keeps_non_dominated() -> None:
    def e(p, s, so=0.0):
        return Estimate(frozenset({int(p * 10 + s)}), p, s, so, p + s, 0, 0, 0, 0, p)
    pts = [e(1, 5), e(2, 3), e(3, 4), e(4, 1), e(2, 3, 1.0), e(5, 0.5)]
    front = pareto(pts)
    assert [(x.pio_leaves, x.sio_pages, x.sort) for x in front] == [
        (1, 5, 0), (2, 3, 0), (4, 1, 0), (5, 0.5, 0)]


# --------------------------------------------------------------------------- deferred members
def _nlogn(n: float) -> float:
    return n * math.log2(n) if n > 1 else 0.0


def test_deferred_members_are_not_sorted() -> None:
    """A tight block's selected members other than its smallest lookup (the anchor) are
    deferred on a regular stream: only tested against the block's candidates, never sorted,
    so the sort term counts ``n log2 n`` of the anchor and of the lookups of other blocks and
    one pass, ``n``, of each deferred member; without deferral (``defer_members=False``, as on
    an irregular stream) every lookup counts ``n log2 n``."""
    n = 1_000_000
    rp = pattern([3, 1], 100)
    m, conds = model(rp, [0.05, 0.001, 0.02, 0.03], n)
    assert m.geo.regular and m.defer_members
    assert m.deferred(frozenset({0, 1, 2})) == {0, 2}
    assert m.estimate(frozenset({0, 1, 2})).sort == pytest.approx(
        _nlogn(0.001 * n) + 0.05 * n + 0.02 * n)
    assert m.estimate(frozenset({0, 1, 2, 3})).sort == pytest.approx(
        _nlogn(0.001 * n) + 0.05 * n + 0.02 * n + _nlogn(0.03 * n))
    assert m.deferred(frozenset({0, 3})) == set()  # one member per block: read in full
    geo = uniform_geometry(n)
    eager = CostModel(rp, conds, geo, whole_stream(geo), Weights(), 64, 128,
                      defer_members=False)
    assert eager.deferred(frozenset({0, 1, 2})) == set()
    assert eager.estimate(frozenset({0, 1, 2})).sort == pytest.approx(
        sum(_nlogn(p * n) for p in (0.05, 0.001, 0.02)))
    # a deferred member costs a pass, a twentieth or less of its sort here
    w = Weights(1e-9, 1e-12, 1e-9)
    mw, _ = model(rp, [0.05, 0.001, 0.02, 0.03], n, weights=w)
    c1, c3 = mw.estimate(frozenset({1})), mw.estimate(frozenset({0, 1, 2}))
    members = w.w_sort * (_nlogn(0.05 * n) + _nlogn(0.02 * n))
    assert mw.index_cost(c3) - mw.index_cost(c1) - w.w_sio * (c3.sio_pages - c1.sio_pages) \
        * 8192 == pytest.approx(w.w_sort * (0.05 * n + 0.02 * n))
    assert w.w_sort * (0.05 * n + 0.02 * n) < members / 14


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3),
       st.lists(st.floats(1e-4, 0.2), min_size=9, max_size=9),
       st.lists(st.floats(1e-4, 0.2), min_size=9, max_size=9))
def test_index_cost_bounds_every_larger_configuration(sizes, phis, entries) -> None:
    """Algorithm 3.2's branch and bound needs ``index_cost(C) <= cost(D)`` for every ``D``
    containing ``C``; with deferred members a larger configuration can sort less (a smaller
    lookup becomes the anchor), so the bound leaves out what could be deferred. Checked over
    every pair of configurations, with expected entries in another order than the
    selectivities."""
    n = 1_000_000
    rp = pattern(sizes, 60)
    k = rp.n
    geo = uniform_geometry(n)
    conds = [CondInfo(i, i, rp.symbols[i].conditions[0], i, phis[i], entries[i] * n,
                      max(1.0, entries[i] * n / 341)) for i in range(k)]
    m = CostModel(rp, conds, geo, whole_stream(geo), Weights(1e-9, 1e-11, 1e-9), 64, 128)
    configs = [frozenset(c) for r in range(1, k + 1) for c in itertools.combinations(range(k), r)]
    for c in configs:
        low = m.index_cost(m.estimate(c))
        assert low <= m.estimate(c).cost * (1 + 1e-9)
        for d in configs:
            if c < d:
                assert low <= m.estimate(d).cost * (1 + 1e-9), (sorted(c), sorted(d))
