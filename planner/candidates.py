"""Planning around candidate events: the driver shared by the GRETA and imprecise-timestamp
planners.

Both planners find, per query variable, where its candidate events can occur
(:func:`~replaydb.planner.scopes.condition_scope`), turn those ranges into replay intervals by
a rule of their own (:mod:`replaydb.planner.greta_plan`, :mod:`replaydb.planner.imprecise_plan`)
and choose between those intervals and full replay by cost. :func:`plan_around_candidates` does
the common part: the checks that force full replay, the scopes, joining intervals across gaps
of at most ``join_events`` events (default: the per-interval cost), the cost, the plan value and EXPLAIN's section.

**Cost**, in the unit of one event read and pushed into the operator by full replay (full
replay costs the stream's events): the events inside the intervals (pushed into the operator,
estimated by interpolating times within leaves), plus the extra cost of reading the covered
leaves through intervals rather than in one sweep (their events times the calibrated ratio of
the two read weights less one, see ``replaydb calibrate``; never below zero: the leaves are a
subset of full replay's), plus ``interval_events`` per interval and one per index entry looked
up. The intervals are read in one sweep over the leaves they cover
(:meth:`~replaydb.store.snapshot.StreamSnapshot.read_interval_groups`) and pushed many per
batch, so an interval adds a boundary between two parts of a read and a break in a batch, not
a navigation: its default cost is one event (:data:`SWEEP_INTERVAL_EVENTS`), and intervals are
joined only across gaps of at most one event. A pattern plan's calibrated ``interval_events``
(``replaydb calibrate``) prices a navigation per interval, which these reads do not make. Full
replay is planned when the pruned plan costs more than ``max_fraction`` of it
(:class:`~replaydb.planner.options.CandidatePlannerOptions`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.errors import UsageError
from replaydb.planner.options import CandidatePlannerOptions
from replaydb.planner.pattern.cost import load_weights
from replaydb.planner.pattern.intervals import I64, Geometry
from replaydb.planner.scopes import (
    ConditionScope,
    events_within,
    join_gaps,
    leaves_covered,
    pruning_annotation,
)

PLAN_CHOICES = ("auto", "tree", "replay")

Scopes = Callable[..., dict[str, ConditionScope]]
"""``(snap, geo, use_index=, max_sel=, timings=, reads=) -> variable -> scope``."""
Intervals = Callable[[dict[str, ConditionScope], Geometry], tuple[np.ndarray, np.ndarray]]
"""``(scopes, geo) -> (region, intervals)``: sorted disjoint rows ``[a, b)`` (the intervals
before short gaps are joined)."""

SWEEP_INTERVAL_EVENTS = 1.0
"""Default cost of one replay interval of these planners, in events: a part boundary in a read
that sweeps the covered leaves once, and a break in a pushed batch (see the module
docstring)."""


@dataclass
class CandidatePlanState:
    """What the planner derived (EXPLAIN, benchmarks, tests)."""

    window: dict[str, int] = field(default_factory=dict)
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
        out: dict[str, Any] = {"window": dict(self.window), "strategy": strategy,
                               "why": self.why}
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
        for key, value in (("cost_events_est", self.cost), ("weights", self.weights),
                           ("index_reads", self.index_reads)):
            if value:
                out[key] = dict(value)
        return out


def checked_choice(ctx: Any, language: str) -> tuple[str, CandidatePlannerOptions]:
    """``--plan`` (one of :data:`PLAN_CHOICES`) and the planner's options."""
    choice = ctx.options.plan or "auto"
    if choice not in PLAN_CHOICES:
        raise UsageError(f"unknown --plan {choice!r} for {language} queries",
                         hint=f"choose one of {', '.join(PLAN_CHOICES)}")
    opts = ctx.planner_options
    return choice, opts if isinstance(opts, CandidatePlannerOptions) \
        else CandidatePlannerOptions()


def plan_around_candidates(ctx: Any, *, key: str, reason: str, op: Any,
                           st: CandidatePlanState, scopes: Scopes, intervals: Intervals,
                           blocker: str | None = None, nothing: str = "",
                           contiguous: bool = False) -> Any:
    """The plan of ``ctx`` (see the module docstring): full replay when ``blocker`` (a reason)
    is given, several streams are merged, or no scope narrows anything; else the intervals of
    ``intervals`` when they cost less. ``key`` names EXPLAIN's section and the state attribute
    (``<key>_state``); ``reason`` the interval scan's reason; ``nothing`` why no interval is
    left when none is; ``contiguous``: the planner's rule proves that the gaps decide no
    result (:attr:`~replaydb.replay.plan.IntervalScan.contiguous`)."""
    from replaydb.planner.query import Plan

    choice, opts = checked_choice(ctx, ctx.language)
    timings: dict[str, float] = {}

    def finish(strategy: str, why: str, iv: np.ndarray | None, geo: Geometry | None) -> Any:
        st.why = why
        estimates = ({"leaves": st.leaves[0], "events": st.leaves[1],
                      "events_pushed": round(st.cost.get("events_pushed", 0.0))}
                     if iv is not None and geo is not None else {})
        p = Plan.of(ctx, strategy, iv, operator=op, estimates=estimates,
                    reason="nothing" if iv is not None and not len(iv) else reason,
                    contiguous=contiguous and iv is not None and len(iv) > 1)
        p.details.defer(key, lambda: st.describe(geo, strategy))
        p.timings.update(timings)
        if geo is not None:
            p.annotate = pruning_annotation(f"{key}_pruning", geo.n_events, geo.n_leaves)
        setattr(p, f"{key}_state", st)
        return p

    if len(ctx.snapshots) != 1:
        return finish("replay", "full replay: several streams merged by event type", None, None)
    if blocker:
        return finish("replay", f"full replay: {blocker}", None, None)
    snap = ctx.snapshots[0]
    geo = Geometry.of(snap)
    if geo.n_events == 0:
        return finish("empty", "empty stream: nothing to replay", np.empty((0, 2), I64), geo)
    t0 = time.perf_counter()
    st.scopes = scopes(snap, geo, use_index=choice != "tree",
                       max_sel=opts.index_max_selectivity, timings=timings,
                       reads=st.index_reads)
    timings["scopes"] = time.perf_counter() - t0
    if all(s.source == "anywhere" for s in st.scopes.values()):
        return finish("replay", "full replay: no variable's local predicates narrow where "
                      "its events occur", None, geo)
    t0 = time.perf_counter()
    weights = load_weights(ctx.store)
    per_interval = (opts.interval_events if opts.interval_events is not None
                    else SWEEP_INTERVAL_EVENTS)
    join = opts.join_events if opts.join_events is not None else per_interval
    st.region, iv = intervals(st.scopes, geo)
    iv = join_gaps(iv, geo, join)
    st.intervals = iv
    st.leaves = leaves_covered(iv, geo)
    timings["intervals"] = time.perf_counter() - t0
    if iv.shape[0] == 0:
        return finish("pruned", f"nothing to replay: {nothing}", iv, geo)
    leaf_weight = weights.pio_weight(True) / weights.pio_weight(False)
    entries = float(st.index_reads.get("entries_returned", 0))
    pushed = events_within(iv, geo)
    cost = (pushed + max(leaf_weight - 1.0, 0.0) * st.leaves[1] + iv.shape[0] * per_interval
            + entries)
    st.cost = {"pruned": round(cost, 1), "full_replay": float(geo.n_events),
               "events_pushed": round(pushed, 1), "per_interval": per_interval,
               "leaf_weight": round(leaf_weight, 3), "index_entries": entries,
               "index_pages": float(st.index_reads.get("pages_read", 0))}
    st.weights = {"source": weights.source}
    if cost > opts.max_fraction * geo.n_events:
        return finish("replay", f"full replay: the pruned intervals ({iv.shape[0]:,}, "
                      f"{st.leaves[0]:,}/{geo.n_leaves:,} leaves) cost {cost:,.0f} events "
                      f"> {opts.max_fraction:g} x {geo.n_events:,}", None, geo)
    return finish("pruned", f"push about {pushed:,.0f} of {geo.n_events:,} events where "
                  f"{reason} can lie", iv, geo)
