"""EventBuffer.at: t, seq and partition id of kept events at global indices, across the
batches (chunks) the buffer holds and after trims, against the concatenated columns; local
condition masks against the condition evaluated on every row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators import expr as ex
from replaydb.operators.pattern.buffer import EventBuffer, arrow_to_numpy
from replaydb.operators.valuemask import ConditionMask


def test_at_matches_the_concatenated_columns_across_chunks_and_trims() -> None:
    rng = np.random.default_rng(11)
    for trial in range(60):
        buf = EventBuffer(n_cols=1, track_next=False)
        ts, seqs, pids = [], [], []
        for _ in range(int(rng.integers(1, 7))):
            n = int(rng.integers(1, 50))
            t = np.sort(rng.integers(0, 10_000, n)).astype(np.int64)
            seq = rng.integers(0, 1 << 40, n).astype(np.int64)
            pid = rng.integers(0, 5, n).astype(np.int64)
            batch = pa.record_batch([pa.array(t)], names=["t"])
            buf.append(batch, np.zeros((1, n)), t, seq, pid)
            ts.append(t), seqs.append(seq), pids.append(pid)
        t_all, s_all, p_all = (np.concatenate(x) for x in (ts, seqs, pids))
        keep = int(rng.integers(0, buf.end)) if trial % 2 else 0
        buf.trim(keep)
        first = buf.chunks[0][0]  # trimming drops whole chunks only
        for size in (0, 1, 7, 200):
            g = rng.integers(first, buf.end, size).astype(np.int64)
            if size == 7:
                g[:] = g[0]  # all in one chunk
            assert np.array_equal(buf.at("t", g), t_all[g]), trial
            assert np.array_equal(buf.at("seq", g), s_all[g]), trial
            assert np.array_equal(buf.at("pid", g), p_all[g]), trial


# --------------------------------------------------------------------------- local masks
_WORDS = ["ORD", "ord", "ATL", "", "b", "Ab"]


def _string_conjunct(col: str) -> st.SearchStrategy[ex.Expr]:
    c = ex.Column(col)
    lit = st.sampled_from(_WORDS).map(ex.Literal)
    return st.one_of(
        st.builds(lambda op, v: ex.Binary(op, c, v), st.sampled_from(["=", "!=", "<", ">="]),
                  lit),
        st.builds(lambda v: ex.Binary("=", ex.Call("LOWER", (c,)), v), lit),
        st.builds(lambda vs, neg: ex.InList(c, tuple(vs), neg), st.lists(lit, min_size=1,
                                                                       max_size=3),
                  st.booleans()),
        st.builds(lambda neg: ex.IsNull(c, neg), st.booleans()),
        st.builds(lambda a, b: ex.Between(c, a, b), lit, lit))


@st.composite
def _conditions(draw) -> ex.Expr:
    parts = draw(st.lists(st.one_of(_string_conjunct("s"), _string_conjunct("u"),
                                    st.builds(lambda k: ex.Binary(">", ex.Column("x"),
                                                                  ex.Literal(k)),
                                              st.integers(0, 9)),
                                    st.builds(lambda: ex.Binary("=", ex.Column("s"),
                                                                ex.Column("u")))),
                          min_size=1, max_size=4))
    return ex.and_all(parts)


@settings(max_examples=300, deadline=None)
@given(_conditions(), st.lists(st.tuples(st.sampled_from(_WORDS + [None]),
                                         st.sampled_from(_WORDS + [None]),
                                         st.integers(0, 9)), min_size=1, max_size=40),
       st.booleans())
def test_local_masks_equal_the_condition_on_every_row(cond, rows, dictionary) -> None:
    """Conjuncts over one string column, run once per distinct value, and the rest, run on
    NumPy columns, give the condition's own result on every row (NULLs included)."""
    s = pa.array([r[0] for r in rows], pa.string())
    u = pa.array([r[1] for r in rows], pa.string())
    if dictionary:
        s = s.dictionary_encode()
    batch = pa.record_batch([s, u, pa.array([r[2] for r in rows], pa.int64())],
                            names=["s", "u", "x"])
    schema = pa.schema([("s", pa.string()), ("u", pa.string()), ("x", pa.int64())])
    env = ex.ColumnsEnv({n: arrow_to_numpy(batch.column(n)) for n in ("s", "u", "x")})
    want = np.broadcast_to(np.asarray(ex.compile_predicate(cond)(env), dtype=np.bool_),
                           (len(rows),))
    encoded: dict = {}
    got = ConditionMask(cond, schema).mask(batch, env, encoded)
    assert np.array_equal(got, want), (cond, rows)
    again = ConditionMask(cond, schema).mask(batch, env, encoded)  # the encodings shared
    assert np.array_equal(again, want), (cond, rows)
