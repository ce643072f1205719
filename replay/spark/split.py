"""Cutting a replay into Spark tasks of similar size, from the TAB+-tree's leaf counts.

No data is read: each leaf entry carries its event count and time range, so the events of a time
range are the counts of the leaves it overlaps (exact for whole leaves; the two boundary leaves of
a range are counted whole, an over-estimate of less than two leaves per range and stream).

* :func:`interval_events` - estimated events of every planned interval (all streams);
* :func:`group_intervals` - consecutive runs of intervals with balanced event counts (one
  interval is never split: no match spans two intervals, but one may span any point inside one);
* :func:`read_ranges` - time cuts at leaf boundaries that split the replayed ranges into read
  tasks of balanced size (any cut is fine for reading: partition tasks put the pieces back in
  order).

Complexity: O(I log L + L) for I intervals and L leaves per stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Range = tuple[int, int | None, int | None]


def _bounds(intervals: Sequence[tuple[int | None, int | None]]) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([np.iinfo(np.int64).min if a is None else a for a, _ in intervals], np.int64)
    hi = np.array([np.iinfo(np.int64).max if b is None else b for _, b in intervals], np.int64)
    return lo, hi


def interval_events(snapshots: Sequence[Any],
                    intervals: Sequence[tuple[int | None, int | None]]) -> np.ndarray:
    """Events per interval, summed over streams, from leaf counts."""
    lo, hi = _bounds(intervals)
    total = np.zeros(len(intervals), np.int64)
    for snap in snapshots:
        lv = snap.tree.leaves
        if lv.n == 0:
            continue
        cum = np.concatenate([[0], np.cumsum(lv.col("count"))])
        i = np.searchsorted(lv.col("t_max"), lo, side="left")
        j = np.maximum(i, np.searchsorted(lv.col("t_min"), hi, side="left"))
        total += cum[j] - cum[i]
    return total


def group_intervals(counts: np.ndarray, n_tasks: int) -> list[tuple[int, int]]:
    """Split intervals ``0..len(counts)-1`` into at most ``n_tasks`` consecutive groups
    ``[start, end)`` whose event counts are close to equal (greedy on prefix sums; a group
    closes once it reaches its share of what is left)."""
    n = len(counts)
    if n == 0:
        return []
    n_tasks = max(1, min(n_tasks, n))
    groups: list[tuple[int, int]] = []
    start = 0
    left = float(counts.sum())
    for g in range(n_tasks):
        remaining_tasks = n_tasks - g
        if g == n_tasks - 1:
            groups.append((start, n))
            break
        share = left / remaining_tasks
        acc = 0.0
        end = start
        # leave at least one interval for every remaining task
        limit = n - (remaining_tasks - 1)
        while end < limit:
            c = float(counts[end])
            if end > start and acc + c / 2 > share:
                break
            acc += c
            end += 1
        groups.append((start, end))
        left -= acc
        start = end
    return [(a, b) for a, b in groups if b > a]


def read_ranges(snapshots: Sequence[Any], intervals: Sequence[tuple[int | None, int | None]],
                n_tasks: int) -> list[list[Range]]:
    """Split the intervals (``(k, t0, t1)`` pieces; ``k`` = interval index) into ``n_tasks`` read
    tasks of about equal event counts, cutting at leaf start times."""
    counts = interval_events(snapshots, intervals)
    total = int(counts.sum())
    if total == 0:
        return [[(k, a, b) for k, (a, b) in enumerate(intervals)]]
    n_tasks = max(1, n_tasks)
    # leaf starts and counts of all streams, in time order
    starts, cnt = [], []
    for snap in snapshots:
        lv = snap.tree.leaves
        starts.append(lv.col("t_min"))
        cnt.append(lv.col("count"))
    t = np.concatenate(starts)
    c = np.concatenate(cnt)
    o = np.argsort(t, kind="stable")
    t, c = t[o], c[o]
    lo, hi = _bounds(intervals)
    inside = np.zeros(len(t), bool)
    for a, b in zip(lo.tolist(), hi.tolist()):
        inside |= (t >= a) & (t < b)
    cum = np.cumsum(np.where(inside, c, 0))
    targets = total * np.arange(1, n_tasks) / n_tasks
    cut_idx = np.searchsorted(cum, targets, side="left") + 1
    cuts = sorted({int(t[i]) for i in cut_idx.tolist() if i < len(t)})
    tasks: list[list[Range]] = [[] for _ in range(len(cuts) + 1)]
    for k, (a, b) in enumerate(intervals):
        pieces = [a, *[x for x in cuts if (a is None or x > a) and (b is None or x < b)], b]
        for p0, p1 in zip(pieces[:-1], pieces[1:]):
            # the task that owns the piece: number of cuts at or before its start
            owner = 0 if p0 is None else int(np.searchsorted(cuts, p0, side="right"))
            tasks[owner].append((k, p0, p1))
    return [tk for tk in tasks if tk]
