"""Both frameworks (and every event-based method) against the possible-worlds oracle.

Random small streams (intervals of up to 4 instants, uniform / listed / triangular pmfs, ordered
by lower bound or in any order meeting the arrival assumption, pushed in random pieces) and
random queries (1-3 components, overlapping types, single-event and cross predicates, the
equivalence test, both strategies, windows 1-8). Exact mode must give exactly the oracle's
signatures, ranges and rational confidences; float mode the same signatures and ranges and
confidences within 1e-9.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replaydb.operators.imprecise.oracle import OracleEvent, events_table, possible_worlds
from replaydb.planner.lang.imprecise import bind, parse

VARS = ("a", "b", "c")
PREDICATES = [
    None,
    "{0}.v % 2 = 0",
    "{1}.v > {0}.v",
    "{0}.v < {1}.v",
    "{2}.v != {0}.v",
    "[k]",
    "{1}.v >= {0}.v AND {2}.v % 2 = 1",
    "{1}.k = 0 OR {0}.v = {1}.v",
]
RUNNERS = [("event", "query_order"), ("event", "any_state"), ("event", "selectivity"),
           ("point", "query_order")]


@st.composite
def scenario(draw, max_events: int = 6, max_worlds: int = 4096):
    n = draw(st.integers(1, max_events))
    pmf = draw(st.sampled_from(["uniform", "list", "triangular"]))
    lo = draw(st.integers(-6, 2))  # negative instants too
    events = []
    for i in range(n):
        lo += draw(st.integers(0, 3))
        width = draw(st.integers(0, 3))
        weights = None
        if pmf == "list":
            weights = tuple(draw(st.lists(st.integers(0, 3), min_size=width + 1,
                                          max_size=width + 1)))
            assume(any(weights))
        events.append(OracleEvent(
            seq=100 + i, lo=lo, hi=lo + width, type=draw(st.sampled_from("ABC")),
            attrs={"v": draw(st.integers(0, 4)), "k": draw(st.integers(0, 1))},
            weights=weights))
    l_ = draw(st.integers(1, 3))
    types = [draw(st.sampled_from("ABC")) for _ in range(l_)]
    pred = draw(st.sampled_from(PREDICATES))
    if pred is not None and max(map(int, re.findall(r"\{(\d)\}", pred)), default=0) >= l_:
        pred = None
    strategy = draw(st.sampled_from(["skip_till_any_match", "skip_till_next_match"]))
    window = draw(st.integers(1, 8))
    style = draw(st.sampled_from(["sase", "paper"]))
    comps = ", ".join(f"{t} {v}" for t, v in zip(types, VARS))
    vs = ", ".join(VARS[:l_])
    body = pred.format(*VARS) if pred else None
    if style == "sase":
        where = f"WHERE {strategy}({vs}) {{ {body or ''} }}"
    else:
        where = f"WHERE {'(' + body + ') AND ' if body else ''}{strategy}({vs})"
    text = f"PATTERN SEQ({comps}) {where} WITHIN {window}"
    ordered = draw(st.booleans())
    if ordered:
        arrival = list(range(n))
        key = [e.lo for e in events]
    else:
        points = [draw(st.integers(e.lo, e.hi)) for e in events]
        arrival = sorted(range(n), key=lambda i: (points[i], draw(st.integers(0, 3))))
        key = [points[i] for i in arrival]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    worlds = 1
    for e in events:
        worlds *= len(e.support())
    assume(worlds <= max_worlds)
    return events, text, pmf, arrival, key, ordered, cuts


def _run(events, text, pmf, arrival, key, ordered, cuts, framework, method, exact):
    arrived = [events[i] for i in arrival]
    table = events_table(arrived, order_key=key, attrs=("v", "k"),
                         pmf_column="w" if pmf == "list" else None)
    widths = max(e.hi - e.lo for e in events)
    op = bind(parse(text), table.schema, None, framework=framework, method=method,
              exact=exact, pmf_col="w" if pmf == "list" else None,
              pmf="triangular" if pmf == "triangular" else "uniform",
              max_uncertainty=None if ordered else widths)
    prev = 0
    for c in [*cuts, len(arrived)]:
        if c > prev:
            op.push(table.slice(prev, c - prev))
            op._check()
        prev = max(prev, c)
    op.flush()
    op._check()
    return op, op.results().to_pylist()


def _truth(events, text, pmf):
    table = events_table(events, attrs=("v", "k"), pmf_column="w" if pmf == "list" else None)
    op = bind(parse(text), table.schema, None,
              pmf_col="w" if pmf == "list" else None,
              pmf="triangular" if pmf == "triangular" else "uniform")
    return possible_worlds(events, op.cfg)


def _check_scenario(sc) -> None:
    events, text, pmf, arrival, key, ordered, cuts = sc
    truth = _truth(events, text, pmf)
    for framework, method in RUNNERS:
        for exact in (True, False):
            _, rows = _run(events, text, pmf, arrival, key, ordered, cuts, framework, method,
                           exact)
            got = {tuple(r["signature"]): r for r in rows}
            assert len(got) == len(rows), f"{framework}/{method}: duplicate signatures"
            assert set(got) == set(truth), (framework, method, exact, text, set(got),
                                            set(truth))
            for sig, (conf, t0, t1) in truth.items():
                r = got[sig]
                assert (r["t_start"], r["t_end"]) == (t0, t1), (framework, method, sig, text)
                assert r["t"] == t1
                if exact:
                    assert Fraction(r["confidence_exact"]) == conf, (framework, method, sig,
                                                                     text)
                assert r["confidence"] == pytest.approx(float(conf), rel=1e-9, abs=1e-12)
            shape = "triangular" if pmf == "triangular" else "uniform"
            last = {e.seq: e.support(shape)[-1][0] for e in events}
            keys = [(last[r["signature"][0]], r["signature"]) for r in rows]
            assert keys == sorted(keys), "results not in (first event key, signature) order"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(scenario())
def test_frameworks_agree_with_possible_worlds(sc):
    _check_scenario(sc)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.filter_too_much])
@given(scenario(max_events=7, max_worlds=16384))
def test_frameworks_agree_with_possible_worlds_many(sc):
    _check_scenario(sc)


@st.composite
def same_type_scenario(draw):
    """One event type, three components and no predicate under skip-till-next: an event can
    spoil several gaps of a match, and can lie at the last component's instant (where it does
    not spoil it: ties are candidates too)."""
    n = draw(st.integers(3, 6))
    lo = 0
    events = []
    for i in range(n):
        lo += draw(st.integers(0, 2))
        width = draw(st.integers(0, 3))
        events.append(OracleEvent(seq=100 + i, lo=lo, hi=lo + width, type="A",
                                  attrs={"v": 0, "k": 0}, weights=None))
    text = (f"PATTERN SEQ(A a, A b, A c) WHERE skip_till_next_match(a, b, c) {{ }} "
            f"WITHIN {draw(st.integers(3, 9))}")
    return events, text, "uniform", list(range(n)), [e.lo for e in events], True, []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(same_type_scenario())
def test_spoilers_of_several_gaps_agree_with_possible_worlds(sc):
    _check_scenario(sc)


def test_figure_1_example():
    """Paper 003 Fig. 1: a1 [1,5], c2 [3,5], b3 [3,5], c4 [4,8], SEQ(A,B,C) within 4.

    The text's 15/225 for (a1, b3, c2) is not reproducible (see the notes); the worlds give
    25/225 under skip-till-any and the range [1, 5] the paper states.
    """
    evs = [OracleEvent(1, 1, 5, "A", {"v": 0}), OracleEvent(2, 3, 5, "C", {"v": 0}),
           OracleEvent(3, 3, 5, "B", {"v": 0}), OracleEvent(4, 4, 8, "C", {"v": 0})]
    text = "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) WITHIN 4 seconds"
    truth = _truth(evs, text.replace(" seconds", ""), "uniform")
    assert truth[(1, 3, 2)] == (Fraction(25, 225), 1, 5)
    assert truth[(1, 3, 4)] == (Fraction(27, 225), 1, 7)
    table = events_table(evs)
    for framework, method in RUNNERS:
        op = bind(parse(text), table.schema, "s", framework=framework, method=method,
                  exact=True)
        rows = op.process(table).to_pylist()
        assert [(tuple(r["signature"]), r["confidence_exact"], r["t_start"], r["t_end"])
                for r in rows] == [((1, 3, 2), "1/9", 1, 5), ((1, 3, 4), "3/25", 1, 7)]
