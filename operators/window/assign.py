"""Window geometry: how a window of ``size`` sliding by ``slide`` is cut into slices.

Positions ``x`` are event times (time windows) or event ordinals (count windows), taken relative to
an *anchor* ``a`` (``rel = x - a``). Window ``k`` (any integer) covers ``[k*slide, k*slide + size)``
in relative positions.

Slices (the leaves of the slide tree) are the pieces between consecutive window boundaries:

* ``size`` a multiple of ``slide`` (``m = size mod slide = 0``): one slice per slide,
  slice ``s`` = ``[s*slide, (s+1)*slide)``; window ``k`` = slices ``[k, k + size/slide)``.
* otherwise (the dissertation's arbitrary slides, 3.3.3): every slide period is split into
  ``slide2 = m`` and ``slide1 = slide - m``: slice ``2g`` = ``[g*slide, g*slide + m)``, slice
  ``2g+1`` = ``[g*slide + m, (g+1)*slide)``. Window ``k`` = slices ``[2k, 2k + 2q + 1)`` with
  ``q = size // slide``: the alternating sequence ``slide2, slide1, ..., slide1, slide2`` of the
  text (``size = slide2 + q * (slide1 + slide2)``). Each window step evicts one
  ``(slide2, slide1)`` pair and inserts the next one.

So in general window ``k`` is the ``W`` consecutive slices starting at ``k*p``, where ``p`` (1 or 2)
is the number of slices per step. A slide larger than the size (hopping windows with gaps) is the
case ``q = 0``: slice ``2g`` is window ``g`` and slice ``2g+1`` lies between windows (its events
belong to no window).

All functions are O(1) per position and vectorized over NumPy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replaydb.errors import OperatorError

MAX_SLICES = 2**24
"""The most slices a window may span: the sliding aggregators keep O(slices) state."""


@dataclass(frozen=True)
class SliceGeometry:
    """Slices of windows of ``size`` sliding by ``slide`` (both > 0, in position units)."""

    size: int
    slide: int

    def __post_init__(self) -> None:
        for name in ("size", "slide"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or isinstance(v, bool) or v <= 0:
                raise OperatorError(f"window {name} must be a positive integer, got {v!r}")
        if self.W > MAX_SLICES:
            raise OperatorError(
                f"a window of size {self.size} sliding by {self.slide} has {self.W:,} slices, "
                f"more than {MAX_SLICES:,}", hint="use a longer slide or a shorter window")

    @property
    def m(self) -> int:
        """``size mod slide`` (``slide2`` of the dissertation; 0 when size is a multiple)."""
        return self.size % self.slide

    @property
    def q(self) -> int:
        return self.size // self.slide

    @property
    def p(self) -> int:
        """Slices per window step (1 or 2)."""
        return 1 if self.m == 0 else 2

    @property
    def W(self) -> int:  # noqa: N802 - the dissertation's symbol
        """Slices per window."""
        return self.q if self.m == 0 else 2 * self.q + 1

    @property
    def slice_lengths(self) -> tuple[int, ...]:
        """Lengths of the slices of one step: ``(slide,)`` or ``(slide2, slide1)``."""
        return (self.slide,) if self.m == 0 else (self.m, self.slide - self.m)

    def slice_of(self, rel: np.ndarray | int) -> np.ndarray | int:
        """Slice index holding relative position ``rel`` (floor semantics for negatives)."""
        g = rel // self.slide
        if self.m == 0:
            return g
        return 2 * g + ((rel - g * self.slide) >= self.m)

    def slice_start(self, s: np.ndarray | int) -> np.ndarray | int:
        """Relative start of slice ``s``."""
        if self.m == 0:
            return s * self.slide
        g = s // 2
        return g * self.slide + (s - 2 * g) * self.m

    def slice_end(self, s: np.ndarray | int) -> np.ndarray | int:
        return self.slice_start(s + 1)

    def window_start(self, k: np.ndarray | int) -> np.ndarray | int:
        return k * self.slide

    def window_end(self, k: np.ndarray | int) -> np.ndarray | int:
        """Exclusive relative end of window ``k``."""
        return k * self.slide + self.size

    def first_window_ending_after(self, rel: int) -> int:
        """Smallest ``k`` whose window ends after ``rel`` (the first window that can hold it)."""
        return (rel - self.size) // self.slide + 1

    def last_window_starting_by(self, rel: int) -> int:
        """Largest ``k`` whose window starts at or before ``rel``."""
        return rel // self.slide

    def segments(self, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, slices)`` of the ascending positions ``rel`` (non-empty): the row
        offsets where a run of positions in one slice begins (the first is 0) and the slice
        of each run. With fewer slice boundaries inside ``rel``'s range than rows, the
        boundaries are looked up in ``rel`` (O(boundaries x log rows)); otherwise every row's
        slice is compared with the next one's (O(rows))."""
        first = int(self.slice_of(int(rel[0])))
        last = int(self.slice_of(int(rel[-1])))
        if last - first < rel.size:
            cuts = np.searchsorted(rel, self.slice_start(np.arange(first + 1, last + 1)))
            if cuts.size:
                cuts = cuts[np.concatenate(([True], cuts[1:] != cuts[:-1]))]
            starts = np.concatenate(([0], cuts)).astype(np.int64)
            return starts, np.asarray(self.slice_of(rel[starts]), np.int64)
        sl = self.slice_of(rel)
        starts = np.concatenate(([0], np.flatnonzero(np.diff(sl)) + 1)).astype(np.int64)
        return starts, np.asarray(sl[starts], np.int64)
