"""Replay intervals held as one array: :class:`IntervalList`.

A plan of a thousand replay intervals as a list of ``(start, end)`` tuples would be converted
between Python tuples and arrays at every layer (the planner's interval array into tuples,
replay's sort and merge back into an array, the store's grouped read into start and end
arrays again), each conversion O(intervals) Python work. An :class:`IntervalList` is the
normalized form itself
(sorted, disjoint, non-empty, half-open ``[start, end)`` rows of one ``(n, 2)`` int64 array):
replay and the store's reader take its array as it is, and everything else sees a sequence of
``(start, end)`` tuples of Python ints, equal to the list it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numba as nb
import numpy as np


def merge_halfopen(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Union of half-open intervals ``[a, e)`` as sorted disjoint rows (touching ones are
    joined). One compiled pass when ``a`` is already sorted (as the planner's are), O(n);
    a stable sort first otherwise, O(n log n). Compiled because a planner's few hundred
    intervals are too few for a dozen NumPy calls to amortize their fixed cost per call, and
    this runs twice per planned query."""
    a, e = np.asarray(a), np.asarray(e)
    if a.shape != e.shape or a.ndim != 1 or (a.size and (a.dtype.kind not in "iu"
                                                        or e.dtype.kind not in "iu")):
        raise ValueError("merge_halfopen: starts and ends must be 1-d integer arrays of one "
                         "length")
    a = np.ascontiguousarray(a, dtype=np.int64)
    e = np.ascontiguousarray(e, dtype=np.int64)
    if a.size == 0:
        return np.empty((0, 2), np.int64)
    return _merge_halfopen(a, e)


@nb.njit(cache=True, nogil=True)
def _merge_halfopen(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    for i in range(1, a.size):
        if a[i] < a[i - 1]:
            order = np.argsort(a, kind="mergesort")  # stable, as the NumPy version's
            return _merge_sorted(a[order], e[order])
    return _merge_sorted(a, e)


@nb.njit(cache=True, nogil=True)
def _merge_sorted(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Rows of the union of ``[a, e)`` with ``a`` ascending (non-empty)."""
    out = np.empty((a.size, 2), np.int64)
    k = 0
    cs = a[0]
    ce = e[0]
    for i in range(1, a.size):
        x = a[i]
        if x > ce:
            out[k, 0] = cs
            out[k, 1] = ce
            k += 1
            cs = x
            ce = e[i]
        elif e[i] > ce:
            ce = e[i]
    out[k, 0] = cs
    out[k, 1] = ce
    return out[: k + 1].copy()


class IntervalList(Sequence[tuple[int, int]]):
    """Sorted, disjoint, non-empty half-open time intervals ``[start, end)``, one row of
    :attr:`array` each; a read-only sequence of ``(start, end)`` tuples (equal to any
    sequence of the same pairs; tuples made on access, O(1) each).

    Build it with :meth:`of` (which sorts and merges any rows, O(n) when sorted) or, for rows
    already normalized, with the constructor; :meth:`check` asserts the invariant."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        arr = np.ascontiguousarray(array, dtype=np.int64).reshape(-1, 2)
        arr.flags.writeable = False
        self.array = arr

    @classmethod
    def of(cls, rows: Any) -> IntervalList:
        """The union of ``rows`` (``(start, end)`` pairs, an ``(n, 2)`` array or a sequence),
        sorted and merged (touching intervals joined, empty ones dropped)."""
        if isinstance(rows, IntervalList):
            return rows
        arr = np.asarray(rows if len(rows) else np.empty((0, 2)), dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError("replay intervals must be (start, end) pairs")
        arr = arr[arr[:, 1] > arr[:, 0]]
        return cls(merge_halfopen(arr[:, 0], arr[:, 1]))

    @property
    def starts(self) -> np.ndarray:
        return self.array[:, 0]

    @property
    def ends(self) -> np.ndarray:
        return self.array[:, 1]

    def __len__(self) -> int:
        return int(self.array.shape[0])

    @overload
    def __getitem__(self, k: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, k: slice) -> IntervalList: ...

    def __getitem__(self, k: int | slice) -> tuple[int, int] | IntervalList:
        if isinstance(k, slice):
            return IntervalList(self.array[k])
        a, b = self.array[k].tolist()
        return a, b

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return map(tuple, self.array.tolist())  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IntervalList):
            return bool(np.array_equal(self.array, other.array))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and all(
                tuple(x) == y for x, y in zip(other, self))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IntervalList({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return IntervalList, (np.array(self.array),)

    def check(self) -> None:
        """Raise AssertionError unless the rows are non-empty, sorted and disjoint (touching
        intervals are one interval, so an end is below the next start)."""
        a, b = self.starts, self.ends
        assert self.array.dtype == np.int64 and self.array.ndim == 2
        assert bool((b > a).all()), "an empty interval"
        assert bool((a[1:] > b[:-1]).all()), "intervals not sorted and disjoint"


def as_rows(intervals: Sequence[tuple[int | None, int | None]]) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` int64 arrays of ``intervals``, an open end (None) as the int64 limit
    (an :class:`IntervalList`'s own columns, without a copy)."""
    if isinstance(intervals, IntervalList):
        return intervals.starts, intervals.ends
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = np.array([x[0] if x[0] is not None else lo for x in intervals], np.int64)
    b = np.array([x[1] if x[1] is not None else hi for x in intervals], np.int64)
    return a, b


def _covered_leaves(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sorted distinct leaf ids in the union of the leaf ranges ``[lo[k], hi[k])``.

    Ranges sorted by ``lo`` (those of sorted intervals) are cut where an earlier range
    already reached and enumerated: O(ranges + leaves), whatever the stream's length. Others
    take a difference array over the ranges' span, counted by ``bincount``: O(ranges +
    span)."""
    lo, hi = np.ascontiguousarray(lo, np.int64), np.ascontiguousarray(hi, np.int64)
    got = _sorted_ranges_union(lo, hi)
    if got is not None:
        return got
    keep = hi > lo
    if not keep.any():
        return np.zeros(0, dtype=np.int64)
    lo, hi = lo[keep], hi[keep]
    base = int(lo.min())
    span = int(hi.max()) - base + 1
    mark = (np.bincount(lo - base, minlength=span)
            - np.bincount(hi - base, minlength=span))
    return np.flatnonzero(np.cumsum(mark[:-1]) > 0).astype(np.int64) + base


@nb.njit(cache=True, nogil=True)
def _sorted_ranges_union(lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """:func:`_covered_leaves` of ranges sorted by ``lo`` (None when they are not): each
    range from where the ranges before it reached. O(ranges + leaves)."""
    n = 0
    reach = np.iinfo(np.int64).min
    for k in range(lo.size):
        if k and lo[k] < lo[k - 1]:
            return None
        a = max(lo[k], reach)
        if hi[k] > a:
            n += hi[k] - a
        reach = max(reach, hi[k])
    out = np.empty(n, np.int64)
    j = 0
    reach = np.iinfo(np.int64).min
    for k in range(lo.size):
        for x in range(max(lo[k], reach), hi[k]):
            out[j] = x
            j += 1
        reach = max(reach, hi[k])
    return out
