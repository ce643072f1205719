"""TPStream planner (issue 9): pruned replay returns exactly what full replay returns.

Property test: random stores (real stores with real LSM indexes on random columns, leaves of 2-6
events so streams span many leaves, ties in time, NULLs, two partition keys, three types) and
random TPStream queries (2-3 situations with range conditions of every supported form mixed with
NOT, OR across columns, IS NULL and column comparisons; AT LEAST / AT MOST / BETWEEN durations;
random relation sets; PARTITION BY or not; RETURN first/last/count/sum/min/max/avg; normal and
low-latency mode; end policy drop and close). Each query runs under ``--plan auto`` (forced to
prune: ``PRUNE``) with several join settings and under ``--plan tree``, and is compared
row by row - detection time and seq, situation bounds, aggregates, order - with full replay.

Unit tests pin the padding rule's edge cases (a run cut by an interval's start, runs at the
stream's start and end with both end policies, AT LEAST above the window, gaps, ties, a sparse
partition whose previous event lies far before the interval) and EXPLAIN's content. Several
tests also show that the guard is needed: replaying the same intervals into the bare operator
gives wrong rows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.indexes.manage import create_index
from replaydb.planner.query import Plan, QueryOptions, execute, explain, plan_query
from replaydb.planner.tpstream_plan import feasible_starts, prev_event_bound
from replaydb.replay.executor import execute_local
from replaydb.replay.guard import IntervalGuard
from replaydb.replay.plan import IntervalScan
from replaydb.store.schema import Attribute, StreamSchema
from tests.planner_cases import check_intervals, rows, stream_store, streams

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=500, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PRUNE = {"max_fraction": float("inf"), "interval_events": 0, "index_max_selectivity": 1.0}
"""Options that make the planner prune whenever it can (tiny test streams)."""
STATS = {"pruned": 0, "pruned_rows": 0, "guard_drops": 0}
RELATIONS = ["before", "after", "meets", "met-by", "overlaps", "overlapped-by", "starts",
             "started-by", "during", "contains", "finishes", "finished-by", "equals"]


# --------------------------------------------------------------------------- helpers
def sparse_partition_events() -> tuple[list[int], list[float], list[int]]:
    """``(t, x, p)`` in time order: partition 0 has an event with x = 0 every second 0..119;
    partition 1 has x = 7 at t = 1, x = 9 at t = 101 and x = 0 at t = 102 (at equal times,
    partition 0's event comes first)."""
    t, x, p = [], [], []
    for i in range(0, 120):
        t.append(i)
        x.append(0.0)
        p.append(0)
        if i in (1, 101):
            t.append(i)
            x.append(7.0 if i == 1 else 9.0)
            p.append(1)
    t.append(102)
    x.append(0.0)
    p.append(1)
    order = np.argsort(np.array(t), kind="stable")
    return [t[i] for i in order], [x[i] for i in order], [p[i] for i in order]


def run(store: Any, text: str, plan: str = "auto", **extra: Any) -> Any:
    opts = QueryOptions(plan=plan, extra=dict(extra), state_cap=200_000)
    p = plan_query(store, text, opts)
    res = execute(p)
    p.stats = res.stats  # what the guard did, if the plan has one
    return p, res.table


def guard_of(p: Any) -> dict[str, int] | None:
    """What the interval guard of an executed plan did (None: the plan has no guard)."""
    return p.stats.get("guard")


def assert_same(store: Any, text: str, plans: list[tuple[str, dict]] | None = None,
                **op_opts: Any) -> int:
    _, full = run(store, text, "replay", **op_opts)
    want = rows(full)
    plans = plans or [("auto", PRUNE)]
    for name, extra in plans:
        p, got_t = run(store, text, name, **op_opts, **extra)
        check_intervals(p, store)
        got = rows(got_t)
        st_ = getattr(p, "tpstream_state", None)
        if st_ is not None:
            st_._check()
        g = guard_of(p)
        if st_ is not None and g is not None:
            STATS["pruned"] += 1
            STATS["pruned_rows"] += len(got)
            if not p.physical.operator.config.partition_by:
                # the padding makes the cut-start check a no-op
                assert g["rows_dropped_cut_start"] == 0, (text, p.intervals)
            STATS["guard_drops"] += g["rows_dropped_cut_start"] + g["rows_dropped_cut_end"]
        assert got == want, (text, name, extra, op_opts, p.strategy, p.intervals, got, want)
    return len(want)


@contextmanager
def make_store(t: list[int], cols: dict[str, list], *, leaf: int = 2, fanout: int = 2,
               indexed: tuple[str, ...] = ("x",)) -> Iterator[Any]:
    kinds = {"x": "float64", "k": "int64", "p": "int64"}
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("s", StreamSchema(tuple(Attribute(c, kinds[c]) for c in cols),
                                              time_unit="s", leaf_capacity=leaf, fanout=fanout))
        data = {"t": pa.array(t, pa.int64())}
        data.update({c: pa.array(v, pa.float64() if kinds[c] == "float64" else pa.int64())
                     for c, v in cols.items()})
        if t:
            store.append("s", pa.table(data))
        for c in indexed:
            create_index(store, "s", c)
        yield store


def bare_rows(plan: Any) -> list[tuple]:
    """The plan's intervals replayed into the operator without the guard."""
    bare = replace(plan.physical, source=IntervalScan(plan.intervals, "situations"))
    return rows(execute_local(bare, plan.ctx.snapshots).table)


# --------------------------------------------------------------------------- random queries
def _atom(draw: Any) -> str:
    c = draw(st.integers(0, 6))
    kind = draw(st.integers(0, 15))
    return [
        f"x > {c}", f"x <= {c}", f"{c} <= x", f"x = {c}", f"x BETWEEN {min(c, 3)} AND {c}",
        f"x IN ({c}, {(c + 2) % 7})", f"k = {c % 2}", f"type = '{'abc'[c % 3]}'",
        f"NOT (x > {c})", f"(x > {c} OR k = 1)", "x IS NULL", "x > k",
        f"x >= {c // 3}", f"x <= {3 + c // 2}", f"x >= {c // 2}", f"x > {c // 2}",
    ][kind]


@st.composite
def conditions(draw: Any) -> str:
    parts = [_atom(draw) for _ in range(draw(st.sampled_from([1, 1, 1, 2])))]
    return " AND ".join(parts)


@st.composite
def durations(draw: Any) -> str:
    kind = draw(st.integers(0, 5))
    a = draw(st.integers(1, 8))
    b = a + draw(st.integers(0, 8))
    return ["", "", "", f" AT LEAST {a}s", f" AT MOST {b}s", f" BETWEEN {a}s AND {b}s"][kind]


@st.composite
def tp_queries(draw: Any) -> str:
    n = draw(st.sampled_from([2, 2, 3]))
    names = ["A", "B", "C"][:n]
    defs = [f"{s} AS {draw(conditions())}{draw(durations())}" for s in names]
    pairs = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True))
    cons = []
    for a, b in chosen:
        rels = draw(st.lists(st.sampled_from(RELATIONS), min_size=1, max_size=7, unique=True))
        cons.append(f"{a} {';'.join(rels)} {b}")
    w = draw(st.integers(0, 25))
    part = " PARTITION BY k" if draw(st.integers(0, 2)) == 0 else ""
    rets = [f"first({names[0]}.x) AS fx", f"last({names[1]}.x) AS lx",
            f"count({names[0]}) AS n0", f"sum({names[-1]}.k) AS sk", f"max({names[1]}.x) AS mx",
            f"avg({names[0]}.x) AS ax"]
    ret = draw(st.lists(st.sampled_from(rets), max_size=3, unique=True))
    text = (f"FROM s{part} DEFINE {', '.join(defs)} PATTERN {' AND '.join(cons)} WITHIN {w}")
    if ret:
        text += " RETURN " + ", ".join(ret)
    return text


def _check_random(data: st.DataObject, queries: int) -> None:
    s = data.draw(streams(max_len=60))
    with stream_store(s) as store:
        for _ in range(queries):
            q = data.draw(tp_queries())
            mode = data.draw(st.sampled_from(["normal", "low_latency"]))
            policy = data.draw(st.sampled_from(["drop", "close"]))
            assert_same(store, q, [("auto", PRUNE),
                                   ("auto", {**PRUNE, "join_leaves": 2}),
                                   ("tree", {**PRUNE, "join_leaves": 3}),
                                   ("auto", {"interval_events": 4})],
                        mode=mode, end_policy=policy)


@FAST
@given(st.data())
def test_pruned_replay_equals_full_replay(data: st.DataObject) -> None:
    _check_random(data, 4)


@pytest.mark.slow
@SLOW
@given(st.data())
def test_pruned_replay_equals_full_replay_thousands(data: st.DataObject) -> None:
    _check_random(data, 6)


# --------------------------------------------------------------------------- interval algebra
def test_feasible_starts_need_every_situation_within_the_window() -> None:
    a = np.array([[10, 11], [50, 51]], np.int64)  # closed {10}, {50}
    b = np.array([[14, 16]], np.int64)  # closed [14, 15]
    # T0 in {10} (B at 14..15 within 10 + 5) and in [14, 15] (A at ... none after 14 within 5)
    got = feasible_starts([a, b], 5)
    assert got.tolist() == [[10, 11]]
    assert feasible_starts([a, b], 3).tolist() == []
    assert feasible_starts([a, b], 4).tolist() == [[10, 11]]  # 14 - 10 = 4 <= w
    assert feasible_starts([a, np.empty((0, 2), np.int64)], 100).tolist() == []


def test_prev_event_bound_is_at_most_the_previous_event() -> None:
    t = [0, 0, 3, 4, 20, 21, 21, 40, 41, 42]
    with make_store(t, {"x": [0.0] * len(t)}) as store:
        snap = store.stream("s")
        from replaydb.planner.pattern.intervals import Geometry

        geo = Geometry.of(snap)
        for f0 in range(-2, 45):
            lb = int(prev_event_bound(geo, np.array([f0]))[0])
            before = [v for v in t if v < f0]
            if before:
                assert lb <= max(before) and lb < f0, (f0, lb)
            else:
                assert lb == f0


# --------------------------------------------------------------------------- padding edge cases
def test_run_cut_by_the_interval_start_is_not_reported() -> None:
    # A (x >= 5) holds from t=0 to t=29 (one situation [0, 30)); B (x = 1) at t=40. The index
    # narrows A... but A's long run has candidates everywhere, so use a selective C to cut:
    # with A unselective the interval around B starts inside A's run.
    t = list(range(0, 60))
    x = [6.0] * 30 + [0.0] * 10 + [1.0] + [0.0] * 19
    with make_store(t, {"x": x}) as store:
        q = "FROM s DEFINE A AS x >= 5 OR x > 100, B AS x = 1 PATTERN A before B WITHIN 12"
        assert assert_same(store, q) == 0
        q2 = "FROM s DEFINE A AS x >= 5 AT MOST 8s, B AS x = 1 PATTERN A before B WITHIN 30"
        assert assert_same(store, q2) == 0
        p, _ = run(store, q2, **PRUNE)
        assert p.strategy == "pruned"


def test_padding_to_the_previous_event_is_needed() -> None:
    # B = [26, 27) (x = 3 at 26); A (x >= 1) holds from 22 to 26: A = [22, 27) in full replay,
    # so "A equals B" has no match. The only feasible start is T0 = 26; replaying from 26 would
    # see A = [26, 27) - a run cut by the interval's start - and report a false match. The
    # padding starts the interval at the previous event (24), where A's run is seen to begin
    # earlier, and the interval's first time step (24) is no feasible start.
    t = [0, 1, 3, 4, 5, 7, 7, 7, 8, 8, 10, 11, 13, 15, 16, 17, 18, 19, 20, 22, 24, 24, 26, 27,
         29, 29, 29, 30, 31, 31]
    x = [0, 2, 1, 3, 2, 1, 0, 0, 2, 3, 0, 2, 1, 3, 2, 1, 3, 3, 0, 2, 1, 2, 3, 0, 3, 1, 2, 2, 0, 2]
    with make_store(t, {"x": [float(v) for v in x]}) as store:
        q = "FROM s DEFINE A AS x >= 1, B AS x = 3 PATTERN A equals B WITHIN 1"
        assert assert_same(store, q) == 0
        p, _ = run(store, q, **PRUNE)
        assert p.strategy == "pruned"
        st_ = p.tpstream_state
        assert [26, 27] in st_.feasible.tolist()
        assert any(a <= 24 < 26 < b for a, b in p.intervals)
        assert guard_of(p)["rows_dropped_cut_start"] == 0
        unpadded = Plan.of(p.ctx, "unpadded", [(int(a), int(min(b + 1, 32)))
                                               for a, b in st_.feasible])
        assert len(bare_rows(unpadded)) == 1  # the false match [26, 27) equals [26, 27)


def test_close_policy_guard_drops_runs_closed_at_an_interval_end() -> None:
    # A (x >= 5) runs from 20 to 25, then no event until 40 (x = 0): A = [20, 40) in full
    # replay, too long for the window. The interval around B (x = 9 at 22) ends at 29: with
    # end_policy close, end_interval closes A at 26 (after its last event 25), a false A that
    # contains B within the window. The guard drops it.
    t = list(range(0, 26)) + [40, 41]
    x = [0.0] * 20 + [5.0, 5.0, 9.0, 5.0, 5.0, 5.0] + [0.0, 0.0]
    with make_store(t, {"x": x}) as store:
        q = "FROM s DEFINE A AS x >= 5, B AS x = 9 PATTERN B during A WITHIN 6"
        # low latency reports the match at B's end, while A is ongoing (a true match there)
        for mode, n in (("normal", 0), ("low_latency", 1)):
            assert assert_same(store, q, end_policy="close", mode=mode) == n
        p, _ = run(store, q, **PRUNE, end_policy="close")
        assert p.strategy == "pruned" and p.intervals[-1][1] <= 30
        assert len(bare_rows(p)) == 1
        assert guard_of(p)["rows_dropped_cut_end"] == 1


def test_runs_at_stream_start_and_end_with_both_end_policies() -> None:
    t = list(range(0, 30))
    x = [7.0, 7.0, 0.0] + [1.0] * 24 + [7.0, 7.0, 9.0]
    with make_store(t, {"x": x}) as store:
        for policy in ("drop", "close"):
            for mode in ("normal", "low_latency"):
                q = "FROM s DEFINE A AS x > 6, B AS x > 8 PATTERN A contains;finishes B WITHIN 5"
                n = assert_same(store, q, end_policy=policy, mode=mode)
                assert n == (1 if policy == "close" else 0) or mode == "low_latency"
                q = "FROM s DEFINE A AS x > 6 AT LEAST 2s, B AS x = 0 PATTERN A meets B WITHIN 6"
                assert assert_same(store, q, end_policy=policy, mode=mode) == 1


def test_close_policy_does_not_report_runs_closed_at_an_interval_end() -> None:
    # A's run reaches the end of an interval that is not the stream's end: end_interval closes
    # it there (te = t_last + 1) - a situation full replay does not have
    t = list(range(0, 100))
    x = [0.0] * 100
    x[20:26] = [5.0] * 6
    x[24] = 9.0
    with make_store(t, {"x": x}) as store:
        q = "FROM s DEFINE A AS x >= 5, B AS x = 9 PATTERN B during;finishes A WITHIN 3"
        for mode in ("normal", "low_latency"):
            assert_same(store, q, end_policy="close", mode=mode)
        p, _ = run(store, q, **PRUNE, end_policy="close")
        assert p.strategy == "pruned"
        last_end = p.intervals[-1][1]
        assert last_end <= 60  # the interval ends before the stream does
        full = rows(run(store, q, "replay", end_policy="close")[1])
        assert rows(run(store, q, **PRUNE, end_policy="close")[1]) == full


def test_at_least_above_the_window_plans_nothing() -> None:
    t = list(range(40))
    x = [6.0] * 40
    with make_store(t, {"x": x}) as store:
        q = "FROM s DEFINE A AS x > 5 AT LEAST 20s, B AS x > 5 PATTERN A equals B WITHIN 10"
        p, got = run(store, q)
        assert p.strategy == "empty" and p.intervals == [] and got.num_rows == 0
        assert assert_same(store, q, end_policy="close") == 0
        # AT LEAST within the window: same as full replay, durations counted on whole runs
        q = "FROM s DEFINE A AS x > 5 AT LEAST 3s, B AS x = 6 PATTERN A equals B WITHIN 100"
        assert assert_same(store, q, end_policy="close") == 1


def test_gaps_and_ties() -> None:
    # large gaps (gap_max) and many events per time step; runs flipping inside a time step
    t = [0, 0, 0, 5, 5, 100, 100, 100, 101, 250, 250, 251, 252, 252, 400]
    x = [1, 5, 5, 5, 0, 5, 1, 5, 5, 0, 5, 5, 1, 5, 5]
    with make_store(t, {"x": [float(v) for v in x]}, leaf=2) as store:
        for w in (0, 1, 2, 5, 100, 200):
            for rel in ("meets", "before", "after", "overlaps", "equals"):
                q = f"FROM s DEFINE A AS x >= 5, B AS x = 1 PATTERN A {rel} B WITHIN {w}"
                for policy in ("drop", "close"):
                    assert_same(store, q, [("auto", PRUNE), ("tree", PRUNE)],
                                end_policy=policy)


def test_sparse_partition_with_previous_event_far_before_the_interval() -> None:
    # partition 1: A true at t=1 and t=101 (one run [1, 102) in full replay, longer than the
    # window), B at 101; partition 0: dense noise. The interval around t=101 cuts partition 1's
    # run: the guard looks up its previous event (t=1, A true) and drops the false match.
    t, x, p = sparse_partition_events()
    with make_store(t, {"x": x, "p": p}) as store:
        q = ("FROM s PARTITION BY p DEFINE A AS x > 6, B AS x > 8 PATTERN B equals A WITHIN 5 "
             "RETURN count(A) AS n")
        assert assert_same(store, q) == 0
        pl, _ = run(store, q, **PRUNE)
        assert pl.strategy == "pruned"
        assert len(bare_rows(pl)) == 1  # the cut run [101, 102) equals B
        e = explain(store, q, analyze=True, extra=dict(PRUNE))
        assert e["analyze"]["tpstream_pruning"]["guard_backward_searches"] >= 1
        assert e["analyze"]["tpstream_pruning"]["guard_rows_dropped_cut_start"] == 1
        # same layout, but the previous event does not satisfy A: the run is a true one
        x2 = [0.0 if (pi == 1 and ti == 1) else xi for ti, xi, pi in zip(t, x, p)]
    with make_store(t, {"x": x2, "p": p}) as store:
        assert assert_same(store, q) == 1


def test_empty_stream_and_unsatisfiable_conditions() -> None:
    with make_store([], {"x": []}) as store:
        q = "FROM s DEFINE A AS x > 1, B AS x < 1 PATTERN A before B WITHIN 5"
        p, got = run(store, q)
        assert p.strategy == "empty" and got.num_rows == 0
    t = list(range(20))
    with make_store(t, {"x": [float(i % 5) for i in t]}) as store:
        q = "FROM s DEFINE A AS x > 3 AND x < 2, B AS x < 1 PATTERN A before B WITHIN 5"
        p, got = run(store, q)
        assert p.strategy == "empty" and p.intervals == []
        assert assert_same(store, q) == 0
        q = ("FROM s DEFINE A AS x > 3, B AS x < 1 PATTERN A before B AND A after B WITHIN 5")
        p, _ = run(store, q)
        assert p.strategy == "empty"
        assert assert_same(store, q) == 0


def test_guard_lifecycle_snapshot_restore() -> None:
    t = list(range(50))
    x = [float((i * 7) % 10) for i in t]
    with make_store(t, {"x": x}) as store:
        q = "FROM s DEFINE A AS x > 8, B AS x < 1 PATTERN A before B WITHIN 4 RETURN count(B) AS n"
        p, want = run(store, q, **PRUNE)
        src = p.physical.source
        assert isinstance(src, IntervalScan) and src.guard is not None
        g = IntervalGuard(p.physical.operator.build(), store.stream("s"), src.guard.t_min,
                          src.guard.t_max)
        tbl = store.stream("s").read()
        g.push(tbl.slice(0, 10))
        s = g.snapshot()
        g.push(tbl.slice(10, 40))
        g.flush()
        first = g.results()
        g.reset()
        g.restore(s)
        g.push(tbl.slice(10, 40))
        g.flush()
        assert rows(g.results()) == rows(first)


# --------------------------------------------------------------------------- EXPLAIN
def test_explain_shows_situations_indexes_and_pruned_fractions() -> None:
    n = 400
    t = list(range(n))
    x = [float(i % 50) for i in t]
    k = [i % 3 for i in t]
    with make_store(t, {"x": x, "k": k}, leaf=8, indexed=("x",)) as store:
        q = ("FROM s DEFINE A AS x = 7, B AS k = 1 AND x < 9, C AS NOT (x > 3) "
             "PATTERN A before B WITHIN 3")
        e = explain(store, q, analyze=True, extra=dict(PRUNE))
        tp = e["tpstream"]
        assert e["strategy"] == "pruned"
        a, b, c = tp["situations"]["A"], tp["situations"]["B"], tp["situations"]["C"]
        assert a["index"] == "x" and a["qualifying_events"] == 8 and a["source"].startswith("index")
        assert a["condition"] == "x = 7" and a["range_conditions"] == ["x = 7"]
        assert b["index"] == "x" and "k = 1" in " ".join(b["range_conditions"])
        assert c["source"] == "anywhere" and c["widened_to_true"] == ["NOT x > 3"]
        assert c["index"].startswith("none (no single-attribute range condition")
        assert 0.0 < tp["pruned_fraction_events_est"] < 1.0
        an = e["analyze"]["tpstream_pruning"]
        assert an["events_read"] < n and an["pruned_fraction_events"] > 0.5
        assert e["analyze"]["replay"]["events"] == an["events_read"]
        # unindexed attribute, tree summaries prune nothing: full replay with the reason
        q = "FROM s DEFINE A AS k = 1, B AS k = 2 PATTERN A before B WITHIN 3"
        e = explain(store, q)
        assert e["strategy"] == "replay" and "full replay" in e["note"]
        assert "no indexed attribute among k" in e["tpstream"]["situations"]["A"]["index"]
        # an unselective index is not used
        q = "FROM s DEFINE A AS x >= 1, B AS x = 3 PATTERN A before B WITHIN 3"
        e = explain(store, q, extra={"index_max_selectivity": 0.05})
        assert "estimated selectivity" in e["tpstream"]["situations"]["A"]["index"]
        assert e["tpstream"]["situations"]["B"]["index"] == "x"


def test_partitioned_close_policy_plans_full_replay() -> None:
    t = list(range(30))
    with make_store(t, {"x": [float(i % 9) for i in t], "p": [i % 2 for i in t]}) as store:
        q = "FROM s PARTITION BY p DEFINE A AS x = 8, B AS x = 0 PATTERN A before B WITHIN 3"
        e = explain(store, q, extra={"end_policy": "close"})
        assert e["strategy"] == "replay" and "end_policy='close'" in e["note"]
        assert_same(store, q, end_policy="close")


def test_cli_explain_and_query(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from replaydb.cli import main

    # big enough that 4 intervals (30,000 events' worth of overhead each) beat full replay
    n = 200_000
    t = list(range(n))
    x = [float(i % 50_000) for i in t]
    with make_store(t, {"x": x}, leaf=0, fanout=0, indexed=("x",)) as store:
        q = ("FROM s DEFINE A AS x = 10, B AS x BETWEEN 12 AND 13 PATTERN A before B WITHIN 5 "
             "RETURN count(B) AS nb")
        path = str(store.path)
        assert main(["explain", path, q, "--analyze", "--json"]) == 0
        js = json.loads(capsys.readouterr().out)
        assert js["strategy"] == "pruned" and js["result_rows"] == 4
        assert js["tpstream"]["situations"]["A"]["index"] == "x"
        assert js["analyze"]["tpstream_pruning"]["events_read"] < n / 5
        assert main(["explain", path, q, "--plan", "tree"]) == 0
        text = capsys.readouterr().out
        assert "tpstream query over s" in text and "(situations)" in text
        assert main(["explain", path, q, "--plan", "tree", "--verbose"]) == 0
        text = capsys.readouterr().out
        assert "tree" in text and "situations" in text
        assert main(["query", path, q, "--json"]) == 0
        pruned = json.loads(capsys.readouterr().out)
        assert main(["query", path, q, "--plan", "replay", "--json"]) == 0
        full = json.loads(capsys.readouterr().out)
        assert pruned["rows"] == full["rows"] and len(full["rows"]) == 4


def test_condition_on_the_time_column_alias_in_a_partitioned_guard_lookup() -> None:
    # the stream's time column is called "ts"; a condition uses it, and the guard's backward
    # search must evaluate it on the stored event (whose time is in "t")
    t, x, p = sparse_partition_events()
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("p", "int64")),
                                              time_unit="s", time_column="ts", leaf_capacity=2,
                                              fanout=2))
        store.append("s", pa.table({"ts": pa.array(t, pa.int64()), "x": pa.array(x),
                                    "p": pa.array(p, pa.int64())}))
        create_index(store, "s", "x")
        q = ("FROM s PARTITION BY p DEFINE A AS x > 6 AND ts >= 0, B AS x > 8 "
             "PATTERN B equals A WITHIN 5")
        assert assert_same(store, q) == 0
        pl, _ = run(store, q, **PRUNE)
        assert pl.strategy == "pruned" and guard_of(pl)["rows_dropped_cut_start"] == 1
