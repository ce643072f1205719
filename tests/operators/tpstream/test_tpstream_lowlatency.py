"""Low-latency mode: same matches as normal mode, each at its earliest detection time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.operators.expr import Column
from replaydb.operators.tpstream import (
    Constraint,
    SituationDef,
    TPStream,
    TPStreamConfig,
    oracle,
)
from replaydb.operators.tpstream.lowlatency import detection_time, trigger_streams
from replaydb.operators.tpstream.relations import RELATIONS, T_RMIN
from replaydb.operators.tpstream.testing import (
    random_config,
    random_events,
    split_batches,
    to_table,
)

INF = float("inf")


def run(cfg: TPStreamConfig, tab: pa.Table, rng: np.random.Generator | None = None) -> list[dict]:
    op = TPStream(cfg, tab.schema)
    for b in (split_batches(tab, rng) if rng is not None else [tab]):
        op.push(b)
    op.flush()
    return op.results().to_pylist()


case = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1), "S": st.integers(2, 4), "n": st.integers(1, 70),
    "parts": st.integers(1, 3), "partitioned": st.booleans(),
})


def _compare(c: dict) -> None:
    rng = np.random.default_rng(c["seed"])
    cfg_n = random_config(rng, c["S"], mode="normal", partitioned=c["partitioned"],
                          with_returns=False)
    ev = random_events(rng, c["n"], 4, n_parts=c["parts"])
    tab = to_table(ev)
    cfg_l = TPStreamConfig(**{**cfg_n.__dict__, "mode": "low_latency"})
    normal = run(cfg_n, tab, np.random.default_rng(c["seed"]))
    low = run(cfg_l, tab, np.random.default_rng(c["seed"] + 1))
    sits = oracle.derive(ev, cfg_n)
    names = cfg_n.names
    pk = cfg_n.partition_by

    def members(row: dict) -> list[dict]:
        key = tuple(row[c] for c in pk)
        out = []
        for j, nm in enumerate(names):
            out.append(next(s for s in sits[key][j] if s["ts"] == row[f"{nm}_ts"]))
        return out

    relm = np.array(cfg_n.relation_matrix())
    n_ident = {}
    for r in normal:
        ident = (tuple(r[c] for c in pk), tuple(r[f"{n}_ts"] for n in names))
        n_ident[ident] = r["detection_time"]
    low_fin = {}
    for r in low:
        ms = members(r)
        # detection at t_pmin, computed from the final endpoints and known times
        t_p = detection_time(relm, [(m["ts"], m["te"], m["known"]) for m in ms])
        assert t_p == r["detection_time"], (r, [(m["ts"], m["te"], m["known"]) for m in ms])
        # reported ends are the known ones; ongoing members end later than the detection
        for m, nm in zip(ms, names):
            if r[f"{nm}_te"] is None:
                assert m["te"] > r["detection_time"]
            else:
                assert r[f"{nm}_te"] == m["te"] <= r["detection_time"]
        tes = [m["te"] for m in ms]
        if INF not in tes and max(tes) - min(m["ts"] for m in ms) <= cfg_n.window:
            ident = (tuple(r[c] for c in pk), tuple(m["ts"] for m in ms))
            low_fin[ident] = r["detection_time"]
    assert set(low_fin) == set(n_ident)
    for ident, t in low_fin.items():
        assert t <= n_ident[ident]


@settings(max_examples=150)
@given(case)
def test_low_latency_equals_normal_and_detects_at_t_pmin(c: dict) -> None:
    _compare(c)


@pytest.mark.slow
@settings(max_examples=2000)
@given(case)
def test_low_latency_equals_normal_many(c: dict) -> None:
    _compare(c)


# ----------------------------------------------------------------------------- worked cases
def stream(n: int, **intervals: list[tuple[int, int]]) -> pa.Table:
    """Events at t = 0..n-1; column ``a`` true within each [ts, te) of ``intervals['a']``."""
    cols = {"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64)}
    for name, ivs in intervals.items():
        x = np.zeros(n, bool)
        for s, e in ivs:
            x[s:e] = True
        cols[name] = x
    return pa.table(cols)


def cfg2(rel: str, window: int = 1000, mode: str = "low_latency", **kw: object) -> TPStreamConfig:
    return TPStreamConfig(
        situations=(SituationDef("A", Column("a"), kw.get("a_min"), kw.get("a_max")),
                    SituationDef("B", Column("b"), kw.get("b_min"), kw.get("b_max"))),
        constraints=(Constraint("A", "B", tuple(rel.split(";"))),), window=window, mode=mode)


PAIRS = {  # one configuration per relation: (A interval, B interval)
    "before": ((2, 5), (8, 12)), "after": ((8, 12), (2, 5)), "meets": ((2, 5), (5, 9)),
    "met-by": ((5, 9), (2, 5)), "overlaps": ((2, 7), (4, 10)), "overlapped-by": ((4, 10), (2, 7)),
    "starts": ((2, 5), (2, 9)), "started-by": ((2, 9), (2, 5)), "during": ((4, 6), (2, 9)),
    "contains": ((2, 9), (4, 6)), "finishes": ((2, 9), (4, 9)), "finished-by": ((4, 9), (2, 9)),
    "equals": ((3, 8), (3, 8)),
}


@pytest.mark.parametrize("rel", RELATIONS)
def test_each_relation_is_detected_at_t_rmin(rel: str) -> None:
    (a_s, a_e), (b_s, b_e) = PAIRS[rel]
    tab = stream(16, a=[(a_s, a_e)], b=[(b_s, b_e)])
    out = run(cfg2(rel), tab)
    assert len(out) == 1
    sym, end = T_RMIN[rel]
    expect = {("A", "ts"): a_s, ("A", "te"): a_e, ("B", "ts"): b_s, ("B", "te"): b_e}[(sym, end)]
    assert out[0]["detection_time"] == expect
    normal = run(cfg2(rel, mode="normal"), tab)
    assert normal[0]["detection_time"] == max(a_e, b_e)


def test_prefix_group_is_detected_at_the_second_start() -> None:
    tab = stream(16, a=[(2, 7)], b=[(4, 10)])
    out = run(cfg2("overlaps;finishes;contains"), tab)     # the whole A.ts < B.ts group
    assert [r["detection_time"] for r in out] == [4]
    assert out[0]["A_te"] is None and out[0]["B_te"] is None
    out = run(cfg2("overlaps;contains"), tab)               # partial group: wait for A.te
    assert [r["detection_time"] for r in out] == [7]
    tab = stream(16, a=[(3, 7)], b=[(3, 10)])
    out = run(cfg2("starts;equals;started-by"), tab)
    assert [r["detection_time"] for r in out] == [3]


def test_duration_constraints_defer_detection() -> None:
    # A during B; B has AT LEAST 6: known at its deferred start ts + 6 - 1 = 7 > A.te = 5
    tab = stream(16, a=[(3, 5)], b=[(2, 12)])
    out = run(cfg2("during", b_min=6), tab)
    assert [r["detection_time"] for r in out] == [7]
    # AT MOST on B: only known at its end
    out = run(cfg2("during", b_max=20), tab)
    assert [r["detection_time"] for r in out] == [12]
    # B too long for AT MOST: no match in either mode
    assert run(cfg2("during", b_max=5), tab) == []
    assert run(cfg2("during", b_max=5, mode="normal"), tab) == []


def test_figure_5_4_pattern() -> None:
    """A before B AND A before C AND A before D AND C contains;finishes;meets D."""
    sits = tuple(SituationDef(n, Column(n.lower())) for n in "ABCD")
    cons = (Constraint("A", "B", ("before",)), Constraint("A", "C", ("before",)),
            Constraint("A", "D", ("before",)), Constraint("C", "D", ("contains", "finishes",
                                                                      "meets")))
    cfg = TPStreamConfig(situations=sits, constraints=cons, window=1000, mode="low_latency")
    # (a) D starts last, meets C: detected at D.ts although D's end comes much later
    tab = stream(40, a=[(1, 3)], c=[(5, 9)], b=[(6, 30)], d=[(9, 35)])
    out = run(cfg, tab)
    assert [r["detection_time"] for r in out] == [9]
    # (c) B and C both ongoing and unrelated; D ends inside C (contains): detected at D.te
    tab = stream(40, a=[(1, 3)], b=[(5, 30)], c=[(6, 30)], d=[(8, 12)])
    out = run(cfg, tab)
    assert [r["detection_time"] for r in out] == [12]
    assert out[0]["B_te"] is None and out[0]["C_te"] is None
    # (b) no false positive: C and D ongoing with the same temporary end must not "finish"
    tab = stream(40, a=[(1, 3)], b=[(5, 30)], c=[(6, 30)], d=[(8, 31)])
    assert run(cfg, tab) == []
    assert run(TPStreamConfig(**{**cfg.__dict__, "mode": "normal"}), tab) == []


def test_trigger_analysis() -> None:
    m = np.array(cfg2("before").relation_matrix())
    start, end = trigger_streams(m, ["start", "start"])
    assert start.tolist() == [False, True] and end.tolist() == [False, False]
    m = np.array(cfg2("overlaps").relation_matrix())
    start, end = trigger_streams(m, ["start", "start"])
    assert start.tolist() == [False, False] and end.tolist() == [True, False]
    m = np.array(cfg2("overlaps;finishes;contains").relation_matrix())
    start, end = trigger_streams(m, ["start", "start"])
    assert start.tolist() == [False, True] and end.tolist() == [True, True]
    start, end = trigger_streams(m, ["end", "deferred"])
    assert start.tolist() == [False, True] and end.tolist() == [True, True]


def test_partial_aggregates_of_ongoing_members() -> None:
    from replaydb.operators.tpstream import ReturnItem

    n = 20
    cols = {"t": np.arange(n, dtype=np.int64), "seq": np.arange(n, dtype=np.int64),
            "a": np.zeros(n, bool), "b": np.zeros(n, bool), "v": np.arange(n, dtype=np.float64)}
    cols["a"][2:5] = True
    cols["b"][8:15] = True
    tab = pa.table(cols)
    cfg = TPStreamConfig(
        situations=(SituationDef("A", Column("a")), SituationDef("B", Column("b"))),
        constraints=(Constraint("A", "B", ("before",)),), window=100, mode="low_latency",
        returns=(ReturnItem("sum", "B", "v", "s"), ReturnItem("count", "B", None, "c"),
                 ReturnItem("last", "B", "v", "l"), ReturnItem("max", "A", "v", "ma")))
    for batch_size in (1, 3, 20):
        op = TPStream(cfg, tab.schema)
        for b in tab.to_batches(max_chunksize=batch_size):
            op.push(b)
        op.flush()
        (r,) = op.results().to_pylist()
        assert r["detection_time"] == 8 and r["B_te"] is None
        assert (r["s"], r["c"], r["l"], r["ma"]) == (8.0, 1, 8.0, 4.0)
