"""Grouped interval reads: consecutive short replay intervals share one read, and each interval
still gets exactly its own events, with the operator told about every gap."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.replay import Replay
from replaydb.store.schema import Attribute, StreamSchema
from tests.replay.test_replay import Recorder

T_MAX = 3000


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory):
    store = replaydb.open(tmp_path_factory.mktemp("grouped") / "s", create=True)
    store.create_stream("d", StreamSchema((Attribute("x", "float64"),), time_unit="ms",
                                          leaf_capacity=16, fanout=4))
    rng = np.random.default_rng(7)
    t = np.sort(rng.integers(0, T_MAX, 2400))  # repeated timestamps straddle leaves
    for part in np.array_split(t, 3):  # three appends: leaves in three data files
        store.append("d", pa.table({"t": part, "x": part * 0.5}))
    return store.stream("d")


def _intervals(draw_points: list[int], open_lo: bool, open_hi: bool) -> list[tuple]:
    pts = sorted(set(draw_points))
    out = [(pts[i], pts[i + 1]) for i in range(0, len(pts) - 1, 2)]
    if out and open_lo:
        out[0] = (None, out[0][1])
    if out and open_hi:
        out[-1] = (out[-1][0], None)
    return out


@settings(max_examples=150, deadline=None)
@given(points=st.lists(st.integers(-50, T_MAX + 50), max_size=40), open_lo=st.booleans(),
       open_hi=st.booleans(), max_leaves=st.sampled_from([1, 2, 3, 8, 64]))
def test_grouped_reads_give_each_interval_its_own_events(snap, points, open_lo, open_hi,
                                                         max_leaves) -> None:
    ivs = _intervals(points, open_lo, open_hi)
    before = snap.counters.copy()
    got: dict[int, list[pa.Table]] = {}
    for tbl, parts in snap.read_interval_groups(ivs, ["x"], max_leaves=max_leaves):
        assert parts
        for k, off, rows in parts:
            assert rows > 0
            got.setdefault(k, []).append(tbl.slice(off, rows))
    grouped = snap.counters - before
    before = snap.counters.copy()
    for k, (a, b) in enumerate(ivs):
        want = snap.read(a, b, ["x"])
        if want.num_rows == 0:
            assert k not in got
            continue
        have = pa.concat_tables(got[k])
        assert have.column("seq").to_pylist() == want.column("seq").to_pylist()
        assert have.column("x").to_pylist() == want.column("x").to_pylist()
    one_by_one = snap.counters - before
    # a leaf shared by neighbouring intervals is read once; never more reads than one by one
    assert grouped.leaves <= one_by_one.leaves
    assert grouped.reads <= max(one_by_one.reads, 1)


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.integers(0, T_MAX), min_size=2, max_size=30),
       batch_rows=st.sampled_from([16, 48, 1000]))
def test_replay_of_many_intervals_resets_between_each(snap, points, batch_rows) -> None:
    ivs = _intervals(points, False, False)
    out = Replay([snap], ivs, batch_rows=batch_rows).run(Recorder())
    t = out.column("t").to_numpy()
    interval = out.column("interval").to_numpy()
    # every event in its own interval, the intervals numbered in order of their (non-empty) reads
    expect_t, expect_k = [], []
    for k, (a, b) in enumerate(ivs):
        tt = snap.read(a, b).column("t").to_numpy()
        expect_t.append(tt)
        expect_k.append(np.full(len(tt), k))
    expect_t = np.concatenate(expect_t) if expect_t else np.zeros(0, np.int64)
    expect_k = np.concatenate(expect_k) if expect_k else np.zeros(0, np.int64)
    assert np.array_equal(t, expect_t)
    # Recorder counts resets: an end_interval between every two intervals, empty ones included
    assert np.array_equal(interval, expect_k)


class BreakRecorder(Recorder):
    """Tags rows with their interval from the breaks alone (no slicing, no end_interval)."""

    def push_intervals(self, batch: pa.RecordBatch, breaks: np.ndarray, *,
                       final: bool = False) -> None:
        n = batch.num_rows
        k = self.interval + np.searchsorted(breaks, np.arange(n), side="right")
        self.pushes = getattr(self, "pushes", 0) + int(len(breaks) > 0)  # many in one
        self._emit(pa.record_batch([batch.column("t"), batch.column("seq"), pa.array(k)],
                                   schema=self.output_schema))
        self.interval += len(breaks)
        self.finals = getattr(self, "finals", 0) + int(final)
        if final:
            self.flush()

    def end_interval(self) -> None:
        self.ends = getattr(self, "ends", 0) + 1
        super().end_interval()


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.integers(0, T_MAX), min_size=2, max_size=40),
       batch_rows=st.sampled_from([16, 48, 1000]))
def test_spans_carry_many_intervals_per_batch(snap, points, batch_rows) -> None:
    """Replay hands an operator with ``push_intervals`` batches of many intervals; the breaks
    (one per ended interval, repeated for empty ones) put every event in its own interval, as
    one batch per interval with end_interval between does. The intervals that end before a
    batch are breaks at its row 0: such an operator is never asked for ``end_interval``."""
    ivs = _intervals(points, False, False)
    rec = BreakRecorder()
    many = Replay([snap], ivs, batch_rows=batch_rows).run(rec)
    one = Replay([snap], ivs, batch_rows=batch_rows).run(Recorder())
    assert many.equals(one)
    assert getattr(rec, "ends", 0) == 0
    # at most the last batch is final (a push after it would raise: the final push flushes)
    assert getattr(rec, "finals", 0) <= 1
    whole = BreakRecorder()
    Replay([snap], None, batch_rows=batch_rows).run(whole)
    assert whole.finals == 1 and getattr(whole, "ends", 0) == 0
    nonempty = len({int(k) for k in one.column("interval").to_numpy()})
    if batch_rows == 1000 and nonempty > 1:
        assert getattr(rec, "pushes", 0) < nonempty


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.integers(0, T_MAX), min_size=2, max_size=40),
       batch_rows=st.sampled_from([16, 48, 1000]), spans=st.booleans())
def test_contiguous_replay_feeds_the_intervals_as_one_stream(snap, points, batch_rows,
                                                           spans) -> None:
    """``contiguous=True``: the intervals' events, in order, through ``push`` alone - no
    ``end_interval`` and no ``push_intervals``, whatever the operator overrides."""
    ivs = _intervals(points, False, False)
    rec = BreakRecorder() if spans else Recorder()
    rep = Replay([snap], ivs, batch_rows=batch_rows, contiguous=True)
    got = rep.run(rec)
    one = Replay([snap], ivs, batch_rows=batch_rows).run(Recorder())
    assert got.column("seq").equals(one.column("seq"))
    assert set(got.column("interval").to_pylist()) <= {0}
    assert getattr(rec, "ends", 0) == 0 and getattr(rec, "pushes", 0) == 0
    assert rep.stats.intervals == len(ivs)


def test_a_pattern_query_replays_only_the_columns_it_reads() -> None:
    """Full replay and an indexed plan read t, seq and the query's columns, not the others
    (fewer bytes), and give the rows of a replay of every column."""
    from replaydb.planner.query import QueryOptions, execute, plan_query
    from replaydb.replay.executor import replay_into
    from tests.planner_cases import stream_store

    n = 4000
    rng = np.random.default_rng(3)
    s = {"table": pa.table({"t": np.arange(n), "x": rng.integers(0, 9, n).astype(float),
                            "k": rng.integers(0, 3, n),
                            "type": np.array(list("abc"))[rng.integers(0, 3, n)]}),
         "indexed": ["x"], "leaf": 64, "fanout": 4}
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.seq AS a PATTERN (A B) WITHIN 5 "
         "DEFINE A AS x = 8, B AS x < 2)")
    with stream_store(s) as store:
        for strategy in ("replay", "all"):
            plan = plan_query(store, q, QueryOptions(plan=strategy, time_format="raw"))
            op = plan.physical.operator.build()
            table, rep = replay_into(plan.physical, plan.ctx.snapshots, op)
            assert op.input_columns == ["t", "seq", "x"]
            assert rep.schema.names == ["t", "seq", "x"]
            assert table.num_rows > 0
            # the same operator fed every column answers alike
            every = Replay(plan.ctx.snapshots, plan.intervals)
            wide = every.run(plan.physical.operator.build())
            assert wide.equals(table)
            assert every.stats.leaves == rep.stats.leaves
            assert 0 < rep.stats.bytes < every.stats.bytes
            assert execute(plan).table.equals(table)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.integers(1, 50), max_size=30), batch_rows=st.integers(1, 40))
def test_span_cuts_cut_each_interval_like_one_batch_per_interval(rows, batch_rows) -> None:
    from replaydb.replay.replay import _span_cuts

    cuts = _span_cuts(rows, batch_rows)
    total = sum(rows)
    assert cuts[0] == 0 and cuts[-1] == total if total else cuts == [0]
    assert all(0 < b - a <= batch_rows for a, b in zip(cuts[:-1], cuts[1:]))
    start = 0
    for r in rows:  # the cuts inside an interval are those of cutting it alone
        inside = [c - start for c in cuts if start < c < start + r]
        assert inside == list(range(batch_rows, r, batch_rows))
        start += r


@settings(max_examples=150, deadline=None)
@given(points=st.lists(st.integers(-50, T_MAX + 50), max_size=60),
       max_leaves=st.sampled_from([1, 2, 3, 5, 8, 64]))
def test_packed_reads_cover_the_leaves_in_order_in_full_reads(snap, points, max_leaves) -> None:
    """The reads of grouped interval replay: every kept leaf once, in order; each chunk in
    one data file; at most ``max_leaves`` leaves per read; every read but the last at least
    three quarters full."""
    from replaydb.store.interval_list import _covered_leaves

    ivs = _intervals(points, False, False)
    a = np.array([x[0] for x in ivs], np.int64)
    b = np.array([x[1] for x in ivs], np.int64)
    lo, hi = snap.tree.leaf_ranges_for_times(a, b)
    ids = _covered_leaves(lo, hi)
    want = sorted({int(x) for p, q in zip(lo, hi) for x in range(p, q)})
    assert ids.tolist() == want
    reads = snap._packed_chunks(ids, max_leaves)
    file_id = snap.tree.leaves.col("file_id")
    pos = 0
    for n, (s, e, chunks) in enumerate(reads):
        assert s == pos and chunks[0][0] == s and chunks[-1][1] == e
        assert all(c[1] == d[0] for c, d in zip(chunks[:-1], chunks[1:]))
        assert all(len(set(file_id[ids[p:q]].tolist())) == 1 for p, q in chunks)
        assert 0 < e - s <= max_leaves
        if n < len(reads) - 1:
            assert 4 * (e - s) >= 3 * max_leaves
        pos = e
    assert pos == len(ids)


def test_a_plan_keeping_nearly_every_leaf_reads_like_full_replay(snap) -> None:
    """Intervals with gaps inside leaves keep every leaf: they take no more reads or batches
    than full replay, and the events are those of the intervals."""
    t = snap.read().column("t").to_numpy()
    cuts = np.unique(t)[5::40]
    ivs = [(int(x) + 1, int(y)) for x, y in zip(cuts[:-1], cuts[1:])]
    full = list(snap.iter_batches(None, None, ["x"], max_leaves=8))
    grouped = list(snap.read_interval_groups(ivs, ["x"], max_leaves=8))
    assert len(grouped) <= len(full)
    assert all(g.num_rows <= 8 * 16 for g, _ in grouped)
    spans = list(Replay([snap], ivs, batch_rows=8 * 16).spans())
    got = np.concatenate([b.column("t").to_numpy() for _, _, b, _ in spans])
    keep = np.zeros(len(t), bool)
    for x, y in ivs:
        keep |= (t >= x) & (t < y)
    assert np.array_equal(got, t[keep])
    whole = Replay([snap], None, batch_rows=8 * 16)
    whole.table()
    assert len(spans) <= whole.stats.batches


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_keep_rows_slices_or_takes_the_same_rows(data) -> None:
    from replaydb.store.rowparts import SLICE_PARTS, keep_rows

    n = data.draw(st.integers(1, 400))
    k = data.draw(st.sampled_from([1, 3, SLICE_PARTS, SLICE_PARTS + 1, 120]))
    marks = sorted(set(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=2 * k))))
    pairs = [(p, q) for p, q in zip(marks[::2], marks[1::2]) if q > p]
    if not pairs:
        return
    offs = np.array([p for p, _ in pairs], np.int64)
    rows = np.array([q - p for p, q in pairs], np.int64)
    chunks = [np.arange(h, min(n, h + 97)) for h in range(0, n, 97)]  # a chunked table
    tbl = pa.concat_tables([pa.table({"t": c, "x": c * 0.5}) for c in chunks])
    got = keep_rows(tbl, offs, rows)
    want = np.concatenate([np.arange(p, q) for p, q in pairs])
    assert got.column("t").to_numpy().tolist() == want.tolist()
    assert got.column("x").to_numpy().tolist() == (want * 0.5).tolist()
    assert got.column("t").num_chunks == 1


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_keep_rows_of_single_chunk_tables_of_every_width(data) -> None:
    """Tables of one chunk (as the store's reader gives them; also sliced): the compiled copy
    of 4- and 8-byte columns gives the rows of the parts with the same types; a column with
    nulls, a boolean or a string takes the general path, with the same rows."""
    from replaydb.store.rowparts import keep_rows

    n = data.draw(st.integers(1, 300))
    lead = data.draw(st.integers(0, 5))
    marks = sorted(set(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=60))))
    pairs = [(p, q) for p, q in zip(marks[::2], marks[1::2]) if q > p]
    if not pairs:
        return
    offs = np.array([p for p, _ in pairs], np.int64)
    rows = np.array([q - p for p, q in pairs], np.int64)
    base = np.arange(n + lead, dtype=np.int64)
    cols = {"t": pa.array(base), "f32": pa.array(base.astype(np.float32) / 4),
            "i32": pa.array(base.astype(np.int32) - 7),
            "ts": pa.array(base, pa.timestamp("us")), "d": pa.array(base.astype(np.int32),
                                                                    pa.date32())}
    extra = data.draw(st.sampled_from([None, "nulls", "bool", "str"]))
    if extra == "nulls":
        cols["x"] = pa.array(base * 0.5, mask=base % 3 == 0)
    elif extra == "bool":
        cols["x"] = pa.array(base % 2 == 0)
    elif extra == "str":
        cols["x"] = pa.array([str(v) for v in base])
    tbl = pa.table(cols).slice(lead)
    got = keep_rows(tbl, offs, rows)
    idx = np.concatenate([np.arange(p, q) for p, q in pairs])
    want = tbl.take(pa.array(idx))
    assert got.schema == tbl.schema and got.equals(want)


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.integers(0, T_MAX), min_size=2, max_size=30),
       max_leaves=st.sampled_from([1, 3, 64]))
def test_grouped_reads_count_the_bytes_of_their_leaves(snap, points, max_leaves) -> None:
    """A grouped read counts every leaf it reads once, with the compressed bytes its data
    file's footer gives for the columns read (counted from a per-leaf table, filled on
    first use); an IntervalList reads as the list of its pairs does."""
    import pyarrow.parquet as pq

    from replaydb.store.interval_list import IntervalList

    ivs = _intervals(points, False, False)
    before = snap.counters.copy()
    got = [(tbl.column("seq").to_pylist(), parts)
           for tbl, parts in snap.read_interval_groups(ivs, ["x"], max_leaves=max_leaves)]
    d = snap.counters - before
    assert got == [(tbl.column("seq").to_pylist(), parts) for tbl, parts in
                   snap.read_interval_groups(IntervalList.of(ivs), ["x"],
                                             max_leaves=max_leaves)]
    lv = snap.tree.leaves
    a, b = (np.array([x[k] for x in ivs], np.int64) for k in (0, 1))
    lo, hi = snap.tree.leaf_ranges_for_times(a, b)
    leaves = sorted({x for p, q in zip(lo.tolist(), hi.tolist()) for x in range(p, q)})
    want = 0
    for leaf in leaves:
        pf = pq.ParquetFile(snap._path_of(int(lv.col("file_id")[leaf]), leaf))
        rg = pf.metadata.row_group(int(lv.col("rg")[leaf]))
        names = pf.schema_arrow.names
        want += sum(rg.column(names.index(c)).total_compressed_size for c in ("t", "seq", "x"))
    assert d.leaves == d.row_groups == len(leaves)
    assert d.bytes == want


@settings(max_examples=60, deadline=None)
@given(points=st.lists(st.integers(0, T_MAX), min_size=4, max_size=60),
       max_leaves=st.sampled_from([4, 16, 64]))
def test_a_grouped_read_decodes_each_data_file_once(snap, points, max_leaves) -> None:
    """The leaves a read keeps of one data file are decoded by one call of the direct reader
    (scattered runs of leaves, not one call per run), and the read holds exactly the events
    that Arrow's reads of those leaves hold."""
    from replaydb.store.directread import DirectFile

    calls: list[int] = []
    real = DirectFile.read_into

    def counted(self, groups, *args):  # the real read, counted
        calls.append(len(groups))
        return real(self, groups, *args)

    ivs = _intervals(points, False, False)
    lv = snap.tree.leaves
    DirectFile.read_into = counted  # type: ignore[method-assign]
    try:
        for tbl, _parts in snap.read_interval_groups(ivs, ["x"], max_leaves=max_leaves):
            seqs = tbl.column("seq").to_numpy()
            leaves = np.unique(np.searchsorted(lv.col("seq_min"), seqs, side="right") - 1)
            files = np.unique(lv.col("file_id")[leaves])
            if calls:  # a read of several runs of leaves goes through the direct reader
                assert len(calls) == len(files)
                assert sum(calls) == len(leaves)
            want = np.concatenate([np.arange(lv.col("seq_min")[x],
                                             lv.col("seq_min")[x] + lv.col("count")[x])
                                   for x in leaves])
            assert seqs.tolist() == want.tolist()
            calls.clear()
    finally:
        DirectFile.read_into = real  # type: ignore[method-assign]
