"""Valid intervals of the events of a (candidate) match: paper 003, section 4.1 and C.1.

For a match ``(e_1, ..., e_l)`` with uncertainty intervals ``[lo_j, hi_j]`` and window ``W``:

* forward pass, valid lower bounds: ``vlb_1 = lo_1``, ``vlb_j = max(vlb_{j-1} + 1, lo_j)``;
* backward pass, revised upper bounds: ``rub_l = hi_l``, ``rub_j = min(rub_{j+1} - 1, hi_j)``;
* window pass, valid upper bounds: ``T = rub_1 + W - 1``, ``vub_l = min(rub_l, T)``,
  ``vub_j = min(vub_{j+1} - 1, rub_j)``.

The events can occur in this order within the window in some world iff ``vlb_j <= vub_j`` for
every ``j`` and ``l <= W`` (equivalently: ``vlb_j <= hi_j`` for all ``j``, ``vlb_l - rub_1 < W``
and ``l <= W``); every point match of the signature lies inside the valid intervals. The one-pass incremental form used while
extending partial matches keeps ``vlb_j`` and ``P_j = min_{k<=j}(hi_k - k)`` (1-based ``k``):
an extension by ``e`` is possible iff ``max(vlb_j + 1, lo_e) <= hi_e`` and, looking ahead,
``vlb_{j+1} + (l - j - 1) - P_{j+1} <= W``; ``rub_1 = P_l + 1`` at the end.

Complexity: O(M * l) vectorized over ``M`` matches.
"""

from __future__ import annotations

import numpy as np


def valid_intervals(lo: np.ndarray, hi: np.ndarray, window: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Three-pass valid intervals of ``M`` matches: ``(vlb, rub, vub, feasible)``.

    ``lo``/``hi`` are ``(M, l)`` int64 arrays in pattern order.
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    m, l_ = lo.shape
    vlb = np.empty_like(lo)
    rub = np.empty_like(hi)
    vub = np.empty_like(hi)
    if l_ == 0:
        return vlb, rub, vub, np.ones(m, bool)
    vlb[:, 0] = lo[:, 0]
    for j in range(1, l_):
        vlb[:, j] = np.maximum(vlb[:, j - 1] + 1, lo[:, j])
    rub[:, l_ - 1] = hi[:, l_ - 1]
    for j in range(l_ - 2, -1, -1):
        rub[:, j] = np.minimum(rub[:, j + 1] - 1, hi[:, j])
    last = rub[:, 0] + window - 1
    vub[:, l_ - 1] = np.minimum(rub[:, l_ - 1], last)
    for j in range(l_ - 2, -1, -1):
        vub[:, j] = np.minimum(vub[:, j + 1] - 1, rub[:, j])
    # l points need l - 1 instants after the first: with W < l no window holds them (a case the
    # third pass alone misses: it anchors the window at rub_1, not at the chain's first point)
    ok = np.all(vub >= vlb, axis=1) & (l_ - 1 < window)
    return vlb, rub, vub, ok


def feasible_partial(lo: np.ndarray, hi: np.ndarray, assigned: np.ndarray, window: int,
                     future_lower: int | None = None) -> np.ndarray:
    """Necessary condition for partial assignments (the any-state method), vectorized.

    ``lo``/``hi``/``assigned`` are ``(R, l)``; unassigned components are unconstrained, or, with
    ``future_lower``, constrained to ``[future_lower, +inf)`` (they can only be filled by events
    not yet seen, which start at or after it). A run failing this can never complete: its events
    cannot take increasing points, or the window cannot hold them together with ``l - 1`` other
    points. For a complete assignment it is exact (equals :func:`valid_intervals` feasibility).
    """
    big = np.int64(1) << 60
    r, l_ = lo.shape
    lo_u = np.where(assigned, lo, -big if future_lower is None else future_lower)
    hi_u = np.where(assigned, hi, big)
    vlb = np.empty((r, l_), np.int64)
    rub = np.empty((r, l_), np.int64)
    vlb[:, 0] = lo_u[:, 0]
    for j in range(1, l_):
        vlb[:, j] = np.maximum(vlb[:, j - 1] + 1, lo_u[:, j])
    rub[:, l_ - 1] = hi_u[:, l_ - 1]
    for j in range(l_ - 2, -1, -1):
        rub[:, j] = np.minimum(rub[:, j + 1] - 1, hi_u[:, j])
    ok = np.all(vlb <= rub, axis=1)
    # window: t_l - t_1 <= W - 1 with t_1 <= rub_1 and t_l >= vlb_l
    ok &= (vlb[:, l_ - 1] - rub[:, 0]) <= window - 1
    ok &= l_ - 1 <= window - 1
    return ok
