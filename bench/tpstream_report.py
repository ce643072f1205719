"""The TPStream benchmark's report (:mod:`replaydb.bench.bench_tpstream`): ``results.md``,
``results.json`` and the plots under ``bench/results/tpstream/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from replaydb.bench.common import headline_row, peer
from replaydb.bench.tpstream_workloads import SYN_QUERY

OUT = Path(__file__).resolve().parent / "results" / "tpstream"


# ============================================================================ report
def headline(res: dict[str, Any]) -> dict[str, Any]:
    """The README row: every workload's throughput and its speedup over DuckDB SQL, the
    slowest of them first (none left out)."""
    kinds = ("synthetic", "traffic")
    rows = [r for kind in kinds for r in res.get("duckdb", {}).get(kind, [])]
    tp = [r for kind in kinds for r in res["throughput"].get(kind, [])]
    speedups = sorted(r["speedup_cpu"] for r in rows if r.get("speedup_cpu"))
    figure = (f"{min(r['meps_cpu'] for r in tp):.1f}-{max(r['meps_cpu'] for r in tp):.1f}M "
              "events/s (CPU) over every workload" if tp else "throughput not measured")
    if speedups:
        figure += (f"; {speedups[0]:.1f}x-{speedups[-1]:.1f}x faster than DuckDB SQL "
                   f"(CPU, {len(speedups)} runs, goal >= 10x)")
    same = all(r.get("same_matches") for r in rows)
    sizes = sorted({r["events"] for r in tp})
    return headline_row("TPStream temporal patterns (synthetic 3-stream and traffic workloads) "
                        "vs the same query in DuckDB SQL", " / ".join(f"{n:,}" for n in sizes)
                        + " events", f"{peer('DuckDB')} (interval-join SQL)", figure,
                        bool(speedups) and speedups[0] >= 10 and same)


def write_report(res: dict[str, Any], mode: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    res.setdefault("title", f"TPStream benchmark ({mode})")
    res["headlines"] = [headline(res)]
    (OUT / "results.json").write_text(json.dumps(res, indent=1, default=str))
    lines = [f"# TPStream benchmark ({mode})", "",
             f"Machine: {res.get('machine_note', res.get('machine'))}. Times: best of repeats; "
             "CPU = process CPU time "
             f"(the machine is shared; wall-clock times include waiting for the CPU).", ""]
    tp = res["throughput"]
    lines += ["## 1. Throughput (goal: >= 5M events/s for 3-stream patterns)", "",
              "| workload | events | matches | wall s | CPU s | M ev/s (wall) | M ev/s (CPU) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for kind in ("synthetic", "traffic"):
        for r in tp[kind]:
            lines.append(f"| {kind} | {r['events']:,} | {r['results']:,} | {r['wall_s']:.3f} | "
                         f"{r['cpu_s']:.3f} | {r['meps_wall']:.2f} | {r['meps_cpu']:.2f} |")
    lines += ["", f"synthetic: `{SYN_QUERY}`", "",
              f"traffic: aggressive drivers, thresholds (speed, +accel, -accel) = "
              f"{[round(x, 3) for x in tp['traffic_thresholds']]}", ""]
    fam = res["families"]
    lines += ["## 2. Query families (median CPU s over instances)", "",
              "| family | " + " | ".join(f"n={k}" for k in next(iter(fam.values()))) + " |",
              "|---|" + "---:|" * len(next(iter(fam.values())))]
    for kind, per in fam.items():
        cells = []
        for _k, v in per.items():
            m = v["median_cpu_s"]
            cells.append("-" if m is None else f"{m:.2f}" + (f" ({v['over_cap']} over cap)"
                                                             if v["over_cap"] else ""))
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lat = res["latency"]
    lines += ["", "## 3. Detection latency: low-latency mode vs waiting for situation ends", "",
              "Average gain in seconds (relative detection time low-latency / normal, measured "
              "from the first situation's start) for A:B duration ratios 2:1, 1:1, 1:2.", "",
              "| relation | 2:1 | 1:1 | 1:2 |", "|---|---:|---:|---:|"]
    for r, per in lat["relations"].items():
        cells = []
        for key in ("1:0.5", "1:1", "1:2"):
            v = per[key]
            cells.append("-" if v["avg_gain_s"] is None else
                         f"{v['avg_gain_s']:.1f} s ({v['avg_relative_detection']:.2f})")
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    ad = lat["aggressive_drivers"]
    lines += ["", f"Aggressive drivers (traffic): {ad['matches']} matches, average gain "
              f"{ad['avg_gain_s']:.1f} s, detection latency reduced by up to "
              f"{100 * (ad['max_relative_reduction'] or 0):.0f}% "
              f"({100 * (ad['avg_relative_reduction'] or 0):.0f}% on average).", ""]
    a = res["adaptive"]
    lines += ["## 4. Adaptive vs fixed evaluation orders (goal: adaptive within 5% of the best "
              "fixed plan)", "",
              f"Q3 = A before B AND A before C AND B before C, window {a['window']} s, "
              f"{a['events']:,} events, occurrence ratios 1:1:1 -> 1:50:50 -> 50:1:50.", "",
              "| plan | CPU s | matcher steps | candidates | re-plans |", "|---|---:|---:|---:|---:|"]
    for name, r in a["plans"].items():
        lines.append(f"| {name} | {r['cpu_s']:.3f} | {r['steps']:,} | {r['candidates']:,} | "
                     f"{r['replans']} |")
    lines += ["", f"Adaptive / best fixed ({a['best_fixed']}): "
              f"{a['adaptive_over_best_fixed']:.3f} (fastest runs, CPU), "
              f"{a.get('adaptive_over_best_fixed_median', float('nan')):.3f} (median runs), "
              f"{a['adaptive_steps_over_best_fixed']:.3f} (matcher steps). Runs interleaved "
              f"round-robin over the plans.", "",
              "Aggressive drivers (traffic):", "", "| plan | CPU s | matcher steps | re-plans |",
              "|---|---:|---:|---:|"]
    for name, r in a["aggressive_drivers"].items():
        lines.append(f"| {name} | {r['cpu_s']:.3f} | {r['steps']:,} | {r['replans']} |")
    lines += ["", f"Adaptive / best fixed ({a['aggressive_drivers_best_fixed']}): "
              f"{a['aggressive_drivers_adaptive_over_best_fixed']:.3f} (fastest runs), "
              f"{a.get('aggressive_drivers_adaptive_over_best_fixed_median', float('nan')):.3f}"
              f" (median runs). The printed Eq. 5.2 (last row) picks an order with ~600x more "
              f"matcher steps.", ""]
    d = res["duckdb"]
    lines += ["## 5. Side by side with DuckDB SQL (goal: >= 10x faster)", "",
              "| workload | events | TPStream wall s | DuckDB wall s | speed-up (wall) | "
              "TPStream CPU s | DuckDB CPU s | speed-up (CPU) | same matches |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for kind in ("synthetic", "traffic"):
        for r in d[kind]:
            lines.append(f"| {kind} | {r['events']:,} | {r['tpstream_wall_s']:.3f} | "
                         f"{r['duckdb_wall_s']:.3f} | {r['speedup_wall']:.1f}x | "
                         f"{r['tpstream_cpu_s']:.3f} | {r.get('duckdb_cpu_s', float('nan')):.3f} "
                         f"| {r.get('speedup_cpu', float('nan')):.1f}x | "
                         f"{r['same_matches']} ({r['results_tpstream']}) |")
    lines += ["", f"DuckDB ran with {d[next(iter(['synthetic']))][0]['duckdb_threads']} "
              f"threads; TPStream with one. The SQL (synthetic):", "", "```sql",
              d["sql_example"], "```", ""]
    p = res["parallel"]
    lines += ["## 6. Parallel execution (2 workers, wall s)", "",
              "| stream | sequential | threads | processes |", "|---|---:|---:|---:|",
              f"| traffic, PARTITION BY car_id | {p['partitioned_sequential_wall_s']:.2f} | "
              f"{p['partitioned_thread_wall_s']:.2f} | {p['partitioned_process_wall_s']:.2f} |",
              f"| synthetic, unpartitioned (derive/sync/match) | "
              f"{p['unpartitioned_sequential_wall_s']:.2f} | "
              f"{p['unpartitioned_thread_wall_s']:.2f} | {p['unpartitioned_process_wall_s']:.2f} |",
              "", f"Worker start-up, not included above (spawn, imports, loading compiled code):"
              f" processes {p.get('partitioned_process_startup_s', float('nan')):.1f} s "
              f"(partitioned), {p.get('unpartitioned_process_startup_s', float('nan')):.1f} s "
              f"(pipeline). All runs gave the sequential results.", ""]
    (OUT / "results.md").write_text("\n".join(lines))


def plot(res: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    ax = axes[0, 0]
    for kind, mk in (("synthetic", "o"), ("traffic", "s")):
        rows = res["throughput"][kind]
        ev = [r["events"] for r in rows]
        ax.plot(ev, [r["meps_cpu"] for r in rows], marker=mk, label=f"{kind} (CPU)")
        ax.plot(ev, [r["meps_wall"] for r in rows], marker=mk, ls="--", label=f"{kind} (wall)")
    ax.axhline(5, color="red", lw=1, label="goal 5M/s")
    ax.set_xscale("log")
    ax.set_xlabel("events")
    ax.set_ylabel("M events/s")
    ax.set_title("1. Throughput, 3-stream patterns")
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    fam = res["families"]
    ks = list(next(iter(fam.values())).keys())
    width = 0.16
    for i, (kind, per) in enumerate(fam.items()):
        med = [per[k]["median_cpu_s"] or 0 for k in ks]
        lo = [med[j] - (per[k]["min_cpu_s"] or 0) for j, k in enumerate(ks)]
        hi = [(per[k]["max_cpu_s"] or 0) - med[j] for j, k in enumerate(ks)]
        ax.bar(np.arange(len(ks)) + i * width, med, width, yerr=[lo, hi], label=kind, capsize=2)
    ax.set_xticks(np.arange(len(ks)) + 2 * width)
    ax.set_xticklabels([f"n={k}" for k in ks])
    ax.set_ylabel("CPU s (median, min-max)")
    ax.set_title("2. Query families")
    ax.legend(fontsize=7)
    ax = axes[0, 2]
    lat = res["latency"]["relations"]
    rels = list(lat)
    for i, key in enumerate(("1:0.5", "1:1", "1:2")):
        vals = [lat[r][key]["avg_relative_detection"] or np.nan for r in rels]
        ax.bar(np.arange(len(rels)) + i * 0.27, vals, 0.27, label=f"A:B = {key}")
    ax.set_xticks(np.arange(len(rels)) + 0.27)
    ax.set_xticklabels(rels, rotation=60, fontsize=7)
    ax.set_ylabel("detection time, low latency / normal")
    ax.set_title("3. Relative detection latency")
    ax.legend(fontsize=7)
    ax = axes[1, 0]
    plans = res["adaptive"]["plans"]
    names = list(plans)
    ax.bar(range(len(names)), [plans[n]["cpu_s"] for n in names],
           color=["tab:green" if n == "adaptive" else "tab:gray" for n in names])
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("CPU s")
    ax.set_title("4. Adaptive vs fixed orders (Q3, changing ratios)")
    ax = axes[1, 1]
    d = res["duckdb"]
    labels, tp_, dd = [], [], []
    for kind in ("synthetic", "traffic"):
        for r in d[kind]:
            labels.append(f"{kind}\n{r['events'] / 1e6:g}M")
            tp_.append(r["tpstream_wall_s"])
            dd.append(r["duckdb_wall_s"])
    x = np.arange(len(labels))
    ax.bar(x - 0.2, tp_, 0.4, label="TPStream")
    ax.bar(x + 0.2, dd, 0.4, label="DuckDB SQL")
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("wall s (log)")
    ax.set_title("5. Same query in DuckDB SQL")
    ax.legend(fontsize=7)
    ax = axes[1, 2]
    p = res["parallel"]
    cats = ["partitioned", "unpartitioned"]
    for i, ex in enumerate(("sequential", "thread", "process")):
        ax.bar(np.arange(2) + i * 0.27, [p[f"{c}_{ex}_wall_s"] for c in cats], 0.27, label=ex)
    ax.set_xticks(np.arange(2) + 0.27)
    ax.set_xticklabels(["traffic (PARTITION BY)", "synthetic (pipeline)"], fontsize=8)
    ax.set_ylabel("wall s")
    ax.set_title("6. Parallel (2 workers)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "tpstream.png", dpi=110)
