"""Windowed join (Defs. 2.12/2.13): the dissertation's Fig. 2.5 and a brute-force oracle."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import DataError, QueryError
from replaydb.operators.expr import Binary, Column
from replaydb.operators.join import JoinConfig, JoinOperator, Window
from tests.helpers import rerun_from_snapshot

T = 100
SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                    ("v", pa.int64())])
PHI = Binary("<=", Column("v", "E1"), Column("v", "E2"))


def merged(events: list[tuple[int, str, int]]) -> pa.Table:
    events = sorted(events, key=lambda e: e[0])
    return pa.table({"t": [e[0] for e in events], "seq": list(range(len(events))),
                     "type": [e[1] for e in events], "v": [e[2] for e in events]},
                    schema=SCHEMA)


def test_fig_2_5_event_v6_joins_only_v5() -> None:
    """Fig. 2.5: sliding count windows of size 2, phi = E1.v <= E2.v. At t+4 the active window
    of E1 holds (v=7, t+1) and (v=5, t+3); the E2 event (v=6, t+4) yields one result at t+4.
    E1 is the stream of Fig. 2.3 (the figures share it); the E2 events other than (6, t+4) are
    not recoverable from the text, so E2 here is just that event."""
    e1 = [(T, "E1", 2), (T + 1, "E1", 7), (T + 3, "E1", 5), (T + 6, "E1", 3), (T + 7, "E1", 4)]
    e2 = [(T + 4, "E2", 6)]
    op = JoinOperator(JoinConfig(SCHEMA, "E1", "E2", Window("count", 2), Window("count", 2),
                                 PHI))
    out = op.process(merged(e1 + e2)).to_pylist()
    at4 = [r for r in out if r["t"] == T + 4]
    assert len(at4) == 1
    assert (at4[0]["E1.v"], at4[0]["E2.v"], at4[0]["probe"]) == (5, 6, "E2")
    # later E1 arrivals probe E2's window; E2 has one event so its size-2 window never fills
    assert out == at4


def oracle_join(events: list[tuple[int, str, int]], lw: Window, rw: Window,
                op: str) -> list[tuple[int, int, int]]:
    """Defs. 2.7-2.9, 2.12, 2.13 literally, over the events that precede each arrival."""
    res = []
    for i, (t, side, v) in enumerate(events):
        other = "E2" if side == "E1" else "E1"
        w = rw if side == "E1" else lw
        prev = [(j, e) for j, e in enumerate(events[:i]) if e[1] == other]
        windows = []
        if w.kind == "count":
            k = 1
            while w.size + (k - 1) * w.slide <= len(prev):
                content = prev[(k - 1) * w.slide: w.size + (k - 1) * w.slide]
                windows.append((content[-1][1][0], content))
                k += 1
        elif prev:
            a = 0 if w.align == "epoch" else prev[0][1][0]
            k = 1
            while a + w.size + (k - 1) * w.slide - 1 <= t:
                lo = a + (k - 1) * w.slide
                content = [p for p in prev if lo <= p[1][0] < lo + w.size]
                windows.append((lo + w.size - 1, content))
                k += 1
        active = [wd for wd in windows if wd[0] <= t]
        if not active:
            continue
        _, content = active[-1]
        for j, e in content:
            lv, rv = (v, e[2]) if side == "E1" else (e[2], v)
            if (lv <= rv) if op == "<=" else (lv > rv):
                res.append((i, j, t))
    return res


@st.composite
def join_inputs(draw, max_chunk: int = 6):  # type: ignore[no-untyped-def]
    """Random merged E1/E2 events, two windows, a comparison and a batch size."""
    n = draw(st.integers(0, 25))
    t, evs = 0, []
    for _ in range(n):
        t += draw(st.integers(0, 3))
        evs.append((t, draw(st.sampled_from(["E1", "E2"])), draw(st.integers(0, 5))))

    def win():  # type: ignore[no-untyped-def]
        kind = draw(st.sampled_from(["count", "time"]))
        size = draw(st.integers(1, 5))
        return Window(kind, size, draw(st.integers(1, size)),
                      draw(st.sampled_from(["first", "epoch"])))

    return evs, win(), win(), draw(st.sampled_from(["<=", ">"])), draw(st.integers(1, max_chunk))


@settings(max_examples=150, deadline=None)
@given(join_inputs())
def test_join_matches_oracle(inp) -> None:  # type: ignore[no-untyped-def]
    evs, lw, rw, cmp, chunk = inp
    tab = merged(evs)
    phi = Binary(cmp, Column("v", "L"), Column("v", "R"))
    op = JoinOperator(JoinConfig(SCHEMA, "E1", "E2", lw, rw, phi, chunk_pairs=3))
    for b in tab.to_batches(max_chunksize=chunk):
        op.push(b)
    op.flush()
    got = [(r["left_seq"] if r["probe"] == "E1" else r["right_seq"],
            r["right_seq"] if r["probe"] == "E1" else r["left_seq"], r["t"])
           for r in op.results().to_pylist()]
    assert got == oracle_join(evs, lw, rw, cmp)


def check_snapshot_restore(operator: type) -> None:
    """An ``operator`` restored to a snapshot and fed the rest again returns what the CPU join
    returns without a restore."""
    evs = [(i, "E1" if i % 3 else "E2", i % 4) for i in range(30)]
    tab = merged(evs)
    cfg = JoinConfig(SCHEMA, "E1", "E2", Window("time", 4, 2), Window("count", 3), PHI)
    ref = JoinOperator(cfg).process(tab)
    op = operator(cfg)
    rerun_from_snapshot(op, tab, 13)
    op.flush()
    assert op.results().equals(ref)


def test_join_snapshot_restore_equivalence() -> None:
    check_snapshot_restore(JoinOperator)


def test_join_errors() -> None:
    with pytest.raises(QueryError):
        Window("count", 2, 3)
    with pytest.raises(QueryError):
        JoinConfig(SCHEMA, "E1", "E2", Window("count", 2), Window("count", 2),
                   Binary("<=", Column("v"), Column("v", "E2")))
    op = JoinOperator(JoinConfig(SCHEMA, "E1", "E2", Window("count", 2), Window("count", 2)))
    with pytest.raises(DataError, match="neither"):
        op.push(merged([(1, "E3", 1)]))
