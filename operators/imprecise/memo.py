"""Confidences of matches that share their shape, computed once.

A match's confidence (:func:`.kernels.confidence_batch`) is a function of its shape only: for
each component the valid interval ``[vlb, vub]`` and the event's uncertainty interval
``[lo, hi]``, and for each gap of a skip-till-next match its spoilers' intervals in their order,
all relative to the match's first valid instant ``vlb[m, 0]``, plus the window - where every event
involved is uniform over its interval (a weight table makes the event's values part of the
shape; such matches are computed alone). Its range ``[r0, r1]`` moves with the match. On a
regular stream most matches share a shape with others, so :func:`confidence_shared` computes one
match per shape and gives its confidence, and its range shifted, to the others: the same
numbers, bit for bit, as computing each (the kernel reads nothing else of a match and sums in the
same order).

Shapes are told apart exactly: a 64-bit hash of each match's shape groups the matches, and every
match is compared with its group's first one; a match that differs (a hash collision) is
computed alone. O(M x (l + spoilers)) vectorized, plus the kernel on one match per shape.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.imprecise.kernels import confidence_many

_NONE = np.iinfo(np.int64).min
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _mixed(x: np.ndarray, salt: np.ndarray) -> np.ndarray:
    """A 64-bit mix of int64 values ``x`` with the int64 values ``salt`` (arrays of one shape
    or broadcastable; wrapping arithmetic)."""
    h = (x.astype(np.uint64) + np.asarray(salt).astype(np.uint64) * _MIX) * _MIX
    return h ^ (h >> np.uint64(29))


def _fixed_shape(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, gap_ptr: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Per match, the shape's fixed part: each component's ``vlb``, ``vub``, ``lo``, ``hi``
    relative to ``base``, then each gap's spoiler count. O(M x l)."""
    m_count, l_ = ev.shape
    b = base[:, None]
    cols = [vlb - b, vub - b, lo[ev] - b, hi[ev] - b]
    if gap_ptr.size > 1:
        counts = np.diff(gap_ptr)[: m_count * l_].reshape(m_count, l_)
        cols.append(counts)
    return np.concatenate(cols, axis=1)


def _spoiler_shape(gap_ptr: np.ndarray, gap_ev: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   base: np.ndarray, l_: int) -> tuple[np.ndarray, np.ndarray]:
    """``(match of each spoiler entry, its (lo, hi) relative to its match's base)``, entries
    in the CSR's order (gap by gap, spoilers in order). O(entries)."""
    seg = np.repeat(np.arange(gap_ptr.size - 1), np.diff(gap_ptr))
    owner = seg // l_
    rel = np.stack([lo[gap_ev] - base[owner], hi[gap_ev] - base[owner]], axis=1)
    return owner, rel


def confidence_shared(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray, woff: np.ndarray, wflat: np.ndarray, cflat: np.ndarray,
                      window: int, use_gaps: bool, gap_ptr: np.ndarray, gap_ev: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`.kernels.confidence_many` (same arguments, same results), the kernel run once per
    shape (module docstring)."""
    m_count, l_ = ev.shape
    if m_count < 2:
        return confidence_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window, use_gaps,
                               gap_ptr, gap_ev)
    ev = np.asarray(ev, np.int64)
    base = np.asarray(vlb[:, 0], np.int64)
    ptr = gap_ptr if use_gaps else np.zeros(1, np.int64)
    fixed = _fixed_shape(ev, vlb, vub, lo, hi, ptr, base)
    h = np.zeros(m_count, np.uint64)
    for j in range(fixed.shape[1]):
        h = _mixed(fixed[:, j], np.full(m_count, j + 1)) ^ (h * _MIX)
    uniform = (woff[ev] < 0).all(axis=1)
    owner = rel = None
    if use_gaps and gap_ev.size:
        owner, rel = _spoiler_shape(ptr, gap_ev, lo, hi, base, l_)
        first = ptr[np.arange(m_count) * l_]
        at = np.arange(gap_ev.size) - first[owner]  # the entry's place in its match's list
        eh = _mixed(rel[:, 0], 2 * at + 1) ^ _mixed(rel[:, 1], 2 * at + 2)
        has = np.bincount(owner, minlength=m_count) > 0  # owner ascends: one run per match
        h[has] += np.add.reduceat(eh, first[has])
        uniform &= np.bincount(owner[woff[gap_ev] >= 0], minlength=m_count) == 0
    rep = representatives(h, fixed, uniform, owner, rel, ptr, l_)
    todo = np.flatnonzero(rep == np.arange(m_count))
    if todo.size == m_count:
        return confidence_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window, use_gaps,
                               gap_ptr, gap_ev)
    sub_ptr, sub_ev = _rows_csr(ptr, gap_ev, todo, l_) if use_gaps else (gap_ptr, gap_ev)
    c, a, b = confidence_many(ev[todo], vlb[todo], vub[todo], lo, hi, woff, wflat, cflat,
                              window, use_gaps, sub_ptr, sub_ev)
    slot = np.empty(m_count, np.int64)
    slot[todo] = np.arange(todo.size)
    k = slot[rep]
    shift = base - base[rep]
    r0 = np.where(a[k] == _NONE, _NONE, a[k] + shift)
    r1 = np.where(b[k] == _NONE, _NONE, b[k] + shift)
    return c[k], r0, r1


def representatives(h: np.ndarray, fixed: np.ndarray, uniform: np.ndarray,
                    owner: np.ndarray | None, rel: np.ndarray | None, ptr: np.ndarray,
                    l_: int) -> np.ndarray:
    """``rep[m]``: the first match with ``m``'s hash ``h[m]`` when both are uniform and equal in
    shape (``fixed`` rows, and their spoiler entries ``rel`` owned by ``owner``, CSR ``ptr``
    over ``m * l_ + g``), else ``m`` itself. O(M log M + entries)."""
    m_count = h.size
    _, rep_of, inv = np.unique(h, return_index=True, return_inverse=True)
    rep = rep_of[inv]
    same = uniform & uniform[rep] & (fixed == fixed[rep]).all(axis=1)
    if owner is not None and rel is not None and owner.size:
        first = ptr[np.arange(m_count) * l_]
        at = np.arange(owner.size) - first[owner]
        other = np.minimum(first[rep[owner]] + at, owner.size - 1)  # the rep's same entry
        differs = ~(rel == rel[other]).all(axis=1)
        same &= np.bincount(owner[differs], minlength=m_count) == 0
    return np.where(same, rep, np.arange(m_count))


def _rows_csr(gap_ptr: np.ndarray, gap_ev: np.ndarray, rows: np.ndarray, l_: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """The per-(match, gap) CSR restricted to matches ``rows`` (in that order). O(entries
    kept)."""
    seg = (rows[:, None] * l_ + np.arange(l_)[None, :]).ravel()
    starts, ends = gap_ptr[seg], gap_ptr[seg + 1]
    lens = ends - starts
    ptr = np.zeros(seg.size + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    idx = np.repeat(starts - ptr[:-1], lens) + np.arange(int(ptr[-1]))
    return ptr, gap_ev[idx]
