"""Throughput of the dataset generators: Arrow generation alone and Parquet writing (``make``).

For every generator: events per second of ``generate`` (batches consumed and dropped), events per
second of ``make`` (streamed Parquet, snappy), on-disk bytes per event, and the peak resident set
of a fresh process running ``make`` (so bounded memory shows next to speed). Side by side in one
run; ratios are make/generate.

    python -m replaydb.bench.datasets_throughput [--quick | --full] [--only NAME ...] [--out DIR]

``--quick`` (default) uses 1M events per generator, ``--full`` 10M. Writes ``results.md``,
``results.json`` and ``throughput.png`` under ``bench/results/datasets_throughput/``.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import replaydb.datasets as ds
from replaydb.bench.common import arguments, headline_row, provenance

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "datasets_throughput"

_RSS_PROBE = (
    "import resource, sys, replaydb.datasets as ds;"
    "ds.make(sys.argv[1], sys.argv[2], int(sys.argv[3]), 0, overwrite=True);"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
)


def measure(name: str, events: int, workdir: Path) -> dict[str, float | int | str]:
    for _ in ds.generate(name, 1000, 1):  # warm up (imports, first-call costs)
        pass
    t0, c0 = time.perf_counter(), time.process_time()
    rows = sum(b.num_rows for b in ds.generate(name, events, 0))
    gen_s, gen_cpu = time.perf_counter() - t0, time.process_time() - c0
    out = workdir / f"{name}.parquet"
    c0 = time.process_time()
    res = ds.make(name, out, events, 0, overwrite=True)
    make_cpu = time.process_time() - c0
    proc = subprocess.run([sys.executable, "-c", _RSS_PROBE, name, str(out), str(events)],
                          capture_output=True, text=True, check=True)
    rss = int(proc.stdout.strip().splitlines()[-1])
    out.unlink()
    return {
        "dataset": name, "events": rows, "generate_s": gen_s, "generate_cpu_s": gen_cpu,
        "generate_eps": rows / gen_s, "generate_cpu_eps": rows / gen_cpu,
        "make_s": res.seconds, "make_cpu_s": make_cpu, "make_eps": res.events_per_second,
        "make_cpu_eps": rows / make_cpu,
        "make_over_generate": res.seconds / gen_s, "bytes_per_event": res.bytes / rows,
        "make_peak_rss_mib": rss / 2**20,
    }


def write_results(rows: list[dict], out: Path, events: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {"events_per_dataset": events, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": _cpus()}
    slowest = min(rows, key=lambda r: r["make_eps"]) if rows else None
    head = headline_row("dataset generators: events/s of making each bundled dataset",
                        f"{events:,} events each, {len(rows)} datasets", "-",
                        f"slowest {slowest['dataset']} at {slowest['make_eps']:,.0f} events/s"
                        if slowest else "no dataset", None)
    (out / "results.json").write_text(json.dumps(
        {"title": f"Dataset generator throughput ({events:,} events each)", **provenance(),
         "meta": meta, "headlines": [head], "rows": rows}, indent=2) + "\n")
    lines = [
        f"# Dataset generator throughput ({events:,} events each)",
        "",
        f"Python {meta['python']}, {meta['cpus']} CPUs. generate: Arrow batches only; make: "
        "streamed Parquet (snappy); wall = elapsed, cpu = this process's CPU time (robust to "
        "other load on the machine); RSS: peak resident set of a fresh process running make.",
        "",
        "| dataset | generate events/s (wall) | generate events/s (cpu) | make events/s (wall) "
        "| make events/s (cpu) | bytes/event (Parquet) | make peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['generate_eps']:,.0f} | {r['generate_cpu_eps']:,.0f} | "
            f"{r['make_eps']:,.0f} | {r['make_cpu_eps']:,.0f} | {r['bytes_per_event']:.1f} | "
            f"{r['make_peak_rss_mib']:.0f} |"
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    _plot(rows, out / "throughput.png", events)


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def _plot(rows: list[dict], path: Path, events: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r["dataset"] for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(x - 0.2, [r["generate_cpu_eps"] for r in rows], 0.4, label="generate (Arrow)")
    ax.bar(x + 0.2, [r["make_cpu_eps"] for r in rows], 0.4, label="make (Parquet)")
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("events per CPU second")
    ax.set_title(f"Dataset generators, {events:,} events each")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = arguments(__doc__.splitlines()[0], "1M events per generator (default)",
                  "10M events per generator")
    p.add_argument("--events", type=int, default=None, help="override the number of events")
    p.add_argument("--only", nargs="*", default=None, help="only these datasets")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory")
    args = p.parse_args(argv)
    events = args.events or (10_000_000 if args.full else 1_000_000)
    names = args.only or [i.name for i in ds.list_datasets() if i.kind == "synthetic"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            r = measure(name, events, Path(tmp))
            rows.append(r)
            print(f"{name:18s} generate {r['generate_eps']:>12,.0f} ev/s "
                  f"({r['generate_cpu_eps']:>12,.0f}/cpu-s)   make {r['make_eps']:>11,.0f} ev/s "
                  f"({r['make_cpu_eps']:>11,.0f}/cpu-s)   {r['bytes_per_event']:6.1f} B/ev   "
                  f"RSS {r['make_peak_rss_mib']:6.0f} MiB", flush=True)
    write_results(rows, args.out, events)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
