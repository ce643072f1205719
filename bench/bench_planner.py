"""The index-assisted pattern planner: dissertation 3.5.3 in shape.

Data: the synthetic-normal stream (``replaydb.datasets``; e_i.t = i, A1..A5 ~ N(i/N, sigma^2)
with sigma = 0, 0.001, 0.01, 0.1, 1, nine padding doubles for 128-byte events) with an LSM
index on each of A1..A5. Queries: ``replaydb.datasets.queries`` - m basic symbols, each a random
range over 0-10% of [0, 1) on an attribute, Kleene stars by the recursive split, window 300.

Before measuring, ``calibrate`` fits the cost weights on this store (the paper calibrates too);
every plan below uses them.

Experiments (each query's answer is checked against full replay):

1. **Uniform** (Fig. 3.9 b, 3.10, 3.11): symbols on A5 only, m = 2, 4, 8, 16, 32, two query
   sets drawn from disjoint seeds (``planner_runs.QUERY_SETS``): the held-out set, which the
   goals, the tables and the README's headline use, and the tuning set the planner was
   developed on, whose speedups are reported beside (``--no-tuning`` leaves it out). Per query:
   full replay, auto, All, Greedy, Budget, Optimal (all with the coarse pattern map), Optimal
   without the CPM, and the histogram-only plan (cpm). Reported: mean speedup over full replay per
   strategy and m (with median, geometric mean, 10th percentile and total/total beside the
   mean), Optimal vs Greedy, All vs replay, the relative C_PIO error of Optimal's plan (leaves
   estimated vs leaves replayed, over the plans that read through an index), Optimal's
   selection time and combinations examined,
   and how the chosen (auto) plan compares with the best measured plan of the query.
2. **Skewed** (Fig. 3.13, 3.14): m = 8, one symbol on A1..A5, the others on A5; Optimal and
   Greedy with and without the CPM; speedup and C_PIO error per attribute.
3. **All plans of one query** (Fig. 3.12): every one of the 2^m index configurations of one
   query on A5, estimated cost vs measured time (rank correlation, rank of the chosen plan).
4. **Flink** (Fig. 3.9 a): the same events and the uniform queries in Apache Flink SQL
   MATCH_RECOGNIZE (full replay in Flink, local mini-cluster) next to replaydb's full replay and
   auto, when the Flink peer (``replaydb.bench.peers.flink``) and its environment are present.

Times: process CPU seconds of planning (statistics, CPM, selection, index lookups, sort,
Algorithm 3.1) plus execution (replay and matching), each the best of ``--repeat`` runs (short
ones run up to 9 times, while their runs add up to less than half a second); the strategies of
a query are planned round-robin (one planning of each per round), so that a slow spell of the
machine does not fall on one strategy's plannings alone; wall seconds are recorded next to
them. CPU time is used for the goals because the machine is shared
(the numbers will be re-run on a quiet machine); every component runs in one thread.
Plans with identical replay intervals are executed once and share the execution time, as do
plans whose one interval covers the whole stream with full replay.

    python -m replaydb.bench.bench_planner [--quick | --full] [--events N] [--queries Q]

``--quick`` (default): 500k events, 8 queries per m, 4 skewed queries per attribute, all 64
plans of an m = 6 query. ``--full``: 10M events, 100 queries per m, 100 per attribute, all 256
plans of an m = 8 query. Writes ``results.md``, ``results.json``, ``queries.json`` (every
query's measurements) and PNG plots under ``bench/results/planner/``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import replaydb
from replaydb.bench.common import Results, arguments
from replaydb.bench.planner_report import (
    flink_summary,
    goals,
    headlines,
    plots,
    speedups_by_set,
    summarize,
)
from replaydb.bench.planner_runs import (
    QUERY_SETS,
    STRATEGIES,
    STREAM,
    Runner,
    all_plans,
    build_store,
    flink,
    skewed,
    uniform,
)
from replaydb.datasets.queries import random_queries


def main(argv: list[str] | None = None) -> None:
    ap = arguments("Index-assisted pattern planner (dissertation 3.5.3)")
    ap.add_argument("--events", type=int, default=None, help="stream size (500k / 10M)")
    ap.add_argument("--queries", type=int, default=None, help="queries per m (8 / 100)")
    ap.add_argument("--skewed", type=int, default=None, help="queries per attribute (4 / 100)")
    ap.add_argument("--ms", default="2,4,8,16,32", help="values of m")
    ap.add_argument("--repeat", type=int, default=None, help="executions per plan (2 / 3)")
    ap.add_argument("--store", default=None, help="keep (and reuse) the store here")
    ap.add_argument("--no-calibrate", action="store_true", help="keep the default weights")
    ap.add_argument("--no-flink", action="store_true", help="skip the Flink comparison")
    ap.add_argument("--no-tuning", action="store_true",
                    help="run only the held-out uniform queries, not the tuning set beside them")
    ap.add_argument("--flink-events", type=int, default=None,
                    help="events of the Flink comparison's stream (100k / 1M)")
    args = ap.parse_args(argv)
    full = bool(args.full)
    n = args.events or (10_000_000 if full else 500_000)
    count = args.queries or (100 if full else 8)
    nskew = args.skewed if args.skewed is not None else (100 if full else 4)
    repeat = args.repeat or (3 if full else 2)
    ms = [int(x) for x in args.ms.split(",") if x]
    tmp = None
    if args.store:
        path = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-planner-")
        path = Path(tmp.name) / "store"
    res = Results("planner", "Index-assisted pattern planner (dissertation 3.5.3)",
                  params={"mode": "full" if full else "quick", "events": n,
                          "queries_per_m": count, "skewed_per_attribute": nskew,
                          "repeat": repeat, "m": ms, "window": 300})
    try:
        t0 = time.perf_counter()
        store = build_store(path, n)
        snap = store.stream(STREAM)
        res.params["build_seconds"] = round(time.perf_counter() - t0, 1)
        res.params["leaf_capacity"] = snap.schema.leaf_capacity
        res.params["leaves"] = snap.tree.n_leaves
        if not args.no_calibrate:
            from replaydb.planner.pattern.calibrate import calibrate

            print("calibrating ...", flush=True)
            cal = calibrate(store, STREAM, queries=40 if full else 12, repeat=2,
                            plot=str(res.plot_path("calibration.png")))
            summ = cal.summary()
            res.table("Calibrated weights (replaydb calibrate on this store)",
                      ["w_PIO s/B", "w_PIO intervals s/B", "w_SIO s/B", "w_sort s",
                       "ms per interval", "interval = events", "R² (log)",
                       "median rel. error", "Spearman(est, time)", "plans"],
                      [[summ["w_pio"], summ["w_pio_interval"], summ["w_sio"], summ["w_sort"],
                        summ["interval_seconds"] * 1000, summ["interval_events"], summ["r2"],
                        summ["median_relative_error"], summ["spearman_estimated"],
                        summ["samples"]]])
            store = replaydb.open(path)
        load0 = os.getloadavg()[0]
        runner = Runner(store, repeat)
        # warm up (JIT compilation of the index and matcher kernels happens on first use)
        runner.query(random_queries(4, 1, seed=1, attributes=("A5",), stream=STREAM)[0],
                     STRATEGIES)
        runner.mismatches.clear()
        print("uniform ...", flush=True)
        uni = uniform(runner, ms, count, "held-out")
        tune = {} if args.no_tuning else uniform(runner, ms, count, "tuning")
        print("skewed ...", flush=True)
        skw = skewed(runner, nskew) if nskew else {}
        print("all plans ...", flush=True)
        plans = all_plans(store, 8 if full else 6, seed=77)
        flink_res = None
        if not args.no_flink:
            print("flink ...", flush=True)
            fl_path = path.parent / (path.name + "-flink")
            flink_res = flink(fl_path, args.flink_events or (1_000_000 if full else 100_000),
                              10 if full else 2, [m for m in ms if m >= 4] or ms, repeat,
                              600.0 if full else 120.0)
            if tmp is None and not args.store:
                shutil.rmtree(fl_path, ignore_errors=True)
        s = summarize(res, uni, skw, plans)
        speedups_by_set(res, {"held-out": uni, **({"tuning": tune} if tune else {})})
        flink_summary(res, flink_res)
        goals(res, s, uni, flink_res)
        headlines(res, uni, n)
        plots(res, uni, s, skw, plans)
        res.notes += [
            "Speedups use process CPU time of planning + execution (best of the repeats); "
            "planning binds the query to its operator and every timed execution runs a "
            "freshly bound one as the first execution does, so a query counts one bind; "
            "wall times are in queries.json (every query's measurements). Load average "
            f"{load0:.1f} at the start and {os.getloadavg()[0]:.1f} at the end on "
            f"{os.cpu_count()} cores.",
            "Every strategy's answer was compared with full replay: "
            f"{len(runner.mismatches)} mismatches.",
            "auto = Optimal with the coarse pattern map (CPM) for estimates and region pruning, "
            "falling back to the plan without index (CPM regions or full replay) when cheaper. "
            "'optimal (no CPM)' estimates with the uniform model over the whole stream.",
            "C_PIO error = |leaves replayed - leaves estimated| / leaves replayed, over plans "
            "that replayed at least one leaf (m = 32 plans often replay nothing).",
            "Best measured plan = the fastest of the plans measured for the query (replay and "
            "every strategy), not all 2^m configurations (those are measured for one query).",
        ]
        res.params["mismatches"] = runner.mismatches[:20]
        res.params["all_plans_query"] = plans["query"] if plans else None
        out = res.write()
        (out / "queries.json").write_text(json.dumps(
            {"query_sets": QUERY_SETS, "uniform": {str(m): q for m, q in uni.items()},
             "uniform_tuning": {str(m): q for m, q in tune.items()}, "skewed": skw},
            indent=1, default=str) + "\n")
        print(f"wrote {out}")
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
