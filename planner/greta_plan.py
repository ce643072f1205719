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

**Cost** (in events replayed, the unit of the pattern planner's calibrated weights, see
``replaydb calibrate``): the events of the leaves the intervals cover, weighted by the
calibrated cost of a leaf read through intervals against one read by full replay, plus
``interval_events`` per interval and one per index entry looked up; full replay costs the
stream's events. ``--plan``: ``auto`` (index lookups and tree summaries), ``tree`` (tree
summaries only), ``replay`` (handled by the hub). Options:
:class:`~replaydb.planner.options.GretaPlannerOptions`.

Complexity: one index lookup per variable with a selective indexed condition, O(leaves)
vectorized tree tests per numeric condition, O(r log r) interval algebra over the r candidate
ranges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.errors import UsageError
from replaydb.planner.options import GretaPlannerOptions
from replaydb.planner.pattern.conditions import Range
from replaydb.planner.pattern.cost import load_weights
from replaydb.planner.pattern.intervals import (
    I64,
    Geometry,
    coalesce_by_leaves,
    intersect_intervals,
    merge_halfopen,
)
from replaydb.planner.pattern.planner import _kinds
from replaydb.planner.scopes import ConditionScope, condition_scope, leaves_covered

PLAN_CHOICES = ("auto", "tree", "replay")


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


# --------------------------------------------------------------------------- plan state
@dataclass
class GretaPlanState:
    """What the planner derived (EXPLAIN, benchmarks, tests)."""

    within: int = 0
    slide: int = 0
    scopes: dict[str, ConditionScope] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    region: np.ndarray | None = None
    intervals: np.ndarray | None = None
    leaves: tuple[int, int] = (0, 0)
    cost: dict[str, float] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    index_reads: dict[str, int] = field(default_factory=dict)

    def describe(self, geo: Geometry | None, strategy: str) -> dict[str, Any]:
        out: dict[str, Any] = {"window": {"within": self.within, "slide": self.slide},
                               "strategy": strategy, "why": self.why}
        if geo is not None and self.scopes:
            out["variables"] = {a: {"role": self.roles.get(a, ""), **s.describe(geo)}
                                for a, s in self.scopes.items()}
        if self.region is not None:
            out["region_ranges"] = int(self.region.shape[0])
        if self.intervals is not None and geo is not None:
            lv, ev = self.leaves
            out["replay_intervals"] = int(self.intervals.shape[0])
            out["leaves_to_read"] = f"{lv}/{geo.n_leaves}"
            out["events_to_read_est"] = ev
            out["intervals_head"] = [[int(a), int(b)] for a, b in self.intervals[:8]]
        if self.cost:
            out["cost_events_est"] = dict(self.cost)
        if self.weights:
            out["weights"] = dict(self.weights)
        if self.index_reads:
            out["index_reads"] = dict(self.index_reads)
        return out


def _annotate(n_events: int, n_leaves: int) -> Any:
    def annotate(analyze: dict[str, Any]) -> None:
        rep = analyze.get("replay", {})
        ev, lv = int(rep.get("events", 0)), int(rep.get("leaves", 0))
        analyze["greta_pruning"] = {
            "events_read": ev, "leaves_read": lv, "bytes_read": int(rep.get("bytes", 0)),
            "pruned_fraction_events": 1.0 - ev / max(n_events, 1),
            "pruned_fraction_bytes": 1.0 - lv / max(n_leaves, 1)}
    return annotate


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
    kinds = _kinds(snap)
    indexes = snap.indexes()
    leaves = snap.tree.histogram(0) if snap.tree.height > 0 else {}
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


def pruned_intervals(compiled: Any, scopes: dict[str, ConditionScope], geo: Geometry,
                     join: float) -> tuple[np.ndarray, np.ndarray]:
    """``(region, intervals)``: :func:`trend_region` of the main pattern's start and end
    candidates, and the region where some variable's candidates can occur, clipped to the
    stream and joined across gaps of at most ``join`` leaves."""
    main = compiled.graphs[0]
    cases = {n.negation.case for n in compiled.negations if n.negation.parent == 0}
    region = trend_region(scopes[main.states[main.start]].times,
                          scopes[main.states[main.end]].times,
                          compiled.within, compiled.slide, before=3 in cases, after=2 in cases)
    region = intersect_intervals(region, np.array([[geo.t_min, geo.t_max + 1]], I64))
    anywhere = [s.times for s in scopes.values()]
    both = np.concatenate(anywhere) if anywhere else np.empty((0, 2), I64)
    union = merge_halfopen(both[:, 0].copy(), both[:, 1].copy())
    iv = intersect_intervals(region, union)
    return region, coalesce_by_leaves(iv, geo, join) if iv.shape[0] else iv


# --------------------------------------------------------------------------- entry point
def plan(ctx: Any) -> Any:
    """The planner entry point (``PLANNERS["greta"]``)."""
    from replaydb.planner.query import Plan

    choice = ctx.options.plan or "auto"
    if choice not in PLAN_CHOICES:
        raise UsageError(f"unknown --plan {choice!r} for GRETA queries",
                         hint=f"choose one of {', '.join(PLAN_CHOICES)}")
    opts = ctx.planner_options
    if not isinstance(opts, GretaPlannerOptions):
        opts = GretaPlannerOptions()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    op = ctx.bind()
    compiled = op.plan
    st = GretaPlanState(within=compiled.within, slide=compiled.slide,
                        roles=_roles(compiled))
    timings["bind"] = time.perf_counter() - t0

    def finish(strategy: str, why: str, intervals: np.ndarray | None,
               geo: Geometry | None) -> Any:
        st.why = why
        estimates = ({"events": st.leaves[1], "leaves": st.leaves[0]}
                     if intervals is not None and geo is not None else {})
        p = Plan.of(ctx, strategy, intervals, operator=op, estimates=estimates,
                    reason="nothing" if intervals is not None and not len(intervals)
                    else "trends")
        p.details.defer("greta", lambda: st.describe(geo, strategy))
        p.timings.update(timings)
        if geo is not None:
            p.annotate = _annotate(geo.n_events, geo.n_leaves)
        p.greta_state = st  # type: ignore[attr-defined]
        return p

    if len(ctx.snapshots) != 1:
        return finish("replay", "full replay: several streams merged by event type", None, None)
    if not op.traits().skips_gaps:
        return finish("replay", "full replay: the operator resets at gaps", None, None)
    snap = ctx.snapshots[0]
    geo = Geometry.of(snap)
    if geo.n_events == 0:
        return finish("empty", "empty stream: nothing to replay", np.empty((0, 2), I64), geo)
    t0 = time.perf_counter()
    st.scopes = variable_scopes(compiled, snap, geo, use_index=choice != "tree",
                                max_sel=opts.index_max_selectivity, timings=timings,
                                reads=st.index_reads)
    timings["scopes"] = time.perf_counter() - t0
    if all(s.source == "anywhere" for s in st.scopes.values()):
        return finish("replay", "full replay: no variable's local predicates narrow where "
                      "its events occur", None, geo)
    t0 = time.perf_counter()
    weights = load_weights(ctx.store)
    per_interval = (opts.interval_events if opts.interval_events is not None
                    else weights.interval_events)
    join = (opts.join_leaves if opts.join_leaves is not None
            else per_interval / max(snap.schema.leaf_capacity, 1))
    st.region, iv = pruned_intervals(compiled, st.scopes, geo, join)
    st.intervals = iv
    st.leaves = leaves_covered(iv, geo)
    timings["intervals"] = time.perf_counter() - t0
    if iv.shape[0] == 0:
        return finish("pruned", "nothing to replay: no window holds a start and an end "
                      "candidate", iv, geo)
    leaf_weight = weights.pio_weight(True) / weights.pio_weight(False)
    entries = float(st.index_reads.get("entries_returned", 0))
    cost = st.leaves[1] * leaf_weight + iv.shape[0] * per_interval + entries
    st.cost = {"pruned": round(cost, 1), "full_replay": float(geo.n_events),
               "per_interval": per_interval, "leaf_weight": round(leaf_weight, 3),
               "index_entries": entries}
    st.weights = {"source": weights.source}
    if cost > opts.max_fraction * geo.n_events:
        return finish("replay", f"full replay: the pruned intervals ({iv.shape[0]:,}, "
                      f"{st.leaves[0]:,}/{geo.n_leaves:,} leaves) cost {cost:,.0f} events "
                      f"> {opts.max_fraction:g} x {geo.n_events:,}", None, geo)
    return finish("pruned", f"replay the {st.leaves[1]:,} of {geo.n_events:,} events where "
                  "trends can lie (start to end candidates per window)", iv, geo)
