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
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


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

    @property
    def dir(self) -> Path:
        d = RESULTS / self.name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.tables.append({"title": title, "columns": columns, "rows": rows})

    def goal(self, what: str, target: str, measured: Any, met: bool | None) -> None:
        """One goal row; ``met=None``: not assessed (the run left out what the goal is
        about, e.g. a partial run)."""
        self.goals.append({"goal": what, "target": target, "measured": measured,
                           "met": None if met is None else bool(met)})

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

    def write(self) -> Path:
        data = {
            "benchmark": self.name,
            "title": self.title,
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "params": self.params,
            "tables": self.tables,
            "goals": self.goals,
            "plots": self.plots,
            "notes": self.notes,
        }
        (self.dir / "results.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
        (self.dir / "results.md").write_text(to_markdown(data))
        return self.dir


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
             f"Python {m['python']}.", ""]
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
            lines.append("| " + " | ".join(_fmt(v) for v in r) + " |")
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
