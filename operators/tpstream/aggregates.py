"""Situation aggregates for RETURN (first, last, count, sum, avg, min, max), vectorized.

Each RETURN item ``func(S.attr)`` keeps, per situation, a pair of *primitives* ``(a, b)``:

=======  =====================  ==========  ===========================
func     a                      b           combine(earlier, later)
=======  =====================  ==========  ===========================
first    value of first event   -           earlier.a
last     value of last event    -           later.a
count    non-null count         -           a + a
sum      sum ignoring nulls     -           a + a
avg      sum ignoring nulls     count       (a + a, b + b)
min      min ignoring nulls     -           fmin
max      max ignoring nulls     -           fmax
=======  =====================  ==========  ===========================

Primitives of the runs inside one batch come from ``ufunc.reduceat`` over the run events
(O(events)); situations that span batches combine the carried primitives with the batch part
(O(1) each). Float sums (``sum``, ``avg``) are the exception: they are summed strictly left to
right (:func:`.kernel.range_prims`), and a run continuing a carried one is re-summed from the
carried sum over its events (:meth:`continue_sums`), so a situation's float sum is the same
bits however the input is cut into batches - partition-parallel runs, whose batches end at other
times than local ones, return identical results. Nulls are NaN (floats) as everywhere in :mod:`replaydb.operators.expr`;
``count(S)`` without attribute counts every event of the situation.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.tpstream import kernel
from replaydb.operators.tpstream.config import ReturnItem


class AggSpec:
    """Vectorized primitives, combination and finalization for one RETURN item."""

    def __init__(self, item: ReturnItem, stream: int) -> None:
        self.item = item
        self.func = item.func
        self.stream = stream
        self.attr = item.attr
        self.dtype: np.dtype = np.dtype(np.float64)

    # ------------------------------------------------------------------ identity / dtype
    def set_dtype(self, dtype: np.dtype) -> None:
        """Record the input column dtype (first/last/min/max keep it)."""
        self.dtype = np.dtype(dtype)

    @property
    def a_dtype(self) -> np.dtype:
        if self.func == "count":
            return np.dtype(np.int64)
        if self.func in ("sum", "avg"):
            return np.dtype(np.float64) if self.dtype.kind not in "iu" else np.dtype(np.int64)
        if self.func in ("min", "max"):
            return self.dtype if self.dtype.kind in "iuf" else np.dtype(np.float64)
        return self.dtype

    def empty(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Primitives of ``n`` empty situations (identity of :meth:`combine`)."""
        b = np.zeros(n, np.int64)
        if self.func in ("count", "sum", "avg"):
            return np.zeros(n, self.a_dtype), b
        if self.func in ("min", "max"):
            return np.full(n, np.nan), b
        if self.a_dtype.kind in "fc":
            return np.full(n, np.nan, self.a_dtype), b
        return np.zeros(n, self.a_dtype), b

    # ------------------------------------------------------------------ batch runs
    def runs(self, v: np.ndarray | None, order: np.ndarray | None, mask: np.ndarray,
             starts: np.ndarray, lasts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Primitives of the runs ``[starts[k], lasts[k]]`` (inclusive positions in the batch's
        partition-sorted order ``order``; None = the batch order). ``mask`` is the condition in
        that order; ``v`` the attribute in batch order (gathered only at the run events)."""
        k = len(starts)
        lengths = lasts - starts + 1
        if self.attr is None:  # count(S)
            return lengths.astype(np.int64), np.zeros(k, np.int64)
        assert v is not None

        def at(pos: np.ndarray) -> np.ndarray:
            return v[order[pos]] if order is not None else v[pos]

        if self.func == "first":
            return at(starts), np.zeros(k, np.int64)
        if self.func == "last":
            return at(lasts), np.zeros(k, np.int64)
        if k == 0:
            return self.empty(0)
        offsets = np.cumsum(lengths) - lengths
        vc = v[order[mask]] if order is not None else v[mask]
        is_float = vc.dtype.kind == "f"
        if self.func in ("count", "avg"):
            nn = (~np.isnan(vc)).astype(np.int64) if is_float else np.ones(len(vc), np.int64)
            cnt = np.add.reduceat(nn, offsets)
            if self.func == "count":
                return cnt, np.zeros(k, np.int64)
        if self.func in ("sum", "avg"):
            if is_float:
                s = self.continue_sums(np.zeros(k), vc, offsets, offsets + lengths)
            else:
                s = np.add.reduceat(vc, offsets).astype(self.a_dtype, copy=False)
            return (s, cnt) if self.func == "avg" else (s, np.zeros(k, np.int64))
        fn = np.fmin if self.func == "min" else np.fmax
        src = vc if vc.dtype.kind in "iuf" else vc.astype(np.float64)
        return fn.reduceat(src, offsets), np.zeros(k, np.int64)

    @property
    def sequential(self) -> bool:
        """A float sum: summed event by event, continued from the carry (not combined)."""
        return self.func in ("sum", "avg") and self.attr is not None and \
            self.a_dtype.kind == "f"

    def continue_sums(self, carried: np.ndarray, vals: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray) -> np.ndarray:
        """Float sums of runs that continue carried ones: ``carried[q]`` followed by the events
        ``vals[lo[q]:hi[q]]``, left to right (O(events))."""
        s, _ = kernel.range_prims(vals.astype(np.float64, copy=False), lo, hi, 1,
                                  carried.astype(np.float64))
        return s

    def combine(self, earlier: tuple[np.ndarray, np.ndarray],
                later: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Primitives of a situation made of ``earlier`` events followed by ``later`` ones."""
        ea, eb = earlier
        la, lb = later
        f = self.func
        if f == "first":
            return ea.copy(), eb
        if f == "last":
            return la.copy(), lb
        if f in ("count", "sum"):
            return ea + la, eb
        if f == "avg":
            return ea + la, eb + lb
        if f == "min":
            return np.fmin(ea, la), eb
        return np.fmax(ea, la), eb

    def final(self, prims: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The RETURN value from primitives."""
        a, b = prims
        if self.func == "avg":
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(b > 0, a / np.maximum(b, 1), np.nan)
        return a

    @property
    def out_dtype(self) -> np.dtype:
        if self.func == "avg":
            return np.dtype(np.float64)
        if self.func in ("min", "max"):
            return np.dtype(np.float64) if self.dtype.kind not in "iuf" else self.dtype
        return self.a_dtype
