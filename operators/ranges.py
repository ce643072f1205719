"""Index ranges expanded into pairs, vectorized: :func:`expand_ranges`.

Shared by the operators (candidate pairs of imprecise-timestamp patterns) and the planner (pairs
of overlapping intervals); NumPy only, so importing it loads nothing else.
"""

from __future__ import annotations

import numpy as np


def expand_ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, k)`` for every ``k`` in ``[starts[row], ends[row])``, rows in order and each
    row's ``k`` ascending (an empty range yields nothing). O(rows + pairs)."""
    counts = np.maximum(ends - starts, 0)
    total = int(counts.sum())
    rows = np.repeat(np.arange(starts.size), counts)
    if total == 0:
        return rows, np.zeros(0, np.int64)
    ks = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
    return rows, ks
