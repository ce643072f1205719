"""EXPLAIN output of the pattern planner.

:func:`describe` (put into ``Plan.details["pattern"]``): the rewritten pattern and its basic
blocks, the conditions dropped by the rewrite, PREV/NEXT widening, per basic symbol its range
conditions with index, selectivity, estimated result size and pages; the coarse pattern map; the
weights; the chosen configuration with its estimated costs and covered fraction; the rivals
(every strategy's choice, and the plan without index) with their estimated costs; the selection
time and configurations examined; the replay intervals (candidates, merged, after the CPM, final)
and the planned time coverage; the index reads done while planning.

:func:`make_annotate` returns the hook the hub calls after ``explain(analyze=True)`` executed the
plan: it adds the actual covered fraction (events replayed / events in the stream), events and
leaves replayed, index entries and pages read, the relative C_PIO error, and the time per phase
(index lookups, sort, merge - Algorithm 3.1 and interval work -, replay reading, matching).
"""

from __future__ import annotations

from typing import Any


def _config_text(st: Any, config: frozenset[int]) -> list[str]:
    by_id = {c.id: c for c in st.conds}
    out = []
    for i in sorted(config, key=lambda i: (by_id[i].bs, by_id[i].condition.column)):
        c = by_id[i]
        var = st.rp.symbols[c.bs].var or "true"
        out.append(f"#{c.bs} {var}: {c.condition.text()}")
    return out


def _est(st: Any, e: Any, strategy: str) -> dict[str, Any]:
    d = {"strategy": strategy, "indexes": _config_text(st, e.config) if e.config else []}
    d.update(e.as_dict())
    return d


def describe(st: Any) -> dict[str, Any]:
    """The pattern plan ``st`` (a :class:`PatternPlanState`) as EXPLAIN shows it."""
    out: dict[str, Any] = {"spec": st.spec_text}
    if st.matcher:
        out["matcher"] = st.matcher
    if st.match_rows:
        out["match_rows"] = st.match_rows
    rp = st.rp
    if rp is not None:
        out["rewritten"] = rp.text()
        out["basic_blocks"] = rp.block_texts()
        out["contiguous_blocks"] = rp.tight
        out["window"] = rp.window
        if rp.dropped:
            out["dropped_conditions"] = rp.dropped
        if rp.notes:
            out["rewrite_notes"] = list(rp.notes)
    if st.nav != (0, 0):
        out["navigation_widening"] = {"events_before": st.nav[0], "events_after": st.nav[1]}
    if rp is not None:
        model = st.model
        syms = []
        infos: dict[tuple[int, Any], Any] = {}
        for x in st.conds:  # the first per (symbol, condition), in one pass
            infos.setdefault((x.bs, x.condition), x)
        for s in rp.symbols:
            conds = []
            for c in s.conditions:
                info = infos.get((s.index, c))
                d: dict[str, Any] = {"condition": c.text(), "indexed": info is not None}
                if info is not None:
                    d["selectivity"] = info.selectivity
                    if model is not None:
                        d["selectivity_in_scope"] = model.phi[info.id]
                    d["entries_est"] = round(info.entries, 1)
                    d["pages_est"] = round(info.pages, 1)
                conds.append(d)
            syms.append({"bs": s.index, "var": s.var or "true", "block": s.block,
                         "conditions": conds})
        out["symbols"] = syms
    sc = st.scope
    if sc is not None and sc.level is not None:
        geo = st.geo
        out["cpm"] = {"level": sc.level, "buckets": sc.buckets, "buckets_kept": sc.buckets_kept,
                      "regions": int(sc.regions.shape[0]),
                      "covered_fraction": sc.span / max(geo.span, 1) if geo else None,
                      "seconds": sc.seconds}
    if st.model is not None:
        out["weights"] = st.model.weights.as_dict()
        if st.chosen is not None:
            out["chosen"] = _est(st, st.chosen, st.strategy)
        rivals = [_est(st, st.model.replay_estimate(), "no index")]
        for name, sel in st.selections.items():
            if sel.estimate is not None:
                r = _est(st, sel.estimate, name)
                r["examined"] = sel.examined
                r["select_seconds"] = sel.seconds
                rivals.append(r)
        out["rivals"] = rivals
        opt = st.selections.get("optimal")
        if opt is not None:
            out["pareto_frontier_sizes"] = [len(f) for f in opt.frontiers]
        out["estimated_covered_fraction"] = st.chosen.alpha if st.chosen is not None else None
    if st.interval_counts:
        out["interval_counts"] = dict(st.interval_counts)
    iv = st.intervals
    if iv is not None and st.geo is not None:
        out["replay_intervals"] = int(iv.shape[0])
        out["planned_time_fraction"] = float((iv[:, 1] - iv[:, 0]).sum()) / max(st.geo.span, 1)
    if st.index_reads:
        out["index_reads"] = dict(st.index_reads)
    if st.notes:
        out["notes"] = list(st.notes)
    return out


def make_annotate(st: Any, timings: dict[str, float]) -> Any:
    """The plan's ``annotate`` hook; ``timings`` is the plan's own dict (filled further by
    the hub until the execution ends). It holds no reference to the plan: a plan and its
    hooks would otherwise make a reference cycle, freed only by a garbage collection
    instead of when the query's last reference goes."""

    def annotate(analyze: dict[str, Any]) -> None:
        rep = analyze.get("replay") or {}
        op = analyze.get("operator") or {}
        n = st.geo.n_events if st.geo is not None else 0
        events = int(rep.get("events", 0))
        leaves = int(rep.get("leaves", 0))
        t = timings
        d: dict[str, Any] = {
            "actual_covered_fraction": events / n if n else 0.0,
            "events_replayed": events,
            "leaves_replayed": leaves,
            "index_entries_read": int(st.index_reads.get("entries_read", 0)),
            "index_pages_read": int(st.index_reads.get("pages_read", 0)),
            "phases_seconds": {
                "index_lookups": t.get("index_lookups", 0.0),
                "sort": t.get("sort", 0.0),
                "merge": t.get("merge", 0.0),
                "replay": float(rep.get("read_seconds", 0.0)),
                "matching": float(rep.get("operator_seconds", 0.0)),
            },
        }
        if st.chosen is not None and leaves:
            d["c_pio_estimated_leaves"] = st.chosen.pio_leaves
            d["c_pio_relative_error"] = abs(leaves - st.chosen.pio_leaves) / leaves
        if op:
            d["matches"] = op.get("results_out", op.get("rows_out"))
        analyze["pattern"] = d

    return annotate
