"""How well the planner's cost model predicts C_PIO, at the stream sizes the generator reaches.

The planner benchmark (:mod:`replaydb.bench.bench_planner`) reports the relative C_PIO error of
Optimal's plan at 10M events next to its *chance floor*: a plan's replayed runs are a count of
rare candidates, so even a perfect estimate of their mean misses the realized count by about
``0.8 / sqrt(runs)``. That floor shrinks with the square root of the stream's length. This
benchmark measures only the estimates - no replay, no timing - so it can afford the
generator's largest stream (50M events) and more queries per attribute:

1. **Uniform** (symbols on A5): the issue's random queries, m = 4, 8, 16, 32. Per query,
   Optimal's plan (with the coarse pattern map, CPM) is computed, index lookups and
   Algorithm 3.1 included; its estimated leaves are compared with the leaves its replay
   intervals cover (every leaf counted once: what the replay reads).
2. **Skewed** (m = 8, one symbol on A1..A5 with sigma 0..1): Optimal with the CPM and without
   it (the uniform model over the whole stream), each estimate against its own plan's leaves.

The same queries run on every store given (``--events 10000000,50000000``), side by side in one
run, so the shrinking of the error with the stream's length is measured, not argued.

    python -m replaydb.bench.bench_estimates [--events 10000000,50000000] [--queries 100]

Writes ``results.md``, ``results.json``, ``queries.json`` and ``estimates.png`` under
``bench/results/estimates/`` (the current run of either mode; the mode is in its
parameters).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from replaydb.bench.common import Results, arguments
from replaydb.bench.planner_report import err_pio, poisson_floor
from replaydb.bench.planner_runs import ATTRS, QUERY_SETS, STREAM, _skew_query, build_store
from replaydb.datasets.queries import random_queries
from replaydb.planner.query import QueryOptions, plan_query

VARIANTS: list[tuple[str, dict[str, Any]]] = [("cpm", {}), ("no cpm", {"cpm": False})]


def covered_leaves(snap: Any, intervals: list[tuple[int, int]] | None) -> int:
    """Distinct leaves of ``snap`` that overlap the half-open time ``intervals`` (sorted,
    disjoint; None = the whole stream): the leaves a replay of the plan reads. O(k log L)."""
    n = snap.tree.n_leaves
    if intervals is None:
        return int(n)
    if not intervals or n == 0:
        return 0
    a = np.array([x[0] for x in intervals], np.int64)
    b = np.array([x[1] for x in intervals], np.int64)
    lo, hi = snap.tree.leaf_ranges_for_times(a, b)
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if lo.size == 0:
        return 0
    # consecutive intervals can share a leaf: count the union of [lo, hi)
    prev_hi = np.maximum.accumulate(hi)
    start = np.maximum(lo, np.concatenate([[0], prev_hi[:-1]]))
    return int(np.maximum(hi - start, 0).sum())


def estimate_one(store: Any, text: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Optimal's plan of ``text``: estimated and covered leaves, estimated and actual runs."""
    plan = plan_query(store, text, QueryOptions(plan="optimal",
                                                extra={"rivals": False, **extra}))
    st = plan.pattern_state  # type: ignore[attr-defined]
    snap = plan.ctx.snapshots[0]
    est = st.chosen
    return {"est_leaves": float(est.pio_leaves) if est is not None else None,
            "est_runs": float(est.intervals) if est is not None else None,
            "leaves": covered_leaves(snap, plan.intervals),
            "runs": 1 if plan.intervals is None else len(plan.intervals),
            "indexes": len(est.config) if est is not None else 0,
            "strategy": plan.strategy}


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def run_store(store: Any, ms: list[int], count: int, nskew: int) -> dict[str, Any]:
    """Every query's estimates on one store."""
    sets: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for qset, base in QUERY_SETS.items():
        uni = sets[qset] = {}
        for m in ms:
            qs = random_queries(m, count, seed=base + m, attributes=("A5",), stream=STREAM)
            t0 = time.perf_counter()
            uni[str(m)] = [estimate_one(store, q, {}) for q in qs]
            print(f"  uniform ({qset}) m={m}: {count} plans in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    skw: dict[str, list[dict[str, Any]]] = {}
    for a in ATTRS:
        qs = random_queries(8, nskew, seed=2000 + int(a[1]), attributes=("A5",), stream=STREAM)
        rng = np.random.default_rng(int(a[1]))
        rows = []
        for q in qs:
            q = _skew_query(q, int(rng.integers(1, 9)), a)
            rows.append({label: estimate_one(store, q, extra) for label, extra in VARIANTS})
        skw[a] = rows
        print(f"  skewed {a}: {nskew} queries", flush=True)
    return {"uniform": sets["held-out"], "uniform_tuning": sets["tuning"], "skewed": skw}


def summarize(res: Results, runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Tables and goals from every store's estimates."""
    sizes = sorted(runs)
    rows, overall, tuning = [], {}, {}
    for n in sizes:
        for qset, key, into in (("held-out", "uniform", overall),
                                ("tuning", "uniform_tuning", tuning)):
            all_e, all_f = [], []
            for m, qs in runs[n].get(key, {}).items():
                e = [x for r in qs if (x := err_pio(r)) is not None]
                f = [x for r in qs if (x := poisson_floor(r)) is not None]
                all_e += e
                all_f += f
                rows.append([n, qset, int(m), len(e), _median(e),
                             float(np.percentile(e, 75)) if e else float("nan"), _median(f),
                             _median([r["runs"] for r in qs])])
            into[n] = (_median(all_e), _median(all_f), len(all_e))
            rows.append([n, qset, "all", len(all_e), into[n][0],
                         float(np.percentile(all_e, 75)) if all_e else float("nan"),
                         into[n][1], float("nan")])
    res.table("Relative C_PIO error of Optimal's plan, uniform (A5): leaves estimated vs "
              "covered, held-out and tuning queries", ["events", "queries", "m",
                                                       "plans with leaves", "median",
                                                       "75th pct", "chance floor (median)",
                                                       "replay runs (median)"], rows)
    skew_rows, skew = [], {}
    for n in sizes:
        for a, qs in runs[n]["skewed"].items():
            e = {lab: [x for r in qs if (x := err_pio(r[lab])) is not None]
                 for lab, _ in VARIANTS}
            f = [x for r in qs if (x := poisson_floor(r["cpm"])) is not None]
            skew[(n, a)] = (_median(e["no cpm"]), _median(e["cpm"]))
            skew_rows.append([n, a, len(qs), _median(e["no cpm"]), _median(e["cpm"]),
                              _median(f),
                              float(np.mean([r["cpm"]["leaves"] <= r["no cpm"]["leaves"]
                                             for r in qs])) if qs else float("nan")])
    res.table("Skewed (m = 8, one symbol on the attribute): median relative C_PIO error of "
              "Optimal's plan without and with the CPM",
              ["events", "attribute", "queries", "without CPM", "with CPM",
               "chance floor with CPM (median)", "CPM plan covers no more leaves"], skew_rows)
    big = sizes[-1]
    res.goal(f"median relative C_PIO error, uniform held-out queries, {big:,} events", "<= 5%",
             f"{overall[big][0]:.1%} ({overall[big][2]} plans; chance alone: "
             f"{overall[big][1]:.1%})", overall[big][0] <= 0.05)
    cut = {a: skew[(big, a)] for a in ("A1", "A2", "A3")}
    res.goal(f"CPM cuts the C_PIO error on skewed attributes (A1-A3), {big:,} events",
             "median error with CPM < without",
             "; ".join(f"{a}: {x:.1%} -> {y:.1%}" for a, (x, y) in cut.items()),
             all(y < x for x, y in cut.values()))
    res.headline("the planner's C_PIO estimates (leaves a plan replays) against the measured",
                 " / ".join(f"{x:,}" for x in sizes) + f" events, {overall[big][2]} plans at the "
                 "largest", "chance alone (a Poisson count's deviation)",
                 " / ".join(f"{overall[x][0]:.1%}" for x in sizes) + " median error (chance "
                 + " / ".join(f"{overall[x][1]:.1%}" for x in sizes) + "; goal <= 5% at the "
                 "largest)", overall[big][0] <= 0.05)
    return {"overall": overall, "skew": skew}


def plot(res: Results, runs: dict[int, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for n in sorted(runs):
        pts = [(poisson_floor(r), err_pio(r)) for qs in runs[n]["uniform"].values()
               for r in qs]
        pts = [(f, e) for f, e in pts if f is not None and e is not None]
        if pts:
            f, e = zip(*pts)
            ax.scatter(f, e, s=8, alpha=0.5, label=f"{n / 1e6:g}M events")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="error = chance floor")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chance floor of the plan (0.8 / sqrt(runs))")
    ax.set_ylabel("relative C_PIO error")
    ax.set_title("Uniform: error vs what chance alone gives")
    ax.legend(fontsize=8)
    ax = axes[1]
    big = max(runs)
    labels = list(runs[big]["skewed"])
    x = np.arange(len(labels))
    for k, (lab, _) in enumerate(VARIANTS):
        med = [_median([e for r in runs[big]["skewed"][a] if (e := err_pio(r[lab]))
                        is not None]) for a in labels]
        ax.bar(x + (k - 0.5) * 0.38, med, 0.38, label=f"Optimal, {lab}")
    ax.set_xticks(x, labels)
    ax.set_ylabel("median relative C_PIO error")
    ax.set_title(f"Skewed, {big / 1e6:g}M events")
    ax.legend(fontsize=8)
    res.save_plot(fig, "estimates.png")


def main(argv: list[str] | None = None) -> None:
    ap = arguments("C_PIO estimates of the pattern planner at growing stream sizes")
    ap.add_argument("--events", default=None,
                    help="comma-separated stream sizes (quick: 200000,1000000; full: "
                         "10000000,50000000)")
    ap.add_argument("--queries", type=int, default=None, help="queries per m (20 / 100)")
    ap.add_argument("--skewed", type=int, default=None, help="queries per attribute (10 / 100)")
    ap.add_argument("--ms", default="4,8,16,32", help="values of m")
    ap.add_argument("--stores", default=None,
                    help="folder to keep (and reuse) the stores in, one per size")
    args = ap.parse_args(argv)
    full = bool(args.full)
    sizes = [int(x) for x in (args.events or ("10000000,50000000" if full
                                              else "200000,1000000")).split(",") if x]
    count = args.queries or (100 if full else 20)
    nskew = args.skewed if args.skewed is not None else (100 if full else 10)
    ms = [int(x) for x in args.ms.split(",") if x]
    import tempfile

    tmp = None if args.stores else tempfile.TemporaryDirectory(prefix="bench-estimates-")
    root = Path(args.stores) if args.stores else Path(tmp.name)  # type: ignore[union-attr]
    res = Results("estimates",
                  "C_PIO estimates of the pattern planner at growing stream sizes",
                  params={"mode": "full" if full else "quick", "events": sizes,
                          "queries_per_m": count, "skewed_per_attribute": nskew, "m": ms,
                          "window": 300})
    runs: dict[int, dict[str, Any]] = {}
    try:
        for n in sizes:
            t0 = time.perf_counter()
            store = build_store(root / f"store{n}", n)
            print(f"{n:,} events: store ready in {time.perf_counter() - t0:.0f} s", flush=True)
            t0 = time.perf_counter()
            runs[n] = run_store(store, ms, count, nskew)
            res.params[f"seconds_{n}"] = round(time.perf_counter() - t0, 1)
        s = summarize(res, runs)
        plot(res, runs)
        res.notes += [
            "Plans use the store's weights (the defaults unless the store was calibrated); "
            "the estimate of C_PIO does not depend on the weights, only the choice of plan "
            "does.",
            "Covered leaves are counted from the plan's replay intervals (each leaf once), "
            "which is what the replay reads; plans that cover no leaf are left out of the "
            "error (as in the planner benchmark).",
            "Chance floor: E|X - lam| / lam for a Poisson count X of mean lam = the estimated "
            "replay runs (``poisson_floor`` of the planner benchmark).",
            "Overall medians: " + ", ".join(
                f"{n:,} events {e:.1%} (floor {f:.1%}, {k} plans)"
                for n, (e, f, k) in s["overall"].items()) + ".",
        ]
        out = res.write()
        (out / "queries.json").write_text(json.dumps(
            {str(n): r for n, r in runs.items()}, indent=1) + "\n")
        print((out / "results.md").read_text())
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
