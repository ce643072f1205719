"""Parallel sorting and writing of big runs (threads; the kernels and Parquet release the GIL).

* :func:`sort_partitioned` sorts unsorted numeric entries as P key-range partitions: splitters
  from a sample of the keys, a stable scatter into partitions (entries of equal keys land in the
  same partition), then every partition is radix sorted in its own thread. The partitions, in
  order, are one run sorted by (key, seq) whose parts have disjoint key ranges.
* :func:`split_sorted` cuts sorted entries into P slices (parts of one run, ascending in
  (key, seq)); :func:`write_parallel` writes parts in threads.

Used for runs of at least ``LSMOptions.parallel_min_entries`` entries when ``threads > 1``.
Cost: O(n) work, about O(n / P) wall time on P idle cores plus one sequential scatter pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from replaydb.indexes.entries import Entries
from replaydb.indexes.kernels import partition_scatter
from replaydb.indexes.sorting import sort_entries

T = TypeVar("T")
_SAMPLE = 1 << 16


def effective_threads(threads: int) -> int:
    """``threads`` or, when 0, the CPUs this process may use (at most 8)."""
    if threads > 0:
        return threads
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


def run_threads(fns: list[Callable[[], T]], threads: int) -> list[T]:
    """Call ``fns`` in a pool of ``threads`` threads; results in input order."""
    if threads <= 1 or len(fns) <= 1:
        return [f() for f in fns]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(f) for f in fns]
        return [f.result() for f in futures]


def sort_partitioned(ent: Entries, parts: int, threads: int, seed: int = 0) -> list[Entries]:
    """Sort numeric entries into at most ``parts`` key-disjoint partitions (see module doc)."""
    n = len(ent)
    if parts <= 1 or n < 2 * parts or ent.is_string:
        return [sort_entries(ent)]
    rng = np.random.default_rng(seed)
    sample = np.sort(ent.key[rng.integers(0, n, min(n, _SAMPLE))])
    cuts = np.unique(sample[(np.arange(1, parts) * sample.size) // parts])
    if cuts.size == 0:
        return [sort_entries(ent)]
    ids = np.searchsorted(cuts, ent.key, side="right")
    key, seq, t, offsets = partition_scatter(ids, cuts.size + 1, ent.key, ent.seq, ent.t)
    chunks = [
        Entries(key[a:b], seq[a:b], t[a:b])
        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())
        if b > a
    ]
    return run_threads([lambda c=c: sort_entries(c) for c in chunks], threads)


def split_sorted(ent: Entries, parts: int) -> list[Entries]:
    """Cut sorted entries into ``parts`` nearly equal slices (in order)."""
    n = len(ent)
    if parts <= 1 or n < 2 * parts:
        return [ent]
    bounds = [(i * n) // parts for i in range(parts + 1)]
    return [ent.slice(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
