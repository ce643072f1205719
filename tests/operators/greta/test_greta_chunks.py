"""GRETA's input plumbing: the NumPy and Arrow encodings of partition keys agree, and a sub-chunk
cut from a converted batch reads exactly like a chunk converted on its own."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.greta.events import (
    EventChunk,
    _encode_arrow_keys,
    _encode_int_keys,
    encode_keys,
)

TYPES = [pa.int64(), pa.int32(), pa.uint8(), pa.int16()]


def _keys(inv: np.ndarray, tuples: list[tuple]) -> list[tuple]:
    return [tuples[i] for i in inv.tolist()]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), ncols=st.integers(1, 3), n=st.integers(0, 60))
def test_int_and_arrow_key_encodings_agree(data: st.DataObject, ncols: int, n: int) -> None:
    cols = {}
    for j in range(ncols):
        ty = data.draw(st.sampled_from(TYPES))
        hi = 200 if ty == pa.uint8() else 30
        lo = 0 if ty == pa.uint8() else -30
        cols[f"k{j}"] = pa.array(data.draw(st.lists(st.integers(lo, hi), min_size=n,
                                                    max_size=n)), ty)
    cols["t"] = pa.array(np.arange(n, dtype=np.int64))
    cols["type"] = pa.array(["E"] * n)
    ev = EventChunk(pa.table(cols), "type")
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)))
                    if n else [], np.int64)
    attrs = tuple(f"k{j}" for j in range(ncols))
    fast = _encode_int_keys([ev.np(a)[rows] for a in attrs])
    slow = _encode_arrow_keys(ev, rows, attrs)
    assert fast is not None
    for inv, tuples in (fast, slow):
        assert len(set(tuples)) == len(tuples)  # dense: one code per distinct tuple
        assert sorted(set(inv.tolist())) == list(range(len(tuples))) or not len(rows)
    assert _keys(*fast) == _keys(*slow)
    assert all(type(v) is int for tup in fast[1] for v in tup)
    # the dispatcher takes the NumPy path here
    assert _keys(*encode_keys(ev, rows, attrs)) == _keys(*slow)


def test_key_columns_with_nulls_take_the_arrow_path() -> None:
    t = pa.table({"t": pa.array([1, 2, 3], pa.int64()), "type": ["E"] * 3,
                  "k": pa.array([1, None, 1], pa.int64())})
    ev = EventChunk(t, "type")
    inv, tuples = encode_keys(ev, np.arange(3), ("k",))
    assert _keys(inv, tuples) == [(1,), (None,), (1,)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 50), cut=st.data())
def test_a_slice_reads_like_a_chunk_of_its_own(n: int, cut: st.DataObject) -> None:
    rng = np.random.default_rng(n)
    table = pa.table({"t": pa.array(np.sort(rng.integers(0, 100, n))),
                      "type": pa.array(rng.choice(["A", "B", "C"], n)),
                      "x": pa.array(rng.integers(-5, 5, n)),
                      "y": pa.array(rng.normal(size=n))})
    a = cut.draw(st.integers(0, n))
    b = cut.draw(st.integers(a, n))
    whole = EventChunk(table, "type")
    whole.np("x")  # converted before the cut: the slice must view it
    part = whole.slice(a, b - a)
    alone = EventChunk(table.slice(a, b - a), "type")
    assert part.n == alone.n == b - a
    assert np.array_equal(part.t, alone.t)
    for name in ("x", "y"):
        assert np.array_equal(part.np(name), alone.np(name))
    names = {v: k for k, v in whole.type_index.items()}
    alone_names = {v: k for k, v in alone.type_index.items()}
    assert [names[c] for c in part.type_codes.tolist()] == \
        [alone_names[c] for c in alone.type_codes.tolist()]
    assert part.table.equals(alone.table)
