"""``uncounted``: the arrays of a compiled kernel's arguments without reference counts.

The views must read and write the caller's memory exactly as the arrays do (nested tuples,
scalars and several dtypes included), leave every reference count as it was, and be refused
for values that hold no array."""

from __future__ import annotations

import sys
from collections import namedtuple

import numba as nb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.uncounted import uncounted

Bundle = namedtuple("Bundle", ["scale", "ints", "pair", "out"])


@nb.njit(cache=False)
def _kernel(b):
    """Through the views: out[i] = scale * (ints[i] + floats[i]) + 1 for every i, reading
    the arrays in the loop (what a kernel's hot loop does)."""
    v = uncounted(b)
    for i in range(v.ints.shape[0]):
        v.out[i] = v.scale * (v.ints[i] + v.pair[0][i]) + v.pair[1]
    return v.out.shape[0]


@nb.njit(cache=False)
def _plain(b):
    for i in range(b.ints.shape[0]):
        b.out[i] = b.scale * (b.ints[i] + b.pair[0][i]) + b.pair[1]
    return b.out.shape[0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-10**6, 10**6), min_size=0, max_size=200),
       st.floats(-100, 100, allow_nan=False))
def test_views_read_and_write_the_callers_arrays(values: list[int], scale: float) -> None:
    ints = np.asarray(values, np.int64)
    floats = np.linspace(-1.0, 1.0, len(values))
    got = np.zeros(len(values))
    want = np.zeros(len(values))
    assert _kernel(Bundle(scale, ints, (floats, 1.0), got)) == len(values)
    _plain(Bundle(scale, ints, (floats, 1.0), want))
    np.testing.assert_array_equal(got, want)


def test_reference_counts_are_left_as_they_were() -> None:
    ints = np.arange(1000, dtype=np.int64)
    floats = np.ones(1000)
    out = np.zeros(1000)
    b = Bundle(2.0, ints, (floats, 0.5), out)
    _kernel(b)
    before = [sys.getrefcount(a) for a in (ints, floats, out)]
    for _ in range(100):
        _kernel(b)
    assert [sys.getrefcount(a) for a in (ints, floats, out)] == before
    assert out[10] == 2.0 * 11 + 0.5


def test_an_array_alone_is_viewed() -> None:
    @nb.njit(cache=False)
    def total(a):
        v = uncounted(a)
        s = 0
        for i in range(v.shape[0]):
            s += v[i]
        return s

    assert total(np.arange(10, dtype=np.int64)) == 45


def test_values_without_arrays_are_refused() -> None:
    @nb.njit(cache=False)
    def scalar(x):
        return uncounted(x)

    with pytest.raises(nb.core.errors.TypingError):
        scalar(3)
