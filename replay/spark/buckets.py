"""Balanced key buckets for partition-parallel scans (decided on the driver, from a sample).

A *scan* (partition-parallel without a shuffle, see :mod:`replaydb.replay.spark.engine`) sends
every event to the task that owns its key: the key hashes into one of :data:`VIRTUAL_SLOTS`
virtual slots (:func:`~replaydb.replay.spark.keys.key_targets`, deterministic in every process)
and an *owner table* maps each slot to a task. Hashing keys straight onto a handful of tasks is
lopsided (64 equal keys hashed onto 2 tasks give 36 and 28 of them: the slower task holds 56 %
of the work instead of 50 %), so the owner table is balanced by weight instead:

* the weight of a slot is the number of events of its keys in a **sample**: up to
  :data:`SAMPLE_LEAVES` leaves (row groups) spread evenly over the planned replay of every stream,
  of which only the key columns are read;
* slots are handed out largest first, each to the task with the least weight so far (LPT, at
  most 4/3 of the optimum); slots the sample did not see go round robin.

Which task owns a key never changes results (every key's events stay together, in replay order);
the sample only decides how evenly the work is spread. Complexity: O(S * leaf rows) to read and
hash the sample, O(V log V) to assign V slots; the owner table is V int32 values shipped with
every task.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from replaydb.replay.spark.keys import key_targets
from replaydb.replay.spark.reader import leaf_ranges

VIRTUAL_SLOTS = 4096
SAMPLE_LEAVES = 64


def sample_weights(snapshots: Sequence[Any], intervals: Sequence[tuple[int | None, int | None]],
                   keys: Sequence[str], n_slots: int = VIRTUAL_SLOTS,
                   sample_leaves: int = SAMPLE_LEAVES) -> np.ndarray:
    """Estimated events per virtual slot (float64, length ``n_slots``), over all streams: each
    stream's sample scaled to the events of its planned leaves. A stream lacking a key column
    contributes nothing."""
    weights = np.zeros(n_slots, np.float64)
    for snap in snapshots:
        if not all(snap.schema.has(k) or k in ("t", "seq") for k in keys):
            continue
        parts = [np.arange(i, j) for i, j in leaf_ranges(snap, list(intervals)) if j > i]
        if not parts:
            continue
        leaves = np.unique(np.concatenate(parts))
        pick = leaves[np.unique(np.linspace(0, len(leaves) - 1,
                                            min(sample_leaves, len(leaves))).astype(np.int64))]
        counts = snap.tree.leaves.col("count")
        hits = np.zeros(n_slots, np.float64)
        for leaf in pick.tolist():
            tbl = snap.read_leaves(leaf, leaf + 1, columns=list(keys))
            hits += np.bincount(key_targets(tbl, keys, n_slots), minlength=n_slots)
        if hits.sum() > 0:
            weights += hits * (float(counts[leaves].sum()) / hits.sum())
    return weights


def balanced_owner(weights: np.ndarray, n_tasks: int) -> np.ndarray:
    """Owner task (0 .. n_tasks-1) of every slot: LPT over the weighted slots, round robin over
    the unweighted ones (see the module docstring)."""
    n_slots = len(weights)
    owner = np.zeros(n_slots, np.int32)
    if n_tasks <= 1:
        return owner
    seen = np.flatnonzero(weights > 0)
    order = seen[np.lexsort((seen, -weights[seen]))]  # heaviest first, ties by slot
    heap = [(0.0, t) for t in range(n_tasks)]
    for s in order.tolist():
        load, t = heapq.heappop(heap)
        owner[s] = t
        heapq.heappush(heap, (load + float(weights[s]), t))
    unseen = np.flatnonzero(weights <= 0)
    owner[unseen] = np.arange(len(unseen)) % n_tasks
    return owner


def scan_owner(snapshots: Sequence[Any], intervals: Sequence[tuple[int | None, int | None]],
               keys: Sequence[str], n_tasks: int) -> np.ndarray:
    """The owner table of a scan with ``n_tasks`` tasks (one task: all zeros, nothing read)."""
    if n_tasks <= 1:
        return np.zeros(VIRTUAL_SLOTS, np.int32)
    return balanced_owner(sample_weights(snapshots, intervals, keys), n_tasks)
