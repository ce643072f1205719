"""Where the events satisfying a condition can occur: index lookups and TAB+-tree summaries.

Planners that prune by time (TPStream situations, GRETA variables) ask, per condition, for the
time ranges that may hold a satisfying event. :func:`condition_scope` derives them from the
condition's single-attribute range conditions
(:func:`replaydb.planner.pattern.conditions.extract_conditions`: ``attr op const``, BETWEEN, IN,
OR of ranges on one column; NOT, functions, comparisons between columns widen to TRUE):

* an *index* lookup (:func:`replaydb.planner.pattern.planner.run_lookup`) on the most selective
  indexed condition (estimated from the index statistics, counted exactly where their bounds
  are loose, used when its estimated selectivity is at most ``max_sel``): the candidate events' exact times, ``[t, t + 1)`` each;
* the TAB+-tree's leaf ``[min, max]`` summaries of every numeric condition (the CPM's per-bucket
  test, on level 0): the time ranges of the leaves that may hold a satisfying event, intersected
  with the index candidates;
* otherwise *anywhere* (``[t_min, t_max]``), with the reason. A condition with an empty range
  (``x > 5 AND x < 3``) can never hold (source ``never``, no range).

Every range returned contains every satisfying event (the ranges only widen the condition).
Complexity: one index range lookup (its entries, sorted by seq), O(leaves) vectorized tests per
numeric condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.operators.expr import to_text
from replaydb.planner.pattern.conditions import Condition, Range, extract_conditions
from replaydb.planner.pattern.cpm import _local_selectivity
from replaydb.planner.pattern.intervals import I64, Geometry, intersect_intervals, merge_halfopen
from replaydb.planner.pattern.planner import EXACT_SLACK, Lookup, run_lookup


@dataclass
class ConditionScope:
    """Where events satisfying one condition can occur (rows ``[a, b)`` of ``times``) and
    why."""

    name: str
    condition: str
    ranges: list[str]
    dropped: list[str]
    source: str  # "index", "index+tree", "tree", "anywhere", "never"
    index: str | None = None
    why_no_index: str = ""
    index_entries: int | None = None
    index_estimate: float | None = None
    leaves_hit: int | None = None
    times: np.ndarray = field(default_factory=lambda: np.empty((0, 2), I64))
    candidates: tuple[np.ndarray, np.ndarray] | None = None
    """The index lookup's events ``(seqs, times)`` sorted by seq (None: no lookup); every
    event satisfying the condition is among them."""

    def describe(self, geo: Geometry) -> dict[str, Any]:
        span = int((self.times[:, 1] - self.times[:, 0]).sum()) if self.times.size else 0
        d: dict[str, Any] = {"condition": self.condition,
                             "range_conditions": self.ranges or ["none"],
                             "source": self.source}
        if self.dropped:
            d["widened_to_true"] = self.dropped
        d["index"] = self.index if self.index else f"none ({self.why_no_index})"
        if self.index_estimate is not None:
            d["index_entries_est"] = round(self.index_estimate, 1)
        if self.index_entries is not None:
            d["qualifying_events"] = self.index_entries
        if self.leaves_hit is not None:
            d["leaves_may_hold"] = f"{self.leaves_hit}/{geo.n_leaves}"
        d["qualifying_ranges"] = int(self.times.shape[0])
        d["qualifying_time_fraction"] = span / max(geo.span, 1)
        return d


def leaf_ranges(geo: Geometry, hit: np.ndarray) -> np.ndarray:
    idx = np.flatnonzero(hit)
    return merge_halfopen(geo.leaf_t_min[idx], geo.leaf_t_max[idx] + 1)


def scope_inputs(snap: Any) -> tuple[dict[str, str], dict[str, Any], dict[str, np.ndarray]]:
    """What :func:`condition_scope` reads of a stream, gathered once per plan: its indexable
    columns' kinds, its indexes, and its leaf level as columns (empty for an empty tree)."""
    from replaydb.planner.pattern.planner import _kinds

    leaves = snap.tree.histogram(0) if snap.tree.height > 0 else {}
    return _kinds(snap), snap.indexes(), leaves


def _entries(idx: Any, r: Range, n_events: int) -> float:
    """The index's estimated entries in range ``r``: from its sample, counted exactly from
    the boundary row groups where the sample's bounds are loose (an equality on a key with
    many duplicates)."""
    est = idx.count(r.lo, r.hi, lo_inclusive=r.lo_inclusive, hi_inclusive=r.hi_inclusive,
                    max_seq=n_events)
    if est.high - est.low > max(0.1 * est.estimate, EXACT_SLACK):
        est = idx.count(r.lo, r.hi, lo_inclusive=r.lo_inclusive, hi_inclusive=r.hi_inclusive,
                        max_seq=n_events, exact=True)
    return float(est.estimate)


def condition_scope(name: str, cond_expr: Any, var: str, kinds: dict[str, str],
                    indexes: dict[str, Any], geo: Geometry, leaves: dict[str, np.ndarray],
                    *, use_index: bool, max_sel: float, timings: dict[str, float],
                    reads: dict[str, int], sql: bool = False,
                    extra: list[tuple[str, tuple[Range, ...]]] | None = None,
                    also: tuple[str, ...] = ()) -> ConditionScope:
    """Candidate time ranges of the events of variable ``var`` satisfying ``cond_expr``
    (see the module docstring); ``sql`` and ``extra`` as for
    :func:`~replaydb.planner.pattern.conditions.extract_conditions` (``extra``: ranges known
    from elsewhere, such as the event type on the type column; ``also``: other names of the
    variable)."""
    conds, dropped = extract_conditions(var, cond_expr, kinds, sql=sql, extra=extra, also=also)
    sc = ConditionScope(name, "TRUE" if cond_expr is None else to_text(cond_expr),
                        [c.text() for c in conds], dropped,
                        source="anywhere")
    everything = np.array([[geo.t_min, geo.t_max + 1]], I64)
    if any(not c.satisfiable for c in conds):
        sc.source, sc.times, sc.why_no_index = "never", np.empty((0, 2), I64), "unsatisfiable"
        return sc
    if not conds:
        sc.why_no_index = "no single-attribute range condition"
        sc.times = everything
        return sc
    times: np.ndarray | None = None
    # index: the most selective indexed condition
    best: tuple[float, Condition] | None = None
    for c in conds:
        idx = indexes.get(c.column)
        if idx is None:
            continue
        est = sum(_entries(idx, r, geo.n_events) for r in c.ranges)
        if best is None or est < best[0]:
            best = (float(est), c)
    if best is None:
        sc.why_no_index = "no indexed attribute among " + ", ".join(c.column for c in conds)
    elif not use_index:
        sc.why_no_index = "index lookups disabled (--plan tree)"
    elif best[0] > max_sel * geo.n_events:
        sc.why_no_index = (f"{best[1].column}: estimated selectivity "
                           f"{best[0] / max(geo.n_events, 1):.2f} > {max_sel:g}")
    else:
        c = best[1]
        res = run_lookup(Lookup(0, c, indexes[c.column]), geo.n_events, timings, reads)
        tt = np.unique(np.asarray(res.t, I64))
        times = merge_halfopen(tt, tt + 1)
        sc.source, sc.index, sc.index_entries = "index", c.column, len(res)
        sc.index_estimate = best[0]
        sc.candidates = (np.asarray(res.seq, I64), np.asarray(res.t, I64))
    # tree summaries of the numeric conditions (leaf level)
    hit = np.ones(geo.n_leaves, bool)
    tested = False
    for c in conds:
        if c.kind == "numeric" and f"{c.column}.min" in leaves:
            h, _ = _local_selectivity(c, leaves, leaves["count"].astype(np.float64))
            hit &= h
            tested = True
    if tested:
        sc.leaves_hit = int(hit.sum())
    if tested and not hit.all():
        tr = leaf_ranges(geo, hit)
        times = tr if times is None else intersect_intervals(times, tr)
        sc.source = "index+tree" if sc.source == "index" else "tree"
    if times is None:
        times = everything
        sc.why_no_index += ("; tree min/max prune no leaf" if tested
                            else "; no numeric attribute for tree summaries")
    sc.times = times
    return sc



def leaves_covered(iv: np.ndarray, geo: Geometry) -> tuple[int, int]:
    """(leaves, events) of the leaves overlapping the intervals (what replay reads at most)."""
    if iv.shape[0] == 0 or geo.n_leaves == 0:
        return 0, 0
    first = geo.first_leaf(iv[:, 0])
    last = geo.last_leaf(iv[:, 1])
    mark = np.zeros(geo.n_leaves + 1, np.int64)
    ok = last >= first
    np.add.at(mark, first[ok], 1)
    np.add.at(mark, last[ok] + 1, -1)
    covered = np.cumsum(mark)[:-1] > 0
    return int(covered.sum()), int(geo.leaf_count[covered].sum())


def pruning_annotation(key: str, n_events: int, n_leaves: int) -> Any:
    """An EXPLAIN ANALYZE hook that records under ``key`` what the pruned replay read: events,
    leaves, bytes and the fractions of the stream's events and leaves it left out."""
    def annotate(analyze: dict[str, Any]) -> None:
        rep = analyze.get("replay", {})
        ev, lv = int(rep.get("events", 0)), int(rep.get("leaves", 0))
        analyze[key] = {
            "events_read": ev, "leaves_read": lv, "bytes_read": int(rep.get("bytes", 0)),
            "pruned_fraction_events": 1.0 - ev / max(n_events, 1),
            "pruned_fraction_bytes": 1.0 - lv / max(n_leaves, 1)}
    return annotate


def events_within(iv: np.ndarray, geo: Geometry) -> float:
    """Estimated events inside the rows ``[a, b)`` of ``iv`` (what replay pushes into the
    operator, less than the events of the leaves it reads): per boundary, the seq of the first
    event at or after it, interpolated linearly in time inside its leaf. O(rows log leaves)."""
    if iv.shape[0] == 0 or geo.n_leaves == 0:
        return 0.0
    return float(np.sum(_seq_at(iv[:, 1], geo) - _seq_at(iv[:, 0], geo)))


def _seq_at(x: np.ndarray, geo: Geometry) -> np.ndarray:
    i = np.searchsorted(geo.leaf_t_max, x, side="left")
    inside = i < geo.n_leaves
    j = np.minimum(i, geo.n_leaves - 1)
    t0, t1 = geo.leaf_t_min[j], geo.leaf_t_max[j]
    share = np.clip((x - t0) / np.maximum(t1 - t0 + 1, 1), 0.0, 1.0)
    seq = geo.leaf_seq_min[j] + share * geo.leaf_count[j]
    end = geo.leaf_seq_min[-1] + geo.leaf_count[-1]
    return np.where(inside, seq, end).astype(np.float64)


def join_gaps(iv: np.ndarray, geo: Geometry, max_events: float) -> np.ndarray:
    """Join consecutive rows of ``iv`` whose gap holds at most ``max_events`` events
    (estimated as by :func:`events_within`): replaying a short gap costs less than starting
    another interval. Joining only adds events, so it never loses one. O(rows log leaves)."""
    if iv.shape[0] <= 1:
        return iv
    gap = _seq_at(iv[1:, 0], geo) - _seq_at(iv[:-1, 1], geo)
    keep = np.concatenate([[True], gap > max_events])
    starts = iv[keep, 0]
    ends = iv[np.concatenate([keep[1:], [True]]), 1]
    return np.stack([starts, ends], axis=1).astype(I64)
