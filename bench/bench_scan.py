"""Benchmark: full replay at scan speed (issue 51).

A contiguous 3-symbol MATCH_RECOGNIZE pattern replayed in full from a store, against reading
the same columns of the same events from an ordinarily written Parquet file.

Data (each appended to a new store through the Python API, no index; and written once more
with ``pyarrow.parquet.write_table``'s defaults, the "ordinarily written" file):

* ``flights-3m``: the bundled flights (quick: the first 1M; full: all 3M), pattern
  ``(A B C)`` over three flights in a row each delayed at least 120 minutes;
* ``synthetic-normal``: the planner's synthetic stream (quick: 1M events; full: 10M), pattern
  ``(A B C)`` with ``A5`` in a band of about 4% for each symbol.

Both patterns use ``AFTER MATCH SKIP TO NEXT ROW``, so every event that starts three events
in a row satisfying the symbols is one match (what the peers' ``LEAD`` query counts; events
of equal time in the file's order, as the store keeps them).

Measured per dataset, each the best of ``--repeat`` runs (wall and process CPU seconds):

* **replaydb full replay** (``plan="replay"``, planning included): events/s per core is events
  over CPU seconds (the replay reads on one thread while the operator works on another);
* **replaydb read**: the store's read of the columns the pattern uses (``t`` and the DEFINE
  columns; :meth:`~replaydb.store.snapshot.StreamSnapshot.iter_batches`), no operator;
* **pyarrow read**: ``pyarrow.parquet.read_table`` of the same columns from the ordinarily
  written file (the reference of the goal);
* **DuckDB**: the same pattern as a ``LEAD`` query (the count of starting rows) over the
  ordinarily written file, in process, on every core;
* **Polars**: the same with ``shift`` over a lazy scan of the file.

Goals (issue 51): full replay into the pattern operator at least 10M events/s per core on both
datasets; the store's read of the columns at most the time pyarrow takes to read them from the
ordinarily written file (wall; CPU seconds reported as a second row). Peak RSS of the process
is reported beside.

    python -m replaydb.bench.bench_scan          # --quick: 1M events per dataset
    python -m replaydb.bench.bench_scan --full   # flights-3m whole, synthetic 10M

Results: ``bench/results/scan/results.{md,json}`` and ``scan.png``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import replaydb
from replaydb.bench.common import Results, arguments, best_wall_and_cpu, peak_memory
from replaydb.bench.realdata import load
from replaydb.datasets import generate


@dataclass(frozen=True)
class Workload:
    """One dataset: its stream, time column (as the source names it), the columns the pattern
    reads, the pattern's DEFINE condition per symbol (on column ``col``) and its peers' form."""

    name: str
    time_column: str
    time_unit: str
    col: str
    lo: float
    hi: float

    def condition(self, alias: str) -> str:
        return f"{alias}.{self.col} BETWEEN {self.lo} AND {self.hi}"

    def query(self) -> str:
        return ("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS first_t "
                "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B C) DEFINE "
                f"A AS {self.condition('A')}, B AS {self.condition('B')}, "
                f"C AS {self.condition('C')})")

    def duckdb(self, path: Path) -> str:
        c, t = self.col, self.time_column
        inside = [f"{x} BETWEEN {self.lo} AND {self.hi}" for x in (c, "c1", "c2")]
        return (f"SELECT count(*) FROM (SELECT {c}, lead({c}, 1) OVER w AS c1, "
                f"lead({c}, 2) OVER w AS c2 FROM read_parquet('{path}', "
                f"file_row_number = true) WINDOW w AS (ORDER BY {t}, file_row_number)) "
                "WHERE " + " AND ".join(inside))


FLIGHTS = Workload("flights-3m", "date", "ms", "delay", 120, 100000)
SYNTHETIC = Workload("synthetic-normal", "t", "s", "A5", 0.1, 0.2)


def _table(w: Workload, n: int) -> pa.Table:
    if w.name == "flights-3m":
        return load("flights-3m", n)
    return pa.Table.from_batches(list(generate("synthetic-normal", n, batch_size=1 << 18)))


def _store(root: Path, w: Workload, table: pa.Table) -> Any:
    store = replaydb.open(root / "store", create=True)
    step = 1 << 20
    for at in range(0, table.num_rows, step):
        store.append("s", table.slice(at, step), time_column=w.time_column,
                     time_unit=w.time_unit)
    return replaydb.open(root / "store", read_only=True)


def _store_read(store: Any, columns: list[str]) -> Callable[[], int]:
    def run() -> int:  # the store object the replays use, as they use it
        snap = store.stream("s")
        return sum(b.num_rows for b in snap.iter_batches(columns=columns, seq=False))
    return run


def _polars(w: Workload, path: Path) -> Callable[[], int]:
    import polars as pl

    def run() -> int:
        c = pl.col(w.col)
        both = [c.shift(-k).is_between(w.lo, w.hi) for k in (0, 1, 2)]
        q = (pl.scan_parquet(path).select(w.time_column, w.col)
             .sort(w.time_column, maintain_order=True)
             .filter(both[0] & both[1] & both[2]).select(pl.len()))
        return int(q.collect().item())
    return run


def measure(w: Workload, n: int, repeat: int, work: Path) -> dict[str, Any]:
    """Every measurement of one dataset (see the module docstring)."""
    import duckdb

    table = _table(w, n)
    store = _store(work / w.name, w, table)
    plain = work / f"{w.name}.parquet"
    pq.write_table(table, plain)
    n = table.num_rows
    del table
    text = w.query()
    replaydb.query(store, text, plan="replay")  # compiled code and file cache warm
    rep = best_wall_and_cpu(lambda: replaydb.query(store, text, plan="replay"), repeat)
    cols = ["t", w.col]
    got = best_wall_and_cpu(_store_read(store, cols), repeat)
    src_cols = [w.time_column, w.col]
    par = best_wall_and_cpu(lambda: pq.read_table(plain, columns=src_cols).num_rows, repeat)
    con = duckdb.connect()
    duck = best_wall_and_cpu(lambda: con.execute(w.duckdb(plain)).fetchone()[0], repeat)
    pol = best_wall_and_cpu(_polars(w, plain), repeat)
    return {"events": n, "matches": rep[2].table.num_rows, "replay": rep[:2],
            "store_read": got[:2], "store_rows": got[2], "pyarrow_read": par[:2],
            "duckdb": duck[:2], "duckdb_matches": duck[2], "polars": pol[:2],
            "polars_matches": pol[2], "query": text,
            "peak_rss_gib": peak_memory()["process"]}


LABELS = (("replaydb full replay (pattern)", "replay"),
          ("replaydb read of the columns", "store_read"),
          ("pyarrow read of the columns, plain file", "pyarrow_read"),
          ("DuckDB, LEAD query on the plain file", "duckdb"),
          ("Polars, shift on a lazy scan", "polars"))
"""Each measurement's label in the tables and the plot, and its key in :func:`measure`'s
answer."""


def report(res: Results, got: dict[str, dict[str, Any]]) -> None:
    rows = []
    for name, m in got.items():
        n = m["events"]
        for label, key in LABELS:
            wall, cpu = m[key]
            rows.append([name, label, wall, cpu, n / wall, n / cpu])
    res.table("Wall and CPU seconds (best of the repeats), events/s and events/s per core "
              "(events over CPU seconds)",
              ["dataset", "what", "wall s", "CPU s", "events/s", "events/s per core"], rows)
    res.table("Matches (every peer must count replaydb's) and events the store's read returned",
              ["dataset", "events", "replaydb", "DuckDB", "Polars", "store read rows",
               "peak RSS GiB"],
              [[k, m["events"], m["matches"], m["duckdb_matches"], m["polars_matches"],
                m["store_rows"], round(m["peak_rss_gib"], 2)] for k, m in got.items()])
    for name, m in got.items():
        res.notes.append(f"{name} query: {m['query']}")
    per_core = {k: m["events"] / m["replay"][1] for k, m in got.items()}
    res.goal("full replay into the pattern operator, events/s per core (every dataset)",
             ">= 10,000,000", ", ".join(f"{k}: {v:,.0f}" for k, v in per_core.items()),
             all(v >= 10e6 for v in per_core.values()))
    ratio = {k: m["store_read"][0] / m["pyarrow_read"][0] for k, m in got.items()}
    res.goal("store read of the columns / pyarrow read of the plain file (wall, every dataset)",
             "<= 1.0x", ", ".join(f"{k}: {v:.2f}x" for k, v in ratio.items()),
             all(v <= 1.0 for v in ratio.values()))
    by_cpu = {k: m["store_read"][1] / m["pyarrow_read"][1] for k, m in got.items()}
    res.goal("the same, CPU seconds (pyarrow decodes on every core, the store on one)",
             "<= 1.0x", ", ".join(f"{k}: {v:.2f}x" for k, v in by_cpu.items()),
             all(v <= 1.0 for v in by_cpu.values()))
    same = all(m["matches"] == m["duckdb_matches"] == m["polars_matches"]
               and m["store_rows"] == m["events"] for m in got.values())
    res.goal("DuckDB and Polars count replaydb's matches; the store's read returns every "
             "event", "every dataset", same, same)
    sizes = ", ".join(f"{k} {m['events']:,}" for k, m in got.items())
    res.headline("full replay of a contiguous 3-symbol pattern from the store, events/s per "
                 "core; the store's read against pyarrow reading a plain Parquet file",
                 sizes, f"pyarrow {pa.__version__} read_table",
                 "; ".join(f"{k}: {per_core[k] / 1e6:.1f}M events/s per core, read "
                           f"{ratio[k]:.2f}x pyarrow's" for k in got),
                 all(v >= 10e6 for v in per_core.values())
                 and all(v <= 1.0 for v in ratio.values()))


def plot(res: Results, got: dict[str, dict[str, Any]]) -> None:
    """Events per wall second of every measurement, per dataset (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(LABELS)
    x = np.arange(len(got))
    for i, (label, key) in enumerate(LABELS):
        rates = [m["events"] / m[key][0] for m in got.values()]
        ax.bar(x + i * width, rates, width, label=label)
    ax.set_xticks(x + width * (len(LABELS) - 1) / 2,
                  [f"{k} ({m['events']:,} events)" for k, m in got.items()])
    ax.set_yscale("log")
    ax.set_ylabel("events per wall second")
    ax.set_title("Full replay of a 3-symbol pattern and the reads it needs")
    ax.legend(fontsize=8)
    res.save_plot(fig, "scan.png")


def main() -> None:
    args = arguments(__doc__.splitlines()[0], quick="1M events per dataset (default)",
                     full="flights-3m whole, synthetic-normal 10M events")
    args.add_argument("--repeat", type=int, default=5)
    a = args.parse_args()
    sizes = {FLIGHTS: None if a.full else 1_000_000,
             SYNTHETIC: 10_000_000 if a.full else 1_000_000}
    res = Results("scan", "Full replay at scan speed: the store against a plain Parquet file")
    res.params = {"mode": "full" if a.full else "quick", "repeat": a.repeat}
    work = Path(tempfile.mkdtemp(prefix="replaydb-scan-"))
    got = {}
    try:
        for w, n in sizes.items():
            got[w.name] = measure(w, n, a.repeat, work)
            print(f"  {w.name}: {got[w.name]['events']:,} events measured", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(res, got)
    plot(res, got)
    res.write_and_show()


if __name__ == "__main__":
    main()
