"""GRETA planner (issue 55): replaying only the events that can take part in a trend returns
exactly what full replay returns.

* The region (:func:`trend_region`) against a brute force over every time and window: it
  contains every time between a start and an end candidate of one window (with a negation
  first or last: from the window's start / to its end), and nothing outside the windows of a
  start candidate.
* The rule itself, without the planner: feeding the operator only the events that satisfy some
  variable's local predicates and lie in the brute-force region gives full replay's rows.
* Property test: random real stores (small leaves, ties, NULLs, indexes on random columns) and
  random GRETA queries (Kleene, SEQ, nested Kleene, negation first / middle / last, local
  predicates of every range form and others that widen to TRUE, predicates qualified by the
  type name, unqualified ones, edge predicates, equivalence, GROUP-BY, sliding and tumbling
  windows); every plan strategy equals full replay row by row.
* EXPLAIN: the variables' scopes, the region, the intervals, the cost, and the reason when the
  planner replays everything.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.indexes.manage import create_index
from replaydb.planner.greta_plan import trend_region
from replaydb.planner.query import QueryOptions, execute, explain, plan_query
from replaydb.replay import Replay
from replaydb.store.interval_list import merge_halfopen
from replaydb.store.schema import Attribute, StreamSchema
from tests.planner_cases import check_intervals, rows, stream_store, streams

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PRUNE = {"max_fraction": float("inf"), "interval_events": 0, "index_max_selectivity": 1.0}
"""Options that make the planner prune whenever it can (tiny test streams)."""
STATS = {"pruned": 0, "replayed_fraction": 0.0}


# --------------------------------------------------------------------------- the region
def brute_region(starts: set[int], ends: set[int], within: int, slide: int, before: bool,
                 after: bool, lo: int, hi: int) -> set[int]:
    """Every time in ``[lo, hi)`` that lies, in some window, between a start and a later (or
    equal) end candidate, widened to the window's start / end by a negation first / last."""
    out: set[int] = set()
    for k in range((lo - within) // slide - 1, hi // slide + 2):
        ws, we = k * slide, k * slide + within
        for s in starts:
            for e in ends:
                if ws <= s <= e < we:
                    out.update(range(ws if before else s, (we if after else e + 1)))
    return {t for t in out if lo <= t < hi}


def as_rows(points: set[int]) -> np.ndarray:
    p = np.array(sorted(points), np.int64)
    return merge_halfopen(p, p + 1)


def covered(iv: np.ndarray, t: int) -> bool:
    return bool(np.any((iv[:, 0] <= t) & (t < iv[:, 1])))


@settings(max_examples=300, deadline=None)
@given(starts=st.sets(st.integers(-30, 60), max_size=6),
       ends=st.sets(st.integers(-30, 60), max_size=6),
       within=st.integers(1, 15), slide_share=st.integers(1, 15),
       before=st.booleans(), after=st.booleans())
def test_region_contains_every_trend_time(starts: set[int], ends: set[int], within: int,
                                          slide_share: int, before: bool, after: bool) -> None:
    slide = max(1, min(within, slide_share))
    region = trend_region(as_rows(starts), as_rows(ends), within, slide, before=before,
                          after=after)
    assert np.all(region[:, 1] > region[:, 0]) and np.all(region[1:, 0] > region[:-1, 1])
    want = brute_region(starts, ends, within, slide, before, after, -100, 200)
    for t in want:
        assert covered(region, t), (t, region.tolist())
    # nothing outside the windows holding a start candidate and an end candidate
    reach = set()
    for s in starts:
        for k in range((s - within) // slide + 1, s // slide + 1):
            reach.update(range(k * slide, k * slide + within))
    ends_reach = set()
    for e in ends:
        for k in range((e - within) // slide + 1, e // slide + 1):
            ends_reach.update(range(k * slide, k * slide + within))
    for a, b in region.tolist():
        for t in range(a, b):
            assert t in reach and t in ends_reach, (t, region.tolist())


def test_region_is_exact_for_tumbling_windows_without_negation() -> None:
    starts, ends = {3, 14, 27}, {5, 12, 29, 33}
    region = trend_region(as_rows(starts), as_rows(ends), 10, 10)
    assert region.tolist() == [[3, 6], [27, 30]]
    # NOT first / last: from the window's start, to its end
    assert trend_region(as_rows(starts), as_rows(ends), 10, 10, before=True).tolist() == \
        [[0, 6], [20, 30]]
    assert trend_region(as_rows(starts), as_rows(ends), 10, 10, after=True).tolist() == \
        [[3, 10], [27, 30]]


# --------------------------------------------------------------------------- random queries
def _range(draw: Any, var: str) -> str:
    c = draw(st.integers(0, 6))
    q = draw(st.sampled_from([f"{var}.", f"{var}.", ""]))
    return draw(st.sampled_from([
        f"{q}x > {c}", f"{q}x <= {c}", f"{c} <= {q}x", f"{q}x = {c}",
        f"{q}x BETWEEN {min(c, 3)} AND {c}", f"{q}x IN ({c}, {(c + 2) % 7})",
        f"{q}k = {c % 2}", f"NOT ({q}x > {c})", f"({q}x > {c} OR {q}k = 1)",
        f"{q}x IS NULL", f"{q}x > {q}k", f"{q}x >= {c // 3}"]))


PATTERNS = [
    ("a A+", ["A"], ["AA"]),
    ("SEQ(a A, b B+)", ["A", "B"], ["AB", "BB"]),
    ("SEQ(a A+, b B)", ["A", "B"], ["AA", "AB"]),
    ("(SEQ(a A, b B))+", ["A", "B"], ["AB", "BA"]),
    ("SEQ(a A, b B, c C)", ["A", "B", "C"], ["AB", "BC"]),
    ("SEQ(a A, NOT c C, b B+)", ["A", "B", "C"], ["AB", "BB"]),
    ("SEQ(NOT c C, a A, b B+)", ["A", "B", "C"], ["AB", "BB"]),
    ("SEQ(a A+, b B, NOT c C)", ["A", "B", "C"], ["AA", "AB"]),
    ("SEQ(NOT c C+, a A+)", ["A", "C"], ["AA", "CC"]),
    ("SEQ(a A+, NOT SEQ(c C, b B))", ["A", "B", "C"], ["AA", "CB"]),
]
"""(pattern, its variables, transitions ``EF`` an edge predicate ``E.x op NEXT(F).x`` may
constrain)."""


@st.composite
def greta_queries(draw: Any) -> str:
    pattern, names, edges = draw(st.sampled_from(PATTERNS))
    preds = []
    for v in names:
        for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
            preds.append(_range(draw, v))
    if draw(st.booleans()):  # the type name qualifies the variable too
        preds.append(f"{draw(st.sampled_from(names)).lower()}.x >= {draw(st.integers(0, 3))}")
    if draw(st.integers(0, 3)) == 0:  # an unqualified predicate: every variable
        preds.append(f"k = {draw(st.integers(0, 1))}")
    if draw(st.booleans()):
        op = draw(st.sampled_from(["<", ">", "<=", "="]))
        src, dst = draw(st.sampled_from(edges))
        preds.append(f"{src}.x {op} NEXT({dst}).x")
    group = ""
    if draw(st.integers(0, 2)) == 0:
        preds.insert(0, "[k]")
        group = " GROUP-BY k" if draw(st.booleans()) else ""
    within = draw(st.integers(1, 12))
    slide = draw(st.integers(1, within))
    first = names[0]
    rets = draw(st.lists(st.sampled_from(
        ["COUNT(*)", f"COUNT({first})", f"SUM({first}.k) AS s", f"MAX({first}.k) AS m"]),
        min_size=1, max_size=3, unique=True))
    if group:
        rets.insert(0, "k")
    where = f" WHERE {' AND '.join(preds)}" if preds else ""
    return (f"FROM s RETURN {', '.join(rets)} PATTERN {pattern}{where}{group} "
            f"WITHIN {within} SLIDE {slide}")


def run(store: Any, text: str, plan: str, **extra: Any) -> tuple[Any, list[tuple]]:
    p = plan_query(store, text, QueryOptions(plan=plan, extra=dict(extra), state_cap=500_000,
                                                 time_format="raw"))
    return p, rows(execute(p).table)


def assert_same(store: Any, text: str) -> None:
    _, want = run(store, text, "replay")
    for plan, extra in [("auto", PRUNE), ("auto", {**PRUNE, "join_events": 6}),
                        ("tree", PRUNE), ("auto", {})]:
        p, got = run(store, text, plan, **extra)
        check_intervals(p, store)
        assert got == want, (text, plan, extra, p.strategy, p.intervals, got, want)
        if p.strategy == "pruned" and plan == "auto" and extra is PRUNE:
            STATS["pruned"] += 1


@FAST
@given(st.data())
def test_pruned_replay_equals_full_replay(data: st.DataObject) -> None:
    s = data.draw(streams(max_len=50))
    with stream_store(s) as store:
        for _ in range(4):
            assert_same(store, data.draw(greta_queries()))


# --------------------------------------------------------------------------- the rule alone
@contextmanager
def typed_store(n: int, seed: int, leaf: int = 4) -> Iterator[Any]:
    """``n`` events over types a/b/c, x in 0..9, k in 0..1, indexes on x and type."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, n // 2, n))
    table = pa.table({"t": t, "x": rng.integers(0, 10, n).astype(np.float64),
                      "k": rng.integers(0, 2, n), "type": rng.choice(list("abc"), n)})
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("s", StreamSchema(
            (Attribute("x", "float64"), Attribute("k", "int64"), Attribute("type", "string")),
            time_unit="s", leaf_capacity=leaf, fanout=4))
        store.append("s", table)
        create_index(store, "s", "x")
        create_index(store, "s", "type")
        yield store


def test_operator_fed_only_events_that_can_take_part_gives_full_rows() -> None:
    """The rule, independent of the planner's scopes: keep the events of the brute-force
    region whose type and x satisfy some variable's local predicates, drop the rest."""
    q = ("FROM s RETURN COUNT(*), SUM(A.k) AS s PATTERN SEQ(a A, NOT c C, b B+) "
         "WHERE A.x >= 8 AND C.x = 0 AND B.x > 2 AND B.x < NEXT(B).x WITHIN 6 SLIDE 2")
    with typed_store(600, 3) as store:
        p, want = run(store, q, "replay")
        data = Replay(p.ctx.snapshots, None).table()
        t = data.column("t").to_numpy()
        x = data.column("x").to_numpy(zero_copy_only=False)
        ty = np.asarray(data.column("type").to_pylist())
        a, b, c = (ty == "a") & (x >= 8), (ty == "b") & (x > 2), (ty == "c") & (x == 0)
        region = trend_region(as_rows(set(t[a].tolist())), as_rows(set(t[b].tolist())), 6, 2)
        inside = np.array([covered(region, int(v)) for v in t])
        keep = (a | b | c) & inside
        assert 0 < keep.sum() < len(t) // 3
        op = p.take_operator() or p.physical.operator.build()
        for batch in data.filter(pa.array(keep)).to_batches():
            op.push(batch)
        op.flush()
        assert rows(op.results()) == want and want


def test_selective_start_prunes_and_matches() -> None:
    q = ("FROM s RETURN COUNT(*) AS n, COUNT(B) AS nb PATTERN SEQ(a A, b B+) "
         "WHERE A.x = 9 AND A.k = 1 WITHIN 4")
    with typed_store(3000, 5) as store:
        _, want = run(store, q, "replay")
        opts = {"index_max_selectivity": 0.4, "interval_events": 0, "max_fraction": 1.5}
        p, got = run(store, q, "auto", **opts)
        assert p.strategy == "pruned" and got == want and want
        e = explain(store, q, analyze=True, **opts)
        g = e["greta"]
        assert g["variables"]["A"]["role"] == "start" and g["variables"]["B"]["role"] == "end"
        assert g["variables"]["A"]["index"] == "x"
        assert g["variables"]["B"]["source"].startswith("index")  # the type's index
        assert e["analyze"]["greta_pruning"]["events_read"] < 3000 * 0.7
        assert e["plan"]["source"]["reason"] == "trends"


def test_explain_says_why_full_replay() -> None:
    with typed_store(400, 7) as store:
        # the type's index is not selective enough, the tree prunes no leaf for x >= 0
        e = explain(store, "FROM s RETURN COUNT(*) PATTERN a A+ WHERE A.x >= 0 WITHIN 5")
        assert e["strategy"] == "replay"
        assert "no variable's local predicates narrow" in e["greta"]["why"]
        assert "selectivity" in e["greta"]["variables"]["A"]["index"]
        # the tree prunes leaves, but joining the short gaps leaves nothing to save
        e = explain(store, "FROM s RETURN COUNT(*) PATTERN a A+ WHERE A.x = 3 WITHIN 5")
        assert e["strategy"] == "replay" and "full replay" in e["greta"]["why"]
        assert "cost" in e["greta"]["why"], e["greta"]["why"]
        assert e["greta"]["variables"]["A"]["source"] == "tree"


def test_an_unsatisfiable_variable_means_no_trend() -> None:
    with typed_store(400, 8) as store:
        q = "FROM s RETURN COUNT(*) PATTERN SEQ(a A, b B) WHERE A.x > 5 AND A.x < 3 WITHIN 5"
        p, got = run(store, q, "auto")
        assert p.strategy == "pruned" and len(p.intervals) == 0 and got == []


def test_default_plan_does_not_join_gaps() -> None:
    """An interval costs these plans one event (one sweep over the leaves, many intervals a
    batch), so by default only gaps of at most one event are joined: more intervals and fewer
    events pushed than when an interval is priced as a navigation, the same rows."""
    q = ("FROM s RETURN COUNT(*) AS n, COUNT(B) AS nb PATTERN SEQ(a A, b B+) "
         "WHERE A.x = 9 AND A.k = 1 WITHIN 4")
    with typed_store(3000, 5) as store:
        _, want = run(store, q, "replay")
        opts = {"index_max_selectivity": 0.4, "max_fraction": 1.5}
        p1, got1 = run(store, q, "auto", **opts)
        p2, got2 = run(store, q, "auto", interval_events=128, **opts)
        assert p1.strategy == p2.strategy == "pruned"
        assert got1 == got2 == want and want
        assert len(p1.intervals) > len(p2.intervals)
        e1 = explain(store, q, analyze=True, **opts)
        e2 = explain(store, q, analyze=True, interval_events=128, **opts)
        assert e1["greta"]["cost_events_est"]["per_interval"] == 1.0
        assert (e1["analyze"]["operator"]["events_in"]
                < e2["analyze"]["operator"]["events_in"])
