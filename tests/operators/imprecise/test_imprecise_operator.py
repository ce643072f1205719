"""Imprecise pattern operator: strategy edge cases, valid intervals, kernels vs reference,
input validation, snapshot/restore, intervals, state caps and a seeded stress test."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.errors import DataError, OperatorError, StateCapExceeded
from replaydb.operators.imprecise import (
    Component,
    ImpreciseConfig,
    ImprecisePatternOperator,
)
from replaydb.operators.imprecise.confidence import chain_confidence, next_confidence
from replaydb.operators.imprecise.intervals import feasible_partial, valid_intervals
from replaydb.operators.imprecise.kernels import confidence_enumerate_many, confidence_many
from replaydb.operators.imprecise.oracle import OracleEvent, events_table, possible_worlds
from replaydb.planner.lang.imprecise import bind, parse

RUNNERS = [("event", "query_order"), ("event", "any_state"), ("event", "selectivity"),
           ("point", "query_order")]


def E(seq, lo, hi, type_, v=0, k=0, weights=None):
    return OracleEvent(seq, lo, hi, type_, {"v": v, "k": k}, weights)


def run_all(events, text, **kw):
    """Results of every framework/method (exact mode) as {runner: [(sig, conf, t0, t1)]}."""
    table = events_table(events, attrs=("v", "k"))
    out = {}
    for fw, meth in RUNNERS:
        op = bind(parse(text), table.schema, None, framework=fw, method=meth, exact=True, **kw)
        rows = op.process(table).to_pylist()
        out[(fw, meth)] = [(tuple(r["signature"]), Fraction(r["confidence_exact"]),
                            r["t_start"], r["t_end"]) for r in rows]
    first = next(iter(out.values()))
    for key, rows in out.items():
        assert rows == first, (key, rows, first)
    return first


def oracle(events, text):
    table = events_table(events, attrs=("v", "k"))
    cfg = bind(parse(text), table.schema, None).cfg
    return {k: v for k, v in possible_worlds(events, cfg).items()}


# --------------------------------------------------------------------------- strategies
def test_precise_timestamps_reduce_to_sase_semantics():
    """Paper 003 section 2.1: a, b1, b2, c, d - any-match finds (a,b1,c,d) and (a,b2,c,d),
    next-match only (a,b1,c,d); points make every confidence 1."""
    evs = [E(1, 1, 1, "A"), E(2, 2, 2, "B"), E(3, 3, 3, "B"), E(4, 4, 4, "C"), E(5, 5, 5, "D")]
    base = "PATTERN SEQ(A a, B b, C c, D d) WHERE {}(a, b, c, d) WITHIN 10"
    assert run_all(evs, base.format("skip_till_any_match")) == [
        ((1, 2, 4, 5), 1, 1, 5), ((1, 3, 4, 5), 1, 1, 5)]
    assert run_all(evs, base.format("skip_till_next_match")) == [((1, 2, 4, 5), 1, 1, 5)]


def test_next_match_ties_select_every_candidate_at_the_earliest_instant():
    evs = [E(1, 1, 1, "A"), E(2, 3, 3, "B"), E(3, 3, 3, "B"), E(4, 4, 4, "B")]
    text = "PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) WITHIN 10"
    assert run_all(evs, text) == [((1, 2), 1, 1, 3), ((1, 3), 1, 1, 3)]


def test_nelt_example_of_figure_2c():
    """a1 ends at 4; b4 = [5, 7] starts after it and ends first: NELT(a1) = 7, so b6 = [8, 9]
    can never be a1's next b, while b2, b3 (overlapping a1) and b5 (after a1) can."""
    evs = [E(1, 1, 4, "A"), E(2, 2, 3, "B"), E(3, 3, 5, "B"), E(4, 5, 7, "B"), E(5, 5, 8, "B"),
           E(6, 8, 9, "B")]
    text = "PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) WITHIN 20"
    got = run_all(evs, text)
    assert [g[0] for g in got] == [(1, 2), (1, 3), (1, 4), (1, 5)]
    truth = oracle(evs, text)
    assert {g[0]: (g[1], g[2], g[3]) for g in got} == truth
    assert (1, 6) not in truth


def test_an_event_is_not_used_twice():
    one = [E(1, 0, 3, "A")]
    assert run_all(one, "PATTERN SEQ(A a, A b) WITHIN 10") == []
    two = [E(1, 0, 1, "A"), E(2, 0, 1, "A")]
    got = run_all(two, "PATTERN SEQ(A a, A b) WITHIN 10")
    assert got == [((1, 2), Fraction(1, 4), 0, 1), ((2, 1), Fraction(1, 4), 0, 1)]


def test_window_boundary_is_exclusive():
    evs = [E(1, 0, 0, "A"), E(2, 4, 4, "B"), E(3, 5, 5, "B")]
    assert [g[0] for g in run_all(evs, "PATTERN SEQ(A a, B b) WITHIN 5")] == [(1, 2)]
    assert run_all(evs, "PATTERN SEQ(A a, B b) WITHIN 4") == []
    # a window shorter than the pattern can hold no match
    assert run_all([E(1, 0, 9, "A"), E(2, 0, 9, "A")], "PATTERN SEQ(A a, A b) WITHIN 1") == []


def test_valid_intervals_of_figure_3():
    vlb, rub, vub, ok = valid_intervals(np.array([[1, 3, 3]]), np.array([[5, 5, 5]]), 100)
    assert vlb.tolist() == [[1, 3, 4]] and rub.tolist() == [[3, 4, 5]] and ok.all()
    # Fig. 3(c): a1, b5, c6 with W = 4 - c6's valid upper bound 5 is below its lower bound 6
    vlb, rub, vub, ok = valid_intervals(np.array([[1, 2, 6]]), np.array([[3, 3, 7]]), 4)
    assert vlb.tolist() == [[1, 2, 6]] and rub.tolist() == [[2, 3, 7]]
    assert vub[0, 2] == 5 and not ok[0]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.data())
def test_valid_intervals_decide_feasibility_exactly(length, window, data):
    lo = [data.draw(st.integers(0, 8)) for _ in range(length)]
    hi = [x + data.draw(st.integers(0, 3)) for x in lo]
    assigned = [data.draw(st.booleans()) for _ in range(length)]
    chains = [ts for ts in itertools.product(*[range(a, b + 1) for a, b in zip(lo, hi)])
              if all(x < y for x, y in zip(ts, ts[1:])) and ts[-1] - ts[0] < window]
    vlb, _, vub, ok = valid_intervals(np.array([lo]), np.array([hi]), window)
    assert bool(ok[0]) == bool(chains)
    if chains:  # every point match lies in the valid intervals
        for j in range(length):
            assert min(c[j] for c in chains) >= vlb[0, j] and max(c[j] for c in chains) <= vub[
                0, j]
    full = feasible_partial(np.array([lo]), np.array([hi]), np.ones((1, length), bool), window)
    assert bool(full[0]) == bool(chains)
    # a partial assignment that can be completed is never rejected
    part = feasible_partial(np.array([lo]), np.array([hi]), np.array([assigned]), window)
    if chains:
        assert part[0]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.integers(2, 40), st.booleans(), st.data())
def test_compiled_kernel_matches_reference(length, window, weighted, data):
    """Wider intervals than the oracle can afford: the Numba DP against the generic one."""
    lo = np.array([data.draw(st.integers(-20, 20)) for _ in range(length + 3)], np.int64)
    hi = lo + np.array([data.draw(st.integers(0, 18)) for _ in range(length + 3)], np.int64)
    woff = np.full(lo.size, -1, np.int64)
    wflat, cflat = np.zeros(0), np.zeros(0)
    pts = []
    for e in range(lo.size):
        n = int(hi[e] - lo[e] + 1)
        if weighted:
            w = np.array([data.draw(st.integers(0, 3)) for _ in range(n)], float)
            w[0] = w[-1] = 1.0
            w /= w.sum()
            woff[e] = wflat.size
            wflat = np.concatenate([wflat, w])
            cflat = np.concatenate([cflat, np.cumsum(w)])
            pts.append([(int(lo[e]) + i, float(x)) for i, x in enumerate(w) if x > 0])
        else:
            pts.append([(t, 1.0 / n) for t in range(int(lo[e]), int(hi[e]) + 1)])
    ev = np.arange(length, dtype=np.int64)[None, :]
    vlb, _, vub, ok = valid_intervals(lo[ev], hi[ev], window)
    spoilers = list(range(length, lo.size))
    use_gaps = length > 1 and data.draw(st.booleans())
    gap_ptr = np.zeros(length + 1, np.int64)
    gap_ev = np.zeros(0, np.int64)
    spoil_ref = []
    several = False
    if use_gaps:
        lists = [[] for _ in range(length)]
        for c in spoilers:
            gaps = data.draw(st.sets(st.integers(1, length - 1), min_size=1))
            several |= len(gaps) > 1
            for g in gaps:
                lists[g].append(c)
            spoil_ref.append((pts[c], frozenset(gaps)))
        gap_ptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
        gap_ev = np.array([c for x in lists for c in x], np.int64)
    if several:
        conf, r0, r1 = confidence_enumerate_many(ev, vlb, vub, lo, hi, woff, wflat, cflat,
                                                 window, gap_ptr, gap_ev)
    else:
        conf, r0, r1 = confidence_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window,
                                       use_gaps, gap_ptr, gap_ev)
        if use_gaps:  # the enumeration agrees with the DP when every spoiler has one gap
            e = confidence_enumerate_many(ev, vlb, vub, lo, hi, woff, wflat, cflat, window,
                                          gap_ptr, gap_ev)
            assert e[0][0] == pytest.approx(conf[0], rel=1e-9, abs=1e-15)
            assert (e[0][0] == 0) or (e[1][0], e[2][0]) == (r0[0], r1[0])
    comp = [[(t, p) for t, p in pts[j] if vlb[0, j] <= t <= vub[0, j]] for j in range(length)]
    if not ok[0]:
        assert conf[0] == 0
        return
    if use_gaps:
        c, a, b = next_confidence(comp, window, spoil_ref)
    else:
        c, a, b = chain_confidence(comp, window)
    assert conf[0] == pytest.approx(c, rel=1e-9, abs=1e-15)
    if c > 0:
        assert (r0[0], r1[0]) == (a, b)


def test_interior_zero_weights_are_impossible_instants():
    evs = [E(1, 0, 2, "A", weights=(1, 0, 1)), E(2, 1, 1, "B")]
    table = events_table(evs, attrs=("v", "k"), pmf_column="w")
    text = "PATTERN SEQ(A a, B b) WITHIN 10"
    truth = possible_worlds(evs, bind(parse(text), table.schema, None, pmf_col="w").cfg)
    assert truth == {(1, 2): (Fraction(1, 2), 0, 1)}
    for fw, meth in RUNNERS:
        op = bind(parse(text), table.schema, None, pmf_col="w", framework=fw, method=meth,
                  exact=True)
        rows = op.process(table).to_pylist()
        assert [(r["signature"], r["confidence_exact"], r["t_start"], r["t_end"])
                for r in rows] == [([1, 2], "1/2", 0, 1)]


# --------------------------------------------------------------------------- input checks
def _table(rows, **extra):
    cols = {"t": [r[0] for r in rows], "seq": list(range(len(rows))),
            "type": [r[2] for r in rows], "t_lower": [r[0] for r in rows],
            "t_upper": [r[1] for r in rows], "v": [0] * len(rows)}
    cols.update(extra)
    return pa.table(cols)


def _op(table, **kw):
    return bind(parse("PATTERN SEQ(A a, B b) WITHIN 10"), table.schema, None, **kw)


def test_input_errors_name_row_and_column():
    t = _table([(0, 2, "A"), (1, 0, "B")])
    with pytest.raises(DataError, match="empty") as ei:
        _op(t).push(t)
    assert (ei.value.row, ei.value.column) == (1, "t_upper")
    t = _table([(3, 5, "A"), (1, 4, "B")])
    with pytest.raises(DataError, match="ordered by lower bound") as ei:
        _op(t).push(t)
    assert (ei.value.row, ei.value.column) == (1, "t_lower")
    op = _op(t, max_uncertainty=3)
    op.push(t)  # arrival assumption holds: 3 <= 4
    late = _table([(0, 2, "B")])
    with pytest.raises(DataError, match="arrival assumption") as ei:
        op.push(late)
    assert ei.value.row == 0
    with pytest.raises(DataError, match="wider than max_uncertainty"):
        _op(t, max_uncertainty=1).push(t)
    op = _op(t)
    op.push(t.slice(0, 1))
    with pytest.raises(DataError, match="earlier batch"):
        op.push(t.slice(1))
    w = pa.array([[1, 1, 1], [1]], pa.list_(pa.int64()))
    bad_len = _table([(0, 2, "A"), (1, 2, "B")], w=w)
    with pytest.raises(DataError, match="2 instants") as ei:
        _op(bad_len, pmf_col="w").push(bad_len)
    assert (ei.value.row, ei.value.column) == (1, "w")
    neg = _table([(0, 1, "A")], w=pa.array([[1, -1]], pa.list_(pa.int64())))
    with pytest.raises(DataError, match="non-negative"):
        _op(neg, pmf_col="w").push(neg)
    zero = _table([(0, 1, "A")], w=pa.array([[0, 0]], pa.list_(pa.int64())))
    with pytest.raises(DataError, match="sum to zero"):
        _op(zero, pmf_col="w").push(zero)
    nul = pa.table({"t": [0], "seq": [0], "type": ["A"], "t_lower": pa.array([None], pa.int64()),
                    "t_upper": [1], "v": [0]})
    with pytest.raises(DataError, match="null"):
        _op(nul).push(nul)
    with pytest.raises(DataError, match="no column 't_upper'"):
        _op(t).push(t.drop(["t_upper"]))


def test_config_validation():
    comps = (Component("a", "A"),)
    with pytest.raises(OperatorError, match="window"):
        ImpreciseConfig(components=comps, window=0)
    with pytest.raises(OperatorError, match="strategy"):
        ImpreciseConfig(components=comps, window=3, strategy="strict_contiguity")
    with pytest.raises(OperatorError, match="duplicate"):
        ImpreciseConfig(components=comps * 2, window=3)
    with pytest.raises(OperatorError, match="framework"):
        ImpreciseConfig(components=comps, window=3, framework="gpu")
    op = ImprecisePatternOperator(ImpreciseConfig(components=comps, window=3))
    out = op.process(_table([(0, 1, "A"), (2, 2, "B")]))
    assert out.column("signature").to_pylist() == [[0]]
    assert out.column("confidence").to_pylist() == [1.0]


# --------------------------------------------------------------------------- lifecycle
def _random_stream(rng, n, types="AB", width=4, ordered=True):
    evs, lo = [], 0
    for i in range(n):
        lo += rng.randint(0, 2)
        evs.append(E(i, lo, lo + rng.randint(0, width), rng.choice(types), v=rng.randint(0, 5)))
    if ordered:
        return evs, None
    key = [rng.randint(e.lo, e.hi) for e in evs]
    order = sorted(range(n), key=lambda i: key[i])
    return [evs[i] for i in order], [key[i] for i in order]


@pytest.mark.parametrize("framework, method", RUNNERS)
@pytest.mark.parametrize("strategy", ["skip_till_any_match", "skip_till_next_match"])
def test_snapshot_restore_continues_identically(framework, method, strategy):
    rng = random.Random(7)
    evs, _ = _random_stream(rng, 120)
    table = events_table(evs)
    text = f"PATTERN SEQ(A a, B b, A c) WHERE {strategy}(a, b, c) {{ c.v >= a.v }} WITHIN 12"

    def fresh():
        return bind(parse(text), table.schema, None, framework=framework, method=method)

    op = fresh()
    op.push(table.slice(0, 50))
    first = op.results()
    snap = op.snapshot()
    op.push(table.slice(50, 40))
    op.push(table.slice(90))
    op.flush()
    rest = op.results()
    other = fresh()
    other.restore(snap)
    other.push(table.slice(50))
    other.flush()
    assert other.results().equals(rest)
    op.restore(snap)  # back in time on the same object
    op.push(table.slice(50))
    op.flush()
    assert op.results().equals(rest)
    whole = fresh().process(table)
    split = pa.concat_tables([first, rest])
    if framework == "event":
        assert split.equals(whole)
    else:  # the point-based sums are grouped per block: equal up to float rounding
        assert split.drop(["confidence"]).equals(whole.drop(["confidence"]))
        np.testing.assert_allclose(split["confidence"].to_numpy(), whole["confidence"].to_numpy(),
                                   rtol=1e-12)
    with pytest.raises(OperatorError):
        bind(parse("PATTERN SEQ(A a) WITHIN 3"), table.schema, None).restore({"operator": "x"})


def test_end_interval_keeps_matches_inside_intervals():
    evs = [E(0, 0, 1, "A"), E(1, 1, 2, "B"), E(2, 3, 4, "A"), E(3, 4, 5, "B")]
    table = events_table(evs)
    op = bind(parse("PATTERN SEQ(A a, B b) WITHIN 10"), table.schema, None)
    op.push(table.slice(0, 2))
    op.end_interval()
    op.push(table.slice(2))
    op.flush()
    assert op.results().column("signature").to_pylist() == [[0, 1], [2, 3]]
    assert op.counters.intervals == 1


@pytest.mark.parametrize("framework, method", RUNNERS)
def test_state_cap_is_enforced(framework, method):
    rng = random.Random(3)
    evs, _ = _random_stream(rng, 400, types="A", width=6)
    table = events_table(evs)
    op = bind(parse("PATTERN SEQ(A a, A b, A c) WITHIN 30"), table.schema, None,
              framework=framework, method=method, state_cap=40)
    with pytest.raises(StateCapExceeded) as ei:
        op.process(table)
    assert ei.value.cap_name == "state_cap" and ei.value.cap == 40


def test_multi_gap_enumeration_cap():
    """Eq. 4 enumeration is capped: every A spoils both gaps of SEQ(A, A, A)."""
    evs = [E(i, 0, 3, "A") for i in range(6)]
    table = events_table(evs)
    op = bind(parse("PATTERN SEQ(A a, A b, A c) WHERE skip_till_next_match(a, b, c) "
                    "WITHIN 10"), table.schema, None, exact=True, max_enumeration=3)
    with pytest.raises(StateCapExceeded) as ei:
        op.process(table)
    assert ei.value.cap_name == "max_enumeration"


@pytest.mark.parametrize("strategy", ["skip_till_any_match", "skip_till_next_match"])
@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("pred", ["b.v != a.v", "b.v % 2 = 0"])
def test_seeded_stress_frameworks_agree_on_longer_streams(strategy, ordered, pred):
    """Too many worlds for the oracle: every framework and method, checked after every push,
    must report the same matches; batches of random sizes. (A cross-event condition takes the
    any-state engine's NumPy loop, a single-event one its compiled loop.)"""
    rng = random.Random(11 if ordered else 12)
    evs, key = _random_stream(rng, 260, types="ABC", width=5, ordered=ordered)
    table = events_table(evs, order_key=key)
    text = (f"PATTERN SEQ(A a, B b, C c) WHERE {strategy}(a, b, c) {{ {pred} }} "
            "WITHIN 9")
    results = {}
    for fw, meth in RUNNERS:
        op = bind(parse(text), table.schema, None, framework=fw, method=meth,
                  max_uncertainty=None if ordered else 5)
        pos = 0
        while pos < table.num_rows:
            k = rng.randint(1, 40)
            op.push(table.slice(pos, k))
            op._check()
            pos += k
        op.flush()
        op._check()
        res = op.results()
        results[(fw, meth)] = list(zip(res["signature"].to_pylist(), res["t_start"].to_pylist(),
                                       res["t_end"].to_pylist(),
                                       np.round(res["confidence"].to_numpy(), 9).tolist()))
    ref = results[("event", "query_order")]
    assert len(ref) > 20
    for key_, rows in results.items():
        assert rows == ref, key_


def test_live_use_with_strings_and_return_attributes():
    table = pa.table({"t": [0, 1, 2], "seq": [10, 11, 12], "type": ["Start", "Cpu", "Cpu"],
                      "t_lower": [0, 1, 2], "t_upper": [2, 3, 2],
                      "node": ["n1", "n1", "n2"], "load": [0.0, 97.5, 99.0]})
    q = parse("PATTERN SEQ(Start a, Cpu b) WHERE skip_till_any_match(a, b) "
              "{ b.node = a.node AND b.load > 95 } WITHIN 5 RETURN a.node, b.load")
    op = bind(q, table.schema, None)
    op.push(table)
    assert op.results().num_rows == 0  # not final yet: a.upper + W - 1 = 6 > horizon 2
    op.flush()
    rows = op.results().to_pylist()
    # b1 = [1, 3] follows a = [0, 2] in 6 of the 9 equally likely worlds; b2 is on node n2
    assert rows == [{"t": 3, "t_start": 0, "t_end": 3, "confidence": pytest.approx(2 / 3),
                     "signature": [10, 11], "a_node": "n1", "b_load": 97.5}]


@pytest.mark.parametrize("framework, method", RUNNERS)
def test_trimmed_intervals_do_not_raise_the_pruning_bound(framework, method):
    """x's pmf puts all weight on its last instant (trimmed to [5, 5]) but its declared lower
    bound is 0, so a later event may still start at 1 (input ordered by declared lower bound);
    the run holding x must survive until then."""
    evs = [E(0, 0, 5, "B", weights=(0, 0, 0, 0, 0, 1)), E(1, 1, 1, "A", weights=(1,))]
    table = events_table(evs, attrs=("v", "k"), pmf_column="w")
    op = bind(parse("PATTERN SEQ(A a, B b) WITHIN 10"), table.schema, None, pmf_col="w",
              framework=framework, method=method)
    op.push(table.slice(0, 1))
    op.push(table.slice(1))
    op.flush()
    assert op.results().column("signature").to_pylist() == [[1, 0]]


def test_next_confidence_of_a_component_without_points_is_zero():
    """A valid interval can hold only zero-weight instants: that component has no point, and
    the skip-till-next reference gives no chain (as the chain reference does), not an error."""
    from replaydb.operators.imprecise.confidence import chain_confidence, next_confidence

    comp = [[(0, 1.0)], [], [(3, 0.5), (4, 0.5)]]
    spoilers = [([(1, 1.0)], frozenset({1})), ([(2, 1.0)], frozenset({1, 2}))]
    assert next_confidence(comp, 5, spoilers) == (0, None, None)
    assert chain_confidence(comp, 5) == (0, None, None)
