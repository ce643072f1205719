"""The GRETA runtime's table-driven ``searchsorted`` (``Positions``) answers exactly like
``np.searchsorted``, and GRETA's results do not depend on which of the two computed the ranks
and probe bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.bench.bench_greta import WORKLOADS, _digest
from replaydb.operators.greta.universe import Positions
from replaydb.planner.lang.greta import bind, parse

ints = st.integers(min_value=-50, max_value=400)


@settings(max_examples=300, deadline=None)
@given(hay=st.lists(ints, max_size=80), needles=st.lists(st.integers(-80, 480), max_size=300),
       side=st.sampled_from(["left", "right"]), threshold=st.sampled_from([0, 1, 64]))
def test_positions_equal_searchsorted(hay: list[int], needles: list[int], side: str,
                                      threshold: int) -> None:
    h = np.array(sorted(hay), np.int64)
    n = np.array(needles, np.int64)
    pos = Positions()
    pos.MIN_NEEDLES = threshold
    got = pos(h, n, side)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.searchsorted(h, n, side))
    # the cached table answers a second probe of the same array too
    assert np.array_equal(pos(h, n[::-1], side), np.searchsorted(h, n[::-1], side))


def test_positions_fall_back_for_wide_ranges_and_floats() -> None:
    pos = Positions()
    h = np.array([0, 10**12], np.int64)
    n = np.arange(100, dtype=np.int64) * 10**10
    assert np.array_equal(pos(h, n), np.searchsorted(h, n))
    assert not pos._luts  # range too wide for a table
    hf = np.array([0.5, 1.5, 2.5])
    nf = np.linspace(0, 3, 100)
    assert np.array_equal(pos(hf, nf, "right"), np.searchsorted(hf, nf, "right"))


@pytest.mark.parametrize("name,n", [("cluster", 1500), ("linear_road_segment", 800),
                                    ("linear_road", 800)])
def test_greta_results_do_not_depend_on_the_position_tables(
        name: str, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    w = WORKLOADS[name]
    table = w.generate(n, windows=2.0, seed=5)

    def run() -> str:
        op = bind(parse(w.query), table.schema, "s", exact_type="string")
        rows = op.process(table).to_pylist()
        assert rows
        return _digest(rows)

    calls = {"table": 0}
    orig = Positions.__call__

    def counting(self: Positions, hay: np.ndarray, needles: np.ndarray,
                 side: str = "left") -> np.ndarray:
        before = len(self._luts)
        out = orig(self, hay, needles, side)
        calls["table"] += len(self._luts) > before
        return out

    monkeypatch.setattr(Positions, "__call__", counting)
    with_tables = run()
    assert calls["table"] > 0, "the table path was not exercised"
    monkeypatch.setattr(Positions, "MIN_NEEDLES", 10**12)
    assert run() == with_tables


@pytest.mark.parametrize("name,n", [("cluster", 8000), ("linear_road_segment", 6000),
                                    ("stock", 300)])
def test_dense_and_sparse_index_universes_give_the_same_results(
        name: str, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dense universes (every partition times every integer key in range) are a layout choice:
    forcing the sparse layout everywhere changes no result."""
    from replaydb.operators.greta.runtime import GraphState

    w = WORKLOADS[name]
    table = w.generate(n, windows=2.0, seed=11)
    dense_used = []
    orig = GraphState._universe

    def spy(self: GraphState, *args: object, **kw: object) -> object:
        out = orig(self, *args, **kw)
        dense_used.append(out[3])
        return out

    def run() -> str:
        op = bind(parse(w.query), table.schema, "s", exact_type="string")
        op.push(table.slice(0, table.num_rows // 2))
        for g in op._rt.graphs:
            g._check()
        op.push(table.slice(table.num_rows // 2))
        op.flush()
        for g in op._rt.graphs:
            g._check()
        return _digest(op.results().to_pylist())

    monkeypatch.setattr(GraphState, "_universe", spy)
    dense = run()
    if name != "stock":  # float prices: never dense
        assert any(dense_used), "the dense layout was not exercised"
    else:
        assert not any(dense_used)
    monkeypatch.setattr(GraphState, "DENSE_MIN", 0)
    monkeypatch.setattr(GraphState, "DENSE_FACTOR", 0)
    dense_used.clear()
    assert run() == dense
    assert not any(dense_used)
