"""Kept-only interval reads are packed by the rows they are expected to keep: the coverage
estimate against a count of covered instants, the packing's bounds, and a real store whose
sparse intervals come back in fewer reads with the same rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.store.readpacking import MIN_LEAF_SHARE, covered_fractions, packed_reads
from replaydb.store.schema import Attribute, StreamSchema

I64 = np.iinfo(np.int64)


def _disjoint(points: list[int]) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted(set(points))
    pairs = [(pts[i], pts[i + 1]) for i in range(0, len(pts) - 1, 2)]
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


@settings(max_examples=200, deadline=None)
@given(leaves=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), min_size=1,
                       max_size=12),
       points=st.lists(st.integers(-5, 80), max_size=16), open_lo=st.booleans(),
       open_hi=st.booleans())
def test_covered_fractions_count_the_covered_instants(leaves, points, open_lo, open_hi
                                                      ) -> None:
    t_min = np.array([a for a, _ in leaves], np.int64)
    t_max = t_min + np.array([w for _, w in leaves], np.int64)
    a, b = _disjoint(points)
    if a.size and open_lo:
        a[0] = I64.min
    if a.size and open_hi:
        b[-1] = I64.max
    got = covered_fractions(t_min, t_max, a, b)
    for k in range(t_min.size):
        span = np.arange(t_min[k], t_max[k] + 1)
        inside = np.zeros(span.size, bool)
        for x, y in zip(a.tolist(), b.tolist()):
            inside |= (span >= x) & (span < y)
        assert got[k] == pytest.approx(inside.mean())


@settings(max_examples=200, deadline=None)
@given(shares=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=80),
       files=st.lists(st.integers(0, 3), min_size=1, max_size=80),
       max_leaves=st.integers(1, 12))
def test_packed_reads_cover_the_leaves_within_the_limit(shares, files, max_leaves) -> None:
    n = min(len(shares), len(files))
    share = np.array(shares[:n])
    file_ids = np.sort(np.array(files[:n], np.int64))
    reads = packed_reads(file_ids, share, max_leaves)
    assert reads[0][0] == 0 and reads[-1][1] == n
    counted = np.maximum(share, MIN_LEAF_SHARE)
    for (s, e, pieces), nxt in zip(reads, reads[1:] + [(n, n, [])]):
        assert e == nxt[0] and e > s
        assert e - s == 1 or counted[s:e].sum() <= max_leaves + 1e-9
        assert e - s <= max_leaves / MIN_LEAF_SHARE
        if e < n:  # a read stops only where the next leaf would not fit
            assert counted[s:e + 1].sum() > max_leaves - 1e-9
        assert pieces[0][0] == s and pieces[-1][1] == e
        for (_, q), (p2, _) in zip(pieces, pieces[1:]):
            assert q == p2
        for p, q in pieces:
            assert len(set(file_ids[p:q].tolist())) == 1


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory):
    store = replaydb.open(tmp_path_factory.mktemp("packing") / "s", create=True)
    store.create_stream("d", StreamSchema((Attribute("x", "float64"),), time_unit="ms",
                                          leaf_capacity=32, fanout=4))
    t = np.arange(20_000, dtype=np.int64)
    for part in np.array_split(t, 2):  # leaves in two data files
        store.append("d", pa.table({"t": part, "x": part * 0.5}))
    return store.stream("d")


def test_sparse_kept_reads_are_fewer_and_keep_the_same_rows(snap) -> None:
    """One instant of every third leaf: whole-leaf reads of four leaves each need one read
    per four covered leaves; kept-only reads pack the leaves by the rows they keep."""
    starts = np.arange(5, 20_000, 96, dtype=np.int64)
    ivs = [(int(x), int(x) + 1) for x in starts]

    def reads(kept: bool) -> tuple[int, list[float]]:
        got = list(snap.read_interval_groups(ivs, ["x"], max_leaves=4, kept_only=kept))
        xs = [v for tbl, parts in got for _, off, rows in parts
              for v in tbl.slice(off, rows).column("x").to_pylist()]
        return len(got), xs

    n_whole, whole = reads(False)
    n_kept, kept = reads(True)
    assert kept == whole == (starts * 0.5).tolist()
    assert n_whole >= int(np.ceil(len(starts) / 4))
    leaves_per_read = 4 / MIN_LEAF_SHARE
    assert n_kept == int(np.ceil(len(starts) / leaves_per_read))
