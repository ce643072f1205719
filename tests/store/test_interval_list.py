"""IntervalList (replay intervals held as one array) and a plan's deferred details."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.planner.query import Details
from replaydb.replay.replay import normalize_intervals
from replaydb.store.interval_list import IntervalList, _covered_leaves, merge_halfopen


def _union(rows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Brute force: the union of half-open integer intervals as maximal runs."""
    pts = sorted({x for a, b in rows for x in range(a, b)})
    out: list[tuple[int, int]] = []
    for x in pts:
        if out and out[-1][1] == x:
            out[-1] = (out[-1][0], x + 1)
        else:
            out.append((x, x + 1))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-20, 60), st.integers(-20, 60)), max_size=25))
def test_of_is_the_union_sorted_and_merged(rows: list[tuple[int, int]]) -> None:
    """``IntervalList.of`` holds the union of any rows (touching ones joined, empty ones
    dropped) and meets its invariant; it equals the list of its pairs, as Python ints."""
    got = IntervalList.of(rows)
    got.check()
    want = _union(rows)
    assert got == want and list(got) == want
    assert all(type(x) is int for pair in got for x in pair)
    assert len(got) == len(want)
    if want:
        assert got[0] == want[0] and got[-1] == want[-1]
        assert got[1:] == want[1:] and isinstance(got[1:], IntervalList)
    assert got == IntervalList.of(np.array(rows, np.int64).reshape(-1, 2))
    assert normalize_intervals(rows) == want
    assert normalize_intervals(got) is got  # already normal: taken as it is
    back = pickle.loads(pickle.dumps(got))
    assert isinstance(back, IntervalList) and back == got


def test_rows_are_read_only_and_bad_rows_refused() -> None:
    iv = IntervalList.of([(5, 9), (1, 3)])
    assert iv == [(1, 3), (5, 9)] and iv != [(1, 3)] and iv != [(1, 3), (5, 8)]
    with pytest.raises(ValueError):
        iv.array[0, 0] = 7
    with pytest.raises(ValueError, match="pairs"):
        IntervalList.of([(1, 2, 3)])
    with pytest.raises(AssertionError):
        IntervalList(np.array([[1, 5], [4, 9]])).check()  # overlapping: not normalized
    with pytest.raises(AssertionError):
        IntervalList(np.array([[1, 5], [5, 9]])).check()  # touching: one interval
    with pytest.raises(AssertionError):
        IntervalList(np.array([[3, 3]])).check()
    assert normalize_intervals(None) == [(None, None)]
    assert IntervalList.of([]) == [] and not IntervalList.of([])


def test_merge_halfopen_seeded_stress() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        a = rng.integers(0, 200, n)
        e = a + rng.integers(1, 30, n)
        got = merge_halfopen(a, e)
        IntervalList(got).check()
        assert [tuple(r) for r in got.tolist()] == _union(list(zip(a.tolist(), e.tolist())))
        if n:  # already sorted: the compiled pass without its sort
            order = np.argsort(a, kind="stable")
            assert np.array_equal(merge_halfopen(a[order], e[order]), got)
    with pytest.raises(ValueError, match="integer"):
        merge_halfopen(np.array([0.5]), np.array([2.0]))
    with pytest.raises(ValueError, match="one length"):
        merge_halfopen(np.array([1, 2]), np.array([3]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 80), st.integers(-3, 12)), max_size=30),
       st.booleans())
def test_covered_leaves_are_the_union_of_the_leaf_ranges(ranges, sort) -> None:
    """The distinct leaves of leaf ranges ``[lo, hi)``: sorted ranges (those of sorted
    intervals) take the enumeration, others the difference array; both equal a set."""
    lo = np.array([a for a, _ in ranges], np.int64)
    hi = np.maximum(lo + np.array([d for _, d in ranges], np.int64), 0)
    if sort:
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
    got = _covered_leaves(lo, hi)
    assert got.dtype == np.int64
    assert got.tolist() == sorted({x for a, b in zip(lo.tolist(), hi.tolist())
                                   for x in range(a, b)})


def test_deferred_details_are_computed_once_when_read() -> None:
    calls: list[int] = []
    d = Details(note="n")
    d.defer("pattern", lambda: calls.append(1) or {"spec": "A B"})
    assert calls == [] and "pattern" in d and "other" not in d
    assert d["pattern"] == {"spec": "A B"} and d.get("pattern") == {"spec": "A B"}
    assert d["pattern"] is d["pattern"] and calls == [1]
    assert d.get("missing", 3) == 3
    with pytest.raises(KeyError):
        d["missing"]  # noqa: B018
    d.defer("later", lambda: 5)
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is dict and back == {"note": "n", "pattern": {"spec": "A B"}, "later": 5}
    assert d.resolved() == back
