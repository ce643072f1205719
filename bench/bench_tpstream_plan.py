"""TPStream planner benchmark: pruned replay vs full replay on a large synthetic stream.

A 1 Hz stream with numeric attributes ``load`` and ``temp``, uniform in [0, 80] except in
rare *episodes* (U[10, 100] s long, like the synthetic situation generator of the TPStream
experiments) where ``load`` is in [96, 100] (resp. ``temp`` in [91, 100]), and integer state
codes ``state`` and ``alarm``, uniform in [0, 100000) except in their own episodes where they
are 50000 (resp. 60000). Half of the B episodes start within a minute of an A episode, so the
patterns have matches. All four attributes are indexed. Two queries::

    extremes: FROM s DEFINE A AS load > 95, B AS temp > 90
              PATTERN A overlaps;during;starts;before B WITHIN 5 minutes
              RETURN count(A) AS na, avg(B.temp) AS bt
    codes:    FROM s DEFINE A AS state = 50000, B AS alarm = 60000  (same PATTERN, WITHIN)

The first is what the TAB+-tree's leaf max isolates on its own; in the second every leaf's
[min, max] spans the codes, so only the index prunes. Each runs as full replay
(``--plan replay``), pruned with index and tree (``auto``) and pruned with the tree's min/max
summaries only (``tree``), for several episode rates (the fraction of time a stream spends in
episodes: the situations' selectivity). Reported: CPU and wall time (planning included, best of
a few runs), events, leaves and bytes read, the pruned fraction, and the check that every plan
returns exactly full replay's rows.

Run ``python -m replaydb.bench.bench_tpstream_plan`` (``--quick``, default: 2M events) or
``--full`` (20M events). Results: ``bench/results/tpstream_plan/``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import replaydb
from replaydb.bench.common import Results, arguments, best_wall_and_cpu
from replaydb.indexes.manage import create_index
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.store.schema import Attribute, StreamSchema

SCALES = {"quick": {"events": 2_000_000, "repeat": 3},
          "full": {"events": 20_000_000, "repeat": 3}}
RATES = [0.0002, 0.001, 0.005, 0.02]
QUERIES = {
    "extremes": ("FROM {s} DEFINE A AS load > 95, B AS temp > 90 "
                 "PATTERN A overlaps;during;starts;before B WITHIN 5 minutes "
                 "RETURN count(A) AS na, avg(B.temp) AS bt"),
    "codes": ("FROM {s} DEFINE A AS state = 50000, B AS alarm = 60000 "
              "PATTERN A overlaps;during;starts;before B WITHIN 5 minutes "
              "RETURN count(A) AS na, first(B.alarm) AS fb"),
}
PLANS = [("replay", {}), ("auto", {}), ("tree", {})]


def episodes(rng: np.random.Generator, n: int, rate: float,
             near: np.ndarray | None = None) -> np.ndarray:
    """Mask of events inside episodes covering about ``rate`` of the time (1 Hz stream)."""
    m = max(1, int(rate * n / 55))
    starts = rng.integers(0, n, m)
    if near is not None and near.size:
        half = m // 2
        pick = near[rng.integers(0, near.size, half)]
        starts[:half] = np.clip(pick + rng.integers(-60, 61, half), 0, n - 1)
    lengths = rng.integers(10, 101, m)
    delta = np.zeros(n + 1, np.int64)
    np.add.at(delta, starts, 1)
    np.add.at(delta, np.minimum(starts + lengths, n), -1)
    return np.cumsum(delta[:-1]) > 0


def make_table(n: int, rate: float, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {"t": np.arange(n, dtype=np.int64)}
    # numeric extremes (a leaf's max tells whether an episode is in it) ...
    ea = episodes(rng, n, rate)
    eb = episodes(rng, n, rate, near=np.flatnonzero(ea[1:] & ~ea[:-1]) + 1)
    cols["load"] = rng.uniform(0, 80, n)
    cols["temp"] = rng.uniform(0, 80, n)
    cols["load"][ea] = rng.uniform(96, 100, int(ea.sum()))
    cols["temp"][eb] = rng.uniform(91, 100, int(eb.sum()))
    # ... and state codes in the middle of their range (every leaf's [min, max] spans them:
    # only an index helps)
    ea = episodes(rng, n, rate)
    eb = episodes(rng, n, rate, near=np.flatnonzero(ea[1:] & ~ea[:-1]) + 1)
    cols["state"] = rng.integers(0, 100_000, n)
    cols["alarm"] = rng.integers(0, 100_000, n)
    cols["state"][ea] = 50_000
    cols["alarm"][eb] = 60_000
    return pa.table({k: pa.array(v) for k, v in cols.items()})


def build(root: Path, n: int) -> tuple[Any, dict[float, str]]:
    store = replaydb.open(root, create=not (root / "replaydb.json").exists())
    names = {}
    for i, rate in enumerate(RATES):
        name = f"s{i}"
        names[rate] = name
        if store.has_stream(name) and store.stream(name).n_events == n:
            continue
        if store.has_stream(name):
            store.drop_stream(name)
        store.create_stream(name, StreamSchema(
            (Attribute("load", "float64"), Attribute("temp", "float64"),
             Attribute("state", "int64"), Attribute("alarm", "int64")), time_unit="s"))
        t0 = time.perf_counter()
        store.append(name, make_table(n, rate, seed=i + 1))
        for c in ("load", "temp", "state", "alarm"):
            create_index(store, name, c)
        print(f"  built {name} (rate {rate}): {n:,} events + 4 indexes in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    return store, names


def measure(store: Any, stream: str, repeat: int, query: str) -> dict[str, Any]:
    text = query.format(s=stream)
    out: dict[str, Any] = {}
    want = None
    for name, extra in PLANS:
        def once(name: str = name, extra: dict = extra) -> Any:
            p = plan_query(store, text, QueryOptions(plan=name, extra=dict(extra)))
            return p, execute(p)
        secs, cpu, (p, r) = best_wall_and_cpu(once, repeat)
        rows = r.table.to_pylist()
        if want is None:
            want = rows
        rep = r.stats.get("replay", {})
        n = p.ctx.snapshots[0].n_events
        out[name] = {"seconds": secs, "cpu_seconds": cpu, "plan_seconds": p.timings.get("plan", 0.0),
                     "strategy": p.strategy, "intervals": len(p.intervals or []),
                     "events_read": int(rep.get("events", n)),
                     "leaves_read": int(rep.get("leaves", 0)),
                     "bytes_read": int(rep.get("bytes", 0)),
                     "matches": len(rows), "same_as_replay": rows == want}
    return out


def plot(res: Results, tables: dict[str, list[dict[str, Any]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tables), 2, figsize=(10, 3.8 * len(tables)), squeeze=False)
    for row, (qname, table) in zip(axes, tables.items()):
        ax1, ax2 = row
        rates = [r["rate"] for r in table]
        for name, style in (("replay", "o-"), ("auto", "s-"), ("tree", "^--")):
            ax1.plot(rates, [r[name]["cpu_seconds"] for r in table], style, label=name)
            ax2.plot(rates, [r[name]["events_read"] / r["events"] for r in table], style,
                     label=name)
        for ax in (ax1, ax2):
            ax.set_xscale("log")
            ax.set_xlabel("episode rate (fraction of time a situation holds)")
            ax.grid(True, alpha=0.3)
            ax.legend()
        ax1.set_yscale("log")
        ax1.set_ylabel("CPU s incl. planning")
        ax2.set_ylabel("fraction of events replayed")
        ax1.set_title(f"{qname}: pruned vs full replay")
        ax2.set_title(f"{qname}: events read")
    res.save_plot(fig, "tpstream_plan.png")


def main() -> None:
    p = arguments(__doc__.splitlines()[0])
    p.add_argument("--data", help="directory for the benchmark store (reused when complete)")
    args = p.parse_args()
    scale = "full" if args.full else "quick"
    n, repeat = SCALES[scale]["events"], SCALES[scale]["repeat"]
    root = Path(args.data) if args.data else Path(tempfile.gettempdir()) / \
        f"replaydb-bench-tpstream-plan-{scale}"
    res = Results("tpstream_plan", "TPStream planner: pruned replay vs full replay",
                  params={"scale": scale, "events": n, "rate_hz": 1, "window": "5 minutes",
                          "episodes": "U[10, 100] s", "indexes": "load, temp, state, alarm",
                          **{f"query_{k}": q.format(s="s") for k, q in QUERIES.items()}})
    print(f"building the store in {root} ...", flush=True)
    store, names = build(root, n)
    tables: dict[str, list[dict[str, Any]]] = {}
    all_same, speedups, worst = True, {}, float("inf")
    for qname, query in QUERIES.items():
        table = tables.setdefault(qname, [])
        for rate in RATES:
            m = measure(store, names[rate], repeat, query)
            m["rate"] = rate
            m["events"] = n
            table.append(m)
            print(f"  {qname} rate {rate}: cpu replay {m['replay']['cpu_seconds']:.3f} s, auto "
                  f"{m['auto']['cpu_seconds']:.3f} s ({m['auto']['events_read']:,} events, "
                  f"{m['auto']['strategy']}), tree {m['tree']['cpu_seconds']:.3f} s "
                  f"({m['tree']['strategy']}), matches {m['replay']['matches']}", flush=True)
        rows, wall = [], []
        for m in table:
            r, a, t = m["replay"], m["auto"], m["tree"]
            rows.append([m["rate"], r["matches"], r["cpu_seconds"], a["cpu_seconds"],
                         t["cpu_seconds"], r["cpu_seconds"] / a["cpu_seconds"],
                         r["cpu_seconds"] / t["cpu_seconds"], a["events_read"],
                         t["events_read"], 1 - a["events_read"] / n, a["intervals"],
                         a["strategy"], t["strategy"],
                         a["same_as_replay"] and t["same_as_replay"]])
            wall.append([m["rate"], r["seconds"], a["seconds"], t["seconds"],
                         a["plan_seconds"], r["bytes_read"], a["bytes_read"], t["bytes_read"]])
        res.table(f"{qname}: full replay vs pruned, CPU seconds incl. planning (auto: index + "
                  "tree; tree: min/max summaries only)",
                  ["episode rate", "matches", "replay s", "auto s", "tree s", "speed-up auto",
                   "speed-up tree", "events auto", "events tree", "pruned fraction auto",
                   "intervals auto", "auto plan", "tree plan", "same rows"], rows)
        res.table(f"{qname}: wall seconds (shared machine) and bytes read",
                  ["episode rate", "replay s", "auto s", "tree s", "auto planning s",
                   "bytes replay", "bytes auto", "bytes tree"], wall)
        all_same &= all(r[-1] for r in rows)
        speedups[qname] = rows[0][5]
        worst = min(worst, min(r[5] for r in rows))
    res.goal("pruned plans return exactly full replay's rows", "all queries and rates",
             all_same, all_same)
    for qname, sp in speedups.items():
        res.goal(f"{qname}: CPU speed-up of auto at rate {RATES[0]}", ">= 5x", sp, sp >= 5)
    res.goal("never much slower than full replay (cost-based fallback)", ">= 0.8x", worst,
             worst >= 0.8)
    res.headline("TPStream with index-pruned replay (auto) vs full replay, the rarest "
                 f"situations (rate {RATES[0]})", f"{n:,} events, {len(speedups)} queries",
                 "replaydb full replay", "; ".join(f"{q}: {sp:.1f}x" for q, sp in speedups.items())
                 + f" (CPU; goal >= 5x); slowest of every rate {worst:.2f}x",
                 all(sp >= 5 for sp in speedups.values()) and worst >= 0.8 and all_same)
    res.notes.append("CPU (process) time includes planning (index lookups, tree tests, "
                     "interval algebra); the machine is shared by other work, so wall times are "
                     "noisy - compare the CPU ratios.")
    res.notes.append("extremes: the TAB+-tree's leaf max already isolates the episodes, so "
                     "tree-only pruning is about as good as the index; codes: every leaf's "
                     "[min, max] spans the code, only the index prunes.")
    res.notes.append("At higher episode rates the feasible windows cover most of the stream "
                     "and the planner's cost check (events + 30,000 events per interval vs 0.9 "
                     "of the stream) chooses full replay itself.")
    plot(res, tables)
    out = res.write()
    print(f"results in {out}")


if __name__ == "__main__":
    main()
