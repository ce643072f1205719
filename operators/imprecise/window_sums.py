"""Skip-till-any confidence of one match under a binding window, for all start points at once.

The confidence of a skip-till-any match with components ``0..l-1`` (independent point
distributions ``p_j`` over their valid intervals) is

    sum over t_0 < t_1 < ... < t_{l-1} with t_{l-1} - t_0 < W of  prod_j p_j(t_j).

Only the first and the last instant meet in the window condition (the others lie between
them), so with ``G_j(s, L)`` the mass of the chains ``s < t_j < ... < t_{l-1} <= L`` of
components ``j..l-1`` the confidence is ``sum_{t_0} p_0(t_0) G_1(t_0, t_0 + W - 1)``. Each
``G_j`` is a sum of separable terms ``U(L) V(s)``: with ``C_j`` the running sum of ``p_j``,
``G_{l-1}(s, L) = C_{l-1}(L) - C_{l-1}(s)``, and when ``G_{j+1} = sum_i U_i(L) V_i(s)``,

    G_j(s, L) = sum_{s < t <= L} p_j(t) G_{j+1}(t, L) = sum_i U_i(L) (W_i(L) - W_i(s))

with ``W_i`` the running sum of ``p_j V_i``. So ``G_1`` has ``2^(l-1)`` terms, each a table over
the match's time axis, and the confidence costs O(2^l * N) for an axis of N instants instead of
one forward pass per start point (O(l * N^2)).

The terms are sums of differences, so a confidence far below the terms' magnitude (at most 1)
loses relative precision: :func:`separable_confidence` returns -1 when the result is below the
bound under which its relative error could exceed 1e-9 (the caller then runs the per-start
passes). Whether any chain exists, and the tightest range (the first start with a chain inside
the window, the last end of such a chain), are decided exactly on the instants of positive
probability by greedy chains: the earliest chain from a start ends first, the latest chain to
an end starts last. O(l * N) with O(1) per start or end.
"""

from __future__ import annotations

import numba as nb
import numpy as np

REL_ERROR = 1e-9
"""Relative error the separable sums guarantee; smaller confidences are recomputed."""


@nb.njit(cache=True)
def axis_probs(m: int, l_: int, vlb: np.ndarray, vub: np.ndarray, probs: np.ndarray,
               out: np.ndarray) -> int:
    """``out[j, i]``: ``p_j`` at instant ``vlb[m, 0] + i`` of the match's axis (0 outside the
    component's valid interval; ``probs[j, k]`` is its probability at ``vlb[m, j] + k``).
    Returns the axis length N. O(l * N)."""
    x0 = vlb[m, 0]
    n = vub[m, l_ - 1] - x0 + 1
    for j in range(l_):
        a = vlb[m, j] - x0
        b = vub[m, j] - x0
        for i in range(n):
            out[j, i] = probs[j, i - a] if a <= i <= b else 0.0
    return n


@nb.njit(cache=True)
def exact_range(pax: np.ndarray, n: int, l_: int, window: int, nxt: np.ndarray,
                prv: np.ndarray) -> tuple[int, int]:
    """``(first start, last end)`` of the chains inside the window, as offsets on the axis of
    :func:`axis_probs` (``pax``, ``n`` instants), or ``(1, 0)`` when there is none. ``nxt`` /
    ``prv``: scratch of ``(l, N + 1)``."""
    for j in range(l_):
        nxt[j, n] = n
        for i in range(n - 1, -1, -1):  # first positive instant at or after i
            nxt[j, i] = i if pax[j, i] > 0.0 else nxt[j, i + 1]
        last = -1
        for i in range(n):  # last positive instant at or before i
            if pax[j, i] > 0.0:
                last = i
            prv[j, i] = last
    first = -1
    for s in range(n):
        if pax[0, s] <= 0.0:
            continue
        t = s
        for j in range(1, l_):
            t = nxt[j, t + 1] if t + 1 <= n else n
            if t >= n:
                break
        if t < n and t - s < window:
            first = s
            break
    if first < 0:
        return 1, 0
    end = -1
    for e in range(n - 1, -1, -1):
        if pax[l_ - 1, e] <= 0.0:
            continue
        t = e
        for j in range(l_ - 2, -1, -1):
            t = prv[j, t - 1] if t >= 1 else -1
            if t < 0:
                break
        if t >= 0 and e - t < window:
            end = e
            break
    return first, end


@nb.njit(cache=True)
def separable_confidence(pax: np.ndarray, n: int, n0: int, l_: int, window: int,
                         u: np.ndarray, v: np.ndarray, w: np.ndarray) -> float:
    """The confidence of a match of ``l_ >= 2`` components (``pax``: :func:`axis_probs`, ``n``
    instants, the first component's ``n0`` first) by the separable sums of the module
    docstring, or -1 when it is below the precision bound. ``u``, ``v``, ``w``: scratch of
    ``(2^(l-1), N)``."""
    last = l_ - 1
    run = 0.0
    for i in range(n):
        run += pax[last, i]
        u[0, i] = run
        v[0, i] = 1.0
        u[1, i] = 1.0
        v[1, i] = -run
    terms = 2
    for j in range(l_ - 2, 0, -1):
        for k in range(terms):
            run = 0.0
            for i in range(n):
                run += pax[j, i] * v[k, i]
                w[k, i] = run
        for k in range(terms):
            for i in range(n):
                u[terms + k, i] = u[k, i]
                v[terms + k, i] = -w[k, i]
                u[k, i] = u[k, i] * w[k, i]
                v[k, i] = 1.0
        terms *= 2
    total = 0.0
    for s in range(n0):
        p0 = pax[0, s]
        if p0 <= 0.0:
            continue
        big = s + window - 1
        if big > n - 1:
            big = n - 1
        g = 0.0
        for k in range(terms):
            g += u[k, big] * v[k, s]
        if g > 0.0:
            total += p0 * g
    # every table entry is at most 1 in magnitude and carries the rounding of at most l
    # running sums of n terms: the error is below terms * l * n * eps per start, and the
    # starts' probabilities sum to at most 1
    if total < terms * l_ * (n + 1) * 2.3e-16 / REL_ERROR:
        return -1.0
    return total


@nb.njit(cache=True)
def scratch(l_: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                      np.ndarray, np.ndarray]:
    """Scratch arrays ``(pax, u, v, w, nxt, prv)`` for :func:`axis_probs`,
    :func:`separable_confidence` and :func:`exact_range` over axes of up to ``n`` instants
    of matches of ``l_`` components."""
    terms = 1 << max(l_ - 1, 1)
    return (np.zeros((l_, n)), np.zeros((terms, n)), np.zeros((terms, n)),
            np.zeros((terms, n)), np.zeros((l_, n + 1), np.int64),
            np.zeros((l_, n + 1), np.int64))
