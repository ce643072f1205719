"""Every plan strategy returns exactly the matches of full replay (property tests).

Random streams (ties in time, NULLs, two partitions, three event types) stored in real stores
with real LSM indexes on random columns; random MATCH_RECOGNIZE queries (sequences,
alternation, greedy/reluctant quantifiers, range conditions of every supported form mixed with
NOT, IS NULL, PREV, FIRST, cross-variable comparisons and aggregates, PARTITION BY, every AFTER
MATCH SKIP mode, ONE/ALL ROWS PER MATCH, PREV/NEXT in MEASURES, with and without WITHIN) and
random SASE+ queries (event types, Kleene plus and star, negation, equivalence, every strategy,
``b[i-1]`` and aggregates). Each query runs under auto, all, greedy, budget, optimal, cpm,
optimal without the CPM and all with the finest CPM; each distinct set of replay intervals is
executed and compared row by row with full replay.

The default run covers about 200 queries (16 streams x 6 queries per language, 8 plans each);
the slow-marked variants 2 x 400 x 6 = 4,800 queries.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.planner_cases import mr_queries, same_as_full_replay, sase_queries, stream_store, streams

FAST = settings(max_examples=16, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
SLOW = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
QUERIES_PER_STREAM = 6


def _run(data: st.DataObject, queries: st.SearchStrategy[str]) -> None:
    s = data.draw(streams())
    with stream_store(s) as store:
        for _ in range(QUERIES_PER_STREAM):
            same_as_full_replay(store, data.draw(queries), invalid_ok=True)


@FAST
@given(st.data())
def test_match_recognize_every_strategy_equals_full_replay(data) -> None:
    _run(data, mr_queries())


@FAST
@given(st.data())
def test_sase_every_strategy_equals_full_replay(data) -> None:
    _run(data, sase_queries())


def thousands(test):  # type: ignore[no-untyped-def]
    """A slow-suite property test over ``SLOW``'s examples: an hour, not the suite's 900 s
    (400 planned queries take longer on 2 busy cores)."""
    return pytest.mark.slow(pytest.mark.timeout(3600)(SLOW(given(st.data())(test))))


@thousands
def test_match_recognize_every_strategy_equals_full_replay_thousands(data) -> None:
    _run(data, mr_queries())


@thousands
def test_sase_every_strategy_equals_full_replay_thousands(data) -> None:
    _run(data, sase_queries())
