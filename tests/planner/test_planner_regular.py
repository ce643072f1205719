"""Planning on regular streams (every gap between consecutive events the same): event times
are computed from seqs instead of being read and sorted along, and tight blocks test their
members against the sort's bitmap. The replay intervals are the same as without these, and
the matches are full replay's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import replaydb
from replaydb.indexes.bitsets import keys_of_bits, member_bits, unique_bits
from replaydb.indexes.membership import MemberTestCosts
from replaydb.indexes.plainread import Spans
from replaydb.indexes.rankcodes import RankCodes, build_codes
from replaydb.planner.options import PatternPlannerOptions
from replaydb.planner.pattern import intervals as iv
from replaydb.planner.pattern.intervals import Geometry, SymbolResult, block_occurrences
from replaydb.planner.query import QueryOptions, plan_query
from tests.planner_cases import same_as_full_replay, xy_range_query, xy_store


@contextmanager
def _store(seed: int, n: int, gap: int | None, t0: int = 7) -> Iterator[Any]:
    """Stream ``s`` of ``n`` events with indexed ``x`` in 0..49 and ``y`` in 0..29; times
    ``t0 + gap * i`` (regular) or, with ``gap=None``, random gaps 0-3."""
    rng = np.random.default_rng(seed)
    if gap is None:
        t = np.cumsum(rng.integers(0, 4, n)).astype(np.int64)
    else:
        t = t0 + gap * np.arange(n, dtype=np.int64)
    with xy_store(t, rng, 16, parts=2) as store:  # the gap across files counts too
        yield store


def test_geometry_knows_a_regular_stream_and_its_times() -> None:
    with _store(1, 500, 5) as store:
        snap = store.stream("s")
        geo = Geometry.of(snap)
        assert geo.regular
        t = snap.read(columns=["t", "seq"])
        seq = t.column("seq").to_numpy()
        assert np.array_equal(geo.times_of(seq), t.column("t").to_numpy())
        out = np.empty(3, np.int64)
        assert geo.times_of(np.array([0, 1, 499]), out) is out
        assert out.tolist() == [7, 12, 7 + 5 * 499]
    with _store(1, 500, 1, t0=-3) as store:
        geo = Geometry.of(store.stream("s"))
        assert geo.regular and geo.times_of(np.array([0, 10])).tolist() == [-3, 7]
    with _store(1, 500, None) as store:
        geo = Geometry.of(store.stream("s"))
        assert not geo.regular
        with pytest.raises(ValueError, match="gaps differ"):
            geo.times_of(np.arange(3))


@settings(max_examples=20, deadline=None)
@given(seed=hs.integers(0, 10_000), w=hs.integers(0, 60), gap=hs.sampled_from([1, 3, None]),
       shape=hs.sampled_from(["A B C", "A B* C D", "A C B", "A B C D E", "A+ B C"]),
       lo=hs.lists(hs.integers(0, 48), min_size=5, max_size=5))
def test_times_from_seqs_change_no_interval(seed: int, w: int, gap: int | None, shape: str,
                                            lo: list[int]) -> None:
    """Random regular (and, as a control, irregular) streams, windows and patterns: the
    intervals with times computed from seqs equal those with times read and sorted along,
    and the plans' matches are full replay's."""
    q = xy_range_query(shape, lo, w * (gap or 1))
    with _store(seed, 2000, gap) as store:
        got = {}
        for reg in (False, True):
            p = plan_query(store, q, QueryOptions(plan="all", extra={
                "regular_times": reg, "rivals": False, "weights": {"interval_events": 0.0}}))
            got[reg] = p.intervals
        assert got[True] == got[False]
        same_as_full_replay(store, q, [("all", {}), ("optimal", {}),
                                       ("all", {"regular_times": False})])


@settings(max_examples=60, deadline=None)
@given(n=hs.integers(0, 60_000), spread=hs.integers(1, 250), off=hs.integers(-5, 5),
       seed=hs.integers(0, 2**16))
def test_unique_bits_and_member_bits_against_numpy(n: int, spread: int, off: int,
                                                         seed: int) -> None:
    """The bitmap the sort hands back holds exactly the sorted values (scanned out at every
    density, from 64 set bits a word to one in four words), and membership through it equals
    ``np.isin`` (values shifted past either end of the bitmap are not members). A count that
    is not the bitmap's is an error, never a write past the keys."""
    rng = np.random.default_rng(seed)
    bound = max(1, n * spread)
    v = rng.choice(bound, min(n, bound), replace=False).astype(np.int64)
    bits = unique_bits(v, bound)
    if bits is None:  # too few values: the caller sorts another way
        assert v.size < 1 << 15
        return
    keys = keys_of_bits(bits, v.size)
    assert np.array_equal(keys, np.sort(v)) and bits.size == (bound + 63) >> 6
    with pytest.raises(ValueError, match="holds"):
        keys_of_bits(bits, v.size + 1)
    with pytest.raises(ValueError, match="holds more"):
        keys_of_bits(bits, v.size - 1)
    assert int(np.unpackbits(bits.view(np.uint8)).sum()) == v.size
    base = np.sort(rng.integers(-10, bound + 10, 3000)).astype(np.int64)
    want = base[np.isin(base + off, v)]
    assert np.array_equal(member_bits(base, off, bits, bound), want)


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.integers(0, 3), min_size=2, max_size=4, unique=True), hs.integers(0, 2**16),
       hs.integers(1, 3000))
def test_block_occurrences_with_bitmaps_equal_the_merge(offsets: list[int], seed: int,
                                                        n: int) -> None:
    """A tight block's occurrences are the same whether members are tested through their
    bitmaps, found by the galloping merge, or left deferred where their seqs lie and
    scanned against the candidates left (always, at the planner's ratio, or never: then
    settled into a bitmap first); sizes from equal to very unequal."""
    offsets = sorted(offsets)
    rng = np.random.default_rng(seed)
    bound = 4 * n + 8
    plain, with_bits = [], []
    for k, _ in enumerate(offsets):
        size = int(rng.integers(1, n + 1)) if k else n
        seq = np.unique(rng.integers(0, bound, size)).astype(np.int64)
        bits = np.zeros((bound + 63) >> 6, np.uint64)
        np.bitwise_or.at(bits, seq >> 6, np.uint64(1) << (seq & 63).astype(np.uint64))
        plain.append(SymbolResult(seq, seq * 3 + 1))
        # held as a bitmap alone, seqs scanned from it when read, times from the seqs
        with_bits.append(SymbolResult(None, None, bits, bound, n=seq.size,
                                      times=lambda s, out=None: s * 3 + 1))
    a = block_occurrences(offsets, plain)
    b = block_occurrences(offsets, with_bits)
    anchor = min(range(len(offsets)), key=lambda j: len(with_bits[j]))
    assert all(r._seq is None for j, r in enumerate(with_bits)
               if j != anchor and 0 < j < len(offsets) - 1)  # never scanned
    # deferred members (their seqs where they lie: arrays and int64s in bytes at any
    # alignment), tested by a scan against the candidates left, or settled first; the
    # anchor a bitmap not scanned yet (the first member then scanned against it), or its
    # seqs; a member's seq may repeat (overlapping ranges of its condition)
    occs = [a, b]
    for scan, fresh_bits, repeat in ((True, True, False), (None, True, True),
                                     (False, True, False), (None, False, False)):
        deferred = []
        for k, r in enumerate(plain):
            seq = rng.permutation(r.seq)
            if repeat and seq.size:
                seq = np.concatenate([seq, seq[: int(rng.integers(0, seq.size + 1))]])
            cut = int(rng.integers(0, seq.size + 1))
            raw = seq[cut:].tobytes()
            lead = int(rng.integers(0, 8))
            buf = np.frombuffer(b"\x00" * lead + raw, np.uint8)
            pieces = [seq[:cut], Spans(buf, np.array([lead], np.int64),
                                       np.array([seq.size - cut], np.int64), np.dtype("<i8"))]
            if k != anchor:
                deferred.append(SymbolResult(None, None, bound=bound, n=seq.size,
                                             pieces=pieces,
                                             times=lambda s, out=None: s * 3 + 1))
            elif fresh_bits:
                deferred.append(SymbolResult(None, None, with_bits[k].bits, bound,
                                             n=r.seq.size, times=lambda s, out=None: s * 3 + 1))
            else:
                deferred.append(plain[k])
        occs.append(block_occurrences(offsets, deferred,
                                      members=PatternPlannerOptions(scan_members=scan)))
        if fresh_bits and not repeat:  # the first member met the anchor in its bitmap
            assert deferred[anchor]._seq is None
    sets = [set(r.seq.tolist()) for r in plain]
    want = [x for x in range(-4, bound + 4) if all(x + o in s for o, s in zip(offsets, sets))]
    for occ in occs:
        assert occ.first_seq.tolist() == [x + offsets[0] for x in want]
        assert occ.last_t.tolist() == [(x + offsets[-1]) * 3 + 1 for x in want]


FREE_SCAN = MemberTestCosts(scan_value=0.0, scan_pass=0.0, bits_value=1.0, bits_bound=1.0,
                            bits_target=1.0, code_target=1e9)
FREE_BITS = MemberTestCosts(scan_value=1e9, scan_pass=1e9, bits_value=0.0, bits_bound=0.0,
                            bits_target=0.0, code_target=1e9)
FREE_CODES = MemberTestCosts(scan_value=1.0, scan_pass=1.0, bits_value=1.0, bits_bound=1.0,
                             bits_target=1.0, code_target=0.0)


def _coded_piece(seq: np.ndarray, bound: int, rng: np.random.Generator) -> Spans:
    """``seq`` (distinct, in ``[0, bound)``) where it lies in a run file holding every seq of
    ``[0, bound)`` once: a range of the file's ranks, with the file's rank codes."""
    others = rng.permutation(np.setdiff1d(np.arange(bound), seq))
    cut = int(rng.integers(0, others.size + 1))
    file_seq = np.concatenate([others[:cut], rng.permutation(seq), others[cut:]]).astype("<i8")
    codes = build_codes(file_seq, 0, bound - 1)
    assert codes is not None
    return Spans(file_seq.view(np.uint8), np.array([8 * cut], np.int64),
                 np.array([seq.size], np.int64), np.dtype("<i8"), cut,
                 RankCodes(codes, bound, 0, bound))


@contextmanager
def _ways_spied() -> Iterator[list[str]]:
    """Within the block, the way of every member test by a scan or rank codes that the
    block merge makes (``scan``, ``codes``)."""
    scan, codes = iv.members_in_pieces, iv.members_by_codes
    calls: list[str] = []

    def spy_scan(*args: Any) -> Any:
        calls.append("scan")
        return scan(*args)

    def spy_codes(*args: Any) -> Any:
        calls.append("codes")
        return codes(*args)

    iv.members_in_pieces, iv.members_by_codes = spy_scan, spy_codes
    try:
        yield calls
    finally:
        iv.members_in_pieces, iv.members_by_codes = scan, codes


@settings(max_examples=30, deadline=None)
@given(hs.lists(hs.integers(0, 3), min_size=2, max_size=4, unique=True), hs.integers(0, 2**16),
       hs.integers(1, 2000))
def test_member_tests_follow_the_costs_and_agree(offsets: list[int], seed: int,
                                                 n: int) -> None:
    """Where no option forces a way, a tight block tests its deferred members the way the
    costs make cheapest: a free scan scans their seqs, a free bitmap settles them (their
    bitmap, or their sort where too few for one), free rank codes read their files' codes.
    Every way gives the same occurrences: the set join of the members at their offsets."""
    offsets = sorted(offsets)
    rng = np.random.default_rng(seed)
    bound = 4 * n + 8
    seqs = [np.unique(rng.integers(0, bound, int(rng.integers(1, n + 1)) if k else n))
            for k in range(len(offsets))]
    anchor = min(range(len(offsets)), key=lambda j: seqs[j].size)
    sets = [set(s.tolist()) for s in seqs]
    want = [x for x in range(-4, bound + 4) if all(x + o in s for o, s in zip(offsets, sets))]
    for costs, way in ((FREE_SCAN, "scan"), (FREE_BITS, "bits"), (FREE_CODES, "codes")):
        results = [SymbolResult(s, s * 3 + 1) if k == anchor else
                   SymbolResult(None, None, bound=bound, n=s.size,
                                pieces=[_coded_piece(s, bound, rng)],
                                times=lambda s, out=None: s * 3 + 1)
                   for k, s in enumerate(seqs)]
        with _ways_spied() as calls:
            occ = block_occurrences(offsets, results, costs=costs)
        settled = [k for k, r in enumerate(results) if k != anchor and r.pieces is None]
        assert set(calls) == ({way} if way != "bits" else set())
        assert (len(settled) if way == "bits" else len(calls)) >= 1  # the first member
        if way != "bits":
            assert not settled
        assert occ.first_seq.tolist() == [x + offsets[0] for x in want]
        assert occ.last_t.tolist() == [(x + offsets[-1]) * 3 + 1 for x in want]


@settings(max_examples=40, deadline=None)
@given(n=hs.sampled_from([0, 1, 2, 50, 40_000, 120_000]), repeats=hs.integers(0, 5),
       pieces=hs.integers(1, 4), seed=hs.integers(0, 2**16))
def test_a_lookups_seqs_alone_are_its_set_sorted(n: int, repeats: int, pieces: int,
                                                 seed: int) -> None:
    """A lookup's seqs sorted alone (the bitmap when dense, a sort when sparse) hold each
    event once, also one that overlapping ranges of its condition both returned; the count
    the bitmap was made with bounds its length until the seqs are read, then is exact."""
    from replaydb.planner.pattern.intervals import sorted_alone

    rng = np.random.default_rng(seed)
    bound = max(4 * n, 10)
    vals = rng.choice(bound, n, replace=False).astype(np.int64)
    if n and repeats:
        vals = np.concatenate([vals, rng.choice(vals, repeats)])
        rng.shuffle(vals)
    parts = np.array_split(vals, pieces)
    before = vals.copy()
    got = sorted_alone(list(parts), bound, None, None)
    assert np.array_equal(vals, before)  # the caller's arrays are not sorted in place
    want = np.unique(vals)
    assert len(got) >= len(want)
    assert np.array_equal(got.seq, want)
    assert len(got) == len(want)
    if n >= 40_000:
        assert got.bits is not None  # dense enough for the bitmap
    with pytest.raises(ValueError):
        sorted_alone([*parts, np.array([bound], np.int64)], bound, None, None)


@settings(max_examples=15, deadline=None)
@given(seed=hs.integers(0, 10_000), w=hs.integers(0, 40),
       shape=hs.sampled_from(["A B C", "A B C D", "A C B* D E", "A B C D E"]),
       lo=hs.lists(hs.integers(0, 48), min_size=5, max_size=5))
def test_deferred_members_change_no_interval(seed: int, w: int, shape: str,
                                             lo: list[int]) -> None:
    """On a regular stream the bigger members of a tight block wait where their seqs lie
    and are scanned against the candidates left (forced here for every size): the intervals
    equal those of lookups sorted with their times, and the matches are full replay's."""
    q = xy_range_query(shape, lo, w)
    with _store(seed, 3000, 1) as store:
        base = plan_query(store, q, QueryOptions(plan="all", extra={
            "regular_times": False, "rivals": False, "weights": {"interval_events": 0.0}}))
        got = plan_query(store, q, QueryOptions(plan="all", extra={
            "rivals": False, "weights": {"interval_events": 0.0}, "scan_members": True}))
        assert got.intervals == base.intervals
        same_as_full_replay(store, q, [("all", {"scan_members": True}),
                                       ("optimal", {"scan_members": True})])


def test_geometry_views_the_leaf_level_read_only(tmp_path) -> None:
    """A stream's geometry holds the tree's int64 leaf columns as read-only views (planning
    copied them every time), equal to them."""
    store = replaydb.open(tmp_path / "g", create=True)
    store.append("s", pa.table({"t": np.arange(0, 5000, 2), "x": np.arange(2500) * 1.0}))
    snap = store.stream("s")
    geo = Geometry.of(snap)
    lv = snap.tree.leaves
    for name, arr in (("seq_min", geo.leaf_seq_min), ("count", geo.leaf_count),
                      ("t_min", geo.leaf_t_min), ("t_max", geo.leaf_t_max)):
        assert arr.dtype == np.int64 and not arr.flags.writeable
        assert np.array_equal(arr, lv.col(name))
        assert np.shares_memory(arr, lv.col(name))
    with pytest.raises(ValueError):
        geo.leaf_count[0] = 1
