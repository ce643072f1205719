"""TPStream benchmark: throughput, query families, latency, adaptivity, DuckDB SQL, parallelism.

Run ``python -m replaydb.bench.bench_tpstream`` (``--quick``, the default) or ``--full`` (paper
sizes). Results go to ``bench/results/tpstream/`` as ``results.md``, ``results.json`` and PNG
plots. Every competitor runs in the same process over the same in-memory data; TPStream is timed
end to end (Arrow batches in, Arrow results out; data generation excluded, as in the paper) in
wall-clock *and* process CPU time - the machine is shared, so CPU time is the steadier number.

Workloads (generated inline with NumPy; see :func:`situations` and :func:`traffic`):

* the papers' synthetic generator: one boolean attribute per situation stream, situations of
  U[10, 100] s, gaps of U[10, 50] s, 1 Hz;
* a Linear-Road-shaped traffic stream: ~1000 cars driving at once, one report per car and second
  (car_id, speed, accel); the aggressive-drivers query of Listing 5.1 with the paper's thresholds
  (99th percentile speed, 90th percentiles of positive / negative acceleration), without duration
  constraints as in the paper's experiment.

Experiments: (1) throughput for 1M..10M (quick) / 1M..100M (full) events, synthetic 3-stream
pattern and aggressive drivers; (2) query families Equal / Meets / Chain / Star / Combined for
4..10 streams; (3) detection latency of low-latency mode vs waiting for situation ends, per
relation; (4) adaptive vs every fixed evaluation order under a changing workload; (5) the same
queries in DuckDB SQL (gaps-and-islands situations + interval join with the relation predicates);
(6) parallel execution (partitioned workers, unpartitioned derive/sync/match pipeline).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

from replaydb.bench.common import provenance
from replaydb.bench.tpstream_experiments import (
    exp_adaptive,
    exp_duckdb,
    exp_families,
    exp_latency,
    exp_parallel,
    exp_throughput,
)
from replaydb.bench.tpstream_report import OUT, plot, write_report
from replaydb.bench.tpstream_workloads import warm_up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (default)")
    g.add_argument("--full", action="store_true", help="paper sizes (1M-100M events)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every size by this factor (e.g. 0.01 for a smoke run)")
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset of: throughput families latency adaptive duckdb parallel")
    args = ap.parse_args()
    full = args.full
    mode = ("full" if full else "quick") + (f" x{args.scale:g}" if args.scale != 1 else "")

    def sz(n: int) -> int:
        return max(20_000, int(n * args.scale))

    only = set(args.only or ["throughput", "families", "latency", "adaptive", "duckdb",
                             "parallel"])
    prev = {}
    if (OUT / "results.json").exists() and args.only:
        prev = json.loads((OUT / "results.json").read_text())
    res: dict[str, Any] = dict(prev)
    res.update(provenance())
    res["machine_note"] = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
                           f"{platform.python_version()}, load average "
                           f"{os.getloadavg()[0]:.1f} at start")
    print("warm-up (compile/load the matcher)", flush=True)
    warm_up()
    t0 = time.perf_counter()

    def save() -> None:                       # keep what is done if a later section fails
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(res, indent=1, default=str))

    if "throughput" in only:
        print("1. throughput", flush=True)
        sizes = [1_000_000, 10_000_000, 30_000_000, 100_000_000] if full else \
            [1_000_000, 3_000_000, 10_000_000]
        res["throughput"] = exp_throughput([sz(n) for n in sizes], 2 if not full else 1)
        save()
    if "families" in only:
        print("2. query families", flush=True)
        res["families"] = exp_families(sz(10_000_000 if full else 1_000_000), [4, 6, 8, 10],
                                       10 if full else 3)
        save()
    if "latency" in only:
        print("3. latency", flush=True)
        res["latency"] = exp_latency(sz(5_000_000 if full else 1_000_000))
        save()
    if "adaptive" in only:
        print("4. adaptivity", flush=True)
        res["adaptive"] = exp_adaptive(sz(30_000_000 if full else 3_000_000), 600, 5)
        save()
    if "duckdb" in only:
        print("5. DuckDB", flush=True)
        res["duckdb"] = exp_duckdb([sz(n) for n in ([1_000_000, 10_000_000] if full
                                                    else [1_000_000, 3_000_000])])
        save()
    if "parallel" in only:
        print("6. parallel", flush=True)
        res["parallel"] = exp_parallel(sz(30_000_000 if full else 4_000_000))
        save()
    res["mode"] = mode
    res["total_s"] = time.perf_counter() - t0
    write_report(res, mode)
    plot(res)
    print(f"wrote {OUT / 'results.md'}", flush=True)


if __name__ == "__main__":
    main()
