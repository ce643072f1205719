"""Benchmark: GRETA vs the two-step baseline on the paper's three workloads (Sec. 10).

For each workload (stock / Q1, linear road / Q3, cluster / Q2; see
:mod:`replaydb.bench.greta_workloads`) and each number of events per window, a stream of two
window lengths is generated and evaluated by

* GRETA (``replaydb.operators.greta``), and
* the two-step baseline (:mod:`replaydb.bench.greta_twostep`: construct every trend, then
  aggregate) with a trend cap and a 60 s time limit; once it fails at a size it is not tried at
  larger ones.

Each measurement runs in its own subprocess (after a warm-up that loads the compiled kernels) so
that peak memory is per run; both systems' results are compared where both finish. Reported:
wall and CPU seconds for the whole stream, throughput, GRETA's peak state (bytes of its arrays),
peak RSS, trends constructed by the baseline, and the speedup. Goals (issue 10): GRETA handles 1M
events per window; latency linear-ish in events per window; >= 1000x faster than the baseline at
the largest size the baseline finishes within 60 s; memory linear.

    python -m replaydb.bench.bench_greta            # --quick: up to 100k events per window
    python -m replaydb.bench.bench_greta --full     # up to 1M events per window

Results: ``bench/results/greta/greta.{md,json}``, ``latency.png``, ``memory.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "greta"
QUICK_SIZES = [10_000, 30_000, 100_000]
FULL_SIZES = [10_000, 30_000, 100_000, 300_000, 1_000_000]
BASELINE_SIZES = [250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 100_000, 300_000, 1_000_000]
TIME_LIMIT_S = 60.0
TREND_CAP = 2_000_000_000


def _digest(rows: list[dict[str, Any]]) -> str:
    norm = []
    for r in rows:
        items = []
        for k, v in sorted(r.items()):
            if k == "last_seq":
                continue
            if isinstance(v, float):
                v = round(v, 9)
            elif not isinstance(v, int | type(None)):
                s = str(v)
                v = int(s) if s.lstrip("-").isdigit() else s
            items.append((k, v))
        norm.append(tuple(items))
    norm.sort(key=repr)
    return hashlib.sha256(repr(norm).encode()).hexdigest()[:16]


def worker(args: dict[str, Any]) -> dict[str, Any]:
    """One measurement (runs in a subprocess)."""
    from replaydb.bench.greta_twostep import TwoStepBaseline
    from replaydb.bench.greta_workloads import WORKLOADS
    from replaydb.planner.lang.greta import bind, parse

    w = WORKLOADS[args["workload"]]
    n = args["events_per_window"]
    table = w.generate(n, windows=2.0, seed=args.get("seed", 0), reference=args.get("reference"))
    warm = w.generate(200, windows=2.0, seed=1)
    out: dict[str, Any] = {"workload": w.name, "events_per_window": n, "system": args["system"],
                           "events": table.num_rows}
    if args["system"] == "greta":
        bind(parse(w.query), warm.schema, "s", exact_type="string").process(warm)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c0, t0 = time.process_time(), time.perf_counter()
        op = bind(parse(w.query), table.schema, "s", exact_type="string")
        res = op.process(table)
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - c0
        rows = res.to_pylist()
        out["status"] = "ok"
        out["state_mb"] = op.counters.extra.get("peak_state_bytes", 0) / 1e6
        out["state_entries"] = op.counters.peak_state
        out["limbs"] = op._rt.graphs[0].L
        out["max_count_digits"] = max((len(str(r.get("COUNT(*)", r.get("SUM(M.cpu)", ""))))
                                       for r in rows), default=0)
    else:
        b = TwoStepBaseline(w.query, table.schema, "s", trend_cap=TREND_CAP,
                            time_limit_s=args.get("time_limit_s", TIME_LIMIT_S))
        b.run(warm)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c0, t0 = time.process_time(), time.perf_counter()
        r = b.run(table)
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - c0
        out["status"] = r.status
        out["trends"] = r.trends
        rows = r.rows
    out["rows"] = len(rows)
    out["digest"] = _digest(rows) if out["status"] == "ok" else None
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["rss_warm_mb"] = rss0 / 1024
    return out


REFERENCE: int | None = None  # streams are nested subsets of the stream of this size


def measure(workload: str, n: int, system: str, time_limit_s: float) -> dict[str, Any]:
    args = {"workload": workload, "events_per_window": n, "system": system,
            "time_limit_s": time_limit_s, "reference": REFERENCE}
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "replaydb.bench.bench_greta", "--worker",
                           json.dumps(args)], capture_output=True, text=True, env=env,
                          timeout=time_limit_s * 6 + 600)
    if proc.returncode != 0:
        return {**args, "status": f"error: {proc.stderr.strip().splitlines()[-1:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bisect(name: str, lo: int, hi: int, time_limit_s: float, base_ok: dict[int, dict],
            greta: dict[int, dict], records: list[dict[str, Any]], steps: int = 6) -> None:
    """Find (approximately) the largest size the baseline finishes within the time limit: the
    trend count grows exponentially, so the coarse size grid jumps over it."""
    for _ in range(steps):
        mid = int(round(math.sqrt(lo * hi)))
        if mid <= lo or mid >= hi or hi - lo <= max(2, lo // 50):
            break
        b = measure(name, mid, "two-step", time_limit_s)
        g = measure(name, mid, "greta", time_limit_s)
        records.extend([g, b])
        greta[mid] = g
        same = b.get("digest") == g.get("digest") if b.get("status") == "ok" else None
        b["same_result"] = same
        print(f"{name:12s} {mid:>9,} two-step {b.get('status')} {b.get('wall_s', 0):8.3f}s "
              f"trends {b.get('trends', 0):,} same={same}  (search)", flush=True)
        if b.get("status") == "ok" and b["wall_s"] <= time_limit_s:
            base_ok[mid] = b
            lo = mid
        else:
            hi = mid


def _slope(xs: list[float], ys: list[float]) -> float | None:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def run(sizes: list[int], mode: str, time_limit_s: float) -> dict[str, Any]:
    from replaydb.bench.greta_workloads import WORKLOADS

    records: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for name in WORKLOADS:
        base_ok: dict[int, dict] = {}
        greta: dict[int, dict] = {}
        failed = False
        b_sizes = [s for s in BASELINE_SIZES if s <= max(sizes)]
        for n in sorted(set(b_sizes) | set(sizes)):
            g = measure(name, n, "greta", time_limit_s)
            greta[n] = g
            records.append(g)
            print(f"{name:12s} {n:>9,} greta    {g.get('status')} {g.get('wall_s', 0):8.3f}s "
                  f"state {g.get('state_mb', 0):8.1f} MB", flush=True)
            if n in b_sizes and not failed:
                b = measure(name, n, "two-step", time_limit_s)
                records.append(b)
                same = b.get("digest") == g.get("digest") if b.get("status") == "ok" else None
                b["same_result"] = same
                print(f"{name:12s} {n:>9,} two-step {b.get('status')} {b.get('wall_s', 0):8.3f}s "
                      f"trends {b.get('trends', 0):,} same={same}", flush=True)
                if b.get("status") == "ok" and b["wall_s"] <= time_limit_s:
                    base_ok[n] = b
                else:
                    failed = True
                    lo = max(base_ok) if base_ok else None
                    if lo is not None:
                        _bisect(name, lo, n, time_limit_s, base_ok, greta, records)
        s: dict[str, Any] = {}
        if base_ok:
            nmax = max(base_ok)
            s["baseline_largest_ok"] = nmax
            s["baseline_wall_s"] = base_ok[nmax]["wall_s"]
            s["greta_wall_s"] = greta[nmax]["wall_s"]
            s["speedup_at_largest"] = base_ok[nmax]["wall_s"] / max(greta[nmax]["wall_s"], 1e-9)
            s["baseline_cpu_s"] = base_ok[nmax]["cpu_s"]
            s["speedup_cpu_at_largest"] = base_ok[nmax]["cpu_s"] / max(greta[nmax]["cpu_s"],
                                                                     1e-9)
            s["results_equal"] = all(b.get("same_result") for b in base_ok.values())
        big = [n for n in sizes if greta[n].get("status") == "ok"]
        s["greta_largest"] = max(big) if big else None
        s["latency_slope"] = _slope([float(n) for n in big], [greta[n]["cpu_s"] for n in big])
        s["memory_slope"] = _slope([float(n) for n in big], [greta[n]["state_mb"] for n in big])
        summary[name] = s
    return {"mode": mode, "time_limit_s": time_limit_s, "trend_cap": TREND_CAP,
            "records": records, "summary": summary,
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "greta.json").write_text(json.dumps(result, indent=1, default=str))
    recs = result["records"]
    lines = [f"# GRETA vs two-step ({result['mode']})", "",
             f"Stream: two window lengths per run; baseline limits: {result['time_limit_s']:.0f} s,"
             f" {result['trend_cap']:,} trends. Times are for the whole stream (wall / CPU).", "",
             "| workload | events/window | GRETA wall s | GRETA CPU s | GRETA state MB | "
             "GRETA RSS MB | two-step wall s | two-step status | trends | speedup (wall) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    by = {(r["workload"], r["events_per_window"], r["system"]): r for r in recs}
    for (wl, n, sysname), r in sorted(by.items()):
        if sysname != "greta":
            continue
        b = by.get((wl, n, "two-step"))
        bw = f"{b['wall_s']:.3f}" if b and "wall_s" in b else "-"
        bs = b["status"] if b else "not run"
        tr = f"{b.get('trends', 0):,}" if b else "-"
        sp = (f"{b['wall_s'] / r['wall_s']:,.0f}x" if b and b.get("status") == "ok"
              and r.get("wall_s") else "-")
        lines.append(f"| {wl} | {n:,} | {r.get('wall_s', float('nan')):.3f} | "
                     f"{r.get('cpu_s', float('nan')):.3f} | {r.get('state_mb', 0):.2f} | "
                     f"{r.get('rss_mb', 0):.0f} | {bw} | {bs} | {tr} | {sp} |")
    lines += ["", "## Goals", ""]
    for wl, s in result["summary"].items():
        sp = s.get("speedup_at_largest")
        lines.append(
            f"- **{wl}**: GRETA largest size {s.get('greta_largest'):,} events/window; "
            f"latency slope (log CPU time vs log events) {_fmt(s.get('latency_slope'))}; "
            f"memory slope {_fmt(s.get('memory_slope'))}; "
            + (f"two-step finishes within the limit up to {s['baseline_largest_ok']:,} "
               f"events/window ({s['baseline_wall_s']:.2f} s), where GRETA takes "
               f"{s['greta_wall_s']:.4f} s: **{sp:,.0f}x** (CPU {s['speedup_cpu_at_largest']:,.0f}x)"
               f", results equal: {s['results_equal']}"
               if sp else "two-step finished at no size"))
    (out / "greta.md").write_text("\n".join(lines) + "\n")
    _plots(result, out)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _plots(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = result["records"]
    names = list(result["summary"])
    for metric, fname, ylabel in (("wall_s", "latency.png", "seconds for the stream (wall)"),
                                  ("state_mb", "memory.png", "peak GRETA state (MB)")):
        fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
        for ax, wl in zip(axes[0], names):
            for sysname, style in (("greta", "o-"), ("two-step", "s--")):
                if metric == "state_mb" and sysname != "greta":
                    continue
                pts = sorted((r["events_per_window"], r[metric]) for r in recs
                             if r["workload"] == wl and r["system"] == sysname
                             and r.get("status") == "ok" and metric in r)
                if pts:
                    ax.plot([p[0] for p in pts], [max(p[1], 1e-4) for p in pts], style,
                            label="GRETA" if sysname == "greta" else "two-step")
            if metric == "state_mb":
                pts = sorted((r["events_per_window"], r["rss_mb"]) for r in recs
                             if r["workload"] == wl and r["system"] == "greta"
                             and r.get("status") == "ok")
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "^:", label="GRETA RSS")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(wl)
            ax.set_xlabel("events per window")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="up to 100k events per window (default)")
    ap.add_argument("--full", action="store_true", help="up to 1M events per window")
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT_S)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return
    global REFERENCE
    sizes = FULL_SIZES if a.full else QUICK_SIZES
    REFERENCE = max(sizes)
    result = run(sizes, "full" if a.full else "quick", a.time_limit)
    write(result, a.out)
    print((a.out / "greta.md").read_text())


if __name__ == "__main__":
    main()
