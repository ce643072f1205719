"""Shared benchmark plumbing: machine description, timing, result files.

Every benchmark writes ``bench/results/<name>/results.json`` (machine, date, parameters, tables,
goals) plus ``results.md`` and its plots; ``replaydb.bench.report`` builds
``bench/results/README.md`` from the JSON files. Benchmarks take ``--quick`` (default; minutes on a
laptop) and ``--full`` (the papers' sizes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REPO = RESULTS.parent.parent
"""The checkout the benchmarks run from (its commit goes into every result file)."""

PEER_PACKAGES = ("numpy", "pyarrow", "numba", "deltalake", "duckdb", "polars", "pyspark",
                 "apache-flink")
"""Distributions whose versions every result file records (the ones installed)."""


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import psutil

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }


def commit() -> dict[str, Any]:
    """The checkout's commit and whether its tracked files other than the results under
    ``bench/results/`` (which benchmark runs rewrite) differ from it (``dirty``); a run outside
    a git checkout records ``"not recorded"``."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                         ":(exclude)bench/results"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "not recorded", "dirty": None}
    return {"commit": sha, "dirty": dirty}


def versions(packages: tuple[str, ...] = PEER_PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` (those not installed are left out)."""
    found = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


PEER_DISTRIBUTIONS = {"DuckDB": "duckdb", "Polars": "polars", "Spark": "pyspark",
                      "Spark SQL": "pyspark", "pyarrow": "pyarrow"}
"""A peer's name in the tables -> the distribution whose version :func:`peer` states."""


def peer(label: str) -> str:
    """``label`` (a key of :data:`PEER_DISTRIBUTIONS`) with its installed version, e.g.
    ``"DuckDB 2.0.1"``."""
    dist = PEER_DISTRIBUTIONS[label]
    return f"{label} {versions((dist,)).get(dist, '(not installed)')}"


PROVENANCE_KEYS = ("date", "commit", "dirty", "machine", "versions")
"""The keys :func:`provenance` writes."""


def provenance() -> dict[str, Any]:
    """What every result file records beside its numbers (:data:`PROVENANCE_KEYS`): the date,
    the commit, the machine and the installed versions (:func:`commit`, :func:`machine`,
    :func:`versions`); for the benchmarks that write their own JSON instead of
    :class:`Results`."""
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            **commit(), "machine": machine(), "versions": versions()}


def headline_row(what: str, size: str, peer: str, figure: str,
                 met: bool | None = None) -> dict[str, Any]:
    """One row of the README's benchmark table (see :meth:`Results.headline`)."""
    return {"what": what, "size": size, "peer": peer, "figure": figure,
            "met": None if met is None else bool(met)}


def speedup_stats(base: list[float], other: list[float]) -> dict[str, float]:
    """Summary of the per-item speedups ``base[i] / other[i]`` (``other`` faster when > 1):
    median, geometric mean, 10th percentile (the slow tail), total time over total time and the
    arithmetic mean, with ``n``. Items where either time is not positive are left out and
    counted in ``left_out``. O(n log n)."""
    pairs = [(b, o) for b, o in zip(base, other, strict=True) if b > 0 and o > 0]
    if not pairs:
        return {"n": 0, "left_out": len(base)}
    r = sorted(b / o for b, o in pairs)
    n = len(r)

    def quantile(q: float) -> float:
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return r[lo] + (r[hi] - r[lo]) * (pos - lo)

    return {"n": n, "left_out": len(base) - n, "median": quantile(0.5),
            "geomean": math.exp(sum(map(math.log, r)) / n), "p10": quantile(0.1),
            "total": sum(b for b, _ in pairs) / sum(o for _, o in pairs), "mean": sum(r) / n}


def format_speedups(s: dict[str, float]) -> str:
    """:func:`speedup_stats` as one phrase: median first, the flattering mean last."""
    if not s.get("n"):
        return "no item measured"
    return (f"median {s['median']:.2f}x, geomean {s['geomean']:.2f}x, p10 {s['p10']:.2f}x, "
            f"total/total {s['total']:.2f}x, mean {s['mean']:.2f}x (n = {s['n']})")


def best_of(fn: Callable[[], Any], repeat: int = 3, min_time: float = 0.0) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs (more runs while the total is under ``min_time``)."""
    best, out, total, runs = float("inf"), None, 0.0, 0
    while runs < repeat or total < min_time:
        t0 = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t0
        best, total, runs = min(best, t), total + t, runs + 1
        if runs >= 1000:
            break
    return best, out


def best_wall_and_cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall and best CPU (process) seconds of ``repeat`` runs of ``fn``, and the last
    result; on a shared machine CPU time is the steadier figure."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, out


MET_WORDS = {True: "yes", False: "no", None: "not assessed"}
"""How a goal row's ``met`` reads in results.md."""


@dataclass
class Results:
    """Collects tables and goals of one benchmark and writes them."""

    name: str
    title: str
    params: dict[str, Any] = field(default_factory=dict)
    tables: list[dict[str, Any]] = field(default_factory=list)
    goals: list[dict[str, Any]] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headlines: list[dict[str, Any]] = field(default_factory=list)
    results_root: Path = RESULTS

    @property
    def dir(self) -> Path:
        d = self.results_root / self.name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.tables.append({"title": title, "columns": columns, "rows": rows})

    def goal(self, what: str, target: str, measured: Any, met: bool | None) -> None:
        """One goal row; ``met=None``: not assessed (the run left out what the goal is
        about, e.g. a partial run)."""
        self.goals.append({"goal": what, "target": target, "measured": measured,
                           "met": None if met is None else bool(met)})

    def headline(self, what: str, size: str, peer: str, figure: str,
                 met: bool | None = None) -> None:
        """One row of the README's benchmark table: ``what`` was measured at ``size`` against
        ``peer`` (``"-"`` for none), the result ``figure`` (the held-out figure where the
        benchmark draws queries), and whether its goal was ``met`` (None: no goal)."""
        self.headlines.append(headline_row(what, size, peer, figure, met))

    def plot_path(self, filename: str) -> Path:
        self.plots.append(filename)
        return self.dir / filename

    def save_plot(self, fig: Any, filename: str) -> None:
        """Lay out the matplotlib figure ``fig``, save it as this benchmark's plot ``filename``
        (110 dpi) and close it."""
        import matplotlib.pyplot as plt

        fig.tight_layout()
        fig.savefig(self.plot_path(filename), dpi=110)
        plt.close(fig)

    def write_and_show(self) -> Path:
        """:meth:`write`, then print the markdown it wrote; returns the folder."""
        out = self.write()
        print((out / "results.md").read_text())
        return out

    def write(self) -> Path:
        data = {
            "benchmark": self.name,
            "title": self.title,
            **provenance(),
            "params": self.params,
            "memory": peak_memory(),
            "tables": self.tables,
            "goals": self.goals,
            "headlines": self.headlines,
            "plots": self.plots,
            "notes": self.notes,
        }
        (self.dir / "results.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
        (self.dir / "results.md").write_text(to_markdown(data))
        return self.dir


def peak_memory() -> dict[str, float]:
    """The peak resident set size of this process so far, GiB (``process``). Child processes
    (a Spark JVM, a Flink peer) are not in it: Linux counts in a child's peak the pages it
    shared with this process when it was forked, so their figure would mislead; benchmarks
    that run such children sample their process tree themselves."""
    return {"process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20), 3)}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def to_markdown(data: dict[str, Any], heading: str = "#") -> str:
    """One benchmark's results as markdown (used for results.md and the report)."""
    m = data["machine"]
    lines = [f"{heading} {data['title']}", "",
             f"Measured {data['date']} on {m['cpu']} ({m['cores']} cores, {m['memory_gib']} GiB), "
             f"Python {m['python']}."]
    if data.get("commit"):
        lines[-1] += f" Commit {data['commit']}" + (" with local changes." if data.get("dirty")
                                                    else ".")
    if data.get("versions"):
        lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in data["versions"].items())
                     + ".")
    mem = data.get("memory")
    if mem:
        lines.append(f"Peak RSS of the benchmark's process: {mem['process']:.2f} GiB.")
    lines.append("")
    if data.get("params"):
        lines.append("Parameters: " + ", ".join(f"{k}={v}" for k, v in data["params"].items()))
        lines.append("")
    if data.get("goals"):
        lines += ["| goal | target | measured | met |", "|---|---|---|---|"]
        for g in data["goals"]:
            lines.append(f"| {g['goal']} | {g['target']} | {_fmt(g['measured'])} | "
                         f"{MET_WORDS[g['met']]} |")
        lines.append("")
    for t in data.get("tables", []):
        lines += [f"**{t['title']}**", "", "| " + " | ".join(t["columns"]) + " |",
                  "|" + "---|" * len(t["columns"])]
        for r in t["rows"]:
            lines.append("| " + " | ".join(_fmt(v).replace("|", "\\|") for v in r) + " |")
        lines.append("")
    for p in data.get("plots", []):
        lines += [f"![{p}]({p})", ""]
    for n in data.get("notes", []):
        lines += [f"- {n}"]
    return "\n".join(lines).rstrip() + "\n"


def arguments(description: str, quick: str = "small sizes (default)",
              full: str = "the papers' sizes") -> argparse.ArgumentParser:
    """A benchmark's argument parser with the exclusive ``--quick`` and ``--full`` flags
    (``quick`` and ``full`` are their help texts)."""
    p = argparse.ArgumentParser(description=description)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help=quick)
    g.add_argument("--full", action="store_true", help=full)
    return p
