"""WindowAggregate against the brute-force oracle: random streams, sizes, slides, batchings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import DataError, OperatorError, StateCapExceeded
from replaydb.operators.expr import Binary, Column, Literal
from replaydb.operators.window import AggSpec, WindowAggregate, WindowConfig
from replaydb.operators.window.oracle import (
    RICH_AGGS,
    assert_same_rows,
    make_stream,
    oracle,
    split_batches,
)
from tests.helpers import push_all

APPROX = frozenset({"vx", "dy"})


def run(cfg: WindowConfig, table: pa.Table, rng: np.random.Generator | None = None,
        max_len: int = 20, check: bool = False) -> list[dict]:
    batches = split_batches(table, rng, max_len) if rng is not None else [table]
    return push_all(WindowAggregate(cfg), batches, check=check)


@st.composite
def configs(draw: st.DrawFn) -> WindowConfig:
    kind = draw(st.sampled_from(["time", "time", "count"]))
    size = draw(st.integers(1, 24))
    slide = draw(st.one_of(st.integers(1, size), st.integers(1, 30)))
    group = draw(st.booleans())
    align = "first" if kind == "count" else draw(st.sampled_from(["epoch", "first"]))
    offset = draw(st.integers(-7, 7)) if align == "epoch" and kind == "time" else 0
    empty = "emit" if kind == "time" and not group and draw(st.booleans()) else "skip"
    where = draw(st.sampled_from([None, Binary(">", Column("x"), Literal(8.0)),
                                  Binary("!=", Column("k"), Literal("b"))]))
    return WindowConfig(size=size, slide=slide, kind=kind, align=align, offset=offset,
                        empty=empty, group_by=("k",) if group else (), where=where,
                        aggregates=RICH_AGGS)


@settings(max_examples=120)
@given(cfg=configs(), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 90))
def test_operator_matches_oracle(cfg: WindowConfig, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    table = make_stream(rng, n, keys=3 if cfg.group_by else 1)
    got = run(cfg, table, rng, max_len=int(rng.integers(1, 40)), check=True)
    assert_same_rows(got, oracle(table, cfg), cfg.group_by, approx=APPROX)


@settings(max_examples=80)
@given(cfg=configs(), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 120))
def test_tumbling_windows_match_oracle(cfg: WindowConfig, seed: int, n: int) -> None:
    """Tumbling windows (slide = size: one slice per window, the slide state's shortcut)."""
    cfg = dataclasses.replace(cfg, slide=cfg.size)
    rng = np.random.default_rng(seed)
    table = make_stream(rng, n, keys=3 if cfg.group_by else 1)
    got = run(cfg, table, rng, max_len=int(rng.integers(1, 40)), check=True)
    assert_same_rows(got, oracle(table, cfg), cfg.group_by, approx=APPROX)


@pytest.mark.slow
@settings(max_examples=3000)
@given(cfg=configs(), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200))
def test_operator_matches_oracle_many(cfg: WindowConfig, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    table = make_stream(rng, n, keys=4 if cfg.group_by else 1, gap=int(rng.integers(20, 400)))
    got = run(cfg, table, rng, max_len=int(rng.integers(1, 80)), check=True)
    assert_same_rows(got, oracle(table, cfg), cfg.group_by, approx=APPROX)


@pytest.mark.parametrize("size,slide", [(10, 5), (10, 3), (7, 7), (5, 9), (1, 1), (12, 1)])
@pytest.mark.parametrize("kind", ["time", "count"])
def test_batching_does_not_change_results(size: int, slide: int, kind: str) -> None:
    rng = np.random.default_rng(size * 100 + slide)
    table = make_stream(rng, 200, keys=1)
    cfg = WindowConfig(size=size, slide=slide, kind=kind, aggregates=RICH_AGGS)
    whole = run(cfg, table)
    for max_len in (1, 17):
        assert_same_rows(run(cfg, table, rng, max_len), whole, approx=APPROX)
    assert_same_rows(whole, oracle(table, cfg), approx=APPROX)


def test_large_window_paths_match_oracle() -> None:
    """W = 200 slices: batches smaller than W (prefix/suffix + tree) and larger (block scans)."""
    rng = np.random.default_rng(7)
    table = make_stream(rng, 1000, max_step=2, gap_p=0.002, gap=900, keys=1)
    for size, slide in [(200, 1), (203, 2)]:
        cfg = WindowConfig(size=size, slide=slide, aggregates=RICH_AGGS)
        exp = oracle(table, cfg)
        for max_len in (23, 700):
            assert_same_rows(run(cfg, table, rng, max_len, check=True), exp, approx=APPROX)


def test_example_from_docstring() -> None:
    cfg = WindowConfig(size=10, slide=5, aggregates=(
        AggSpec("SUM", Column("x"), "sx"), AggSpec("COUNT", None, "n")))
    op = WindowAggregate(cfg)
    op.push(pa.table({"t": [1, 4, 12], "seq": [0, 1, 2], "x": [1.0, 2.0, 3.0]}))
    op.flush()
    rows = op.results().to_pylist()
    assert rows == [
        {"window_start": -5, "window_end": 5, "sx": 3.0, "n": 2},
        {"window_start": 0, "window_end": 10, "sx": 3.0, "n": 2},
        {"window_start": 5, "window_end": 15, "sx": 3.0, "n": 1},
        {"window_start": 10, "window_end": 20, "sx": 3.0, "n": 1},
    ]


def test_first_anchored_and_empty_windows() -> None:
    """Def 2.8: windows start at the first event; emit reports empty windows in between."""
    t = pa.table({"t": [3, 4, 20], "seq": [0, 1, 2], "x": [1.0, 2.0, 4.0]})
    aggs = (AggSpec("COUNT", None, "n"), AggSpec("SUM", Column("x"), "s"))
    cfg = WindowConfig(size=4, slide=4, align="first", empty="emit", aggregates=aggs)
    rows = WindowAggregate(cfg).process(t).to_pylist()
    assert [(r["window_start"], r["n"], r["s"]) for r in rows] == [
        (3, 2, 3.0), (7, 0, None), (11, 0, None), (15, 0, None), (19, 1, 4.0)]
    skip = WindowAggregate(WindowConfig(size=4, slide=4, align="first", aggregates=aggs))
    assert [r["window_start"] for r in skip.process(t).to_pylist()] == [3, 19]


def test_count_windows_def_2_7() -> None:
    t = pa.table({"t": [1, 2, 2, 5, 9, 11, 12], "seq": list(range(7)),
                  "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]})
    cfg = WindowConfig(size=3, slide=2, kind="count",
                       aggregates=(AggSpec("SUM", Column("x"), "s"),))
    rows = WindowAggregate(cfg).process(t).to_pylist()
    # windows: events 0-2, 2-4, 4-6; no partial window at the end
    assert rows == [{"window_start": 1, "window_end": 2, "s": 6.0},
                    {"window_start": 2, "window_end": 9, "s": 12.0},
                    {"window_start": 9, "window_end": 12, "s": 18.0}]


def test_arbitrary_slide_geometry() -> None:
    """size 10, slide 4: slices alternate slide2 = 2 and slide1 = 2 (3.3.3)."""
    cfg = WindowConfig(size=10, slide=4, aggregates=(AggSpec("COUNT", None, "n"),))
    geom = cfg.geometry
    assert (geom.m, geom.p, geom.W) == (2, 2, 5)
    t = pa.table({"t": np.arange(0, 30), "seq": np.arange(30)})
    rows = WindowAggregate(cfg).process(t).to_pylist()
    assert {r["window_end"] - r["window_start"] for r in rows} == {10}
    full = [r for r in rows if r["window_start"] >= 0 and r["window_end"] <= 30]
    assert full and all(r["n"] == 10 for r in full)


def test_group_by_emits_in_end_order_and_drops_idle_groups() -> None:
    rng = np.random.default_rng(3)
    table = make_stream(rng, 600, keys=5)
    cfg = WindowConfig(size=20, slide=5, group_by=("k",), aggregates=RICH_AGGS)
    op = WindowAggregate(cfg)
    ends = []
    for b in split_batches(table, rng, 30):
        op.push(b)
        ends.extend(op.results().column("window_end").to_pylist())
    op.flush()
    ends.extend(op.results().column("window_end").to_pylist())
    assert ends == sorted(ends)
    # a key that stops appearing is dropped once its windows are reported
    op = WindowAggregate(cfg)
    op.push(pa.table({"t": [0, 1], "seq": [0, 1], "k": ["z", "a"], "x": [1.0, 2.0],
                      "y": [1, 2], "z": [1.0, 2.0]}))
    assert len(op.groups) == 2
    op.push(pa.table({"t": [100], "seq": [2], "k": ["a"], "x": [1.0], "y": [1], "z": [1.0]}))
    assert [op.key_values[g] for g in op.groups] == [("a",)]
    assert len(op.results()) == 8  # 4 windows each for z and a


def test_snapshot_restore_continues_identically() -> None:
    rng = np.random.default_rng(11)
    table = make_stream(rng, 500, keys=3)
    cfg = WindowConfig(size=30, slide=7, group_by=("k",), aggregates=RICH_AGGS)
    batches = split_batches(table, rng, 25)
    a = WindowAggregate(cfg)
    for b in batches[: len(batches) // 2]:
        a.push(b)
    snap = a.snapshot()
    rest_a = []
    for b in batches[len(batches) // 2 :]:
        a.push(b)
    a.flush()
    rest_a = a.results().to_pylist()
    b2 = WindowAggregate(cfg)
    b2.restore(snap)
    for b in batches[len(batches) // 2 :]:
        b2.push(b)
    b2.flush()
    assert b2.results().to_pylist() == rest_a
    # restoring the snapshot into the first operator too
    a.reset()
    a.restore(snap)
    for b in batches[len(batches) // 2 :]:
        a.push(b)
    a.flush()
    assert a.results().to_pylist() == rest_a


def test_long_gaps_are_jumped_not_densified() -> None:
    """1 ns slides over a stream with day-long gaps: the state jumps over empty stretches."""
    day = 86_400 * 10**9
    t = pa.table({"t": [0, 1, day, day + 5, 5 * day], "seq": range(5), "x": [1.0] * 5})
    cfg = WindowConfig(size=1000, slide=1, aggregates=(AggSpec("SUM", Column("x"), "s"),))
    op = WindowAggregate(cfg)
    rows = op.process(t).to_pylist()
    assert len(rows) == 1000 + 1 + 1000 + 5 + 1000
    assert_same_rows(rows, oracle(t, cfg))


def test_state_cap_names_the_cap() -> None:
    cfg = WindowConfig(size=100, slide=1, group_by=("k",), aggregates=(AggSpec("COUNT", None, "n"),))
    op = WindowAggregate(cfg, state_cap=250)
    table = pa.table({"t": [0, 1, 2], "seq": [0, 1, 2], "k": ["a", "b", "c"]})
    with pytest.raises(StateCapExceeded, match="state_cap"):
        op.push(table)


def test_out_of_order_input_is_a_data_error() -> None:
    op = WindowAggregate(WindowConfig(size=5, aggregates=(AggSpec("COUNT", None, "n"),)))
    with pytest.raises(DataError, match="row 2"):
        op.push(pa.table({"t": [1, 3, 2], "seq": [0, 1, 2]}))
    op.reset()
    op.push(pa.table({"t": [5], "seq": [0]}))
    with pytest.raises(DataError, match="out of time order"):
        op.push(pa.table({"t": [4], "seq": [1]}))


def test_config_validation() -> None:
    aggs = (AggSpec("COUNT", None, "n"),)
    with pytest.raises(OperatorError, match="positive"):
        WindowConfig(size=0, aggregates=aggs)
    with pytest.raises(OperatorError, match="slide"):
        WindowConfig(size=5, slide=-1, aggregates=aggs)
    with pytest.raises(OperatorError, match="ungrouped"):
        WindowConfig(size=5, empty="emit", group_by=("k",), aggregates=aggs)
    with pytest.raises(OperatorError, match="duplicate"):
        WindowConfig(size=5, aggregates=(AggSpec("COUNT", None, "window_end"),))
    with pytest.raises(OperatorError, match="first event"):
        WindowConfig(size=5, kind="count", align="epoch", aggregates=aggs)
    with pytest.raises(OperatorError, match="unknown aggregate"):
        AggSpec("MEDIAN", Column("x"), "m")
    with pytest.raises(OperatorError, match="only COUNT"):
        AggSpec("SUM", None, "s")


def test_output_types_follow_the_schema() -> None:
    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("x", pa.float32()),
                        ("y", pa.int32()), ("k", pa.string())])
    cfg = WindowConfig(size=5, group_by=("k",), schema=schema, aggregates=(
        AggSpec("SUM", Column("y"), "sy"), AggSpec("MIN", Column("y"), "my"),
        AggSpec("MAX", Column("x"), "mx"), AggSpec("AVG", Column("y"), "ay"),
        AggSpec("COUNT", Column("k"), "nk")))
    op = WindowAggregate(cfg)
    assert op.output_schema.types == [pa.int64(), pa.int64(), pa.string(), pa.int64(),
                                      pa.int32(), pa.float32(), pa.float64(), pa.int64()]
    data = pa.table({"t": [1, 2, 7], "seq": [0, 1, 2], "x": pa.array([1.5, 2.5, 3.0], pa.float32()),
                     "y": pa.array([2**40 // 2**20, 3, None], pa.int32()),
                     "k": ["a", "a", None]}, schema=schema)
    rows = op.process(data).to_pylist()
    assert rows == [
        {"window_start": 0, "window_end": 5, "k": "a", "sy": 2**20 + 3, "my": 3, "mx": 2.5,
         "ay": (2**20 + 3) / 2, "nk": 2},
        {"window_start": 5, "window_end": 10, "k": None, "sy": None, "my": None, "mx": 3.0,
         "ay": None, "nk": 0},
    ]


def test_string_column_only_countable() -> None:
    op = WindowAggregate(WindowConfig(size=5, aggregates=(AggSpec("SUM", Column("k"), "s"),)))
    with pytest.raises(OperatorError, match="only COUNT"):
        op.push(pa.table({"t": [1], "seq": [0], "k": ["a"]}))


def test_replay_gaps_act_like_a_filter() -> None:
    """end_interval between replay intervals: windows span the gap, nothing is reported twice."""
    rng = np.random.default_rng(21)
    table = make_stream(rng, 400, keys=2)
    t = table.column("t").to_numpy()
    cut1, cut2 = int(t[120]), int(t[260])
    first = table.filter(pa.array(t < cut1))
    second = table.filter(pa.array(t >= cut2))
    kept = pa.concat_tables([first, second])
    for cfg in (WindowConfig(size=300, slide=70, group_by=("k",), aggregates=RICH_AGGS),
                WindowConfig(size=25, slide=10, kind="count", aggregates=RICH_AGGS)):
        op = WindowAggregate(cfg)
        op.push(first)
        op.end_interval()
        op.push(second)
        op.flush()
        assert op.counters.intervals == 1
        assert_same_rows(op.results().to_pylist(), oracle(kept, cfg), cfg.group_by,
                         approx=APPROX)
