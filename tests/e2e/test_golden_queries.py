"""The golden query corpus (``tests/queries/``, format and regeneration in its README.md).

Every case runs with full replay and with each strategy it lists: each must give the case's
expected rows (so every index path equals its full-replay twin) and plan shape. One run per case
goes through the Spark engine with the default strategy; a few cases run it in the fast suite,
the rest with the slow tests. Stores are built once per distinct description and shared by
every case of the session.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.queries.golden import Case, Strategy, case_files, check, load_case, run, spark_strategy
from tests.queries.stores import StoreCache, StoreSpec

CASES = [load_case(p) for p in case_files()]


def _marks(case: Case, run_name: str) -> list[Any]:
    marks: list[Any] = []
    if case.store.ingest == "spark" or run_name == "spark":
        marks.append(pytest.mark.spark)
    if run_name == "spark" and case.spark == "slow":
        marks.append(pytest.mark.slow)
    if run_name in case.xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=case.xfail[run_name]))
    return marks


LOCAL = [pytest.param(c, s, id=f"{c.name}[{s.name}]", marks=_marks(c, s.name))
         for c in CASES for s in c.strategies]
SPARK = [pytest.param(c, id=c.name, marks=_marks(c, "spark")) for c in CASES if c.spark != "no"]


def _store(request: pytest.FixtureRequest, cache: StoreCache, spec: StoreSpec) -> Any:
    return cache.for_test(request, spec)


def test_corpus_size_and_coverage() -> None:
    """At least 60 cases; every language; each planner's strategies; documented errors."""
    assert len(CASES) >= 60
    langs = {c.name.split("/")[0] for c in CASES}
    assert {"window_sql", "match_recognize", "sase", "tpstream", "greta", "imprecise"} <= langs
    plans = {s.plan for c in CASES for s in c.strategies}
    assert {"replay", "auto", "all", "greedy", "budget", "optimal", "cpm", "index", "naive",
            "tree"} <= plans
    assert sum(c.expected_error is not None for c in CASES) >= 10
    assert any(c.store.ingest == "spark" for c in CASES)
    assert any(c.spark == "fast" for c in CASES)


@pytest.mark.parametrize("case, strategy", LOCAL)
def test_case(request: pytest.FixtureRequest, golden_stores: StoreCache, case: Case,
              strategy: Strategy) -> None:
    store = _store(request, golden_stores, case.store)
    problems = check(case, run(case, store, strategy), strategy.name)
    assert not problems, f"{case.path}:\n" + "\n".join(problems)


@pytest.mark.parametrize("case", SPARK)
def test_case_on_spark(request: pytest.FixtureRequest, golden_stores: StoreCache,
                       case: Case) -> None:
    request.getfixturevalue("spark")
    store = _store(request, golden_stores, case.store)
    got = run(case, store, spark_strategy(case), engine="spark")
    problems = check(case, got, "spark")
    assert not problems, f"{case.path}:\n" + "\n".join(problems)
