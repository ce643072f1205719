"""FlatFAT slide tree and per-group SlideState: seeded stress tests with the invariant checker."""

from __future__ import annotations

import numpy as np
import pytest

from replaydb.operators.expr import Column
from replaydb.operators.window.aggregates import (
    INT_MAX,
    AggSpec,
    concat,
    make_layout,
    reduce_segments,
    take,
)
from replaydb.operators.window.assign import SliceGeometry
from replaydb.operators.window.flatfat import FlatFAT
from replaydb.operators.window.sliding import SlideState

X = Column("x")
AGGS = (AggSpec("COUNT", None, "n"), AggSpec("SUM", X, "s"), AggSpec("MIN", X, "mn"),
        AggSpec("MAX", X, "mx"), AggSpec("FIRST", X, "f"), AggSpec("LAST", X, "l"))
LAYOUT = make_layout(AGGS, {X: "int64"})


def random_leaves(rng: np.random.Generator, n: int, seq0: int) -> dict[str, np.ndarray]:
    """``n`` random partials (some empty) with increasing seqs starting at ``seq0``."""
    counts = rng.integers(0, 4, n)
    total = int(counts.sum())
    vals = rng.integers(-50, 50, total)
    seq = seq0 + np.arange(total)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    nonempty = counts > 0
    parts = LAYOUT.identity(n)
    if total:
        red = reduce_segments(LAYOUT, starts[nonempty], total, [(vals, None)], seq)
        for k in parts:
            parts[k][nonempty] = red[k]
    return parts


def brute_total(parts: dict[str, np.ndarray]) -> dict[str, int]:
    """Merge of all elements, element by element (no scans)."""
    acc = LAYOUT.identity(1)
    for i in range(len(parts["n"])):
        acc = LAYOUT.combine(acc, take(parts, slice(i, i + 1)))
    return {k: v[0] for k, v in acc.items()}


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 64, 100])
def test_flatfat_random_updates_keep_invariants(size: int) -> None:
    rng = np.random.default_rng(size)
    fat = FlatFAT(LAYOUT, size)
    leaves = LAYOUT.identity(size)
    seq = 0
    for _ in range(150):
        pos = int(rng.integers(0, 3 * size))
        n = int(rng.integers(1, size + 1))
        vals = random_leaves(rng, n, seq)
        seq += 1000
        fat.set_leaves(pos, vals)
        idx = (pos + np.arange(n)) % size
        for k in leaves:
            leaves[k][idx] = vals[k]
        fat._check()
        assert brute_total(fat.root()) == brute_total(leaves)
        qpos, qn = int(rng.integers(0, size)), int(rng.integers(0, size + 1))
        qidx = (qpos + np.arange(qn)) % size
        assert brute_total(fat.range_total(qpos, qn)) == brute_total(take(leaves, qidx))
        g = fat.gather(qpos, qn)
        for k in leaves:
            assert np.array_equal(g[k], leaves[k][qidx])
    start = int(rng.integers(0, size))
    new = random_leaves(rng, size, seq)
    fat.load(new, start)
    fat._check()
    got = fat.in_order(start)
    for k in new:
        assert np.array_equal(got[k], new[k])


def test_first_last_are_order_independent() -> None:
    """FIRST/LAST merge by seq: the root is right even when the ring wraps around."""
    fat = FlatFAT(LAYOUT, 4)
    a = random_leaves(np.random.default_rng(1), 4, 0)
    fat.load(a, 3)  # oldest slice at position 3, newest wrapped to 0..2
    root = fat.root()
    nonempty = a["n"] > 0
    if nonempty.any():
        assert root["fk0"][0] == a["fk0"][nonempty].min()
        assert root["lk0"][0] == a["lk0"][nonempty].max()
    assert LAYOUT.identity(1)["fk0"][0] == INT_MAX


@pytest.mark.parametrize("size,slide", [(1, 1), (4, 1), (6, 4), (5, 9), (10, 3), (30, 30),
                                        (64, 8)])
def test_slide_state_stress_against_brute_force(size: int, slide: int) -> None:
    """Feed random per-slice partials in random chunks; every window equals the brute merge."""
    rng = np.random.default_rng(size * 31 + slide)
    geom = SliceGeometry(size, slide)
    p, W = geom.p, geom.W
    n_slices = 40 * W + 50
    # sparse slices, some long runs of empties
    occupied = rng.random(n_slices) < 0.4
    occupied[rng.integers(0, n_slices, 3)] = False
    all_parts = random_leaves(rng, n_slices, 0)
    for k in all_parts:
        all_parts[k][~occupied] = LAYOUT.identity(1)[k][0]
    occupied &= all_parts["n"] > 0
    first = int(np.flatnonzero(occupied)[0]) if occupied.any() else 0
    k_first = (first - W) // p + 1
    state = SlideState(LAYOUT, geom, k_first)
    got: dict[int, dict] = {}
    pos = first
    while pos < n_slices:
        step = int(rng.integers(1, 3 * W + 3))
        hi = min(n_slices, pos + step)
        idx = np.flatnonzero(occupied[pos:hi]) + pos
        ks, wp = state.feed(idx, take(all_parts, idx), hi)
        state._check()
        for j, k in enumerate(ks.tolist()):
            got[k] = {c: v[j] for c, v in wp.items()}
        pos = hi
    last_k = (n_slices - W) // p
    for k in range(k_first, last_k + 1):
        idx = np.arange(k * p, k * p + W)
        window = take(all_parts, idx[idx >= 0])
        exp = brute_total(window)
        if exp["n"] == 0:
            assert k not in got
        else:
            assert brute_total(concat([LAYOUT.identity(0), {c: np.array([v]) for c, v in
                                                            got[k].items()}])) == exp, k
