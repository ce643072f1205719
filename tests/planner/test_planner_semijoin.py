"""The semi-join of index results (:mod:`replaydb.planner.pattern.semijoin`) and the
seq-only sort of the lookups whose times Algorithm 3.1 does not read: the same replay
intervals as without them, on random streams, windows and queries, and the kernels against
brute force."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from replaydb.indexes.bitsets import sort_unique
from replaydb.planner.pattern.semijoin import TimeMask
from replaydb.planner.query import QueryOptions, plan_query
from tests.planner_cases import same_as_full_replay, xy_range_query, xy_store


def _brute_keep(mask: TimeMask, seq: np.ndarray, t: np.ndarray) -> np.ndarray:
    b = (t - mask.t0) >> mask.shift
    ok = (b >= 0) & (b < mask.mask.size)
    ok[ok] = mask.mask[b[ok]] == 1
    return ok


@pytest.mark.parametrize("seed", range(12))
def test_time_mask_against_brute_force(seed: int) -> None:
    """Seeded stress: narrowing is the AND of each event set's dilation by the window (whole
    buckets), filtering keeps exactly the events in set buckets, the invariant holds."""
    rng = np.random.default_rng(seed)
    t_min = int(rng.integers(-1000, 1000))
    span = int(rng.integers(1, 200_000))
    w = int(rng.integers(0, 3000))
    m = TimeMask.whole(t_min, t_min + span, w)
    m.check()
    assert m.share == 1.0 and m.mask.size <= (1 << 18) + 1
    want = np.ones(m.mask.size, bool)
    for _ in range(int(rng.integers(1, 4))):
        t = rng.integers(t_min, t_min + span + 1, int(rng.integers(0, 300)))
        reach = np.zeros(m.mask.size, bool)
        for x in t:  # brute force: every bucket that [x - w, x + w] touches
            lo = max(0, (int(x) - w - t_min) >> m.shift)
            hi = min(m.mask.size - 1, (int(x) + w - t_min) >> m.shift)
            reach[lo:hi + 1] = True
        want &= reach
        m.narrow(rng.permutation(t))
        m.check()
        assert np.array_equal(m.mask == 1, want)
    seq = rng.permutation(5000)[:700].astype(np.int64)
    t = rng.integers(t_min - 10, t_min + span + 10, seq.size)
    ks, kt = m.keep(seq, t)
    ok = _brute_keep(m, seq, t)
    assert np.array_equal(ks, seq[ok]) and np.array_equal(kt, t[ok])


def test_predicted_share_follows_the_measured_one() -> None:
    rng = np.random.default_rng(1)
    span, w = 2_000_000, 50
    for n in (500, 5000, 40_000):
        m = TimeMask.whole(0, span, w)
        pred = m.predicted_share([n])
        m.narrow(rng.integers(0, span + 1, n))
        assert abs(m.share - pred) < 0.05
    assert TimeMask.whole(0, span, w).predicted_share([]) == 1.0


def test_sort_unique_against_numpy() -> None:
    rng = np.random.default_rng(2)
    for n, bound in ((40_000, 100_000), (200_000, 5_000_000), (70_000, 70_000)):
        v = rng.permutation(bound)[:n].astype(np.int64)
        assert np.array_equal(sort_unique(v, bound), np.sort(v))
    v = rng.permutation(100_000)[:50_000]
    v[7] = v[9]
    assert sort_unique(v, 100_000) is None  # a repeat: the caller sorts another way
    assert sort_unique(np.arange(40_000), 40_000 * 300) is None  # too sparse
    with pytest.raises(ValueError):
        sort_unique(np.arange(40_000) - 1, 40_000)
    with pytest.raises(ValueError):
        sort_unique(np.arange(40_000), 39_999)


@contextmanager
def _store_case(seed: int, n: int, leaf: int) -> Iterator[Any]:
    """Stream ``s`` of ``n`` events (time gaps 0-3, ties included) with indexed ``x`` in
    0..49 and ``y`` in 0..29."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(0, 4, n)).astype(np.int64)
    with xy_store(t, rng, leaf) as store:
        yield store


@settings(max_examples=25, deadline=None)
@given(seed=hs.integers(0, 10_000), w=hs.integers(0, 40),
       shape=hs.sampled_from(["A B C", "A B* C D", "A C B", "A B C D E", "A+ B C"]),
       lo=hs.lists(hs.integers(0, 48), min_size=5, max_size=5))
def test_semi_join_and_seq_only_sorts_change_no_interval(seed: int, w: int, shape: str,
                                                         lo: list[int]) -> None:
    """Random stream, window and pattern: the intervals with the semi-join forced on, off and
    by the default rule are the same, and the plan's matches are full replay's."""
    q = xy_range_query(shape, lo, w)
    with _store_case(seed, 3000, 16) as store:
        got = {}
        for sj in (False, True, "always"):
            p = plan_query(store, q, QueryOptions(plan="all", extra={
                "semi_join": sj, "rivals": False, "weights": {"interval_events": 0.0}}))
            got[sj] = p.intervals
        assert got[True] == got[False] == got["always"]
        same_as_full_replay(store, q, [("all", {"semi_join": "always"}),
                                       ("optimal", {"semi_join": "always"})])


def test_the_semi_join_filters_where_the_window_is_narrow() -> None:
    """A narrow window and a rare first symbol: the big lookup is cut before its sort."""
    with _store_case(5, 20_000, 64) as store:
        q = ("SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B) WITHIN 3 "
             "DEFINE A AS x = 7, B AS y <= 20)")
        p = plan_query(store, q, QueryOptions(plan="all", extra={"rivals": False}))
        reads = p.pattern_state.index_reads
        assert reads["entries_semi_joined"] < reads["entries_returned"] / 3
        off = plan_query(store, q, QueryOptions(plan="all", extra={"semi_join": False}))
        assert "entries_semi_joined" not in off.pattern_state.index_reads
        assert off.intervals == p.intervals
        with pytest.raises(Exception, match="semi_join"):
            plan_query(store, q, QueryOptions(plan="all", extra={"semi_join": "yes"}))
