"""The index-assisted planner for sequential pattern queries (dissertation 3.4).

Registered in :data:`replaydb.planner.languages.PLANNERS` for MATCH_RECOGNIZE and SASE+. For a
query it

1. binds the query (the operator's :class:`PatternSpec`: window in stream units, defaults
   applied), rewrites it into basic symbols with single-attribute range conditions and ``true*``
   gaps (:mod:`.rewrite`);
2. builds the coarse pattern map from a TAB+-tree level (:mod:`.cpm`): the regions where a match
   is possible, and the parameters the cost model re-estimates inside them;
3. gathers per index-supported condition its selectivity, result size and pages from the
   index statistics (the sample-based count, made exact from the boundary row groups when its
   guaranteed bounds are loose - equalities on keys with many duplicates), and selects indexes (:mod:`.selection`) with the cost model (:mod:`.cost`)
   and the store's calibrated weights (:func:`.cost.load_weights`);
4. queries the selected indexes, sorts the results by seq and computes the replay intervals
   (:mod:`.intervals`, Algorithm 3.1), intersects them with the CPM's regions, widens them for
   PREV/NEXT, and joins intervals whose gap costs less to replay than a new interval's
   navigation (``Weights.interval_events``);
5. returns a :class:`~replaydb.planner.query.Plan` whose ``intervals`` the hub replays into the
   operator, with EXPLAIN details (:mod:`.explain`).

``--plan`` (``ctx.options.plan``): ``auto`` (Optimal, falling back to the plan without index -
the CPM's regions, or full replay when the CPM prunes nothing - when that is estimated cheaper),
``all``, ``greedy``, ``budget``, ``optimal`` (forced index strategies, at least one index when
any is supported), ``cpm`` (histogram only: replay the CPM's regions), ``replay`` (handled by the
hub: no planner). Options: ``ctx.planner_options``, a
:class:`~replaydb.planner.options.PatternPlannerOptions` (the coarse pattern map's use and
level, weights overriding the calibrated ones, whether rival strategies are run for EXPLAIN,
the semi-join, and how a tight block tests its members).

**Why replaying only the intervals gives exactly the matches of full replay.** Let R be the
replayed ranges (disjoint time intervals; between two of them the operator's ``end_interval``
drops every partial match).

* Every match of full replay is a match of the rewritten pattern whose basic-symbol events
  form a candidate of Algorithm 3.1 (the rewrite only widens; index results contain every event
  satisfying the kept ranges; the interval of a candidate contains all events of every match
  built on it). So it lies inside one interval of R - and intersecting with CPM regions,
  widening and joining keep that.
* Conversely, a match found while replaying R is a match of the rewritten pattern over the
  same events (its range conditions read only the event itself), so it too lies inside an
  interval computed before widening; its PREV/NEXT rows lie inside R thanks to the widening
  (stream order: with partitions a PREV can reach arbitrarily far back, so PREV/NEXT with
  PARTITION BY or an equivalence partition plans full replay). Its conditions therefore see what
  full replay sees. For the all-runs strategies (SASE+) a match is defined by its own events
  only, so it is a match of full replay. For SQL MATCH_RECOGNIZE the attempts also depend on
  where earlier matches ended (AFTER MATCH SKIP): no full-replay match straddles the start of an
  interval of R (it would lie in no interval), so full replay starts an attempt at the first
  row of every interval too, and from there both see the same rows and make the same choices
  (an attempt's preferred match lies inside R; one cut off at an interval's end would be a
  full-replay match outside R).

Documented consequences: results are the same rows; with PARTITION BY and SQL semantics the
interleaving of *different* partitions' matches in the output (hence ``match_id``) may differ,
because replay resolves pending attempts at each interval's end; per partition the order and
``match_number`` are the same. Several streams merged by event type (SASE+ types as streams)
are planned as full replay (their seqs are not one stream's positions). No WITHIN: the span of a
match is bounded only when its first/last basic symbols are selected (a fixed-length contiguous
pattern spans exactly its events: the interval is the seq range, mapped to time through the
tree); otherwise the intervals reach to the stream's start/end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replaydb.errors import UsageError
from replaydb.indexes.bounds import KeyRange, key_range
from replaydb.indexes.kernels import (
    Arena,
    sort_unique_with_payload,
    sort_with_payload,
    thread_arena,
)
from replaydb.indexes.reader import Piece, join_pieces
from replaydb.planner.options import PatternPlannerOptions
from replaydb.planner.pattern.conditions import Condition
from replaydb.planner.pattern.cost import (
    CondInfo,
    CostModel,
    Estimate,
    deferred_lookups,
    load_weights,
)
from replaydb.planner.pattern.cpm import Scope, build_cpm, whole_stream
from replaydb.planner.pattern.intervals import (
    I64,
    MEMBER_TESTS,
    Geometry,
    SymbolResult,
    coalesce_by_leaves,
    intersect_intervals,
    intersect_results,
    replay_intervals,
    sorted_alone,
    widen_for_navigation,
)
from replaydb.planner.pattern.membercosts import DEFAULT_MEMBER_COSTS
from replaydb.planner.pattern.navigation import navigation_extent
from replaydb.planner.pattern.rewrite import RewrittenPattern, rewrite
from replaydb.planner.pattern.selection import STRATEGIES, Selection
from replaydb.planner.pattern.semijoin import USEFUL_SHARE, TimeMask
from replaydb.store.interval_list import IntervalList

PLAN_CHOICES = ("auto", "replay", "all", "greedy", "optimal", "budget", "cpm")
EXACT_SLACK = 256
"""Count a condition's entries exactly when the index's sample bounds are looser than 10% of
the estimate and this many entries."""


@dataclass
class Lookup:
    """One distinct index range lookup (a condition may serve several basic symbols)."""

    id: int
    condition: Condition
    index: Any
    entries: float = 0.0
    pages: float = 0.0


@dataclass
class PatternPlanState:
    """Everything the planner derived, kept on the plan for EXPLAIN and the benchmarks."""

    rp: RewrittenPattern | None = None
    geo: Geometry | None = None
    scope: Scope | None = None
    model: CostModel | None = None
    conds: list[CondInfo] = field(default_factory=list)
    lookups: dict[int, Lookup] = field(default_factory=dict)
    selections: dict[str, Selection] = field(default_factory=dict)
    chosen: Estimate | None = None
    strategy: str = "replay"
    nav: tuple[int, int] = (0, 0)
    intervals: np.ndarray | None = None
    interval_counts: dict[str, int] = field(default_factory=dict)
    index_reads: dict[str, int] = field(default_factory=dict)
    lookup_sizes: dict[int, int] = field(default_factory=dict)
    deferred: set[int] = field(default_factory=set)
    """Lookups the last :func:`compute_intervals` left where their seqs lie and only tested
    candidates against (deferred members never sorted or set as a bitmap)."""
    notes: list[str] = field(default_factory=list)
    spec: Any = None
    """The bound pattern (its text is :attr:`spec_text`, made only when EXPLAIN asks)."""
    matcher: str = ""
    """Which matcher the operator runs the pattern on (vectorized for its shape, or the
    automaton); shown by EXPLAIN."""
    match_rows: str = ""
    """What a match keeps of its rows for its measures (``block rows`` or ``every row``, see
    :attr:`PatternOperator.match_rows`); shown by EXPLAIN."""

    @property
    def spec_text(self) -> str:
        """The bound pattern as text (EXPLAIN); empty before binding."""
        return "" if self.spec is None else self.spec.to_text()


def _kinds(snap: Any) -> dict[str, str]:
    out = {}
    for a in snap.schema.attributes:
        if a.kind in ("float64", "int64"):
            out[a.name] = "numeric"
        elif a.kind == "string":
            out[a.name] = "string"
    return out


def _levels_cols(snap: Any, max_buckets: int, level: int | None) -> tuple[int, dict]:
    tree = snap.tree
    if level is None:
        level = tree.level_for_buckets(max_buckets)
    level = max(0, min(int(level), tree.height - 1))
    return level, tree.histogram(level)


def gather_conditions(rp: RewrittenPattern, indexes: dict[str, Any], n_events: int
                      ) -> tuple[list[CondInfo], dict[int, Lookup]]:
    """Index-supported conditions with their statistics: per lookup's range, the estimated
    entries and the pages a range query reads (:meth:`LSMIndex.range_stats`, one pass), an
    exact count where the estimate's bounds are loose."""
    lookups: dict[Condition, Lookup] = {}
    conds: list[CondInfo] = []
    for s in rp.symbols:
        for c in s.conditions:
            idx = indexes.get(c.column)
            if idx is None:
                continue
            lk = lookups.get(c)
            if lk is None:
                lk = Lookup(len(lookups), c, idx)
                for r in c.ranges:
                    est, pages = idx.range_stats(r.lo, r.hi, lo_inclusive=r.lo_inclusive,
                                                 hi_inclusive=r.hi_inclusive, max_seq=n_events)
                    if est.high - est.low > max(0.1 * est.estimate, EXACT_SLACK):
                        # sample-based bounds are loose (typically an equality on a key with
                        # many duplicates): count exactly from the boundary row groups
                        est = idx.count(r.lo, r.hi, lo_inclusive=r.lo_inclusive,
                                        hi_inclusive=r.hi_inclusive, max_seq=n_events,
                                        exact=True)
                    lk.entries += est.estimate
                    lk.pages += pages
                lookups[c] = lk
            sel = min(1.0, lk.entries / n_events) if n_events else 0.0
            conds.append(CondInfo(len(conds), s.index, c, lk.id, sel, lk.entries, lk.pages))
    return conds, {lk.id: lk for lk in lookups.values()}


def run_lookup(lk: Lookup, n_events: int, timings: dict[str, float],
               reads: dict[str, int], arena: Arena | None = None, *, need_t: bool = True,
               mask: TimeMask | None = None, narrow: bool = False,
               times_of: Callable[..., np.ndarray] | None = None,
               defer: bool = False) -> SymbolResult:
    """Query the index for every range of the condition; the union sorted by seq (into
    ``arena`` when given: then valid until its next reset).

    ``mask``: keep only the events in its buckets (the semi-join of :mod:`.semijoin`) and,
    with ``narrow``, intersect it with the kept events' reach before sorting. ``need_t=False``
    sorts the seqs alone and leaves the result's times out (``t`` is None): Algorithm 3.1
    reads times only of the first and the last selected symbol.

    ``times_of`` (a regular stream's :meth:`Geometry.times_of`): times are computed from the
    sorted seqs instead of being carried through the sort, so every lookup takes the
    seq-only sort (which moves one array instead of two).

    ``defer`` (a seq-only lookup without a mask): the result is left where its seqs lie in
    the index files, nothing sorted or set (a deferred :class:`SymbolResult`, for the member
    of a tight block that :func:`block_occurrences` may test its few candidates against)."""
    t0 = time.perf_counter()
    # times are read only where something uses them before they could be computed
    read_t = times_of is None and (need_t or mask is not None)
    seqs: list[Piece] = []
    ts: list[Piece] = []
    for r in lk.condition.ranges:
        if hasattr(lk.index, "seq_pieces"):  # seqs (times) alone, in any order: sorted below
            s, tt, cost = lk.index.seq_pieces(r.lo, r.hi, lo_inclusive=r.lo_inclusive,
                                              hi_inclusive=r.hi_inclusive, max_seq=n_events,
                                              with_t=read_t)
            seqs.extend(s)
            ts.extend(tt or ())
            n = sum(p.size for p in s)
        else:
            res = lk.index.range(r.lo, r.hi, lo_inclusive=r.lo_inclusive,
                                 hi_inclusive=r.hi_inclusive, order="key", max_seq=n_events)
            seqs.append(np.asarray(res.seq, I64))
            if read_t:
                ts.append(np.asarray(res.t, I64))
            cost, n = res.cost, len(res.seq)
        reads["entries_read"] = reads.get("entries_read", 0) + cost.entries_read
        reads["entries_returned"] = reads.get("entries_returned", 0) + n
        reads["pages_read"] = reads.get("pages_read", 0) + cost.pages_read
        reads["bytes_read"] = reads.get("bytes_read", 0) + cost.bytes_read
        reads["lookups"] = reads.get("lookups", 0) + 1
    t1 = time.perf_counter()
    bound = max(n_events, 1)
    take = arena.take if arena is not None else None
    seq_alone = times_of is not None or not need_t
    t2 = t1
    if mask is None and seq_alone:  # the bits are set straight from the index files
        result = (SymbolResult(None, None, bound=bound, n=sum(p.size for p in seqs),
                                  times=times_of if need_t else None, alloc=take,
                                  pieces=seqs) if defer
                      else sorted_alone(seqs, bound, take, times_of if need_t else None))
    else:
        seq = np.asarray(join_pieces(seqs), I64)
        t: np.ndarray | None = None
        if read_t:
            t = np.asarray(join_pieces(ts), I64)
        elif mask is not None and times_of is not None:
            t = times_of(seq)
        if mask is not None:
            assert t is not None
            if mask.useful:
                seq, t = mask.keep(seq, t, take)
                reads["entries_semi_joined"] = (reads.get("entries_semi_joined", 0)
                                                + int(seq.size))
            if narrow:
                mask.narrow(t)
        t2 = time.perf_counter()
        # one lookup holds every event at most once (distinct seqs); several ranges of one
        # condition could overlap only if the rewrite left them so - then the radix sort.
        # Every seq is below n_events (the lookup's max_seq), which the sorts check.
        if seq_alone:
            result = sorted_alone([seq], bound, take, times_of if need_t else None)
        elif seq.size > 1:
            assert t is not None
            got = sort_unique_with_payload(seq, t, bound, take)
            result = SymbolResult(*(got if got is not None
                                    else sort_with_payload(seq, t, bound)))
        else:
            result = SymbolResult(seq, t)
    t3 = time.perf_counter()
    timings["index_lookups"] = timings.get("index_lookups", 0.0) + (t1 - t0)
    timings["semi_join"] = timings.get("semi_join", 0.0) + (t2 - t1)
    timings["sort"] = timings.get("sort", 0.0) + (t3 - t2)
    return result


def condition_probe(snap: Any, lk: Lookup, reads: dict[str, int]
                    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
    """``events -> whether each passes lk's condition`` read from the stream's data
    (:meth:`StreamSnapshot.values_at`), with the lookup's own semantics: its ranges
    normalized as the index normalizes them (:func:`~replaydb.indexes.bounds.key_range`),
    a null or NaN key never passing (the index holds none). The probe answers None where
    the values cannot be read so (one of the events in a page that is not read that way);
    None (no probe) for an index of other keys than int64 or float64, or a stream without
    such reads. ``reads`` counts the calls (``probe_calls``) and the events the answered
    ones read (``probed_events``)."""
    key_type = getattr(lk.index, "key_type", None)
    if key_type not in ("int64", "float64") or not hasattr(snap, "values_at"):
        return None
    ranges = [key_range(key_type, r.lo, r.hi, r.lo_inclusive, r.hi_inclusive)
              for r in lk.condition.ranges]
    column = lk.condition.column

    def probe(seqs: np.ndarray) -> np.ndarray | None:
        reads["probe_calls"] = reads.get("probe_calls", 0) + 1
        v = snap.values_at(column, seqs)
        if v is None or (key_type == "int64" and v.dtype != np.int64):
            return None
        if key_type == "float64":
            v = v.astype(np.float64, copy=False)  # the index holds an int column as floats
        reads["probed_events"] = reads.get("probed_events", 0) + int(v.size)
        return in_key_ranges(v, ranges)

    return probe


def in_key_ranges(v: np.ndarray, ranges: list[KeyRange]) -> np.ndarray:
    """Whether each of ``v`` lies in one of ``ranges`` (normalized :class:`KeyRange`s); NaN
    in none. O(len(v) x ranges)."""
    out = np.zeros(v.size, np.bool_)
    for kr in ranges:
        if kr.empty:
            continue
        m = np.ones(v.size, np.bool_)
        if kr.lo is not None:
            m &= (v >= kr.lo) if kr.lo_inclusive else (v > kr.lo)
        if kr.hi is not None:
            m &= (v <= kr.hi) if kr.hi_inclusive else (v < kr.hi)
        out |= m
    if v.dtype.kind == "f":
        out &= ~np.isnan(v)
    return out


def lookup_order(st: PatternPlanState, config: frozenset[int]) -> tuple[list[int], set[int]]:
    """The lookups of ``config``, fewest expected entries first (the order of the semi-join:
    small results filter the big ones), and those whose times Algorithm 3.1 reads (the ones
    of the first and of the last selected basic symbol)."""
    by_id = {c.id: c for c in st.conds}
    lks = sorted({by_id[i].lookup for i in config},
                 key=lambda lk: (st.lookups[lk].entries, lk))
    bss = sorted({by_id[i].bs for i in config})
    ends = {bss[0], bss[-1]} if bss else set()
    return lks, {by_id[i].lookup for i in config if by_id[i].bs in ends}


def _deferrable(st: PatternPlanState, config: frozenset[int]) -> set[int]:
    """Lookups of ``config`` that can wait where their seqs lie (:func:`run_lookup`'s
    ``defer``) until their tight block is merged: the rule the cost model prices
    (:func:`~replaydb.planner.pattern.cost.deferred_lookups`)."""
    assert st.rp is not None
    by_id = {c.id: c for c in st.conds}
    items = [(by_id[i].bs, st.rp.symbols[by_id[i].bs].block, by_id[i].lookup) for i in config]
    return deferred_lookups(items, {k: lk.entries for k, lk in st.lookups.items()})


def compute_intervals(st: PatternPlanState, config: frozenset[int], n_events: int,
                      timings: dict[str, float], *, semi_join: bool | str = True,
                      regular_times: bool = True, snap: Any = None,
                      probes: bool = True,
                      members: PatternPlannerOptions = MEMBER_TESTS) -> np.ndarray:
    """Replay intervals for ``config`` (rows ``[a, b)``), before CPM/navigation/joining.

    ``semi_join`` (windowed patterns, several lookups): each lookup keeps only the events
    within the window of an event of every smaller one (:mod:`.semijoin`), unless the
    expected entries say the smaller ones reach nearly every event (``"always"``: filter
    whatever the share, for tests); the intervals are the same either way.
    ``regular_times``: on a regular stream (:attr:`Geometry.regular`) compute the first and
    the last selected symbol's times from their seqs rather than sorting them along (False:
    sort them along, as on any stream; the intervals are the same). ``snap`` (the stream)
    with ``probes``: a deferred member may test the block's last candidates by reading
    their values (:func:`condition_probe`; the intervals are the same). ``members``: how a
    tight block tests its members (the member-test fields of
    :class:`~replaydb.planner.options.PatternPlannerOptions`; the intervals are the same),
    choosing by cost with the member tests' costs of the cost model's weights
    (:attr:`~.cost.Weights.member_tests`)."""
    rp, geo = st.rp, st.geo
    assert rp is not None and geo is not None
    by_id = {c.id: c for c in st.conds}
    results: dict[int, SymbolResult] = {}
    # the sorted results live only until the intervals are computed (these are new arrays)
    arena = thread_arena()
    arena.reset()
    order, need_t = lookup_order(st, config)
    times_of = geo.times_of if regular_times and geo.regular else None
    # the mask pays where lookups sort their times along; where every lookup sorts its seqs
    # alone into a bitmap (a regular stream), computing times and filtering them costs more
    # than the sort it saves
    mask = (TimeMask.whole(geo.t_min, geo.t_max, rp.window,
                           1.0 if semi_join == "always" else USEFUL_SHARE)
            if semi_join and rp.window is not None and len(order) > 1
            and (times_of is None or semi_join == "always") else None)
    if mask is not None and mask.predicted_share(
            [st.lookups[lk].entries for lk in order[:-1]]) > mask.limit:
        mask = None  # the small lookups reach (nearly) everywhere: nothing to filter
    deferred = _deferrable(st, config) if mask is None and times_of is not None else set()
    for k, lk_id in enumerate(order):
        before = st.index_reads.get("entries_returned", 0)
        results[lk_id] = run_lookup(st.lookups[lk_id], n_events, timings, st.index_reads,
                                    arena, need_t=lk_id in need_t, mask=mask,
                                    narrow=k + 1 < len(order),
                                    times_of=times_of, defer=lk_id in deferred)
        if lk_id in deferred and probes and snap is not None:
            results[lk_id].probe = condition_probe(snap, st.lookups[lk_id], st.index_reads)
        st.lookup_sizes[lk_id] = st.index_reads.get("entries_returned", 0) - before
    t0 = time.perf_counter()
    per_bs: dict[int, list[SymbolResult]] = {}
    for i in sorted(config):
        c = by_id[i]
        per_bs.setdefault(c.bs, []).append(results[c.lookup])
    selected = {bs: (parts[0] if len(parts) == 1 else intersect_results(parts))
                for bs, parts in per_bs.items()}
    costs = st.model.weights.member_tests if st.model is not None else DEFAULT_MEMBER_COSTS
    iv, ist = replay_intervals(rp, selected, geo, members=members, costs=costs)
    # a deferred member whose test set its bitmap after all (many candidates) was read in full
    st.deferred = {lk for lk in deferred if results[lk].pieces is not None}
    st.interval_counts.update({"first_events": ist.first_events,
                               "candidates": ist.candidates_with_interval,
                               "merged": int(iv.shape[0])})
    st.interval_counts["block_occurrences"] = sum(ist.occurrences)
    timings["merge"] = timings.get("merge", 0.0) + time.perf_counter() - t0
    return iv


def finish_intervals(st: PatternPlanState, iv: np.ndarray | None, timings: dict[str, float],
                     *, use_cpm: bool) -> np.ndarray | None:
    """CPM intersection, navigation widening and leaf joining; None stays full replay."""
    geo = st.geo
    assert geo is not None
    t0 = time.perf_counter()
    scope = st.scope
    if iv is None:
        if use_cpm and scope is not None and not _covers_all(scope, geo):
            iv = scope.regions
        else:
            return None
    elif use_cpm and scope is not None and not _covers_all(scope, geo):
        iv = intersect_intervals(iv, scope.regions)
        st.interval_counts["after_cpm"] = int(iv.shape[0])
    before, after = st.nav
    iv = widen_for_navigation(iv, geo, before, after)
    iv = coalesce_by_leaves(iv, geo, st.model.join_leaves if st.model is not None else 0.0)
    st.interval_counts["final"] = int(iv.shape[0])
    timings["merge"] = timings.get("merge", 0.0) + time.perf_counter() - t0
    return iv


def _covers_all(scope: Scope, geo: Geometry) -> bool:
    r = scope.regions
    return r.shape[0] == 1 and int(r[0, 0]) <= geo.t_min and int(r[0, 1]) > geo.t_max


def _replay_plan(ctx: Any, op: Any, st: PatternPlanState, note: str) -> Any:
    from replaydb.planner.query import Plan

    st.notes.append(note)
    st.strategy = "replay"
    plan = Plan.of(ctx, "replay", None, operator=op)
    _attach(plan, st)
    return plan


def _attach(plan: Any, st: PatternPlanState) -> None:
    from replaydb.planner.pattern.explain import describe, make_annotate

    # built when EXPLAIN reads it; neither hook refers to the plan (no reference cycle)
    plan.details.defer("pattern", lambda: describe(st))
    plan.details["note"] = "; ".join(st.notes) if st.notes else plan.details.get("note", "")
    if not plan.details["note"]:
        del plan.details["note"]
    plan.annotate = make_annotate(st, plan.timings)
    plan.pattern_state = st  # type: ignore[attr-defined]


def _options(ctx: Any) -> PatternPlannerOptions:
    """The planner's options of ``ctx`` (the defaults when it carries none of this planner)."""
    opts = getattr(ctx, "planner_options", None)
    return opts if isinstance(opts, PatternPlannerOptions) else PatternPlannerOptions()


def _partitioned(spec: Any) -> bool:
    from replaydb.operators.pattern.model import Strategy

    return bool(spec.partition_by) or (bool(spec.equivalence)
                                       and spec.strategy != Strategy.CONTIGUOUS)


def plan(ctx: Any) -> Any:
    """The planner entry point (``PLANNERS`` calls it with a QueryContext)."""
    choice = ctx.options.plan or "auto"
    if choice not in PLAN_CHOICES:
        raise UsageError(f"unknown --plan {choice!r} for pattern queries",
                         hint=f"choose one of {', '.join(PLAN_CHOICES)}")
    t_bind = time.perf_counter()
    op = ctx.bind()
    return _plan(ctx, op, choice, t_bind)


def _plan(ctx: Any, op: Any, choice: str, t_bind: float) -> Any:
    from replaydb.planner.query import Plan

    timings: dict[str, float] = {}
    st = PatternPlanState()
    spec = op.config.spec
    st.spec = spec
    st.matcher = getattr(op, "matcher", "")
    st.match_rows = getattr(op, "match_rows", "")
    timings["bind"] = time.perf_counter() - t_bind
    if len(ctx.snapshots) != 1:
        return _replay_plan(ctx, op, st, "several streams merged by event type: full replay")
    snap = ctx.snapshots[0]
    geo = Geometry.of(snap)
    st.geo = geo
    nav = navigation_extent(spec)
    if nav is None:
        return _replay_plan(ctx, op, st, "PREV/NEXT with a non-literal offset: full replay")
    st.nav = nav
    if (nav[0] or nav[1]) and _partitioned(spec):
        return _replay_plan(ctx, op, st, "PREV/NEXT in a partitioned pattern can reach any earlier "
                                     "event of the partition: full replay")
    if (nav[0] or nav[1]) and spec.where is not None:
        return _replay_plan(ctx, op, st, "PREV/NEXT over the rows a WHERE keeps can reach any "
                                     "earlier event: full replay")
    if op.cp.every_row:
        return _replay_plan(ctx, op, st, "empty matches or unmatched rows are output at rows no "
                                     "index selects: full replay")
    if spec.anchored():
        return _replay_plan(ctx, op, st, "the anchors ^ $ need each partition's first and last "
                                     "rows, which only full replay reads: full replay")
    kinds = _kinds(snap)
    type_col = spec.type_column if spec.type_column in kinds else None
    t0 = time.perf_counter()
    rp = rewrite(spec, kinds, n_streams=1, type_column=type_col)
    st.rp = rp
    timings["rewrite"] = time.perf_counter() - t0
    if geo.n_events == 0 or not rp.satisfiable:
        st.strategy = "empty"
        st.notes.append("no event can match (empty stream or an unsatisfiable range condition)")
        plan_ = Plan.of(ctx, "empty", [], operator=op, reason="nothing")
        plan_.timings.update(timings)
        st.intervals = np.empty((0, 2), I64)
        _attach(plan_, st)
        return plan_
    if rp.n == 0:
        return _replay_plan(ctx, op, st, "the pattern has no basic symbol: full replay")
    opts = _options(ctx)
    use_cpm = opts.cpm or choice == "cpm"
    t0 = time.perf_counter()
    if use_cpm and snap.tree.height > 0:
        level, cols = _levels_cols(snap, opts.cpm_buckets, opts.cpm_level)
        st.scope = build_cpm(rp, geo, cols, level)
    else:
        st.scope = whole_stream(geo)
    timings["cpm"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    indexes = snap.indexes()
    st.conds, st.lookups = gather_conditions(rp, indexes, geo.n_events)
    timings["statistics"] = time.perf_counter() - t0
    weights = load_weights(ctx.store)
    if opts.weights is not None:
        weights = weights.overridden(opts.weights)
    model = CostModel(rp, st.conds, geo, st.scope, weights, snap.schema.leaf_capacity,
                      snap.schema.event_width, before=nav[0],
                      after=nav[1])
    st.model = model
    t0 = time.perf_counter()
    wanted = "optimal" if choice in ("auto", "cpm") else choice
    for name, fn in STRATEGIES.items():
        if name == wanted or opts.rivals:
            st.selections[name] = fn(model, st.conds)
    timings["select"] = st.selections[wanted].seconds
    timings["select_all_strategies"] = time.perf_counter() - t0
    cpm_prunes = st.scope is not None and not _covers_all(st.scope, geo)
    base = model.replay_estimate()
    if choice == "cpm":
        chosen: Estimate | None = None
        strategy = "cpm"
    elif choice == "auto":
        opt = st.selections["optimal"].estimate
        if opt is not None and opt.cost < base.cost:
            chosen, strategy = opt, "optimal"
        else:
            chosen, strategy = None, ("cpm" if cpm_prunes and use_cpm else "replay")
    else:
        chosen = st.selections[choice].estimate
        strategy = choice
        if chosen is None:
            st.notes.append(f"no index supports a condition of the pattern: {choice} "
                            "replays without index")
            strategy = "cpm" if cpm_prunes and use_cpm else "replay"
    st.chosen = chosen if chosen is not None else base
    st.strategy = strategy
    if not opts.lookups:  # estimates only (calibration)
        plan_ = Plan.of(ctx, strategy, None, operator=op)
        plan_.timings.update(timings)
        _attach(plan_, st)
        return plan_
    if chosen is not None and chosen.config:
        iv = compute_intervals(st, chosen.config, geo.n_events, timings,
                               semi_join=opts.semi_join, regular_times=opts.regular_times,
                               snap=snap, probes=opts.probes, members=opts)
    else:
        iv = None
    iv = finish_intervals(st, iv, timings, use_cpm=use_cpm)
    st.intervals = iv
    intervals = None if iv is None else IntervalList.of(iv)
    reason = "index" if chosen is not None and chosen.config else "coarse_map"
    plan_ = Plan.of(ctx, strategy, intervals, operator=op, reason=reason)
    plan_.timings.update(timings)
    _attach(plan_, st)
    return plan_
