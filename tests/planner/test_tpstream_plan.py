"""Evaluation orders: the cost model's DP is optimal, no cross products, adaptivity."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa

from replaydb.operators.expr import Column
from replaydb.operators.tpstream import Constraint, SituationDef, TPStream, TPStreamConfig
from replaydb.operators.tpstream.evaluation_order import EvaluationPlanner
from replaydb.operators.tpstream.relations import ALL_MASK


def random_relm(rng: np.random.Generator, S: int, p: float) -> np.ndarray:
    m = np.zeros((S, S), np.int64)
    for a in range(S):
        for b in range(a + 1, S):
            if rng.random() < p:
                mask = int(rng.integers(1, ALL_MASK + 1))
                from replaydb.operators.tpstream.relations import inverse_mask

                m[a, b] = mask
                m[b, a] = inverse_mask(mask)
    return m


def connected_orders(relm: np.ndarray, i: int) -> list[list[int]]:
    S = relm.shape[0]
    out = []
    for perm in itertools.permutations([j for j in range(S) if j != i]):
        order = [i, *perm]
        ok = True
        for k in range(1, S):
            bound = order[:k]
            has = any(relm[b, order[k]] for b in bound)
            rest_conn = any(any(relm[b, j] for b in bound) for j in order[k:])
            if not has and rest_conn:
                ok = False
                break
        if ok:
            out.append(order)
    return out


def test_dp_finds_the_cheapest_order_without_cross_products() -> None:
    rng = np.random.default_rng(5)
    for _ in range(60):
        S = int(rng.integers(2, 6))
        relm = random_relm(rng, S, 0.6)
        pl = EvaluationPlanner(relm, "adaptive", 0.01, 0.2)
        pl.ema_buf = rng.uniform(1, 200, S)
        sel = rng.uniform(0.001, 0.9, (S, S))
        pl.ema_sel = (sel + sel.T) / 2
        pl.plan()
        for i in range(S):
            cands = connected_orders(relm, i)
            best = min(pl.cost_of(i, o) for o in cands)
            chosen = list(pl.orders[i])
            assert chosen in cands
            assert abs(pl.cost_of(i, chosen) - best) <= 1e-6 * max(1.0, best)
            assert np.isclose(pl.costs[i], pl.cost_of(i, chosen))


def test_connected_patterns_never_join_without_a_constraint() -> None:
    relm = np.zeros((4, 4), np.int64)
    for a, b in [(0, 1), (1, 2), (2, 3)]:          # a chain
        relm[a, b] = relm[b, a] = 1
    for order in ("adaptive", "static", (3, 2, 1, 0), (0, 3, 1, 2)):
        pl = EvaluationPlanner(relm, order, 0.01, 0.2)
        for i in range(4):
            assert all(pl.appl_n[i, k] > 0 for k in range(1, 4)), (order, pl.orders[i])


def test_disconnected_patterns_fall_back_to_cross_products_between_components() -> None:
    relm = np.zeros((4, 4), np.int64)
    relm[0, 1] = relm[1, 0] = 1
    relm[2, 3] = relm[3, 2] = 1
    pl = EvaluationPlanner(relm, "adaptive", 0.01, 0.2)
    for i in range(4):
        o = list(pl.orders[i])
        # the trigger's component first, then the other one
        assert set(o[:2]) in ({0, 1}, {2, 3})
        assert [pl.appl_n[i, k] for k in range(1, 4)] == [1, 0, 1]


def test_fixed_priority_is_greedy_and_connected() -> None:
    relm = np.zeros((3, 3), np.int64)
    relm[0, 2] = relm[2, 0] = 1
    relm[1, 2] = relm[2, 1] = 1
    pl = EvaluationPlanner(relm, (0, 1, 2), 0.01, 0.2)
    assert pl.orders[0].tolist() == [0, 2, 1]     # 1 is not connected to {0}: take 2 first
    assert pl.orders[1].tolist() == [1, 2, 0]
    assert pl.orders[2].tolist() == [2, 0, 1]


def phase_table(n_per_phase: int, ratios: list[tuple[int, int, int]], seed: int = 0) -> pa.Table:
    """Three boolean streams; per phase, stream j's situations are ``ratio_j`` times rarer."""
    rng = np.random.default_rng(seed)
    cols = {f"a{j}": [] for j in range(3)}
    for ratio in ratios:
        for j in range(3):
            x = np.zeros(n_per_phase, bool)
            pos = int(rng.integers(0, 50))
            while pos < n_per_phase:
                d = int(rng.integers(10, 101))
                g = int(rng.integers(10, 51)) * ratio[j]
                x[pos:pos + d] = True
                pos += d + g
            cols[f"a{j}"].append(x)
    n = n_per_phase * len(ratios)
    data = {"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64)}
    data.update({k: np.concatenate(v) for k, v in cols.items()})
    return pa.table(data)


def q3(order: object) -> TPStreamConfig:
    sits = tuple(SituationDef(n, Column(f"a{j}")) for j, n in enumerate("ABC"))
    cons = (Constraint("A", "B", ("before",)), Constraint("A", "C", ("before",)),
            Constraint("B", "C", ("before",)))
    return TPStreamConfig(situations=sits, constraints=cons, window=3000, order=order)


def test_adaptive_replans_when_the_workload_changes_and_static_does_not() -> None:
    tab = phase_table(60_000, [(1, 1, 1), (1, 20, 20), (20, 1, 20)])
    results = {}
    for order in ("adaptive", "static", ("A", "B", "C"), ("C", "B", "A")):
        op = TPStream(q3(order), tab.schema)
        for b in tab.to_batches(max_chunksize=20_000):
            op.push(b)
        op.flush()
        results[order] = (op.results(), op.stats())
    ad = results["adaptive"][1]
    assert ad["replans"] > 0
    assert results["static"][1]["replans"] == 0
    ref = results["adaptive"][0]
    for order, (out, _) in results.items():
        assert out.equals(ref), order
    # the statistics moved the plan away from the initial (Table 5.3) one: for a new B, the C
    # buffer is empty of candidates (``B before C`` needs C to start after B ended), so the
    # observed selectivity sends B -> C first
    assert ad["orders"] != results["static"][1]["orders"]
    assert ad["orders"]["B"] == ["B", "C", "A"]
