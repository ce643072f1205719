"""Spark engine: local execution vs the same planned queries on Spark with 1 and 2 executor cores.

Side by side in one run, over one synthetic store (``ev``: one event every 10 ms on average,
``k`` = one of 64 keys, ``x`` and ``y`` uniform on [0, 1), an LSM index on ``x``):

* **pattern** - an interval-parallel MATCH_RECOGNIZE query: ``A`` is rare (``x > 0.9999``,
  found through the index), so the pattern planner replays short intervals (20 s) after each
  ``A``; the Spark engine groups the intervals into balanced tasks (one per executor core);
* **tpstream** - a partitioned TPStream query (``PARTITION BY k``) over the whole stream; the
  Spark engine's partition mode scans (one task per executor core reads the stream and keeps
  the events of its keys, no shuffle);
* **tpstream-shuffle** - the same query forced through partition mode's shuffle (read tasks split
  by key, Spark's shuffle and sort, one task per key group): the trade between the two reads,
  measured (no goal).

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
from replaydb.replay.spark.engine import SCAN_MAX_TASKS, SHUFFLE_PASSES

KEYS = 64
STEP_MS = 10
PATTERN_Q = ("SELECT * FROM ev MATCH_RECOGNIZE (MEASURES A.x AS ax, LAST(B.y) AS by_, "
             "COUNT(*) AS n PATTERN (A B+ C) WITHIN 20000 DEFINE A AS x > 0.9999, "
             "B AS y < 0.9, C AS y >= 0.9)")
TPSTREAM_Q = ("FROM ev PARTITION BY k DEFINE U AS x > 0.6, L AS y < 0.4 "
              "PATTERN U before;meets L WITHIN 3000 RETURN count(L) AS nl, max(U.x) AS mu")
QUERIES = {"pattern": (PATTERN_Q, "interval"), "tpstream": (TPSTREAM_Q, "partition"),
           "tpstream-shuffle": (TPSTREAM_Q, "partition")}
READ = {"tpstream": "scan", "tpstream-shuffle": "shuffle"}
"""Partition mode's read per query (``REPLAYDB_SPARK_PARTITION_READ``)."""
GOALS = ("pattern", "tpstream")


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


def run_spark(store: replaydb.Store, text: str, master: str, read: str | None = None
              ) -> tuple[float, pa.Table, dict]:
    old = os.environ.pop("REPLAYDB_SPARK_PARTITION_READ", None)
    if read:
        os.environ["REPLAYDB_SPARK_PARTITION_READ"] = read
    try:
        t0 = time.perf_counter()
        res = replaydb.query(store, text, engine="spark", master=master)
        return time.perf_counter() - t0, res.table, res.stats
    finally:
        os.environ.pop("REPLAYDB_SPARK_PARTITION_READ", None)
        if old is not None:
            os.environ["REPLAYDB_SPARK_PARTITION_READ"] = old


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


def _count(items: Any) -> Any:
    yield sum(1 for _ in items)


def null_job(tasks: int, repeat: int = 3) -> float:
    """Best wall time of a Spark job that does nothing in ``tasks`` Python tasks (the same
    ``parallelize(range(n), n)`` + ``mapPartitions`` + ``collect`` shape as the engine's
    single-stage jobs): the per-job floor of this machine."""
    from replaydb.spark import get_spark

    sc = get_spark().sparkContext
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        sc.parallelize(range(tasks), tasks).mapPartitions(_count).collect()
        best = min(best, time.perf_counter() - t0)
    return best


def task_costs(stats: dict) -> dict[str, Any]:
    per = stats["spark"].get("per_task", [])
    out: dict[str, Any] = {}
    for stage in sorted({p["stage"] for p in per}):
        ps = [p for p in per if p["stage"] == stage]
        ev = sum(p["events"] for p in ps)
        sec = sum(p["seconds"] for p in ps)
        cpu = sum(p.get("cpu_seconds", 0.0) for p in ps)
        out[stage] = {"tasks": len(ps), "events": ev, "seconds": round(sec, 3),
                      "cpu_seconds": round(cpu, 3),
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
        twin = next((o for o in local_tables if QUERIES[o][0] == text), None)
        if twin is not None:  # the same query: one local measurement
            times[q]["local"], local_tables[q] = times[twin]["local"], local_tables[twin]
            local_stats[q] = local_stats[twin]
            continue
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
        floor[master] = null_job(cores)
        for q, (text, want_mode) in QUERIES.items():
            run_spark(store, text, master, READ.get(q))  # warm-up: Python workers, Numba
            for _ in range(args.repeat):
                s, table, st = run_spark(store, text, master, READ.get(q))
                times[q].setdefault(master, []).append(s)
            assert st["spark"]["mode"] == want_mode, (q, st["spark"]["mode"])
            assert st["spark"].get("partition_read") == READ.get(q), q
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
        label = st2["mode"] + (f" ({st2['partition_read']})" if "partition_read" in st2 else "")
        rows.append([q, label, local_stats[q]["replay"]["events"],
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
                                   c["cpu_seconds"], c["max_task_s"], c["us_per_event"],
                                   round(sec["prepare"], 3), round(sec["spark"], 3),
                                   round(sec["gather"], 3)])
    res.table("Where the time goes (last run): per stage, summed over tasks; driver phases",
              ["query", "master", "stage", "tasks", "events", "task s (sum)",
               "task CPU s (sum)", "slowest task s", "us / event", "prepare s", "Spark job s",
               "gather s"], phase_rows)
    res.table("Spark session start-up (not in the query times) and the per-job floor (an "
              "empty job with the engine's job shape and task count)",
              ["master", "session start s", "empty job s"],
              [[m, round(s, 2), round(floor[m], 2)] for m, s in startup.items()])
    for q in GOALS:
        res.goal(f"{q}: speedup from 1 to 2 executor cores", ">= 1.6x",
                 round(summary[q]["speedup"], 2), summary[q]["speedup"] >= 1.6)
        res.goal(f"{q}: Spark at 1 core vs local execution", "<= 1.5x",
                 round(summary[q]["overhead"], 2), summary[q]["overhead"] <= 1.5)
    res.headline("queries on Spark: speedup from 1 to 2 executor cores", f"{n:,} events",
                 "replaydb local execution",
                 "; ".join(f"{q}: {summary[q]['speedup']:.2f}x, {summary[q]['overhead']:.2f}x "
                           "local's time at 1 core" for q in GOALS) + " (goal >= 1.6x)",
                 all(summary[q]["speedup"] >= 1.6 and summary[q]["overhead"] <= 1.5
                     for q in GOALS))
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
        "tpstream-shuffle is the tpstream query forced through partition mode's shuffle (no "
        "goal): the comparison behind the engine's choice of the scan for a few tasks.",
        "Task CPU seconds exclude waiting for a core: on a busy machine they show the work "
        "itself when wall times do not.",
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
    res.save_plot(fig, "spark_times.png")


def scan_split(spark_stats: dict[str, dict[str, dict]], q: str = "tpstream"
               ) -> tuple[float, float] | None:
    """``(r, o)`` seconds per event of a scan, from task CPU seconds at one and two tasks: every
    scan task reads and hashes all E events (``E * r``) and runs the operator on its share
    (``E * o / S``), so ``T1 = E (r + o)`` and the mean two-task time is ``E (r + o / 2)``."""
    try:
        one = task_costs(spark_stats[q]["local[1]"])["scan"]
        two = task_costs(spark_stats[q]["local[2]"])["scan"]
    except KeyError:
        return None
    e = one["events"]
    t1 = one["cpu_seconds"]
    t2 = two["cpu_seconds"] / max(1, two["tasks"])
    return max(0.0, 2 * t2 - t1) / e, max(0.0, 2 * (t1 - t2)) / e


def design_note(res: Results, summary: dict[str, dict[str, float]],
                spark_stats: dict[str, dict[str, dict]], n: int,
                floor: dict[str, float]) -> None:
    """``design.md``: a 100-node cluster on 100x the data, from the measured per-task costs."""
    cores = 100 * 8
    lines = ["# Spark engine at scale: an estimate from the measured per-task costs", "",
             f"Measured on {n:,} events (this run's ``results.md``); extrapolated, not measured.",
             "", "## Execution shapes", "",
             "- **interval** (pattern query): one task per executor core, each a run of planned "
             "intervals balanced by the tree's event counts; one Spark job (an RDD "
             "``mapPartitions`` over the task ids), results left by the tasks as Arrow IPC "
             "files the driver memory-maps (local masters or a shared ``result_dir``; "
             "otherwise zstd-compressed IPC through Spark).",
             f"- **partition, scan** (TPStream, up to {SCAN_MAX_TASKS} tasks by default): "
             "every task reads the whole "
             "planned replay (the operator's columns only), hashes the key column and keeps the "
             "events of the keys it owns (an owner table balanced on a 64-row-group sample of "
             "the keys); no event crosses the JVM. Each task sorts its results by the "
             "operator's integer sort columns; the driver merges the runs.",
             f"- **partition, shuffle** (more than {SCAN_MAX_TASKS} tasks): read tasks split "
             "balanced time "
             "ranges by key, Spark's shuffle and sort bring each key group's chunks together in "
             "replay order, one task per group runs the operator.",
             "", "## Model", "",
             "A query's time on Spark is ``T = T_fixed + W / S + G``: ``T_fixed`` the per-query "
             "overhead of the driver and Spark's job scheduling (the time of a run at one core "
             "minus its task work and gathering), ``W`` the task work (``E * c`` for ``E`` "
             "replayed events at ``c`` seconds per event), ``S`` the executor cores and ``G`` "
             "the driver's gathering (merging, ordering and copying the results). A scan does "
             "``E * r`` reading in *every* task and ``E * o`` operator work in total: "
             "``T = T_fixed + E * r + E * o / S + G``, cheaper than the shuffle's "
             "``E * c_shuffle / S`` while ``S < (c_shuffle - o) / r``.",
             "", "| query | shape on 800 cores | events E | c (us/event) | T_fixed (s) | G (s) | "
             "100 nodes x 8 cores, 100x E: estimate (s) | one core, 100x E (s) |",
             "|---|---|---|---|---|---|---|---|"]
    shapes = {"pattern": ("pattern", "interval"), "tpstream": ("tpstream-shuffle", "shuffle")}
    for q, (src, shape) in shapes.items():
        if src not in spark_stats or "local[1]" not in spark_stats[src]:
            continue
        st = spark_stats[src]["local[1]"]
        sp = st["spark"]
        costs = task_costs(st)
        events = max(c["events"] for c in costs.values())
        work = sum(v["seconds"] for v in costs.values())
        c = work / max(1, events)
        gather = sp["seconds"]["gather"]
        fixed = max(0.0, summary[src]["spark1"] - work - gather)
        big_e = 100 * events
        est = fixed + big_e * c / cores + gather
        lines.append(f"| {q} | {shape} | {events:,} | {c * 1e6:.2f} | {fixed:.2f} | "
                     f"{gather:.3f} | {est:.1f} | {big_e * c:,.0f} |")
    split = scan_split(spark_stats)
    if split is not None and "tpstream-shuffle" in spark_stats:
        r, o = split
        sh = task_costs(spark_stats["tpstream-shuffle"]["local[1]"])
        ev = max(v["events"] for v in sh.values())
        c_sh = sum(v["cpu_seconds"] for v in sh.values()) / max(1, ev)
        cross = (c_sh - o) / r if r > 0 else float("inf")
        job = spark_stats["tpstream-shuffle"]["local[1]"]["spark"]["seconds"]["spark"]
        c_job = max(0.0, job - floor["local[1]"]) / max(1, ev)
        cross_job = (c_job - o) / r if r > 0 else float("inf")
        lines += [
            "", "## Scan or shuffle (TPStream)", "",
            f"Scan: reading and hashing ``r = {r * 1e6:.2f}`` us per event in every task, the "
            f"operator ``o = {o * 1e6:.2f}`` us per event in total (from the scan's task CPU "
            f"seconds at one and two tasks). Shuffle: ``c_shuffle = {c_sh * 1e6:.2f}`` us per "
            "event of task CPU over both stages (reading, splitting, serializing, decoding, the "
            f"operator), ``{c_job * 1e6:.2f}`` us per event with the JVM's shuffle and sort "
            "(the shuffle's Spark job at one core, less the empty job). A scan does less work "
            "per core than the shuffle while ``S < (c_shuffle - o) / r``: "
            f"{cross:.1f} counting the tasks' CPU only, {cross_job:.1f} counting the whole "
            f"shuffle job. The engine scans up to {SCAN_MAX_TASKS} tasks by default and "
            "shuffles beyond (``SCAN_MAX_TASKS``, derived, not measured: the shuffle's "
            f"{SHUFFLE_PASSES} passes over every event - its write and its read - counted as "
            f"a scan task's read, ``x = {SHUFFLE_PASSES} r``; the engine option "
            "``scan_max_tasks`` sets the crossover measured here instead): with 800 cores and "
            "100x the data a scan would "
            f"read {100 * ev:,} events in every task, so the cluster runs the shuffle.",
        ]
    lines += [
        "", f"An empty Spark job of the engine's shape took {floor['local[1]']:.2f} s (1 core) "
        f"and {floor['local[2]']:.2f} s (2 cores) here: that part of ``T_fixed`` is Spark's own "
        "per-job latency on this machine; the rest is the engine's (planning, sampling the "
        "keys, shipping the plan, starting the operators) and, for the shuffle, Spark's "
        "shuffle and sort between the two stages (JVM time, not in the tasks' seconds).",
        "", "Reading the table:",
        "- At this machine's sizes ``T_fixed`` and ``G`` are a fair share of a query, and two "
        "local cores also run the driver's JVM and Python: the speedup from one to two cores is "
        "bounded by them. With 100x the data on 800 cores each core gets about 1/8 of the "
        "events one core has here, so ``T_fixed`` stays a large share unless each task holds "
        "millions of events: the engine pays off on a cluster when ``E * c`` is many times "
        "``T_fixed * S``.",
        "- Gathering runs on the driver and scales with the number of *results*, not events. "
        "The estimate keeps it at the measured value; a 100x larger result set should be "
        "written by the tasks to the store rather than collected (not done).",
        "- Every task opens the Delta table's Parquet files (shared file system or object "
        "store); on a real cluster the per-task read cost grows with network latency per row "
        "group, which this single-machine measurement does not include. Result files need a "
        "directory the driver and the executors share; without one results travel through "
        "Spark, about 10 ms per MB of compressed results on one core here.",
        "- The shuffle moves every replayed event once (Arrow IPC chunks through Spark's "
        "shuffle): its ``c`` includes serializing, which a cluster pays over the network.",
    ]
    (res.dir / "design.md").write_text("\n".join(lines) + "\n")
    res.notes.append("design.md estimates a 100-node cluster on 100x the data from these "
                     "per-task costs.")


if __name__ == "__main__":
    main()
