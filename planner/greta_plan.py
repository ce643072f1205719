"""GRETA planner: replay only the events that can take part in a trend.

Registered in :data:`replaydb.planner.languages.PLANNERS` for the ``greta`` language.

**The rule.** GRETA aggregates over every trend under skip-till-any-match: a trend is a sequence
of events, each satisfying its variable's *local* predicates (its type on the type column, the
WHERE conjuncts on that variable or on no variable), whose adjacent events satisfy the *edge*
predicates (``S.price > NEXT(S).price``: the next event *of the trend*, not of the stream) and
the equivalence lists, all inside one window ``[k*slide, k*slide + within)``. A window's rows
depend only on its events that satisfy some variable's local predicates (positive or negated),
and a window without a trend emits no row. Hence:

1. an event that satisfies no variable's local predicates is in no trend, no negative trend and
   no edge of one: leaving it out changes no result;
2. with ``ts`` a START candidate (the main pattern's first variable) and ``te`` an END candidate
   (its last), every event of a trend in window ``k`` lies in ``[ts, te]`` for some
   ``k*slide <= ts <= te < k*slide + within``; a negated trend between two events of a trend
   (NOT in the middle, case 1) lies there too; one before the trend's first event (NOT first,
   case 3) lies in ``[k*slide, ts)``, one after its last (NOT last, case 2) in
   ``(te, k*slide + within)``. An event outside every such range (the *region*) is in no trend
   and no negated trend that decides one of a window's rows: leaving it out changes nothing.

The operator declares that it allows this (:attr:`~replaydb.operators.traits.Traits.skips_gaps`:
a gap between replay intervals keeps its state), so the planner replays the region intersected
with where some variable's candidates can occur, in time order, as one stream with gaps.

**Computing the region** from candidate time ranges ``C_S`` (starts) and ``C_E`` (ends), each a
superset of the true candidates (:func:`~replaydb.planner.scopes.condition_scope`: index
lookups, TAB+-tree leaf summaries, else anywhere). For a start range ``[a, b)`` the latest window
holding a start ends at ``L = floor((b-1)/slide)*slide + within``; with ``m`` the last end
candidate before ``L``, every trend starting in ``[a, b)`` lies in ``[a, m]`` (``[a, L)`` with
NOT last; from ``floor((a-within)/slide + 1)*slide``, the earliest window start holding ``a``,
with NOT first). Symmetrically for an end range ``[c, d)``: from the first start candidate at
or after the earliest window start holding ``c`` to ``d``. The region is the intersection of
the two unions (each contains every trend; see :func:`trend_region`). Every range only widens,
so the region contains every event that can take part: the rows equal full replay's, order
included (windows close in time order either way). Equivalence lists, GROUP-BY and edge
predicates only narrow the trends further, so they keep the rule sound without being used.

**When it does not apply**: several streams merged by event type (their seqs are not one
stream's positions) and an operator that does not declare ``skips_gaps`` plan full replay; so
does a plan whose cost exceeds ``max_fraction`` of full replay's, with the reason in EXPLAIN.

**Cost** and the choice against full replay: :mod:`replaydb.planner.candidates`. ``--plan``:
``auto`` (index lookups and tree summaries), ``tree`` (tree summaries only), ``replay``
(handled by the hub). Options: :class:`~replaydb.planner.options.CandidatePlannerOptions`.

Complexity: one index lookup per variable with a selective indexed condition, O(leaves)
vectorized tree tests per numeric condition, O(r log r) interval algebra over the r candidate
ranges.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from replaydb.planner.candidates import CandidatePlanState, checked_choice, plan_around_candidates
from replaydb.planner.pattern.conditions import Range
from replaydb.planner.pattern.intervals import (
    I64,
    Geometry,
    intersect_intervals,
    merge_halfopen,
)
from replaydb.planner.scopes import ConditionScope, condition_scope, scope_inputs


# --------------------------------------------------------------------------- the region
def _window_end(ts: np.ndarray, within: int, slide: int) -> np.ndarray:
    """End (exclusive) of the latest window holding time ``ts``."""
    return np.floor_divide(ts, slide) * slide + within


def _window_start(ts: np.ndarray, within: int, slide: int) -> np.ndarray:
    """Start of the earliest window holding time ``ts``."""
    return (np.floor_divide(ts - within, slide) + 1) * slide


def trend_region(starts: np.ndarray, ends: np.ndarray, within: int, slide: int, *,
                 before: bool = False, after: bool = False) -> np.ndarray:
    """The times where an event can take part in a trend, as sorted disjoint rows ``[a, b)``.

    ``starts`` / ``ends``: sorted disjoint rows holding every START / END candidate's time.
    ``before`` / ``after``: the pattern negates a sub-pattern before its first / after its
    last element (the window's start / end bound it). See the module docstring; the result
    contains ``[ts, te]`` for every start ``ts`` and end ``te >= ts`` that share a window
    (``[window start, te]`` with ``before``, ``[ts, window end)`` with ``after``). O(r log r)."""
    empty = np.empty((0, 2), I64)
    if starts.shape[0] == 0 or ends.shape[0] == 0:
        return empty
    # forward: each start range [a, b) reaches the last end before its latest window's end
    a, b = starts[:, 0], starts[:, 1]
    limit = _window_end(b - 1, within, slide)
    j = np.searchsorted(ends[:, 0], limit, side="left") - 1
    m = np.where(j >= 0, np.minimum(ends[np.maximum(j, 0), 1] - 1, limit - 1), a - 1)
    ok = m >= a
    lo = _window_start(a, within, slide) if before else a
    hi = limit if after else m + 1
    forward = merge_halfopen(lo[ok], hi[ok])
    # backward: each end range [c, d) reaches back to the first start in its earliest window
    c, d = ends[:, 0], ends[:, 1]
    first = _window_start(c, within, slide)
    i = np.searchsorted(starts[:, 1], first, side="right")
    n = np.where(i < starts.shape[0],
                 np.maximum(starts[np.minimum(i, starts.shape[0] - 1), 0], first), d)
    ok = n <= d - 1
    lo = first if before else n
    hi = _window_end(d - 1, within, slide) if after else d
    backward = merge_halfopen(lo[ok], hi[ok])
    return intersect_intervals(forward, backward)


# --------------------------------------------------------------------------- variables
def _roles(compiled: Any) -> dict[str, str]:
    """alias -> ``start``/``end``/``start, end``/``inside``/``negated`` (EXPLAIN)."""
    out: dict[str, str] = {}
    for g in compiled.graphs:
        for k, a in enumerate(g.states):
            if g.gid != 0:
                out[a] = "negated"
            else:
                role = [r for r, i in (("start", g.start), ("end", g.end)) if i == k]
                out[a] = ", ".join(role) or "inside"
    return out


def variable_scopes(compiled: Any, snap: Any, geo: Geometry, *, use_index: bool,
                    max_sel: float, timings: dict[str, float], reads: dict[str, int]
                    ) -> dict[str, ConditionScope]:
    """Where each variable's candidates can occur (every graph's states: positive and
    negated), from its local predicates as the operator classified them and its event type on
    the type column."""
    kinds, indexes, leaves = scope_inputs(snap)
    type_column = compiled.config.type_column
    out: dict[str, ConditionScope] = {}
    for g in compiled.graphs:
        for k, alias in enumerate(g.states):
            ty = g.types[k]
            extra = ([(type_column, (Range(ty, ty),))] if kinds.get(type_column) == "string"
                     else None)
            out[alias] = condition_scope(f"{alias} ({ty})", g.local[k], alias, kinds, indexes,
                                         geo, leaves, use_index=use_index, max_sel=max_sel,
                                         timings=timings, reads=reads, extra=extra,
                                         also=(ty,) if ty != alias else ())
    return out


def pruned_intervals(compiled: Any, scopes: dict[str, ConditionScope], geo: Geometry
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(region, intervals)``: :func:`trend_region` of the main pattern's start and end
    candidates, and the region where some variable's candidates can occur, clipped to the
    stream."""
    main = compiled.graphs[0]
    cases = {n.negation.case for n in compiled.negations if n.negation.parent == 0}
    region = trend_region(scopes[main.states[main.start]].times,
                          scopes[main.states[main.end]].times,
                          compiled.within, compiled.slide, before=3 in cases, after=2 in cases)
    region = intersect_intervals(region, np.array([[geo.t_min, geo.t_max + 1]], I64))
    anywhere = [s.times for s in scopes.values()]
    both = np.concatenate(anywhere) if anywhere else np.empty((0, 2), I64)
    union = merge_halfopen(both[:, 0].copy(), both[:, 1].copy())
    return region, intersect_intervals(region, union)


# --------------------------------------------------------------------------- entry point
def plan(ctx: Any) -> Any:
    """The planner entry point (``PLANNERS["greta"]``)."""
    checked_choice(ctx, "GRETA")
    t0 = time.perf_counter()
    op = ctx.bind()
    compiled = op.plan
    st = CandidatePlanState(window={"within": compiled.within, "slide": compiled.slide},
                            roles=_roles(compiled))
    bind_s = time.perf_counter() - t0

    def scopes(snap: Any, geo: Geometry, **kw: Any) -> dict[str, ConditionScope]:
        return variable_scopes(compiled, snap, geo, **kw)

    p = plan_around_candidates(
        ctx, key="greta", reason="trends", op=op, st=st, scopes=scopes,
        intervals=lambda sc, geo: pruned_intervals(compiled, sc, geo),
        blocker=None if op.traits().skips_gaps else "the operator resets at gaps",
        nothing="no window holds a start and an end candidate")
    p.timings["bind"] = bind_s
    return p
