"""Index path (optimized and naive) against full replay on real stores, plus the planner choice."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.errors import UsageError
from replaydb.operators.expr import Binary, Column, Literal
from replaydb.operators.window import AggSpec, WindowConfig
from replaydb.operators.window.oracle import INDEX_AGGS, assert_same_rows, make_stream, oracle
from replaydb.planner import window_path
from replaydb.planner.window_path import run
from replaydb.replay.tree_aggregates import (
    index_applicable,
    run_index,
    run_index_grouped,
    run_naive,
    run_replay,
)
from tests.helpers import nan_allowing_schema

AGGS = INDEX_AGGS + (AggSpec("COUNT", Column("y"), "ny"), AggSpec("SUM", Column("y"), "sy"),
                     AggSpec("MIN", Column("y"), "mny"), AggSpec("MAX", Column("z"), "mz"))
LAYOUTS = {"deep": (37, 4), "tiny": (8, 3), "flat": (500, 16), "one": (5000, 8)}


def _create(store, name: str, table: pa.Table, B: int, D: int) -> None:  # noqa: N803
    store.create_stream(name, nan_allowing_schema(table.schema, leaf_capacity=B, fanout=D))
    # several appends: several data files, leaves continue across them
    n = table.num_rows
    for a, b in ((0, n // 3), (n // 3, n // 2), (n // 2, n)):
        if b > a:
            store.append(name, table.slice(a, b - a))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st_ = replaydb.open(tmp_path_factory.mktemp("winpath") / "store", create=True)
    rng = np.random.default_rng(42)
    table = make_stream(rng, 3000, max_step=6, gap_p=0.01, gap=700, t0=1_000).drop_columns("seq")
    for name, (B, D) in LAYOUTS.items():
        _create(st_, name, table, B, D)
    # one stream per key (GROUP BY on the index path: one tree per key)
    keys = table.column("k").to_pylist()
    for key in ("a", "b", "c"):
        mask = pa.array([k == key for k in keys])
        _create(st_, f"key_{key}", table.filter(mask), 20, 4)
    return st_


@st.composite
def window_cases(draw: st.DrawFn) -> tuple[WindowConfig, str, int | None, int | None]:
    kind = draw(st.sampled_from(["time", "time", "count"]))
    if kind == "time":
        size = draw(st.integers(1, 3000))
        slide = draw(st.one_of(st.integers(1, size), st.integers(1, 4000),
                               st.sampled_from([size, max(1, size // 7), max(1, size // 2)])))
    else:
        size = draw(st.integers(1, 400))
        slide = draw(st.one_of(st.integers(1, size), st.integers(1, 500)))
    align = draw(st.sampled_from(["epoch", "first"])) if kind == "time" else "first"
    offset = draw(st.integers(-500, 500)) if align == "epoch" and kind == "time" else 0
    empty = draw(st.sampled_from(["skip", "emit"])) if kind == "time" else "skip"
    if empty == "emit" and slide < 20:
        slide = 20  # keep the number of (mostly empty) windows small
    cfg = WindowConfig(size=size, slide=slide, kind=kind, align=align, offset=offset,
                       empty=empty, aggregates=AGGS)
    stream = draw(st.sampled_from(sorted(LAYOUTS)))
    bounds = draw(st.sampled_from(["none", "both", "lo", "hi"]))
    t0 = draw(st.integers(0, 40_000)) if bounds in ("both", "lo") else None
    t1 = None
    if bounds in ("both", "hi"):
        t1 = draw(st.integers((t0 or 0) + 1, 60_000))
    return cfg, stream, t0, t1


@settings(max_examples=45)
@given(case=window_cases())
def test_index_and_naive_equal_replay(store, case) -> None:
    cfg, stream, t0, t1 = case
    snap = store.stream(stream)
    expected, _ = run_replay(snap, cfg, t0=t0, t1=t1)
    exp = expected.to_pylist()
    got, stats = run_index(snap, cfg, t0=t0, t1=t1)
    assert_same_rows(got.to_pylist(), exp)
    assert got.schema.equals(expected.schema)
    naive, _ = run_naive(snap, cfg, t0=t0, t1=t1)
    assert_same_rows(naive.to_pylist(), exp)


@pytest.mark.slow
@settings(max_examples=1500)
@given(case=window_cases())
def test_index_and_naive_equal_replay_many(store, case) -> None:
    test_index_and_naive_equal_replay.hypothesis.inner_test(store, case)


def test_replay_equals_oracle_on_the_stored_stream(store) -> None:
    snap = store.stream("deep")
    table = snap.read()
    for cfg in (WindowConfig(size=900, slide=250, aggregates=AGGS),
                WindowConfig(size=40, slide=15, kind="count", aggregates=AGGS),
                WindowConfig(size=500, slide=700, align="first", empty="emit", aggregates=AGGS)):
        got, _ = run_replay(snap, cfg)
        assert_same_rows(got.to_pylist(), oracle(table, cfg))


def test_optimized_path_reads_each_boundary_leaf_once(store) -> None:
    """Forward scan: no leaf is read twice, and large slides skip most leaves."""
    snap = store.stream("deep")
    n_leaves = snap.tree.n_leaves
    cfg = WindowConfig(size=20_000, slide=5_000, aggregates=INDEX_AGGS)
    _, st_ = run_index(snap, cfg, chunk=3)  # tiny chunks: the scan spans many fetches
    assert st_.leaf_reads <= st_.ranges + 1
    assert st_.leaf_reads < n_leaves / 4
    assert st_.io["io_leaves"] == st_.leaf_reads
    _, rs = run_replay(snap, cfg)
    assert rs.io["io_leaves"] == n_leaves
    # the naive path merges more nodes for the same windows
    _, ns = run_naive(snap, cfg)
    assert ns.nodes_merged > st_.nodes_merged


def test_naive_rereads(store) -> None:
    snap = store.stream("tiny")  # 8 events per leaf: a window of 3000 ms spans ~120 leaves
    cfg = WindowConfig(size=3000, slide=100, aggregates=INDEX_AGGS)
    _, small = run_naive(snap, cfg, buffer_leaves=4)
    _, big = run_naive(snap, cfg, buffer_leaves=100_000)
    assert small.leaf_reads > big.leaf_reads
    assert big.leaf_reads <= snap.tree.n_leaves


def test_group_by_on_per_key_streams_equals_replay(store) -> None:
    snaps = [store.stream(f"key_{k}") for k in ("a", "b", "c")]
    for cfg in (WindowConfig(size=1500, slide=400, group_by=("type",), aggregates=AGGS),
                WindowConfig(size=700, slide=700, align="first", group_by=("type",),
                             aggregates=AGGS),
                WindowConfig(size=30, slide=11, kind="count", group_by=("type",),
                             aggregates=AGGS)):
        exp, _ = run_index_grouped(snaps, cfg, variant="replay")
        got, _ = run_index_grouped(snaps, cfg, variant="index")
        assert_same_rows(got.to_pylist(), exp.to_pylist(), ("type",))
        naive, _ = run_index_grouped(snaps, cfg, variant="naive")
        assert_same_rows(naive.to_pylist(), exp.to_pylist(), ("type",))
        assert len(exp) > 10


def test_not_applicable_falls_back_to_replay(store) -> None:
    snap = store.stream("deep")
    cases = [
        (WindowConfig(size=100, group_by=("k",), aggregates=INDEX_AGGS), "GROUP BY"),
        (WindowConfig(size=100, where=Binary(">", Column("x"), Literal(1.0)),
                      aggregates=INDEX_AGGS), "WHERE"),
        (WindowConfig(size=100, aggregates=(AggSpec("FIRST", Column("x"), "f"),)), "FIRST"),
        (WindowConfig(size=100, aggregates=(AggSpec("SUM", Binary("*", Column("x"), Column("y")),
                                                    "s"),)), "plain"),
        (WindowConfig(size=100, aggregates=(AggSpec("COUNT", Column("k"), "c"),)), "numeric"),
    ]
    for cfg, why in cases:
        ok, reason = index_applicable(cfg, snap)
        assert not ok and why in reason
        out, choice, stats = run(snap, cfg, "auto")
        assert choice.path == "replay" and stats.path == "replay"
        assert why in choice.reason
        with pytest.raises(UsageError, match=why):
            run(snap, cfg, "index")


def test_planner_choice_follows_the_cost_model(store) -> None:
    snap = store.stream("deep")
    small = WindowConfig(size=2000, slide=10, aggregates=INDEX_AGGS)
    large = WindowConfig(size=20_000, slide=10_000, aggregates=INDEX_AGGS)
    assert window_path.plan(snap, small).path == "replay"
    assert window_path.plan(snap, large).path == "index"
    for p in ("replay", "index", "naive"):
        out, choice, stats = run(snap, large, p)
        assert choice.forced and choice.path == p == stats.path
    lines = window_path.plan(snap, large).explain("ms")
    assert any("break-even" in ln for ln in lines)
    with pytest.raises(UsageError, match="unknown plan"):
        window_path.plan(snap, large, "fast")


def test_empty_range_gives_no_rows(store) -> None:
    snap = store.stream("flat")
    cfg = WindowConfig(size=100, aggregates=INDEX_AGGS)
    for fn in (run_index, run_naive, run_replay):
        out, _ = fn(snap, cfg, t0=10**9, t1=10**9 + 5)
        assert out.num_rows == 0


def test_replay_reads_seq_only_when_the_query_needs_it(tmp_path) -> None:
    """A single stream's replay reads no seq unless FIRST/LAST order by it: with the stored seq
    column destroyed, every other query still replays to exactly the rows the seq-reading
    replay gave before (time and count windows, WHERE, GROUP BY, empty windows), while FIRST/LAST
    and the multi-stream merge (ties broken by seq) fail to read it."""
    from replaydb.operators.window import WindowAggregate
    from replaydb.replay import Replay
    from tests.helpers import destroy_column

    st_ = replaydb.open(tmp_path / "store", create=True)
    table = make_stream(np.random.default_rng(7), 2500, max_step=6, gap_p=0.01, gap=700,
                        t0=1_000).drop_columns("seq")
    _create(st_, "s", table, 37, 4)
    keys = table.column("k").to_pylist()
    for key in ("a", "b"):
        _create(st_, f"key_{key}", table.filter(pa.array([k == key for k in keys])), 20, 4)
    no_seq = [
        WindowConfig(size=900, slide=250, aggregates=AGGS),
        WindowConfig(size=40, slide=15, kind="count", aggregates=AGGS),
        WindowConfig(size=500, slide=700, align="first", empty="emit", aggregates=AGGS),
        WindowConfig(size=600, slide=200, group_by=("k",), aggregates=AGGS,
                     where=Binary(">", Column("x"), Literal(0.0))),
    ]
    with_seq = [WindowConfig(size=900, slide=300, aggregates=(
        AggSpec("FIRST", Column("x"), "fx"), AggSpec("LAST", Column("y"), "ly")))]
    snap = st_.stream("s")
    before = {}
    for cfg in no_seq + with_seq:
        op = WindowAggregate(dataclasses.replace(cfg, schema=snap.arrow_schema), state_cap=None)
        assert op.requires_seq == (cfg in with_seq)
        rp = Replay([snap], columns=[*op.input_columns, "seq"])  # seq read, as before
        before[cfg] = rp.run(op).to_pylist()
        assert before[cfg]
    assert destroy_column(snap, "seq") > 0
    snap = replaydb.open(tmp_path / "store").stream("s")
    for cfg in no_seq:
        got, stats = run_replay(snap, cfg)
        assert got.to_pylist() == before[cfg]
        assert stats.io["io_events"] == snap.n_events
    for cfg in with_seq:
        with pytest.raises(OSError):
            run_replay(snap, cfg)
    for key in ("a", "b"):
        destroy_column(st_.stream(f"key_{key}"), "seq")
    snaps = [replaydb.open(tmp_path / "store").stream(f"key_{k}") for k in ("a", "b")]
    with pytest.raises(OSError):
        run_index_grouped(snaps, WindowConfig(size=900, slide=250, group_by=("type",),
                                              aggregates=AGGS), variant="replay")


def test_slices_per_step_bounds_boundary_leaf_events() -> None:
    from replaydb.replay.tree_aggregates import CHUNK, MIN_CHUNK, STEP_EVENTS, slices_per_step

    # one event per slice: whole steps
    assert slices_per_step(60_000_000, 60_000_000, 458) == CHUNK
    # a leaf or more per slice: about STEP_EVENTS boundary-leaf events per step
    n = slices_per_step(60_000_000, 60_000, 458)
    assert n == STEP_EVENTS // 458 and n * 458 <= STEP_EVENTS
    assert slices_per_step(10**12, 10, 10**9) == MIN_CHUNK
    assert slices_per_step(0, 0, 16) == CHUNK
