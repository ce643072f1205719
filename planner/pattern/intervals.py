"""Replay intervals from index results: Algorithm 3.1 of the dissertation, vectorized.

Input: for every selected basic symbol (BS) its index result, sorted by seq (the events that
satisfy its selected range conditions). Output: sorted, disjoint, half-open time intervals
``[a, b)`` such that every match of the rewritten pattern - hence of the original one - lies
entirely inside one of them.

**Candidates.** For selected BSs ``S'_1..S'_k`` at BS positions ``i_1 < .. < i_k`` a candidate is
a sequence of events ``c_1..c_k`` with (C1) ``c_j`` in ``S'_j``'s index result, (C3) ``c_j.seq -
c_{j-1}.seq = i_j - i_{j-1}`` inside a tight basic block (BB) and ``>= i_j - i_{j-1}`` otherwise
(the BSs in between are distinct events; the paper only asks for order there), and the window
(C2) tightened by interval shortening: ``c_k.t - c_1.t <= w - (p + q) * gap_min`` where ``p``/``q``
count the BSs before ``S'_1`` / after ``S'_k`` (each is a distinct event, consecutive events are
at least ``gap_min`` apart). The matcher's window is ``last.t - first.t <= w`` (the operator's
semantics; Algorithm 3.1 line 11 writes ``<``), so ``<=`` is used.

**Interval(c, w)** (closed, integer time) of a candidate, in the general form that contains the
base case and the special cases S1-S3 with interval shortening (3.4.4)::

    A = max(c_k.t - w + q * gap_min,  FB: max(c_1.t - o_1 * gap_max, t_lo(c_1.seq - o_1)))
    B = min(c_1.t + w - p * gap_min,  LB: min(c_k.t + o_k * gap_max, t_hi(c_k.seq + o_k)))

FB holds when ``S'_1`` lies in the first BB and the pattern starts with that BB (no leading
``true*``): the match's first event is then exactly ``o_1`` events (its offset in the BB) before
``c_1``. LB likewise for the last BB with ``o_k`` BSs after ``S'_k``. ``t_lo(s)``/``t_hi(s)`` are
the time range of the TAB+-tree leaf holding seq ``s`` (bounds of that event's time), and
``gap_max`` is the stream's largest gap between consecutive events. With ``o_1 = 0`` this gives
S1 (``A = c_1.t``), with ``o_k = 0`` S2/S3 (``B = c_k.t``), and otherwise the base case
``[c_k.t - w + bs(i_k + 1, n), c_1.t + w - bs(1, i_1 - 1)]`` (with ``gap_min`` for the paper's 1).
Without a window only the FB/LB bounds remain (unbounded otherwise).

**One sweep, no candidate enumeration.** Every interval of a candidate contains ``[c_1.t,
c_k.t]``, so for one first event ``c_1`` the union over its candidates is one interval, from the
smallest ``A`` (the earliest reachable ``c_k``) to the largest ``B`` (the latest ``c_k`` inside
the window) - both are monotone in ``c_k``. The earliest reachable chain is found greedily: the
first occurrence of each next BB that starts at the required seq distance after the previous one
(any later ``c_k`` is then reachable too). All steps are merges of seq-sorted arrays
(``searchsorted``), the intervals come out sorted by start, and merging them into disjoint
intervals is one pass (running maximum of the ends). Cost: O(r log r) for r index results in
all (the ``searchsorted`` merges), O(r) memory, no Python loop over results.

Half-open: the closed ``[A, B]`` becomes ``[A, B + 1)`` and is clipped to the stream's range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from replaydb.indexes.bitsets import keys_of_bits, member_bits, union_bits_of
from replaydb.indexes.kernels import bits_pay
from replaydb.indexes.membership import (
    MemberTestCosts,
    gallop,
    hits_in_bits,
    member_test_ns,
    members_in_pieces,
    scan_pays,
    sorted_distinct,
)
from replaydb.indexes.rankcodes import coded, members_by_codes
from replaydb.indexes.reader import join_pieces
from replaydb.operators.ranges import expand_ranges
from replaydb.planner.options import PatternPlannerOptions
from replaydb.planner.pattern.membercosts import DEFAULT_MEMBER_COSTS
from replaydb.planner.pattern.rewrite import RewrittenPattern
from replaydb.store.interval_list import merge_halfopen

I64 = np.int64


def _frozen_i64(a: np.ndarray) -> np.ndarray:
    """``a`` as int64, read-only: a view when it is int64 already, else a copy."""
    out = a.astype(I64, copy=False).view()
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class Geometry:
    """What interval computation needs to know about a stream (from its manifest and tree)."""

    n_events: int
    t_min: int
    t_max: int
    gap_min: int
    gap_max: int | None
    leaf_seq_min: np.ndarray
    leaf_count: np.ndarray
    leaf_t_min: np.ndarray
    leaf_t_max: np.ndarray

    @classmethod
    def of(cls, snap) -> Geometry:  # type: ignore[no-untyped-def]
        """The geometry of ``snap``. Its leaf arrays are read-only views of the tree's leaf
        level where that is int64 already (copied otherwise), so a planning does not copy
        four columns of every leaf of the stream."""
        lv = snap.tree.leaves
        tr = snap.t_range or (0, -1)
        m = snap.manifest
        return cls(int(snap.n_events), int(tr[0]), int(tr[1]),
                   int(m.gap_min) if m.gap_min is not None else 0,
                   None if m.gap_max is None else int(m.gap_max),
                   *(_frozen_i64(lv.col(c)) for c in ("seq_min", "count", "t_min", "t_max")))

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_seq_min.size)

    @property
    def regular(self) -> bool:
        """Whether every gap between consecutive events is the same (``gap_min == gap_max``,
        fixed-rate sampling, like the synthetic stream of 3.5.3): then an event's time is a
        function of its seq (:meth:`times_of`), exactly."""
        return (self.n_events > 0 and self.gap_max is not None
                and self.gap_min == self.gap_max and self.n_leaves > 0)

    def times_of(self, s: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Exact times of the events with seqs ``s`` of a :attr:`regular` stream: the first
        event's time plus ``gap`` per seq after it (into ``out`` when given). O(len(s)),
        vectorized, one pass when the gap is 1."""
        if not self.regular:
            raise ValueError("times_of: the stream's gaps differ; times must be read")
        s = np.asarray(s, I64)
        s0, t0 = int(self.leaf_seq_min[0]), int(self.leaf_t_min[0])
        if out is None:
            out = np.empty(s.shape, I64)
        if self.gap_min == 1:
            return np.add(s, t0 - s0, out=out)
        np.multiply(s, self.gap_min, out=out)
        out += t0 - s0 * self.gap_min
        return out

    @property
    def span(self) -> int:
        """Time units covered by the stream, ``t_max - t_min + 1``."""
        return max(1, self.t_max - self.t_min + 1) if self.n_events else 0

    def leaf_of_seq(self, s: np.ndarray) -> np.ndarray:
        s = np.clip(s, 0, max(0, self.n_events - 1))
        return np.clip(np.searchsorted(self.leaf_seq_min, s, side="right") - 1, 0,
                       max(0, self.n_leaves - 1))

    def t_lo_of_seq(self, s: np.ndarray) -> np.ndarray:
        """A lower bound of the time of the event with seq ``s`` (its leaf's t_min)."""
        return self.leaf_t_min[self.leaf_of_seq(s)]

    def t_hi_of_seq(self, s: np.ndarray) -> np.ndarray:
        """An upper bound of the time of the event with seq ``s`` (its leaf's t_max)."""
        return self.leaf_t_max[self.leaf_of_seq(s)]

    def first_leaf(self, a: np.ndarray) -> np.ndarray:
        """First leaf that may hold an event with t >= a."""
        return np.searchsorted(self.leaf_t_max, a, side="left")

    def last_leaf(self, b: np.ndarray) -> np.ndarray:
        """Last leaf that may hold an event with t < b."""
        return np.searchsorted(self.leaf_t_min, np.asarray(b) - 1, side="right") - 1


MEMBER_TESTS = PatternPlannerOptions()
"""How a tight block tests its members unless told otherwise (the member-test fields of
:class:`~replaydb.planner.options.PatternPlannerOptions`: ``scan_members``, ``code_members``,
``primary_probe_ratio``, ``meet_in_anchor_bits``, at their defaults)."""


class SymbolResult:
    """The events of one BS that pass its selected conditions, sorted by seq; ``t`` is None
    when the planner left the times out (a BS whose times Algorithm 3.1 does not read).

    A result may be held as a bitmap of its seqs (``bits``, ``bound`` bits, at most ``n`` set:
    until the seqs are read, ``len`` is that bound) with the sorted seqs made from it only
    when first read (:attr:`seq`): a member of a tight block other than its anchor is only
    tested against (:func:`block_occurrences`), so its scan is never paid. ``times`` (a
    regular stream's :meth:`Geometry.times_of`) gives the times of any seqs; then :attr:`t`
    is computed from :attr:`seq` when first read.

    A result may also be *deferred*: ``pieces``, where its ``n`` seqs lie in the index files
    (as :func:`sorted_alone` takes them), with nothing sorted or set yet. A tight block then
    tests its remaining candidates against the pieces (``scan_members``), or, with a
    ``probe`` (events -> whether each passes the lookup's condition, read from the stream's
    data; None when it cannot tell), by reading their values (``primary_probe_ratio``);
    anything else reading it makes it what :func:`sorted_alone` makes first
    (:meth:`settle`)."""

    __slots__ = ("_seq", "_t", "bits", "bound", "times", "_n", "_alloc", "pieces", "probe")

    def __init__(self, seq: np.ndarray | None, t: np.ndarray | None,
                 bits: np.ndarray | None = None, bound: int = 0, *, n: int | None = None,
                 times: Any = None, alloc: Any = None, pieces: list[Any] | None = None,
                 probe: Any = None) -> None:
        if seq is None and ((bits is None and pieces is None) or n is None):
            raise ValueError("SymbolResult: give the seqs, or a bitmap or pieces and their "
                             "count")
        self._seq = seq
        self._t = t
        self.bits = bits
        self.bound = bound
        self.times = times
        self._n = int(seq.size) if seq is not None else int(n)  # type: ignore[arg-type]
        self._alloc = alloc
        self.pieces = pieces
        self.probe = probe

    def settle(self) -> None:
        """Make a deferred result a bitmap (or sorted seqs when too sparse); O(n +
        bound / 64) once, nothing for a result that is not deferred."""
        if self.pieces is None:
            return
        got = sorted_alone(self.pieces, self.bound, self._alloc, self.times)
        self.pieces = None
        self.bits, self._seq, self._n = got.bits, got._seq, got._n

    @property
    def seq(self) -> np.ndarray:
        if self._seq is None:
            self.settle()
        if self._seq is None:
            assert self.bits is not None
            self._seq = keys_of_bits(self.bits, self._n, self._alloc, at_most=True)
            self._n = int(self._seq.size)
        return self._seq

    @property
    def t(self) -> np.ndarray | None:
        if self._t is None and self.times is not None:
            seq = self.seq
            self._t = self.times(seq, None if self._alloc is None
                                 else self._alloc(seq.size, np.dtype(np.int64)))
        return self._t

    @property
    def has_t(self) -> bool:
        """Whether times are known (held, or computable from seqs)."""
        return self._t is not None or self.times is not None

    def __len__(self) -> int:
        return self._n


def sorted_alone(pieces: list[Any], bound: int, take: Any,
                 times: Any = None) -> SymbolResult:
    """A lookup's seqs (``pieces``: arrays or where they lie in index files) sorted alone, as
    a bitmap (from ``take``, an arena's) set where they lie - no copy of the seqs: a tight
    block tests its members against it, and only the seqs read are scanned out of it;
    ``times``: a regular stream's times of seqs. The bitmap is the set of the seqs: a seq
    that two overlapping ranges of the condition both return is one event, as in a sort
    that drops repeats. A sort when the bitmap does not take them (too sparse): of one copy
    of the seqs out of the index files, sorted in place. ValueError for a seq outside
    ``[0, bound)``."""
    n = sum(p.size for p in pieces)
    if n > 1 and bits_pay(n, bound):
        bits = union_bits_of(pieces, bound, take)
        assert bits is not None
        return SymbolResult(None, None, bits, bound, n=n, times=times, alloc=take)
    seq = join_pieces(pieces)
    owned = not (len(pieces) == 1 and isinstance(pieces[0], np.ndarray))  # a fresh array
    if seq.dtype.kind not in "iu" or (seq.size and (int(seq.min()) < 0
                                                    or int(seq.max()) >= bound)):
        raise ValueError("sorted_alone: seqs must be integers in [0, bound)")
    # a seq returned twice (overlapping ranges of the condition) is one event
    return SymbolResult(sorted_distinct(seq, owned=owned), None, times=times)


def intersect_results(parts: list[SymbolResult]) -> SymbolResult:
    """Events in every part (several selected conditions of one BS), sorted by seq."""
    parts = sorted(parts, key=len)
    out = parts[0]
    for p in parts[1:]:
        _, ia, _ = np.intersect1d(out.seq, p.seq, assume_unique=True, return_indices=True)
        out = SymbolResult(out.seq[ia], None if not out.has_t else out.t[ia])
    return out


@dataclass
class Occurrences:
    """Occurrences of one BB's selected BSs: seq and time of the first/last selected event."""

    first_seq: np.ndarray
    last_seq: np.ndarray
    first_t: np.ndarray | None  # None: times not read (a BB between the first and the last)
    last_t: np.ndarray | None

    def __len__(self) -> int:
        return int(self.first_seq.size)


@njit(cache=True, nogil=True)
def _keep_members(base: np.ndarray, off: int, seq: np.ndarray) -> np.ndarray:
    """The ``b`` of ``base`` (ascending) with ``b + off`` in ``seq`` (ascending, distinct): a
    galloping merge, O(len(base) * log(len(seq) / len(base))) - sequential reads like a merge
    walk when both are alike in size, few reads when ``base`` is much smaller (after the
    first member has filtered it)."""
    out = np.empty(base.size, np.int64)
    k = 0
    j = 0
    m = seq.size
    for i in range(base.size):
        x = base[i] + off
        j = gallop(seq, j, x)
        if j == m:
            break
        if seq[j] == x:
            out[k] = base[i]
            k += 1
    return out[:k]


@njit(cache=True, nogil=True)
def _times_of(base: np.ndarray, off: int, seq: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``t`` of the events ``base + off`` (every one in ``seq``; both ascending): a galloping
    merge, as in :func:`_keep_members`."""
    out = np.empty(base.size, np.int64)
    j = 0
    for i in range(base.size):
        j = gallop(seq, j, base[i] + off)
        out[i] = t[j]
    return out


def block_occurrences(offsets: list[int], results: list[SymbolResult], *,
                      members: PatternPlannerOptions = MEMBER_TESTS,
                      costs: MemberTestCosts = DEFAULT_MEMBER_COSTS) -> Occurrences:
    """Merge the selected BSs of one tight BB at fixed seq distances (``offsets`` ascending).

    The BS with the fewest events is the anchor; every other BS, smallest first, keeps the
    anchors whose event at its offset is in its result: one bitmap read per anchor left, or
    a merge walk (both sides sorted by seq); a deferred member is scanned where its seqs
    lie against the anchors left (:func:`~replaydb.indexes.membership.members_in_pieces`), so
    its bitmap is never set, where that costs less (``scan_members``), or tested by its
    files' rank codes, a read per anchor left, where they have them and that costs less
    still (``code_members``). ``members``: how members are tested (the member-test fields of
    :class:`~replaydb.planner.options.PatternPlannerOptions`; the candidates are the same
    whichever way); ``costs``: what each way costs, where they choose by cost (the store's
    calibrated :attr:`~.cost.Weights.member_tests`). O(sum of the results' sizes).
    """
    anchor = min(range(len(results)), key=lambda j: len(results[j]))
    others = [j for j in sorted(range(len(results)), key=lambda j: len(results[j]))
              if j != anchor]
    base = (_met_in_anchor_bits(offsets, results, anchor, others[0])
            if others and members.meet_in_anchor_bits else None)
    if base is not None:
        others = others[1:]
    else:
        base = np.ascontiguousarray(results[anchor].seq - offsets[anchor], dtype=I64)
    for j in others:
        o, r = offsets[j], results[j]
        if base.size == 0:
            break
        by_codes = r.pieces is not None and _by_codes(base.size, r, members.code_members,
                                                      costs)
        if by_codes or (r.pieces is not None
                        and _scans(base.size, r, members.scan_members, costs)):
            x = base + int(o)
            inside = (x >= 0) & (x < r.bound)
            if not inside.all():
                base, x = base[inside], x[inside]
            if by_codes:  # None: the codes' file left the cache meanwhile
                passed = members_by_codes(x, r.pieces)
            else:
                passed = (r.probe(x) if r.probe is not None
                          and base.size * members.primary_probe_ratio <= len(r) else None)
            if passed is None:
                passed = members_in_pieces(x, r.pieces, r.bound)
            base = base[passed]
            continue
        r.settle()
        if r.bits is not None:  # one bitmap read per anchor left
            base = member_bits(base, int(o), r.bits, r.bound)
        else:
            base = _keep_members(base, int(o), np.ascontiguousarray(r.seq, dtype=I64))
    f, last = results[0], results[-1]
    # the times of a BS that Algorithm 3.1 does not read are left out (None)
    return Occurrences(base + offsets[0], base + offsets[-1], _member_times(f, base, offsets[0]),
                       _member_times(last, base, offsets[-1]))


def _by_codes(targets: int, r: SymbolResult, code_members: bool | None,
              costs: MemberTestCosts) -> bool:
    """Whether ``targets`` candidates are tested against deferred ``r`` by its files' rank
    codes (``code_members``: always, never, or None: where ``costs`` find it cheaper than
    the cheaper of a scan and the bitmap)."""
    if code_members is False or r.pieces is None or not coded(r.pieces):
        return False
    if code_members:
        return True
    return costs.codes_ns(targets, len(r.pieces)) < member_test_ns(targets, len(r), r.bound,
                                                                    costs)


def _scans(targets: int, r: SymbolResult, scan_members: bool | None,
           costs: MemberTestCosts) -> bool:
    """Whether ``targets`` candidates are tested against deferred ``r`` by a scan of its seqs
    (``scan_members``: always, never, or None: where :func:`scan_pays` finds it cheaper by
    ``costs``)."""
    if scan_members is not None:
        return scan_members
    return scan_pays(targets, len(r), r.bound, costs)


def _met_in_anchor_bits(offsets: list[int], results: list[SymbolResult], anchor: int,
                        j: int) -> np.ndarray | None:
    """The anchors (as block starts, ascending) whose event at member ``j``'s offset is in
    ``j``'s deferred result, when the anchor is held as a bitmap not scanned yet: one pass
    over ``j``'s seqs where they lie, each tested against the anchor's bitmap
    (:func:`~replaydb.indexes.membership.hits_in_bits`). This spares the anchor's scan out of
    its bitmap and ``j``'s own bitmap (its zeroing and a bit set per seq). None when the
    anchor or ``j`` is not held so (or a seq repeats in ``j``): the caller tests ``j`` as any
    other member."""
    ra, r = results[anchor], results[j]
    if ra.bits is None or ra._seq is not None or r.pieces is None:
        return None
    hits = hits_in_bits(r.pieces, int(offsets[anchor]) - int(offsets[j]), ra.bits, ra.bound,
                        len(ra))
    return None if hits is None else hits - offsets[anchor]


def _member_times(r: SymbolResult, base: np.ndarray, off: int) -> np.ndarray | None:
    """Times of the events ``base + off`` of ``r`` (None when ``r`` has none): computed from
    the seqs on a regular stream, else looked up in ``r``'s sorted seqs."""
    if r.times is not None:
        return r.times(base + off)
    if r.t is None:
        return None
    return _times_of(base, int(off), np.ascontiguousarray(r.seq, dtype=I64),
                     np.ascontiguousarray(r.t, dtype=I64))


@dataclass
class IntervalStats:
    """What the sweep found (for EXPLAIN)."""

    occurrences: list[int]
    first_events: int
    candidates_with_interval: int
    raw_intervals: int


def candidate_intervals(rp: RewrittenPattern, selected: dict[int, SymbolResult],
                        geo: Geometry, *, members: PatternPlannerOptions = MEMBER_TESTS,
                        costs: MemberTestCosts = DEFAULT_MEMBER_COSTS
                        ) -> tuple[np.ndarray, np.ndarray, IntervalStats]:
    """Closed intervals ``[A, B]`` (one per first event with a candidate), sorted by ``A``.

    ``selected`` maps BS index -> its (intersected) result; ``members`` and ``costs``: how a
    tight block tests its members (:func:`block_occurrences`). See the module docstring.
    """
    idxs = sorted(selected)
    if not idxs:
        raise ValueError("no selected symbol")
    # selected BSs grouped into their BBs
    groups: dict[int, list[int]] = {}
    for i in idxs:
        groups.setdefault(rp.symbols[i].block, []).append(i)
    order = sorted(groups)
    occs: list[Occurrences] = []
    for b in order:
        bss = groups[b]
        res = [selected[i] for i in bss]
        if len(bss) == 1:
            r = res[0]
            occs.append(Occurrences(r.seq, r.seq, r.t, r.t))
        else:
            offs = [rp.symbols[i].offset for i in bss]
            occs.append(block_occurrences(offs, res, members=members, costs=costs))
    first_bs, last_bs = groups[order[0]][0], groups[order[-1]][-1]
    p, q = first_bs, rp.n - 1 - last_bs
    gmin, gmax = geo.gap_min, geo.gap_max
    w = rp.window
    o1 = occs[0]
    n1 = len(o1)
    stats = IntervalStats([len(o) for o in occs], n1, 0, 0)
    if n1 == 0:
        return np.empty(0, I64), np.empty(0, I64), stats
    # greedy earliest chain through the following blocks
    valid = np.ones(n1, bool)
    cur_last = o1.last_seq
    pos = np.arange(n1, dtype=I64)
    for k in range(1, len(order)):
        ob = occs[k]
        d = groups[order[k]][0] - groups[order[k - 1]][-1]
        if len(ob) == 0:
            return np.empty(0, I64), np.empty(0, I64), stats
        pos = np.searchsorted(ob.first_seq, cur_last + d, side="left")
        valid &= pos < len(ob)
        pos = np.minimum(pos, len(ob) - 1)
        cur_last = ob.last_seq[pos]
    ou = occs[-1]
    lo = pos
    t1 = o1.first_t
    if w is not None:
        wp = w - (p + q) * gmin
        hi = np.searchsorted(ou.last_t, t1 + wp, side="right") - 1
        if len(order) == 1:
            hi = np.arange(n1, dtype=I64)
            valid &= (ou.last_t - t1) <= wp
        valid &= (hi >= lo) & (ou.last_t[lo] - t1 <= wp)
    else:
        hi = np.full(n1, len(ou) - 1, dtype=I64) if len(order) > 1 else np.arange(n1, dtype=I64)
    if not valid.any():
        return np.empty(0, I64), np.empty(0, I64), stats
    sel = np.flatnonzero(valid)
    lo, hi, t1 = lo[sel], hi[sel], t1[sel]
    s1 = o1.first_seq[sel]
    ck_t_lo, ck_t_hi, ck_s_hi = ou.last_t[lo], ou.last_t[hi], ou.last_seq[hi]
    neg_inf = np.iinfo(I64).min // 4
    pos_inf = np.iinfo(I64).max // 4
    fb = rp.symbols[first_bs].block == 0 and not rp.lead_star
    lb = rp.symbols[last_bs].block == len(rp.blocks) - 1 and not rp.trail_star
    a = (ck_t_lo - w + q * gmin) if w is not None else np.full(sel.size, neg_inf, I64)
    b = (t1 + w - p * gmin) if w is not None else np.full(sel.size, pos_inf, I64)
    if fb:
        o = rp.symbols[first_bs].offset if rp.tight else 0
        fa = geo.t_lo_of_seq(s1 - o)
        if gmax is not None:
            fa = np.maximum(fa, t1 - o * gmax)
        a = np.maximum(a, np.minimum(fa, t1))
    if lb:
        o = (rp.block_len(rp.symbols[last_bs].block) - 1 - rp.symbols[last_bs].offset) \
            if rp.tight else 0
        fbnd = geo.t_hi_of_seq(ck_s_hi + o)
        if gmax is not None:
            fbnd = np.minimum(fbnd, ck_t_hi + o * gmax)
        b = np.minimum(b, np.maximum(fbnd, ck_t_hi))
    stats.candidates_with_interval = int(sel.size)
    return a.astype(I64), b.astype(I64), stats


def merge_closed(a: np.ndarray, b: np.ndarray, geo: Geometry) -> np.ndarray:
    """Closed intervals -> sorted disjoint half-open ``[a, b)`` rows, clipped to the stream."""
    if a.size == 0 or geo.n_events == 0:
        return np.empty((0, 2), I64)
    a = np.maximum(a, geo.t_min)
    e = np.minimum(b, geo.t_max) + 1
    keep = e > a
    a, e = a[keep], e[keep]
    return merge_halfopen(a, e)


def intersect_intervals(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Intersection of two sorted disjoint half-open interval lists (rows ``[a, b)``).
    O((|x| + |y|) log |y| + pairs), vectorized."""
    if x.size == 0 or y.size == 0:
        return np.empty((0, 2), I64)
    # the y rows overlapping x row i: lo[i] .. hi[i] - 1
    lo = np.searchsorted(y[:, 1], x[:, 0], side="right")
    hi = np.searchsorted(y[:, 0], x[:, 1], side="left")
    xi, yi = expand_ranges(lo, hi)
    if xi.size == 0:
        return np.empty((0, 2), I64)
    a = np.maximum(x[xi, 0], y[yi, 0])
    b = np.minimum(x[xi, 1], y[yi, 1])
    keep = b > a
    return np.stack([a[keep], b[keep]], axis=1).astype(I64)


def widen_for_navigation(iv: np.ndarray, geo: Geometry, before: int, after: int) -> np.ndarray:
    """Widen every interval so that ``before`` events before its first event and ``after``
    events after its last one are replayed too (PREV/NEXT reach outside a match).

    The first event with t >= a lies in leaf ``i``, so its seq is at least ``seq_min[i]``; the
    event ``before`` positions earlier has a time at least the t_min of the leaf holding
    ``seq_min[i] - before`` (and at least ``a - before * gap_max``). Symmetrically for the end.
    Conservative (never narrower than needed); the result is merged again.
    """
    if iv.size == 0 or (before <= 0 and after <= 0):
        return iv
    a, b = iv[:, 0].copy(), iv[:, 1].copy()
    if before > 0:
        i = np.minimum(geo.first_leaf(a), geo.n_leaves - 1)
        na = geo.t_lo_of_seq(geo.leaf_seq_min[i] - before)
        if geo.gap_max is not None:
            na = np.maximum(na, a - before * geo.gap_max)
        a = np.minimum(a, na)
    if after > 0:
        j = np.maximum(geo.last_leaf(b), 0)
        last_seq = geo.leaf_seq_min[j] + geo.leaf_count[j] - 1
        nb = geo.t_hi_of_seq(last_seq + after) + 1
        if geo.gap_max is not None:
            nb = np.minimum(nb, b + after * geo.gap_max)
        b = np.maximum(b, nb)
    a = np.maximum(a, geo.t_min)
    b = np.minimum(b, geo.t_max + 1)
    return merge_halfopen(a, b)


def coalesce_by_leaves(iv: np.ndarray, geo: Geometry, max_gap_leaves: float = 0.0
                       ) -> np.ndarray:
    """Join consecutive intervals separated by at most ``max_gap_leaves`` whole leaves.

    Replay reads whole leaves, so two intervals ending and starting in one leaf would read it
    twice (joined with ``max_gap_leaves = 0``); and every interval costs a fixed navigation
    overhead, so replaying a short gap is cheaper than starting a new interval. Joining is
    always correct: a superset of intervals never loses a match, and every match found in the
    gap is a candidate of some interval (see :mod:`replaydb.planner.pattern.planner`).
    One compiled pass, O(n log leaves): a plan's few dozen intervals are too few for NumPy's
    fixed costs per call to amortize.
    """
    if iv.shape[0] <= 1:
        return iv
    return _coalesce(np.ascontiguousarray(iv, dtype=I64), geo.leaf_t_min, geo.leaf_t_max,
                     float(max_gap_leaves))


@njit(cache=True, nogil=True)
def _coalesce(iv: np.ndarray, leaf_t_min: np.ndarray, leaf_t_max: np.ndarray,
              max_gap: float) -> np.ndarray:
    """:func:`coalesce_by_leaves` of sorted disjoint rows ``iv`` (at least one): a row starts
    a new interval when the leaves between its first leaf (:meth:`Geometry.first_leaf`) and
    the previous row's last (:meth:`Geometry.last_leaf`) are more than ``max_gap``."""
    n = iv.shape[0]
    out = np.empty((n, 2), np.int64)
    k = 0
    out[0, 0] = iv[0, 0]
    out[0, 1] = iv[0, 1]
    prev_last = np.searchsorted(leaf_t_min, iv[0, 1] - 1, side="right") - 1
    for i in range(1, n):
        first = np.searchsorted(leaf_t_max, iv[i, 0], side="left")
        if first - prev_last - 1 > max_gap:
            k += 1
            out[k, 0] = iv[i, 0]
        out[k, 1] = iv[i, 1]
        prev_last = np.searchsorted(leaf_t_min, iv[i, 1] - 1, side="right") - 1
    return out[: k + 1].copy()


def replay_intervals(rp: RewrittenPattern, selected: dict[int, SymbolResult],
                     geo: Geometry, *, members: PatternPlannerOptions = MEMBER_TESTS,
                     costs: MemberTestCosts = DEFAULT_MEMBER_COSTS
                     ) -> tuple[np.ndarray, IntervalStats]:
    """Algorithm 3.1: sorted disjoint half-open replay intervals (rows ``[a, b)``);
    ``members`` and ``costs``: how a tight block tests its members
    (:func:`block_occurrences`)."""
    a, b, st = candidate_intervals(rp, selected, geo, members=members, costs=costs)
    iv = merge_closed(a, b, geo)
    st.raw_intervals = int(a.size)
    return iv, st
