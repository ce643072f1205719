"""Seeded stress tests of the in-memory TAB+-tree: invariants after every step, aggregates vs a
flat model, the checker catching planted faults."""

from __future__ import annotations

import numpy as np
import pytest

from replaydb.store.tree import AggSpec, TABTree, summarize_leaves

SPECS = [AggSpec("x", "float64"), AggSpec("k", "int64")]


def _leaves(t, x, k, seq0, B):
    starts = np.arange(0, len(t), B, dtype=np.int64)
    lv = summarize_leaves(np.asarray(t), seq0, {"x": (np.asarray(x), None),
                                                 "k": (np.asarray(k), None)}, SPECS, starts)
    lv["file_id"] = np.zeros(len(starts), np.int32)
    lv["rg"] = np.arange(len(starts), dtype=np.int32)
    return lv


@pytest.mark.parametrize("seed", range(12))
def test_random_suffix_rewrites_keep_invariants(seed):
    rng = np.random.default_rng(seed)
    B, D = int(rng.integers(1, 9)), int(rng.integers(2, 6))
    tree = TABTree(SPECS, D, B)
    t, x, k = [], [], []
    for _ in range(120):
        op = rng.random()
        if op < 0.15 and tree.n_leaves:
            keep = int(rng.integers(0, tree.n_leaves + 1))
            tree.truncate_leaves(keep)
            n = int(tree.n_events)
            del t[n:], x[n:], k[n:]
        else:
            # rewrite from a random leaf boundary: append new events after the kept prefix
            keep_leaf = int(rng.integers(max(0, tree.n_leaves - 3), tree.n_leaves + 1))
            s0 = int(tree.leaves.col("seq_min")[keep_leaf]) if keep_leaf < tree.n_leaves \
                else tree.n_events
            base = t[s0 - 1] if s0 else 0
            m = int(rng.integers(1, 4 * B + 3))
            del t[s0:], x[s0:], k[s0:]
            t += list(base + np.cumsum(rng.integers(0, 3, m)))
            x += list(rng.normal(size=m))
            k += list(rng.integers(-50, 50, m))
            lv = _leaves(t[s0:], x[s0:], k[s0:], s0, B)
            tree.replace_leaves_from(keep_leaf, lv)
        assert tree.check() == []
        assert tree.n_events == len(t)
        if tree.n_leaves:
            i = int(rng.integers(0, tree.n_leaves))
            j = int(rng.integers(i + 1, tree.n_leaves + 1))
            p, touched = tree.aggregate_leaves(i, j)
            a = int(tree.leaves.col("seq_min")[i])
            b = int(tree.leaves.col("seq_min")[j - 1] + tree.leaves.col("count")[j - 1])
            assert p.count == b - a
            assert np.isclose(p.attrs["x"][2], sum(x[a:b]))
            assert p.attrs["k"][0] == min(k[a:b]) and p.attrs["k"][1] == max(k[a:b])
            assert touched <= 2 * D * tree.height


def test_checker_finds_planted_faults():
    tree = TABTree(SPECS, 3, 4)
    n = 100
    tree.replace_leaves_from(0, _leaves(np.arange(n), np.ones(n), np.ones(n, np.int64), 0, 4))
    assert tree.check() == []
    tree.levels[1].col("k.sum")[2] += 1
    assert any("k.sum" in p for p in tree.check())
    tree.levels[1].col("k.sum")[2] -= 1
    tree.leaves.col("seq_min")[5] += 1
    assert any("seq" in p for p in tree.check())


@pytest.mark.parametrize("seed", range(20))
def test_merge_values_against_numpy(seed):
    """Raw events folded into a Partial (float attributes in one compiled pass, NaN and masked
    values skipped; integers exactly) against NumPy on the kept values."""
    from replaydb.store.tree import Partial

    rng = np.random.default_rng(seed)
    specs = [AggSpec("x", "float64"), AggSpec("y", "float64"), AggSpec("k", "int64")]
    n = int(rng.integers(1, 300))
    x = rng.normal(size=n)
    x[rng.random(n) < 0.2] = np.nan
    y = rng.normal(size=n)
    k = rng.integers(-2**40, 2**40, n)
    vy = rng.random(n) < (0.0 if seed % 4 == 0 else 0.7)  # some rows with no valid y at all
    vk = rng.random(n) < 0.5
    p = Partial.empty(specs)
    p.merge_values(np.arange(n), {"x": (x, None), "y": (y, vy), "k": (k, vk)}, specs)
    assert p.count == n
    for name, kept in (("x", x[~np.isnan(x)]), ("y", y[vy]), ("k", k[vk])):
        mn, mx, sm, cnt = p.attrs[name]
        assert cnt == len(kept)
        if len(kept):
            assert mn == kept.min() and mx == kept.max()
            assert np.isclose(sm, kept.sum(), rtol=1e-12, atol=1e-9)
        else:
            assert sm == 0
    assert p.attrs["k"][2] == int(k[vk].sum())  # integers stay exact
