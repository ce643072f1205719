"""TPStream planner: replay only where every situation stream can occur (issue 9).

Registered in :data:`replaydb.planner.languages.PLANNERS` for the ``tpstream`` language.

**Why pruning is possible.** A match takes one situation of *every* defined situation stream
(Def. 5.6; pairs without a constraint are free) and satisfies ``t_detect - T0 <= w`` where
``T0 = min(ts)`` over its members and ``t_detect`` is ``max(te)`` (normal mode) or the earliest
detection time (low latency; see :mod:`replaydb.operators.tpstream.lowlatency`). A member's
first event satisfies its condition and lies at ``ts`` in ``[T0, T0 + w]``; every event the
operator needs for the match - member events, end events, the events at which members become
known - lies in ``[T0, T0 + w]`` too (RETURN aggregates and duration constraints depend only on a
run's own events and its end event). So, with ``C_d`` the times at which an event *may* satisfy
situation ``d``'s condition::

    T0  in  F = (U_d C_d)  intersected with  n_d (C_d - [0, w])

(``T0`` is some member's candidate time, and every stream ``d`` has a candidate in
``[T0, T0 + w]``).

**Where a condition can hold** (``C_d``, per situation): :func:`~replaydb.planner.scopes.condition_scope`
(an index lookup on the most selective indexed range condition when its estimated selectivity
is at most ``index_max_selectivity``, default 0.01; the TAB+-tree's leaf summaries; otherwise
anywhere, with the reason in EXPLAIN). A condition with an empty range (``x > 5 AND x < 3``),
an AT LEAST bound above ``w + 1`` (no member can last that long before its match is detected)
or an unsatisfiable PATTERN means no match at all: no interval is replayed.

If every situation can occur anywhere the plan is full replay.

**Padding rule (exact).** A situation is a maximal run: its start is exact only if the event
*before* its first event (in its partition) is read, its end only if the first event after it is
read. For a feasible range ``[f0, f1]`` of ``T0`` the planner replays the half-open interval
``[prev(f0), f1 + w + 1)`` (clipped to the stream), where ``prev(f0)`` is a lower bound of the
time of the last event before ``f0``: ``max(t_max of the last leaf ending before f0,
f0 - gap_max)``, or ``f0`` when no event precedes it. Intervals are merged, and joined when at
most ``join_leaves`` whole leaves separate them (always sound: see below). Replay resets the
operator between intervals (``end_interval``), so each interval behaves like a stream of its
own; its two artefacts are handled as follows.

* *Cut starts.* A run starting at the first event of the interval (of its partition) may
  continue a run that began before the interval. Unpartitioned: the first time step ``a`` of a
  merged interval is never a feasible start (``a <= prev(f0) < f0`` for the interval's first
  feasible range; had ``a`` been feasible, its own padded piece would reach further back and
  have been merged in). A match containing a run cut at ``a`` would have ``T0 = a`` and its
  members' candidates within ``[a, a + w]`` - i.e. ``a`` feasible. So no cut run takes part in
  any reported match, and every needed run starts after ``a`` with its previous event read.
  That is why the padding goes to the previous event: an interval starting at ``f0`` itself
  can report a cut run as a situation (tested). PARTITION BY: a partition's previous event can
  lie anywhere before the interval, so the :class:`~replaydb.replay.guard.IntervalGuard` around the operator checks
  every result row with a member starting at its partition's first time step ``f_p`` in the
  interval: if every event of the partition at ``f_p`` satisfies the member's condition (else
  that run is empty and the member follows an event of the interval) and so does the
  partition's last event before the interval (a backward leaf search, cached per interval and
  partition), the member is cut and the row is dropped.
* *Cut ends.* With ``end_policy="drop"`` runs open at an interval's end are dropped, and the
  needed ones are never open there (their end event lies in ``[T0, T0 + w]``, inside the
  interval). With ``"close"`` ``end_interval`` closes them at ``t_last + 1`` (``t_last``: the
  interval's last event time); unless ``t_last`` is the stream's last time such a situation is
  not one of full replay (the run goes on to a later event), so the guard drops rows with a
  member ``te > t_last``. A true member ends at an event of the interval (``te <= t_last``), and
  one closed at the stream's end is closed identically by the final interval (it reaches
  ``t_max``: ``T0 + w >= te - 1``). PARTITION BY with ``"close"`` plans full replay (whether a
  partition's run closes at an interval's end depends on that partition's later events).
* Duration constraints (AT LEAST / AT MOST / BETWEEN) and RETURN aggregates depend only on a
  run's events and its end event, which an interval holding ``[T0, T0 + w]`` contains whole;
  a member must last at most ``w`` (normal) or reach its known time within ``w``
  (low latency), so ``AT LEAST d`` with ``d > w + 1`` means no match.

**Exactness.** Every match of full replay has ``T0`` in ``F`` and its events in one interval
(intervals contain ``[prev(T0), T0 + w]`` and are disjoint), where all its members are derived
with their true bounds, known times and aggregates: it is found once, at the same detection time
and ``detection_seq``. Conversely every row kept consists of true situations (exact start, exact
end), and a match is a property of its members alone, so it is a match of full replay. Output
order: intervals are replayed in time order and a match's detection lies inside its interval, so
the concatenated rows are in full replay's order (closed-at-end matches come last in both).
PARTITION BY: the intervals apply to all partitions. Several streams merged by event type are
planned as full replay.

``--plan``: ``auto`` (index and tree), ``tree`` (tree summaries only, no index lookups),
``replay`` (handled by the hub). Cost: replaying the intervals costs their leaves' events plus
``interval_events`` per interval (the operator's flush and reset and the first leaf reads of an
interval; default 30,000); intervals separated by fewer than
``interval_events / leaf_capacity`` leaves are joined, and full replay is planned when the
pruned cost exceeds ``max_fraction`` (default 0.9) of the stream's events. Options:
``ctx.planner_options``, a :class:`~replaydb.planner.options.TPStreamPlannerOptions`
(``index_max_selectivity``, ``interval_events``, ``join_leaves`` (overrides the derived one),
``max_fraction``).

Complexity: one index range lookup per situation with a selective indexed condition (its
entries, sorted by seq), O(leaves) vectorized tree tests per numeric condition, O(k log k)
interval algebra over the k candidate ranges; the guard costs O(rows) per result batch plus one
backward search per uncertain (interval, partition).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.errors import UsageError
from replaydb.planner.options import TPStreamPlannerOptions
from replaydb.planner.pattern.intervals import (
    I64,
    Geometry,
    coalesce_by_leaves,
    intersect_intervals,
    merge_halfopen,
)
from replaydb.planner.scopes import (
    ConditionScope,
    condition_scope,
    leaves_covered,
    scope_inputs,
)
from replaydb.replay.plan import IntervalScan, SituationGuard
from replaydb.store.interval_list import IntervalList

PLAN_CHOICES = ("auto", "tree", "replay")
DEFAULT_INTERVAL_EVENTS = TPStreamPlannerOptions.interval_events
"""Fixed cost of one replay interval, in events replayed (the planner option's default)."""


# --------------------------------------------------------------------------- interval algebra
def feasible_starts(scopes: list[np.ndarray], w: int) -> np.ndarray:
    """Rows ``[a, b)`` of times ``T0`` where a match can start: ``T0`` in some ``C_d`` and every
    ``C_d`` meets ``[T0, T0 + w]`` (closed ``[lo, hi]`` becomes ``[lo - w, hi]``)."""
    if not scopes or any(s.shape[0] == 0 for s in scopes):
        return np.empty((0, 2), I64)
    allc = np.concatenate(scopes)
    out = merge_halfopen(allc[:, 0].copy(), allc[:, 1].copy())
    for s in scopes:
        shifted = merge_halfopen(s[:, 0] - w, s[:, 1].copy())
        out = intersect_intervals(out, shifted)
        if out.shape[0] == 0:
            break
    return out


def prev_event_bound(geo: Geometry, f0: np.ndarray) -> np.ndarray:
    """A time ``<=`` that of the last event before ``f0`` (``f0`` when there is none)."""
    f0 = np.asarray(f0, I64)
    i = np.searchsorted(geo.leaf_t_max, f0, side="left")
    none_before = (i == 0) & (geo.leaf_t_min[0] >= f0) if geo.n_leaves else np.ones(f0.size, bool)
    lb = np.where(i > 0, geo.leaf_t_max[np.maximum(i - 1, 0)], geo.t_min)
    if geo.gap_max is not None:
        lb = np.maximum(lb, f0 - geo.gap_max)
    return np.where(none_before, f0, np.minimum(lb, f0))


def replay_intervals(feasible: np.ndarray, geo: Geometry, w: int, join_leaves: float
                     ) -> np.ndarray:
    """Padded, merged replay intervals for feasible starts (see the padding rule)."""
    if feasible.shape[0] == 0:
        return np.empty((0, 2), I64)
    a = np.maximum(prev_event_bound(geo, feasible[:, 0]), geo.t_min)
    b = np.minimum(feasible[:, 1] + w, geo.t_max + 1)
    keep = b > a
    iv = merge_halfopen(a[keep], b[keep])
    return coalesce_by_leaves(iv, geo, join_leaves) if iv.shape[0] else iv


# --------------------------------------------------------------------------- entry point
@dataclass
class TPStreamPlanState:
    """What the planner derived (EXPLAIN, benchmarks)."""

    window: int = 0
    scopes: list[ConditionScope] = field(default_factory=list)
    feasible: np.ndarray | None = None
    intervals: np.ndarray | None = None
    leaves: tuple[int, int] = (0, 0)
    interval_events: float = DEFAULT_INTERVAL_EVENTS
    notes: list[str] = field(default_factory=list)
    index_reads: dict[str, int] = field(default_factory=dict)
    geo: Geometry | None = None

    def _check(self) -> None:
        """Invariants: situation ranges and intervals sorted, disjoint, non-empty; feasible
        starts inside the union of the situations' ranges; every feasible range ``[f0, f1)``
        inside one interval together with its padding ``[prev(f0), f1 + w)`` (clipped)."""
        def ok(iv: np.ndarray) -> None:
            assert iv.ndim == 2 and (iv.shape[0] == 0 or iv.shape[1] == 2)
            assert np.all(iv[:, 1] > iv[:, 0]), "empty range"
            assert np.all(iv[1:, 0] >= iv[:-1, 1]), "ranges overlap or unsorted"

        for sc in self.scopes:
            ok(sc.times)
        if self.feasible is None or self.geo is None:
            return
        ok(self.feasible)
        allc = np.concatenate([sc.times for sc in self.scopes]) if self.scopes else None
        if allc is not None and self.feasible.shape[0]:
            u = merge_halfopen(allc[:, 0].copy(), allc[:, 1].copy())
            assert intersect_intervals(self.feasible, u).tolist() == self.feasible.tolist()
        if self.intervals is None:
            return
        iv, geo = self.intervals, self.geo
        ok(iv)
        if self.feasible.shape[0]:
            a = np.maximum(prev_event_bound(geo, self.feasible[:, 0]), geo.t_min)
            b = np.minimum(self.feasible[:, 1] + self.window, geo.t_max + 1)
            k = np.searchsorted(iv[:, 0], a, side="right") - 1
            assert np.all(k >= 0), "a feasible range before every interval"
            assert np.all(iv[k, 0] <= a) and np.all(iv[k, 1] >= b), "padding not covered"


def _describe(st: TPStreamPlanState, geo: Geometry | None, strategy: str) -> dict[str, Any]:
    out: dict[str, Any] = {"window": st.window, "strategy": strategy}
    if geo is not None:
        out["situations"] = {s.name: s.describe(geo) for s in st.scopes}
        if st.feasible is not None:
            out["feasible_start_ranges"] = int(st.feasible.shape[0])
        if st.intervals is not None:
            lv, ev = st.leaves
            out["replay_intervals"] = int(st.intervals.shape[0])
            out["leaves_to_read"] = f"{lv}/{geo.n_leaves}"
            out["events_to_read_est"] = ev
            out["pruned_fraction_events_est"] = 1.0 - ev / max(geo.n_events, 1)
            out["pruned_fraction_bytes_est"] = 1.0 - lv / max(geo.n_leaves, 1)
            out["cost_events_est"] = {
                "pruned": ev + int(st.intervals.shape[0]) * st.interval_events,
                "full_replay": geo.n_events, "per_interval": st.interval_events}
            out["intervals_head"] = [[int(a), int(b)] for a, b in st.intervals[:8]]
    if st.index_reads:
        out["index_reads"] = dict(st.index_reads)
    if st.notes:
        out["notes"] = list(st.notes)
    return out


def _annotate(st: TPStreamPlanState, n_events: int, n_leaves: int) -> Any:
    def annotate(analyze: dict[str, Any]) -> None:
        rep = analyze.get("replay", {})
        ev = int(rep.get("events", 0))
        lv = int(rep.get("leaves", 0))
        d: dict[str, Any] = {"events_read": ev, "leaves_read": lv,
                             "bytes_read": int(rep.get("bytes", 0)),
                             "pruned_fraction_events": 1.0 - ev / max(n_events, 1),
                             "pruned_fraction_bytes": 1.0 - lv / max(n_leaves, 1)}
        g = analyze.get("guard")
        if g is not None:
            d["guard_rows_dropped_cut_start"] = g["rows_dropped_cut_start"]
            d["guard_rows_dropped_cut_end"] = g["rows_dropped_cut_end"]
            d["guard_backward_searches"] = g["backward_searches"]
            d["guard_events_read"] = g["events_read"]
        analyze["tpstream_pruning"] = d
    return annotate


def plan(ctx: Any) -> Any:
    """The planner entry point (``PLANNERS["tpstream"]``)."""
    from replaydb.planner.query import Plan

    choice = ctx.options.plan or "auto"
    if choice not in PLAN_CHOICES:
        raise UsageError(f"unknown --plan {choice!r} for TPStream queries",
                         hint=f"choose one of {', '.join(PLAN_CHOICES)}")
    timings: dict[str, float] = {}
    st = TPStreamPlanState()
    opts = ctx.planner_options
    if not isinstance(opts, TPStreamPlannerOptions):
        opts = TPStreamPlannerOptions()
    t0 = time.perf_counter()
    op = ctx.bind()
    cfg = op.config
    w = int(cfg.window)
    st.window = w
    timings["bind"] = time.perf_counter() - t0

    def finish(strategy: str, intervals: list[tuple[int, int]] | None,
               geo: Geometry | None, source: Any = None) -> Any:
        p = Plan.of(ctx, strategy, intervals, operator=op, source=source,
                    reason="nothing" if intervals is not None and not len(intervals)
                    else "situations")
        p.details["tpstream"] = _describe(st, geo, strategy)
        if st.notes:
            p.details["note"] = "; ".join(st.notes)
        p.timings.update(timings)
        if geo is not None:
            p.annotate = _annotate(st, geo.n_events, geo.n_leaves)
        p.tpstream_state = st  # type: ignore[attr-defined]
        return p

    if len(ctx.snapshots) != 1:
        st.notes.append("several streams merged by event type: full replay")
        return finish("replay", None, None)
    snap = ctx.snapshots[0]
    geo = Geometry.of(snap)
    st.geo = geo
    if geo.n_events == 0:
        st.notes.append("empty stream: nothing to replay")
        return finish("empty", [], geo)
    if op.unsatisfiable:
        st.notes.append("the PATTERN's constraints on one pair exclude each other: no match")
        return finish("empty", [], geo)
    if cfg.partition_by and cfg.end_policy == "close":
        st.notes.append("PARTITION BY with end_policy='close': whether a partition's run open at "
                        "an interval's end closes there depends on the partition's later events: "
                        "full replay")
        return finish("replay", None, geo)
    for s in cfg.situations:
        if s.min_duration is not None and s.min_duration > w + 1:
            st.notes.append(f"situation {s.name}: AT LEAST {s.min_duration} exceeds the window "
                            f"{w} (+1): no match")
            return finish("empty", [], geo)
    t0 = time.perf_counter()
    kinds, indexes, leaves = scope_inputs(snap)
    use_index = choice != "tree"
    max_sel = opts.index_max_selectivity
    var = cfg.stream_alias or ""
    for s in cfg.situations:
        st.scopes.append(condition_scope(s.name, s.condition, var, kinds, indexes, geo, leaves,
                                         use_index=use_index, max_sel=max_sel, timings=timings,
                                         reads=st.index_reads))
    timings["scopes"] = time.perf_counter() - t0
    if any(sc.source == "never" for sc in st.scopes):
        st.notes.append("a situation's range conditions can never hold: no match")
        st.feasible = np.empty((0, 2), I64)
        st.intervals = np.empty((0, 2), I64)
        return finish("empty", [], geo)
    if all(sc.source == "anywhere" for sc in st.scopes):
        st.notes.append("no situation's condition narrows where it can occur (no usable range "
                        "on an indexed attribute, tree summaries prune nothing): full replay")
        return finish("replay", None, geo)
    t0 = time.perf_counter()
    st.feasible = feasible_starts([sc.times for sc in st.scopes], w)
    st.interval_events = opts.interval_events
    join = (opts.join_leaves if opts.join_leaves is not None
            else st.interval_events / max(snap.schema.leaf_capacity, 1))
    iv = replay_intervals(st.feasible, geo, w, join)
    st.intervals = iv
    st.leaves = leaves_covered(iv, geo)
    timings["intervals"] = time.perf_counter() - t0
    if iv.shape[0] == 0:
        st.notes.append("no time where every situation stream can occur within the window")
        return finish("pruned", [], geo)
    cost = st.leaves[1] + iv.shape[0] * st.interval_events
    if cost > opts.max_fraction * geo.n_events:
        st.notes.append(f"intervals cover {st.leaves[0]}/{geo.n_leaves} leaves in "
                        f"{iv.shape[0]} intervals (cost {cost:,.0f} events incl. "
                        f"{st.interval_events:,.0f} per interval): full replay is cheaper")
        return finish("replay", None, geo)
    guard = SituationGuard(int(geo.t_min), int(geo.t_max))
    return finish("pruned", iv, geo, IntervalScan(IntervalList.of(iv), "situations", guard))
