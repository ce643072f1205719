"""Runs of positions in one slice (``SliceGeometry.segments``) against the definition: a run
begins at row 0 and wherever a row's slice differs from the previous row's."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.window.assign import SliceGeometry


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 50), slide=st.integers(1, 50), n=st.integers(1, 200),
       spread=st.sampled_from([1, 3, 40, 5000]), lo=st.integers(-10_000, 10_000),
       seed=st.integers(0, 2**32 - 1))
def test_segments_are_the_runs_of_equal_slices(size, slide, n, spread, lo, seed):
    geom = SliceGeometry(size, slide)
    rng = np.random.default_rng(seed)
    rel = lo + np.sort(rng.integers(0, spread * n, n)).astype(np.int64)
    starts, slices = geom.segments(rel)
    every = np.array([geom.slice_of(int(x)) for x in rel])
    want = np.flatnonzero(np.concatenate(([True], every[1:] != every[:-1])))
    assert starts.dtype == np.int64 and slices.dtype == np.int64
    assert starts.tolist() == want.tolist()
    assert slices.tolist() == every[want].tolist()
