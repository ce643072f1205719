"""Run every benchmark, then rebuild ``bench/results/README.md`` (``make bench``).

Usage::

    python -m replaydb.bench.run_all [--quick | --full] [--only NAME ...] [--list]
                                     [--timeout SECONDS] [--bench-dir DIR] [--no-report]

Discovery: every ``bench_*.py`` module of the benchmark folder (named without the ``bench_``
prefix: ``bench_ingest.py`` is ``ingest``), plus the modules listed in :data:`EXTRA_MODULES`
(benchmarks that predate the naming rule). Each runs in its own subprocess, so one benchmark's
crash, memory or Spark session cannot affect the next; a failing benchmark is reported and the
run continues. The exit status is 0 only when every selected benchmark succeeded.

Mode flags: every benchmark takes its own ``--quick``/``--full`` (checked for each existing module);
:data:`MODE_FLAGS` maps a benchmark to other flags where its CLI differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from replaydb.bench.common import arguments

BENCH_DIR = Path(__file__).resolve().parent
PACKAGE = "replaydb.bench"

EXTRA_MODULES: tuple[str, ...] = ("datasets_throughput",)
"""Benchmark modules whose file name does not start with ``bench_``."""

MODE_FLAGS: dict[str, dict[str, list[str]]] = {}
"""Per-benchmark command-line flags for each mode where they differ from ``--quick``/``--full``
(``{"name": {"quick": [...], "full": [...]}}``). Every current benchmark uses the default."""


@dataclass(frozen=True)
class Bench:
    """One discovered benchmark: its short ``name`` and the module file."""

    name: str
    path: Path

    def command(self, mode: str, bench_dir: Path) -> list[str]:
        flags = MODE_FLAGS.get(self.name, {}).get(mode, [f"--{mode}"])
        if bench_dir.resolve() == BENCH_DIR:
            return [sys.executable, "-m", f"{PACKAGE}.{self.path.stem}", *flags]
        return [sys.executable, str(self.path), *flags]


@dataclass
class Outcome:
    bench: Bench
    status: str  # "ok", "failed (exit N)", "timeout", "error: ..."
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def discover(bench_dir: Path = BENCH_DIR) -> list[Bench]:
    """Benchmarks in ``bench_dir``, sorted by name. O(files in the folder)."""
    found = {p.stem[len("bench_"):]: p for p in bench_dir.glob("bench_*.py") if p.is_file()}
    for stem in EXTRA_MODULES:
        p = bench_dir / f"{stem}.py"
        if p.is_file():
            found[stem] = p
    return [Bench(name, found[name]) for name in sorted(found)]


def select(benches: list[Bench], only: list[str] | None) -> list[Bench]:
    """The benchmarks named in ``only`` (short name or module name); all when ``only`` is empty.
    Unknown names raise ``SystemExit`` listing the known ones."""
    if not only:
        return benches
    by_name = {b.name: b for b in benches} | {b.path.stem: b for b in benches}
    unknown = [n for n in only if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; "
                         f"known: {', '.join(b.name for b in benches)}")
    chosen = {by_name[n].name: by_name[n] for n in only}
    return [b for b in benches if b.name in chosen]


def run_one(bench: Bench, mode: str, bench_dir: Path, timeout: float | None) -> Outcome:
    cmd = bench.command(mode, bench_dir)
    print(f"\n=== {bench.name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Outcome(bench, f"timeout after {timeout:g} s", time.perf_counter() - t0)
    except OSError as exc:
        return Outcome(bench, f"error: {exc}", time.perf_counter() - t0)
    status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    return Outcome(bench, status, time.perf_counter() - t0)


def summary(outcomes: list[Outcome], mode: str) -> str:
    width = max([len(o.bench.name) for o in outcomes] + [9])
    lines = [f"benchmarks ({mode}):", f"  {'benchmark':<{width}}  {'seconds':>8}  status"]
    for o in outcomes:
        lines.append(f"  {o.bench.name:<{width}}  {o.seconds:>8.1f}  {o.status}")
    failed = [o.bench.name for o in outcomes if not o.ok]
    lines.append(f"{len(outcomes) - len(failed)} of {len(outcomes)} succeeded"
                 + (f"; failed: {', '.join(failed)}" if failed else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = arguments("Run the benchmarks and rebuild the results README.")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds allowed per benchmark (default: no limit)")
    ap.add_argument("--bench-dir", type=Path, default=BENCH_DIR,
                    help="folder holding the benchmark modules (default: this package)")
    ap.add_argument("--results", type=Path, default=None,
                    help="results folder the report reads (default: bench/results)")
    ap.add_argument("--no-report", action="store_true", help="do not rebuild the README")
    args = ap.parse_args(argv)
    mode = "full" if args.full else "quick"
    benches = discover(args.bench_dir)
    if args.list:
        for b in benches:
            print(f"{b.name:<24} {b.path.name}")
        return 0
    chosen = select(benches, args.only)
    if not chosen:
        print(f"no benchmarks found in {args.bench_dir}", file=sys.stderr)
        return 1
    env_note = os.environ.get("REPLAYDB_SPARK_MASTER")
    if env_note:
        print(f"REPLAYDB_SPARK_MASTER={env_note}")
    outcomes = [run_one(b, mode, args.bench_dir, args.timeout) for b in chosen]
    print("\n" + summary(outcomes, mode), flush=True)
    if not args.no_report:
        from replaydb.bench import report

        report_args = [] if args.results is None else ["--results", str(args.results)]
        try:
            report.main(report_args)
        except Exception as exc:  # the summary above stays valid; say why the README is stale
            print(f"report failed: {exc}", file=sys.stderr)
            return 1
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
