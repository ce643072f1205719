"""Spark executors run plan values: they receive the operator's spec, never query text, and
import nothing of the planner.

The test suite's Spark session refuses planner imports in its Python workers
(``tests/spark_guard``); these tests show the guard bites, then run a query of every language
family on Spark in each mode that applies - any planner import on an executor would fail it -
and ask every worker which replaydb modules it holds.
"""

from __future__ import annotations

import pickle

import pytest

import replaydb
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.spark import run_plan
from tests.spark_cases import QUERIES, STREAM, check_equal, make_store

pytestmark = pytest.mark.spark


def _task_functions() -> tuple:
    """Functions for Spark tasks, defined here so that they travel by value (the test module
    is not importable on executors)."""

    def import_the_planner(_: int) -> int:
        import importlib

        importlib.import_module("replaydb.planner.query")
        return 1

    def planner_modules(_: int) -> list[str]:
        import sys as sys_

        return sorted(m for m in sys_.modules if m.startswith("replaydb.planner"))

    return import_the_planner, planner_modules


def test_the_guard_refuses_planner_imports_on_executors(spark) -> None:  # noqa: ANN001
    import_the_planner, _ = _task_functions()
    with pytest.raises(Exception, match="imported on a Spark executor"):
        spark.sparkContext.parallelize([0], 1).map(import_the_planner).collect()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("imports") / "s", seed=5, n=2000)


GRETA = ("FROM ev RETURN k, COUNT(*) AS trends PATTERN SEQ(A+, B) WHERE [k] GROUP-BY k "
         "WITHIN 100 seconds SLIDE 100 seconds")


@pytest.mark.parametrize("name, mode", [
    ("mr_part_one", "interval"), ("sase_equiv", "partition"), ("tps_part", "partition"),
    ("win_group", "partition"), ("imprecise", "single"), ("greta", "partition"),
])
def test_queries_on_spark_import_no_planner(spark, store, name: str, mode: str) -> None:  # noqa: ANN001
    text = GRETA if name == "greta" else QUERIES[name]
    opts = {"plan": "replay", "stream": STREAM.get(name)}
    local = execute(plan_query(store, text, QueryOptions(**opts))).table
    plan = plan_query(store, text, QueryOptions(**opts, engine="spark"))
    shipped = pickle.loads(pickle.dumps(plan.physical))
    assert shipped == plan.physical
    got, stats = run_plan(shipped, plan.ctx.snapshots, mode=mode, tasks=2, read_tasks=2,
                          progress=False)
    assert stats["spark"]["mode"] == mode
    check_equal(local, got, stats)
    _, planner_modules = _task_functions()
    held = spark.sparkContext.parallelize(range(8), 8).map(planner_modules).collect()
    assert not any(held), held
