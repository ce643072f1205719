"""The golden query corpus (``tests/queries/``, format and regeneration in its README.md).

Every case runs with full replay and with each strategy it lists: each must give the case's
expected rows (so every index path equals its full-replay twin) and plan shape. One run per case
goes through the Spark engine with the default strategy; a few cases run it in the fast suite,
the rest with the slow tests. Stores are built once per distinct description and shared by
every case of the session. Every case also runs, with each of its strategies, against a copy of
its store on a real S3 endpoint (read in place through its ``s3://`` URI).
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
REMOTE = [pytest.param(c, id=c.name, marks=_marks(c, "object-store")) for c in CASES]


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


@pytest.fixture(scope="session")
def golden_remote(s3: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The copy of a golden store on the S3 endpoint (uploaded once per store)."""
    from replaydb.store.mirror import CacheOptions
    from replaydb.store.store import Store

    cache = CacheOptions(dir=str(tmp_path_factory.mktemp("golden-cache")))
    copies: dict[str, Any] = {}

    def remote(store: Any) -> Any:
        got = copies.get(str(store.path))
        if got is None:
            uri = s3.upload(store.path, f"s3://golden-corpus/{len(copies)}")
            got = copies[str(store.path)] = Store(uri, storage_options=s3.options, cache=cache)
        return got

    return remote


@pytest.mark.parametrize("case", REMOTE)
def test_case_on_object_store(request: pytest.FixtureRequest, golden_stores: StoreCache,
                              golden_remote: Any, case: Case) -> None:
    remote = golden_remote(_store(request, golden_stores, case.store))
    for strategy in case.strategies:
        if strategy.name in case.xfail:
            continue
        problems = check(case, run(case, remote, strategy), strategy.name)
        assert not problems, f"{case.path} [{strategy.name}]:\n" + "\n".join(problems)
