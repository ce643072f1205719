"""Counting the entries of a key range in one run file, from statistics or exactly.

Estimate (no I/O): two ranks from the file's key sample (:mod:`replaydb.indexes.sketch`),
``count = rank(hi side) - rank(lo side)``, with guaranteed bounds; error at most
``2 * (sample_step - 1)`` entries per file. When the file is touched by a seq cut-off (a
tombstone of a newer run, or ``max_seq``), the entries at or after it are removed using the
file's seq histogram: the estimate scales by the surviving fraction (key and seq assumed
independent) and the bounds widen by the histogram's uncertainty.

Exact: each boundary rank is made exact by reading the key column of the one row group holding
it; a file touched by a cut-off is read in the range (key and seq) instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from replaydb.indexes.bounds import KeyRange
from replaydb.indexes.reader import FileCache, exact_rank, read_file_range, row_group_span
from replaydb.indexes.results import CostCounters
from replaydb.indexes.runfile import RunFileMeta
from replaydb.indexes.sketch import Rank, rank


def _side_ranks(f: RunFileMeta, kr: KeyRange) -> tuple[Rank, Rank]:
    """Entries before the range (lo side) and entries up to its end (hi side)."""
    pos = f.sample_pos
    if kr.lo is None:
        below = Rank(0, 0, 0.0)
    else:
        below = rank(f.samples, pos, f.n, kr.lo, strict=kr.lo_inclusive, ranges=f.byte_ranges)
    if kr.hi is None:
        upto = Rank(f.n, f.n, float(f.n))
    else:
        upto = rank(f.samples, pos, f.n, kr.hi, strict=not kr.hi_inclusive, ranges=f.byte_ranges)
    return below, upto


def _may_hold(f: RunFileMeta, kr: KeyRange, cut: int) -> bool:
    """Whether ``f`` can hold live entries of ``kr`` with seq < ``cut`` (entries, seqs from
    before the cut, keys overlapping the range): the files every count skips otherwise."""
    return bool(f.n) and cut > f.seq_min and kr.overlaps(f.key_min, f.key_max)


def estimate_in_file(f: RunFileMeta, kr: KeyRange, cut: int) -> tuple[float, int, int]:
    """(estimate, low, high) of live entries of ``f`` in ``kr`` with seq < ``cut``. No I/O."""
    if not _may_hold(f, kr, cut):
        return 0.0, 0, 0
    below, upto = _side_ranks(f, kr)
    return _combine(f, below, upto, cut)


def _combine(f: RunFileMeta, below: Rank, upto: Rank, cut: int) -> tuple[float, int, int]:
    """(estimate, low, high) of the entries between two side ranks of ``f`` with seq below
    ``cut``."""
    low = max(0, upto.low - below.high)
    high = max(0, upto.high - below.low)
    est = min(max(upto.estimate - below.estimate, float(low)), float(high))
    if cut <= f.seq_max:
        dead = f.seq_hist.at_or_above(cut)
        est *= (f.n - dead.estimate) / f.n
        low = max(0, low - dead.high)
        high = min(high, f.n - dead.low)
        est = min(max(est, float(low)), float(high))
    return est, low, high


def estimate_and_pages(f: RunFileMeta, kr: KeyRange, cut: int, epp: int, *, estimate: bool,
                       pages: bool) -> tuple[float, int, int, int]:
    """``estimate_in_file(f, kr, cut)`` (with ``estimate``, else zeros) and, with ``pages``,
    the pages a range query reads of ``f`` (``f.pages_of`` of its :func:`row_group_span`,
    else 0): what a planner's statistics ask of every file for every range. A file of
    numeric keys answers both in one compiled call (:func:`_numeric_stats`) instead of a
    series of Python and NumPy calls per range. The same numbers either way (a seeded test
    holds them to it)."""
    if not (estimate or pages):
        return 0.0, 0, 0, 0
    samples = f.samples
    if not (isinstance(samples, np.ndarray) and samples.dtype.kind in "iuf"
            and isinstance(f.rg_min, np.ndarray) and isinstance(f.rg_max, np.ndarray)):
        est, low, high = estimate_in_file(f, kr, cut) if estimate else (0.0, 0, 0)
        n_pages = 0
        if pages:
            a, b = row_group_span(f, kr)
            n_pages = f.pages_of(a, b, epp)
        return est, low, high, n_pages
    estimate = estimate and _may_hold(f, kr, cut)
    has_lo, has_hi = kr.lo is not None, kr.hi is not None
    bl, bh, be, ul, uh, ue, n_pages = _numeric_stats(
        samples, f.sample_pos, int(f.n), kr.lo if has_lo else 0, has_lo, bool(kr.lo_inclusive),
        kr.hi if has_hi else 0, has_hi, bool(kr.hi_inclusive), f.rg_min, f.rg_max, f.rg_rows,
        int(epp), estimate, pages)
    if not estimate:
        return 0.0, 0, 0, int(n_pages)
    est, low, high = _combine(f, Rank(int(bl), int(bh), float(be)),
                              Rank(int(ul), int(uh), float(ue)), cut)
    return est, low, high, int(n_pages)


@njit(cache=True, nogil=True)
def _numeric_rank(samples: np.ndarray, pos: np.ndarray, n: int, x: Any, strict: bool
                  ) -> tuple[int, int, float]:
    """:func:`~replaydb.indexes.sketch.rank` of a numeric sample: ``(low, high, estimate)``."""
    if n == 0:
        return 0, 0, 0.0
    if strict:
        j = np.searchsorted(samples, x, side="left")
    else:
        j = np.searchsorted(samples, x, side="right")
    if j == 0:
        return 0, 0, 0.0
    if j >= pos.size:
        return n, n, float(n)
    lo = pos[j - 1] + 1
    hi = pos[j]
    if hi == lo:
        return lo, lo, float(lo)
    av, bv, xv = float(samples[j - 1]), float(samples[j]), float(x)
    f = 0.5 if bv <= av else min(1.0, max(0.0, (xv - av) / (bv - av)))
    return lo, hi, lo + f * (hi - lo)


@njit(cache=True, nogil=True)
def _numeric_stats(samples: np.ndarray, pos: np.ndarray, n: int, lo: Any, has_lo: bool,
                   lo_inclusive: bool, hi: Any, has_hi: bool, hi_inclusive: bool,
                   rg_min: np.ndarray, rg_max: np.ndarray, rg_rows: np.ndarray, epp: int,
                   estimate: bool, pages: bool) -> tuple[int, int, float, int, int, float, int]:
    """The two side ranks of :func:`_side_ranks` (when ``estimate``) and the pages of
    :func:`row_group_span` (when ``pages``) of one numeric file."""
    bl, bh, be = 0, 0, 0.0
    ul, uh, ue = n, n, float(n)
    if estimate:
        if has_lo:
            bl, bh, be = _numeric_rank(samples, pos, n, lo, lo_inclusive)
        if has_hi:
            ul, uh, ue = _numeric_rank(samples, pos, n, hi, not hi_inclusive)
    n_pages = 0
    if pages:
        g = rg_rows.size
        a = 0
        if has_lo:
            if lo_inclusive:
                a = np.searchsorted(rg_max, lo, side="left")
            else:
                a = np.searchsorted(rg_max, lo, side="right")
        b = g
        if has_hi:
            if hi_inclusive:
                b = np.searchsorted(rg_min, hi, side="right")
            else:
                b = np.searchsorted(rg_min, hi, side="left")
        for i in range(a, max(a, b)):
            n_pages += (rg_rows[i] + epp - 1) // epp
    return bl, bh, be, ul, uh, ue, n_pages


def exact_in_file(
    directory: str,
    f: RunFileMeta,
    kr: KeyRange,
    cut: int,
    files: FileCache,
    counters: CostCounters,
    epp: int,
) -> int:
    """Exact live entries of ``f`` in ``kr`` with seq < ``cut`` (reads boundary row groups)."""
    if not _may_hold(f, kr, cut):
        return 0
    if cut <= f.seq_max:
        e = read_file_range(directory, f, kr, files, counters, epp)
        return int(np.count_nonzero(e.seq < cut))
    below, upto = _side_ranks(f, kr)
    lo_rank = below.low
    if below.low != below.high:
        lo_rank = exact_rank(directory, f, kr.lo, kr.lo_inclusive, files, counters, epp)
    hi_rank = upto.low
    if upto.low != upto.high:
        hi_rank = exact_rank(directory, f, kr.hi, not kr.hi_inclusive, files, counters, epp)
    return max(0, hi_rank - lo_rank)
