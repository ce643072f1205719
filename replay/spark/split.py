"""Cutting a replay into Spark tasks of similar size, from the TAB+-tree's leaf counts.

No data is read: each leaf entry carries its event count and time range, so the events of a time
range are the counts of the leaves it overlaps (exact for whole leaves; the two boundary leaves of
a range are counted whole, an over-estimate of less than two leaves per range and stream).

* :func:`interval_events` - estimated events of every planned interval (all streams);
* :func:`group_intervals` - consecutive runs of intervals with balanced event counts (one
  interval is never split: no match spans two intervals, but one may span any point inside one);
* :func:`read_ranges` - cuts of the replayed ranges into read tasks of balanced size, placed
  where the local replay starts a batch (partition tasks then push the local replay's batches,
  restricted to their keys).

Complexity: O(I log L + L) for I intervals and L leaves per stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from replaydb.replay.replay import DEFAULT_BATCH_ROWS

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


def chunk_starts(snap: Any, a: int | None, b: int | None,
                 batch_rows: int = DEFAULT_BATCH_ROWS) -> np.ndarray:
    """Leaves inside ``[a, b)`` where the local replay of a single stream starts a new batch
    *and* no event time is shared with the previous leaf: a read that starts there yields the
    same batches from there on as the local replay (it reads runs of leaves of one data file,
    ``batch_rows // leaf_capacity`` leaves at a time, from the range's first leaf)."""
    i, j = snap.tree.leaf_range_for_time(a, b)
    if j - i < 2:
        return np.zeros(0, np.int64)
    lv = snap.tree.leaves
    m = max(1, batch_rows // max(1, snap.schema.leaf_capacity))
    fid = lv.col("file_id")[i:j]
    run_start = np.concatenate([[0], np.flatnonzero(fid[1:] != fid[:-1]) + 1])
    starts = []
    for r0, r1 in zip(run_start.tolist(), [*run_start[1:].tolist(), j - i]):
        starts.extend(range(r0, r1, m))
    s = np.array(starts[1:], np.int64) + i
    tmin, tmax = lv.col("t_min"), lv.col("t_max")
    return s[tmax[s - 1] < tmin[s]]


def read_ranges(snapshots: Sequence[Any], intervals: Sequence[tuple[int | None, int | None]],
                n_tasks: int, batch_rows: int = DEFAULT_BATCH_ROWS) -> list[list[Range]]:
    """Split the intervals into ``(k, t0, t1)`` pieces (``k`` = interval index) and group them
    into at most ``n_tasks`` read tasks of about equal event counts.

    A single stream is cut only where the local replay starts a batch (:func:`chunk_starts`),
    so every read task replays exactly the local replay's batches; several streams are merged
    in chunks that depend on the whole interval, so their intervals are not cut. Operators then
    see the local batch boundaries (their floating-point sums do not depend on where a batch
    was cut)."""
    pieces: list[Range] = []
    for k, (a, b) in enumerate(intervals):
        cuts: list[int] = []
        if len(snapshots) == 1:
            snap = snapshots[0]
            s = chunk_starts(snap, a, b, batch_rows)
            cuts = sorted({int(x) for x in snap.tree.leaves.col("t_min")[s].tolist()
                           if (a is None or x > a) and (b is None or x < b)})
        bounds = [a, *cuts, b]
        pieces.extend((k, x, y) for x, y in zip(bounds[:-1], bounds[1:]))
    counts = interval_events(snapshots, [(a, b) for _, a, b in pieces])
    groups = group_intervals(counts, max(1, n_tasks))
    return [pieces[g0:g1] for g0, g1 in groups]
