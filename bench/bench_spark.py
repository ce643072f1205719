"""Spark engine: local execution vs the same planned queries on Spark with 1 and 2 executor cores.

Side by side in one run, over one synthetic store (``ev``: one event every 10 ms on average,
``k`` = one of 64 keys, ``x`` and ``y`` uniform on [0, 1), an LSM index on ``x``):

* **pattern** - an interval-parallel MATCH_RECOGNIZE query: ``A`` is rare (``x > 0.9999``, found
  through the index), so the pattern planner replays short intervals (20 s) after each ``A``; the Spark
  engine groups the intervals into balanced tasks;
* **tpstream** - a partitioned TPStream query (``PARTITION BY k``) over the whole stream; the
  Spark engine reads in balanced time ranges, splits by key and replays each key group in its own
  task.

Competitors per query: **local** (``engine="local"``, this process, one core), **Spark
local[1]** and **Spark local[2]** (the engine with one and two executor cores: Python workers on
this machine). Each Spark configuration gets a fresh session and one warm-up run (Python workers,
Numba caches); then every competitor runs ``--repeat`` times and the best wall time counts. Every
Spark result is checked against the local one (byte for byte after sorting).

Reported: wall times, the speedup from 1 to 2 executor cores, Spark at 1 core over local (the
engine's overhead), the driver phases (prepare, Spark job, gather) and per-task costs (events
and seconds per task), from which ``design.md`` estimates a 100-node cluster on 100x the data.

Usage: ``python -m replaydb.bench.bench_spark [--quick | --full] [--events N] [--repeat R]
[--data DIR]``. ``--quick`` (default): 1M events; ``--full``: the issue's 10M events.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import replaydb
from replaydb.bench.common import Results, arguments

KEYS = 64
STEP_MS = 10
PATTERN_Q = ("SELECT * FROM ev MATCH_RECOGNIZE (MEASURES A.x AS ax, LAST(B.y) AS by_, "
             "COUNT(*) AS n PATTERN (A B+ C) WITHIN 20000 DEFINE A AS x > 0.9999, "
             "B AS y < 0.9, C AS y >= 0.9)")
TPSTREAM_Q = ("FROM ev PARTITION BY k DEFINE U AS x > 0.6, L AS y < 0.4 "
              "PATTERN U before;meets L WITHIN 3000 RETURN count(L) AS nl, max(U.x) AS mu")
QUERIES = {"pattern": (PATTERN_Q, "interval"), "tpstream": (TPSTREAM_Q, "partition")}


# --------------------------------------------------------------------------- data
def build_store(path: Path, n: int, seed: int = 1) -> replaydb.Store:
    """The synthetic store (appended in chunks of 1M events; index on ``x``)."""
    from replaydb.indexes.manage import create_index
    from replaydb.store.schema import Attribute, StreamSchema

    store = replaydb.open(path, create=True)
    store.create_stream("ev", StreamSchema(
        (Attribute("k", "int64"), Attribute("x", "float64"), Attribute("y", "float64")),
        time_unit="ms"))
    rng = np.random.default_rng(seed)
    t0 = 0
    chunk = 1_000_000
    for a in range(0, n, chunk):
        m = min(chunk, n - a)
        t = t0 + np.cumsum(rng.integers(0, 2 * STEP_MS + 1, m))
        t0 = int(t[-1])
        store.append("ev", pa.table({"t": t, "k": rng.integers(0, KEYS, m),
                                     "x": rng.random(m), "y": rng.random(m)}))
    create_index(store, "ev", "x")
    return store


def open_or_build(data: str | None, n: int) -> tuple[replaydb.Store, Any]:
    if data:
        path = Path(data) / f"spark-bench-{n}"
        if path.exists():
            return replaydb.open(path, read_only=True), None
        build_store(path, n)
        return replaydb.open(path, read_only=True), None
    tmp = tempfile.TemporaryDirectory(prefix="replaydb-spark-bench-")
    build_store(Path(tmp.name) / "s", n)
    return replaydb.open(Path(tmp.name) / "s", read_only=True), tmp


# --------------------------------------------------------------------------- runs
def run_local(store: replaydb.Store, text: str) -> tuple[float, pa.Table, dict]:
    t0 = time.perf_counter()
    res = replaydb.query(store, text)
    return time.perf_counter() - t0, res.table, res.stats


def run_spark(store: replaydb.Store, text: str, master: str) -> tuple[float, pa.Table, dict]:
    t0 = time.perf_counter()
    res = replaydb.query(store, text, engine="spark", master=master)
    return time.perf_counter() - t0, res.table, res.stats


def sort_all(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


def session(master: str) -> float:
    """Start a fresh Spark session for ``master``; returns its start-up seconds."""
    from replaydb.spark import get_spark, stop_spark

    stop_spark()
    t0 = time.perf_counter()
    get_spark(master, app_name="replaydb-bench-spark", quiet=True,
              config={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "4"})
    return time.perf_counter() - t0


def _pass(batches: Any) -> Any:
    yield from batches


def null_job(tasks: int, repeat: int = 3) -> float:
    """Best wall time of a Spark job that does nothing in ``tasks`` Python tasks (the same
    ``spark.range`` + ``mapInArrow`` + ``toArrow`` shape as the engine's jobs): the per-job floor
    of this machine."""
    from replaydb.spark import get_spark

    spark = get_spark()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        spark.range(0, tasks, numPartitions=tasks).mapInArrow(_pass, "id long").toArrow()
        best = min(best, time.perf_counter() - t0)
    return best


def task_costs(stats: dict) -> dict[str, Any]:
    per = stats["spark"].get("per_task", [])
    out: dict[str, Any] = {}
    for stage in sorted({p["stage"] for p in per}):
        ps = [p for p in per if p["stage"] == stage]
        ev = sum(p["events"] for p in ps)
        sec = sum(p["seconds"] for p in ps)
        out[stage] = {"tasks": len(ps), "events": ev, "seconds": round(sec, 3),
                      "max_task_s": round(max(p["seconds"] for p in ps), 3),
                      "us_per_event": round(1e6 * sec / ev, 3) if ev else None}
    return out


def main() -> None:
    p = arguments(__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=None)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--data", default=None, help="keep the generated store under DIR")
    args = p.parse_args()
    n = args.events or (10_000_000 if args.full else 1_000_000)
    os.environ.setdefault("REPLAYDB_SPARK_DRIVER_MEMORY", "2g")
    res = Results("spark", "Spark engine: local vs Spark with 1 and 2 executor cores")
    res.params = {"events": n, "keys": KEYS, "repeat": args.repeat,
                  "mode": "full" if args.full else "quick", "cpu_count": os.cpu_count(),
                  "load_avg_at_start": round(os.getloadavg()[0], 1)}
    t0 = time.perf_counter()
    store, tmp = open_or_build(args.data, n)
    build_s = time.perf_counter() - t0
    print(f"store: {n:,} events in {build_s:.1f} s")

    times: dict[str, dict[str, list[float]]] = {q: {} for q in QUERIES}
    local_tables: dict[str, pa.Table] = {}
    spark_stats: dict[str, dict[str, dict]] = {q: {} for q in QUERIES}
    local_stats: dict[str, dict] = {}
    for q, (text, _) in QUERIES.items():
        run_local(store, text)  # warm-up (JIT)
        for _ in range(args.repeat):
            s, table, st = run_local(store, text)
            times[q].setdefault("local", []).append(s)
        local_tables[q] = table
        local_stats[q] = st
        print(f"{q}: local {min(times[q]['local']):.2f} s, {table.num_rows:,} rows")
    startup: dict[str, float] = {}
    floor: dict[str, float] = {}
    for cores in (1, 2):
        master = f"local[{cores}]"
        startup[master] = session(master)
        floor[master] = null_job(2 * cores)
        for q, (text, want_mode) in QUERIES.items():
            run_spark(store, text, master)  # warm-up: Python workers, Numba
            for _ in range(args.repeat):
                s, table, st = run_spark(store, text, master)
                times[q].setdefault(master, []).append(s)
            assert st["spark"]["mode"] == want_mode, (q, st["spark"]["mode"])
            assert sort_all(table).equals(sort_all(local_tables[q])), f"{q} differs on {master}"
            spark_stats[q][master] = st
            print(f"{q}: {master} {min(times[q][master]):.2f} s ({st['spark']['mode']}, "
                  f"{st['spark']['tasks']} tasks)")
    from replaydb.spark import stop_spark

    stop_spark()

    rows = []
    summary: dict[str, dict[str, float]] = {}
    for q in QUERIES:
        lo = min(times[q]["local"])
        s1 = min(times[q]["local[1]"])
        s2 = min(times[q]["local[2]"])
        st2 = spark_stats[q]["local[2]"]["spark"]
        summary[q] = {"local": lo, "spark1": s1, "spark2": s2, "speedup": s1 / s2,
                      "overhead": s1 / lo}
        rows.append([q, st2["mode"], local_stats[q]["replay"]["events"],
                     local_tables[q].num_rows, lo, s1, s2, s1 / s2, s1 / lo, s2 / lo])
    res.table("Wall time (best of runs, seconds) and ratios",
              ["query", "Spark mode", "events replayed", "rows", "local", "Spark 1 core",
               "Spark 2 cores", "speedup 1->2", "Spark 1 core / local", "Spark 2 cores / local"],
              rows)
    phase_rows = []
    for q in QUERIES:
        for master in ("local[1]", "local[2]"):
            sp = spark_stats[q][master]["spark"]
            sec = sp["seconds"]
            costs = task_costs(spark_stats[q][master])
            for stage, c in costs.items():
                phase_rows.append([q, master, stage, c["tasks"], c["events"], c["seconds"],
                                   c["max_task_s"], c["us_per_event"],
                                   round(sec["prepare"], 3), round(sec["spark"], 3),
                                   round(sec["gather"], 3)])
    res.table("Where the time goes (last run): per stage, summed over tasks; driver phases",
              ["query", "master", "stage", "tasks", "events", "task s (sum)", "slowest task s",
               "us / event", "prepare s", "Spark job s", "gather s"], phase_rows)
    res.table("Spark session start-up (not in the query times) and the per-job floor (an "
              "empty job with the engine's job shape and task count)",
              ["master", "session start s", "empty job s"],
              [[m, round(s, 2), round(floor[m], 2)] for m, s in startup.items()])
    for q in QUERIES:
        res.goal(f"{q}: speedup from 1 to 2 executor cores", ">= 1.6x",
                 round(summary[q]["speedup"], 2), summary[q]["speedup"] >= 1.6)
        res.goal(f"{q}: Spark at 1 core vs local execution", "<= 1.5x",
                 round(summary[q]["overhead"], 2), summary[q]["overhead"] <= 1.5)
    load = round(os.getloadavg()[0], 1)
    res.params["load_avg_at_end"] = load
    res.notes += [
        f"The machine has {os.cpu_count()} cores shared with other work (load average "
        f"{res.params['load_avg_at_start']} at the start, {load} at the end): 'local[2]' gets "
        "two cores only when nothing else runs, and the driver JVM, the Python driver and the "
        "Python workers compete for the same two cores. A speedup from 1 to 2 cores measured "
        "here is a lower bound; re-run on a quiet machine (``--full``) for the issue's goals.",
        "Times are per query after a warm-up run in the same session (Python workers started, "
        "Numba compiled); session start-up is listed separately.",
        "Every Spark result equals the local result (checked after sorting all columns).",
    ]
    plot(res, summary)
    design_note(res, summary, spark_stats, n, floor)
    out = res.write()
    print(f"results in {out}")
    if tmp is not None:
        tmp.cleanup()


def plot(res: Results, summary: dict[str, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    names = list(summary)
    xs = np.arange(len(names))
    w = 0.26
    for i, (key, label) in enumerate([("local", "local (1 core)"),
                                      ("spark1", "Spark local[1]"),
                                      ("spark2", "Spark local[2]")]):
        vals = [summary[q][key] for q in names]
        bars = ax.bar(xs + (i - 1) * w, vals, w, label=label)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(xs, [f"{q}\n1->2 cores: {summary[q]['speedup']:.2f}x" for q in names])
    ax.set_ylabel("wall time (s)")
    ax.set_title(f"Spark engine vs local execution, {res.params['events']:,} events")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(res.plot_path("spark_times.png"), dpi=110)
    plt.close(fig)


def design_note(res: Results, summary: dict[str, dict[str, float]],
                spark_stats: dict[str, dict[str, dict]], n: int,
                floor: dict[str, float]) -> None:
    """``design.md``: a 100-node cluster on 100x the data, from the measured per-task costs."""
    lines = ["# Spark engine at scale: an estimate from the measured per-task costs", "",
             f"Measured on {n:,} events (this run's ``results.md``); extrapolated, not measured.",
             "", "Model: a query's time on Spark is ``T = T_fixed + E * c / S + G``, where",
             "``T_fixed`` is the per-query overhead of the driver and of Spark's job scheduling "
             "(the time of a run minus the work of its slowest task chain), ``E`` the events the "
             "plan replays, ``c`` the measured task cost per event (reading the Delta table's "
             "row groups, replaying, the operator; for partition mode both stages), ``S`` the "
             "executor cores and ``G`` gathering and ordering the results on the driver (here "
             "measured as the engine's gather phase). Tasks stay balanced while there are at "
             "least a few tasks per core: interval mode needs that many planned intervals, "
             "partition mode that many keys (and no key much larger than 1/S of the events).",
             "", "| query | events E | c (us/event) | T_fixed (s) | G (s) | "
             "100 nodes x 8 cores, 100x E: estimate (s) | one core, 100x E (s) |",
             "|---|---|---|---|---|---|---|"]
    for q in summary:
        st = spark_stats[q]["local[1]"]
        sp = st["spark"]
        costs = task_costs(st)
        events = max(c["events"] for c in costs.values())
        c = sum(v["seconds"] for v in costs.values()) / max(1, events)
        run = summary[q]["spark1"]
        work = sum(v["seconds"] for v in costs.values())
        gather = sp["seconds"]["gather"]
        fixed = max(0.0, run - work - gather)
        big_e = 100 * events
        cores = 100 * 8
        est = fixed + big_e * c / cores + gather
        one = big_e * c
        lines.append(f"| {q} | {events:,} | {c * 1e6:.2f} | {fixed:.2f} | {gather:.3f} | "
                     f"{est:.1f} | {one:,.0f} |")
    lines += [
        "", f"An empty Spark job of the same shape took {floor['local[1]']:.2f} s (1 core) and "
        f"{floor['local[2]']:.2f} s (2 cores) here: that part of ``T_fixed`` is Spark's own "
        "per-job latency on this machine. The rest is the engine's: for interval mode "
        "shipping the plan and starting the operators; for partition mode also Spark's shuffle "
        "and sort of the event chunks between the read and the replay stage (JVM time, not in "
        "the tasks' seconds).",
        "", "Reading the table:",
        "- At this machine's sizes ``T_fixed`` (seconds: job scheduling, shipping the plan, "
        "Python worker round trips) is of the order of the work itself, which is why two local "
        "cores cannot show the 1.6x goal here. With 100x the data on 800 cores each core gets "
        "about 1/8 of the events one core has here, so ``T_fixed`` stays the larger share "
        "unless each task holds millions of events: the engine should run on a cluster only "
        "when ``E * c`` is many times ``T_fixed * S``.",
        "- Gathering is done on the driver (ordering tags, renumbering match ids); it scales "
        "with the number of *results*, not events. The estimate keeps it at the measured value "
        "(results grow with data, but a 100x larger result set should be written by the tasks "
        "to the store rather than collected - not done yet).",
        "- The read path opens the Delta table's Parquet files from every task (shared file "
        "system or object store); on a real cluster the per-task read cost grows with network "
        "latency per row group, which this single-machine measurement does not include.",
        "- Partition mode shuffles every replayed event once (Arrow IPC chunks through Spark's "
        "shuffle): its ``c`` includes serializing, which a cluster pays over the network.",
    ]
    (res.dir / "design.md").write_text("\n".join(lines) + "\n")
    res.notes.append("design.md estimates a 100-node cluster on 100x the data from these "
                     "per-task costs.")


if __name__ == "__main__":
    main()
