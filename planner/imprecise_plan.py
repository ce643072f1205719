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
therefore contains each match's events together with everything that decides it, all in one
interval (for a match with first event ``a`` and last ``c`` they lie in the intersection of
``a``'s and ``c``'s ranges, itself one range). A signature's confidence depends only on the
events that can take a point in its span, so each match is found with full replay's
confidence; and a signature of the replayed events that is no match of the full stream is none
of the replayed ones either: a positive confidence among the replayed events needs a world
placing its events in order within ``W`` (then the intersection above holds every event that
can spoil it, and the confidences agree), and without one both are zero. The gaps therefore
decide no result and the intervals are fed to the operator as one stream
(:attr:`~replaydb.replay.plan.IntervalScan.contiguous`: no reset and no end of input per
interval; Spark's interval tasks end each interval, which gives the same rows). Candidates'
bounds come from their ranges
widened to whole leaves: the TAB+-tree's per-leaf maximum of ``upper`` bounds ``upper``, its
running maximum over the leaves bounds how far back an event can reach forward in time - the
uncertainty ``delta`` on both sides, exact at leaf granularity, and no further back than the
stream's largest uncertainty (one read of the two bound columns per stream version); where a
component's candidates come from an index lookup, their own upper bounds are read at their
seqs. Both skip-till-any-match and
skip-till-next-match, and the event-based and point-based evaluation, see the same events.

Output order: the operator emits matches in order of ``(upper(e_1) + W - 1, signature)`` as in
full replay (and a later interval's first candidate has a larger key, so ending each interval
keeps that order too).

Cost, ``--plan`` and options: :mod:`replaydb.planner.candidates`.

Complexity: one index lookup per component with a selective indexed condition, O(leaves)
vectorized tree tests, O(r log r) interval algebra over the r candidate ranges.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow.compute as pc

from replaydb.operators import expr as ex
from replaydb.planner.candidates import CandidatePlanState, checked_choice, plan_around_candidates
from replaydb.planner.pattern.conditions import Range
from replaydb.planner.pattern.intervals import (
    I64,
    Geometry,
    intersect_intervals,
    merge_halfopen,
)
from replaydb.planner.scopes import ConditionScope, condition_scope, scope_inputs


# --------------------------------------------------------------------------- leaf bounds
class UpperBounds:
    """Per-leaf bounds of the ``upper`` column: its maximum per leaf and the running maximum
    over the leaves in time order."""

    def __init__(self, geo: Geometry, leaf_upper_max: np.ndarray,
                 exact: tuple[np.ndarray, np.ndarray] | None = None,
                 max_width: int | None = None) -> None:
        self.geo = geo
        self.max_width = max_width
        """The stream's largest ``upper - lower`` (None: unknown): an event reaching ``x``
        starts at or after ``x - max_width``."""
        self.max = np.asarray(leaf_upper_max, np.int64)
        self.running = np.maximum.accumulate(self.max) if self.max.size else self.max
        self.exact = exact
        """``(times, uppers)`` of candidate events sorted by time, when read: the upper bound
        of a row's candidates is then their own maximum (rows hold no other candidate)."""

    def _exact_upper_of(self, rows: np.ndarray) -> np.ndarray:
        t, up = self.exact  # type: ignore[misc]
        a = np.searchsorted(t, rows[:, 0], side="left")
        b = np.searchsorted(t, rows[:, 1], side="left")
        padded = np.append(up, np.iinfo(np.int64).min)
        idx = np.empty(2 * rows.shape[0], np.int64)
        idx[0::2], idx[1::2] = a, b
        got = np.maximum.reduceat(padded, idx)[0::2]
        return np.where(b > a, got, rows[:, 1] - 1)

    def reach_start(self, x: np.ndarray) -> np.ndarray:
        """A ``lower`` time at or before that of every event with ``upper >= x``: the first
        time of the first leaf whose running maximum reaches ``x`` (the stream's end when
        none does)."""
        i = np.searchsorted(self.running, x, side="left")
        ends = np.append(self.geo.leaf_t_min, self.geo.t_max + 1)
        start = ends[i]
        return start if self.max_width is None else np.maximum(start, x - self.max_width)

    def upper_of(self, rows: np.ndarray) -> np.ndarray:
        """Per row ``[a, b)`` of ``lower`` times, a bound of ``upper`` of the events in it: the
        candidates' own maximum where read, else the maximum over the leaves that overlap the
        row, and never above ``b - 1 + max_width``."""
        if self.exact is not None:
            return self._exact_upper_of(rows)
        geo = self.geo
        first = np.searchsorted(geo.leaf_t_max, rows[:, 0], side="left")
        last = np.searchsorted(geo.leaf_t_min, rows[:, 1] - 1, side="right") - 1
        first = np.minimum(first, geo.n_leaves - 1)
        last = np.maximum(last, first)
        padded = np.append(self.max, self.max[-1])
        idx = np.empty(2 * rows.shape[0], np.int64)
        idx[0::2], idx[1::2] = first, last + 1
        bound = np.maximum.reduceat(padded, idx)[0::2]
        if self.max_width is not None:
            bound = np.minimum(bound, rows[:, 1] - 1 + self.max_width)
        return bound


def match_region(first: np.ndarray, last: np.ndarray, bounds: UpperBounds, window: int,
                 last_bounds: UpperBounds | None = None) -> np.ndarray:
    """The ``lower`` times to replay (see the module docstring) for first-component
    candidate rows ``first`` and last-component rows ``last`` (``bounds`` / ``last_bounds``
    bound their upper bounds): sorted disjoint rows."""
    if first.shape[0] == 0 or last.shape[0] == 0:
        return np.empty((0, 2), I64)
    last_bounds = last_bounds or bounds
    lo = np.minimum(first[:, 0], bounds.reach_start(first[:, 0]))
    hi = np.maximum(first[:, 1], bounds.upper_of(first) + window)
    forward = merge_halfopen(lo, hi)
    lo = np.minimum(last[:, 0], bounds.reach_start(last[:, 0] - window + 1))
    hi = np.maximum(last[:, 1], last_bounds.upper_of(last) + 1)
    backward = merge_halfopen(lo, hi)
    return intersect_intervals(forward, backward)


# --------------------------------------------------------------------------- components
def component_scopes(cfg: Any, snap: Any, geo: Geometry, *, use_index: bool, max_sel: float,
                     timings: dict[str, float], reads: dict[str, int]
                     ) -> dict[str, ConditionScope]:
    """Where the first and the last component's candidates can occur: their type on the type
    column and the WHERE conjuncts on their variable alone (the others widen to TRUE)."""
    kinds, indexes, leaves = scope_inputs(snap)
    where = ex.and_all(list(cfg.predicates)) if cfg.predicates else None
    out: dict[str, ConditionScope] = {}
    for c in dict.fromkeys((cfg.components[0], cfg.components[-1])):
        extra = ([(cfg.type_column, (Range(c.type_name, c.type_name),))]
                 if kinds.get(cfg.type_column) == "string" else None)
        out[c.var] = condition_scope(f"{c.var} ({c.type_name})", where, c.var, kinds, indexes,
                                     geo, leaves, use_index=use_index, max_sel=max_sel,
                                     timings=timings, reads=reads, extra=extra)
    return out


def pruned_intervals(cfg: Any, snap: Any, scopes: dict[str, ConditionScope], geo: Geometry
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(region, intervals)``: :func:`match_region` clipped to the stream (both)."""
    leaf_max = snap.tree.histogram(0)[f"{cfg.upper_column}.max"]
    width = max_width(snap, cfg.upper_column)
    first, last = scopes[cfg.components[0].var], scopes[cfg.components[-1].var]
    region = match_region(
        first.times, last.times,
        UpperBounds(geo, leaf_max, candidate_uppers(snap, cfg, first), width), cfg.window,
        UpperBounds(geo, leaf_max, candidate_uppers(snap, cfg, last), width))
    region = intersect_intervals(region, np.array([[geo.t_min, geo.t_max + 1]], I64))
    return region, region


_WIDTHS: dict[tuple[str, int, str], int] = {}
"""Largest uncertainty per (stream directory, version, upper column): versions never
change, so the value is computed once per process."""


def max_width(snap: Any, upper: str) -> int:
    """The stream's largest uncertainty ``upper - lower`` at the snapshot's version: one read
    of two columns, remembered per stream version."""
    key = (str(snap.events_dir), int(snap.version), upper)
    width = _WIDTHS.get(key)
    if width is None:
        table = snap.read(columns=[upper])
        width = 0 if table.num_rows == 0 else int(
            pc.max(pc.subtract(table.column(upper), table.column("t"))).as_py())
        if len(_WIDTHS) >= 256:
            _WIDTHS.clear()
        _WIDTHS[key] = width
    return width


def candidate_uppers(snap: Any, cfg: Any, scope: ConditionScope
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(times, uppers)`` of the scope's index candidates sorted by time, read from the
    stream at their seqs (None: no lookup, or the values cannot be read so). Every event in
    the scope's ranges satisfying the condition is a candidate, so their own upper bounds
    bound the rows' events'."""
    if scope.candidates is None:
        return None
    seqs, times = scope.candidates
    up = snap.values_at(cfg.upper_column, seqs) if seqs.size else np.empty(0, np.int64)
    if up is None:
        return None
    order = np.argsort(times, kind="stable")
    return times[order], np.asarray(up, np.int64)[order]


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
        intervals=lambda sc, geo: pruned_intervals(cfg, snap, sc, geo),
        blocker=_blocker(cfg, snap) if len(ctx.snapshots) == 1 else None,
        nothing="no first candidate has a last candidate within reach", contiguous=True)
    p.timings["bind"] = bind_s
    return p
