"""How a read that keeps only the rows inside replay intervals is cut into reads.

A read of whole leaves holds up to ``max_leaves`` of them: its table is a batch's worth of rows.
A kept-only read (:meth:`~replaydb.store.snapshot.StreamSnapshot.read_interval_groups` with
``kept_only``) decodes each leaf into a scratch and keeps the rows inside the intervals, so its
table holds only those. Sparse intervals (a few rows of each leaf) would then make many reads of
a few rows each, and every read is a batch the operator prepares and processes at a fixed cost.
So these reads are packed by the rows they are expected to keep: a leaf counts as the fraction
of its time span that the intervals cover (its rows spread evenly over its span), and at least
:data:`MIN_LEAF_SHARE` of a leaf, which bounds the leaves one read decodes (and the scratch it
reserves) at ``max_leaves / MIN_LEAF_SHARE``.
"""

from __future__ import annotations

import numpy as np

MIN_LEAF_SHARE = 1 / 8
"""The least a leaf counts for in a kept-only read: such a read decodes at most eight reads'
worth of whole leaves."""


def covered_fractions(t_min: np.ndarray, t_max: np.ndarray, a: np.ndarray, b: np.ndarray
                      ) -> np.ndarray:
    """Per leaf (times ``t_min .. t_max``, inclusive), the fraction of its time span inside the
    sorted disjoint intervals ``[a, b)`` (open ends as the int64 limits). O((leaves +
    intervals) log intervals)."""
    lo = np.asarray(t_min, np.int64)
    hi = np.asarray(t_max, np.int64) + 1
    if lo.size == 0 or len(a) == 0:
        return np.zeros(lo.size)
    first, end = int(lo.min()), int(hi.max())
    a = np.clip(np.asarray(a, np.int64), first, end)
    b = np.clip(np.asarray(b, np.int64), first, end)
    before = np.concatenate([[0], np.cumsum(b - a)])

    def covered(x: np.ndarray) -> np.ndarray:
        """Time covered by the intervals before ``x``."""
        k = np.searchsorted(a, x, side="right")  # intervals starting at or before x
        last = np.maximum(k - 1, 0)
        inside = np.clip(x - a[last], 0, b[last] - a[last])
        return np.where(k > 0, before[last] + inside, 0)

    return (covered(hi) - covered(lo)) / np.maximum(hi - lo, 1)


def packed_reads(file_ids: np.ndarray, shares: np.ndarray, max_leaves: int
                 ) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Consecutive reads ``(s, e, pieces)`` over leaves ``0 .. n-1`` (``file_ids``: each
    leaf's data file; ``shares``: what each counts for, each at least
    :data:`MIN_LEAF_SHARE` is used): each read holds leaves whose shares add up to at most
    ``max_leaves`` (at least one leaf), ``pieces`` its runs of leaves in one data file as
    ``[p, q)`` positions. O(leaves)."""
    n = len(file_ids)
    cum = np.cumsum(np.maximum(np.asarray(shares, np.float64), MIN_LEAF_SHARE))
    out: list[tuple[int, int, list[tuple[int, int]]]] = []
    s = 0
    while s < n:
        base = float(cum[s - 1]) if s else 0.0
        e = max(int(np.searchsorted(cum, base + max_leaves, side="right")), s + 1)
        f = file_ids[s:e]
        cuts = (np.flatnonzero(f[1:] != f[:-1]) + 1 + s).tolist()
        bounds = [s, *cuts, e]
        out.append((s, e, list(zip(bounds[:-1], bounds[1:]))))
        s = e
    return out
