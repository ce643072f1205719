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

import numpy as np

from replaydb.indexes.bounds import KeyRange
from replaydb.indexes.reader import FileCache, exact_rank, read_file_range
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


def estimate_in_file(f: RunFileMeta, kr: KeyRange, cut: int) -> tuple[float, int, int]:
    """(estimate, low, high) of live entries of ``f`` in ``kr`` with seq < ``cut``. No I/O."""
    if not f.n or cut <= f.seq_min or not kr.overlaps(f.key_min, f.key_max):
        return 0.0, 0, 0
    below, upto = _side_ranks(f, kr)
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
    if not f.n or cut <= f.seq_min or not kr.overlaps(f.key_min, f.key_max):
        return 0
    if cut <= f.seq_max:
        e = read_file_range(
            directory, f, kr.lo, kr.hi, kr.lo_inclusive, kr.hi_inclusive, files, counters, epp
        )
        return int(np.count_nonzero(e.seq < cut))
    below, upto = _side_ranks(f, kr)
    lo_rank = below.low
    if below.low != below.high:
        lo_rank = exact_rank(directory, f, kr.lo, kr.lo_inclusive, files, counters, epp)
    hi_rank = upto.low
    if upto.low != upto.high:
        hi_rank = exact_rank(directory, f, kr.hi, not kr.hi_inclusive, files, counters, epp)
    return max(0, hi_rank - lo_rank)
