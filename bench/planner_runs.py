"""The planner benchmark's measurements (:mod:`replaydb.bench.bench_planner`): the store, the
strategies, a :class:`Runner` that plans and executes each query under every strategy (best of
the repeats, identical executions shared), and the experiments (uniform, skewed, all plans of
one query, Flink).
"""


from __future__ import annotations

import hashlib
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import replaydb
from replaydb.datasets.api import generate
from replaydb.datasets.queries import random_queries
from replaydb.indexes.manage import create_index
from replaydb.planner.query import QueryOptions, execute, plan_query

ATTRS = ("A1", "A2", "A3", "A4", "A5")
SHORT_SECONDS = 0.5
SHORT_REPEAT = 9
STREAM = "synthetic"
STRATEGIES: list[tuple[str, str, dict[str, Any]]] = [
    ("auto", "auto", {}),
    ("all", "all", {}),
    ("greedy", "greedy", {}),
    ("budget", "budget", {}),
    ("optimal", "optimal", {}),
    ("optimal (no CPM)", "optimal", {"cpm": False}),
    ("cpm", "cpm", {}),
]
SKEWED: list[tuple[str, str, dict[str, Any]]] = [
    ("optimal*", "optimal", {}),
    ("optimal", "optimal", {"cpm": False}),
    ("greedy*", "greedy", {}),
    ("greedy", "greedy", {"cpm": False}),
    ("auto", "auto", {}),
]


# --------------------------------------------------------------------------- data
def build_store(path: Path, n: int, seed: int = 1) -> Any:
    """The synthetic-normal stream with an index on A1..A5 (reused when already there)."""
    if (path / "replaydb.json").exists():
        store = replaydb.open(path)
        if store.has_stream(STREAM) and store.stream(STREAM).n_events == n and \
                len(store.stream(STREAM).indexes()) == 5:
            return store
        shutil.rmtree(path)
    store = replaydb.open(path, create=True)
    for b in generate("synthetic-normal", n, seed=seed, batch_size=1 << 18):
        store.append(STREAM, pa.Table.from_batches([b]), time_unit="s")
    for a in ATTRS:
        create_index(store, STREAM, a)
    return store


# --------------------------------------------------------------------------- measuring
def _as_first_execution(plan: Any) -> None:
    """Make the plan's next execution what its first is, outside the timer: planning binds
    the query (its time counts it) and the first execution runs that operator; a repeated
    execution would build the operator again from the plan's spec, a cost a query pays
    once."""
    if plan.operator is None:
        plan.operator = plan.physical.operator.build()


class Runner:
    """Plans and executes queries, timing CPU and wall, sharing identical executions."""

    def __init__(self, store: Any, repeat: int) -> None:
        self.store = store
        self.repeat = repeat
        self.mismatches: list[str] = []

    def _best_each(self, fns: dict[Any, Any], before: dict[Any, Any] | None = None
                   ) -> dict[Any, tuple[Any, float, float]]:
        """``key -> (result, cpu, wall)`` of the fastest (CPU) call of each function, called
        round-robin: one call of every function still short of its runs per round. Each gets
        ``repeat`` calls, and more (up to ``SHORT_REPEAT``) while its own calls add up to less
        than ``SHORT_SECONDS``: the best of two is noisy for a 20 ms plan, and one pass can run
        several times slower than the next ones. Interleaving lands a slow spell of the
        machine on all the functions instead of on the one called back to back at the time;
        the plans of one query compared for "within 1.2x of the best" often replay nearly the
        same events. ``before[k]()``, when given, runs before each call of ``fns[k]``,
        outside the timer."""
        best: dict[Any, tuple[Any, float, float]] = {}
        runs = dict.fromkeys(fns, 0)
        spent = dict.fromkeys(fns, 0.0)

        def wants(k: Any) -> bool:
            return runs[k] < self.repeat or (spent[k] < SHORT_SECONDS
                                             and runs[k] < SHORT_REPEAT)

        while any(wants(k) for k in fns):
            for k, fn in fns.items():
                if not wants(k):
                    continue
                if before is not None and k in before:
                    before[k]()
                c0, w0 = time.process_time(), time.perf_counter()
                r = fn()
                c1, w1 = time.process_time(), time.perf_counter()
                spent[k] += w1 - w0
                runs[k] += 1
                if k not in best or c1 - c0 < best[k][1]:
                    best[k] = (r, c1 - c0, w1 - w0)
        return best

    def plan(self, text: str, options: QueryOptions) -> tuple[Any, float, float]:
        """``(plan, cpu, wall)``: planning timed like execution (:meth:`_best_each`)."""
        return self._best_each({None: lambda: plan_query(self.store, text, options)})[None]

    def plan_all(self, text: str, strategies: list[tuple[str, str, dict[str, Any]]]
                 ) -> dict[str, tuple[Any, float, float]]:
        """``label -> (plan, cpu, wall)`` for every strategy, each the fastest (CPU) of its
        plannings, planned round-robin: one planning of every strategy per round, ``repeat``
        rounds, and more (up to ``SHORT_REPEAT``) while the rounds add up to less than
        ``SHORT_SECONDS`` per strategy. Interleaving spreads a slow spell of the machine over
        all strategies instead of handing it to the one being timed then - the strategies of
        one query differ by a few ms of planning, the spells last longer."""
        best: dict[str, tuple[Any, float, float]] = {}
        rounds, spent = 0, 0.0
        while rounds < self.repeat or (rounds < SHORT_REPEAT
                                       and spent < SHORT_SECONDS * len(strategies)):
            for label, plan_name, extra in strategies:
                options = QueryOptions(plan=plan_name, extra={"rivals": False, **extra})
                c0, w0 = time.process_time(), time.perf_counter()
                plan = plan_query(self.store, text, options)
                c1, w1 = time.process_time(), time.perf_counter()
                spent += w1 - w0
                if label not in best or c1 - c0 < best[label][1]:
                    best[label] = (plan, c1 - c0, w1 - w0)
            rounds += 1
        return best

    def query(self, text: str, strategies: list[tuple[str, str, dict[str, Any]]]
              ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        full_plan, pc, pw = self.plan(text, QueryOptions(plan="replay"))
        planned = self.plan_all(text, strategies)
        run_keys = {label: None if _whole_stream(planned[label][0])
                    else tuple(planned[label][0].intervals) for label, _, _ in strategies}
        to_run: dict[Any, Any] = {None: full_plan}
        for label, _, _ in strategies:
            to_run.setdefault(run_keys[label], planned[label][0])
        runs = self._best_each({k: (lambda p=p: execute(p)) for k, p in to_run.items()},
                               {k: (lambda p=p: _as_first_execution(p))
                                for k, p in to_run.items()})
        res, cpu, wall = runs[None]
        want = res.table
        out["replay"] = {"cpu": pc + cpu, "wall": pw + wall, "plan_cpu": pc,
                         "leaves": res.stats["replay"]["leaves"],
                         "events": res.stats["replay"]["events"], "rows": want.num_rows,
                         "intervals": 1}
        for label, plan_name, _ in strategies:
            plan, pc, pw = planned[label]
            key = None if plan.intervals is None else tuple(plan.intervals)
            r, cpu, wall = runs[run_keys[label]]
            if not r.table.equals(want):
                self.mismatches.append(f"{label}: {text}")
            st = plan.pattern_state  # type: ignore[attr-defined]
            sel = st.selections.get(plan_name if plan_name != "auto" else "optimal")
            out[label] = {
                "cpu": pc + cpu, "wall": pw + wall, "plan_cpu": pc,
                "strategy": plan.strategy, "leaves": r.stats["replay"]["leaves"],
                "events": r.stats["replay"]["events"],
                "intervals": 0 if plan.intervals is None and key is not None else (
                    1 if plan.intervals is None else len(plan.intervals)),
                "est_leaves": st.chosen.pio_leaves if st.chosen is not None else None,
                "est_cost": st.chosen.cost if st.chosen is not None else None,
                "est_runs": st.chosen.intervals if st.chosen is not None else None,
                "indexes": len(st.chosen.config) if st.chosen is not None else 0,
                "select_s": sel.seconds if sel is not None else 0.0,
                "examined": sel.examined if sel is not None else 0,
                "index_entries": st.index_reads.get("entries_returned", 0),
                "plan": _plan_id(key),
                "phases": _phases(plan.timings, r.stats["replay"]),
            }
        return out


PLAN_PHASES = {"parse": ("parse",), "bind": ("bind",),
               "cost model": ("rewrite", "cpm", "statistics", "select"),
               "index lookups": ("index_lookups", "semi_join", "sort"),
               "intervals": ("merge",)}
"""The planning phases the time table groups (:func:`_phases`), from a plan's timings:
parsing (and pinning the stream), binding the operator, the cost model (rewrite, coarse
pattern map, index statistics, selection), the index lookups (read, semi-join, sort) and
Algorithm 3.1 with the tight blocks' member tests (``merge``)."""


def _phases(timings: dict[str, float], replay: dict[str, Any]) -> dict[str, float]:
    """Seconds per planning phase (:data:`PLAN_PHASES`, wall clock of the fastest planning)
    and of the execution's reads and operator (wall clock of the fastest execution)."""
    out = {name: sum(float(timings.get(k, 0.0)) for k in keys)
           for name, keys in PLAN_PHASES.items()}
    out["read"] = float(replay.get("read_seconds", 0.0))
    out["operator"] = float(replay.get("operator_seconds", 0.0))
    return out


def _whole_stream(plan: Any) -> bool:
    """Whether the plan replays every event of its one stream (no intervals, or one interval
    from at or before the first event to after the last): it then runs as full replay does,
    and shares its execution."""
    ivs = plan.intervals
    if ivs is None:
        return True
    snaps = plan.ctx.snapshots
    if len(ivs) != 1 or len(snaps) != 1 or snaps[0].tree.n_leaves == 0:
        return False
    lv = snaps[0].tree.leaves
    a, b = ivs[0]
    return ((a is None or a <= int(lv.col("t_min")[0]))
            and (b is None or b > int(lv.col("t_max")[-1])))


def _plan_id(key: tuple | None) -> str:
    """A short, stable name of a plan's replay intervals (equal intervals, equal name)."""
    return hashlib.blake2b(repr(key).encode(), digest_size=8).hexdigest()


def same_plan(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two strategies replayed the same intervals (by plan name when recorded, else by
    intervals, leaves and events replayed); CPU times differ by planning time either way."""
    if "plan" in a and "plan" in b:
        return a["plan"] == b["plan"]
    return all(a[k] == b[k] for k in ("intervals", "leaves", "events"))


def _skew_query(text: str, j: int, attr: str) -> str:
    return re.sub(rf"\bS{j}\.A5\b", f"S{j}.{attr}", text)


# --------------------------------------------------------------------------- experiments
QUERY_SETS = {"tuning": 1000, "held-out": 5000}
"""The uniform query sets and their seed bases (the set of m uses seed base + m). The tuning
seeds are the ones the planner's development was measured on; the held-out seeds were drawn
for none of it, and the benchmark's headline and goals come from them."""


def uniform(runner: Runner, ms: list[int], count: int, query_set: str = "held-out"
            ) -> dict[int, list[dict[str, Any]]]:
    """Every strategy on ``count`` random uniform queries per m of ``query_set``
    (:data:`QUERY_SETS`)."""
    base = QUERY_SETS[query_set]
    out: dict[int, list[dict[str, Any]]] = {}
    for m in ms:
        qs = random_queries(m, count, seed=base + m, attributes=("A5",), stream=STREAM)
        out[m] = []
        for i, q in enumerate(qs):
            t0 = time.perf_counter()
            out[m].append(runner.query(q, STRATEGIES))
            print(f"  uniform ({query_set}) m={m} query {i + 1}/{count} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return out


def skewed(runner: Runner, count: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for a in ATTRS:
        qs = random_queries(8, count, seed=2000 + int(a[1]), attributes=("A5",), stream=STREAM)
        rng = np.random.default_rng(int(a[1]))
        out[a] = []
        for i, q in enumerate(qs):
            q = _skew_query(q, int(rng.integers(1, 9)), a)
            out[a].append(runner.query(q, SKEWED))
            print(f"  skewed {a} query {i + 1}/{count}", flush=True)
    return out


def all_plans(store: Any, m: int, seed: int) -> dict[str, Any]:
    """Every index configuration of one query (Fig. 3.12)."""
    from itertools import combinations

    from replaydb.planner.pattern.calibrate import measure_config

    qs = random_queries(m, 40, seed=seed, attributes=("A5",), stream=STREAM)
    text = qs[0]
    for q in qs:  # a query with matches, so that plans differ in what they replay
        p = plan_query(store, q, QueryOptions(plan="cpm", extra={"lookups": False}))
        if p.pattern_state.chosen is not None and p.pattern_state.scope.span:  # type: ignore
            text = q
            break
    plan = plan_query(store, text, QueryOptions(plan="auto", extra={"lookups": False}))
    st = plan.pattern_state  # type: ignore[attr-defined]
    ids = [c.id for c in st.conds]
    chosen = st.chosen.config if st.chosen is not None else frozenset()
    rows = []
    for k in range(len(ids) + 1):
        for cfg in combinations(ids, k):
            config = frozenset(cfg)
            est = st.model.estimate(config)
            c0 = time.process_time()
            _, counted, _ = measure_config(store, text, config or None, cpm=True, repeat=1)
            cpu = time.process_time() - c0
            rows.append({"k": k, "config": sorted(config), "est_cost": est.cost,
                         "est_leaves": est.pio_leaves, "cpu": cpu,
                         "leaves": counted["pio_bytes"] / st.model.leaf_bytes,
                         "chosen": config == chosen})
    return {"query": text, "plans": rows}


def flink(path: Path, n: int, per_m: int, ms: list[int], repeat: int,
          timeout_s: float) -> dict[str, Any]:
    """Flink SQL MATCH_RECOGNIZE (full replay in Flink) vs replaydb full replay and auto on the
    same events (a synthetic-normal stream of ``n`` events, indexes on A1..A5) and the same
    uniform queries. Wall seconds (Flink runs in its own JVM process)."""
    from replaydb.bench.peers import flink as fl

    store = build_store(path, n, seed=3)
    events = store.stream(STREAM).read(columns=list(ATTRS))
    queries = {}
    for m in ms:
        for i, q in enumerate(random_queries(m, per_m, seed=3000 + m, attributes=("A5",),
                                             stream=STREAM)):
            queries[f"m{m}_q{i + 1}"] = q
    ours: dict[str, dict[str, Any]] = {}
    runner = Runner(store, repeat)
    for name, q in queries.items():
        r = runner.query(q, [("auto", "auto", {})])
        ours[name] = {"replay_wall": r["replay"]["wall"], "auto_wall": r["auto"]["wall"],
                      "replay_cpu": r["replay"]["cpu"], "auto_cpu": r["auto"]["cpu"],
                      "matches": r["replay"]["rows"]}
    try:
        got = fl.run_flink(events, queries, time_unit="s", mode="count",
                           query_timeout_s=timeout_s, timeout_s=timeout_s * (len(queries) + 3))
    except Exception as exc:  # the peer's environment (JVM, .venv-flink) may be missing
        return {"error": f"{type(exc).__name__}: {exc}", "ours": ours, "events": n}
    return {"flink": got, "ours": ours, "events": n, "per_m": per_m, "timeout_s": timeout_s,
            "mismatches": runner.mismatches}
