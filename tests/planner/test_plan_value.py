"""The physical plan is a value: it compares with ``==``, survives pickle, is the same when the
same query is planned twice, and the one executor runs it to the query's answer.

Every language and every strategy of its planner, on one store with a secondary index."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import UsageError
from replaydb.indexes.manage import create_index
from replaydb.operators.spec import FAMILIES, OperatorSpec
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.executor import execute_local
from replaydb.replay.plan import FullScan, IntervalScan, PhysicalPlan, StreamRef, TreeAggregates
from replaydb.store.interval_list import IntervalList
from replaydb.store.schema import Attribute, StreamSchema

MR = ("SELECT * FROM ev MATCH_RECOGNIZE (ORDER BY t MEASURES A.v AS av, B.v AS bv "
      "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A X* B) WITHIN 30 SECONDS "
      "DEFINE A AS A.v = 7, B AS B.v = 9, X AS TRUE)")
SASE = "FROM ev PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) { a.v > 90 } WITHIN 10"
WINDOW = ("SELECT window_start, window_end, COUNT(*) AS n, SUM(x) AS sx FROM TABLE(TUMBLE("
          "TABLE ev, DESCRIPTOR(t), INTERVAL '10' MINUTE)) WHERE t >= 100 AND t < 20000 "
          "GROUP BY window_start, window_end")
GRETA = "FROM ev RETURN COUNT(*) AS n PATTERN SEQ(A+, B) WITHIN 20 seconds SLIDE 20 seconds"
TPSTREAM = ("FROM ev DEFINE S1 AS v = 7, S2 AS v = 9 PATTERN S1 before S2 WITHIN 60 seconds "
            "RETURN count(S1.t) AS n")
PRUNE = {"max_fraction": float("inf"), "interval_events": 0, "index_max_selectivity": 1.0}
CASES = [
    (MR, "replay", {}), (MR, "auto", {}), (MR, "optimal", {}), (MR, "greedy", {}),
    (MR, "all", {}), (MR, "cpm", {}), (SASE, "auto", {}), (SASE, "replay", {}),
    (WINDOW, "auto", {}), (WINDOW, "replay", {}), (WINDOW, "index", {}), (WINDOW, "naive", {}),
    (GRETA, "auto", {}), (TPSTREAM, "replay", {}), (TPSTREAM, "auto", PRUNE),
    (TPSTREAM, "tree", PRUNE),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    st = replaydb.open(tmp_path_factory.mktemp("plans") / "s", create=True)
    sch = StreamSchema((Attribute("type", "string"), Attribute("v", "int64"),
                        Attribute("x", "float64")), time_unit="s", type_column="type",
                       leaf_capacity=128)
    st.create_stream("ev", sch)
    n = 8000
    rng = np.random.default_rng(11)
    st.append("ev", pa.table({"t": np.arange(n) * 3, "type": rng.choice(["A", "B", "C"], n),
                              "v": rng.integers(0, 100, n), "x": rng.random(n)}))
    create_index(st, "ev", "v")
    return st


@pytest.mark.parametrize("text, strategy, extra", CASES)
def test_a_plan_is_a_value(store: replaydb.Store, text: str, strategy: str, extra: dict) -> None:
    plan = plan_query(store, text, QueryOptions(plan=strategy, extra=dict(extra)))
    value = plan.physical
    assert isinstance(value, PhysicalPlan)
    assert pickle.loads(pickle.dumps(value)) == value
    again = plan_query(store, text, QueryOptions(plan=strategy, extra=dict(extra))).physical
    assert again == value
    assert value.streams == (StreamRef("ev", store.stream("ev").version, 8000),)
    # the executor runs the value alone (an operator built from its spec) to the same rows
    want = execute(plan).table
    got = execute_local(pickle.loads(pickle.dumps(value)), [store.stream("ev")]).table
    assert got.equals(want)


def test_the_sources_the_planners_choose(store: replaydb.Store) -> None:
    def source(text: str, strategy: str, **extra: object) -> object:
        return plan_query(store, text, QueryOptions(plan=strategy, extra=extra)).physical.source

    assert source(MR, "replay") == FullScan()
    iv = source(MR, "optimal")
    assert isinstance(iv, IntervalScan) and iv.reason == "index" and len(iv.intervals) > 0
    tr = source(WINDOW, "index")
    assert tr == TreeAggregates("index", 100, 20000)
    rng = source(WINDOW, "replay")
    assert rng == FullScan()  # --plan replay: the language's own operator keeps its WHERE
    pruned = source(TPSTREAM, "auto", **PRUNE)
    assert isinstance(pruned, IntervalScan) and pruned.reason == "situations"
    assert pruned.guard is not None


def test_plans_differ_where_they_should(store: replaydb.Store) -> None:
    full = plan_query(store, MR, QueryOptions(plan="replay")).physical
    capped = plan_query(store, MR, QueryOptions(plan="replay", state_cap=5)).physical
    assert full != capped and capped.operator.state_cap == 5
    narrowed = replace(full, source=IntervalScan(IntervalList.of([(0, 10)]), "index"))
    assert narrowed != full
    assert narrowed == replace(full, source=IntervalScan(IntervalList.of([(0, 5), (5, 10)]),
                                                         "index"))


def test_the_executor_checks_the_streams_it_is_given(store: replaydb.Store) -> None:
    plan = plan_query(store, MR, QueryOptions(plan="replay")).physical
    other = replace(plan, streams=(StreamRef("ev", plan.streams[0].version + 7, 8000),))
    with pytest.raises(UsageError, match="the plan reads"):
        execute_local(other, [store.stream("ev")])


def test_operator_specs_build_equal_operators(store: replaydb.Store) -> None:
    for text in (MR, SASE, WINDOW, GRETA, TPSTREAM):
        plan = plan_query(store, text, QueryOptions(plan="replay"))
        spec = plan.physical.operator
        op = spec.build()
        assert op.spec() == spec and op.family == spec.family
        assert op.output_schema == plan.operator.output_schema
        assert pickle.loads(pickle.dumps(spec)) == spec
    assert set(FAMILIES) >= {"pattern", "window", "filter", "join", "tpstream", "greta",
                             "imprecise"}
    with pytest.raises(UsageError, match="unknown operator family"):
        OperatorSpec("nope", None)
    with pytest.raises(UsageError, match="no GPU variant"):
        OperatorSpec("greta", None, device="gpu")
