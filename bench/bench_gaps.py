"""MATCH_RECOGNIZE blocks and gaps: the vectorized matcher against the automaton.

The planner benchmark's queries have the shape ``PATTERN (S1 S2 T1* S3 ...) WITHIN 300`` with
``T AS TRUE``: fixed blocks of range-conditioned symbols joined by greedy always-true gaps (see
:mod:`replaydb.operators.pattern.gapseq`). This benchmark runs such queries (the planner
benchmark's generator, m = 2, 4 and 8 basic symbols) over the synthetic stream in memory, side
by side in one process:

* the pattern operator as it runs by default (the vectorized blocks-and-gaps matcher);
* the same operator forced onto the general automaton (``vectorized=False``), the matcher every
  other pattern shape runs on.

Both get the same Arrow batches; their result tables must be equal. Reported per query: the
matches, both CPU times (best of the repeats; the automaton runs once when it takes over 2 s)
and their ratio, and a plot of the speedup against the number of matches.

    python -m replaydb.bench.bench_gaps [--quick | --full]

``--quick`` (default): 1M events, 6 queries per m. ``--full``: 10M events, 20 queries per m.
Writes ``results.md``, ``results.json`` and ``gaps.png`` under ``bench/results/gaps/``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyarrow as pa

from replaydb.bench.common import Results, arguments, format_speedups, speedup_stats
from replaydb.bench.planner_runs import QUERY_SETS
from replaydb.datasets.api import generate
from replaydb.datasets.queries import random_queries
from replaydb.planner.lang import match_recognize

BATCH = 65_536
STREAM = "synthetic"


def run(text: str, table: pa.Table, vectorized: bool, repeat: int) -> tuple[float, pa.Table, str]:
    """``(best CPU seconds, results, matcher)`` of the operator over ``table``'s batches."""
    best, out, matcher = float("inf"), None, ""
    for _ in range(repeat):
        op = match_recognize.bind(match_recognize.parse(text), table.schema, "s",
                                  vectorized=vectorized, state_cap=None)
        c0 = time.process_time()
        for b in table.to_batches(max_chunksize=BATCH):
            op.push(b)
        op.flush()
        res = op.results()
        c = time.process_time() - c0
        matcher = op.matcher
        if c < best:
            best, out = c, res
        if c > 2.0:
            break
    assert out is not None
    return best, out, matcher


def geo_mean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> None:
    ap = arguments("MATCH_RECOGNIZE blocks and gaps: vectorized matcher vs automaton")
    ap.add_argument("--events", type=int, default=None, help="stream size (1M / 10M)")
    ap.add_argument("--queries", type=int, default=None, help="queries per m (6 / 20)")
    args = ap.parse_args(argv)
    n = args.events or (10_000_000 if args.full else 1_000_000)
    count = args.queries or (20 if args.full else 6)
    ms = [2, 4, 8]
    res = Results("gaps", "MATCH_RECOGNIZE blocks and gaps: vectorized matcher vs automaton",
                  params={"mode": "full" if args.full else "quick", "events": n,
                          "queries_per_m": count, "m": ms, "window": 300, "batch": BATCH})
    table = pa.Table.from_batches(list(generate("synthetic-normal", n, seed=1,
                                                batch_size=1 << 18)))
    if "seq" not in table.column_names:  # the store numbers events; here the row is the seq
        table = table.add_column(1, "seq", pa.array(np.arange(n, dtype=np.int64)))
    by_set: dict[str, list[list[Any]]] = {}
    equal = True
    for qset, base in QUERY_SETS.items():
        rows = by_set[qset] = []
        for m in ms:
            for i, q in enumerate(random_queries(m, count, seed=base + m, attributes=("A5",),
                                                 stream=STREAM)):
                tv, rv, name_v = run(q, table, True, 3)
                ta, ra, name_a = run(q, table, False, 2)
                same = rv.equals(ra)
                equal &= same
                rows.append([f"m{m}_q{i}", m, rv.num_rows, ta, tv, ta / tv, n / tv, name_v,
                             same])
                print(f"  {qset} m={m} query {i + 1}/{count}: {rv.num_rows} matches, "
                      f"automaton {ta:.2f} s, vectorized {tv:.3f} s", flush=True)
        res.table(f"Full replay of {n:,} events in memory, {qset} queries (CPU seconds, best "
                  "of the repeats)", ["query", "m", "matches", "automaton s", "vectorized s",
                                      "speedup", "vectorized events/s", "matcher",
                                      "equal results"], rows)
    stats = {qset: speedup_stats([r[3] for r in rows], [r[4] for r in rows])
             for qset, rows in by_set.items()}
    res.table("Speedup of the vectorized matcher over the automaton per query set",
              ["queries", "n", "median", "geomean", "p10", "total/total", "mean"],
              [[qset, st["n"], st.get("median"), st.get("geomean"), st.get("p10"),
                st.get("total"), st.get("mean")] for qset, st in stats.items()])
    rows = by_set["held-out"]
    dense = [r[5] for r in rows if r[2] >= 1000]
    res.goal("vectorized results equal the automaton's", "every query of both sets",
             f"{sum(bool(r[-1]) for rs in by_set.values() for r in rs)} of "
             f"{sum(len(rs) for rs in by_set.values())}", equal)
    res.goal("vectorized faster than the automaton on held-out queries with >= 1000 matches",
             "> 1x (geo mean)", geo_mean(dense), bool(dense) and geo_mean(dense) > 1)
    res.headline("MATCH_RECOGNIZE blocks-and-gaps matcher vs the compiled automaton, full "
                 "replay, held-out random queries", f"{n:,} events, {len(rows)} queries",
                 "replaydb's compiled automaton",
                 f"{format_speedups(stats['held-out'])}; equal results on "
                 f"{sum(bool(r[-1]) for r in rows)} of {len(rows)}" if rows else "no query",
                 bool(dense) and geo_mean(dense) > 1 and equal)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for m in ms:
            pts = [(max(r[2], 1), r[5]) for r in rows if r[1] == m]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=f"m = {m}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_xlabel("matches (log; 0 drawn at 1)")
        ax.set_ylabel("automaton time / vectorized time")
        ax.set_title(f"blocks and gaps, {n:,} events")
        ax.legend()
        res.save_plot(fig, "gaps.png")
    except ImportError:  # pragma: no cover - matplotlib is a dependency of the bench extra
        res.notes.append("matplotlib missing: no plot")
    res.notes += [
        "Both matchers get the same Arrow batches of the synthetic-normal stream (one event per "
        "second, window 300 s) and the queries of the planner benchmark's generator (attribute "
        "A5). The automaton runs once when one run takes over 2 s.",
        "Equal results: the two result tables (rows, order, match numbers) are identical.",
    ]
    out = res.write()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
