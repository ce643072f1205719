"""Replay intervals held as one array: :class:`IntervalList`.

A plan of a thousand replay intervals used to travel as a list of ``(start, end)`` tuples:
the planner turned its interval array into Python tuples, replay turned them back into an
array to sort and merge them, then into tuples again, and the store's grouped read built its
start and end arrays from the tuples once more - about 1 ms for 1,000 intervals, a few
percent of such a plan's execution. An :class:`IntervalList` is the normalized form itself
(sorted, disjoint, non-empty, half-open ``[start, end)`` rows of one ``(n, 2)`` int64 array):
replay and the store's reader take its array as it is, and everything else sees a sequence of
``(start, end)`` tuples of Python ints, equal to the list it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np


def merge_halfopen(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Union of half-open intervals ``[a, e)`` as sorted disjoint rows (touching ones are
    joined). Vectorized: O(n log n), O(n) when ``a`` is already sorted."""
    if a.size == 0:
        return np.empty((0, 2), np.int64)
    if a.size > 1 and not bool(np.all(a[1:] >= a[:-1])):
        order = np.argsort(a, kind="stable")
        a, e = a[order], e[order]
    ends = np.maximum.accumulate(e)
    new = np.ones(a.size, bool)
    new[1:] = a[1:] > ends[:-1]
    starts = np.flatnonzero(new)
    last = np.r_[starts[1:] - 1, a.size - 1]
    return np.stack([a[starts], ends[last]], axis=1).astype(np.int64)


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
