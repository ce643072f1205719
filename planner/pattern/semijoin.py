"""Semi-join reduction of index results before they are sorted (for windowed patterns).

Every selected event of a candidate lies within the pattern's window ``w`` (in time) of every
other selected event of that candidate (Algorithm 3.1's condition C2 bounds the span from the
first to the last). So an event of one lookup that has no event of another selected lookup
within ``w`` of it belongs to no candidate, and dropping it changes no replay interval: the
earliest chain and the latest last event of every first event that has a candidate are made of
events of candidates, which are all kept (by induction over the lookups, in the order they are
filtered), and a first event without a candidate keeps none.

:class:`TimeMask` keeps, over buckets of ``2**shift`` time units, which buckets may still hold
an event of a candidate: after a lookup's (kept) events are known, the mask is intersected with
their dilation by ``w``. The lookups are taken smallest first, so the big ones - the ones whose
sort dominates planning - are filtered by the small ones before they are sorted. The mask is
coarse (whole buckets), hence a superset: the filter keeps every event it must and maybe a few
more; Algorithm 3.1 decides exactly as before. Building and intersecting cost O(r + B) for r
events and B buckets (B <= 2**18 by the choice of the bucket width), filtering one pass over
the lookup's events.

Without a window nothing bounds the distance between the events of a candidate: no mask. The
planner uses the mask only where lookups sort their times along with their seqs (streams that
are not regular): where every lookup sorts its seqs alone into a bitmap, a bit set per event,
computing times and filtering cost more than they save (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

MAX_BUCKETS_LOG2 = 18
"""At most ``2**18`` buckets (256 KiB of mask, 1 MiB of counts: in the second-level cache):
wider buckets on long streams or narrow windows. Narrowing and filtering slow down severalfold
once the mask spills the cache, every test of an event then a cache miss."""
USEFUL_SHARE = 0.5
"""The mask filters a lookup only while it keeps at most this share of the buckets: above it
the pass over the lookup's events (plus narrowing the mask) removes too few events from the
sort that follows to pay for itself."""


@njit(cache=True, nogil=True)
def _dilate_and(mask: np.ndarray, t: np.ndarray, t0: int, w: int, shift: int,
                diff: np.ndarray, out: np.ndarray) -> int:
    """``out = mask & dilate(t, w)`` for ``t`` in any order (a difference array: +1 where an
    event's reach starts, -1 after it ends, then a running sum); the buckets set in ``out``.
    ``diff``: ``mask.size + 1`` int32 of any content. O(len(t) + buckets)."""
    nb = mask.size
    for b in range(nb + 1):
        diff[b] = 0
    for i in range(t.size):
        lo = (t[i] - w - t0) >> shift
        hi = (t[i] + w - t0) >> shift
        if lo < 0:
            lo = 0
        if hi > nb - 1:
            hi = nb - 1
        if lo <= hi:
            diff[lo] += 1
            diff[hi + 1] -= 1
    run = 0
    kept = 0
    for b in range(nb):
        run += diff[b]
        if run > 0 and mask[b]:
            out[b] = 1
            kept += 1
        else:
            out[b] = 0
    return kept


@njit(cache=True, nogil=True)
def _keep_masked(seq: np.ndarray, t: np.ndarray, mask: np.ndarray, t0: int, shift: int,
                 out_seq: np.ndarray, out_t: np.ndarray) -> int:
    """Copy the events whose time bucket is set in ``mask``; how many were kept."""
    k = 0
    nb = mask.size
    for i in range(seq.size):
        b = (t[i] - t0) >> shift
        if b >= 0 and b < nb and mask[b]:
            out_seq[k] = seq[i]
            out_t[k] = t[i]
            k += 1
    return k


@dataclass
class TimeMask:
    """Buckets of time that may hold an event of a candidate (see the module docstring)."""

    t0: int
    shift: int
    window: int
    mask: np.ndarray  # uint8, 1 = may hold one
    kept: int
    limit: float = USEFUL_SHARE
    """Filter while at most this share of the buckets is set (1.0: always)."""

    @classmethod
    def whole(cls, t_min: int, t_max: int, window: int, limit: float = USEFUL_SHARE
              ) -> TimeMask:
        """Every bucket set, ``2**shift`` at most a quarter of the window (at least 1)."""
        span = max(0, int(t_max) - int(t_min)) + 1
        shift = max(0, (max(1, window // 4)).bit_length() - 1)
        while (span >> shift) >= (1 << MAX_BUCKETS_LOG2):
            shift += 1
        nb = (span >> shift) + 1
        return cls(int(t_min), shift, int(window), np.ones(nb, np.uint8), nb, limit)

    def predicted_share(self, entries: list[float]) -> float:
        """The share of buckets expected to stay set after narrowing with lookups of
        ``entries`` events each, spread at random over the stream's time: each bucket is
        reached by an event of a lookup with probability ``1 - exp(-n (2w + width) / span)``.
        The planner skips the semi-join when even all of them together would keep more than
        its ``limit`` (then it could only cost)."""
        span = float(self.mask.size << self.shift)
        reach = 2.0 * self.window + float(1 << self.shift)
        share = 1.0
        for n in entries:
            share *= 1.0 - float(np.exp(-max(0.0, float(n)) * reach / span))
        return share

    @property
    def share(self) -> float:
        """Share of the buckets still set."""
        return self.kept / max(1, self.mask.size)

    @property
    def useful(self) -> bool:
        return self.share <= self.limit

    def narrow(self, t: np.ndarray) -> None:
        """Intersect with the ``window``-dilation of the events at times ``t`` (any order)."""
        out = np.empty_like(self.mask)
        diff = np.empty(self.mask.size + 1, np.int32 if t.size < (1 << 31) else np.int64)
        self.kept = int(_dilate_and(self.mask, np.ascontiguousarray(t, dtype=np.int64),
                                    self.t0, self.window, self.shift, diff, out))
        self.mask = out

    def keep(self, seq: np.ndarray, t: np.ndarray, alloc: object = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """The events (any order) in set buckets, order kept; ``alloc(n, dtype)`` as for the
        sorts (``np.empty`` by default)."""
        make = alloc or np.empty
        n = int(seq.size)
        out_seq = make(n, np.dtype(np.int64))  # type: ignore[operator]
        out_t = make(n, np.dtype(np.int64))  # type: ignore[operator]
        k = _keep_masked(np.ascontiguousarray(seq, dtype=np.int64),
                         np.ascontiguousarray(t, dtype=np.int64), self.mask, self.t0,
                         self.shift, out_seq, out_t)
        return out_seq[:k], out_t[:k]

    def check(self) -> None:
        """Invariant: ``kept`` counts the set buckets, the mask is 0/1."""
        assert self.mask.dtype == np.uint8 and int(self.mask.max(initial=0)) <= 1
        assert self.kept == int(self.mask.sum())
