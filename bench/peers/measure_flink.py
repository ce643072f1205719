"""Measure Flink SQL MATCH_RECOGNIZE (full replay) on the synthetic workload of 3.5.3.

The workload (dissertation 3.5.3): events ``e_i.t = i``; five attributes
``A_j ~ N(i/N, sigma_j^2)`` with sigma = 0, 0.001, 0.01, 0.1, 1, restricted to the unit
interval [0, 1) (values outside are drawn again, as "values outside of the unit interval are
not considered"); random pattern queries of m basic symbols, each a range over one attribute
covering 0-10% of the domain at a random position, with Kleene-star gaps inserted by
recursive random splits (pick x in 1..m-1, gap between S_x and S_x+1, recurse on x+1..m-1),
window 300 time units.

Run::

    python -m replaydb.bench.peers.measure_flink [--quick | --full] [--events N] [--queries Q]

and it writes ``bench/results/flink/peer.md`` and ``peer.json`` (Flink's events/s per query,
start-up costs apart). ``--quick`` (default): 100k events, 4 queries; ``--full``: 1M events,
8 queries; plus (unless ``--no-baseline``) an always-false one-symbol query whose time is
Flink's floor: reading, ordering and feeding every event to the matcher. The side-by-side benchmark with replaydb reuses :func:`synthetic_events` and
:func:`random_pattern_query`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

SIGMAS = (0.0, 0.001, 0.01, 0.1, 1.0)
WINDOW = 300
OUT = Path(__file__).resolve().parents[1] / "results" / "flink"


def synthetic_events(n: int, seed: int = 0, sigmas: tuple[float, ...] = SIGMAS) -> pa.Table:
    """The synthetic stream: ``t = seq = i`` (i = 0..n-1), ``A_j ~ N(i/n, sigma_j^2)`` on [0, 1).

    Vectorized rejection: out-of-range values are redrawn until none is left (for sigma = 1
    about 2.6 draws per value). O(n) per attribute.
    """
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=np.int64)
    mean = i / max(n, 1)
    cols: dict[str, np.ndarray] = {"t": i, "seq": i.copy()}
    for j, sigma in enumerate(sigmas, start=1):
        a = mean + sigma * rng.standard_normal(n)
        bad = np.nonzero((a < 0) | (a >= 1))[0]
        while len(bad):
            a[bad] = mean[bad] + sigma * rng.standard_normal(len(bad))
            bad = bad[(a[bad] < 0) | (a[bad] >= 1)]
        cols[f"A{j}"] = a
    return pa.table(cols)


def gap_positions(m: int, rng: np.random.Generator) -> list[int]:
    """Positions x (gap between S_x and S_x+1, 1-based) of the recursive random split."""
    out, lo = [], 1
    while lo <= m - 1:
        x = int(rng.integers(lo, m))  # x in lo..m-1
        out.append(x)
        lo = x + 1
    return out


def random_pattern_query(m: int, rng: np.random.Generator, *, n_attrs: int = len(SIGMAS),
                         window: int = WINDOW, source: str = "synthetic") -> str:
    """A replaydb MATCH_RECOGNIZE query of the 3.5.3 shape with ``m`` basic symbols."""
    gaps = set(gap_positions(m, rng))
    pattern, defines = [], []
    for s in range(1, m + 1):
        attr = int(rng.integers(1, n_attrs + 1))
        width = float(rng.uniform(0.0, 0.1))
        lo = float(rng.uniform(0.0, 1.0 - width))
        pattern.append(f"S{s}")
        defines.append(f"S{s} AS S{s}.A{attr} BETWEEN {lo:.6f} AND {lo + width:.6f}")
        if s in gaps:
            pattern.append(f"T{s}*")
            defines.append(f"T{s} AS TRUE")
    return (f"SELECT * FROM {source} MATCH_RECOGNIZE (\n"
            f"  ORDER BY t\n"
            f"  MEASURES FIRST(S1.seq) AS first_seq, LAST(S{m}.seq) AS last_seq\n"
            f"  ONE ROW PER MATCH\n"
            f"  AFTER MATCH SKIP TO NEXT ROW\n"
            f"  PATTERN ({' '.join(pattern)})\n"
            f"  WITHIN {window}\n"
            f"  DEFINE {', '.join(defines)}\n)")


def baseline_query(source: str = "synthetic") -> str:
    """One always-false basic symbol: no partial match ever lives, so its time is Flink's cost
    of reading, ordering and feeding every event to the matcher (the floor of any query)."""
    return (f"SELECT * FROM {source} MATCH_RECOGNIZE (\n"
            f"  ORDER BY t\n"
            f"  MEASURES FIRST(S1.seq) AS first_seq\n"
            f"  ONE ROW PER MATCH\n"
            f"  AFTER MATCH SKIP TO NEXT ROW\n"
            f"  PATTERN (S1)\n"
            f"  WITHIN {WINDOW}\n"
            f"  DEFINE S1 AS S1.A1 < 0\n)")


def main(argv: list[str] | None = None) -> int:
    from replaydb.bench.common import arguments, machine
    from replaydb.bench.peers.flink import run_flink

    ap = arguments(__doc__.split("\n")[0], "100k events, 4 queries (default)",
                   "1M events, 8 queries")
    ap.add_argument("--events", type=int)
    ap.add_argument("--queries", type=int)
    ap.add_argument("--ms", default="2,4,8,16", help="numbers of basic symbols, cycled")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--mode", default="count", choices=["count", "blackhole"])
    ap.add_argument("--seed", type=int, default=353)
    ap.add_argument("--no-baseline", action="store_true",
                    help="leave out the always-false one-symbol query (Flink's floor)")
    ap.add_argument("--query-timeout", type=float, default=900.0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report-only", action="store_true",
                    help="re-render peer.md from an existing peer.json")
    args = ap.parse_args(argv)
    if args.report_only:
        report = json.loads((args.out / "peer.json").read_text(encoding="utf-8"))
        (args.out / "peer.md").write_text(_markdown(report), encoding="utf-8")
        return 0
    n = args.events or (1_000_000 if args.full else 100_000)
    nq = args.queries or (8 if args.full else 4)
    ms = [int(x) for x in args.ms.split(",")]
    rng = np.random.default_rng(args.seed)
    queries = {} if args.no_baseline else {"baseline_m1": baseline_query()}
    queries.update({f"q{k + 1}_m{ms[k % len(ms)]}": random_pattern_query(ms[k % len(ms)], rng)
                    for k in range(nq)})
    t0 = time.perf_counter()
    events = synthetic_events(n, seed=args.seed)
    gen_s = time.perf_counter() - t0
    res = run_flink(events, queries, mode=args.mode, parallelism=args.parallelism,
                    query_timeout_s=args.query_timeout, timeout_s=args.query_timeout * (len(queries) + 2))
    warm = res["startup"].get("trivial_warm_s") or 0.0
    rows = []
    for name, q in res["queries"].items():
        wall = q["wall_s"]
        net = None if wall is None else max(wall - warm, 1e-9)
        rows.append({
            "query": name, "matches": q["matches"], "wall_s": wall,
            "events_per_s": None if wall is None else n / wall,
            "net_s": net, "net_events_per_s": None if net is None else n / net,
            "error": q["error"], "sql": q["sql"], "replaydb_query": queries[name],
        })
    report = {
        "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
        "flink_version": res.get("flink_version"), "events": n, "mode": args.mode,
        "parallelism": args.parallelism, "seed": args.seed, "generate_s": gen_s,
        "query_timeout_s": args.query_timeout,
        "csv_write_s": res["csv_write_s"], "startup": res["startup"],
        "fatal": res.get("fatal"), "queries": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peer.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (args.out / "peer.md").write_text(_markdown(report), encoding="utf-8")
    print(_markdown(report))
    return 0 if not res.get("fatal") else 1


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _markdown(r: dict) -> str:
    st = r["startup"]
    lines = [
        "# Apache Flink SQL MATCH_RECOGNIZE on the synthetic workload of 3.5.3",
        "",
        f"Flink {r['flink_version']} (PyPI apache-flink, local mini-cluster, streaming mode, "
        f"parallelism {r['parallelism']}, mode `{r['mode']}`), {r['events']:,} events "
        f"(t = i, A1..A5 ~ N(i/N, sigma^2) on [0, 1), sigma = 0 .. 1), window 300, "
        f"seed {r['seed']}. Machine: {r['machine']['cpu']}, {r['machine']['cores']} cores, "
        f"{r['machine']['memory_gib']} GiB; measured on {r['date']}.",
        "",
        f"Start-up: JVM + TableEnvironment {_fmt(st.get('gateway_s'), '.1f')} s; trivial "
        f"one-row job {_fmt(st.get('trivial_cold_s'), '.1f')} s cold (first job), "
        f"{_fmt(st.get('trivial_warm_s'), '.1f')} s warm (the fixed cost of every further "
        f"job, subtracted in the `net` columns). Writing the CSV took "
        f"{r['csv_write_s']:.1f} s (not counted).",
        "",
        "| query | matches | wall s | events/s | net s | net events/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for q in r["queries"]:
        if q["error"] and q["error"].startswith("timed out"):
            lim = r["query_timeout_s"]
            lines.append(f"| {q['query']} | not finished | > {lim:.0f} | < {r['events'] / lim:,.0f} "
                         f"| > {lim - (st.get('trivial_warm_s') or 0):.0f} | |")
            continue
        if q["error"]:
            lines.append(f"| {q['query']} | error: {q['error'][:120]} | | | | |")
            continue
        lines.append(f"| {q['query']} | {_fmt(q['matches'], ',')} | {_fmt(q['wall_s'], '.1f')} | "
                     f"{_fmt(q['events_per_s'], ',.0f')} | {_fmt(q['net_s'], '.1f')} | "
                     f"{_fmt(q['net_events_per_s'], ',.0f')} |")
    random_qs = [q for q in r["queries"] if not q["query"].startswith("baseline")]
    ok = [q for q in random_qs if not q["error"]]
    slow = len(random_qs) - len(ok)
    if slow:
        lines += ["", f"{slow} quer{'y' if slow == 1 else 'ies'} did not finish within "
                  f"{r['query_timeout_s']:.0f} s (the job was cancelled) or failed."]
    if ok:
        total = sum(q["wall_s"] for q in ok)
        net = sum(q["net_s"] for q in ok)
        lines += ["", f"Finished random queries overall: {len(ok) * r['events'] / total:,.0f} events/s with the per-job "
                  f"start-up, {len(ok) * r['events'] / net:,.0f} events/s without it."]
    if r.get("fatal"):
        lines += ["", f"The run stopped early: {r['fatal'][:500]}"]
    for note in r.get("notes", []):
        lines += ["", note]
    lines += ["", "The queries (replaydb dialect) and their Flink SQL are in `peer.json`.", ""]
    lines += SEMANTICS.splitlines() + [""]
    return "\n".join(lines)


SEMANTICS = """## How the Flink runs are set up, and what they compute

* Source: the events as one headerless CSV file, a filesystem table with
  `rowtime AS TO_TIMESTAMP_LTZ(t - t_min, 3)` and
  `WATERMARK FOR rowtime AS rowtime - INTERVAL '0.001' SECOND`: one stream time unit is one
  Flink millisecond. Flink's SQL watermark is the expression itself, and the CEP operator drops
  rows whose timestamp is not above the current watermark, so a zero-delay watermark silently
  loses the second row of a timestamp tie; one unit of delay keeps them (found by the
  brute-force comparison in the tests).
* Order: `ORDER BY rowtime, seq`, replaydb's `(t, seq)` total order.
* WITHIN: Flink prunes a partial match when `row.ts - first.ts >= interval` (strict), replaydb
  keeps `last.t - first.t <= w`; `WITHIN w` is therefore sent to Flink as `w + 1` units
  (`WITHIN 300` -> `INTERVAL '0.301' SECOND`), and matches spanning exactly `w` are found by
  both (tested at the boundary).
* Gaps: Flink's greedy quantifiers do not backtrack (a greedy loop lets the next variable take
  only rows the loop's condition rejects), so `S1 T* S2` with `T AS TRUE` finds nothing in
  Flink. Greedy loops over always-true variables are sent as reluctant (`T*?`): with
  `ONE ROW PER MATCH` and `AFTER MATCH SKIP TO NEXT ROW` the match starts and the match count
  are replaydb's; the reported last row is the earliest possible one.
* Timing: each query is its own Flink job, timed from submission (SQL planning included) until
  the job has finished; `count` mode wraps the query in `SELECT COUNT(*)` with mini-batch
  aggregation and collects the final count. Writing the CSV is not counted. Flink runs the
  match operator of an unpartitioned query with parallelism 1."""


if __name__ == "__main__":
    raise SystemExit(main())
