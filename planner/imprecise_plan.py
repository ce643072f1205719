"""Imprecise-timestamp planner: replay only around the candidates of the first and last
components.

Registered in :data:`replaydb.planner.languages.PLANNERS` for the ``imprecise`` language (SASE+
over a stream whose events carry uncertainty intervals ``[lower, upper]``; the store orders them
by ``lower``, its time ``t``).

**The rule** (possible-worlds semantics). A match ``SEQ(e_1, ..., e_l) WITHIN W`` places its
events at points ``t_1 < ... < t_l`` with ``t_l - t_1 < W``, each inside its event's interval.
Its first event is a candidate of component 1 (its type and the WHERE conjuncts on its variable
alone), its last one a candidate of component ``l``. Every event the operator consults for the
match - its own, and under skip-till-next-match every event that could take a point between two
of them - can take a point in ``[t_1, t_l]``, so it has ``upper >= lower(e_1)`` (with
``t_1 >= lower(e_1)``), ``lower <= upper(e_1) + W - 1``, ``upper >= lower(e_l) - W + 1`` and
``lower <= upper(e_l)``. Replaying, for every first candidate, the ``lower`` range
``[first leaf whose running maximum of upper reaches lower(e_1), upper(e_1) + W)`` and, for
every last candidate, ``[first leaf reaching lower(e_l) - W + 1, upper(e_l) + 1)``, intersected,
therefore contains each match's events together with everything that decides it; the operator
resets between intervals, so each interval is a stream of its own, and a match is reported by
the interval that holds it, with full replay's confidence (a signature's confidence depends only
on the events that can take a point in its span). Candidates' bounds come from their ranges
widened to whole leaves: the TAB+-tree's per-leaf maximum of ``upper`` bounds ``upper``, its
running maximum over the leaves bounds how far back an event can reach forward in time - the
uncertainty ``delta`` on both sides, exact at leaf granularity. Both skip-till-any-match and
skip-till-next-match, and the event-based and point-based evaluation, see the same events.

Output order: intervals are replayed in time order and a match is emitted by its interval in
order of ``(upper(e_1) + W - 1, signature)``; a later interval's first candidate has a larger
key, so the concatenated rows are full replay's rows in full replay's order.

Cost, ``--plan`` and options: :mod:`replaydb.planner.candidates`.

Complexity: one index lookup per component with a selective indexed condition, O(leaves)
vectorized tree tests, O(r log r) interval algebra over the r candidate ranges.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from replaydb.operators import expr as ex
from replaydb.planner.candidates import CandidatePlanState, checked_choice, plan_around_candidates
from replaydb.planner.pattern.conditions import Range
from replaydb.planner.pattern.intervals import (
    I64,
    Geometry,
    coalesce_by_leaves,
    intersect_intervals,
    merge_halfopen,
)
from replaydb.planner.pattern.planner import _kinds
from replaydb.planner.scopes import ConditionScope, condition_scope


# --------------------------------------------------------------------------- leaf bounds
class UpperBounds:
    """Per-leaf bounds of the ``upper`` column: its maximum per leaf and the running maximum
    over the leaves in time order."""

    def __init__(self, geo: Geometry, leaf_upper_max: np.ndarray) -> None:
        self.geo = geo
        self.max = np.asarray(leaf_upper_max, np.int64)
        self.running = np.maximum.accumulate(self.max) if self.max.size else self.max

    def reach_start(self, x: np.ndarray) -> np.ndarray:
        """A ``lower`` time at or before that of every event with ``upper >= x``: the first
        time of the first leaf whose running maximum reaches ``x`` (the stream's end when
        none does)."""
        i = np.searchsorted(self.running, x, side="left")
        ends = np.append(self.geo.leaf_t_min, self.geo.t_max + 1)
        return ends[i]

    def upper_of(self, rows: np.ndarray) -> np.ndarray:
        """Per row ``[a, b)`` of ``lower`` times, a bound of ``upper`` of the events in it: the
        maximum over the leaves that overlap the row."""
        geo = self.geo
        first = np.searchsorted(geo.leaf_t_max, rows[:, 0], side="left")
        last = np.searchsorted(geo.leaf_t_min, rows[:, 1] - 1, side="right") - 1
        first = np.minimum(first, geo.n_leaves - 1)
        last = np.maximum(last, first)
        padded = np.append(self.max, self.max[-1])
        idx = np.empty(2 * rows.shape[0], np.int64)
        idx[0::2], idx[1::2] = first, last + 1
        return np.maximum.reduceat(padded, idx)[0::2]


def match_region(first: np.ndarray, last: np.ndarray, bounds: UpperBounds, window: int
                 ) -> np.ndarray:
    """The ``lower`` times to replay (see the module docstring) for first-component
    candidate rows ``first`` and last-component rows ``last``: sorted disjoint rows."""
    if first.shape[0] == 0 or last.shape[0] == 0:
        return np.empty((0, 2), I64)
    lo = np.minimum(first[:, 0], bounds.reach_start(first[:, 0]))
    hi = np.maximum(first[:, 1], bounds.upper_of(first) + window)
    forward = merge_halfopen(lo, hi)
    lo = np.minimum(last[:, 0], bounds.reach_start(last[:, 0] - window + 1))
    hi = np.maximum(last[:, 1], bounds.upper_of(last) + 1)
    backward = merge_halfopen(lo, hi)
    return intersect_intervals(forward, backward)


# --------------------------------------------------------------------------- components
def component_scopes(cfg: Any, snap: Any, geo: Geometry, *, use_index: bool, max_sel: float,
                     timings: dict[str, float], reads: dict[str, int]
                     ) -> dict[str, ConditionScope]:
    """Where the first and the last component's candidates can occur: their type on the type
    column and the WHERE conjuncts on their variable alone (the others widen to TRUE)."""
    kinds = _kinds(snap)
    indexes = snap.indexes()
    leaves = snap.tree.histogram(0) if snap.tree.height > 0 else {}
    where = ex.and_all(list(cfg.predicates)) if cfg.predicates else None
    out: dict[str, ConditionScope] = {}
    for c in dict.fromkeys((cfg.components[0], cfg.components[-1])):
        extra = ([(cfg.type_column, (Range(c.type_name, c.type_name),))]
                 if kinds.get(cfg.type_column) == "string" else None)
        out[c.var] = condition_scope(f"{c.var} ({c.type_name})", where, c.var, kinds, indexes,
                                     geo, leaves, use_index=use_index, max_sel=max_sel,
                                     timings=timings, reads=reads, extra=extra)
    return out


def pruned_intervals(cfg: Any, snap: Any, scopes: dict[str, ConditionScope], geo: Geometry,
                     join: float) -> tuple[np.ndarray, np.ndarray]:
    """``(region, intervals)``: :func:`match_region` clipped to the stream, joined across gaps
    of at most ``join`` leaves."""
    leaves = snap.tree.histogram(0)
    bounds = UpperBounds(geo, leaves[f"{cfg.upper_column}.max"])
    region = match_region(scopes[cfg.components[0].var].times,
                          scopes[cfg.components[-1].var].times, bounds, cfg.window)
    region = intersect_intervals(region, np.array([[geo.t_min, geo.t_max + 1]], I64))
    return region, coalesce_by_leaves(region, geo, join) if region.shape[0] else region


def _blocker(cfg: Any, snap: Any) -> str | None:
    if cfg.lower_column != "t":
        return f"the lower bound {cfg.lower_column!r} is not the stream's time"
    if snap.tree.height == 0 or f"{cfg.upper_column}.max" not in snap.tree.histogram(0):
        return f"no per-leaf summary of the upper bound {cfg.upper_column!r}"
    return None


# --------------------------------------------------------------------------- entry point
def plan(ctx: Any) -> Any:
    """The planner entry point (``PLANNERS["imprecise"]``)."""
    checked_choice(ctx, "imprecise-timestamp")
    t0 = time.perf_counter()
    op = ctx.bind()
    cfg = op.cfg
    roles = {c.var: "first" for c in cfg.components[:1]}
    roles[cfg.components[-1].var] = "first, last" if cfg.length == 1 else "last"
    st = CandidatePlanState(window={"within": cfg.window}, roles=roles)
    bind_s = time.perf_counter() - t0
    snap = ctx.snapshots[0]

    def scopes(snap: Any, geo: Geometry, **kw: Any) -> dict[str, ConditionScope]:
        return component_scopes(cfg, snap, geo, **kw)

    p = plan_around_candidates(
        ctx, key="imprecise", reason="matches", op=op, st=st, scopes=scopes,
        intervals=lambda sc, geo, join: pruned_intervals(cfg, snap, sc, geo, join),
        blocker=_blocker(cfg, snap) if len(ctx.snapshots) == 1 else None,
        nothing="no first candidate has a last candidate within reach")
    p.timings["bind"] = bind_s
    return p
