"""Probes of the stream's data: a value read where it lies in its page
(:func:`~replaydb.store.pagecodec.value_in_chunk`, :class:`~replaydb.store.valueprobe.ColumnProbe`),
and the planner testing a tight block's last candidates against a member's condition by
reading their values. The values are Arrow's, the intervals those without probes, the
matches full replay's."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import replaydb
from replaydb.indexes.manage import create_index
from replaydb.planner.pattern import intervals as iv
from replaydb.planner.pattern.cost import DEFAULT_WEIGHTS
from replaydb.planner.pattern.membercosts import DEFAULT_MEMBER_COSTS, costs_config
from replaydb.planner.pattern.planner import _deferrable
from replaydb.planner.query import QueryOptions, plan_query
from replaydb.store import pagecodec
from replaydb.store.directread import DirectFile
from replaydb.store.schema import Attribute, StreamSchema
from tests.planner_cases import same_as_full_replay


def _chunk_values(path: str, column: str, rows: np.ndarray) -> list[tuple[int, int, Any]]:
    """``(status, row, value or None)`` of ``value_in_chunk`` for every row group and row."""
    pf = pq.ParquetFile(path)
    d = DirectFile(path, pf)
    plan = d._plan((column,))
    assert plan is not None
    c, width, optional = int(plan[0][0]), int(plan[1][0]), bool(plan[2][0])
    top, dph = np.empty(4, np.int64), np.empty(4, np.int64)
    out = []
    base = 0
    for g in range(pf.metadata.num_row_groups):
        d._fill(np.array([g]), [c])
        n = pf.metadata.row_group(g).num_rows
        s = int(d._start[g, c])
        for r in rows[rows < n].tolist():
            if s < 0:  # a chunk the direct reader does not take (a dictionary page)
                out.append((pagecodec.UNSUPPORTED, base + r, 0))
                continue
            st, v = pagecodec.value_in_chunk(d._buf, s, s + int(d._size[g, c]),
                                             int(d._codec[g, c]), width, optional, r, top, dph)
            out.append((st, base + r, int(v)))
        base += n
    return out


@pytest.mark.parametrize("compression", ["NONE", "SNAPPY"])
def test_a_value_read_where_it_lies_is_arrows(tmp_path, compression) -> None:
    """Every value the page read answers OK for equals Arrow's; PLAIN pages of values that
    do not compress (uncompressed, or a snappy literal) answer every row, over several pages
    per chunk; pages with nulls, dictionary pages and values in a snappy back-reference
    answer UNSUPPORTED, never a wrong value."""
    rng = np.random.default_rng(3)
    n = 3000
    rand = rng.random(n)
    table = pa.table({
        "rand": rand,
        "ints": rng.integers(-10**12, 10**12, n),
        "repeats": np.repeat(rng.random(30), 100),  # compresses: back-references
        "nulls": pa.array(np.where(rng.random(n) < 0.1, np.nan, rand), from_pandas=True),
        "dict": np.repeat(rng.random(3), 1000),
        "deltas": np.cumsum(rng.integers(-2**40, 2**40, n)),
        "delta_i32": rng.integers(-2**31, 2**31 - 1, n).astype(np.int32),
        "delta_nulls": pa.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 9, n)),
                                pa.int64()),
    })
    path = str(tmp_path / "f.parquet")
    delta = ("deltas", "delta_i32", "delta_nulls")
    pq.write_table(table, path, row_group_size=700, data_page_size=1024,
                   compression=compression, use_dictionary=["dict"],
                   column_encoding={**{c: "PLAIN" for c in ("rand", "ints", "repeats", "nulls")},
                                    **{c: "DELTA_BINARY_PACKED" for c in delta}})
    rows = np.arange(0, 700, 7)
    plain = compression == "NONE"  # under snappy, ints' high bytes repeat: back-references
    for col, always in (("rand", True), ("ints", plain), ("repeats", plain),
                        ("nulls", False), ("dict", False), ("deltas", plain),
                        ("delta_i32", plain), ("delta_nulls", False)):
        want = table.column(col).to_numpy(zero_copy_only=False)
        got = _chunk_values(path, col, rows)
        statuses = {st for st, _, _ in got}
        assert statuses <= {pagecodec.OK, pagecodec.UNSUPPORTED}, (col, statuses)
        if always:
            assert statuses == {pagecodec.OK}, col
        if col in ("nulls", "dict", "delta_nulls") or (col in delta and not plain):
            assert statuses == {pagecodec.UNSUPPORTED}, col
        for st, row, v in got:
            if st == pagecodec.OK:
                w = want[row]
                raw = np.array([w]).view(np.uint64)[0] if want.dtype.kind == "f" \
                    else np.uint64(np.int64(w))
                if want.dtype.itemsize == 4:  # 4-byte values in the slot's low half
                    raw = np.uint64(np.uint32(np.int32(w)))
                assert v == int(raw), (col, row)


@contextmanager
def _probe_store(seed: int, n: int, leaf: int = 64, parts: int = 3,
                 zeros: float = 0.0) -> Iterator[Any]:
    """Stream ``p`` of ``n`` events one second apart (regular): ``u`` random doubles (a
    share ``zeros`` of them -0.0 or 0.0: two in one page compress, so the page is read
    otherwise), ``k`` random int64 (``k >> 48`` in -50..49), ``z`` doubles with nulls, all
    indexed."""
    rng = np.random.default_rng(seed)
    u = rng.random(n) * 2 - 1
    u[rng.random(n) < zeros / 2] = -0.0
    u[rng.random(n) < zeros / 2] = 0.0
    k = rng.integers(-50, 50, n) * 2**48 + rng.integers(0, 2**48, n)  # low bytes random
    z = pa.array(np.where(rng.random(n) < 0.2, np.nan, rng.random(n)), from_pandas=True)
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("p", StreamSchema(
            (Attribute("u", "float64"), Attribute("k", "int64"),
             Attribute("z", "float64")), time_unit="s", leaf_capacity=leaf, fanout=4))
        cuts = [n * j // parts for j in range(parts + 1)]
        for a, b in zip(cuts, cuts[1:]):
            store.append("p", pa.table({"t": np.arange(a, b, dtype=np.int64), "u": u[a:b],
                                        "k": k[a:b], "z": z[a:b]}))
        for c in ("u", "k", "z"):
            create_index(store, "p", c)
        yield store


def test_values_at_are_the_streams_values() -> None:
    with _probe_store(5, 2000) as store:
        snap = store.stream("p")
        full = snap.read(columns=["u", "k", "z"])
        rng = np.random.default_rng(1)
        for _ in range(20):
            seqs = rng.choice(2000, int(rng.integers(1, 200)), replace=False).astype(np.int64)
            u = snap.values_at("u", seqs)
            k = snap.values_at("k", seqs)
            assert u is not None and k is not None
            assert np.array_equal(u.view(np.uint64),
                                  full.column("u").to_numpy()[seqs].view(np.uint64))
            assert np.array_equal(k, full.column("k").to_numpy()[seqs])
        assert snap.values_at("u", np.zeros(0, np.int64)).size == 0
        assert snap.values_at("z", np.arange(2000)) is None  # pages with nulls
        t = snap.values_at("t", np.arange(0, 2000, 37))  # delta-packed, uncompressed
        assert t is not None and np.array_equal(t, full.column("t").to_numpy()[::37])
        assert snap.values_at("nope", np.arange(5)) is None
        with pytest.raises(ValueError, match="events of the stream"):
            snap.values_at("u", np.array([2000]))
        with pytest.raises(ValueError, match="events of the stream"):
            snap.values_at("u", np.array([-1]))
        snap._probes["u"].check()


_BOUNDS = [-1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0]

EVERY_MEMBER_TESTED = {"scan_members": True, "primary_probe_ratio": 0, "code_members": False,
                       "meet_in_anchor_bits": False}
"""Planner options (:class:`~replaydb.planner.options.PatternPlannerOptions`) that send every
deferred member down the scan, where a probe goes first for any count of candidates: the first
member too, not met in the anchor's bitmap."""


@contextmanager
def _codes_spied() -> Iterator[list[int]]:
    """Within the block, the candidate counts of every call of
    :func:`~replaydb.indexes.rankcodes.members_by_codes` by the planner's block merge."""
    real = iv.members_by_codes
    calls: list[int] = []

    def spy(targets: np.ndarray, pieces: list[Any]) -> np.ndarray:
        calls.append(targets.size)
        return real(targets, pieces)

    iv.members_by_codes = spy
    try:
        yield calls
    finally:
        iv.members_by_codes = real


@settings(max_examples=25, deadline=None)
@given(seed=hs.integers(0, 10_000), w=hs.integers(1, 30),
       lo=hs.lists(hs.sampled_from(_BOUNDS), min_size=3, max_size=3),
       width=hs.lists(hs.sampled_from([0.0, 0.1, 0.5, 2.0]), min_size=3, max_size=3),
       k_lo=hs.integers(-50, 49), strict=hs.booleans(), z=hs.booleans())
def test_probed_members_change_no_interval(seed, w, lo, width, k_lo, strict, z) -> None:
    """A tight block's members tested by reading their values (forced here for any count)
    give the intervals of the index lookups, with values and bounds at -0.0 and 0.0 (pages
    holding two of them compress and are read otherwise), an int64 member, strict bounds and a member whose pages hold nulls
    (read otherwise); the matches are full replay's."""
    op = ">" if strict else ">="
    conds = [f"A AS A.u {op} {lo[0]} AND A.u <= {lo[0] + width[0]}",
             f"B AS B.k >= {k_lo * 2**48} AND B.k < {(k_lo + 30) * 2**48}",
             f"C AS C.u >= {lo[2]} AND C.u {'<' if strict else '<='} {lo[2] + width[2]}",
             f"D AS D.{'z' if z else 'u'} >= {lo[1]} AND D.{'z' if z else 'u'} <= "
             f"{lo[1] + width[1]}"]
    q = (f"SELECT * FROM p MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS a_t, LAST(D.t) AS d_t "
         f"PATTERN (A B C D) WITHIN {w} DEFINE {', '.join(conds)})")
    with _probe_store(seed, 1500, zeros=0.01) as store:
        opts = {"rivals": False, "weights": {"interval_events": 0.0}}
        base = plan_query(store, q, QueryOptions(plan="all", extra={**opts, "probes": False}))
        got = plan_query(store, q, QueryOptions(plan="all",
                                                extra={**opts, **EVERY_MEMBER_TESTED}))
        assert got.intervals == base.intervals
        st = got.pattern_state
        # a member waits to be probed only when its lookup is its own (A, C and D with
        # one condition share one lookup, read in full); the probe declines (and the
        # member is scanned) when one of the events lies in a page not read that way
        if (not z and base.pattern_state.interval_counts.get("first_events", 0)
                and _deferrable(st, st.chosen.config)):
            assert st.index_reads.get("probe_calls", 0) > 0
        same_as_full_replay(store, q, [("all", EVERY_MEMBER_TESTED),
                                       ("optimal", EVERY_MEMBER_TESTED)])


def test_a_probe_reads_the_members_values() -> None:
    """Without pages that read otherwise (no zeros), the deferred member (C, a lookup of its
    own, larger than B's) is tested by one probe that reads its candidates' values; the
    intervals are those of the scan."""
    conds = ["A AS A.u >= -1.0 AND A.u <= 1.0", "B AS B.k >= 0 AND B.k < 30 * 281474976710656",
             "C AS C.u >= -0.5 AND C.u <= 1.5", "D AS D.u >= -1.0 AND D.u <= 1.0"]
    q = ("SELECT * FROM p MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS a_t, LAST(D.t) AS d_t "
         f"PATTERN (A B C D) WITHIN 1 DEFINE {', '.join(conds)})")
    with _probe_store(0, 1500, zeros=0.0) as store:
        opts = {"rivals": False, "weights": {"interval_events": 0.0}}
        base = plan_query(store, q, QueryOptions(plan="all", extra={**opts, "probes": False}))
        got = plan_query(store, q, QueryOptions(plan="all",
                                                extra={**opts, **EVERY_MEMBER_TESTED}))
        st = got.pattern_state
        assert _deferrable(st, st.chosen.config)
        assert st.index_reads["probe_calls"] == 1 and st.index_reads["probed_events"] > 100
        assert got.intervals == base.intervals


def test_probes_from_several_threads_agree() -> None:
    """Threads probing one snapshot at once (each locating chunks as it goes) read what the
    stream holds; the probe's invariant holds after them."""
    import threading

    with _probe_store(9, 3000, parts=4) as store:
        snap = store.stream("p")
        want = snap.read(columns=["u"]).column("u").to_numpy()
        errors: list[str] = []

        def work(seed: int) -> None:
            rng = np.random.default_rng(seed)
            for _ in range(30):
                seqs = rng.choice(3000, int(rng.integers(1, 100)), replace=False)
                got = snap.values_at("u", seqs)
                if got is None or not np.array_equal(got, want[seqs]):
                    errors.append(f"thread {seed}")

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        snap._probes["u"].check()


@settings(max_examples=25, deadline=None)
@given(seed=hs.integers(0, 10_000), w=hs.integers(1, 30),
       lo=hs.lists(hs.sampled_from(_BOUNDS), min_size=3, max_size=3),
       width=hs.lists(hs.sampled_from([0.0, 0.1, 0.5, 2.0]), min_size=3, max_size=3),
       k_lo=hs.integers(-50, 49), strict=hs.booleans())
def test_members_by_rank_codes_change_no_interval(seed, w, lo, width, k_lo, strict) -> None:
    """A tight block's members tested by their run files' rank codes (forced here for any
    count) give the intervals of the scans of their lookups, with bounds at -0.0 and 0.0,
    an int64 member and strict bounds; the matches are full replay's."""
    op = ">" if strict else ">="
    conds = [f"A AS A.u {op} {lo[0]} AND A.u <= {lo[0] + width[0]}",
             f"B AS B.k >= {k_lo * 2**48} AND B.k < {(k_lo + 30) * 2**48}",
             f"C AS C.u >= {lo[2]} AND C.u {'<' if strict else '<='} {lo[2] + width[2]}",
             f"D AS D.u >= {lo[1]} AND D.u <= {lo[1] + width[1]}"]
    q = (f"SELECT * FROM p MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS a_t, LAST(D.t) AS d_t "
         f"PATTERN (A B C D) WITHIN {w} DEFINE {', '.join(conds)})")
    with _probe_store(seed, 1500, zeros=0.01) as store:
        opts = {"rivals": False, "weights": {"interval_events": 0.0}, **EVERY_MEMBER_TESTED}
        base = plan_query(store, q, QueryOptions(plan="all", extra={**opts, "probes": False}))
        # the first deferred member by its codes too
        codes = {**opts, "code_members": True}
        with _codes_spied() as calls:
            got = plan_query(store, q, QueryOptions(plan="all", extra=codes))
        assert got.intervals == base.intervals
        st = got.pattern_state
        if (base.pattern_state.interval_counts.get("first_events", 0)
                and _deferrable(st, st.chosen.config)):
            assert calls  # a member waited where its seqs lie: tested by its codes
        same_as_full_replay(store, q, [("all", {**EVERY_MEMBER_TESTED, "code_members": True}),
                                       ("optimal", {**EVERY_MEMBER_TESTED,
                                                    "code_members": True})])


def test_calibrated_member_costs_choose_the_way() -> None:
    """The member tests' costs of a store's calibration choose how a tight block tests its
    deferred member (no option forcing a way): its run files' rank codes when they cost
    nothing, never when they cost too much; EXPLAIN shows the calibrated costs, the
    intervals are the same either way and the matches are full replay's."""
    conds = ["A AS A.u >= -1.0 AND A.u <= 1.0", "B AS B.k >= 0 AND B.k < 30 * 281474976710656",
             "C AS C.u >= -0.5 AND C.u <= 1.5", "D AS D.u >= -1.0 AND D.u <= 1.0"]
    q = ("SELECT * FROM p MATCH_RECOGNIZE (MEASURES FIRST(A.t) AS a_t, LAST(D.t) AS d_t "
         f"PATTERN (A B C D) WITHIN 1 DEFINE {', '.join(conds)})")
    opts = {"rivals": False, "weights": {"interval_events": 0.0}, "probes": False}
    with _probe_store(0, 1500) as store:
        got = {}
        for code_target in (0.0, 1e9):
            costs = replace(DEFAULT_MEMBER_COSTS, code_target=code_target)
            store.update_config(calibration={"pattern": {
                **DEFAULT_WEIGHTS, "member_tests": costs_config(costs)}})
            with _codes_spied() as calls:
                plan = plan_query(store, q, QueryOptions(plan="all", extra=opts))
            st = plan.pattern_state
            assert _deferrable(st, st.chosen.config)
            assert bool(calls) is (code_target == 0.0)
            shown = plan.details["pattern"]["weights"]["member_tests"]
            assert shown["source"] == "calibrated" and shown["code_target_ns"] == code_target
            got[code_target] = plan.intervals
            same_as_full_replay(store, q, [("all", opts)])
        assert got[0.0] == got[1e9]
