"""Membership tests of a tight block's candidates against an index lookup's seqs.

Two ways: a scan of the lookup's values where they lie, each tested against a coarse bitmap of
the targets (:func:`members_in_pieces`), or the values' bitmap with a bit read per target
(:func:`~replaydb.indexes.bitsets.union_bits_of`, :func:`~replaydb.indexes.bitsets.member_bits`);
:func:`scan_pays` chooses by the cost model of :class:`MemberTestCosts`, whose costs the
caller measures. :func:`hits_in_bits` meets a bitmap with a lookup's values the other way round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numba as nb
import numpy as np

from replaydb.indexes.bitsets import _each_piece, _span

PROBE_SHIFT = 3
""":func:`members_in_pieces`' coarse bitmap keeps one bit per ``2**PROBE_SHIFT`` values (a
10M-value stream: 156 KB, in the second-level cache)."""

PASS_BUFFER = 1 << 13
""":func:`members_in_pieces` gathers this many values that pass the coarse bitmap before it
sorts them and looks them up among the targets (64 KB)."""


@nb.njit(cache=True, nogil=True, inline="always")
def gallop(seq: np.ndarray, j: int, x: int) -> int:
    """First position ``>= j`` of ascending ``seq`` holding a value ``>= x``: steps of 1, 2,
    4, ... from ``j``, then a binary search inside the last step. O(log d) for a distance
    ``d``: a merge walk's cost when the next value is near, a binary search's when it is far
    (the other side is much smaller)."""
    m = seq.size
    if j >= m or seq[j] >= x:
        return j
    step = 1
    lo = j  # seq[lo] < x
    hi = j + 1
    while hi < m and seq[hi] < x:
        lo = hi
        step <<= 1
        hi = lo + step
    if hi > m:
        hi = m
    # seq[lo] < x, and seq[hi] >= x or hi == m
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if seq[mid] < x:
            lo = mid
        else:
            hi = mid
    return hi


@nb.njit(cache=True, nogil=True)
def _settle_passes(cand: np.ndarray, k: int, targets: np.ndarray, hit: np.ndarray) -> None:
    """Mark in ``hit`` the targets among ``cand[:k]``: the passes sorted, then one galloping
    walk of the targets (ascending) - O(k log k + k log(targets / k))."""
    c = np.sort(cand[:k])
    m = targets.size
    j = 0
    for i in range(k):
        x = c[i]
        j = gallop(targets, j, x)
        if j == m:
            return
        if targets[j] == x:
            hit[j] = True


@nb.njit(cache=True, nogil=True)
def _probe_values(vals: np.ndarray, targets: np.ndarray, shift: int, coarse: np.ndarray,
                  bound: int, hit: np.ndarray, cand: np.ndarray, k: int) -> int:
    """Gather into ``cand`` (from ``k``) the values of ``vals`` whose coarse bit is set,
    settling a full buffer into ``hit`` (:func:`_settle_passes`): the new count, or -2 on a
    value outside ``[0, bound)``."""
    one = np.uint64(1)
    sh = np.uint64(shift)
    ub = np.uint64(bound)
    six = np.uint64(6)
    low = np.uint64(63)
    cap = cand.size
    for j in range(vals.size):
        s = np.uint64(vals[j])
        if s >= ub:
            return -2
        c = s >> sh
        if (coarse[c >> six] >> (c & low)) & one:
            if k == cap:
                _settle_passes(cand, k, targets, hit)
                k = 0
            cand[k] = np.int64(s)
            k += 1
    return k


@nb.njit(cache=True, nogil=True)
def _probe_spans(buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray,
                 targets: np.ndarray, shift: int, coarse: np.ndarray, bound: int,
                 hit: np.ndarray, cand: np.ndarray, k: int) -> int:
    """:func:`_probe_values` of the int64 values lying in ``buf`` (bytes): ``counts[i]`` of
    them from byte ``offsets[i]``."""
    for i in range(offsets.size):
        ok, vals = _span(buf, offsets, counts, i)
        if not ok:
            return -2
        k = _probe_values(vals, targets, shift, coarse, bound, hit, cand, k)
        if k < 0:
            return k
    return k


@nb.njit(cache=True, nogil=True)
def _coarse_of(targets: np.ndarray, shift: int, bound: int) -> np.ndarray:
    """One bit per ``2**shift`` values of ``[0, bound)``, set where a target lies."""
    coarse = np.zeros((((bound - 1) >> shift) >> 6) + 1, np.uint64)
    one = np.uint64(1)
    for i in range(targets.size):
        c = targets[i] >> shift
        coarse[c >> 6] |= one << np.uint64(c & 63)
    return coarse


def members_in_pieces(targets: np.ndarray, pieces: Sequence[Any], bound: int) -> np.ndarray:
    """Which of ``targets`` (ascending, distinct integers in ``[0, bound)``) are among the
    values of ``pieces`` (arrays, or where int64 values lie in a file's bytes, as
    :func:`~replaydb.indexes.bitsets.union_bits_of` takes them): a boolean per target.

    For targets tested against many values - the candidates a tight block has left, against
    a member's lookup - without a bitmap of the values: one pass over them where they lie,
    each tested against a coarse bitmap of the targets (one bit per ``2**PROBE_SHIFT``
    values); those that pass are gathered (:data:`PASS_BUFFER` at a time), sorted, and
    looked up by one galloping walk of the targets: sorted, the passes walk the targets
    once in order, where a binary search per passing value would miss the cache at every
    step. When this pays over the values' bitmap: :func:`scan_pays`. O(values + passes log
    passes + targets). ValueError for a value outside ``[0, bound)``."""
    targets = np.ascontiguousarray(targets, dtype=np.int64)
    hit = np.zeros(targets.size, np.bool_)
    if targets.size == 0:
        return hit
    if int(targets[0]) < 0 or int(targets[-1]) >= bound:
        raise ValueError("members_in_pieces: targets must lie in [0, bound)")
    b = int(bound)
    coarse = _coarse_of(targets, PROBE_SHIFT, b)
    cand = np.empty(PASS_BUFFER, np.int64)
    got = [0]
    _each_piece(pieces, "members_in_pieces",
                lambda v: _count_status(_probe_values(v, targets, PROBE_SHIFT, coarse, b, hit,
                                                      cand, got[0]), got),
                lambda buf, offs, cnts: _count_status(
                    _probe_spans(buf, offs, cnts, targets, PROBE_SHIFT, coarse, b, hit, cand,
                                 got[0]), got))
    if got[0]:
        _settle_passes(cand, got[0], targets, hit)
    return hit


@dataclass(frozen=True)
class MemberTestCosts:
    """The costs, in ns, of the ways targets are tested against a lookup's values: the linear
    model :func:`scan_pays` and :func:`member_test_ns` choose by. They depend on the machine
    (its caches, memory latency and bandwidth), so none is fixed here: the planner measures
    them when it calibrates a store and hands them in.

    * the scan (:func:`members_in_pieces`): :attr:`scan_value` a value, plus
      :attr:`scan_pass` a value passing its coarse bitmap - a share
      ``min(1, targets * 2**PROBE_SHIFT / bound)`` of them;
    * the bitmap (:func:`~replaydb.indexes.bitsets.union_bits_of`, then
      :func:`~replaydb.indexes.bitsets.member_bits`): :attr:`bits_bound` a bit of its bound
      (its zeroing and first writes), :attr:`bits_value` a value set (a random
      read-modify-write), :attr:`bits_target` a target tested;
    * the rank codes (:func:`~replaydb.indexes.rankcodes.members_by_codes`):
      :attr:`code_target` a target and piece (a code read in a map of two bytes per event,
      the cut buckets' few lookups included).

    ValueError for a cost that is negative or not finite."""

    scan_value: float
    scan_pass: float
    bits_value: float
    bits_bound: float
    bits_target: float
    code_target: float

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"MemberTestCosts.{f.name} must be a finite cost >= 0, "
                                 f"not {v!r}")

    def scan_ns(self, targets: int, values: int, bound: int) -> float:
        """ns of :func:`members_in_pieces` testing ``targets`` against ``values`` in
        ``[0, bound)``. O(1)."""
        passing = min(1.0, targets * (1 << PROBE_SHIFT) / max(bound, 1))
        return values * (self.scan_value + self.scan_pass * passing)

    def bits_ns(self, targets: int, values: int, bound: int) -> float:
        """ns of setting the bitmap of ``values`` (``bound`` bits) and reading a bit per
        target. O(1)."""
        return self.bits_bound * bound + self.bits_value * values + self.bits_target * targets

    def codes_ns(self, targets: int, pieces: int) -> float:
        """ns of testing ``targets`` by the rank codes of a lookup of ``pieces`` pieces.
        O(1)."""
        return self.code_target * targets * pieces


def scan_pays(targets: int, values: int, bound: int, costs: MemberTestCosts) -> bool:
    """Whether testing ``targets`` against a lookup's ``values`` (in ``[0, bound)``) costs
    less by :func:`members_in_pieces` than by setting the values' bitmap and reading a bit
    per target (:func:`~replaydb.indexes.bitsets.union_bits_of`,
    :func:`~replaydb.indexes.bitsets.member_bits`), by the model of ``costs``
    (:meth:`MemberTestCosts.scan_ns` against :meth:`MemberTestCosts.bits_ns`). With costs
    as machines have them, the scan wins with few targets whatever the values, and with
    many targets against few values; the bitmap with many targets against many values.
    Either way gives the same members. O(1)."""
    return costs.scan_ns(targets, values, bound) < costs.bits_ns(targets, values, bound)


def member_test_ns(targets: int, values: int, bound: int, costs: MemberTestCosts) -> float:
    """ns of testing ``targets`` against a lookup's ``values`` the cheaper way of
    :func:`scan_pays` (a scan of the values, or their bitmap), by ``costs``. O(1)."""
    return min(costs.scan_ns(targets, values, bound), costs.bits_ns(targets, values, bound))


@nb.njit(cache=True, nogil=True)
def _hits_values(vals: np.ndarray, shift: int, bits: np.ndarray, bound: int, out: np.ndarray,
                 k: int) -> int:
    """Append to ``out`` (from ``k``) every ``v + shift`` of ``vals`` whose bit is set in
    ``bits``: the new count, -2 on a value outside ``[0, bound)``, -3 when ``out`` is
    full."""
    one = np.uint64(1)
    ub = np.uint64(bound)
    six = np.uint64(6)
    low = np.uint64(63)
    cap = out.size
    for j in range(vals.size):
        v = vals[j]
        if np.uint64(v) >= ub:
            return -2
        x = np.uint64(v + shift)
        if x < ub and (bits[x >> six] >> (x & low)) & one:
            if k >= cap:
                return -3
            out[k] = np.int64(x)
            k += 1
    return k


@nb.njit(cache=True, nogil=True)
def _hits_spans(buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray, shift: int,
                bits: np.ndarray, bound: int, out: np.ndarray, k: int) -> int:
    """:func:`_hits_values` of the int64 values lying in ``buf`` (bytes): ``counts[i]`` of
    them from byte ``offsets[i]``."""
    for i in range(offsets.size):
        ok, vals = _span(buf, offsets, counts, i)
        if not ok:
            return -2
        k = _hits_values(vals, shift, bits, bound, out, k)
        if k < 0:
            return k
    return k


def hits_in_bits(pieces: Sequence[Any], shift: int, bits: np.ndarray, bound: int,
                 at_most: int) -> np.ndarray | None:
    """The distinct ``v + shift`` (ascending) of the values ``v`` of ``pieces`` (arrays, or
    where int64 values lie in a file's bytes, as :func:`~replaydb.indexes.bitsets.union_bits_of` takes them) whose bit
    is set in ``bits`` (a bitmap of ``[0, bound)`` holding at most ``at_most`` members):
    which members of ``bits`` a lookup's events, shifted, meet.

    A tight block's anchor held as a bitmap meets its next member this way: one pass over
    the member's seqs where they lie, a bitmap read each, instead of setting the member's
    own bitmap and scanning the anchor's out of its bitmap to test each against it. None
    when the hits outnumber ``at_most`` (a value repeated within the pieces; the caller
    takes the other way then); ValueError for a value outside ``[0, bound)``.
    O(values + hits log hits)."""
    out = np.empty(max(int(at_most), 1), np.int64)
    b = int(bound)
    d = int(shift)
    got = [0]

    def on_values(v: np.ndarray) -> int:
        k = _hits_values(v, d, bits, b, out, got[0])
        return _count_status(k, got)

    def on_spans(buf: np.ndarray, offs: np.ndarray, cnts: np.ndarray) -> int:
        k = _hits_spans(buf, offs, cnts, d, bits, b, out, got[0])
        return _count_status(k, got)

    try:
        _each_piece(pieces, "hits_in_bits", on_values, on_spans)
    except _Full:
        return None
    return sorted_distinct(out[:got[0]], owned=True)


def sorted_distinct(values: np.ndarray, *, owned: bool = False) -> np.ndarray:
    """``values`` sorted, each once: a sort and one comparison pass dropping repeats
    (``np.unique``'s sort cost twice this); ``owned``: ``values`` is the caller's scratch,
    sorted in place instead of copied. O(n log n)."""
    if owned:
        values.sort()
        out = values
    else:
        out = np.sort(values)
    if out.size > 1:
        step = out[1:] != out[:-1]
        if not step.all():
            out = out[np.concatenate(([True], step))]
    return out


class _Full(Exception):
    """:func:`hits_in_bits`: more hits than the bitmap's members."""


def _count_status(k: int, got: list[int]) -> int:
    """:func:`~replaydb.indexes.bitsets._each_piece`'s status of a kernel answering a count: the count (>= 0) kept in
    ``got[0]`` and 0; 2 for -2 (a value outside ``[0, bound)``); :class:`_Full` raised for
    -3 (no room left)."""
    if k == -3:
        raise _Full
    if k < 0:
        return 2
    got[0] = k
    return 0
