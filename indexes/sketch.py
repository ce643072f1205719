"""Rank bounds from a sorted run's sparse key sample, and the seq histogram.

Key sample (an equi-depth histogram): a run file of n entries sorted by key keeps the keys at
positions ``P = 0, s, 2s, ...`` and ``n - 1`` (``s`` = sample step). For a value x, let j be the
number of samples below x. Every entry at a position <= P[j-1] is below x and every entry at a
position >= P[j] is not, so the number of entries below x lies in ``[P[j-1] + 1, P[j]]``: the
error of a rank is at most ``s - 1`` and of a range count (two ranks) at most ``2 (s - 1)`` per
file, guaranteed. Inside that bucket the estimate interpolates linearly on the key value (numeric
keys) or, for string keys, on the bytes after the common prefix of the two bracketing samples,
read as a mixed-radix number whose base per position is the byte range the samples use there.
O(log m) per rank for m samples.

Seq histogram: equi-width bins of ``2**shift`` seqs from the file's smallest seq. The number of
entries with seq >= c is exact for whole bins; in the bin holding c it is bounded using the
uniqueness of seqs (a bin of width w holds at most w entries, at most ``c - bin_start`` of them
below c).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np


def sample_positions(n: int, step: int) -> np.ndarray:
    """Positions of the sampled keys of a run of n entries (always includes 0 and n - 1)."""
    if n <= 0:
        return np.empty(0, np.int64)
    pos = np.arange(0, n, step, dtype=np.int64)
    if pos[-1] != n - 1:
        pos = np.append(pos, n - 1)
    return pos


def search(sorted_keys: Any, x: Any, side: str) -> int:
    """np.searchsorted for NumPy arrays, bisect for Python lists (string keys)."""
    if isinstance(sorted_keys, list):
        return (bisect.bisect_left if side == "left" else bisect.bisect_right)(sorted_keys, x)
    return int(np.searchsorted(sorted_keys, x, side=side))


_STR_POSITIONS = 24


def byte_ranges(samples: list[str]) -> list[tuple[int, int]]:
    """Per byte position (first 24), the smallest and largest byte seen in the samples.

    String interpolation treats the bytes after a common prefix as digits of a number whose
    base at each position is the range of bytes the keys use there (digits: base 10, lowercase
    words: base 26, ...), instead of base 256 which badly skews estimates for such keys.
    """
    lo = [255] * _STR_POSITIONS
    hi = [0] * _STR_POSITIONS
    for text in samples:
        b = text.encode()[:_STR_POSITIONS]
        for i, c in enumerate(b):
            if c < lo[i]:
                lo[i] = c
            if c > hi[i]:
                hi[i] = c
    return [(lo[i], hi[i]) if lo[i] <= hi[i] else (0, 255) for i in range(_STR_POSITIONS)]


def _digits(b: bytes, start: int, ranges: list[tuple[int, int]]) -> float:
    """Value of bytes start.. as a mixed-radix fraction in [0, 1] (see :func:`byte_ranges`)."""
    value = 0.0
    scale = 1.0
    for i in range(start, min(start + 8, len(ranges))):
        lo, hi = ranges[i]
        base = hi - lo + 2  # +1: "no byte here" sorts below every byte
        d = 0 if i >= len(b) else min(max(b[i] - lo + 1, 1), base - 1)
        scale /= base
        value += d * scale
    return value


def _fraction(a: Any, b: Any, x: Any, ranges: list[tuple[int, int]] | None = None) -> float:
    """Where x lies between a < b, in [0, 1]."""
    if isinstance(a, str):
        ab, bb, xb = a.encode(), b.encode(), x.encode()
        c = 0
        while c < min(len(ab), len(bb)) and ab[c] == bb[c]:
            c += 1
        if not xb.startswith(ab[:c]):
            return 0.0 if xb < ab else 1.0
        if ranges is None or c >= _STR_POSITIONS:
            ranges = [(0, 255)] * (max(len(ab), len(bb), len(xb), c) + 8)
        av, bv, xv = _digits(ab, c, ranges), _digits(bb, c, ranges), _digits(xb, c, ranges)
    else:
        av, bv, xv = float(a), float(b), float(x)
    if bv <= av:
        return 0.5
    return min(1.0, max(0.0, (xv - av) / (bv - av)))


@dataclass(frozen=True)
class Rank:
    """Number of entries on one side of a value: ``low <= true <= high``."""

    low: int
    high: int
    estimate: float


def rank(
    samples: Any,
    positions: np.ndarray,
    n: int,
    x: Any,
    *,
    strict: bool,
    ranges: list[tuple[int, int]] | None = None,
) -> Rank:
    """Entries with key < x (``strict``) or <= x, from the sample. O(log m).

    ``ranges``: :func:`byte_ranges` of string samples (improves string interpolation).
    """
    if n == 0:
        return Rank(0, 0, 0.0)
    j = search(samples, x, "left" if strict else "right")
    if j == 0:
        return Rank(0, 0, 0.0)
    if j >= len(positions):
        return Rank(n, n, float(n))
    lo = int(positions[j - 1]) + 1
    hi = int(positions[j])
    if hi == lo:
        return Rank(lo, lo, float(lo))
    f = _fraction(samples[j - 1], samples[j], x, ranges)
    return Rank(lo, hi, lo + f * (hi - lo))


@dataclass(frozen=True)
class SeqHistogram:
    """Equi-width histogram of a file's seqs (see module docstring)."""

    lo: int
    shift: int
    counts: np.ndarray

    def at_or_above(self, c: int) -> Rank:
        """Entries with seq >= c: bounds and estimate. O(bins)."""
        total = int(self.counts.sum())
        if total == 0:
            return Rank(0, 0, 0.0)
        if c <= self.lo:
            return Rank(total, total, float(total))
        width = 1 << self.shift
        b = (c - self.lo) >> self.shift
        if b >= self.counts.size:
            return Rank(0, 0, 0.0)
        above = int(self.counts[b + 1 :].sum())
        in_bin = int(self.counts[b])
        start = self.lo + b * width
        below_c = c - start
        partial_hi = min(in_bin, width - below_c)
        partial_lo = max(0, in_bin - below_c)
        est = in_bin * (width - below_c) / width
        est = min(max(est, partial_lo), partial_hi)
        return Rank(above + partial_lo, above + partial_hi, above + est)


def seq_hist_shift(seq_min: int, seq_max: int, bins: int) -> int:
    """Smallest power-of-two bin width putting [seq_min, seq_max] into at most ``bins`` bins."""
    span = seq_max - seq_min + 1
    shift = 0
    while (span + (1 << shift) - 1) >> shift > bins:
        shift += 1
    return shift
