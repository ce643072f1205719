"""Pattern matching over events with imprecise (interval) timestamps (paper 003).

Every event's occurrence time is only known to lie in ``[lower, upper]`` (with a pmf, uniform by
default). A SASE+ sequence pattern is matched in every possible world (one instant per event);
matches are grouped by signature (the matched events' ids, here their ``seq``) and reported with
the tightest time range and the confidence (the probability of the worlds returning them), under
skip-till-any-match or skip-till-next-match.

Two frameworks compute this without enumerating worlds (``framework=``):

* ``"point"`` - stream expansion into point events, a skip-till-any point engine with the
  same-event check and NELT, collapse by Eq. 1-4 (:mod:`.point_based`);
* ``"event"`` (default; the faster one in bench/results/imprecise) - valid intervals on whole events (:mod:`.intervals`),
  with the methods ``"query_order"`` (default: sort into query order, one-pass incremental
  ``ext``; :mod:`.query_order`), ``"any_state"`` and ``"selectivity"`` (:mod:`.any_state`), and
  confidence by a DP over the valid intervals (Algorithm 2; :mod:`.kernels`, :mod:`.confidence`).

Live use::

    from replaydb.planner.lang.imprecise import parse, bind
    op = bind(parse("PATTERN SEQ(A a, B b) WHERE b.v > a.v WITHIN 10"), schema, None)
    op.push(batch)
    op.flush()
    op.results()

:mod:`.oracle` enumerates possible worlds (exact fractions) for testing on small inputs.
"""

from replaydb.operators.imprecise.config import (
    DEFAULT_FRAMEWORK,
    DEFAULT_METHOD,
    FRAMEWORKS,
    METHODS,
    STRATEGIES,
    Component,
    ImpreciseConfig,
    ReturnItem,
)
from replaydb.operators.imprecise.operator import ImprecisePatternOperator

__all__ = [
    "DEFAULT_FRAMEWORK",
    "DEFAULT_METHOD",
    "FRAMEWORKS",
    "METHODS",
    "STRATEGIES",
    "Component",
    "ImpreciseConfig",
    "ImprecisePatternOperator",
    "ReturnItem",
]
