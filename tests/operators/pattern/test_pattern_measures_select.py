"""Which flat row a navigation measure picks (``FIRST``/``LAST`` of a variable, with an
offset, RUNNING or FINAL) in :class:`~replaydb.operators.pattern.measure_eval.Evaluator`:
the per-match scan against brute force on random match sets, for ONE ROW and ALL ROWS
frames."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.pattern.measure_eval import Evaluator
from replaydb.operators.pattern.measures import Frame, MatchSet


def _brute(ms: MatchSet, frame: Frame, var: int | None, from_end: bool, k: int,
           final: bool) -> list[int]:
    out = []
    for r in range(len(frame.mid)):
        m = int(frame.mid[r])
        lo = int(ms.off[m])
        hi = int(ms.off[m + 1]) - 1 if final else int(frame.cur[r])
        rows = [j for j in range(lo, hi + 1) if var is None or int(ms.var[j]) == var]
        if from_end:
            rows = rows[::-1]
        out.append(rows[k] if k < len(rows) else -1)
    return out


@settings(max_examples=150, deadline=None)
@given(lens=st.lists(st.integers(1, 12), min_size=0, max_size=20),
       seed=st.integers(0, 2**16), var=st.one_of(st.none(), st.integers(0, 3)),
       from_end=st.booleans(), k=st.integers(0, 4), final=st.booleans(),
       all_rows=st.booleans())
def test_select_against_brute_force(lens, seed, var, from_end, k, final, all_rows) -> None:
    rng = np.random.default_rng(seed)
    n = sum(lens)
    off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    ms = MatchSet(np.arange(n, dtype=np.int64), rng.integers(0, 4, n).astype(np.int64), off,
                  np.zeros(len(lens), np.int64))
    frame = Frame.all_rows(ms) if all_rows else Frame.one_row(ms)
    ev = Evaluator(frame, None, ["A", "B", "C", "D"], None)  # type: ignore[arg-type]
    got = ev.select(var, from_end, k, final)
    assert got.dtype == np.int64
    assert got.tolist() == _brute(ms, frame, var, from_end, k, final)
