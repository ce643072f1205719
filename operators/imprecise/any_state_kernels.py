"""Compiled feed loop of the any-state engine (queries without cross-event conditions).

The same algorithm as :meth:`.any_state.AnyStateEngine._feed_one`, event after event: a new run
per component the event matches, and a clone of every existing run whose component is free, does
not hold the event and stays feasible (valid intervals with free components unconstrained, the
window and ``l <= W``); every ``prune_every`` events the runs that cannot complete with events
starting at or after the future lower bound are dropped. Runs are ``(uid, lo, hi)`` rows, ``uid``
-1 where a component is free; complete runs go to ``done`` with their key (first event's upper
bound + W - 1).

Complexity: O(runs * l) per event and component, compiled.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_BIG = np.int64(1) << 60


@nb.njit(cache=True)
def _feasible(lo: np.ndarray, hi: np.ndarray, uid: np.ndarray, window: int, future: int,
              vlb: np.ndarray, rub: np.ndarray) -> bool:
    """Necessary (exact when complete) condition on one run row; see ``feasible_partial``."""
    l_ = lo.shape[0]
    for j in range(l_):
        if uid[j] >= 0:
            a = lo[j]
        else:
            a = future
        if j == 0:
            vlb[j] = a
        else:
            vlb[j] = max(vlb[j - 1] + 1, a)
    for j in range(l_ - 1, -1, -1):
        b = hi[j] if uid[j] >= 0 else _BIG
        if j == l_ - 1:
            rub[j] = b
        else:
            rub[j] = min(rub[j + 1] - 1, b)
    for j in range(l_):
        if vlb[j] > rub[j]:
            return False
    if vlb[l_ - 1] - rub[0] > window - 1:
        return False
    return l_ - 1 <= window - 1


@nb.njit(cache=True)
def feed_runs(uid: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: int, done: np.ndarray,
              done_key: np.ndarray, nd: int, e_uid: np.ndarray, e_lo: np.ndarray,
              e_hi: np.ndarray, e_comp: np.ndarray, future: np.ndarray, window: int,
              prune_every: int, cap: int):
    """Feed events; returns the (possibly reallocated) arrays, their fill counts and a status
    (0 ok, 1 the state cap was passed)."""
    l_ = uid.shape[1]
    vlb = np.zeros(l_, np.int64)
    rub = np.zeros(l_, np.int64)
    row_u = np.zeros(l_, np.int64)
    row_lo = np.zeros(l_, np.int64)
    row_hi = np.zeros(l_, np.int64)
    since = 0
    for i in range(e_uid.shape[0]):
        eu = e_uid[i]
        n_old = n
        for j in range(l_):
            if not e_comp[i, j]:
                continue
            for r in range(n_old + 1):
                if r < n_old:
                    if uid[r, j] >= 0:
                        continue
                    holds = False
                    for k in range(l_):
                        if uid[r, k] == eu:
                            holds = True
                    if holds:
                        continue
                    for k in range(l_):
                        row_u[k] = uid[r, k]
                        row_lo[k] = lo[r, k]
                        row_hi[k] = hi[r, k]
                else:  # the run holding only this event
                    for k in range(l_):
                        row_u[k] = -1
                        row_lo[k] = 0
                        row_hi[k] = 0
                row_u[j] = eu
                row_lo[j] = e_lo[i]
                row_hi[j] = e_hi[i]
                if not _feasible(row_lo, row_hi, row_u, window, -_BIG, vlb, rub):
                    continue
                full = True
                for k in range(l_):
                    if row_u[k] < 0:
                        full = False
                if full:
                    if nd == done.shape[0]:
                        bigger = np.empty((max(16, 2 * nd), l_), np.int64)
                        bigger[:nd] = done[:nd]
                        done = bigger
                        kb = np.empty(bigger.shape[0], np.int64)
                        kb[:nd] = done_key[:nd]
                        done_key = kb
                    done[nd] = row_u
                    done_key[nd] = row_hi[0] + window - 1
                    nd += 1
                else:
                    if n == uid.shape[0]:
                        cap2 = max(64, 2 * n)
                        u2 = np.empty((cap2, l_), np.int64)
                        lo2 = np.empty((cap2, l_), np.int64)
                        hi2 = np.empty((cap2, l_), np.int64)
                        u2[:n] = uid[:n]
                        lo2[:n] = lo[:n]
                        hi2[:n] = hi[:n]
                        uid, lo, hi = u2, lo2, hi2
                    uid[n] = row_u
                    lo[n] = row_lo
                    hi[n] = row_hi
                    n += 1
        since += 1
        if since >= prune_every or i == e_uid.shape[0] - 1:
            since = 0
            fl = future[i]
            w = 0
            for r in range(n):
                for k in range(l_):
                    row_u[k] = uid[r, k]
                if _feasible(lo[r], hi[r], row_u, window, fl, vlb, rub):
                    if w != r:
                        uid[w] = uid[r]
                        lo[w] = lo[r]
                        hi[w] = hi[r]
                    w += 1
            n = w
        if cap >= 0 and n + nd > cap:
            return uid, lo, hi, n, done, done_key, nd, 1
    return uid, lo, hi, n, done, done_key, nd, 0
