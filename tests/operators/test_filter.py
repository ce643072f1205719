"""Filter operator (Def. 2.10) with the dissertation's Fig. 2.3 and random streams."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import QueryError
from replaydb.operators.expr import Binary, Call, Column, Literal
from replaydb.operators.filter import FilterConfig, FilterOperator
from tests.helpers import rerun_from_snapshot

T = 100  # the figure's "t"


def fig_2_3_stream() -> pa.Table:
    """Fig. 2.3: v=2 at t, 7 at t+1, 5 at t+3, 3 at t+6, 4 at t+7 (the text: dropped at t and
    t+6, results at t+1, t+3, t+7)."""
    return pa.table({"t": [T, T + 1, T + 3, T + 6, T + 7], "seq": [0, 1, 2, 3, 4],
                     "v": [2, 7, 5, 3, 4]})


def test_fig_2_3_filter_v_greater_3() -> None:
    """The caption says phi = v > 3; the text once says "v <= 3" but describes dropping v=2 and
    v=3 and keeping 7, 5, 4 - the caption's predicate."""
    op = FilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3))))
    out = op.process(fig_2_3_stream())
    assert out.column("v").to_pylist() == [7, 5, 4]
    assert out.column("t").to_pylist() == [T + 1, T + 3, T + 7]
    assert out.schema == fig_2_3_stream().schema


def test_filter_batches_projection_and_nulls() -> None:
    tab = pa.table({"t": [1, 2, 3, 4], "seq": [0, 1, 2, 3], "v": [1.0, None, 5.0, 4.0],
                    "s": ["a", "b", "a", None]})
    op = FilterOperator(FilterConfig(Binary("=", Column("s"), Literal("a")), tab.schema,
                                     ("t", "v")))
    for b in tab.to_batches(max_chunksize=1):
        op.push(b)
    out = op.results()
    assert out.to_pydict() == {"t": [1, 3], "v": [1.0, 5.0]}
    op2 = FilterOperator(FilterConfig(Binary(">", Column("v"), Literal(0))))
    assert op2.process(tab).column("t").to_pylist() == [1, 3, 4]  # NULL > 0 is false


def test_a_comparison_of_two_string_nulls_is_false() -> None:
    """Two-valued logic: ``s = s`` keeps no row where ``s`` is NULL, for strings as for
    numbers, and ``s != s`` keeps none either (docs/decisions.md, Null logic)."""
    tab = pa.table({"t": [1, 2, 3], "seq": [0, 1, 2], "s": ["a", None, "b"],
                    "v": [1.0, None, 2.0]})
    for col in ("s", "v"):
        same = FilterOperator(FilterConfig(Binary("=", Column(col), Column(col)), tab.schema))
        assert same.process(tab).column("t").to_pylist() == [1, 3]
        differ = FilterOperator(FilterConfig(Binary("!=", Column(col), Column(col)), tab.schema))
        assert differ.process(tab).column("t").to_pylist() == []


def test_domain_errors_are_null_without_warnings() -> None:
    """``LN`` and ``SQRT`` of a negative value are NULL (NaN), so a comparison with them is
    false, and no floating-point warning escapes."""
    tab = pa.table({"t": [1, 2], "seq": [0, 1], "v": [-1.0, 4.0]})
    for fn in ("LN", "SQRT"):
        op = FilterOperator(FilterConfig(Binary(">", Call(fn, (Column("v"),)), Literal(-10)),
                                         tab.schema))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert op.process(tab).column("t").to_pylist() == [2]


def test_filter_errors_name_the_column() -> None:
    sch = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("v", pa.int64())])
    with pytest.raises(QueryError, match="'w'"):
        FilterConfig(Binary(">", Column("w", pos=7), Literal(3)), sch)
    op = FilterOperator(FilterConfig(Binary(">", Column("w"), Literal(3))))
    with pytest.raises(QueryError, match="'w'"):
        op.push(fig_2_3_stream())


def test_filter_snapshot_restore_and_interval() -> None:
    op = FilterOperator(FilterConfig(Binary(">", Column("v"), Literal(3))))
    full = rerun_from_snapshot(op, fig_2_3_stream(), 2, end_interval=True)
    assert op.results().equals(full)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=40), st.integers(-5, 5), st.integers(1, 7))
def test_filter_matches_definition(vals: list[int], c: int, chunk: int) -> None:
    n = len(vals)
    tab = pa.table({"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64),
                    "v": pa.array(vals, pa.int64())})
    op = FilterOperator(FilterConfig(Binary(">=", Column("v"), Literal(c)), tab.schema))
    for b in tab.to_batches(max_chunksize=chunk):
        op.push(b)
    out = op.results()
    assert out.column("v").to_pylist() == [v for v in vals if v >= c]
    assert op.counters.events_in == n and op.counters.results_out == out.num_rows
