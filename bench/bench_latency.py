"""End-to-end latency as a user sees it: ``replaydb query`` from the shell vs in-process.

Data: ``flights-3m`` (the real dataset, first ``--events`` rows; quick 1M, full 3M) appended to a
store with indexes on ``origin`` and ``delay``, and the same rows as one Parquet file.

For one query per language that runs on this stream (MATCH_RECOGNIZE, SASE+, TPStream, windowed
SQL; GRETA and the imprecise-timestamp language need a type column or bound columns the flights
have not), side by side:

* **shell**: the wall time of ``replaydb query STORE QUERY --format csv`` in a new process each
  time (start-up, imports, opening the store, planning, compiled-code loading, execution,
  printing), best and median of ``--repeat`` runs;
* **in-process**: ``replaydb.query(store, text)`` in this process, its first call (which pays
  for loading the compiled kernels) and the median of the following ``--repeat`` calls;
* **fresh process**: a new Python process timing ``import replaydb`` and its first
  ``replaydb.query`` (interpreter start-up excluded), median of ``--repeat`` runs;
* **DuckDB** where the query has an equivalent: a new Python process running the same
  aggregation as DuckDB SQL over the Parquet file (DuckDB has no MATCH_RECOGNIZE, no SASE+ and no
  Allen-relation patterns).

Usage: ``python -m replaydb.bench.bench_latency [--quick | --full] [--events N] [--repeat R]``.
Writes ``bench/results/latency/``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import replaydb
from replaydb.bench.common import Results, arguments, peer
from replaydb.bench.realdata import load, parquet_of, store_of

STREAM = "flights"
INDEXED = ("origin", "delay")
QUERIES: dict[str, str] = {
    "match_recognize": (
        "SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY date MEASURES A.date AS first, "
        "B.date AS second, B.delay AS second_delay ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST "
        "ROW PATTERN (A X* B) WITHIN 1 HOUR DEFINE A AS A.origin = 'ORD' AND A.delay >= 120, "
        "B AS B.origin = 'ORD' AND B.delay >= 120, X AS TRUE)"),
    "sase": (
        "FROM flights PATTERN SEQ(ANY a, ANY b) WHERE skip_till_next_match(a, b) "
        "{ [origin] AND a.delay >= 240 AND b.delay >= 240 } WITHIN 2 HOURS "
        "RETURN a.t AS a_t, b.t AS b_t, a.destination AS a_to, b.destination AS b_to"),
    "tpstream": (
        "FROM flights PARTITION BY origin DEFINE D AS delay > 90 AT LEAST 20 minutes, "
        "P AS delay <= 0 PATTERN D meets P WITHIN 3 hours "
        "RETURN max(D.delay) AS worst, count(P) AS punctual"),
    "window_sql": (
        "SELECT window_start, window_end, origin, COUNT(*) AS departures, AVG(delay) AS "
        "avg_delay FROM TABLE(TUMBLE(TABLE flights, DESCRIPTOR(date), INTERVAL '1' DAY)) "
        "WHERE origin = 'ORD' GROUP BY window_start, window_end, origin"),
}
DUCKDB_SQL: dict[str, str] = {
    "window_sql": (
        "SELECT date // 86400000 * 86400000 AS window_start, "
        "date // 86400000 * 86400000 + 86400000 AS window_end, origin, COUNT(*) AS departures, "
        "AVG(delay) AS avg_delay FROM read_parquet($path) WHERE origin = 'ORD' "
        "GROUP BY ALL ORDER BY window_start"),
}
"""The queries with a DuckDB equivalent (same rows), over the Parquet file ``$path``."""

FRESH_PROCESS = ("import sys, time; t0 = time.perf_counter(); import replaydb; "
                 "replaydb.query(sys.argv[1], sys.argv[2]); print(time.perf_counter() - t0)")
"""A new process's import and first query, timed inside it."""

DUCKDB_PROCESS = ("import sys, duckdb; "
                  "rows = duckdb.execute(sys.argv[1], {'path': sys.argv[2]}).fetchall(); "
                  "print(len(rows))")


def build(root: Path, n: int) -> tuple[Path, Path, int]:
    """The store (indexes on :data:`INDEXED`) and the Parquet file of the first ``n`` flights;
    returns their paths and the number of events."""
    table = load("flights-3m", n)
    parquet = parquet_of(root, table, "flights.parquet")
    store_of(root, STREAM, table, "date", INDEXED)
    return root / "store", parquet, table.num_rows


def wall(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds of one run of ``cmd`` in a new process, and its standard output; a failure
    raises with its standard error."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed: {proc.stderr.strip()[-500:]}")
    return seconds, proc.stdout


def replaydb_command() -> list[str]:
    """The ``replaydb`` console script beside this interpreter (as a user's shell finds it)."""
    script = Path(sys.executable).with_name("replaydb")
    return [str(script)] if script.exists() else [sys.executable, "-m", "replaydb"]


def measure(name: str, store: Path, parquet: Path, repeat: int) -> dict[str, Any]:
    text = QUERIES[name]
    shell = [wall([*replaydb_command(), "query", str(store), text, "--format", "csv"])[0]
             for _ in range(repeat)]
    opened = replaydb.open(store, read_only=True)
    t0 = time.perf_counter()
    rows = replaydb.query(opened, text).table.num_rows
    first = time.perf_counter() - t0
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        replaydb.query(opened, text)
        warm.append(time.perf_counter() - t0)
    fresh = [float(wall([sys.executable, "-c", FRESH_PROCESS, str(store), text])[1])
             for _ in range(repeat)]
    out: dict[str, Any] = {"language": name, "rows": rows, "shell_best": min(shell),
                           "shell_median": statistics.median(shell), "inproc_first": first,
                           "inproc_median": statistics.median(warm),
                           "fresh_median": statistics.median(fresh)}
    if name in DUCKDB_SQL:
        runs = [wall([sys.executable, "-c", DUCKDB_PROCESS, DUCKDB_SQL[name], str(parquet)])
                for _ in range(repeat)]
        out["duckdb_median"] = statistics.median(s for s, _ in runs)
        out["duckdb_rows"] = int(runs[0][1].strip())
    return out


def report(res: Results, measured: list[dict[str, Any]], n: int) -> None:
    res.table(f"Wall seconds per query, flights-3m ({n:,} events): a new process from the shell "
              "vs in-process, and DuckDB in a new process where an equivalent exists",
              ["language", "rows", "shell best", "shell median", "in-process first call",
               "in-process median", "fresh process: import + first query (median)",
               "DuckDB process median", "DuckDB rows"],
              [[m["language"], m["rows"], m["shell_best"], m["shell_median"], m["inproc_first"],
                m["inproc_median"], m["fresh_median"], m.get("duckdb_median", "-"),
                m.get("duckdb_rows", "-")]
               for m in measured])
    shell_extra = [m["shell_median"] - m["inproc_median"] for m in measured]
    fresh_extra = [m["fresh_median"] - m["inproc_median"] for m in measured]
    res.goal("shell median - in-process median", "<= 0.4 s every language",
             f"{min(shell_extra):.2f}-{max(shell_extra):.2f} s", max(shell_extra) <= 0.4)
    res.goal("fresh process (import + first query) - in-process median",
             "<= 0.3 s every language", f"{min(fresh_extra):.2f}-{max(fresh_extra):.2f} s",
             max(fresh_extra) <= 0.3)
    shell = [m["shell_median"] for m in measured]
    inproc = [m["inproc_median"] for m in measured]
    duck = [m for m in measured if "duckdb_median" in m]
    figure = (f"shell median {min(shell):.2f}-{max(shell):.2f} s over {len(shell)} languages "
              f"(in-process {min(inproc):.3f}-{max(inproc):.3f} s): the shell costs "
              f"+{min(shell_extra):.2f}-{max(shell_extra):.2f} s (goal <= 0.4), a fresh "
              f"process's import and first query +{min(fresh_extra):.2f}-{max(fresh_extra):.2f} s "
              "(goal <= 0.3)")
    figure += "".join(f"; {m['language']}: DuckDB's process {m['duckdb_median']:.2f} s"
                      for m in duck)
    res.headline("a query from the shell: `replaydb query` in a new process, one query per "
                 "language", f"flights-3m, {n:,} events",
                 f"{peer('DuckDB')} in a new Python process",
                 figure, max(shell_extra) <= 0.4 and max(fresh_extra) <= 0.3)
    for m in duck:
        if m["duckdb_rows"] != m["rows"]:
            res.notes.append(f"{m['language']}: DuckDB returned {m['duckdb_rows']} rows, "
                             f"replaydb {m['rows']}")


def main(argv: list[str] | None = None) -> None:
    ap = arguments(__doc__.splitlines()[0], quick="1M flights (default)", full="all 3M flights")
    ap.add_argument("--events", type=int, default=None, help="flights to load")
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement")
    args = ap.parse_args(argv)
    n = args.events or (3_000_000 if args.full else 1_000_000)
    res = Results("latency", "End-to-end query latency: the shell vs in-process",
                  params={"mode": "full" if args.full else "quick", "events": n,
                          "repeat": args.repeat, "indexes": ",".join(INDEXED)})
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as d:
        store, parquet, n = build(Path(d), n)
        res.params["events"] = n
        measured = []
        for name in QUERIES:
            print(f"{name} ...", flush=True)
            measured.append(measure(name, store, parquet, args.repeat))
    report(res, measured, n)
    res.notes.append("Shell times include the interpreter's start-up and imports; DuckDB's "
                     "process imports only duckdb. Each measurement's runs follow each other, "
                     "so the operating system's file cache is warm after the first.")
    res.write_and_show()


if __name__ == "__main__":
    main()
