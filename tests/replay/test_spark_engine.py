"""The Spark engine on a real Spark session: every mode gives local execution's result.

:func:`replaydb.replay.spark.run_plan` runs on the test suite's local session (``local[2]``,
shared with the other Spark tests; its executors refuse to import the planner,
``tests/spark_guard``): interval-parallel, partition-parallel (scan and shuffle) and one-task
runs of a query of every operator kind, over many random replay intervals and task counts (few
in the fast suite, hundreds of cases in the slow one), compared with local execution
(:func:`tests.spark_cases.check_equal`); the automatic mode choice, what the tasks read, empty
plans, task errors, result files, Spark's hash placement, job names, progress output, the
Python API and the CLI. ``test_spark_cluster.py`` runs queries on a standalone cluster (slow
suite); ``test_spark_logic.py`` tests the engine's pieces that need no Spark.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replaydb
from replaydb.errors import StateCapExceeded, UsageError
from replaydb.operators.traits import Traits
from replaydb.planner.query import QueryOptions, execute, plan_query
from replaydb.replay.spark import run_plan
from replaydb.replay.spark.engine import SCAN_MAX_TASKS
from replaydb.replay.spark.executors import SparkExecutor
from replaydb.replay.spark.keys import bijective_slots, spark_hash_int
from replaydb.replay.spark.progress import Progress
from tests.spark_cases import (
    QUERIES,
    RUNS,
    check_equal,
    local_and_spark,
    make_store,
    random_intervals,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> replaydb.Store:
    return make_store(tmp_path_factory.mktemp("spark-engine") / "s", seed=7)


# --------------------------------------------------------------------------- engine vs local
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_applicable_mode_equals_local(spark: Any, store: replaydb.Store, name: str) -> None:
    text = QUERIES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) % 1000)
    ran = []
    for intervals in (None, random_intervals(rng, 1500, 12)):
        for mode, read in RUNS:
            try:
                local, got, stats = local_and_spark(spark, store, text, intervals, mode,
                                                    read=read)
            except UsageError as exc:
                assert "cannot run" in str(exc)
                continue
            ran.append(mode)
            assert stats["spark"]["mode"] == mode
            check_equal(local, got, stats)
    assert "single" in ran


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), name=st.sampled_from(sorted(QUERIES)),
       n_iv=st.integers(0, 20), tasks=st.integers(1, 5))
def test_random_intervals_and_task_counts(spark: Any, store: replaydb.Store, seed: int,
                                          name: str, n_iv: int, tasks: int) -> None:
    """A few random cases in the fast suite; ``test_random_cases_slow`` runs hundreds."""
    check_random_case(spark, store, QUERIES[name], seed, n_iv, tasks, RUNS[1:])


def check_random_case(spark: Any, store: replaydb.Store, text: str, seed: int, n_iv: int,
                      tasks: int, runs: list) -> None:
    """Query ``text`` over ``n_iv`` random intervals (none: the whole stream; ``seed``) on
    ``tasks`` tasks answers on Spark as locally, in each of ``runs`` (mode, read) that can run
    it."""
    rng = np.random.default_rng(seed)
    intervals = None if n_iv == 0 else random_intervals(rng, 1600, n_iv)
    for mode, read in runs:
        try:
            local, got, stats = local_and_spark(spark, store, text, intervals, mode, tasks,
                                                read=read)
        except UsageError:
            continue
        check_equal(local, got, stats)


def test_auto_mode_choice(spark: Any, store: replaydb.Store) -> None:
    rng = np.random.default_rng(3)
    ivs = random_intervals(rng, 1500, 10)
    _, _, st1 = local_and_spark(spark, store, QUERIES["mr_part_one"], ivs, "auto")
    assert st1["spark"]["mode"] == "interval"          # several balanced intervals
    _, _, st2 = local_and_spark(spark, store, QUERIES["sase_equiv"], None, "auto")
    assert st2["spark"]["mode"] == "partition"         # one interval, keys
    assert st2["spark"]["exact_order"] is True
    _, _, st3 = local_and_spark(spark, store, QUERIES["mr_plain"], None, "auto")
    assert st3["spark"]["mode"] == "single"            # neither
    _, _, st4 = local_and_spark(spark, store, QUERIES["mr_part_one"], None, "auto")
    assert st4["spark"]["mode"] == "single"            # SQL match_id: no key groups
    assert any("match_id" in n for n in st4["spark"]["notes"])


def test_multi_stream_merge_by_types(spark: Any, store: replaydb.Store) -> None:
    """Event types stored one stream per type merge by (t, stream position, seq) in tasks."""
    local, got, stats = local_and_spark(spark, store, QUERIES["sase_types"], None, "single")
    assert stats["spark"]["mode"] == "single" and local.num_rows > 0
    check_equal(local, got, stats)
    # several streams: match_id of a key group is not placed exactly, so no key groups
    plan = plan_query(store, QUERIES["sase_types"], QueryOptions(plan="replay"))
    assert len(plan.ctx.snapshots) == 3
    with pytest.raises(UsageError, match="merged streams"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="partition",
                 executor=SparkExecutor(spark))


def test_stats_report_what_tasks_read(spark: Any, store: replaydb.Store) -> None:
    ivs = [(100, 300), (500, 900)]
    local_plan = plan_query(store, QUERIES["mr_part_one"], QueryOptions(plan="replay"))
    local_plan.with_intervals(ivs)
    res = execute(local_plan)
    _, _, stats = local_and_spark(spark, store, QUERIES["mr_part_one"], ivs, "interval", tasks=2)
    assert stats["engine"] == "spark"
    assert stats["replay"]["events"] == res.stats["replay"]["events"]
    assert stats["replay"]["row_groups"] == res.stats["replay"]["row_groups"]
    assert stats["operator"]["results_out"] == res.stats["operator"]["results_out"]
    assert stats["spark"]["tasks"] == 2 and len(stats["spark"]["per_task"]) == 2


def test_empty_plan_and_empty_results(spark: Any, store: replaydb.Store) -> None:
    local, got, stats = local_and_spark(spark, store, QUERIES["mr_plain"], [], "auto")
    assert got.num_rows == 0 and got.schema.equals(local.schema)
    q = ("SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k MEASURES A.x AS ax PATTERN (A B) "
         "DEFINE A AS x > 2, B AS x > 2)")
    local, got, stats = local_and_spark(spark, store, q, [(0, 500), (600, 800)], "interval")
    assert got.num_rows == 0 and got.schema.equals(local.schema)


def test_task_errors_come_back_with_their_type(spark: Any, store: replaydb.Store) -> None:
    plan = plan_query(store, QUERIES["sase_equiv"], QueryOptions(plan="replay", state_cap=5))
    ex = SparkExecutor(spark)
    with pytest.raises(StateCapExceeded) as ei:
        run_plan(plan.physical, plan.ctx.snapshots, mode="interval", executor=ex)
    assert ei.value.cap == 5 and ei.value.cap_name == "state_cap"
    for read in ("scan", "shuffle"):
        with pytest.raises(StateCapExceeded):
            run_plan(plan.physical, plan.ctx.snapshots, mode="partition", executor=ex,
                     partition_read=read)
    with pytest.raises(StateCapExceeded) as ei:  # through the Python API
        replaydb.query(store, QUERIES["sase_equiv"], engine="spark", plan="replay", state_cap=3)
    assert ei.value.cap == 3


def test_scan_tasks_split_the_events_by_key(spark: Any, store: replaydb.Store) -> None:
    ivs = [(50, 400), (420, 1300)]
    local, got, stats = local_and_spark(spark, store, QUERIES["tps_part"], ivs, "partition",
                                        tasks=3, read="scan")
    check_equal(local, got, stats)
    sp = stats["spark"]
    per = [t for t in sp["per_task"] if t["stage"] == "scan"]
    assert sp["partition_read"] == "scan" and len(per) <= 3
    # every task reads the whole replay; together they push each event exactly once
    plan = plan_query(store, QUERIES["tps_part"], QueryOptions(plan="replay"))
    plan.with_intervals(ivs)
    assert stats["replay"]["events"] == len(per) * execute(plan).stats["replay"]["events"]
    assert sum(t["events"] for t in per) == sum(
        store.stream("ev").read(a, b).num_rows for a, b in ivs)


def test_auto_partition_read_follows_the_crossover(spark: Any, store: replaydb.Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` scans with as many tasks as the derived crossover and shuffles with one more;
    ``scan_max_tasks`` (or its environment variable, which the keyword overrides) moves the
    crossover, and a value that is no count of tasks is refused. Every run equals local
    execution."""
    ivs = [(50, 400), (420, 1300)]

    def read(tasks: int, **options: Any) -> str:
        local, got, stats = local_and_spark(spark, store, QUERIES["tps_part"], ivs,
                                            "partition", tasks=tasks, **options)
        check_equal(local, got, stats)
        return stats["spark"]["partition_read"]

    assert read(SCAN_MAX_TASKS) == "scan"
    assert read(SCAN_MAX_TASKS + 1) == "shuffle"
    assert read(SCAN_MAX_TASKS + 1, scan_max_tasks=SCAN_MAX_TASKS + 1) == "scan"
    monkeypatch.setenv("REPLAYDB_SPARK_SCAN_MAX_TASKS", "0")
    assert read(1) == "shuffle"
    assert read(1, scan_max_tasks=1) == "scan"
    monkeypatch.setenv("REPLAYDB_SPARK_SCAN_MAX_TASKS", "many")
    with pytest.raises(UsageError, match="REPLAYDB_SPARK_SCAN_MAX_TASKS"):
        read(1)


def test_partition_results_do_not_depend_on_the_task_count(spark: Any,
                                                           store: replaydb.Store) -> None:
    """Sorted partition results (TPStream: by its complete integer sort columns, nulls last)
    are one table whatever the task count and read; and equal to the full sort."""
    ivs = [(0, 700), (760, 1500)]
    runs = [local_and_spark(spark, store, QUERIES["tps_part"], ivs, "partition", tasks=n, read=r)
            for n in (1, 2, 5) for r in ("scan", "shuffle")]
    local = runs[0][0]
    for _, got, stats in runs:
        assert stats["spark"]["result_order"] == "sorted"
        assert got.equals(runs[0][1])
    assert runs[0][1].equals(local.sort_by(
        [(c, "ascending") for c in traits_of(store, "tps_part").sort_columns]))


def traits_of(store: replaydb.Store, name: str) -> Traits:
    plan = plan_query(store, QUERIES[name], QueryOptions(plan="replay"))
    return plan.physical.operator.build().traits()


@pytest.mark.parametrize("name, mode", [("tps_part", "partition"), ("sase_equiv", "partition"),
                                        ("mr_part_one", "interval")])
def test_results_through_files_or_through_spark(spark: Any, store: replaydb.Store,
                                                tmp_path: Path, name: str, mode: str) -> None:
    """Result files in a shared directory and results sent through Spark give one table; the
    query's own file directory is removed afterwards."""
    got = {}
    for where in ("none", str(tmp_path / "results")):
        local, got[where], stats = local_and_spark(spark, store, QUERIES[name],
                                                   [(0, 800), (900, 1500)], mode,
                                                   result_dir=where)
        assert stats["spark"]["results_via"] == ("spark" if where == "none" else "files")
        check_equal(local, got[where], stats)
    assert got["none"].equals(got[str(tmp_path / "results")])
    assert list((tmp_path / "results").iterdir()) == []


def test_forced_modes_that_cannot_apply(spark: Any, store: replaydb.Store) -> None:
    ex = SparkExecutor(spark)
    plan = plan_query(store, QUERIES["mr_compound"], QueryOptions(plan="replay"))
    with pytest.raises(UsageError, match="MATCH_NUMBER"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="interval", executor=ex)
    plan = plan_query(store, QUERIES["mr_plain"], QueryOptions(plan="replay"))
    with pytest.raises(UsageError, match="no partition keys"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="partition", executor=ex)
    with pytest.raises(UsageError, match="unknown Spark mode"):
        run_plan(plan.physical, plan.ctx.snapshots, mode="fast", executor=ex)


def test_window_plans_ship_their_own_operator(spark: Any, store: replaydb.Store) -> None:
    """The window planner builds its operator's spec itself (time bounds out of WHERE): tasks
    build that operator from the shipped spec; a variance aggregate keeps its key groups in one
    task."""
    plan = plan_query(store, QUERIES["win_plain"], QueryOptions(plan="auto"))
    assert plan.strategy == "window-replay" and plan.intervals == [(100, 1200)]
    spec = plan.physical.operator
    assert spec.config.where != plan.ctx.bind().config.where  # t bounds became the interval
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.build().config == spec.config
    local, got, stats = local_and_spark(spark, store, QUERIES["win_plain"], None, "auto",
                                        plan="auto")
    assert stats["spark"]["mode"] == "single" and local.num_rows > 0
    check_equal(local, got, stats)
    local, got, stats = local_and_spark(spark, store, QUERIES["win_group"], None, "auto",
                                        plan="auto")
    assert stats["spark"]["mode"] == "partition" and local.num_rows > 0
    check_equal(local, got, stats)
    q = QUERIES["win_group"].replace("MIN(x) AS mn", "STDDEV_POP(x) AS sd")
    plan = plan_query(store, q, QueryOptions(plan="replay"))
    assert "variance" in plan.physical.operator.build().traits().partition_blocker
    local, got, stats = local_and_spark(spark, store, q, None, "auto")
    assert stats["spark"]["mode"] == "single"
    check_equal(local, got, stats)


# --------------------------------------------------------------------------- Spark itself
def test_spark_hash_matches_spark(spark: Any) -> None:
    rows = spark.range(-50, 200).selectExpr("cast(id as int) as v", "hash(cast(id as int)) as h"
                                            ).collect()
    assert all(spark_hash_int(r.v) == r.h for r in rows)
    # slots chosen on the driver land one per partition after repartition(n, slot)
    n = 3
    df = spark.createDataFrame([(s,) for s in bijective_slots(n)], "slot int")
    got = df.repartition(n, "slot").rdd.glom().map(lambda rs: [r.slot for r in rs]).collect()
    assert sorted(len(p) for p in got) == [1, 1, 1]
    assert [p[0] for p in got] == bijective_slots(n)


def test_python_api_and_job_names(spark: Any, store: replaydb.Store) -> None:
    res = replaydb.query(store, QUERIES["sase_equiv"], engine="spark", plan="replay")
    local = replaydb.query(store, QUERIES["sase_equiv"], plan="replay")
    assert res.table.equals(local.table)
    sp = res.stats["spark"]
    assert sp["mode"] == "partition" and sp["exact_order"]
    group = sp["job_group"]
    sc = spark.sparkContext
    assert sc.getLocalProperty("spark.jobGroup.id") == group
    assert "[partition replay by k" in sc.getLocalProperty("spark.job.description")
    assert len(sc.statusTracker().getJobIdsForGroup(group)) >= 1
    stages = {t["stage"] for t in sp["per_task"]}
    assert stages == {"scan"} and sp["partition_read"] == "scan"  # few cores: no shuffle
    # each scan task reads the whole replay and pushes its own keys' events
    assert sum(t["events"] for t in sp["per_task"]) == local.stats["replay"]["events"]
    assert res.stats["replay"]["events"] == sp["tasks"] * local.stats["replay"]["events"]


@pytest.mark.slow
def test_progress_line_only_on_request(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    sc = spark.sparkContext
    sc.setJobGroup("replaydb-progress-test", "progress test")
    for enabled in (False, True):
        p = Progress(sc, "replaydb-progress-test", enabled=enabled, interval=0.05)
        p.start("counting")
        spark.range(0, 1000, numPartitions=2).count()
        p.stop()
    err = capsys.readouterr().err
    assert err.count("spark counting:") >= 1 and err.rstrip().endswith("tasks")
    assert "/" in err.strip().splitlines()[-1]


def test_cli_query_engine_spark(spark: Any, store: replaydb.Store, tmp_path: Path) -> None:
    """``replaydb query --engine spark --master URL`` runs the planned query on Spark (here the
    window planner's own operator, shipped as a recipe, and its key groups as tasks) and writes
    what local execution returns; ``explain --analyze`` reports the Spark run."""
    import json

    import pyarrow.parquet as pq

    from replaydb.cli import main
    from replaydb.planner.query import explain

    text = QUERIES["win_group"]
    master = spark.sparkContext.master
    out = tmp_path / "spark.parquet"
    assert main(["query", str(store.path), text, "--engine", "spark", "--master", master,
                 "--format", "parquet", "--output", str(out)]) == 0
    local = replaydb.query(store, text).table
    got = pq.read_table(out)
    assert local.num_rows > 0
    check_equal(local, got.cast(local.schema), {"spark": {"mode": "partition"}})
    plan = explain(store, text, analyze=True, engine="spark", master=master)
    sp = plan["analyze"]["spark"]
    assert plan["strategy"] == "window-replay"
    assert sp["mode"] == "partition" and sp["executor"] == "spark" and sp["partition_keys"] == ["k"]
    assert json.dumps(sp)  # plain data


# --------------------------------------------------------------------------- slow suite
@pytest.fixture(scope="module")
def slow_stores(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], replaydb.Store]:
    """Four random stores of different sizes and leaf capacities, each made when first used."""
    made: dict[int, replaydb.Store] = {}

    def get(seed: int) -> replaydb.Store:
        if seed not in made:
            made[seed] = make_store(tmp_path_factory.mktemp(f"slow{seed}") / "s",
                                    seed=100 + seed, n=2000 + 1000 * seed, leaf=16 << seed)
        return made[seed]

    return get


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), name=st.sampled_from(sorted(QUERIES)),
       n_iv=st.integers(0, 30), tasks=st.integers(1, 7), store_seed=st.integers(0, 3))
def test_random_cases_slow(spark: Any, slow_stores: Callable[[int], replaydb.Store], seed: int,
                           name: str, n_iv: int, tasks: int, store_seed: int) -> None:
    """Hundreds of random cases, every mode, over four random stores (``make test-all``)."""
    check_random_case(spark, slow_stores(store_seed), QUERIES[name], seed, n_iv, tasks, RUNS)
