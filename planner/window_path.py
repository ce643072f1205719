"""The windowed aggregation's path choice (dissertation 3.3.2) and its place in the query hub.

Three ways answer a windowed aggregation over a stored stream, all producing exactly what the
online operator produces on a full replay (:mod:`replaydb.replay.tree_aggregates` runs them):
replay into :class:`~replaydb.operators.window.WindowAggregate`, the optimized index path (one
temporal aggregation per slice into the operator's slide tree) and the naive index path (one per
window). :func:`plan` chooses by the cost model of :mod:`replaydb.planner.window_cost`;
:func:`plan_query` turns a windowed SQL query into a
:class:`~replaydb.replay.plan.PhysicalPlan` whose source is a full scan, an interval scan of the
WHERE clause's time range, or :class:`~replaydb.replay.plan.TreeAggregates`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.errors import UsageError
from replaydb.operators.expr import Column
from replaydb.operators.spec import OperatorSpec
from replaydb.operators.window import WindowConfig
from replaydb.planner.window_calibrate import weights_of
from replaydb.planner.window_cost import PathChoice, TreeStats, choose_path
from replaydb.replay.plan import TreeAggregates
from replaydb.replay.tree_aggregates import (
    PathStats,
    index_applicable,
    run_index,
    run_naive,
    run_replay,
)


def plan(snap: Any, cfg: WindowConfig, plan: str = "auto",
         weights: tuple[float, float] | None = None) -> PathChoice:
    """The cost-based choice (3.3.2) for ``cfg`` over ``snap``, with every estimate; ``weights``
    ``(w_merge, w_slice)`` from :mod:`replaydb.planner.window_calibrate` (None: uncalibrated)."""
    ok, why = index_applicable(cfg, snap)
    st = TreeStats.of_snapshot(snap)
    if cfg.kind == "count":
        st = TreeStats(r=1.0, h=st.h, B=st.B, D=st.D)
    st = st.weighted(weights)
    return choose_path(int(cfg.size), int(cfg.slide), st, plan=plan,  # type: ignore[arg-type]
                       index_ok=ok, why_not=why)


def run(snap: Any, cfg: WindowConfig, plan_name: str = "auto", *, t0: int | None = None,
        t1: int | None = None) -> tuple[pa.Table, PathChoice, PathStats]:
    """Plan and execute: the result table, the choice (for EXPLAIN) and what was done."""
    choice = plan(snap, cfg, plan_name)
    runner = {"replay": run_replay, "index": run_index, "naive": run_naive}[choice.path]
    out, stats = runner(snap, cfg, t0=t0, t1=t1)
    return out, choice, stats


# --------------------------------------------------------------------------- query hub
def time_bounds(where: Any) -> tuple[int | None, int | None, Any]:
    """Split WHERE into a time range on ``t`` and the rest.

    Top-level AND conjuncts ``t >= a``, ``t > a``, ``t < b``, ``t <= b``, ``t BETWEEN a AND b``
    (integer literals, stream units; either side order) become the half-open range
    ``[t0, t1)``; everything else stays as the residual predicate (None when nothing is left).
    Filtering by time before windowing equals replaying only that range, except that events
    outside it would still advance time - which matters only for ``EMPTY => 'EMIT'`` (the caller
    keeps the filter then).
    """
    from replaydb.operators.expr import Between, Binary, Literal, and_all, conjuncts

    t0: int | None = None
    t1: int | None = None
    rest = []

    def lit(e: Any) -> int | None:
        if isinstance(e, Literal) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return int(e.value)
        return None

    def is_t(e: Any) -> bool:
        return isinstance(e, Column) and e.name == "t" and e.index is None

    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    for c in conjuncts(where):
        lo = hi = None
        if isinstance(c, Binary) and c.op in flip:
            op, val = None, None
            if is_t(c.left) and lit(c.right) is not None:
                op, val = c.op, lit(c.right)
            elif is_t(c.right) and lit(c.left) is not None:
                op, val = flip[c.op], lit(c.left)
            if op is not None:
                assert val is not None
                lo = val if op == ">=" else val + 1 if op == ">" else None
                hi = val if op == "<" else val + 1 if op == "<=" else None
            else:
                rest.append(c)
                continue
        elif isinstance(c, Between) and not c.negated and is_t(c.operand) \
                and lit(c.low) is not None and lit(c.high) is not None:
            lo, hi = lit(c.low), lit(c.high) + 1  # type: ignore[operator]
        else:
            rest.append(c)
            continue
        if lo is not None:
            t0 = lo if t0 is None else max(t0, lo)
        if hi is not None:
            t1 = hi if t1 is None else min(t1, hi)
    return t0, t1, (and_all(rest) if rest else None)


def plan_query(ctx: Any) -> Any:
    """The window-aggregate planner of the query hub (``replaydb.planner.query``).

    Chooses replay, the optimized index path or the naive one by the cost model (3.3.2), or
    follows ``--plan replay|index|naive``; WHERE conjuncts that only bound ``t`` become the time
    range to read (an interval scan, or the tree aggregates' range). EXPLAIN shows both
    estimates, the break-even slide and the tree's shape; EXPLAIN ANALYZE adds what the index
    path did.
    """
    from replaydb.planner.lang.window_sql import to_config
    from replaydb.planner.options import as_kwargs
    from replaydb.planner.query import Plan

    opts = ctx.options
    plan_name = opts.plan if opts.plan in ("auto", "replay", "index", "naive") else None
    if plan_name is None:
        raise UsageError(f"--plan {opts.plan} does not apply to windowed aggregation",
                         hint="use auto, replay, index or naive")
    cfg = to_config(ctx.query, ctx.schema, ctx.time_unit, aliases=ctx.aliases,
                    **as_kwargs(ctx.operator_options))
    t0 = t1 = None
    if cfg.where is not None and cfg.empty == "skip":
        t0, t1, rest = time_bounds(cfg.where)
        cfg = replace(cfg, where=rest)
    intervals = None if t0 is None and t1 is None else [
        (t0 if t0 is not None else np.iinfo(np.int64).min,
         t1 if t1 is not None else np.iinfo(np.int64).max)]
    replayed = OperatorSpec("window", replace(cfg, schema=ctx.schema), opts.state_cap)
    if len(ctx.snapshots) != 1:
        multi = Plan.of(ctx, "replay", intervals, spec=replayed, reason="time_range")
        multi.details["window_path"] = ["replay: the query reads several streams"]
        return multi
    snap = ctx.snapshots[0]
    choice = plan(snap, cfg, plan_name, weights_of(ctx.store, snap.name))
    est = {"merges_per_slide_replay": choice.c_replay, "merges_per_slide_index": choice.c_index,
           "merges_per_slide_naive": choice.c_naive, "break_even_slide": choice.break_even,
           "tree": {"h": choice.stats.h, "B": choice.stats.B, "D": choice.stats.D,
                    "r": choice.stats.r},
           "weights": {"w_merge": choice.stats.w_merge, "w_slice": choice.stats.w_slice,
                       "calibrated": choice.stats.calibrated}}
    strategy = f"window-{choice.path}"
    if choice.path == "replay":
        out = Plan.of(ctx, strategy, intervals, spec=replayed, reason="time_range",
                      estimates=est)
    else:
        out = Plan.of(ctx, strategy, spec=OperatorSpec("window", cfg, None),
                      source=TreeAggregates(choice.path, t0, t1), estimates=est)
    out.details["window_path"] = choice.explain(ctx.time_unit)
    if t0 is not None or t1 is not None:
        out.details["time_range"] = [t0, t1]
    return out
