"""Planned queries on the Spark engine equal local execution: random stores with real indexes,
random MATCH_RECOGNIZE and SASE+ queries, the pattern planner's own replay intervals (every
selection strategy), every execution mode that applies.

The queries run on the test suite's local Spark session (whose executors refuse to import the
planner): a few random cases in the fast suite, many in the slow one.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from replaydb.errors import OperatorError, QueryError, UsageError
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.spark import run_plan
from replaydb.replay.spark.executors import SparkExecutor
from tests.planner_cases import mr_queries, sase_queries, stream_store, streams
from tests.spark_cases import check_equal

pytestmark = pytest.mark.spark

PLANS = ["auto", "all", "greedy", "optimal", "cpm"]


def compare(spark: Any, store: Any, text: str, plan: str, tasks: int,
            **extra: Any) -> set[str]:
    """Local vs Spark (the session ``spark``) for every mode that applies; returns the modes
    that ran."""
    opts = {"plan": plan, "state_cap": 200_000, "extra": extra}
    try:
        local_plan = plan_query(store, text, QueryOptions(**opts))
        local = execute(local_plan).table
    except (QueryError, OperatorError):
        assume(False)  # the query is invalid for local execution as well
    ran = set()
    for mode in ("auto", "interval", "partition", "single"):
        p = plan_query(store, text, QueryOptions(**opts, engine="spark"))
        assert p.intervals == local_plan.intervals and p.strategy == local_plan.strategy
        try:
            got, stats = run_plan(p.physical, p.ctx.snapshots, mode=mode,
                                  executor=SparkExecutor(spark), tasks=tasks, read_tasks=tasks,
                                  progress=False)
        except UsageError as exc:
            assert mode in ("interval", "partition") and "cannot run" in str(exc)
            continue
        ran.add(stats["spark"]["mode"])
        if stats["spark"]["mode"] == "none":
            assert local.num_rows == 0 and got.schema.equals(local.schema)
            continue
        check_equal(local, got, stats)
    return ran


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(s=streams(max_len=60), q=st.one_of(mr_queries(), sase_queries()),
       plan=st.sampled_from(PLANS), tasks=st.integers(1, 4))
def test_planned_queries_equal_local(spark: Any, s: dict, q: str, plan: str,
                                     tasks: int) -> None:
    with stream_store(s) as store:
        compare(spark, store, q, plan, tasks)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(s=streams(max_len=80), q=st.one_of(mr_queries(), sase_queries()),
       plan=st.sampled_from(PLANS), tasks=st.integers(1, 5))
def test_planned_queries_equal_local_slow(spark: Any, s: dict, q: str, plan: str,
                                          tasks: int) -> None:
    with stream_store(s) as store:
        compare(spark, store, q, plan, tasks)


def test_planner_intervals_run_interval_parallel(spark: Any) -> None:
    """A selective indexed condition: the planner replays several short intervals, and the
    Spark engine runs them as interval-parallel tasks with local execution's result."""
    import numpy as np

    n = 3000
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.integers(1, 4, n))
    x = np.where(rng.random(n) < 0.1, 9.0, rng.integers(0, 5, n).astype(float))
    s = {"table": pa.table({"t": t, "x": x, "k": rng.integers(0, 2, n),
                            "type": np.array(list("abc"))[rng.integers(0, 3, n)]}),
         "indexed": ["x"], "leaf": 16, "fanout": 4}
    free = {"weights": {"interval_events": 0.0}}  # no cost per interval: nothing is joined
    q = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.x AS ax, LAST(B.x) AS bx "
         "PATTERN (A B+) WITHIN 6 DEFINE A AS x = 9, B AS x < 3)")
    with stream_store(s) as store:
        p = plan_query(store, q, QueryOptions(plan="all", extra=free))
        assert p.intervals is not None and len(p.intervals) > 5
        ran = compare(spark, store, q, "all", 3, **free)
        assert "interval" in ran and "single" in ran
        p = plan_query(store, q, QueryOptions(plan="all", engine="spark", extra=free))
        _, stats = run_plan(p.physical, p.ctx.snapshots, executor=SparkExecutor(spark),
                            progress=False)
        assert stats["spark"]["mode"] == "interval"
        assert stats["spark"]["intervals"] == len(p.intervals)
