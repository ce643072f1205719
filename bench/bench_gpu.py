"""GPU operators against the best CPU path of replaydb, side by side in one run (dissertation 4.4).

Experiments (the dissertation's, in shape), each timing the CPU operator and its GPU variant on
the same in-memory Arrow batches of the GPU-chapter stream (``t = seq = i``, ``v1..v6`` float32
uniform in [0, 1); :func:`replaydb.bench.bench_patterns.stream`):

* **filter** - ``v1 < s`` for selectivities s = 1 .. 1e-5, batch sizes 2^16 .. 2^22;
* **aggregation** - count windows of W = 2^12 .. 2^20 events, slide 1, ``SUM(v1), MAX(v2)``;
* **join** - the stream split into sides L/R (alternating), count windows W = 4K .. 1M per
  side, band predicate ``abs(L.v1 - R.v1) < s/2`` (selectivity about s), s = 1 .. 1e-5.
  Combinations whose output would exceed :data:`MAX_JOIN_ROWS` rows are skipped and listed
  (selectivity 1 at large windows produces n*W result rows: memory, not computation, decides);
* **pattern E1-E4** - the SASE+ workloads of ``bench_patterns`` part 2: E1 ``(A, B)``
  skip-till-any over windows 2^10 .. 2^17; E2/E3 2 .. 8 symbols at window 2^16 (skip-till-any /
  skip-till-next); E4 ``(A, B+, C)`` skip-till-next (Kleene plus) over windows 2^10 .. 2^17.

Each cell is the best of ``--repeat`` runs after one warm-up run (JIT compilation of the CPU
path's Numba code and of the CUDA kernels is not timed); GPU times include every host/device
transfer. Results (row counts) of the two devices are compared in every cell.

Goals (issue): pattern matching at window 2^16 >= 10x the CPU path (E1), join >= 10x at window
512K, aggregation >= 5x at window 2^20. They are evaluated in ``--full`` runs only.

Without a CUDA GPU the script still runs: it measures the CPU side only, writes under
``bench/results/gpu/no-gpu/`` and states in every GPU column, goal and note that GPU numbers were
**not measured** (the CUDA simulator is never timed: its speed means nothing). With a GPU the
results go to ``bench/results/gpu/`` (``results.md``, ``results.json``, ``gpu.png``).

    python -m replaydb.bench.bench_gpu --full      # on the GPU machine
    python -m replaydb.bench.bench_gpu [--quick]   # small sizes (minutes)
    python -m replaydb.bench.bench_gpu --smoke     # tiny sizes (seconds; checks the script runs)

Where commands are time-limited, run one experiment per command into its own folder, e.g.
``--full --only join --out bench/results/gpu/join``. ``--cpu-budget S`` (120 s per cell with
``--full``) stops a CPU run after S seconds and scales its time to the whole stream at the
measured rate (listed in the notes): the CPU join at window 1M costs about 10^12 pair tests.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.bench.common import RESULTS, Results, arguments

MAX_JOIN_ROWS = 1 << 28
"""Join cells whose expected output exceeds this many rows are skipped (memory-bound)."""


@dataclass
class GpuResults(Results):
    """Results written to an explicit folder (``bench/results/gpu`` or a sub-folder)."""

    root: Path = RESULTS / "gpu"

    @property
    def dir(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root


def cuda_gpu() -> str | None:
    """The GPU's name when a real CUDA device is usable, else None (the simulator is not one)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return None
    from replaydb.operators.gpu.testing import probe_cuda_driver

    if not probe_cuda_driver():
        return None
    from numba import cuda

    if not cuda.is_available():
        return None
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def timed(make: Any, batches: list[pa.RecordBatch], repeat: int,
          budget: float | None = None) -> tuple[float, int, int]:
    """Best wall seconds of ``repeat`` runs of a fresh operator over ``batches`` (one untimed
    warm-up run on a slice of the first batch first); returns (seconds, result rows, events
    pushed). With ``budget`` (seconds) a run stops pushing once it has taken that long (one run
    only): the time and the events then cover the prefix that was processed."""
    warm = make()
    warm.push(batches[0].slice(0, min(batches[0].num_rows, 4096)))
    warm.flush()
    warm.results()
    best, rows, done = float("inf"), 0, 0
    for _ in range(repeat):
        op = make()
        pushed = 0
        t0 = time.perf_counter()
        for b in batches:
            op.push(b)
            pushed += b.num_rows
            if budget is not None and time.perf_counter() - t0 > budget:
                break
        op.flush()
        out = op.results()
        dt = time.perf_counter() - t0
        if dt < best:
            best, rows, done = dt, out.num_rows, pushed
        if done < sum(b.num_rows for b in batches):
            break
    return best, rows, done


class Bench:
    """One run: sizes, repeat, and whether a GPU is there."""

    def __init__(self, res: Results, size: str, repeat: int, gpu: str | None) -> None:
        self.res, self.size, self.repeat, self.gpu = res, size, repeat, gpu
        self.series: dict[str, list[tuple[Any, float, float | None]]] = {}
        self.mismatches: list[str] = []
        self.calib: list[tuple[str, float, float, float | None]] = []
        self.truncated: list[str] = []
        self.cpu_budget: float | None = None

    def pick(self, smoke: Any, quick: Any, full: Any) -> Any:
        return {"smoke": smoke, "quick": quick, "full": full}[self.size]

    def pair(self, label: str, make_cpu: Any, make_gpu: Any, batches: list[pa.RecordBatch]
             ) -> tuple[float, float | None, int]:
        """Time the CPU operator and (with a GPU) its GPU variant; compare their row counts.

        The CPU side has a time budget per cell (``--cpu-budget``): a cell whose CPU run
        exceeds it is timed on the prefix processed so far, and its CPU seconds are scaled to
        the whole stream at the prefix's rate (noted in the results; windows are still filling
        in a prefix, so this favours the CPU)."""
        n = sum(b.num_rows for b in batches)
        cpu_s, cpu_rows, done = timed(make_cpu, batches, self.repeat, self.cpu_budget)
        if done < n:
            self.truncated.append(f"{label}: CPU timed on the first {done:,} of {n:,} events")
            cpu_s = cpu_s * n / max(1, done)
        if self.gpu is None:
            return cpu_s, None, cpu_rows
        gpu_s, gpu_rows, _ = timed(make_gpu, batches, self.repeat)
        if done == n and gpu_rows != cpu_rows:
            self.mismatches.append(f"{label}: GPU {gpu_rows} rows, CPU {cpu_rows}")
        return cpu_s, gpu_s, gpu_rows if done < n else cpu_rows

    def row(self, series: str, x: Any, n: int, cpu_s: float, gpu_s: float | None,
            rows: int, *extra: Any, kind: str, work: float = 1.0) -> list[Any]:
        self.calib.append((kind, n * work, cpu_s, gpu_s))
        self.series.setdefault(series, []).append((x, n / cpu_s, None if gpu_s is None
                                                   else n / gpu_s))
        nm = "not measured"
        return [*extra, n, n / cpu_s, nm if gpu_s is None else n / gpu_s,
                nm if gpu_s is None else cpu_s / gpu_s, rows]


COLS = ["events", "CPU events/s", "GPU events/s", "speedup", "result rows"]


def _batches(tab: pa.Table, rows: int) -> list[pa.RecordBatch]:
    return tab.to_batches(max_chunksize=rows)


def run_filter(b: Bench) -> None:
    from replaydb.bench.bench_patterns import stream
    from replaydb.operators.expr import Binary, Column, Literal
    from replaydb.operators.filter import FilterConfig, FilterOperator
    from replaydb.operators.gpu.filter import GpuFilterOperator

    n = b.pick(1 << 14, 1 << 21, 1 << 24)
    tab = stream(n)
    rows = []
    for batch in b.pick([1 << 12], [1 << 16, 1 << 20], [1 << 16, 1 << 20, 1 << 22]):
        for sel in (1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5):
            cfg = FilterConfig(Binary("<", Column("v1"), Literal(sel)))
            c, g, r = b.pair(f"filter s={sel} batch={batch}", lambda cfg=cfg: FilterOperator(cfg),
                             lambda cfg=cfg: GpuFilterOperator(cfg, backend="cuda"),
                             _batches(tab, batch))
            rows.append(b.row(f"filter batch {batch}", sel, n, c, g, r, sel, batch,
                              kind="filter"))
    b.res.table("Filter v1 < s", ["selectivity", "batch", *COLS], rows)


def run_aggregation(b: Bench) -> None:
    from replaydb.bench.bench_patterns import stream
    from replaydb.operators.expr import Column
    from replaydb.operators.gpu.window import GpuWindowAggregate
    from replaydb.operators.window import AggSpec, WindowAggregate, WindowConfig

    rows = []
    for e in b.pick([8, 10], [12, 14, 16], [12, 14, 16, 18, 20]):
        w = 1 << e
        n = max(4 * w, b.pick(1 << 13, 1 << 18, 1 << 22))
        tab = stream(n)
        cfg = WindowConfig(size=w, slide=1, kind="count", aggregates=(
            AggSpec("SUM", Column("v1"), "s"), AggSpec("MAX", Column("v2"), "m")))
        c, g, r = b.pair(f"aggregation W=2^{e}", lambda cfg=cfg: WindowAggregate(cfg),
                         lambda cfg=cfg: GpuWindowAggregate(cfg, backend="cuda"),
                         _batches(tab, b.pick(1 << 12, 1 << 18, 1 << 20)))
        rows.append(b.row("aggregation", w, n, c, g, r, f"2^{e}", kind="window"))
    b.res.table("Sliding-window aggregation (count windows, slide 1, SUM + MAX)",
                ["window", *COLS], rows)


def run_join(b: Bench) -> None:
    from replaydb.bench.bench_patterns import stream
    from replaydb.operators.expr import Binary, Call, Column, Literal
    from replaydb.operators.gpu.join import GpuJoinOperator
    from replaydb.operators.join import JoinConfig, JoinOperator, Window

    rows, skipped = [], []
    windows = b.pick([1 << 9], [1 << 12, 1 << 14], [1 << 12, 1 << 14, 1 << 16, 1 << 18,
                                                    1 << 19, 1 << 20])
    for w in windows:
        n = max(4 * w, b.pick(1 << 12, 1 << 15, 1 << 21))
        base = stream(n)
        tab = base.append_column("type", pa.array(np.where(np.arange(n) % 2 == 0, "L", "R")))
        for sel in (1.0, 1e-1, 1e-3, 1e-5):
            expected = n * w * sel
            if expected > MAX_JOIN_ROWS:
                skipped.append(f"W={w}, s={sel}: about {expected:.2g} result rows")
                continue
            pred = Binary("<", Call("ABS", (Binary("-", Column("v1", "L"), Column("v1", "R")),)),
                          Literal(sel / 2))
            cfg = JoinConfig(tab.schema, "L", "R", Window("count", w), Window("count", w), pred)
            c, g, r = b.pair(f"join W={w} s={sel}", lambda cfg=cfg: JoinOperator(cfg),
                             lambda cfg=cfg: GpuJoinOperator(cfg, backend="cuda"),
                             _batches(tab, b.pick(1 << 11, 1 << 16, 1 << 20)))
            rows.append(b.row(f"join s={sel:g}", w, n, c, g, r, w, sel, kind="join", work=w))
    b.res.table("Windowed band join abs(L.v1 - R.v1) < s/2", ["window", "selectivity", *COLS],
                rows)
    if skipped:
        b.res.notes.append("join cells skipped (output larger than "
                           f"{MAX_JOIN_ROWS:,} rows): " + "; ".join(skipped))


def run_patterns(b: Bench) -> None:
    from replaydb.bench.bench_patterns import _sase_e, stream
    from replaydb.operators.gpu.pattern import GpuPatternOperator
    from replaydb.planner.lang import sase

    def ops(text: str, schema: pa.Schema) -> tuple[Any, Any]:
        def cpu() -> Any:
            return sase.bind(sase.parse(text), schema, None, state_cap=None)

        def gpu() -> Any:
            op = cpu()
            return GpuPatternOperator(op.config, state_cap=None, backend="cuda")
        return cpu, gpu

    rows = []
    windows = [1 << e for e in b.pick([6, 8], [10, 12], range(10, 18))]
    wfix = b.pick(1 << 8, 1 << 12, 1 << 16)
    symbols = b.pick([2, 3], [2, 3, 4], list(range(2, 9)))
    batch = b.pick(1 << 11, 1 << 14, 1 << 18)
    for kind in ("E1", "E4"):
        for w in windows:
            n = max(4 * w, b.pick(1 << 12, 1 << 15, 1 << 18))
            tab = stream(n, seed=1)
            cpu, gpu = ops(_sase_e(kind, 2, w, 0.0), tab.schema)
            c, g, r = b.pair(f"{kind} W={w}", cpu, gpu, _batches(tab, batch))
            rows.append(b.row(kind, w, n, c, g, r, kind, w, 2, kind="pattern", work=w))
    for kind in ("E2", "E3"):
        for k in symbols:
            n = max(4 * wfix, b.pick(1 << 12, 1 << 15, 1 << 18))
            tab = stream(n, seed=1)
            delta = 1e-5 if kind == "E2" else k / (2 * wfix)
            cpu, gpu = ops(_sase_e(kind, k, wfix, delta), tab.schema)
            c, g, r = b.pair(f"{kind} k={k}", cpu, gpu, _batches(tab, batch))
            rows.append(b.row(kind, k, n, c, g, r, kind, wfix, k, kind="pattern",
                              work=wfix))
    b.res.table("Pattern matching E1-E4 (SASE+, skip-till-any / skip-till-next, Kleene plus)",
                ["workload", "window", "symbols", *COLS], rows)


def calibration(b: Bench) -> None:
    """Median measured ns per event per unit of work, next to the device-choice constants
    (:data:`replaydb.operators.gpu.device.COST`) that ``--device auto`` uses."""
    from replaydb.operators.gpu.device import COST

    rows = []
    for kind in sorted({k for k, *_ in b.calib}):
        pts = [(u, c, g) for k, u, c, g in b.calib if k == kind]
        cpu_ns = float(np.median([c * 1e9 / u for u, c, _ in pts]))
        gpu = [g * 1e9 / u for u, _, g in pts if g is not None]
        rows.append([kind, cpu_ns, float(np.median(gpu)) if gpu else "not measured",
                     COST[kind].cpu_ns, COST[kind].gpu_ns])
    b.res.table("Cost-model calibration: ns per event per unit of work (median over cells; "
                "GPU incl. transfers) vs the constants of --device auto",
                ["operator", "CPU measured", "GPU measured", "CPU constant", "GPU constant"],
                rows)


def goals(b: Bench) -> None:
    def speedup(series: str, x: Any) -> float | None:
        for xx, c, g in b.series.get(series, []):
            if xx == x and g is not None:
                return g / c
        return None

    for what, series, x, target in (
            ("pattern matching E1 at window 2^16", "E1", 1 << 16, 10.0),
            ("join at window 512K (selectivity 1e-5)", "join s=1e-05", 1 << 19, 10.0),
            ("aggregation at window 2^20", "aggregation", 1 << 20, 5.0)):
        s = speedup(series, x)
        if b.gpu is None:
            b.res.goal(what, f">= {target:g}x the CPU path", "not measured (no GPU)", False)
        elif s is None:
            b.res.goal(what, f">= {target:g}x the CPU path", "not run (needs --full)", False)
        else:
            b.res.goal(what, f">= {target:g}x the CPU path", round(s, 2), s >= target)
    if b.gpu is None:
        b.res.headline("GPU operators vs the CPU path", "-", "-",
                       "not measured: no GPU on the machine of this run", None)
    else:
        met = [g["met"] for g in b.res.goals]
        b.res.headline(f"GPU operators vs the CPU path ({b.gpu})", "the dissertation's cells",
                       "replaydb's CPU path",
                       "; ".join(f"{g['goal']}: {g['measured']}" for g in b.res.goals),
                       all(met) if met else None)


def plot(b: Bench) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [("filter", "selectivity", True), ("aggregation", "window (events)", True),
              ("join", "window (events)", True), ("E", "window / symbols", True)]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for ax, (prefix, xlabel, logx) in zip(axes, groups):
        for name, pts in b.series.items():
            if not name.startswith(prefix):
                continue
            xs = [p[0] for p in pts]
            if b.gpu is None:
                ax.plot(xs, [p[1] for p in pts], "o-", label=f"{name} (CPU events/s)")
            else:
                ax.plot(xs, [p[2] / p[1] for p in pts], "o-", label=name)
        if logx:
            ax.set_xscale("log", base=2 if prefix != "filter" else 10)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CPU events/s" if b.gpu is None else "GPU speedup over CPU")
        ax.set_title(prefix if prefix != "E" else "patterns E1-E4")
        ax.legend(fontsize=7)
    if b.gpu is None:
        fig.suptitle("No GPU in this run: CPU throughput only, GPU NOT MEASURED")
    b.res.save_plot(fig, "gpu.png")


def main(argv: list[str] | None = None) -> Path:
    p = arguments(__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    p.add_argument("--repeat", type=int, default=None, help="runs per cell (best is kept)")
    p.add_argument("--only", default="filter,aggregation,join,patterns",
                   help="comma-separated experiments to run")
    p.add_argument("--cpu-budget", type=float, default=None, metavar="SECONDS",
                   help="stop a CPU run after this long and time the prefix (default: 120 with "
                        "--full, none otherwise)")
    p.add_argument("--out", type=Path, default=None,
                   help="results folder (default bench/results/gpu, or .../gpu/no-gpu)")
    a = p.parse_args(argv)
    size = "full" if a.full else "smoke" if a.smoke else "quick"
    gpu = cuda_gpu()
    out = a.out or (RESULTS / "gpu" if gpu else RESULTS / "gpu" / "no-gpu")
    res = GpuResults("gpu", "GPU operators vs the CPU path (dissertation 4.4 experiments)",
                     root=out)
    repeat = a.repeat or (1 if size == "smoke" else 3)
    res.params = {"size": size, "repeat": repeat, "gpu": gpu or "none (GPU NOT MEASURED)"}
    b = Bench(res, size, repeat, gpu)
    b.cpu_budget = a.cpu_budget if a.cpu_budget is not None else (120.0 if a.full else None)
    res.params["cpu_budget_s"] = b.cpu_budget
    todo = {"filter": run_filter, "aggregation": run_aggregation, "join": run_join,
            "patterns": run_patterns}
    for name in a.only.split(","):
        if name not in todo:
            raise SystemExit(f"unknown experiment {name!r}; choose from {', '.join(todo)}")
        print(f"[bench_gpu] {name} ({size}) ...", flush=True)
        todo[name](b)
    goals(b)
    calibration(b)
    if gpu is None:
        res.notes.append("No CUDA GPU was available to this run: only the CPU operators were "
                         "timed. Every GPU column and goal reads 'not measured'; no GPU number "
                         "here is estimated or simulated.")
    else:
        res.notes.append(f"GPU: {gpu}. GPU times include host/device transfers.")
    if b.truncated:
        res.notes.append("CPU runs cut at the time budget (their CPU seconds are scaled to the "
                         "whole stream at the measured rate): " + "; ".join(b.truncated))
    if b.mismatches:
        res.notes.append("RESULT MISMATCHES between CPU and GPU: " + "; ".join(b.mismatches))
    plot(b)
    d = res.write()
    print(f"[bench_gpu] results in {d}" + ("" if gpu else " (no GPU: GPU NOT MEASURED)"))
    return d


if __name__ == "__main__":
    main()
