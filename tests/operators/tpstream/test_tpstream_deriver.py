"""Situation derivation: worked example, batch splits, carry, ties, durations, known times."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from replaydb.operators.tpstream.aggregates import AggSpec
from replaydb.operators.tpstream.config import ReturnItem
from replaydb.operators.tpstream.deriver import INF, Deriver


def derive_all(t, mask, *, pid=None, cuts=(), min_dur=None, max_dur=None, with_open=False,  # noqa: ANN001
               values=None, funcs=(), policy="drop"):  # noqa: ANN001
    aggs = [AggSpec(ReturnItem(f, "A", "v", f), 0) for f in funcs]
    d = Deriver([min_dur], [max_dur], aggs, with_open=with_open)
    t = np.asarray(t, np.int64)
    seq = np.arange(len(t), dtype=np.int64)
    mask = np.asarray(mask, bool)
    bounds = [0, *cuts, len(t)]
    rows = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b <= a:
            continue
        r = d.derive(t[a:b], seq[a:b], None if pid is None else np.asarray(pid)[a:b],
                     [mask[a:b]], [None if values is None else np.asarray(values)[a:b]] * len(aggs))
        d._check()
        rows += _rows(r, funcs)
    rows += _rows(d.close(policy), funcs)
    return rows


def _rows(r, funcs):  # noqa: ANN001, ANN202
    out = []
    for i in range(len(r)):
        row = {"part": int(r.part[i]), "ts": int(r.ts[i]), "te": int(r.te[i]),
               "known": int(r.known[i])}
        for f, agg, p in zip(funcs, [None] * len(funcs), r.prims):
            a, b = p[0][i], p[1][i]
            row[f] = (a / b if b else None) if f == "avg" else (a.item() if hasattr(a, "item") else a)
            _ = agg
        out.append(row)
    return out


def test_speed_over_70_worked_example() -> None:
    """Speed > 70 from t = 2..9 and <= 70 at t = 1 and 10: one situation [2, 10) (Sec. 5.4.1)."""
    t = np.arange(1, 12)
    speed = np.array([60, 75, 80, 90, 85, 72, 71, 88, 79, 65, 50])
    rows = derive_all(t, speed > 70, min_dur=4, max_dur=30)
    assert [(r["ts"], r["te"]) for r in rows] == [(2, 10)]
    # duration bounds are inclusive and exclude shorter / longer phases
    assert derive_all(t, speed > 70, min_dur=8) != []
    assert derive_all(t, speed > 70, min_dur=9) == []
    assert derive_all(t, speed > 70, max_dur=8) != []
    assert derive_all(t, speed > 70, max_dur=7) == []


def test_every_batch_split_gives_the_same_situations() -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, 40))
        t = np.cumsum(rng.integers(1, 3, n))
        mask = rng.random(n) < 0.6
        v = rng.normal(size=n)
        funcs = ("first", "last", "count", "sum", "avg", "min", "max")
        whole = derive_all(t, mask, values=v, funcs=funcs, policy="close")
        for _ in range(5):
            cuts = sorted(rng.integers(0, n + 1, size=int(rng.integers(1, 5))).tolist())
            split = derive_all(t, mask, values=v, funcs=funcs, cuts=cuts, policy="close")
            assert split == whole          # bit for bit, float sums included
        # reference: per-event loop
        ref = []
        i = 0
        while i < n:
            if mask[i]:
                j = i
                while j < n and mask[j]:
                    j += 1
                te = int(t[j]) if j < n else int(t[-1]) + 1
                vals = v[i:j]
                ref.append({"part": 0, "ts": int(t[i]), "te": te, "known": int(t[i]),
                            "first": vals[0], "last": vals[-1], "count": len(vals),
                            "sum": vals.sum(), "avg": vals.mean(), "min": vals.min(),
                            "max": vals.max()})
                i = j
            else:
                i += 1
        assert _approx(whole) == _approx(ref)


def _approx(rows: list[dict]) -> list[dict]:
    return [{k: round(float(v), 9) if isinstance(v, float | np.floating) else v
             for k, v in r.items()} for r in rows]


def test_partitions_are_derived_independently() -> None:
    t = np.arange(12)
    pid = np.array([0, 1] * 6)
    mask = np.array([1, 1, 1, 0, 1, 1, 0, 1, 0, 1, 0, 0], bool)
    rows = derive_all(t, mask, pid=pid, cuts=(5,))
    got = sorted((r["part"], r["ts"], r["te"]) for r in rows)
    # partition 0 events at t=0,2,4,6,8,10: mask 1,1,1,0,0,0 -> [0,6)
    # partition 1 events at t=1,3,5,7,9,11: mask 1,0,1,1,1,0 -> [1,3), [5,11)
    assert got == [(0, 0, 6), (1, 1, 3), (1, 5, 11)]


def test_degenerate_runs_at_one_timestamp_are_dropped() -> None:
    # events at t=5 (true) and t=5 (false): the run [5, 5) is no situation
    rows = derive_all([4, 5, 5, 6, 7], [0, 1, 0, 1, 0])
    assert [(r["ts"], r["te"]) for r in rows] == [(6, 7)]


@pytest.mark.parametrize("policy", ["drop", "close"])
def test_end_of_input_policy(policy: str) -> None:
    rows = derive_all([1, 2, 3, 4], [0, 1, 1, 1], policy=policy)
    if policy == "drop":
        assert rows == []
    else:
        assert [(r["ts"], r["te"]) for r in rows] == [(2, 5)]


def test_known_times() -> None:
    t = np.arange(0, 20)
    mask = (t >= 3) & (t < 15)
    # plain: known at its start
    rows = derive_all(t, mask, with_open=True)
    assert [(r["ts"], r["te"], r["known"]) for r in rows] == [(3, 15, 3)]
    # AT LEAST 5: known at the first event k with k + 1 - ts >= 5, i.e. k = 7
    rows = derive_all(t, mask, with_open=True, min_dur=5, cuts=(5, 6, 9))
    assert [(r["ts"], r["te"], r["known"]) for r in rows if r["te"] != INF] == [(3, 15, 7)]
    # while open, the batches report it unknown (INF) until the deferred start is reached
    assert [r["known"] for r in rows if r["te"] == INF] == [INF, INF, 7]
    # AT MOST: known at its end
    rows = derive_all(t, mask, with_open=True, max_dur=30)
    assert [(r["ts"], r["te"], r["known"]) for r in rows] == [(3, 15, 15)]
    # open at the end of a batch: reported open (te = INF) in low-latency mode
    d = Deriver([None], [None], [], with_open=True)
    r = d.derive(t[:8], t[:8], None, [mask[:8]], [])
    assert r.te.tolist() == [INF] and r.known_new.tolist() == [True]
    r = d.derive(t[8:], t[8:], None, [mask[8:]], [])
    assert r.te.tolist() == [15] and r.known_new.tolist() == [False]


def test_operator_keeps_time_steps_whole() -> None:
    """Equal timestamps split across pushes behave as if they arrived together."""
    from replaydb.operators.expr import Column
    from replaydb.operators.tpstream import Constraint, SituationDef, TPStream, TPStreamConfig

    t = np.array([1, 2, 3, 3, 3, 4, 5, 6], np.int64)
    a = np.array([0, 1, 1, 1, 0, 0, 1, 0], bool)
    b = np.array([0, 0, 0, 0, 1, 1, 1, 0], bool)
    tab = pa.table({"t": t, "seq": np.arange(8, dtype=np.int64), "a": a, "b": b})
    cfg = TPStreamConfig(situations=(SituationDef("A", Column("a")), SituationDef("B", Column("b"))),
                         constraints=(Constraint("A", "B", ("meets",)),), window=100)
    outs = []
    for size in (1, 2, 3, 8):
        op = TPStream(cfg, tab.schema)
        for bt in tab.to_batches(max_chunksize=size):
            op.push(bt)
        op.flush()
        outs.append(op.results().to_pylist())
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert [(r["A_ts"], r["A_te"], r["B_ts"], r["B_te"]) for r in outs[0]] == [(2, 3, 3, 6)]
