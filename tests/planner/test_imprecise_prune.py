"""Imprecise-timestamp planner (issue 55): replaying around the first and last components'
candidates returns exactly full replay's signatures, confidences and ranges, in its order.

* Property test: random real imprecise stores (uncertainty widths 0-6, ties, small leaves,
  indexes on random columns) and random SEQ queries of one to three components with range
  predicates of every form, predicates that widen to TRUE, cross-event predicates and
  equivalence, both strategies, both evaluation frameworks, with and without exact rational
  confidences; every plan strategy equals full replay row by row (float confidences to 1e-12:
  their summation order follows the batches; the exact ones are equal).
* :func:`match_region` against a brute force over uncertainty intervals.
* EXPLAIN: what was pruned, and why a plan replays everything.
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
from replaydb.planner.imprecise_plan import UpperBounds, match_region
from replaydb.planner.pattern.intervals import Geometry
from replaydb.planner.query import QueryOptions, execute, explain, plan_query
from replaydb.store.schema import Attribute, StreamSchema
from tests.planner_cases import check_intervals, rows

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PRUNE = {"max_fraction": float("inf"), "interval_events": 0, "index_max_selectivity": 1.0}


@contextmanager
def imprecise_store(lo: list[int], width: list[int], types: list[str], v: list[int], *,
                    leaf: int = 3, indexed: tuple[str, ...] = ("v",)) -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as d:
        store = replaydb.open(f"{d}/store", create=True)
        store.create_stream("ev", StreamSchema(
            (Attribute("hi", "int64"), Attribute("type", "string"), Attribute("v", "int64")),
            time_unit="s", time_column="lo", upper_column="hi", type_column="type",
            leaf_capacity=leaf, fanout=3))
        if lo:
            store.append("ev", pa.table({"lo": pa.array(lo, pa.int64()),
                                         "hi": pa.array(np.add(lo, width), pa.int64()),
                                         "type": pa.array(types, pa.string()),
                                         "v": pa.array(v, pa.int64())}))
        for c in indexed:
            create_index(store, "ev", c)
        yield store


@st.composite
def imprecise_streams(draw: Any, max_len: int = 50) -> dict[str, Any]:
    n = draw(st.integers(1, max_len))
    steps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return {"lo": (np.cumsum(steps) + draw(st.integers(0, 4))).tolist(),
            "width": draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)),
            "types": draw(st.lists(st.sampled_from("ABC"), min_size=n, max_size=n)),
            "v": draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)),
            "leaf": draw(st.integers(2, 6)),
            "indexed": tuple(draw(st.lists(st.sampled_from(["v", "type"]), unique=True)))}


def _pred(draw: Any, var: str) -> str:
    c = draw(st.integers(0, 6))
    return draw(st.sampled_from([
        f"{var}.v > {c}", f"{var}.v <= {c}", f"{var}.v = {c}", f"{var}.v IN ({c}, {(c + 3) % 7})",
        f"{var}.v BETWEEN {min(c, 2)} AND {c}", f"{var}.v % 2 = {c % 2}",
        f"NOT ({var}.v > {c})", f"{var}.v != {c}"]))


@st.composite
def imprecise_queries(draw: Any) -> str:
    n = draw(st.integers(1, 3))
    comps = [(draw(st.sampled_from("ABC")), "abc"[i]) for i in range(n)]
    names = [v for _, v in comps]
    preds = [_pred(draw, v) for v in names for _ in range(draw(st.sampled_from([0, 1, 1, 2])))]
    if n > 1 and draw(st.booleans()):
        preds.append(f"{names[1]}.v >= {names[0]}.v")
    if n > 1 and draw(st.integers(0, 3)) == 0:
        preds.insert(0, "[v]")
    strategy = draw(st.sampled_from(["skip_till_any_match", "skip_till_next_match"]))
    where = f" WHERE {strategy}({', '.join(names)}) {{ {' AND '.join(preds)} }}" if preds \
        else ""
    seq = ", ".join(f"{t} {v}" for t, v in comps)
    return f"PATTERN SEQ({seq}){where} WITHIN {draw(st.integers(1, 12))}"


def run(store: Any, text: str, plan: str, **extra: Any) -> tuple[Any, list[tuple]]:
    p = plan_query(store, text, QueryOptions(plan=plan, extra=dict(extra)))
    return p, rows(execute(p).table)


def same_rows(got: list[tuple], want: list[tuple]) -> bool:
    """Equal rows, floats (the confidences) to 1e-12: a confidence is a sum whose order
    depends on where batches begin (the exact rationals are compared exactly)."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        for a, b in zip(g, w, strict=True):
            if isinstance(a, float) and isinstance(b, float):
                if abs(a - b) > 1e-12:
                    return False
            elif a != b:
                return False
    return True


@FAST
@given(st.data())
def test_pruned_replay_equals_full_replay(data: st.DataObject) -> None:
    s = data.draw(imprecise_streams())
    with imprecise_store(s["lo"], s["width"], s["types"], s["v"], leaf=s["leaf"],
                         indexed=s["indexed"]) as store:
        for _ in range(4):
            q = data.draw(imprecise_queries())
            framework = data.draw(st.sampled_from(["event", "point"]))
            exact = data.draw(st.booleans())
            _, want = run(store, q, "replay", framework=framework, exact=exact)
            for plan, extra in [("auto", PRUNE), ("auto", {**PRUNE, "join_events": 4}),
                                ("tree", PRUNE), ("auto", {})]:
                p, got = run(store, q, plan, framework=framework, exact=exact, **extra)
                check_intervals(p, store)
                assert same_rows(got, want), (q, plan, extra, p.strategy, p.intervals, got,
                                              want)


# --------------------------------------------------------------------------- the region
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_region_holds_every_event_a_match_can_consult(data: st.DataObject) -> None:
    s = data.draw(imprecise_streams(max_len=40))
    window = data.draw(st.integers(1, 10))
    lo = np.array(s["lo"])
    hi = lo + np.array(s["width"])
    with imprecise_store(s["lo"], s["width"], s["types"], s["v"], leaf=s["leaf"]) as store:
        snap = store.stream("ev")
        geo = Geometry.of(snap)
        bounds = UpperBounds(geo, snap.tree.histogram(0)["hi.max"])
    firsts = data.draw(st.lists(st.integers(0, len(lo) - 1), min_size=1, max_size=3))
    lasts = data.draw(st.lists(st.integers(0, len(lo) - 1), min_size=1, max_size=3))
    rows_of = lambda ids: np.array(sorted({(int(lo[i]), int(lo[i]) + 1) for i in ids}))  # noqa: E731
    region = match_region(rows_of(firsts), rows_of(lasts), bounds, window)
    for f in firsts:
        for z in lasts:
            # every point pair of a match from f to z: t1 in f's interval, tl in z's, tl-t1 < W
            for t1 in range(lo[f], hi[f] + 1):
                for tl in range(max(t1, lo[z]), min(hi[z], t1 + window - 1) + 1):
                    for e in range(len(lo)):  # every event that can take a point in [t1, tl]
                        if lo[e] <= tl and hi[e] >= t1:
                            assert np.any((region[:, 0] <= lo[e]) & (lo[e] < region[:, 1])), \
                                (f, z, e, region.tolist())


# --------------------------------------------------------------------------- EXPLAIN
def test_selective_components_prune_and_explain_says_so() -> None:
    n = 3000
    rng = np.random.default_rng(4)
    lo = np.sort(rng.integers(0, n, n)).tolist()
    width = rng.integers(0, 8, n).tolist()
    v = (np.arange(n) % 500).tolist()
    with imprecise_store(lo, width, ["E"] * n, v, leaf=16) as store:
        q = "PATTERN SEQ(E a, E b) WHERE a.v = 7 AND b.v = 8 WITHIN 5"
        _, want = run(store, q, "replay")
        # a candidate every 500 events: intervals dearer than the events they skip
        p, got = run(store, q, "auto", interval_events=1000)
        assert p.strategy == "replay" and "cost" in p.details["imprecise"]["why"]
        p, got = run(store, q, "auto")
        assert p.strategy == "pruned" and same_rows(got, want) and want
        assert p.physical.source.contiguous and len(p.intervals) > 1
        e = explain(store, q, analyze=True)
        assert e["plan"]["source"]["feed"] == "one stream"
        im = e["imprecise"]
        assert im["variables"]["a"]["role"] == "first" and im["variables"]["b"]["role"] == "last"
        assert im["variables"]["a"]["index"] == "v"
        assert e["analyze"]["imprecise_pruning"]["events_read"] < n // 10
        assert e["plan"]["source"]["reason"] == "matches"
        # no selective condition: full replay, with the reason
        e = explain(store, "PATTERN SEQ(E a, E b) WHERE a.v % 7 = 0 WITHIN 5")
        assert e["strategy"] == "replay" and "full replay" in e["imprecise"]["why"]
