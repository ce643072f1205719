"""Cost model of 3.3.2: the formula term by term, break-even, arbitrary slides, the choice."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import UsageError
from replaydb.planner.window_cost import (
    TreeStats,
    break_even_slide,
    c_index,
    c_index_window,
    c_naive_window,
    c_replay,
    choose_path,
    slide_parts,
    split_level,
)

PAPER_16 = TreeStats(r=0.1, h=4, B=458, D=152)  # 100 events/s in ms, 60.48M events
PAPER_80 = TreeStats(r=0.1, h=5, B=90, D=23)


def test_split_level_is_exact_at_powers() -> None:
    assert split_level(0.5, 10) == 0
    assert split_level(1, 10) == 0
    assert split_level(1.0001, 10) == 1
    assert split_level(10, 10) == 1
    assert split_level(10.5, 10) == 2
    assert split_level(100, 10) == 2
    assert split_level(1000, 10) == 3
    assert split_level(152**3, 152) == 3
    assert split_level(152**3 + 1, 152) == 4


def test_formula_term_by_term() -> None:
    st_ = TreeStats(r=2.0, h=6, B=50, D=10)
    # slide*r < B: a single path, leaf term slide*r
    assert c_index(10, st_) == (6 - 1 - 0) + 20
    # L = 3 leaves (l_s = 1): (h-2) + ceil(3/D^0) + 0 + B
    assert c_index(75, st_) == 4 + 3 + 0 + 50
    # L = 37 (l_s = 2): (h-3) + ceil(37/10) + 1*D + B
    assert c_index(925, st_) == 3 + 4 + 10 + 50
    # L = 5000 (l_s = 4): (h-5) + ceil(5000/1000) + 3*D + B
    assert c_index(125_000, st_) == 1 + 5 + 30 + 50
    # a slide larger than the tree (L = 4e7, l_s = 8 > h - 1): term (1) clamps at 0
    assert c_index(10**9, st_) == 0 + math.ceil(4e7 / 10**7) + 7 * 10 + 50
    assert c_replay(925, st_) == 1850


def test_leaf_term_is_continuous_at_one_leaf() -> None:
    st_ = TreeStats(r=1.0, h=3, B=100, D=8)
    assert c_index(99, st_) == 2 + 99
    assert c_index(100, st_) == 2 + 100  # L = 1: l_s = 0, min(1, L) * B = B
    assert c_index(101, st_) == 1 + 2 + 100


def test_arbitrary_slides_sum_both_parts() -> None:
    assert slide_parts(100, 30) == (20, 10)
    assert slide_parts(100, 25) == (25,)
    st_ = TreeStats(r=3.0, h=5, B=40, D=6)
    assert c_index_window(100, 30, st_) == c_index(20, st_) + c_index(10, st_)
    assert c_index_window(100, 25, st_) == c_index(25, st_)
    assert c_naive_window(100, 30, st_) == c_index(100, st_)


def test_paper_streams_break_even() -> None:
    """100 events/s: the index path pays once a slide spans about one leaf (B events)."""
    be16 = break_even_slide(PAPER_16)
    be80 = break_even_slide(PAPER_80)
    assert 4_500 < be16 < 4_700  # ms: ~458 events
    assert 900 < be80 < 1_000  # ~90 events
    assert c_index(be16, PAPER_16) < c_replay(be16, PAPER_16)
    assert c_index(be16 - 1, PAPER_16) >= c_replay(be16 - 1, PAPER_16)


@settings(max_examples=20)
@given(r=st.floats(0.01, 50), h=st.integers(2, 7), B=st.integers(2, 600),  # noqa: N803
       D=st.integers(2, 200))
def test_break_even_matches_a_linear_scan(r: float, h: int, B: int, D: int) -> None:  # noqa: N803
    """Brute force: the smallest slide after which the index path always wins (up to a limit)."""
    st_ = TreeStats(r=r, h=h, B=B, D=D)
    limit = 12_000
    losing = [s for s in range(1, limit + 1) if not c_index(s, st_) < c_replay(s, st_)]
    expected = None if losing and losing[-1] == limit else (losing[-1] + 1 if losing else 1)
    assert break_even_slide(st_, max_slide=limit) == expected


def test_tiny_trees_can_cross_back() -> None:
    st_ = TreeStats(r=1.0, h=2, B=2, D=3)  # (D-1)(B-1) <= h
    assert c_index(6, st_) < c_replay(6, st_)
    assert not c_index(7, st_) < c_replay(7, st_)
    assert break_even_slide(st_) == 8


def test_break_even_edge_cases() -> None:
    assert break_even_slide(TreeStats(r=0.0, h=3, B=10, D=4)) is None  # no events
    assert break_even_slide(TreeStats(r=1.0, h=3, B=10, D=4), max_slide=10) is None
    # one event per leaf: inner nodes still save merges once a slide spans D leaves
    assert break_even_slide(TreeStats(r=1.0, h=3, B=1, D=4)) == 8  # 0 + 2 + 4 + 1 < 8


def test_choice_and_overrides() -> None:
    day = 86_400_000
    small = choose_path(day, 10, PAPER_16)
    assert small.path == "replay" and not small.forced
    big = choose_path(day, 3_600_000, PAPER_16)
    assert big.path == "index" and big.c_index < big.c_replay
    assert big.break_even == break_even_slide(PAPER_16)
    for p in ("replay", "index", "naive"):
        forced = choose_path(day, 10, PAPER_16, plan=p)
        assert forced.path == p and forced.forced
    no = choose_path(day, 3_600_000, PAPER_16, index_ok=False, why_not="GROUP BY")
    assert no.path == "replay" and "GROUP BY" in no.reason
    with pytest.raises(UsageError, match="GROUP BY"):
        choose_path(day, 10, PAPER_16, plan="index", index_ok=False, why_not="GROUP BY")
    with pytest.raises(UsageError, match="unknown plan"):
        choose_path(day, 10, PAPER_16, plan="fastest")
    text = "\n".join(big.explain("ms"))
    assert "break-even slide (index cheaper from): 4621ms" in text


def test_invalid_stats() -> None:
    with pytest.raises(UsageError):
        TreeStats(r=1.0, h=3, B=0, D=4)
    with pytest.raises(UsageError):
        TreeStats(r=1.0, h=3, B=4, D=1)


@settings(max_examples=30)
@given(r=st.floats(0.01, 50), h=st.integers(2, 6), B=st.integers(2, 400),  # noqa: N803
       D=st.integers(2, 100), w_merge=st.floats(0.2, 6.0), w_slice=st.floats(0.0, 400.0))
def test_weighted_break_even_matches_a_linear_scan(r: float, h: int, B: int, D: int,  # noqa: N803
                                                   w_merge: float, w_slice: float) -> None:
    """Calibrated weights keep the search exact: the smallest slide spanning more than one leaf
    from which the weighted index cost stays below replay (slides within a leaf never count)."""
    st_ = TreeStats(r=r, h=h, B=B, D=D, w_merge=w_merge, w_slice=w_slice)
    limit = 12_000
    losing = [s for s in range(1, limit + 1)
              if s * r <= B or not c_index(s, st_) < c_replay(s, st_)]
    expected = None if losing and losing[-1] == limit else (losing[-1] + 1 if losing else 1)
    assert break_even_slide(st_, max_slide=limit) == expected


def test_weights_scale_the_index_cost_and_move_the_break_even() -> None:
    plain = PAPER_80
    heavy = plain.weighted((3.0, 50.0))
    assert not plain.calibrated and heavy.calibrated
    assert plain.weighted(None) is plain
    for s in (1_000, 5_000, 60_000):
        assert c_index(s, heavy) == pytest.approx(3.0 * c_index(s, plain) + 50.0)
        assert c_replay(s, heavy) == c_replay(s, plain)
    assert break_even_slide(heavy) > 3 * break_even_slide(plain)
    # a slide the plain model sends to the index path goes to replay when index merges cost more
    be = break_even_slide(plain)
    assert choose_path(86_400_000, 2 * be, plain).path == "index"
    assert choose_path(86_400_000, 2 * be, heavy).path == "replay"
    text = "\n".join(choose_path(86_400_000, 2 * be, heavy).explain("ms"))
    assert "calibrated: an index merge costs 3 replay merges" in text
    assert "not calibrated" in "\n".join(choose_path(86_400_000, be, plain).explain("ms"))
    for bad in ((0.0, 0.0), (-1.0, 0.0), (1.0, -2.0), (float("nan"), 0.0), (float("inf"), 0.0)):
        with pytest.raises(UsageError, match="cost weights"):
            plain.weighted(bad)
