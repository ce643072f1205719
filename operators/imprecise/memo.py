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
computed alone (compiled: :func:`shape_hashes`, :func:`representatives`). O(M x (l +
spoilers)) expected, plus the kernel on one match per shape.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.typed import Dict

from replaydb.operators.imprecise.candidates import spoilers_of
from replaydb.operators.imprecise.kernels import confidence_many

_NONE = np.iinfo(np.int64).min
_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True)
def _mix(h: np.uint64, x: np.int64) -> np.uint64:
    """``h`` with the int64 ``x`` mixed in (wrapping 64-bit arithmetic)."""
    h = (h ^ np.uint64(x)) * _MIX
    return h ^ (h >> np.uint64(29))


@nb.njit(cache=True)
def shape_hashes(fixed: np.ndarray, first: np.ndarray, end: np.ndarray,
                 rel: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each match's shape: its ``fixed`` row, then its spoiler entries
    ``rel[first[m]:end[m]]`` in order. O(M x columns + entries)."""
    m_count, width = fixed.shape
    out = np.empty(m_count, np.uint64)
    for m in range(m_count):
        h = np.uint64(width)
        for c in range(width):
            h = _mix(h, fixed[m, c])
        for k in range(first[m], end[m]):
            h = _mix(_mix(h, rel[k, 0]), rel[k, 1])
        out[m] = h
    return out


@nb.njit(cache=True)
def representatives(hashes: np.ndarray, fixed: np.ndarray, first: np.ndarray,
                    end: np.ndarray, rel: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """``rep[m]``: the first uniform match with ``m``'s hash when ``m`` is uniform and equal to
    it in shape (its ``fixed`` row and its spoiler entries ``rel[first[m]:end[m]]``), else
    ``m`` itself (a hash collision is computed alone). O(M x columns + entries) expected."""
    m_count, width = fixed.shape
    seen = Dict.empty(key_type=types.uint64, value_type=types.int64)
    rep = np.arange(m_count)
    for m in range(m_count):
        if not uniform[m]:
            continue
        if hashes[m] not in seen:
            seen[hashes[m]] = m
            continue
        j = seen[hashes[m]]
        same = end[m] - first[m] == end[j] - first[j]
        for c in range(width):
            if not same:
                break
            same = fixed[m, c] == fixed[j, c]
        for k in range(end[m] - first[m]):
            if not same:
                break
            a, b = first[m] + k, first[j] + k
            same = rel[a, 0] == rel[b, 0] and rel[a, 1] == rel[b, 1]
        if same:
            rep[m] = j
    return rep


def _fixed_shape(ev: np.ndarray, vlb: np.ndarray, vub: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, gap_ptr: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Per match, the shape's fixed part: each component's ``vlb``, ``vub``, ``lo``, ``hi``
    relative to ``base``, then each gap's spoiler count. O(M x l)."""
    m_count, l_ = ev.shape
    b = base[:, None]
    cols = [vlb - b, vub - b, lo[ev] - b, hi[ev] - b]
    if gap_ptr.size > 1:
        cols.append(np.diff(gap_ptr)[: m_count * l_].reshape(m_count, l_))
    return np.ascontiguousarray(np.concatenate(cols, axis=1), np.int64)


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
    uniform = (woff[ev] < 0).all(axis=1)
    if use_gaps and gap_ev.size:
        first, end = ptr[np.arange(m_count) * l_], ptr[np.arange(1, m_count + 1) * l_]
        owner = np.repeat(np.arange(m_count), end - first)
        rel = np.empty((gap_ev.size, 2), np.int64)
        rel[:, 0] = lo[gap_ev] - base[owner]
        rel[:, 1] = hi[gap_ev] - base[owner]
        uniform &= np.bincount(owner[woff[gap_ev] >= 0], minlength=m_count) == 0
    else:
        first = end = np.zeros(m_count, np.int64)
        rel = np.zeros((0, 2), np.int64)
    rep = representatives(shape_hashes(fixed, first, end, rel), fixed, first, end, rel,
                          uniform)
    todo = np.flatnonzero(rep == np.arange(m_count))
    if todo.size == m_count:
        return confidence_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window, use_gaps,
                               gap_ptr, gap_ev)
    sub_ptr, sub_ev = spoilers_of(ptr, gap_ev, todo, l_) if use_gaps else (gap_ptr, gap_ev)
    c, a, b = confidence_many(ev[todo], vlb[todo], vub[todo], lo, hi, woff, wflat, cflat,
                              window, use_gaps, sub_ptr, sub_ev)
    slot = np.empty(m_count, np.int64)
    slot[todo] = np.arange(todo.size)
    k = slot[rep]
    shift = base - base[rep]
    r0 = np.where(a[k] == _NONE, _NONE, a[k] + shift)
    r1 = np.where(b[k] == _NONE, _NONE, b[k] + shift)
    return c[k], r0, r1
